"""One transaction on the store's tables (implements bot.ports.Tx), for SQLite and PostgreSQL.

The statements of the hot path (an append) are prepared once and, on SQLite, run on the
driver's connection (store/prepared.py); the rest go through SQLAlchemy Core. Every ending is an
`UPDATE … WHERE state IN (…) RETURNING`, which lets exactly one of any number of concurrent
writers through.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain import (
    PARKED_STATES,
    Application,
    Ending,
    Executor,
    LogEntry,
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
    ChatRecordRow,
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
_INSERT_EVENT = prepared.insert(EVENT)
_NEXT_SEQ = (
    sa.select(sa.func.coalesce(sa.func.max(EVENT.c.seq), 0) + 1)
    .where(EVENT.c.run_id == sa.bindparam("run_id"))
    .scalar_subquery()
)
# A plain executemany: asking for the ids back would make SQLite insert row by row.
_INSERT_NEXT_EVENT = Prepared(
    sa.insert(EVENT).values(
        run_id=sa.bindparam("run_id"),
        seq=_NEXT_SEQ,
        name=sa.bindparam("name"),
        data=sa.bindparam("data", type_=EVENT.c.data.type),
        executor_id=sa.bindparam("executor_id"),
        created_at=sa.bindparam("created_at"),
    )
)
_INSERT_LOG = prepared.insert(LOG)
_INSERT_TIMER = prepared.insert(TIMER)
_INSERT_OUTBOX = prepared.insert(OUTBOX)


def _event_row(new: NewEvent, created_at: float) -> dict[str, Any]:
    return {
        "run_id": new.run_id,
        "name": new.name,
        "data": new.data,
        "executor_id": new.executor_id,
        "created_at": created_at,
    }


class SqlTx:
    """One transaction on one connection; implements bot.ports.Tx."""

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
        await self._insert(APPLICATION, cv.application_values(app))

    async def find_application(self, workspace_id: str, name: str) -> Application | None:
        row = await self._one(
            sa.select(APPLICATION).where(
                APPLICATION.c.workspace_id == workspace_id, APPLICATION.c.name == name
            )
        )
        return cv.application(row) if row else None

    async def get_application(self, application_id: str) -> Application | None:
        row = await self._one(sa.select(APPLICATION).where(APPLICATION.c.id == application_id))
        return cv.application(row) if row else None

    async def list_applications(self, workspace_id: str) -> list[Application]:
        stmt = sa.select(APPLICATION).where(APPLICATION.c.workspace_id == workspace_id)
        return [cv.application(r) for r in await self._all(stmt.order_by(APPLICATION.c.name))]

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
        # Their web sessions end with their tokens (rotation included), in the same write.
        await self.conn.execute(
            sa.update(WEB_SESSION)
            .where(WEB_SESSION.c.member_id == principal_id, WEB_SESSION.c.revoked_at.is_(None))
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
        if self.postgres:  # SQLite numbers events from the event index (add_events)
            await self._insert(RUN_SEQ, {"run_id": run.id, "workspace_id": run.workspace_id})

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
        if not events:
            return
        created_at = cv.ts(at)
        if not self.postgres:
            # SQLite has one writer at a time, so each event takes the number after its run's
            # last one straight from the (run_id, seq) index: no run_seq row to rewrite, which
            # was a statement and a WAL page more per commit. (The service never deletes events,
            # so numbers are never reused.) The event hub hears of the commit directly.
            await self._add_rows(_INSERT_NEXT_EVENT, [_event_row(n, created_at) for n in events])
            return
        by_run: dict[str, list[NewEvent]] = {}
        for new in events:
            by_run.setdefault(new.run_id, []).append(new)
        # On PostgreSQL the run_seq row's lock serialises concurrent writers of one run.
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
                _event_row(new, created_at) | {"seq": first + i} for i, new in enumerate(news)
            )
        await self._exec(_INSERT_EVENT, rows)
        fresh = [(w, r) for r, _, w in reserved if r not in self.notify_runs]
        if fresh:
            # NOTIFY inside the transaction is delivered exactly when it commits.
            await self.conn.execute(
                sa.text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) p"),
                {"channel": NOTIFY_CHANNEL, "payloads": [f"{w} {r}" for w, r in fresh]},
            )
        self.notify_runs.update(by_run)

    async def add_log(self, entries: Sequence[LogEntry]) -> None:
        if not entries:
            return
        await self._add_rows(
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
