"""Schemathesis against the service's own `/openapi.json`: a bounded property-based run.

Schemathesis is not a test dependency (its pins would fight ours); install it for this run:

    .venv/bin/pip install schemathesis
    .venv/bin/python bench/schemathesis_run.py                  # 30 examples per operation
    .venv/bin/python bench/schemathesis_run.py --examples 100 --max-time 300 --verbose

What it does, in one run:

1. prepares a SQLite store in a temporary directory: a workspace `bench`, an application and a
   member token, a run with a parked call, a question and a settled call, and an executor;
2. starts `approvalbot serve` on it in a subprocess;
3. runs `schemathesis run` on `http://…/openapi.json` in three passes — with the
   application's token, with the member's, and (for the two event streams, whose real ids
   would stream forever) with random identifiers only. Path parameters are the real
   workspace, and the real run, task keys and executor for a share of the examples (random
   ones that fit the documented `pattern` otherwise); `?wait=` stays short. Fixed seed,
   `--examples` per operation, `--max-time` per pass, every check schemathesis has but the
   stateful ones (no links are documented);
4. prints each pass's summary as schemathesis wrote it and one line per pass, and exits 1 when
   a pass found failures (2 when schemathesis is missing or the service did not start).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVE = [sys.executable, "-m", "bot.cli", "serve"]
WORKSPACE = "bench"
STREAMS = r"/(events|cable)$"
# Stateful checks need OpenAPI links, which the document does not have.
EXCLUDED_CHECKS = "use_after_free,ensure_resource_availability"
INSTALL = (
    "schemathesis is not installed in this environment. It is not a test dependency of\n"
    "approvalbot; install it for this run with:\n\n"
    "    .venv/bin/pip install schemathesis\n"
)


def schemathesis_command() -> list[str] | None:
    beside = Path(sys.executable).with_name("schemathesis")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("schemathesis")
    return [found] if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# set-up ------------------------------------------------------------------------------------
async def prepare(db_url: str) -> dict[str, str]:
    """The store: tokens and the identifiers worth hitting for real."""
    from bot.clock import SystemClock
    from bot.config import Settings
    from bot.core import Core
    from bot.service import CallSpec, RunSpec
    from store.migrate import upgrade
    from store.sql import SqlStore

    store = SqlStore(db_url)
    try:
        await upgrade(store.engine)
        core = await Core.build(store, Settings(), clock=SystemClock())
        admin, service = core.admin, core.service
        await admin.create_workspace(WORKSPACE)
        agent = await admin.add_application(WORKSPACE, "agent")
        alice = await admin.add_member(WORKSPACE, "alice")
        run = await service.declare_run(agent.principal, WORKSPACE, RunSpec(approval_mode="ask"))
        for key, tool, tool_input in (
            ("k1", "bash", {"command": "make deploy"}),
            ("q", "ask", {"prompt": "Ship it?", "options": ["yes", "no"]}),
            ("done", "bash", {"command": "ls"}),
        ):
            spec = CallSpec(tool_name=tool, tool_input=tool_input, key=key)
            await service.append(agent.principal, WORKSPACE, run.id, spec, via="api")
        await service.approve(alice.principal, WORKSPACE, run.id, "done", via="api")
        executor = await service.register_executor(agent.principal, WORKSPACE, "worker")
        await core.stop()
        return {"agent": agent.token, "alice": alice.token, "run": run.id,
                "executor": executor.id}  # fmt: skip
    finally:
        await store.close()


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float = 30) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError("approvalbot serve exited:\n" + tail)
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status < 500:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def config_file(directory: Path, name: str, ids: dict[str, str] | None) -> Path:
    """A schemathesis.toml: the workspace always, real identifiers for a share of examples."""
    lines = ["[parameters]", f'"path.ws" = "{WORKSPACE}"']
    if ids is not None:
        lines += [
            '"path.run" = { dictionary = "runs", probability = 0.4 }',
            '"path.key" = { dictionary = "keys", probability = 0.4 }',
            '"path.executor" = { dictionary = "executors", probability = 0.4 }',
            '"query.wait" = { dictionary = "waits", probability = 1.0 }',
            '"query.run_id" = { dictionary = "runs", probability = 0.4 }',
            "",
            "[dictionaries.runs]",
            f"values = [{json.dumps(ids['run'])}]",
            "[dictionaries.keys]",
            'values = ["k1", "q", "done"]',
            "[dictionaries.executors]",
            f"values = [{json.dumps(ids['executor'])}]",
            "[dictionaries.waits]",
            "values = [0, 0.05]",
        ]
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def crash_reports(log: str) -> list[str]:
    """The service's `unexpected …` lines (what the API answered 500 for, logged by
    adapters.http.middleware), grouped by where they were raised: a count, the routes, and
    the innermost frames once."""
    lines = log.splitlines()
    groups: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    for index, line in enumerate(lines):
        found = re.search(r"unexpected (\w+) on (\S+) <\w+\s+(\S+)>", line)
        if found is None:
            continue
        frames = []
        for follow in lines[index + 1 : index + 60]:
            if follow and not follow.startswith(" "):
                break
            if follow.strip().startswith("File "):
                frames.append(follow.strip())
        where = (found.group(1), *frames[-3:])
        routes, _ = groups.setdefault(where, ([], frames))
        routes.append(f"{found.group(2)} {found.group(3)}")
    reports = []
    for (kind, *_), (routes, frames) in groups.items():
        listed = ", ".join(sorted(set(routes)))
        report = [f"    {len(routes)} x {kind} on {listed}", *("      " + f for f in frames[-4:])]
        reports.append("\n".join(report))
    return reports


# the passes --------------------------------------------------------------------------------
@dataclass
class Pass:
    name: str
    token: str
    config: Path
    filters: list[str]
    returncode: int = 0
    output: str = ""

    @property
    def summary(self) -> str:
        """schemathesis's closing section (from its `SUMMARY` rule on)."""
        text = re.sub(r"\x1b\[[0-9;]*m", "", self.output)
        start = text.rfind("SUMMARY")
        if start < 0:
            return text[-3000:]
        return text[text.rfind("\n", 0, start) + 1 :]


def run_pass(command: list[str], url: str, step: Pass, args: argparse.Namespace) -> None:
    argv = [
        *command, "--no-color", "--config-file", str(step.config), "run", f"{url}/openapi.json",
        "--header", f"Authorization: Bearer {step.token}",
        "--max-examples", str(args.examples), "--seed", str(args.seed),
        "--max-time", str(args.max_time), "--request-timeout", "10",
        "--phases", "examples,coverage,fuzzing", "--checks", "all",
        "--exclude-checks", EXCLUDED_CHECKS, "--workers", "1", "--no-shrink",
        "--suppress-health-check", "all", "--output-truncate", "true",
        *step.filters,
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tempfile.gettempdir())
    step.returncode, step.output = done.returncode, done.stdout + done.stderr
    if args.verbose:
        print(step.output)
    print(f"-- pass {step.name}: exit {done.returncode} in {time.monotonic() - started:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=30, help="examples per operation")
    parser.add_argument("--max-time", type=int, default=60, help="seconds per pass, at most")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--verbose", action="store_true", help="print schemathesis's output")
    args = parser.parse_args()
    command = schemathesis_command()
    if command is None:
        print(INSTALL, file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="schemathesis-run-") as name:
        directory = Path(name)
        db_url = f"sqlite+aiosqlite:///{directory}/bench.db"
        ids = asyncio.run(prepare(db_url))
        port = free_port()
        env = {"APPROVALBOT_STORE__URL": db_url, "APPROVALBOT_SERVER__PORT": str(port),
               "APPROVALBOT_CONFIG": "", "APPROVALBOT_BOOTSTRAP__ENABLED": "false"}  # fmt: skip
        log_path = directory / "serve.log"
        log_file = log_path.open("wb")  # a pipe nobody reads would stall the service
        server = subprocess.Popen(
            SERVE, env=os.environ | env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log_file,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url + "/readyz", server, log_path)
            real = config_file(directory, "real", ids)
            random_ids = config_file(directory, "random", None)
            passes = [
                Pass("application", ids["agent"], real, ["--exclude-path-regex", STREAMS]),
                Pass("member", ids["alice"], real, ["--exclude-path-regex", STREAMS]),
                Pass("streams", ids["agent"], random_ids, ["--include-path-regex", STREAMS]),
            ]
            for step in passes:
                run_pass(command, url, step, args)
        except RuntimeError as error:
            print(f"schemathesis_run: {error}", file=sys.stderr)
            return 2
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
            log_file.close()
            errors = log_path.read_text(errors="replace")
    print()
    for step in passes:
        print(f"==== {step.name} ({'ok' if step.returncode == 0 else 'FAILURES'}) ====")
        print(step.summary.rstrip())
        print()
    crashes = crash_reports(errors)
    print(f"service log: {len(crashes)} distinct unexpected error(s) (the API's 500s)")
    for report in crashes:
        print(report)
    return 0 if all(step.returncode == 0 for step in passes) and not crashes else 1


if __name__ == "__main__":
    sys.exit(main())
