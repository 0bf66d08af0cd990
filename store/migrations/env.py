"""Alembic environment. The service hands in an open connection (see store/migrate.py), so
migrations run inside the async engine's own transaction on SQLite and PostgreSQL alike."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)

target_metadata = SQLModel.metadata
connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `approvalbot db upgrade`")
context.configure(
    connection=connection,
    target_metadata=target_metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
