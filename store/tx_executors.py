"""An application's executors and the tasks addressed to them (bot.ports.ExecutorTx)."""

from __future__ import annotations

import sqlalchemy as sa

from bot.domain import PARKED_STATES, Executor, Task
from store import convert as cv
from store.txbase import EXECUTOR, TASK, TxBase


class ExecutorTx(TxBase):
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
