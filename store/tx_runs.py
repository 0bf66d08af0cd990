"""Runs, their tasks and the compare-and-set of every ending (bot.ports.RunTx); reviews are
store/tx_quorum.py's.

Every ending is an `UPDATE … WHERE state IN (…) RETURNING`, which lets exactly one of any number
of concurrent writers through."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.domain import PARKED_STATES, Ending, Run, RunState, Task, TaskState
from store import convert as cv
from store import prepared
from store.prepared import Prepared
from store.txbase import RUN, RUN_SEQ, TASK, TxBase

# The statements every append runs (store/prepared.py).
_RUN_STATE = sa.select(RUN.c.state, RUN.c.held_task_key, RUN.c.rules_version).where(
    RUN.c.id == sa.bindparam("run")
)
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
_INSERT_TASK = prepared.insert(TASK)


class RunTx(TxBase):
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
    ) -> tuple[RunState, str | None, int] | None:
        rows = await self._exec(_RUN_STATE_Q[for_update and self.postgres], {"run": run_id})
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    async def set_learned_rules(self, run_id: str, learned: Sequence[dict[str, Any]]) -> None:
        """Replace the run's learned rules and count the change (`rules_version`)."""
        await self.conn.execute(
            sa.update(RUN)
            .where(RUN.c.id == run_id)
            .values(learned_rules=list(learned), rules_version=RUN.c.rules_version + 1)
        )

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

    async def recent_calls(self, workspace_id: str, since: datetime, limit: int) -> list[Task]:
        """The workspace's tool calls since `since`, newest first (the replay of a proposal)."""
        stmt = (
            sa.select(TASK)
            .where(
                TASK.c.workspace_id == workspace_id,
                TASK.c.kind == "tool_call",
                TASK.c.created_at >= cv.ts(since),
            )
            .order_by(TASK.c.created_at.desc(), TASK.c.id.desc())
            .limit(limit)
        )
        return [cv.task(r) for r in await self._all(stmt)]

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
                approved_input=ending.approved_input,
            )
            .returning(*TASK.c)
        )
        return sorted((cv.task(r) for r in rows), key=lambda t: (t.run_id, t.created_at))
