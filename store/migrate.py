"""Schema migrations with Alembic, applied at start and by `approvalbot db upgrade`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

_HERE = Path(__file__).parent
_LOCK_KEY = 0x61707072  # "appr": one migrator at a time across instances


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_HERE / "migrations"))
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _upgrade(connection: Any, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def _downgrade(connection: Any, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, revision)


def _current(connection: Any) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
        await conn.run_sync(_upgrade, revision)


async def downgrade(engine: AsyncEngine, revision: str) -> None:
    """Back to `revision` (tests, and an operator rolling a release back)."""
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
        await conn.run_sync(_downgrade, revision)


async def is_current(engine: AsyncEngine) -> bool:
    async with engine.connect() as conn:
        current = await conn.run_sync(_current)
    return current == head_revision()


async def autogenerate(engine: AsyncEngine, message: str) -> None:
    """Developer helper: write a new revision from the difference to the tables."""

    def _revision(connection: Any) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.revision(config, message=message, autogenerate=True)

    async with engine.begin() as conn:
        await conn.run_sync(_revision)
