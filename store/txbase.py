"""The base of one store transaction (store/tx.py's SqlTx): the table handles, the connection,
and the helpers that run a statement on it (the hot path's on SQLite's own connection)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.ports import DuplicateKey
from store import prepared
from store.prepared import Prepared
from store.tables import (
    ApplicationRow,
    ChatCallbackRow,
    ChatChoiceRow,
    ChatDigestRow,
    ChatPromptRow,
    ChatRecordRow,
    CredentialRow,
    DecisionLogRow,
    DeliveryRefRow,
    EventRow,
    ExecutorRow,
    LearnedRuleRow,
    MemberRow,
    MetaRow,
    OutboxRow,
    ReviewRow,
    RunRow,
    RunSeqRow,
    TaskRow,
    TimerRow,
    WebSessionRow,
    WorkspaceRow,
)

if TYPE_CHECKING:
    from store.sqlite import InlineConnection

WORKSPACE = WorkspaceRow.__table__  # type: ignore[attr-defined]
MEMBER = MemberRow.__table__  # type: ignore[attr-defined]
APPLICATION = ApplicationRow.__table__  # type: ignore[attr-defined]
CREDENTIAL = CredentialRow.__table__  # type: ignore[attr-defined]
EXECUTOR = ExecutorRow.__table__  # type: ignore[attr-defined]
META = MetaRow.__table__  # type: ignore[attr-defined]
RUN = RunRow.__table__  # type: ignore[attr-defined]
RUN_SEQ = RunSeqRow.__table__  # type: ignore[attr-defined]
TASK = TaskRow.__table__  # type: ignore[attr-defined]
REVIEW = ReviewRow.__table__  # type: ignore[attr-defined]
EVENT = EventRow.__table__  # type: ignore[attr-defined]
LOG = DecisionLogRow.__table__  # type: ignore[attr-defined]
TIMER = TimerRow.__table__  # type: ignore[attr-defined]
OUTBOX = OutboxRow.__table__  # type: ignore[attr-defined]
LEARNED_RULE = LearnedRuleRow.__table__  # type: ignore[attr-defined]
# Chat adapters' own state (store/chat.py).
CALLBACK = ChatCallbackRow.__table__  # type: ignore[attr-defined]
PROMPT = ChatPromptRow.__table__  # type: ignore[attr-defined]
CHOICE = ChatChoiceRow.__table__  # type: ignore[attr-defined]
DIGEST = ChatDigestRow.__table__  # type: ignore[attr-defined]
RECORD = ChatRecordRow.__table__  # type: ignore[attr-defined]
REF = DeliveryRefRow.__table__  # type: ignore[attr-defined]
WEB_SESSION = WebSessionRow.__table__  # type: ignore[attr-defined]
# What chats keep per decision; purged with the rest of the bookkeeping (SqlStore.purge).
PER_TASK_CHAT = (CALLBACK, PROMPT, CHOICE, REF)

NOTIFY_CHANNEL = "approvalbot_events"


class TxBase:
    """One transaction on one connection: the connection and the helpers every part uses."""

    def __init__(
        self,
        conn: AsyncConnection | InlineConnection,
        postgres: bool,
        driver: sqlite3.Connection | None = None,
    ) -> None:
        # Typed loosely on purpose: both connections answer `await execute(...)` with a result;
        # a union here trips mypy 2.4 (an internal error on overloaded `execute`).
        self.conn: Any = conn
        self.postgres = postgres
        # SQLite's own connection, for the statements of the hot path (see store/prepared.py).
        self.driver = driver
        self.notify_runs: set[str] = set()
        # In a SQLite commit group, the current writer's events and log entries, which nothing
        # reads back before the commit: the group writes them all at once (store/sqlite.py).
        self.held: list[tuple[Prepared, list[dict[str, Any]]]] | None = None

    async def _one(self, stmt: Any) -> Any:
        return (await self.conn.execute(stmt)).mappings().first()

    async def _all(self, stmt: Any) -> list[Any]:
        return list((await self.conn.execute(stmt)).mappings().all())

    async def _exec(
        self, statement: Prepared, values: dict[str, Any] | Sequence[Mapping[str, Any]]
    ) -> list[Sequence[Any]]:
        """A statement of the hot path: on SQLite's own connection when there is one."""
        if self.driver is not None:
            try:
                return statement.run(self.driver, values)
            except sqlite3.IntegrityError as error:
                raise DuplicateKey(str(error)) from None
        try:
            result = await self.conn.execute(statement.statement, values)
        except IntegrityError as error:
            raise DuplicateKey(str(error.orig)) from None
        return [tuple(row) for row in result] if statement.columns else []

    async def _add_rows(self, statement: Prepared, rows: list[dict[str, Any]]) -> None:
        if self.held is not None:
            self.held.append((statement, rows))
        else:
            await self._exec(statement, rows)

    async def _insert(self, table: sa.Table, values: dict[str, Any]) -> None:
        await self._exec(prepared.insert(table), values)
