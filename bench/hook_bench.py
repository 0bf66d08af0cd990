"""The Claude Code hook's own cost: the whole hook process for a granted call vs `python -c pass`.

    .venv/bin/python bench/hook_bench.py [-n 30]

Prepares a SQLite store in a temporary directory (a workspace, an application and a member
token), starts `approvalbot serve` on it, then runs, alternating them so both see the same
machine: `python -c pass`, `python -m bot.cli hook claude-code` fed a `Read` (granted by the
built-in `claude-code` profile, so the answer needs one append), and the `approvalbot` console
script doing the same when it is installed next to the interpreter. Each sample is one process
from spawn to exit, stdin written and stdout read. All calls belong to one Claude session whose
run is declared during the warm-up, as in a session's steady state.

Bytecode: this environment may set PYTHONDONTWRITEBYTECODE; an installed package has its
bytecode compiled, so every measured process runs with PYTHONPYCACHEPREFIX in the temporary
directory (written by the warm-up) — the same for `python -c pass`. Nothing is written into
the working tree.

Target (issue: Claude Code hook): median hook <= 3 x median `python -c pass`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 3.0
HEAVY = ("aiohttp", "sqlalchemy", "sqlmodel", "pydantic", "telegram", "slack_bolt", "slack_sdk")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def prepare(db_url: str) -> dict[str, str]:
    from bot.admin import Admin
    from bot.clock import SystemClock
    from store.migrate import upgrade
    from store.sql import SqlStore

    store = SqlStore(db_url)
    try:
        await upgrade(store.engine)
        admin = Admin(store, SystemClock())
        await admin.create_workspace("bench")
        app = await admin.add_application("bench", "agent")
        person = await admin.add_member("bench", "alice")
        return {"agent": app.token, "alice": person.token}
    finally:
        await store.close()


def wait_ready(url: str, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"approvalbot serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def payload(index: int) -> bytes:
    return json.dumps(
        {
            "session_id": "bench-session-0001",
            "transcript_path": "/tmp/bench-session-0001.jsonl",
            "cwd": str(ROOT),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": str(ROOT / "README.md")},
            "tool_use_id": f"toolu_bench_{index:05d}",
        }
    ).encode()


def timed(command: list[str], env: dict[str, str], data: bytes | None) -> tuple[float, bytes]:
    began = time.perf_counter()
    done = subprocess.run(command, input=data, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed, done.stdout


def check_allow(out: bytes) -> None:
    decision = json.loads(out)["hookSpecificOutput"]["permissionDecision"]
    if decision != "allow":
        raise RuntimeError(f"expected allow, got {out.decode()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=30, help="samples of each (alternated)")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hook-bench-") as directory:
        db_url = f"sqlite+aiosqlite:///{directory}/bench.db"
        tokens = asyncio.run(prepare(db_url))
        port = free_port()
        serve_env = os.environ | {
            "APPROVALBOT_STORE__URL": db_url,
            "APPROVALBOT_SERVER__PORT": str(port),
            "APPROVALBOT_CONFIG": "",
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve"], env=serve_env, cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(f"{url}/readyz", server)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env |= {
                "PYTHONPYCACHEPREFIX": f"{directory}/pycache",
                "APPROVALBOT_URL": url,
                "APPROVALBOT_TOKEN": tokens["agent"],
                "APPROVALBOT_WORKSPACE": "bench",
                "XDG_STATE_HOME": f"{directory}/state",
            }
            commands = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "python -m bot.cli hook claude-code": [
                    sys.executable, "-m", "bot.cli", "hook", "claude-code",
                ],
            }  # fmt: skip
            script = Path(sys.executable).parent / "approvalbot"
            if script.exists():
                commands["approvalbot hook claude-code"] = [str(script), "hook", "claude-code"]
            samples: dict[str, list[float]] = {name: [] for name in commands}
            index = 0
            for round_ in range(args.warmup + args.n):
                for name, command in commands.items():
                    hooked = name != "python -c pass"
                    data = payload(index) if hooked else None
                    index += 1
                    elapsed, out = timed(command, env, data)
                    if hooked:
                        check_allow(out)
                    if round_ >= args.warmup:
                        samples[name].append(elapsed)
            profiled = subprocess.run(
                [*commands["python -m bot.cli hook claude-code"][:1], "-X", "importtime",
                 *commands["python -m bot.cli hook claude-code"][1:]],
                input=payload(index), capture_output=True, env=env, check=True,
            )  # fmt: skip
        finally:
            server.terminate()
            server.wait(timeout=10)

    imported = {
        line.split("|")[-1].strip() for line in profiled.stderr.decode().splitlines() if "|" in line
    }
    heavy = sorted(m for m in imported if m.split(".")[0].lower() in HEAVY)
    base = statistics.median(samples["python -c pass"])
    print(f"hook bench: N={args.n} each, alternated, after {args.warmup} warm-up rounds")
    print(f"{'command':<38} {'median ms':>10} {'p90 ms':>8} {'× pass':>7}")
    worst = 0.0
    for name, values in samples.items():
        median = statistics.median(values)
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        ratio = median / base
        if name != "python -c pass":
            worst = max(worst, ratio)
        print(f"{name:<38} {median * 1000:>10.1f} {p90 * 1000:>8.1f} {ratio:>7.2f}")
    print(f"modules imported by the hook: {len(imported)}; heavy ones: {heavy or 'none'}")
    verdict = "PASS" if worst <= TARGET and not heavy else "FAIL"
    print(f"target: hook median <= {TARGET:g} × python -c pass: {verdict} ({worst:.2f}×)")


if __name__ == "__main__":
    main()
