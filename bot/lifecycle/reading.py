"""Reads of runs and tasks, the inbox of asks, and long-poll waiting for an ending."""

from __future__ import annotations

import asyncio
from datetime import datetime

from bot import access
from bot.domain import Event, Principal, Run, Task
from bot.lifecycle.base import ServiceBase


class Reading(ServiceBase):
    """Reads and waits."""

    async def get_run(self, principal: Principal, workspace_id: str, run_id: str) -> Run:
        access.check_workspace(principal, workspace_id)
        async with self.store.read() as tx:
            return await self._run(tx, workspace_id, run_id, lock=False)

    async def get_task(
        self, principal: Principal, workspace_id: str, run_id: str, key: str
    ) -> Task:
        access.check_workspace(principal, workspace_id)
        async with self.store.read() as tx:
            return await self._task(tx, workspace_id, run_id, key)

    async def wait_task(
        self, principal: Principal, workspace_id: str, run_id: str, key: str, timeout: float
    ) -> Task:
        """Return as soon as the task leaves its waiting state, or after `timeout` seconds."""

        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            gate = self.hub.gate(f"run:{run_id}")
            task = await self.get_task(principal, workspace_id, run_id, key)
            remaining = deadline - loop.time()
            if not task.parked or remaining <= 0:
                return task
            # The short cap covers writers in other processes that share a SQLite file.
            await self.hub.wait(gate, min(remaining, 1.0))

    async def asks(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        run_id: str | None = None,
        limit: int | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[Task]:
        """Every decision now resting on a person (an author ask with a token rests on its
        client instead), newest first; `limit`/`before` page through them (keyset)."""
        access.check_workspace(principal, workspace_id)
        return await self.store.asks(workspace_id, run_id=run_id, limit=limit, before=before)

    async def ask_counts(
        self, principal: Principal, workspace_id: str
    ) -> list[tuple[str, int, datetime]]:
        """How many decisions wait in each run: (run_id, waiting, newest), newest run first."""
        access.check_workspace(principal, workspace_id)
        return await self.store.ask_counts(workspace_id)

    async def events_after(self, run_id: str, seq: int) -> list[Event]:
        return await self.store.events_after(run_id, seq)
