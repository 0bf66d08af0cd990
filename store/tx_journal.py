"""What goes with every change: events, decision-log entries, outbox items and timers
(bot.ports.JournalTx)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.domain import LogEntry, NewEvent, OutboxItem, Timer
from store import convert as cv
from store import prepared
from store.prepared import Prepared
from store.txbase import EVENT, LOG, NOTIFY_CHANNEL, OUTBOX, RUN_SEQ, TIMER, TxBase

_RESERVE_SEQ = Prepared(
    sa.update(RUN_SEQ)
    .where(RUN_SEQ.c.run_id == sa.bindparam("run"))
    .values(seq=RUN_SEQ.c.seq + sa.bindparam("n"))
    .returning(RUN_SEQ.c.run_id, RUN_SEQ.c.seq, RUN_SEQ.c.workspace_id)
)
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


class JournalTx(TxBase):
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
