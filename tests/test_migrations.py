"""The migrations build exactly the schema the tables declare, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

import store.tables  # noqa: F401  (registers the tables)
from bot.domain import NewEvent
from store.migrate import downgrade, head_revision, is_current, upgrade
from store.sql import SqlStore

AT = datetime(2026, 11, 30, tzinfo=UTC)


def _diff(connection: Any) -> list[Any]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, SQLModel.metadata))


async def test_migrated_schema_matches_the_tables(store: SqlStore) -> None:
    assert await is_current(store.engine) and head_revision() == "0004"
    async with store.engine.connect() as conn:
        assert await conn.run_sync(_diff) == []


async def test_0004_carries_event_sequences_over(store: SqlStore) -> None:
    """A database with runs and events from before 0004 goes on numbering where it stopped,
    and comes back down to 0003 with the numbers restored."""
    await downgrade(store.engine, "0003")
    async with store.engine.begin() as conn:
        for run_id, seq in (("run_a", 7), ("run_b", 0)):
            await conn.execute(
                sa.text(
                    "INSERT INTO run (id, workspace_id, state, approval_mode, approval_rules,"
                    " aliases, title, event_seq, created_at) VALUES (:id, 'ws', 'running',"
                    " 'ask', '[]', '{}', '', :seq, 0)"
                ),
                {"id": run_id, "seq": seq},
            )
            for number in range(1, seq + 1):
                await conn.execute(
                    sa.text(
                        "INSERT INTO event (run_id, seq, name, data, created_at)"
                        " VALUES (:run, :seq, 'note', '{}', 0)"
                    ),
                    {"run": run_id, "seq": number},
                )
    await upgrade(store.engine)
    async with store.write() as tx:
        await tx.add_events([NewEvent("run_a", "note", {}), NewEvent("run_b", "note", {})], AT)
    assert [e.seq for e in await store.events_after("run_a", 7)] == [8]
    assert [e.seq for e in await store.events_after("run_b", 0)] == [1]
    await downgrade(store.engine, "0003")
    async with store.engine.connect() as conn:
        rows = await conn.execute(sa.text("SELECT id, event_seq FROM run ORDER BY id"))
        assert [tuple(r) for r in rows] == [("run_a", 8), ("run_b", 1)]
    await upgrade(store.engine)
