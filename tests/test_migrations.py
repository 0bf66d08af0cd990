"""The migrations build exactly the schema the tables declare, on both databases."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

import store.tables  # noqa: F401  (registers the tables)
from store.migrate import head_revision, is_current
from store.sql import SqlStore


def _diff(connection: Any) -> list[Any]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, SQLModel.metadata))


async def test_migrated_schema_matches_the_tables(store: SqlStore) -> None:
    assert await is_current(store.engine) and head_revision() == "0003"
    async with store.engine.connect() as conn:
        assert await conn.run_sync(_diff) == []
