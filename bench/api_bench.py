"""HTTP API benchmark: the approval stage against a bare aiohttp endpoint, on SQLite.

    .venv/bin/python bench/api_bench.py                 # 5 s per stage
    .venv/bin/python bench/api_bench.py --seconds 10 --clients 50 --json

What it does, in one run:

1. prepares a SQLite store in a temporary directory (schema, a workspace, an application and a
   member token);
2. starts `approvalbot serve` on it in a subprocess, and a bare aiohttp app that only echoes the
   JSON it receives in a second subprocess;
3. from this process (a third one), over loopback, drives each with the same number of
   concurrent clients in a closed loop for the same time, after a warm-up: the echo endpoint
   with the body of a tool call, and the approval stage with granted calls (`POST …/tasks` in a
   run whose rules allow the tool: append → receipt, authenticated, rules evaluated, task and
   events written). It prints requests/s and p50/p99 latency for each, and the ratio. This
   process's garbage collector is paused while it measures (a full collection stopped every
   request in flight for up to 50 ms);
4. measures approve → agent: an agent appends a call that parks and waits on
   `GET …/tasks/{key}?wait=30`; a person approves; the time from sending the approve to the
   agent's waiting request returning (p50/p99), one decision at a time.

Targets (issue 4): approval stage ≥ 40% of the echo endpoint's throughput with p99 ≤ 10 ms;
approve → agent p50 ≤ 10 ms. With a closed loop of N clients, latency ≈ N / throughput (Little's
law), so "p99 ≤ 10 ms at 50 clients" needs more than 5,000 granted calls per second.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import psutil
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVE = [sys.executable, "-m", "bot.cli", "serve"]
CALL = {"tool_name": "read_file", "tool_input": {"path": "src/app/main.py"}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# the bare endpoint -------------------------------------------------------------------------
async def echo(request: web.Request) -> web.Response:
    return web.json_response(await request.json())


def serve_echo(port: int) -> None:
    app = web.Application()
    app.router.add_post("/echo", echo)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


# set-up ------------------------------------------------------------------------------------
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


async def wait_ready(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url) as response:
                    if response.status < 500:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


# load --------------------------------------------------------------------------------------
@dataclass
class Result:
    name: str
    requests: int
    seconds: float
    latencies: list[float]
    errors: int
    server_cpu: float = 0.0  # CPU seconds the serving process used while measured

    @property
    def cpu_us(self) -> float:
        """Server CPU per request: steadier than req/s on a shared machine."""
        return self.server_cpu / self.requests * 1e6 if self.requests else 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0

    def row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rps": round(self.rps),
            "p50_ms": round(self.pct(0.50), 2),
            "p99_ms": round(self.pct(0.99), 2),
            "requests": self.requests,
            "errors": self.errors,
            "server_cpu_us_per_request": round(self.cpu_us, 1),
        }


async def closed_loop(
    name: str,
    session: aiohttp.ClientSession,
    targets: list[tuple[str, dict[str, str]]],
    body: bytes,
    seconds: float,
    warmup: float,
    expect: int,
    server: psutil.Process,
) -> Result:
    """`len(targets)` clients, each posting `body` to its own URL as fast as answers come."""
    latencies: list[float] = []
    errors = 0
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    stop = start + seconds
    cpu: list[float] = []

    async def watch_server() -> None:
        for moment in (start, stop):
            await asyncio.sleep(moment - loop.time())
            times = server.cpu_times()
            cpu.append(times.user + times.system)

    async def client(url: str, headers: dict[str, str]) -> None:
        nonlocal errors
        while True:
            sent = loop.time()
            if sent >= stop:
                return
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                ok = response.status == expect
            done = loop.time()
            if sent >= start:
                latencies.append(done - sent)
                errors += not ok

    # The load generator's own garbage collections (up to 50 ms for a full one, three in a
    # run) stopped every request in flight and counted as the server's latency: collected
    # before, not during.
    gc.collect()
    gc.disable()
    try:
        await asyncio.gather(watch_server(), *(client(url, headers) for url, headers in targets))
    finally:
        gc.enable()
    return Result(name, len(latencies), seconds, latencies, errors, cpu[1] - cpu[0])


async def approve_latency(
    session: aiohttp.ClientSession, base: str, tokens: dict[str, str], rounds: int
) -> Result:
    agent = {"Authorization": f"Bearer {tokens['agent']}", "Content-Type": "application/json"}
    person = {"Authorization": f"Bearer {tokens['alice']}"}
    async with session.post(f"{base}/runs", data=b'{"approval_mode": "ask"}', headers=agent) as r:
        run = (await r.json())["id"]
    latencies: list[float] = []
    errors = 0
    for index in range(rounds):
        key = f"park-{index}"
        body = json.dumps({"key": key, "tool_name": "deploy", "tool_input": {"n": index}})
        async with session.post(f"{base}/runs/{run}/tasks", data=body, headers=agent) as r:
            assert (await r.json())["state"] == "needs_approval"

        async def wait_for_it(task_key: str = key) -> tuple[float, str]:
            url = f"{base}/runs/{run}/tasks/{task_key}?wait=30"
            async with session.get(url, headers=agent) as response:
                state = (await response.json())["state"]
            return time.perf_counter(), state

        waiting = asyncio.create_task(wait_for_it())
        await asyncio.sleep(0.02)  # the long-poll is parked on the server by now
        sent = time.perf_counter()
        async with session.post(f"{base}/runs/{run}/tasks/{key}/approve", headers=person) as r:
            await r.read()
        returned, state = await waiting
        latencies.append(returned - sent)
        errors += state != "granted"
    return Result("approve → waiting agent", rounds, 1.0, latencies, errors)


async def drive(
    args: argparse.Namespace,
    app_url: str,
    echo_url: str,
    tokens: dict[str, str],
    servers: tuple[psutil.Process, psutil.Process],
) -> list[Result]:
    base = f"{app_url}/v1/workspaces/bench"
    connector = aiohttp.TCPConnector(limit=args.clients * 2 + 10)
    async with aiohttp.ClientSession(connector=connector) as session:
        agent = {"Authorization": f"Bearer {tokens['agent']}", "Content-Type": "application/json"}
        runs = []
        rules = {
            "approval_mode": "ask",
            "approval_rules": [{"tool": "read_file", "verdict": "allow"}],
        }
        for _ in range(args.clients):  # one run per agent, as in real use
            async with session.post(f"{base}/runs", data=json.dumps(rules), headers=agent) as r:
                runs.append((await r.json())["id"])
        body = json.dumps(CALL).encode()
        plain = {"Content-Type": "application/json"}
        results = [
            await closed_loop(
                "bare aiohttp echo", session, [(f"{echo_url}/echo", plain)] * args.clients,
                body, args.seconds, args.warmup, 200, servers[1],
            ),
            await closed_loop(
                "approval stage (granted)", session,
                [(f"{base}/runs/{run}/tasks", agent) for run in runs],
                body, args.seconds, args.warmup, 201, servers[0],
            ),
        ]  # fmt: skip
        results.append(await approve_latency(session, base, tokens, args.rounds))
    return results


def start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command, env=os.environ | env, cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per stage")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=200, help="approve → agent samples")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--echo-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server:
        serve_echo(args.echo_server)
        return

    with tempfile.TemporaryDirectory(prefix="api-bench-") as directory:
        db_url = f"sqlite+aiosqlite:///{directory}/bench.db"
        tokens = asyncio.run(prepare(db_url))
        app_port, echo_port = free_port(), free_port()
        env = {"APPROVALBOT_STORE__URL": db_url, "APPROVALBOT_SERVER__PORT": str(app_port),
               "APPROVALBOT_CONFIG": ""}  # fmt: skip
        processes = [
            start(SERVE, env),
            start([sys.executable, __file__, "--echo-server", str(echo_port)], {}),
        ]
        try:
            app_url, echo_url = f"http://127.0.0.1:{app_port}", f"http://127.0.0.1:{echo_port}"
            asyncio.run(wait_ready(app_url + "/readyz"))
            asyncio.run(wait_ready(echo_url + "/"))
            servers = (psutil.Process(processes[0].pid), psutil.Process(processes[1].pid))
            results = asyncio.run(drive(args, app_url, echo_url, tokens, servers))
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=10)
    report(args, results)


def report(args: argparse.Namespace, results: list[Result]) -> None:
    echo, stage, approve = results
    ratio = stage.rps / echo.rps if echo.rps else 0.0
    verdicts = {
        "throughput >= 40% of echo": ratio >= 0.40,
        "approval p99 <= 10 ms": stage.pct(0.99) <= 10.0,
        "approve -> agent p50 <= 10 ms": approve.pct(0.50) <= 10.0,
    }
    if args.json:
        print(json.dumps({"results": [r.row() for r in results], "ratio": round(ratio, 3),
                          "targets": verdicts, "clients": args.clients}, indent=2))  # fmt: skip
        return
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"{args.clients} concurrent clients, {args.seconds:g} s per stage")  # fmt: skip
    print(f"{'':28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'server CPU/req':>15}")
    for result in results:
        row = result.row()
        rps = f"{row['rps']:>8}" if result is not approve else f"{'':>8}"
        cpu = f"{result.cpu_us:>12.0f} µs" if result.server_cpu else ""
        print(
            f"{result.name:28} {rps} {row['p50_ms']:>8} {row['p99_ms']:>8} {row['errors']:>7} {cpu}"
        )
    print(f"approval stage / echo throughput: {ratio:.0%}")
    for target, met in verdicts.items():
        print(f"  {'met    ' if met else 'not met'}  {target}")
    if any(r.errors for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
