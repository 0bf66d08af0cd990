"""The Store port on SQLAlchemy (async): SQLite through aiosqlite, PostgreSQL through asyncpg.

SQLite is a single writer: write transactions start with BEGIN IMMEDIATE (so a read never has
to upgrade to a write lock mid-transaction) and are serialised in-process by a lock. PostgreSQL
runs at READ COMMITTED; every ending is an `UPDATE … WHERE state IN (…) RETURNING`, which lets
exactly one of any number of concurrent writers through.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy import event as sa_event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import QueuePool

from bot import jsontext
from bot.domain import (
    PARKED_STATES,
    Application,
    Ending,
    Event,
    Executor,
    LogEntry,
    LogRecord,
    Member,
    NewEvent,
    OutboxItem,
    Principal,
    Run,
    RunState,
    Task,
    TaskState,
    Timer,
    Workspace,
)
from bot.ports import DuplicateKey
from store import convert as cv
from store import prepared
from store.prepared import Prepared
from store.tables import (
    ApplicationRow,
    ChatCallbackRow,
    ChatChoiceRow,
    ChatDigestRow,
    ChatPromptRow,
    CredentialRow,
    DecisionLogRow,
    DeliveryRefRow,
    EventRow,
    ExecutorRow,
    MemberRow,
    MetaRow,
    OutboxRow,
    ReviewRow,
    RunRow,
    RunSeqRow,
    TaskRow,
    TimerRow,
    WorkspaceRow,
)

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
# What chat adapters keep per decision (store/chat.py); purged with the rest of the bookkeeping.
PER_TASK_CHAT = tuple(
    row.__table__  # type: ignore[union-attr]
    for row in (ChatCallbackRow, ChatPromptRow, ChatChoiceRow, DeliveryRefRow)
)
DIGEST = ChatDigestRow.__table__  # type: ignore[attr-defined]

NOTIFY_CHANNEL = "approvalbot_events"
CHECKPOINT_EVERY = 64  # SQLite group commits between two PASSIVE checkpoints
log = logging.getLogger(__name__)

# The statements every append runs (store/prepared.py).
_RUN_STATE = sa.select(RUN.c.state, RUN.c.held_task_key).where(RUN.c.id == sa.bindparam("run"))
_RUN_STATE_Q = {False: Prepared(_RUN_STATE), True: Prepared(_RUN_STATE.with_for_update())}
_RUN = sa.select(RUN).where(RUN.c.id == sa.bindparam("run"))
_RUN_Q = {False: Prepared(_RUN), True: Prepared(_RUN.with_for_update())}
_TASK_BY_KEY = Prepared(
    sa.select(TASK).where(TASK.c.run_id == sa.bindparam("run"), TASK.c.key == sa.bindparam("key"))
)
_PARKED_KEYS = Prepared(
    sa.select(TASK.c.key, TASK.c.state)
    .where(
        TASK.c.run_id == sa.bindparam("run"),
        TASK.c.state.in_([sa.bindparam(f"parked{i}", s) for i, s in enumerate(PARKED_STATES)]),
    )
    .order_by(TASK.c.created_at, TASK.c.id)
)
_RESERVE_SEQ = Prepared(
    sa.update(RUN_SEQ)
    .where(RUN_SEQ.c.run_id == sa.bindparam("run"))
    .values(seq=RUN_SEQ.c.seq + sa.bindparam("n"))
    .returning(RUN_SEQ.c.run_id, RUN_SEQ.c.seq, RUN_SEQ.c.workspace_id)
)
_INSERT_TASK = prepared.insert(TASK)
_INSERT_EVENT = prepared.insert(EVENT, skip=("id",))
_INSERT_LOG = prepared.insert(LOG, skip=("id",))
_INSERT_TIMER = prepared.insert(TIMER)
_INSERT_OUTBOX = prepared.insert(OUTBOX)


def _sqlite_setup(engine: Engine, busy_ms: int, autocheckpoint: bool = True) -> None:
    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN out of the driver's hands so we can say BEGIN IMMEDIATE ourselves.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        if not autocheckpoint:
            cursor.execute("PRAGMA wal_autocheckpoint=0")
            cursor.execute(f"PRAGMA journal_size_limit={64 * 1024 * 1024}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa_event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        if mode != "BY_HAND":  # the writer connection (SqlStore._begin_write)
            conn.exec_driver_sql(f"BEGIN {mode}")


def make_engine(url: str, schema: str | None = None) -> AsyncEngine:
    if url.startswith("sqlite"):
        engine = create_async_engine(
            url, connect_args={"timeout": 30}, json_serializer=jsontext.dumps
        )
        _sqlite_setup(engine.sync_engine, 30_000)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+asyncpg://" + url.removeprefix("postgresql://")
    connect_args: dict[str, Any] = {}
    if schema:
        connect_args["server_settings"] = {"search_path": schema}
    return create_async_engine(
        url,
        pool_size=10,
        max_overflow=20,
        pool_pre_ping=True,
        connect_args=connect_args,
        json_serializer=jsontext.dumps,
    )


class _InlineConnection:
    """A blocking SQLite connection used straight from the event loop.

    SQLite statements on a local file take microseconds; a hop to aiosqlite's worker thread and
    back costs more than the statement itself, several times per statement. Writers wait for
    the file lock asynchronously (see SqlStore._begin_write), so the loop never blocks on it.
    """

    def __init__(self, conn: Connection) -> None:
        self.sync = conn

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        return self.sync.execute(statement, parameters)


class _CommitGroup:
    """One SQLite write transaction shared by the writers of one event-loop turn."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.driver: sqlite3.Connection = conn.connection.dbapi_connection  # type: ignore[assignment]
        self.tx = SqlTx(_InlineConnection(conn), False, self.driver)
        self.committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class _GroupWrite:
    """`SqlStore.write()` on SQLite (group commit): a writer joins the open group, or opens
    one, inside a savepoint of its own. It returns only once its group has committed, so
    nothing is acknowledged before it is durable; a writer that fails rolls back to its
    savepoint and leaves the others' work standing. (A class rather than a generator-based
    context manager: every write comes through here.)"""

    __slots__ = ("group", "store")

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.group: _CommitGroup | None = None

    async def __aenter__(self) -> SqlTx:
        store = self.store
        await store._write_lock.acquire()
        try:
            group = store._group
            if group is None:
                group = store._group = _CommitGroup(await store._begin_write())
                asyncio.get_running_loop().create_task(store._commit(group))
            group.driver.execute("SAVEPOINT w")
        except BaseException:
            store._write_lock.release()
            raise
        self.group = group
        return group.tx

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        group = self.group
        assert group is not None
        try:
            if kind is not None:
                group.driver.execute("ROLLBACK TO w")
            group.driver.execute("RELEASE w")
        finally:
            self.store._write_lock.release()
        if kind is None:
            await asyncio.shield(group.committed)


class SqlTx:
    """One transaction on one connection; implements bot.ports.Tx."""

    def __init__(
        self,
        conn: AsyncConnection | _InlineConnection,
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

    async def _insert(self, table: sa.Table, values: dict[str, Any]) -> None:
        try:
            # Values as parameters, not in the statement: the statement's compiled form is
            # then cached once instead of built anew for every row.
            await self.conn.execute(sa.insert(table), values)
        except IntegrityError as error:
            raise DuplicateKey(str(error.orig)) from None

    # identity and access -------------------------------------------------------------------
    async def get_workspace(self, workspace_id: str) -> Workspace | None:
        row = await self._one(sa.select(WORKSPACE).where(WORKSPACE.c.id == workspace_id))
        return cv.workspace(row) if row else None

    async def insert_workspace(self, workspace: Workspace) -> None:
        values = {"id": workspace.id, "name": workspace.name}
        await self._insert(WORKSPACE, values | {"created_at": cv.ts(workspace.created_at)})

    async def list_workspaces(self) -> list[Workspace]:
        return [cv.workspace(r) for r in await self._all(sa.select(WORKSPACE))]

    async def insert_member(self, member: Member) -> None:
        await self._insert(
            MEMBER,
            {
                "id": member.id,
                "workspace_id": member.workspace_id,
                "name": member.name,
                "telegram_user_id": member.telegram_user_id,
                "slack_user_id": member.slack_user_id,
                "created_at": 0.0,
            },
        )

    async def get_member(self, member_id: str) -> Member | None:
        row = await self._one(sa.select(MEMBER).where(MEMBER.c.id == member_id))
        return cv.member(row) if row else None

    async def find_member(
        self,
        workspace_id: str,
        *,
        name: str | None = None,
        telegram_user_id: int | None = None,
        slack_user_id: str | None = None,
    ) -> Member | None:
        stmt = sa.select(MEMBER).where(MEMBER.c.workspace_id == workspace_id)
        if name is not None:
            stmt = stmt.where(MEMBER.c.name == name)
        if telegram_user_id is not None:
            stmt = stmt.where(MEMBER.c.telegram_user_id == telegram_user_id)
        if slack_user_id is not None:
            stmt = stmt.where(MEMBER.c.slack_user_id == slack_user_id)
        row = await self._one(stmt.limit(1))
        return cv.member(row) if row else None

    async def list_members(self, workspace_id: str) -> list[Member]:
        stmt = sa.select(MEMBER).where(MEMBER.c.workspace_id == workspace_id)
        return [cv.member(r) for r in await self._all(stmt.order_by(MEMBER.c.name))]

    async def insert_application(self, app: Application) -> None:
        values = {"id": app.id, "workspace_id": app.workspace_id, "name": app.name}
        await self._insert(APPLICATION, values | {"created_at": 0.0})

    async def find_application(self, workspace_id: str, name: str) -> Application | None:
        row = await self._one(
            sa.select(APPLICATION).where(
                APPLICATION.c.workspace_id == workspace_id, APPLICATION.c.name == name
            )
        )
        return Application(row["id"], row["workspace_id"], row["name"]) if row else None

    async def insert_credential(
        self, *, credential_id: str, principal: Principal, token_hash: str, at: datetime
    ) -> None:
        await self._insert(
            CREDENTIAL,
            {
                "id": credential_id,
                "workspace_id": principal.workspace_id,
                "kind": principal.kind,
                "principal_id": principal.id,
                "principal_name": principal.name,
                "token_hash": token_hash,
                "created_at": cv.ts(at),
            },
        )

    async def principal_for_token(self, token_hash: str) -> Principal | None:
        row = await self._one(
            sa.select(CREDENTIAL).where(
                CREDENTIAL.c.token_hash == token_hash, CREDENTIAL.c.revoked_at.is_(None)
            )
        )
        if row is None:
            return None
        return Principal(
            kind=row["kind"],
            id=row["principal_id"],
            name=row["principal_name"],
            workspace_id=row["workspace_id"],
        )

    async def has_active_credential(self, principal_id: str) -> bool:
        stmt = (
            sa.select(CREDENTIAL.c.id)
            .where(CREDENTIAL.c.principal_id == principal_id, CREDENTIAL.c.revoked_at.is_(None))
            .limit(1)
        )
        return (await self.conn.execute(stmt)).first() is not None

    async def revoke_credentials(self, principal_id: str, at: datetime) -> int:
        result = await self.conn.execute(
            sa.update(CREDENTIAL)
            .where(CREDENTIAL.c.principal_id == principal_id, CREDENTIAL.c.revoked_at.is_(None))
            .values(revoked_at=cv.ts(at))
        )
        return int(result.rowcount)

    async def get_meta(self, key: str) -> str | None:
        row = await self._one(sa.select(META.c.value).where(META.c.key == key))
        return None if row is None else str(row["value"])

    async def set_meta(self, key: str, value: str) -> None:
        await self._insert(META, {"key": key, "value": value})

    # executors ------------------------------------------------------------------------------
    async def insert_executor(self, executor: Executor) -> None:
        await self._insert(
            EXECUTOR,
            {
                "id": executor.id,
                "workspace_id": executor.workspace_id,
                "application_id": executor.application_id,
                "name": executor.name,
                "created_at": 0.0,
            },
        )

    async def get_executor(self, executor_id: str) -> Executor | None:
        row = await self._one(sa.select(EXECUTOR).where(EXECUTOR.c.id == executor_id))
        return cv.executor(row) if row else None

    async def revoke_executor(self, executor_id: str) -> bool:
        result = await self.conn.execute(
            sa.update(EXECUTOR)
            .where(EXECUTOR.c.id == executor_id, EXECUTOR.c.revoked_at.is_(None))
            .values(revoked_at=1.0)
        )
        return bool(result.rowcount)

    async def clear_addressee(self, executor_id: str) -> list[Task]:
        rows = await self._all(
            sa.update(TASK)
            .where(TASK.c.addressee == executor_id, TASK.c.state.in_(PARKED_STATES))
            .values(addressee=None)
            .returning(*TASK.c)
        )
        return [cv.task(r) for r in rows]

    # runs and tasks -------------------------------------------------------------------------
    async def insert_run(self, run: Run) -> None:
        await self._insert(RUN, cv.run_values(run))
        await self._insert(RUN_SEQ, {"run_id": run.id, "workspace_id": run.workspace_id, "seq": 0})

    async def get_run(self, run_id: str, *, for_update: bool = False) -> Run | None:
        statement = _RUN_Q[for_update and self.postgres]
        rows = await self._exec(statement, {"run": run_id})
        return cv.run(statement.mapping(rows[0])) if rows else None

    async def get_run_state(
        self, run_id: str, *, for_update: bool = False
    ) -> tuple[RunState, str | None] | None:
        rows = await self._exec(_RUN_STATE_Q[for_update and self.postgres], {"run": run_id})
        return (rows[0][0], rows[0][1]) if rows else None

    async def set_run_state(
        self,
        run_id: str,
        from_states: Sequence[str],
        to_state: str,
        held_task_key: str | None = None,
    ) -> bool:
        result = await self.conn.execute(
            sa.update(RUN)
            .where(RUN.c.id == run_id, RUN.c.state.in_(list(from_states)))
            .values(state=to_state, held_task_key=held_task_key)
        )
        return bool(result.rowcount)

    async def insert_task(self, task: Task) -> None:
        await self._exec(_INSERT_TASK, cv.task_values(task))

    async def get_task(self, run_id: str, key: str) -> Task | None:
        rows = await self._exec(_TASK_BY_KEY, {"run": run_id, "key": key})
        return cv.task(_TASK_BY_KEY.mapping(rows[0])) if rows else None

    async def get_task_by_id(self, task_id: str) -> Task | None:
        row = await self._one(sa.select(TASK).where(TASK.c.id == task_id))
        return cv.task(row) if row else None

    async def tasks_by_ids(self, task_ids: Sequence[str]) -> list[Task]:
        if not task_ids:
            return []
        stmt = sa.select(TASK).where(TASK.c.id.in_(list(set(task_ids))))
        return [cv.task(r) for r in await self._all(stmt)]

    async def lock_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        """Read (and on PostgreSQL lock, in id order) several runs at once."""
        stmt = sa.select(RUN).where(RUN.c.id.in_(sorted(set(run_ids)))).order_by(RUN.c.id)
        if self.postgres:
            stmt = stmt.with_for_update()
        return {r["id"]: cv.run(r) for r in await self._all(stmt)}

    async def parked_keys_of(self, run_ids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        """(key, state) of the parked tasks of several runs, oldest first."""
        found: dict[str, list[tuple[str, str]]] = {run_id: [] for run_id in run_ids}
        stmt = (
            sa.select(TASK.c.run_id, TASK.c.key, TASK.c.state)
            .where(TASK.c.run_id.in_(list(found)), TASK.c.state.in_(PARKED_STATES))
            .order_by(TASK.c.created_at, TASK.c.id)
        )
        for row in (await self.conn.execute(stmt)).all():
            found[row.run_id].append((row.key, row.state))
        return found

    async def parked_keys(self, run_id: str) -> list[tuple[str, str]]:
        """(key, state) of the run's parked tasks, oldest first; cheaper than whole rows."""
        return [(key, state) for key, state in await self._exec(_PARKED_KEYS, {"run": run_id})]

    async def parked_tasks(self, run_id: str) -> list[Task]:
        stmt = sa.select(TASK).where(TASK.c.run_id == run_id, TASK.c.state.in_(PARKED_STATES))
        return [cv.task(r) for r in await self._all(stmt.order_by(TASK.c.created_at))]

    async def tasks_of_run(self, run_id: str) -> list[Task]:
        stmt = sa.select(TASK).where(TASK.c.run_id == run_id).order_by(TASK.c.created_at)
        return [cv.task(r) for r in await self._all(stmt)]

    async def count_tasks(self, run_id: str) -> int:
        stmt = sa.select(sa.func.count()).select_from(TASK).where(TASK.c.run_id == run_id)
        return int((await self.conn.execute(stmt)).scalar_one())

    async def end_task(
        self, task_id: str, from_states: Sequence[TaskState], ending: Ending
    ) -> Task | None:
        ended = await self.end_tasks([task_id], from_states, ending)
        return ended[0] if ended else None

    async def end_tasks(
        self, task_ids: Sequence[str], from_states: Sequence[TaskState], ending: Ending
    ) -> list[Task]:
        """The compare-and-set of every ending: ends those of `task_ids` still in
        `from_states` and returns them; any other writer's ending already stands."""
        if not task_ids:
            return []
        rows = await self._all(
            sa.update(TASK)
            .where(TASK.c.id.in_(list(task_ids)), TASK.c.state.in_(list(from_states)))
            .values(
                state=ending.state,
                decided_at=cv.ts(ending.at),
                resolved_by=ending.resolved_by,
                via=ending.via,
                error=ending.error,
                resolution=ending.resolution,
            )
            .returning(*TASK.c)
        )
        return sorted((cv.task(r) for r in rows), key=lambda t: (t.run_id, t.created_at))

    async def add_review(
        self,
        *,
        task_id: str,
        member: Principal,
        verdict: str,
        reason: str,
        via: str,
        at: datetime,
    ) -> int:
        await self._insert(
            REVIEW,
            {
                "task_id": task_id,
                "member_id": member.id,
                "member_name": member.name,
                "verdict": verdict,
                "reason": reason,
                "via": via,
                "created_at": cv.ts(at),
            },
        )
        stmt = (
            sa.select(sa.func.count())
            .select_from(REVIEW)
            .where(REVIEW.c.task_id == task_id, REVIEW.c.verdict == verdict)
        )
        return int((await self.conn.execute(stmt)).scalar_one())

    # events, log, outbox, timers ---------------------------------------------------------------
    async def add_events(self, events: Sequence[NewEvent], at: datetime) -> None:
        by_run: dict[str, list[NewEvent]] = {}
        for new in events:
            by_run.setdefault(new.run_id, []).append(new)
        if not by_run:
            return
        # Reserving the sequence numbers on the run's run_seq row orders events per run on
        # both databases (on PostgreSQL its row lock serialises concurrent writers of one run).
        if len(by_run) == 1:
            # The common case, with a statement whose compiled form is cached.
            [(run_id, news)] = by_run.items()
            reserved = await self._exec(_RESERVE_SEQ, {"run": run_id, "n": len(news)})
        else:
            # The clock's batches touch hundreds of runs: one statement, not one per run.
            bump = sa.case({r: len(news) for r, news in by_run.items()}, value=RUN_SEQ.c.run_id)
            reserved = (
                await self.conn.execute(
                    sa.update(RUN_SEQ)
                    .where(RUN_SEQ.c.run_id.in_(sorted(by_run)))
                    .values(seq=RUN_SEQ.c.seq + bump)
                    .returning(RUN_SEQ.c.run_id, RUN_SEQ.c.seq, RUN_SEQ.c.workspace_id)
                )
            ).all()
        rows: list[dict[str, Any]] = []
        for run_id, last, _workspace in reserved:
            news = by_run[run_id]
            first = last - len(news) + 1
            rows.extend(
                {
                    "run_id": run_id,
                    "seq": first + i,
                    "name": new.name,
                    "data": new.data,
                    "executor_id": new.executor_id,
                    "created_at": cv.ts(at),
                }
                for i, new in enumerate(news)
            )
        # A plain executemany: asking for the ids back would make SQLite insert row by row.
        await self._exec(_INSERT_EVENT, rows)
        fresh = [(w, r) for r, _, w in reserved if r not in self.notify_runs]
        if self.postgres and fresh:
            # NOTIFY inside the transaction is delivered exactly when it commits.
            await self.conn.execute(
                sa.text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) p"),
                {"channel": NOTIFY_CHANNEL, "payloads": [f"{w} {r}" for w, r in fresh]},
            )
        self.notify_runs.update(by_run)

    async def add_log(self, entries: Sequence[LogEntry]) -> None:
        if not entries:
            return
        await self._exec(
            _INSERT_LOG,
            [
                {
                    "workspace_id": e.workspace_id,
                    "run_id": e.run_id,
                    "task_key": e.task_key,
                    "action": e.action,
                    "actor": e.actor,
                    "via": e.via,
                    "detail": e.detail,
                    "at": cv.ts(e.at),
                }
                for e in entries
            ],
        )

    async def add_outbox(self, items: Sequence[OutboxItem]) -> None:
        if not items:
            return
        rows = [
            {
                "id": i.id,
                "channel": i.channel,
                "kind": i.kind,
                "task_id": i.task_id,
                "run_id": i.run_id,
                "workspace_id": i.workspace_id,
                "idempotency_key": i.idempotency_key,
                "payload": i.payload,
                "created_at": cv.ts(i.created_at),
                "attempts": 0,
                "next_attempt_at": cv.ts(i.created_at),
            }
            for i in items
        ]
        await self._exec(_INSERT_OUTBOX, rows)

    async def add_timers(self, timers: Sequence[Timer]) -> None:
        if not timers:
            return
        await self._exec(
            _INSERT_TIMER,
            [
                {
                    "id": t.id,
                    "task_id": t.task_id,
                    "run_id": t.run_id,
                    "kind": t.kind,
                    "seq": t.seq,
                    "due_at": cv.ts(t.due_at),
                    "done": False,
                }
                for t in timers
            ],
        )

    async def cancel_timers(self, task_id: str) -> None:
        await self.conn.execute(
            sa.update(TIMER)
            .where(TIMER.c.task_id == task_id, TIMER.c.done.is_(False))
            .values(done=True)
        )

    async def claim_due_timers(self, now: datetime, limit: int) -> list[Timer]:
        stmt = (
            sa.select(TIMER)
            .where(TIMER.c.done.is_(False), TIMER.c.due_at <= cv.ts(now))
            .order_by(TIMER.c.due_at, TIMER.c.run_id)  # index order; groups a batch by run
            .limit(limit)
        )
        if self.postgres:
            stmt = stmt.with_for_update(skip_locked=True)
        return [cv.timer(r) for r in await self._all(stmt)]

    async def finish_timers(self, timer_ids: Sequence[str]) -> None:
        if timer_ids:
            stmt = sa.update(TIMER).where(TIMER.c.id.in_(list(timer_ids))).values(done=True)
            await self.conn.execute(stmt)


class SqlStore:
    """Implements bot.ports.Store."""

    # SQLite: WAL pages (4 KiB, so 256 MB) before writers wait for a full checkpoint, which
    # takes 7-12 ms here. Measured with bench/api_bench.py at ~80 MB of WAL a second: 4,000
    # pages gave 15% fewer granted calls a second than 16,000, and 64,000 a p99 lower by 1-3 ms
    # (writers wait once in 3 s instead of every 0.8 s). After a checkpoint the file is cut
    # back to 64 MB (journal_size_limit).
    wal_limit_pages = 64000

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        self.url = url
        self.schema = schema
        self.engine = make_engine(url, schema)
        self.postgres = self.engine.dialect.name == "postgresql"
        self._write_lock = asyncio.Lock()
        self._group: _CommitGroup | None = None
        self._inline: Engine | None = None
        if not self.postgres:
            # Short busy timeout: a writer in another process is waited for asynchronously.
            self._inline = create_engine(
                url.replace("+aiosqlite", ""), poolclass=QueuePool, json_serializer=jsontext.dumps
            )
            # Checkpoints (copying the WAL back into the database, with fsyncs) run on a worker
            # thread (`_checkpoint_soon`): done by the committing writer, as SQLite does by
            # default, one commit in ~100 would stall the event loop for milliseconds.
            _sqlite_setup(self._inline, 20, autocheckpoint=False)
        self._writer: Connection | None = None
        self._commits = 0
        self._wal_full = False
        self._checkpointing: asyncio.Future[None] | None = None

    async def _begin_write(self) -> Connection:
        """BEGIN IMMEDIATE on the one connection this process writes with. Its transactions
        are driven on SQLite's own connection: through SQLAlchemy (a pool checkout, events, a
        reset on return) a group's BEGIN and COMMIT cost more than several of its statements.
        SQLAlchemy sees one transaction that never ends, so it never begins one of its own."""
        if self._writer is None:
            assert self._inline is not None
            self._writer = self._inline.connect()
            self._writer.execution_options(sqlite_begin="BY_HAND").begin()
        driver = self._writer.connection.dbapi_connection
        assert driver is not None
        delay = 0.002
        for _ in range(3000):
            try:
                driver.execute("BEGIN IMMEDIATE")
                return self._writer
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) and "busy" not in str(error):
                    raise
            await asyncio.sleep(delay)
            delay = min(0.05, delay * 2)
        raise TimeoutError("the SQLite database stayed locked by another process")

    def write(self) -> AbstractAsyncContextManager[SqlTx]:
        # SQLite: group commit. Writers that run in the same turn of the event loop share one
        # transaction and one COMMIT (_GroupWrite).
        return self._pg_write() if self._inline is None else _GroupWrite(self)

    @asynccontextmanager
    async def _pg_write(self) -> AsyncIterator[SqlTx]:
        async with self.engine.begin() as conn:
            yield SqlTx(conn, self.postgres)

    async def _commit(self, group: _CommitGroup) -> None:
        """Scheduled when a group opens; it queues for the write lock behind the writers that
        are already due to run, so every one of them joins the group first."""
        async with self._write_lock:
            self._group = None
            # Committing on a thread was measured slower: the thread then waits for the GIL
            # (up to the 5 ms switch interval) while every writer of the group waits for it.
            try:
                group.driver.commit()
            except Exception as error:  # every writer of the group hears of it
                group.committed.set_exception(error)
                # Start afresh: the next group gets a new connection.
                self._writer, broken = None, self._writer
                if broken is not None:
                    broken.close()  # rolls back what is left
            else:
                group.committed.set_result(None)
            self._commits += 1
            if self._wal_full:
                # Still holding the write lock: no writer of ours can start meanwhile, so the
                # checkpoint gets SQLite's writer lock at once. The loop itself runs on.
                self._wal_full = False
                await self._checkpoint("RESTART")
            elif self._commits % CHECKPOINT_EVERY == 0 and self._checkpointing is None:
                self._checkpointing = asyncio.ensure_future(self._checkpoint("PASSIVE"))

    async def _checkpoint(self, mode: str) -> None:
        """Copy the WAL back into the database on a worker thread (the copy and its fsync
        would stall the loop for milliseconds). PASSIVE, every CHECKPOINT_EVERY commits, copies
        what it can without blocking anyone; but under steady writes it never catches up, and
        the WAL starts over only once all of it is copied. So once the WAL is past
        `wal_limit_pages`, the next commit runs a RESTART checkpoint while it still holds the
        write lock, and the writer after it starts the WAL from the beginning."""
        path = self._inline.url.database if self._inline is not None else None
        if not path:
            return

        def checkpoint() -> int:
            # A short busy timeout: a RESTART waits for readers, and writers wait for it.
            with closing(sqlite3.connect(path, timeout=0.2)) as conn:
                row = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            return int(row[1])

        try:
            pages = await asyncio.get_running_loop().run_in_executor(None, checkpoint)
        except Exception as error:  # a missed checkpoint is tried again later
            log.warning("WAL checkpoint (%s) failed: %s", mode, type(error).__name__)
        else:
            self._wal_full = mode == "PASSIVE" and pages > self.wal_limit_pages
        finally:
            if mode == "PASSIVE":
                self._checkpointing = None

    @asynccontextmanager
    async def read(self) -> AsyncIterator[SqlTx]:
        if self._inline is None:
            async with self.engine.connect() as conn:
                yield SqlTx(conn, self.postgres)
            return
        with self._inline.connect() as inline:
            yield SqlTx(_InlineConnection(inline), self.postgres)

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

    async def asks(self, workspace_id: str, *, run_id: str | None = None) -> list[Task]:
        stmt = sa.select(TASK).where(
            TASK.c.workspace_id == workspace_id, TASK.c.state.in_(PARKED_STATES)
        )
        if run_id is not None:
            stmt = stmt.where(TASK.c.run_id == run_id)
        stmt = stmt.order_by(TASK.c.created_at.desc())
        return [cv.task(r) for r in await self._rows(stmt)]

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
    ) -> list[Task]:
        """Tasks of a workspace, newest first, filtered (history pages, exports).
        `parked_only`: only calls and questions that rested on a person (they had a deadline)."""
        stmt = sa.select(TASK).where(TASK.c.workspace_id == workspace_id)
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
        prompts, choices, message references) and for digest pages closed before it. A button
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
        if self._checkpointing is not None:
            await asyncio.wait([self._checkpointing])  # its failure is logged, not raised here
        await self.engine.dispose()
        if self._writer is not None:
            self._writer.close()
        if self._inline is not None:
            self._inline.dispose()
