"""Slack adapter benchmark: the real slack-bolt / slack_sdk against the fake Slack Web API.

    .venv/bin/python bench/slack_bench.py [--samples 200] [--burst 500] [--url POSTGRES_URL]

SQLite by default; `--url postgresql://…` runs on PostgreSQL instead (a fresh schema, dropped
at the end). Measures, with the service running as in production (relay and clock loops, the
real clock, `POST /slack/events` served by the service's own aiohttp app):

- park -> chat.postMessage: from `service.append` of a call that parks to the fake accepting
  the chat.postMessage that shows the decision (also from the append's commit, to separate the
  core's own write); all samples in one run's thread, the first (which opens it) a warm-up;
- press -> settled: from a member pressing Approve (a signed block_actions POST to
  `/slack/events`) to the waiting agent's `wait_task` returning the granted task (and, apart,
  to the HTTP 200 that acknowledges the request to Slack);
- burst: N parks into one channel as fast as the core takes them, with the fake enforcing
  Slack's one message a second per channel (429 + Retry-After beyond) and the adapter on its
  production pacing and coalescing: time until every decision is visible in the channel (in its
  own message or listed on a digest page), messages sent and edited, 429s answered by the fake
  and seen by the adapter, and whether any 429's Retry-After was not honoured (another
  chat.postMessage to the channel before it ran out).

The latency runs pace lightly: at Slack's one message a second per channel, back-to-back samples
would measure the pacing, not the adapter; each sample starts once the previous one's ending is
shown. Targets (issue 5, as for Telegram): p50 <= 20 ms for both latencies; the burst fully
visible within 60 s, no 429 left unhonoured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from adapters.chat.digests import DigestTuning  # noqa: E402
from adapters.chat.pacing import Limits  # noqa: E402
from adapters.http.app import build_app  # noqa: E402
from adapters.slack import SlackAdapter, SlackTuning, mount  # noqa: E402
from bot.core import Core  # noqa: E402
from bot.domain import Principal  # noqa: E402
from bot.service import CallSpec, RunSpec  # noqa: E402
from store.chat import ChatStore  # noqa: E402
from store.migrate import upgrade  # noqa: E402
from store.sql import SqlStore  # noqa: E402
from tests.fakes.slack_api import FakeSlack  # noqa: E402
from tests.slack_harness import (  # noqa: E402
    ALICE,
    CHANNEL,
    SIGNING_SECRET,
    WS,
    new_fake,
    settings_for,
)

WARMUP = 10
KEY = re.compile(r"make deploy (b\d+)\b")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"{name:<34} p50 {pct(ms, 0.5):6.1f} ms   p99 {pct(ms, 0.99):6.1f} ms"
        f"   mean {statistics.fmean(ms):6.1f} ms   (n={len(ms)})"
    )


async def make_store(url: str | None) -> tuple[SqlStore, Callable[[], Awaitable[None]]]:
    """A migrated store, and how to dispose of it (PostgreSQL: a fresh schema, dropped)."""
    if url:
        import asyncpg

        schema = f"bench_{os.getpid()}_{time.time_ns()}"
        dsn = url.replace("postgresql+asyncpg://", "postgresql://")
        conn = await asyncpg.connect(dsn)
        await conn.execute(f"CREATE SCHEMA {schema}")
        await conn.close()
        store = SqlStore(dsn, schema=schema)

        async def dispose() -> None:
            await store.close()
            conn = await asyncpg.connect(dsn)
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
            await conn.close()

    else:
        store = SqlStore(f"sqlite+aiosqlite:///{tempfile.mkdtemp()}/bench.db")

        async def dispose() -> None:
            await store.close()

    await upgrade(store.engine)
    return store, dispose


class World:
    """The core on the real clock, started (relay and clock loops), the Slack adapter, and the
    service's aiohttp app serving `POST /slack/events` on a free port."""

    def __init__(self, fake: FakeSlack, store: SqlStore) -> None:
        self.fake = fake
        self.store = store
        self.core: Core
        self.adapter: SlackAdapter
        self.runner: web.AppRunner
        self.events_url = ""
        self.agent: Principal
        self.run_id = ""

    async def start(self, limits: Limits | None, tuning: SlackTuning) -> None:
        settings = settings_for(self.fake)
        kwargs: dict[str, Any] = {"tuning": tuning, "shared_budget": False}
        if limits is not None:
            kwargs["limits"] = limits
        self.adapter = SlackAdapter(settings, ChatStore(self.store), **kwargs)
        self.core = await Core.build(
            self.store, settings, notifiers={"slack": self.adapter.notifier}
        )
        self.adapter.bind(self.core)
        await self.core.admin.create_workspace(WS)
        await self.core.admin.add_member(WS, "alice", slack_user_id=ALICE)
        self.agent = (await self.core.admin.add_application(WS, "agent")).principal
        run = await self.core.service.declare_run(
            self.agent, WS, RunSpec(approval_mode="ask", title="bench")
        )
        self.run_id = run.id
        app = build_app(self.core, settings)
        mount(app, self.adapter)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.events_url = f"http://127.0.0.1:{port}/slack/events"
        await self.adapter.start()
        self.core.start()

    async def stop(self) -> None:
        await self.core.stop()
        await self.adapter.stop()
        await self.runner.cleanup()

    async def park(self, key: str) -> Any:
        spec = CallSpec("bash", {"command": f"make deploy {key}"}, key=key)
        receipt = await self.core.service.append(self.agent, WS, self.run_id, spec)
        assert receipt.task.parked, receipt.task
        return receipt.task


def stamp_posts(fake: FakeSlack) -> dict[str, tuple[float, tuple[str, str]]]:
    """Record when the fake accepts each decision's chat.postMessage (perf_counter), by task
    id, with the message's key."""
    stamps: dict[str, tuple[float, tuple[str, str]]] = {}
    original: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] = fake._post_message

    async def post(params: dict[str, Any]) -> dict[str, Any]:
        result = await original(params)
        at = time.perf_counter()
        key = (str(result["channel"]), str(result["ts"]))
        metadata = fake.messages[key].metadata or {}
        task_id = (metadata.get("event_payload") or {}).get("task_id")
        if task_id:
            stamps[str(task_id)] = (at, key)
        return result

    fake._post_message = post  # type: ignore[method-assign]
    return stamps


def record_attempts(fake: FakeSlack) -> list[tuple[float, str, int | None]]:
    """Every chat.postMessage that reached the fake's rate check: (monotonic time, channel,
    the Retry-After it was answered, or None when accepted)."""
    attempts: list[tuple[float, str, int | None]] = []
    original: Callable[[str], None] = fake._rate_limit

    def check(channel: str) -> None:
        now = time.monotonic()
        try:
            original(channel)
        except Exception as error:
            headers = getattr(error, "headers", None) or {}
            attempts.append((now, channel, int(headers.get("Retry-After", 0))))
            raise
        attempts.append((now, channel, None))

    fake._rate_limit = check  # type: ignore[method-assign]
    return attempts


def unhonoured(attempts: list[tuple[float, str, int | None]]) -> list[tuple[float, float]]:
    """Attempts made to a channel while an earlier 429's Retry-After still ran: (seconds after
    that 429, its Retry-After)."""
    early: list[tuple[float, float]] = []
    for i, (at, channel, retry) in enumerate(attempts):
        if retry is None:
            continue
        for later, other, _ in attempts[i + 1 :]:
            if other == channel and later < at + retry:
                early.append((later - at, float(retry)))
    return early


async def acked(fake: FakeSlack, url: str, payload: dict[str, Any]) -> tuple[int, float]:
    """POST a signed block_actions payload as Slack does: the status, and when it came."""
    status, _ = await fake.post_event(url, payload, SIGNING_SECRET, form=True)
    return status, time.perf_counter()


async def until(predicate: Callable[[], bool], timeout: float, step: float = 0.0005) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True


async def must(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    if not await until(predicate, timeout):
        raise TimeoutError(f"{what}: not within {timeout} s")


async def latencies(url: str | None, samples: int) -> dict[str, float]:
    store, dispose = await make_store(url)
    relaxed = Limits(
        per_interval=0.0001, per_burst=10**6, window_count=10**9, global_per_second=10**6
    )
    tuning = SlackTuning(digests=DigestTuning(coalesce_after=10**6))
    fake = new_fake()
    await fake.start()
    stamps = stamp_posts(fake)
    world = World(fake, store)
    await world.start(relaxed, tuning)
    service = world.core.service
    park, commit, press, ack = [], [], [], []
    try:
        for i in range(samples + WARMUP):  # the first WARMUP warm up (the first opens the thread)
            key = f"k{i}"
            started = time.perf_counter()
            task = await world.park(key)
            committed = time.perf_counter()
            what = f"{key}'s chat.postMessage"
            await must(lambda t=task.id: t in stamps, 10, what)  # type: ignore[misc]
            posted, message_key = stamps[task.id]
            if i >= WARMUP:
                park.append(posted - started)
                commit.append(posted - committed)
            message = fake.messages[message_key]
            approve = next(
                e for e in message.elements if (e.get("text") or {}).get("text") == "Approve"
            )
            payload = fake.block_actions_payload(
                ALICE, message.channel, message.ts, approve["action_id"]
            )
            waiter = asyncio.create_task(service.wait_task(world.agent, WS, world.run_id, key, 30))
            await asyncio.sleep(0.002)  # the agent is waiting
            pressed = time.perf_counter()
            # The POST runs on its own: bolt answers Slack's HTTP request ~10 ms after ack()
            # (it polls for the ack), which is not the agent's wait; timed separately.
            post = asyncio.create_task(acked(fake, world.events_url, payload))
            settled = await waiter
            done = time.perf_counter()
            status, answered = await post
            assert status == 200, status
            assert settled.state == "granted" and settled.resolved_by == "alice", settled
            if i >= WARMUP:
                press.append(done - pressed)
                ack.append(answered - pressed)
            # Let the ending's edit go out before the next park: samples measure latency, not
            # queueing behind the previous sample (the burst measures throughput).
            await must(lambda m=message: len(m.versions) > 1, 10, "ending")  # type: ignore[misc]
        print(summary("park -> chat.postMessage received", park))
        print(summary("  (from the park's commit)", commit))
        print(summary("press -> settled, agent released", press))
        print(summary("  (press -> HTTP 200 to Slack)", ack))
    finally:
        await world.stop()
        await fake.stop()
        await dispose()
    return {"park": pct(park, 0.5) * 1000, "press": pct(press, 0.5) * 1000}


def visible_keys(fake: FakeSlack) -> set[str]:
    """The burst's decisions shown in the channel now, in their own message or on a page."""
    seen: set[str] = set()
    for m in list(fake.messages.values()):
        if m.channel == CHANNEL and m.from_bot:
            seen.update(KEY.findall(m.text + json.dumps(m.blocks or [])))
    return seen


async def burst(url: str | None, parks: int, limit: float) -> dict[str, Any]:
    store, dispose = await make_store(url)
    fake = new_fake(enforce_rate_limits=True, rate_limit=(1, 1.0))
    await fake.start()
    attempts = record_attempts(fake)
    world = World(fake, store)
    await world.start(None, SlackTuning())  # production pacing and coalescing
    keys = {f"b{i}" for i in range(parks)}
    try:
        started, wall = time.perf_counter(), time.time()
        for i in range(parks):
            await world.park(f"b{i}")
        parked = time.perf_counter() - started
        ok = await until(lambda: visible_keys(fake) >= keys, limit, step=0.05)
        seen = time.perf_counter() - started
        await asyncio.sleep(0.5)  # what was in flight lands (for the counts)
        mine = [m for m in fake.messages_in(CHANNEL) if m.from_bot]
        singles = [m for m in mine if m.metadata is not None]
        pages = [m for m in mine if m.metadata is None and m.text.startswith("📥")]
        parents = [m for m in mine if m.metadata is None and not m.thread_ts and m not in pages]
        other = len(mine) - len(singles) - len(pages) - len(parents)
        edits = sum(len(m.edits) for m in mine)
        limited = fake.rejections(error="ratelimited")
        refused = [r for r in fake.rejected if r.error != "ratelimited"]
        early = unhonoured(attempts)
        posts = sum(1 for _, _, r in attempts if r is None)
        if ok:
            print(
                f"burst of {parks} parks into one channel: all visible after {seen:.1f} s "
                f"(parking took {parked:.1f} s; {seen - parked:.1f} s after the last park)"
            )
        else:
            missing = sorted(keys - visible_keys(fake), key=lambda k: int(k[1:]))
            print(
                f"burst of {parks} parks into one channel: NOT all visible after {seen:.1f} s "
                f"(parking took {parked:.1f} s): {parks - len(missing)} visible, "
                f"{len(missing)} missing (first {missing[:10]})"
            )
        print(
            f"  messages sent {len(mine)} ({len(singles)} single, {len(pages)} digest pages, "
            f"{len(parents)} thread parents{f', {other} other' if other else ''}), "
            f"edits {edits}, 429s answered {len(limited)} "
            f"(adapter saw {world.adapter.retry_afters}), "
            f"paced waits {world.adapter.budget.waited:.1f} s"
        )
        honoured = (
            "every 429's Retry-After honoured"
            if not early
            else f"{len(early)} chat.postMessage sent before a 429's Retry-After ran out "
            f"(at {', '.join(f'+{d:.2f}/{r:.0f} s' for d, r in early[:8])})"
        )
        print(
            f"  chat.postMessage accepted {posts}, attempts {len(attempts)}; {honoured}"
            + (f"; other refusals {sorted({r.error for r in refused})}" if refused else "")
        )
        for page in pages:
            listed = len(KEY.findall(page.text + json.dumps(page.blocks or [])))
            print(
                f"    page ts {page.ts}: {listed} decisions listed, {len(page.edits)} edits, "
                f"posted +{page.versions[0].at - wall:.1f} s, last change "
                f"+{page.versions[-1].at - wall:.1f} s"
            )
    finally:
        await world.stop()
        await fake.stop()
        await dispose()
    return {"seen": seen, "ok": ok, "early": len(early)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument(
        "--url", "--postgres", dest="url", default=None,
        help="a PostgreSQL URL (postgresql://…): run there instead of SQLite",
    )  # fmt: skip
    parser.add_argument(
        "--burst-timeout", type=float, default=90.0, help="give up on the burst after this"
    )
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"== {'PostgreSQL' if args.url else 'SQLite'}")
    lat = await latencies(args.url, args.samples)
    result = await burst(args.url, args.burst, args.burst_timeout)
    verdict = [
        f"park p50 {lat['park']:.1f} ms {'<=' if lat['park'] <= 20 else '>'} 20",
        f"press p50 {lat['press']:.1f} ms {'<=' if lat['press'] <= 20 else '>'} 20",
        f"burst {result['seen']:.1f} s {'<=' if result['ok'] and result['seen'] <= 60 else '>'} 60",
        f"unhonoured 429s {result['early']}",
    ]
    print("targets (issue 5, as bench/telegram_bench.py): " + "; ".join(verdict))


if __name__ == "__main__":
    asyncio.run(main())
