"""The inbox with thousands waiting: page size, server time, first paint in Chromium.

    .venv/bin/python bench/inbox_bench.py [--waiting 5000] [--rounds 7]

Serves the page (the service's own app, in this process, on a loopback port, SQLite in a
temporary directory) for three people in three workspaces: 6 decisions waiting (the baseline,
measured in the same run, since this machine's speed wanders), `--waiting` in one run (an agent
in a loop), and `--waiting` spread over runs of 10 (a burst of agents). For each it prints the
inbox's HTML size, the median time of `GET /inbox` and of the live fragment `/web/inbox`, one
turn of the live feed (its two queries) and the size of its event, and the median first
(contentful) paint in Debian's Chromium (`performance.getEntriesByType("paint")`, from the
navigation's start) over `--rounds` loads, the scenarios taken in turn.

Targets (issue 14): page <= 300 KB and first paint <= 1 s with 5,000 waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from aiohttp import web
from playwright.async_api import Browser, Page, async_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.http.app import build_app  # noqa: E402
from adapters.web import queue  # noqa: E402
from adapters.web.stream import sse  # noqa: E402
from bot import logins  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.core import Core  # noqa: E402
from bot.domain import Principal, Task  # noqa: E402
from bot.service import RunSpec  # noqa: E402
from store import convert  # noqa: E402
from store.migrate import upgrade  # noqa: E402
from store.sql import TASK, TIMER, SqlStore  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


async def populate(core: Core, ws: str, runs: int, per_run: int) -> Principal:
    """A workspace with `runs` × `per_run` waiting calls, written in a few statements."""
    await core.admin.create_workspace(ws)
    member = (await core.admin.add_member(ws, "alice")).principal
    agent = (await core.admin.add_application(ws, "agent")).principal
    start = datetime.now(UTC) - timedelta(hours=2)
    tasks, timers = [], []
    for r in range(runs):
        spec = RunSpec(approval_mode="ask", title=f"batch job {r}")
        run_id = (await core.service.declare_run(agent, ws, spec)).id
        for i in range(per_run):
            n = r * per_run + i
            task = Task(
                id=f"task_{ws}_{n:08d}",
                run_id=run_id,
                workspace_id=ws,
                key=f"call-{i}",
                kind="tool_call",
                origin="model",
                tool_name="bash",
                tool="bash",
                tool_input={"command": f"curl -fsS -X POST https://api.example.com/v1/items/{n}"},
                state="needs_approval",
                created_at=start + timedelta(seconds=n),
                effect_profile={"summary": f"rebuild item {n}", "effects": ["network"]},
                deadline=start + timedelta(hours=24),
                why="no rule allows bash in ask mode",
                appended_by="agent",
            )
            tasks.append(convert.task_values(task))
            timers.append(
                {"id": f"{task.id}:deadline", "task_id": task.id, "run_id": run_id,
                 "kind": "deadline", "seq": 0, "due_at": start.timestamp() + 86400,
                 "done": False}
            )  # fmt: skip
    store = core.store
    assert isinstance(store, SqlStore)  # written in bulk, straight into its tables
    async with store.write() as tx:
        for at in range(0, len(tasks), 2000):
            await tx.conn.execute(sa.insert(TASK), tasks[at : at + 2000])
            await tx.conn.execute(sa.insert(TIMER), timers[at : at + 2000])
    return member


async def signed_in(browser: Browser, core: Core, url: str, member: Principal) -> Page:
    context = await browser.new_context(viewport={"width": 1100, "height": 900})
    page = await context.new_page()
    await page.goto(f"{url}/login/{await logins.issue(core.store, core.clock, member)}")
    return page


async def first_paint(page: Page, url: str) -> float:
    await page.bring_to_front()  # a page in the background is not painted
    await page.goto(f"{url}/inbox", wait_until="load")
    # The paint may come after `load`: wait for its entry (buffered: one already there counts).
    paint = await page.evaluate(
        """() => new Promise(resolve => {
            new PerformanceObserver(list => {
                const fcp = list.getEntries().find(e => e.name === "first-contentful-paint");
                if (fcp) resolve(fcp.startTime);
            }).observe({ type: "paint", buffered: true });
        })"""
    )
    return float(paint)


async def timed_get(page: Page, url: str, rounds: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        answer = await page.request.get(url)
        size = len(await answer.body())
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), size


async def feed_turn(core: Core, member: Principal, rounds: int) -> tuple[float, int]:
    times, data = [], b""
    for _ in range(rounds):
        started = time.perf_counter()
        version, count, keys = await queue.inbox_version(core.service, member)
        times.append((time.perf_counter() - started) * 1000)
        data = sse("inbox", {"keys": keys, "count": count, "version": version, "now": "x"})
    return statistics.median(times), len(data)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--waiting", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlStore(f"sqlite+aiosqlite:///{tmp}/bench.db")
        await upgrade(store.engine)
        core = await Core.build(store, Settings())
        people = {
            "6 waiting (baseline)": await populate(core, "small", 1, 6),
            f"{args.waiting} in one run": await populate(core, "one", 1, args.waiting),
            f"{args.waiting} in runs of 10": await populate(core, "many", args.waiting // 10, 10),
        }
        runner = web.AppRunner(build_app(core, Settings()), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        url = f"http://{host}:{port}"
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            pages = {name: await signed_in(browser, core, url, m) for name, m in people.items()}
            paints: dict[str, list[float]] = {name: [] for name in pages}
            for page in pages.values():
                await first_paint(page, url)  # warm: templates compiled, caches filled
            for _ in range(args.rounds):
                for name, page in pages.items():
                    paints[name].append(await first_paint(page, url))
            print(f"inbox bench: {platform.machine()}, Python {platform.python_version()}, "
                  f"Chromium {browser.version}, SQLite, {args.rounds} rounds, medians")  # fmt: skip
            print(f"{'':26} {'page':>9} {'GET /inbox':>11} {'fragment':>9} "
                  f"{'feed turn':>10} {'event':>7} {'first paint':>12}")  # fmt: skip
            for name, page in pages.items():
                get_ms, size = await timed_get(page, f"{url}/inbox", args.rounds)
                frag_ms, _ = await timed_get(page, f"{url}/web/inbox", args.rounds)
                turn_ms, event = await feed_turn(core, people[name], args.rounds)
                paint = statistics.median(paints[name])
                print(f"{name:26} {size / 1000:7.1f}KB {get_ms:9.1f}ms {frag_ms:7.1f}ms "
                      f"{turn_ms:8.1f}ms {event:6}B {paint:10.0f}ms")  # fmt: skip
            await browser.close()
        await runner.cleanup()
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
