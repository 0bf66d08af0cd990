"""Random sequences of lifecycle operations keep the invariants (SQLite; one store per example)."""

from __future__ import annotations

import asyncio
import collections
import tempfile
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.config import Settings
from bot.core import Core
from bot.errors import ApprovalError
from bot.service import CallSpec, RunSpec
from tests.conftest import World, make_store, make_world

WS = "acme"
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["call", "call", "ask", "approve", "deny", "answer", "stop", "advance", "restart"]
        ),
        st.integers(0, 7),
    ),
    min_size=1,
    max_size=25,
)


async def check_invariants(world: World, run_ids: list[str]) -> None:
    store = world.core.store
    tasks = await store.tasks(WS, limit=10_000)
    for run_id in run_ids:
        feed = await store.events_after(run_id, 0, limit=10_000)
        assert [e.seq for e in feed] == list(range(1, len(feed) + 1))  # gapless per run
        parked = {t.key for t in tasks if t.run_id == run_id and t.parked}
        attention = [e for e in feed if e.name == "attention_required"]
        if attention:
            assert set(attention[-1].data["blocked_task_keys"]) == parked
        else:
            assert parked == set()
        settled = collections.Counter(e.data["key"] for e in feed if e.name == "task_settled")
        ended = {t.key for t in tasks if t.run_id == run_id and not t.parked}
        assert set(settled) == ended and all(n == 1 for n in settled.values())
    endings = collections.Counter(
        (r.entry.run_id, r.entry.task_key)
        for r in await store.log_entries(WS, limit=100_000)
        if r.entry.action
        in ("granted", "refused", "approved", "denied", "answered", "expired", "cancelled")
    )
    assert all(n == 1 for n in endings.values())
    assert len(endings) == sum(1 for t in tasks if not t.parked)
    keys = [item.idempotency_key for item, _ in world.notifier.delivered]
    assert len(keys) == len(set(keys))


async def play(ops: list[tuple[str, int]]) -> None:
    store, _ = await make_store("sqlite", tempfile.mkdtemp())
    world = await make_world(store)
    s = world.core.service
    runs: list[str] = []
    for _ in range(2):
        runs.append((await s.declare_run(world.agent, WS, RunSpec(approval_mode="ask"))).id)
    serial = 0
    try:
        for op, n in ops:
            run_id = runs[n % 2]
            parked = [t for t in await store.asks(WS) if t.run_id == run_id]
            target = parked[n % len(parked)] if parked else None
            try:
                if op in ("call", "ask"):
                    serial += 1
                    spec: Any = (
                        CallSpec("deploy", {"n": serial}, key=f"c{serial}")
                        if op == "call"
                        else CallSpec(
                            "ask", {"prompt": "?", "options": ["a", "b"]}, key=f"q{serial}"
                        )
                    )
                    await s.append(world.agent, WS, run_id, spec)
                elif op == "approve" and target:
                    await s.approve(world.alice, WS, run_id, target.key)
                elif op == "deny" and target:
                    await s.deny(world.bob, WS, run_id, target.key, reason="no")
                elif op == "answer" and target:
                    await s.resolve(world.alice, WS, run_id, target.key, content="a")
                elif op == "stop" and n == 0:
                    await s.stop(world.alice, WS, run_id)
                elif op == "advance":
                    await world.clock.advance(timedelta(hours=3 * n + 1))
                    await world.core.scheduler.run_once()
                    if n % 3 == 0:
                        try:
                            await s.retry(world.alice, WS, run_id)
                        except ApprovalError:
                            pass
                elif op == "restart":
                    # A fresh core over the same store: nothing in memory survives.
                    world.core = await Core.build(
                        store, Settings(), clock=world.clock, notifiers={"rec": world.notifier}
                    )
            except ApprovalError as error:
                assert error.code in (
                    "already_decided",
                    "conflict",
                    "run_not_running",
                    "invalid_option",
                ), error
            s = world.core.service
            await world.core.relay.run_once()
            await check_invariants(world, runs)
    finally:
        await store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_random_operation_sequences_keep_invariants(ops: list[tuple[str, int]]) -> None:
    asyncio.run(play(ops))
