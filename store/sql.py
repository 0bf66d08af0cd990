"""The Store port on SQLAlchemy: SQLite (store/sqlite.py) and PostgreSQL (asyncpg).

Transactions are store/tx.py's SqlTx. SQLite has one writer at a time: its writes are grouped
and committed together from the event loop. PostgreSQL runs at READ COMMITTED; every ending is
a compare-and-set (`UPDATE … WHERE state IN (…) RETURNING`), which lets exactly one of any
number of concurrent writers through.

A storage fault (a full disk, a read-only database, a server that cannot be reached) leaves
the store as the core's `StorageUnavailable`, 503 `storage_unavailable` with its cause, on
every surface alike (store/faults.py).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event as sa_event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bot import jsontext
from bot.domain import PARKED_STATES, Event, LogRecord, OutboxItem, Run, Task
from bot.errors import StorageUnavailable
from store import convert as cv
from store.faults import StorageHealth, fault_of
from store.sqlite import SqliteWriter, setup_connections
from store.tx import (
    CREDENTIAL,
    DIGEST,
    EVENT,
    LOG,
    NOTIFY_CHANNEL,
    OUTBOX,
    PER_TASK_CHAT,
    RUN,
    TASK,
    TIMER,
    WEB_SESSION,
    SqlTx,
)
from store.txbase import META

__all__ = [
    "CREDENTIAL", "EVENT", "LOG", "NOTIFY_CHANNEL", "OUTBOX", "PER_TASK_CHAT", "TASK", "TIMER",
    "SqlStore", "SqlTx", "make_engine",
]  # fmt: skip


def make_engine(url: str, schema: str | None = None) -> AsyncEngine:
    if url.startswith("sqlite"):
        engine = create_async_engine(
            url, connect_args={"timeout": 30}, json_serializer=jsontext.dumps
        )
        setup_connections(engine.sync_engine, 30_000)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+asyncpg://" + url.removeprefix("postgresql://")
    connect_args: dict[str, Any] = {}
    if schema:
        connect_args["server_settings"] = {"search_path": schema}
    engine = create_async_engine(
        url,
        pool_size=10,
        max_overflow=20,
        pool_pre_ping=True,
        connect_args=connect_args,
        json_serializer=jsontext.dumps,
    )
    sa_event.listen(engine.sync_engine, "handle_error", _reconnect_when_read_only)
    return engine


def _reconnect_when_read_only(context: ExceptionContext) -> None:
    """A read-only transaction (25006) is the session's doing as much as the server's: its
    default (`default_transaction_read_only`, which ALTER DATABASE changes for new sessions
    only) or a standby it reached. So the connection is dropped like a lost one, and with it
    every pooled connection made before: once the database takes writes again, the next
    write runs on a new session that sees it."""
    if getattr(context.original_exception, "sqlstate", None) == "25006":
        context.is_disconnect = True


class SqlStore:
    """Implements bot.ports.Store."""

    # While a storage fault lasts, `writable()` tries a write at most this often (seconds).
    probe_every = 1.0

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        self.url = url
        self.schema = schema
        self.engine = make_engine(url, schema)
        self.postgres = self.engine.dialect.name == "postgresql"
        # The storage fault the last write met, if any (store/faults.py): /readyz, the log.
        self.health = StorageHealth()
        self._probed_at = -self.probe_every
        # SQLite's reads and writes go through here, on the event loop; None on PostgreSQL.
        self.sqlite = None if self.postgres else SqliteWriter(url, self.health)

    def write(self) -> AbstractAsyncContextManager[SqlTx]:
        """A write transaction. A storage fault (a full disk, a read-only database, a server
        that cannot be reached) is raised as `StorageUnavailable`, 503 `storage_unavailable`:
        nothing of the write was kept."""
        # On SQLite, group commit: the writers of one event-loop turn share one transaction.
        return self._pg_write() if self.sqlite is None else self.sqlite.write()

    @asynccontextmanager
    async def _pg_write(self) -> AsyncIterator[SqlTx]:
        wrote = False
        try:
            async with self.engine.begin() as conn:
                yield SqlTx(conn, self.postgres)
                if self.health.fault is not None:
                    # Only a transaction that wrote rows proves the fault over: it has an id.
                    wrote = (await conn.execute(_WROTE)).scalar_one()
        except Exception as error:
            fault = fault_of(error, postgres=True)
            if fault is None:
                raise
            raise self.health.refused(fault) from None
        if wrote:
            self.health.wrote()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[SqlTx]:
        try:
            if self.sqlite is not None:
                with self.sqlite.read() as tx:
                    yield tx
                return
            async with self.engine.connect() as conn:
                yield SqlTx(conn, self.postgres)
        except Exception as error:
            path = None if self.sqlite is None else self.sqlite.path
            fault = fault_of(error, postgres=self.postgres, path=path)
            if fault is None:
                raise
            raise self.health.refused(fault) from None

    async def writable(self) -> bool:
        """Whether writes succeed: yes unless the last one met a storage fault; then a write
        is tried (at most every `probe_every` seconds) to see whether the fault is over. The
        write needs room (a row of 16 KB, removed in the same transaction), so a full disk
        is not taken for a cleared one when a small change still fits in a page."""
        if self.health.fault is None:
            return True
        now = time.monotonic()
        if now - self._probed_at < self.probe_every:
            return False
        self._probed_at = now
        key = f"probe:{secrets.token_hex(8)}"
        try:
            async with self.write() as tx:
                await tx.conn.execute(sa.insert(META).values(key=key, value=_probe_value()))
                await tx.conn.execute(sa.delete(META).where(META.c.key == key))
        except StorageUnavailable:
            return False
        return self.health.fault is None

    @asynccontextmanager
    async def _bookkeeping(self) -> AsyncIterator[SqlTx]:
        """A write of the relay's own bookkeeping (leases, done marks). On PostgreSQL it does not
        wait for the disk flush: losing one in a database crash only hands the item out again,
        and notifiers absorb a repeat by its idempotency key. Decisions never go this way."""
        async with self.write() as tx:
            if self.postgres:
                await tx.conn.execute(sa.text("SET LOCAL synchronous_commit TO OFF"))
            yield tx

    async def _rows(self, stmt: Any) -> list[Any]:
        async with self.read() as tx:
            return await tx._all(stmt)

    async def _scalar(self, stmt: Any) -> Any:
        async with self.read() as tx:
            return (await tx.conn.execute(stmt)).scalar_one_or_none()

    async def events_after(self, run_id: str, seq: int, limit: int = 500) -> list[Event]:
        stmt = (
            sa.select(EVENT)
            .where(EVENT.c.run_id == run_id, EVENT.c.seq > seq)
            .order_by(EVENT.c.seq)
            .limit(limit)
        )
        return [cv.event(r) for r in await self._rows(stmt)]

    async def work_events(self, executor_id: str, after_id: int, limit: int = 500) -> list[Event]:
        stmt = (
            sa.select(EVENT)
            .where(EVENT.c.executor_id == executor_id, EVENT.c.id > after_id)
            .order_by(EVENT.c.id)
            .limit(limit)
        )
        return [cv.event(r) for r in await self._rows(stmt)]

    async def next_timer_due(self) -> datetime | None:
        stmt = sa.select(sa.func.min(TIMER.c.due_at)).where(TIMER.c.done.is_(False))
        value = await self._scalar(stmt)
        return None if value is None else cv.dt(value)

    def _resting_on_a_person(self, workspace_id: str) -> sa.ColumnElement[bool]:
        # An author ask with a resolution token rests on its client, not on a person.
        return sa.and_(
            TASK.c.workspace_id == workspace_id,
            TASK.c.state.in_(PARKED_STATES),
            TASK.c.resolution_token_hash.is_(None),
        )

    async def asks(
        self,
        workspace_id: str,
        *,
        run_id: str | None = None,
        limit: int | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[Task]:
        stmt = sa.select(TASK).where(self._resting_on_a_person(workspace_id))
        if run_id is not None:
            stmt = stmt.where(TASK.c.run_id == run_id)
        if before is not None:
            at, task_id = cv.ts(before[0]), before[1]
            stmt = stmt.where(
                sa.or_(
                    TASK.c.created_at < at,
                    sa.and_(TASK.c.created_at == at, TASK.c.id < task_id),
                )
            )
        stmt = stmt.order_by(TASK.c.created_at.desc(), TASK.c.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        return [cv.task(r) for r in await self._rows(stmt)]

    async def ask_counts(self, workspace_id: str) -> list[tuple[str, int, datetime]]:
        newest = sa.func.max(TASK.c.created_at)
        stmt = (
            sa.select(TASK.c.run_id, sa.func.count().label("n"), newest.label("newest"))
            .where(self._resting_on_a_person(workspace_id))
            .group_by(TASK.c.run_id)
            .order_by(newest.desc(), TASK.c.run_id)
        )
        rows = await self._rows(stmt)  # mappings: by name
        return [(str(r["run_id"]), int(r["n"]), cv.dt(float(r["newest"]))) for r in rows]

    async def executor_inbox(self, executor_id: str) -> list[Task]:
        stmt = (
            sa.select(TASK)
            .where(TASK.c.addressee == executor_id, TASK.c.state.in_(PARKED_STATES))
            .order_by(TASK.c.created_at)
        )
        return [cv.task(r) for r in await self._rows(stmt)]

    async def log_entries(
        self,
        workspace_id: str,
        *,
        after_id: int = 0,
        limit: int = 1000,
        run_id: str | None = None,
        task_key: str | None = None,
    ) -> list[LogRecord]:
        stmt = sa.select(LOG).where(LOG.c.workspace_id == workspace_id, LOG.c.id > after_id)
        if run_id is not None:
            stmt = stmt.where(LOG.c.run_id == run_id)
        if task_key is not None:
            stmt = stmt.where(LOG.c.task_key == task_key)
        stmt = stmt.order_by(LOG.c.id).limit(limit)
        return [cv.log_record(r) for r in await self._rows(stmt)]

    async def log_page(
        self, workspace_id: str, run_id: str, *, before_id: int | None = None, limit: int = 300
    ) -> tuple[list[LogRecord], int, int]:
        """At most `limit` of a run's entries before `before_id` (the newest without it), oldest
        first, with the run's count of entries and of those older than the page. Keyset reads
        on the log's (run_id, id) index: a page of a run with a million entries costs what a
        page of a small one does, plus two counts."""
        mine = sa.and_(LOG.c.workspace_id == workspace_id, LOG.c.run_id == run_id)
        newest = sa.select(LOG).where(mine)
        if before_id is not None:
            newest = newest.where(LOG.c.id < before_id)
        newest = newest.order_by(LOG.c.id.desc()).limit(limit)
        counted = sa.select(sa.func.count()).select_from(LOG).where(mine)
        async with self.read() as tx:
            rows = await tx._all(newest)
            records = [cv.log_record(r) for r in reversed(rows)]
            total = int((await tx.conn.execute(counted)).scalar_one())
            below = records[0].id if records else before_id
            if before_id is None:
                older = total - len(records)  # the newest page: all the rest is older
            elif below is None:
                older = 0
            else:
                older = int((await tx.conn.execute(counted.where(LOG.c.id < below))).scalar_one())
        return records, total, older

    async def tasks(
        self,
        workspace_id: str,
        *,
        states: Sequence[str] | None = None,
        run_id: str | None = None,
        tool: str | None = None,
        resolved_by: str | None = None,
        via: str | None = None,
        parked_only: bool = False,
        limit: int = 200,
        search: str | None = None,
        error_codes: Sequence[str] | None = None,
        not_error_codes: Sequence[str] | None = None,
    ) -> list[Task]:
        """Tasks of a workspace, newest first, filtered (history pages, exports).
        `parked_only`: only calls and questions that rested on a person (they had a deadline).
        `search`: text found, case-insensitively and literally, in the tool, the input, the
        effect profile or who decided. `error_codes` / `not_error_codes`: the ending's
        `error.code` is / is not one of them (none counts as not)."""
        stmt = sa.select(TASK).where(TASK.c.workspace_id == workspace_id)
        code = sa.func.coalesce(TASK.c.error["code"].as_string(), "")
        if error_codes is not None:
            stmt = stmt.where(code.in_(list(error_codes)))
        if not_error_codes is not None:
            stmt = stmt.where(code.not_in(list(not_error_codes)))
        if search:
            stmt = stmt.where(_search_clause(search))
        if states is not None:
            stmt = stmt.where(TASK.c.state.in_(list(states)))
        if run_id is not None:
            stmt = stmt.where(TASK.c.run_id == run_id)
        if tool is not None:
            stmt = stmt.where(TASK.c.tool == tool)
        if resolved_by is not None:
            stmt = stmt.where(TASK.c.resolved_by == resolved_by)
        if via is not None:
            stmt = stmt.where(TASK.c.via == via)
        if parked_only:
            stmt = stmt.where(TASK.c.deadline.is_not(None))
        stmt = stmt.order_by(TASK.c.created_at.desc(), TASK.c.id).limit(limit)
        return [cv.task(r) for r in await self._rows(stmt)]

    async def run_endings(
        self, workspace_id: str, run_ids: Sequence[str], actions: Sequence[str]
    ) -> dict[str, LogRecord]:
        """The latest log entry with one of `actions` for each of the runs that has one."""
        if not run_ids:
            return {}
        stmt = (
            sa.select(LOG)
            .where(
                LOG.c.workspace_id == workspace_id,
                LOG.c.run_id.in_(list(run_ids)),
                LOG.c.action.in_(list(actions)),
            )
            .order_by(LOG.c.id)
        )
        return {r["run_id"]: cv.log_record(r) for r in await self._rows(stmt)}

    async def first_tasks(self, run_ids: Sequence[str]) -> dict[str, Task]:
        """Each run's first call or question (task ids sort by creation): what tells runs
        with the same title apart on the runs list."""
        if not run_ids:
            return {}
        first = (
            sa.select(sa.func.min(TASK.c.id))
            .where(TASK.c.run_id.in_(list(run_ids)))
            .group_by(TASK.c.run_id)
        )
        stmt = sa.select(TASK).where(TASK.c.id.in_(first.scalar_subquery()))
        return {r["run_id"]: cv.task(r) for r in await self._rows(stmt)}

    async def runs(self, workspace_id: str, *, limit: int = 100) -> list[Run]:
        stmt = (
            sa.select(RUN)
            .where(RUN.c.workspace_id == workspace_id)
            .order_by(RUN.c.created_at.desc())
            .limit(limit)
        )
        return [cv.run(r) for r in await self._rows(stmt)]

    async def claim_outbox(self, now: datetime, limit: int, lease: float) -> list[OutboxItem]:
        """Lease up to `limit` due items so no other relay delivers them meanwhile."""
        async with self._bookkeeping() as tx:
            stmt = (
                sa.select(OUTBOX)
                .where(
                    OUTBOX.c.delivered_at.is_(None),
                    OUTBOX.c.next_attempt_at <= cv.ts(now),
                    OUTBOX.c.lease_until <= cv.ts(now),
                )
                .order_by(OUTBOX.c.id)
                .limit(limit)
            )
            if self.postgres:
                stmt = stmt.with_for_update(skip_locked=True)
            rows = await tx._all(stmt)
            if rows:
                await tx.conn.execute(
                    sa.update(OUTBOX)
                    .where(OUTBOX.c.id.in_([r["id"] for r in rows]))
                    .values(lease_until=cv.ts(now) + lease, attempts=OUTBOX.c.attempts + 1)
                )
        return [cv.outbox(r) for r in rows]

    async def outbox_done(self, item_id: str, at: datetime) -> None:
        async with self._bookkeeping() as tx:
            await tx.conn.execute(
                sa.update(OUTBOX).where(OUTBOX.c.id == item_id).values(delivered_at=cv.ts(at))
            )

    async def outbox_retry(self, item_id: str, next_at: datetime, error: str) -> None:
        async with self._bookkeeping() as tx:
            await tx.conn.execute(
                sa.update(OUTBOX)
                .where(OUTBOX.c.id == item_id)
                .values(next_attempt_at=cv.ts(next_at), lease_until=0.0, last_error=error[:500])
            )

    async def purge(self, before: datetime) -> int:
        """Drop bookkeeping nobody reads again: fired timers and delivered notifications older
        than `before`, and what chats kept for decisions settled before it (button ids, reply
        prompts, choices, message references), for digest pages closed before it, and web
        sessions that expired before it. A button
        pressed after that is answered as no longer valid. Tasks, events and the decision log
        (the audit trail) stay."""
        cutoff = cv.ts(before)
        dropped = 0
        async with self.write() as tx:
            statements = [
                sa.delete(TIMER).where(TIMER.c.done.is_(True), TIMER.c.due_at < cutoff),
                sa.delete(OUTBOX).where(
                    OUTBOX.c.delivered_at.is_not(None), OUTBOX.c.delivered_at < cutoff
                ),
                sa.delete(DIGEST).where(DIGEST.c.done.is_(True), DIGEST.c.updated_at < cutoff),
                sa.delete(WEB_SESSION).where(WEB_SESSION.c.expires_at < cutoff),
            ]
            for table in PER_TASK_CHAT:
                settled = sa.exists().where(
                    TASK.c.id == table.c.task_id,
                    TASK.c.state.not_in(PARKED_STATES),
                    TASK.c.decided_at < cutoff,
                )
                statements.append(sa.delete(table).where(settled))
            for statement in statements:
                dropped += int((await tx.conn.execute(statement)).rowcount)
        return dropped

    async def outbox_backlog(self) -> int:
        stmt = sa.select(sa.func.count()).select_from(OUTBOX).where(OUTBOX.c.delivered_at.is_(None))
        return int(await self._scalar(stmt))

    async def count_parked(self) -> int:
        stmt = sa.select(sa.func.count()).select_from(TASK).where(TASK.c.state.in_(PARKED_STATES))
        return int(await self._scalar(stmt))

    async def ping(self) -> bool:
        try:
            await self._scalar(sa.text("SELECT 1"))
        except Exception:
            return False
        return True

    async def close(self) -> None:
        await self.engine.dispose()
        if self.sqlite is not None:
            await self.sqlite.close()


# Whether the current PostgreSQL transaction has written (a transaction id is assigned at its
# first write); txid_current_if_assigned() rather than pg_current_xact_id_if_assigned(): 9.6+.
_WROTE = sa.text("SELECT txid_current_if_assigned() IS NOT NULL")


def _probe_value() -> str:
    """16 KB that PostgreSQL cannot compress away (it would store a repeated letter in a few
    bytes): random hexadecimal."""
    return secrets.token_hex(8192)


def _like_literal(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, its own % _ and \\ taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _search_clause(text: str) -> sa.ColumnElement[bool]:
    """The history search: bound parameters only. JSON columns are searched as their stored
    text, so the query is also tried as JSON writes it (quotes and backslashes escaped)."""
    as_json = jsontext.dumps(text)[1:-1]
    patterns = list(dict.fromkeys([_like_literal(text), _like_literal(as_json)]))
    columns: list[sa.ColumnElement[Any]] = [
        TASK.c.tool,
        TASK.c.tool_name,
        TASK.c.resolved_by,
        sa.cast(TASK.c.tool_input, sa.Text),
        sa.cast(TASK.c.effect_profile, sa.Text),
    ]
    return sa.or_(*(c.ilike(p, escape="\\") for c in columns for p in patterns))
