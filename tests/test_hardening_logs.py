"""Issue 21 (17): the clock and the outbox relay log a storage failure by its type and the
operation, never the SQL or its parameters. The failure is real: the table they read is gone
(on SQLite only: each test has its own file there, while PostgreSQL schemas are reused)."""

from __future__ import annotations

import asyncio
import logging

import pytest
import sqlalchemy as sa

from bot.service import CallSpec, RunSpec
from store.sql import SqlStore
from tests.conftest import make_world


async def _lose_table(store: SqlStore, table: str) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(sa.text(f"DROP TABLE {table}"))


@pytest.mark.parametrize("table", ["timer", "outbox"])
async def test_a_storage_failure_is_logged_without_sql_or_parameters(
    sqlite_store: SqlStore, caplog: pytest.LogCaptureFixture, table: str
) -> None:
    store = sqlite_store
    world = await make_world(store)
    secret = "sk-live-abcdef0123456789abcdef0123"
    run = await world.core.service.declare_run(world.agent, world.ws, RunSpec())
    call = CallSpec("bash", {"command": f"deploy --token {secret}"}, key="k1")
    await world.core.service.append(world.agent, world.ws, run.id, call)
    await _lose_table(store, table)
    caplog.set_level(logging.DEBUG)
    world.core.start()
    try:
        world.core.scheduler.wake()
        world.core.relay.wake()
        for _ in range(100):
            if "failed" in caplog.text:
                break
            await asyncio.sleep(0.02)
    finally:
        await world.core.stop()
    assert "failed: OperationalError" in caplog.text
    for leak in ("[SQL", "[parameters", "SELECT", "FROM", secret, table.upper()):
        assert leak not in caplog.text, leak
