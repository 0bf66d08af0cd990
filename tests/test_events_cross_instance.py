"""Events reach subscribers of another instance: PostgreSQL LISTEN/NOTIFY wakes them."""

from __future__ import annotations

import asyncio

import pytest

from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from bot.events import run_topic
from bot.service import CallSpec, RunSpec
from store.listen import PgListener
from store.sql import SqlStore
from tests.conftest import World, pg_dsn


async def test_notify_wakes_the_other_instance(world: World, store: SqlStore) -> None:
    if not store.postgres:
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's; SQLite instances share one process")
    twin_store = SqlStore(store.url, schema=store.schema)
    twin = await Core.build(twin_store, Settings(), clock=FakeClock())
    listener = PgListener(pg_dsn(), twin.hub.notify_run)
    await listener.start()
    try:
        run = await world.core.service.declare_run(world.agent, "acme", RunSpec())
        gate = twin.hub.gate(run_topic(run.id))
        await world.core.service.append(
            world.agent, "acme", run.id, CallSpec("deploy", {}, key="k")
        )
        # Woken by the other instance's commit, not by a timeout.
        assert await twin.hub.wait(gate, 5.0)
        seen = [e.name for e in await twin.service.events_after(run.id, 0)]
        assert seen == ["approval_required", "attention_required"]
        # Resume from the last id seen: nothing lost, nothing repeated.
        last = (await twin.service.events_after(run.id, 0))[-1].seq
        gate = twin.hub.gate(run_topic(run.id))
        await world.core.service.approve(world.alice, "acme", run.id, "k")
        assert await twin.hub.wait(gate, 5.0)
        after = [e.name for e in await twin.service.events_after(run.id, last)]
        assert after == ["task_settled", "attention_required"]
    finally:
        await listener.stop()
        await twin_store.close()


async def test_waiting_call_released_by_another_instance(world: World, store: SqlStore) -> None:
    """An agent long-polling instance B is released as soon as a person approves on A."""
    twin_store = SqlStore(store.url, schema=store.schema)
    twin = await Core.build(twin_store, Settings(), clock=FakeClock())
    listener = PgListener(pg_dsn(), twin.hub.notify_run) if store.postgres else None
    if listener:
        await listener.start()
    try:
        run = await world.core.service.declare_run(world.agent, "acme", RunSpec())
        await world.core.service.append(
            world.agent, "acme", run.id, CallSpec("deploy", {}, key="k")
        )
        waiting = asyncio.create_task(twin.service.wait_task(world.agent, "acme", run.id, "k", 10))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        loop = asyncio.get_running_loop()
        began = loop.time()
        await world.core.service.approve(world.alice, "acme", run.id, "k")
        task = await waiting
        assert task.state == "granted" and task.resolved_by == "alice"
        # PostgreSQL wakes B at once; a shared SQLite file is re-read within a second.
        assert loop.time() - began < (1.0 if store.postgres else 1.5)
    finally:
        if listener:
            await listener.stop()
        await twin_store.close()
