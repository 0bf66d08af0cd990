"""Parks held in the store: memory, mass expiry, cold start; and raw append throughput.

    .venv/bin/python bench/park_bench.py [--parks 100000] [--postgres URL]

Prints, for SQLite (and PostgreSQL when a URL is given or APPROVALBOT_TEST_POSTGRES_URL is set):
resident memory of a serving process holding N parks, time from a cold start to /readyz, time
for all N to expire once the clock passes their deadline; and granted appends/s into the core.
Targets (issue 3): <= 250 MB resident, all expired within 60 s, ready within 3 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.clock import FakeClock  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.core import Core  # noqa: E402
from bot.domain import Task  # noqa: E402
from bot.service import CallSpec, RunSpec  # noqa: E402
from store import convert  # noqa: E402
from store.migrate import upgrade  # noqa: E402
from store.sql import TASK, TIMER, SqlStore  # noqa: E402

START = datetime.now(UTC)


async def populate(store: SqlStore, parks: int) -> str:
    clock = FakeClock(START)
    core = await Core.build(store, Settings(), clock=clock)
    await core.admin.create_workspace("bench")
    agent = (await core.admin.add_application("bench", "agent")).principal
    # 100 parks per run over many runs, like many agents waiting on people.
    runs = [
        (await core.service.declare_run(agent, "bench", RunSpec(approval_mode="ask"))).id
        for _ in range(max(1, parks // 100))
    ]
    deadline = START + timedelta(hours=24)
    chunk = 5000
    for base in range(0, parks, chunk):
        tasks, timers = [], []
        for i in range(base, min(parks, base + chunk)):
            run_id = runs[i % len(runs)]
            task = Task(
                id=f"task_{i:012x}",
                run_id=run_id,
                workspace_id="bench",
                key=f"k{i}",
                kind="tool_call",
                origin="model",
                tool_name="deploy",
                tool="deploy",
                tool_input={"service": "api", "n": i},
                state="needs_approval",
                created_at=START,
                effect_profile={"summary": "deploy api"},
                deadline=deadline,
                why="no rule allows deploy in ask mode",
            )
            tasks.append(convert.task_values(task))
            timers.append(
                {"id": f"{task.id}:deadline", "task_id": task.id, "run_id": run_id,
                 "kind": "deadline", "seq": 0, "due_at": deadline.timestamp(), "done": False}
            )  # fmt: skip
        async with store.write() as tx:
            await tx.conn.execute(sa.insert(TASK), tasks)
            await tx.conn.execute(sa.insert(TIMER), timers)
    # Parks pile up over a day, and autovacuum analyses the tables meanwhile; loading 100,000 in
    # seconds does not give it the chance, so do what it would have done.
    async with store.engine.connect() as conn:
        autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(sa.text("ANALYZE"))
    return runs[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cold_start(url: str, schema: str | None) -> tuple[float, float]:
    """Seconds from spawning `approvalbot serve` to /readyz 200, and its resident MB then."""
    port = free_port()
    env = dict(os.environ, APPROVALBOT_STORE__URL=url, APPROVALBOT_SERVER__PORT=str(port))
    if schema:
        env["PGOPTIONS"] = f"-c search_path={schema}"
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError("serve exited")
            time.sleep(0.02)
        ready = time.perf_counter() - began
        time.sleep(1.0)  # let the clock loop look at the parks
        rss = psutil.Process(proc.pid).memory_info().rss / 2**20
        return ready, rss
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def expire_all(store: SqlStore, parks: int) -> float:
    clock = FakeClock(START)
    core = await Core.build(store, Settings(), clock=clock)
    await clock.advance(timedelta(hours=24, seconds=1))
    began = time.perf_counter()
    await core.scheduler.run_once()
    elapsed = time.perf_counter() - began
    assert await store.count_parked() == 0
    return elapsed


async def appends_per_second(url: str, calls: int = 3000) -> float:
    store = SqlStore(url)
    await upgrade(store.engine)
    core = await Core.build(store, Settings(), clock=FakeClock(START))
    await core.admin.create_workspace("speed")
    agent = (await core.admin.add_application("speed", "agent")).principal
    rules = [{"tool": "read", "verdict": "allow"}]
    run = await core.service.declare_run(
        agent, "speed", RunSpec(approval_mode="rules", approval_rules=rules)
    )
    began = time.perf_counter()
    for i in range(calls):
        await core.service.append(agent, "speed", run.id, CallSpec("read", {"path": f"/f{i}"}))
    rate = calls / (time.perf_counter() - began)
    await store.close()
    return rate


async def bench_backend(name: str, url: str, parks: int, schema: str | None) -> None:
    store = SqlStore(url, schema=schema)
    await upgrade(store.engine)
    t0 = time.perf_counter()
    await populate(store, parks)
    print(f"{name}: stored {parks} parks in {time.perf_counter() - t0:.1f} s")
    await store.close()
    ready, rss = cold_start(url, schema)
    print(f"{name}: cold start to /readyz with {parks} parks: {ready:.2f} s (target <= 3 s)")
    print(f"{name}: resident memory of the serving process: {rss:.0f} MB (target <= 250 MB)")
    store = SqlStore(url, schema=schema)
    elapsed = await expire_all(store, parks)
    print(f"{name}: all {parks} expired in {elapsed:.1f} s (target <= 60 s)")
    await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parks", type=int, default=100_000)
    parser.add_argument("--postgres", default=os.environ.get("APPROVALBOT_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    sqlite_url = f"sqlite+aiosqlite:///{folder}/bench.db"
    await bench_backend("sqlite", sqlite_url, args.parks, None)
    rate = await appends_per_second(f"sqlite+aiosqlite:///{folder}/speed.db")
    print(f"sqlite: granted appends straight into the core: {rate:.0f}/s")
    if args.postgres:
        import asyncpg

        dsn = args.postgres.replace("postgresql+asyncpg://", "postgresql://")
        schema = f"bench_{secrets.token_hex(4)}"
        conn = await asyncpg.connect(dsn)
        await conn.execute(f"CREATE SCHEMA {schema}")
        try:
            await bench_backend("postgres", dsn, args.parks, schema)
        finally:
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
            await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
