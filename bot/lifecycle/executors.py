"""An application's executors: registering, reading and revoking them."""

from __future__ import annotations

from bot import access
from bot.decisions import invalid, not_found
from bot.domain import Executor, LogEntry, Principal, new_id
from bot.lifecycle.base import ServiceBase


class Executors(ServiceBase):
    """Executor CRUD."""

    async def register_executor(
        self, principal: Principal, workspace_id: str, name: str
    ) -> Executor:
        access.check_workspace(principal, workspace_id)
        access.require_application(principal, "executors belong to an application credential")
        if not name or len(name) > 200:
            raise invalid("name: 1-200 characters")
        executor = Executor(new_id("exe"), workspace_id, principal.id, name)
        async with self.store.write() as tx:
            await tx.insert_executor(executor)
        return executor

    async def executor(self, principal: Principal, workspace_id: str, executor_id: str) -> Executor:
        access.check_workspace(principal, workspace_id)
        async with self.store.read() as tx:
            executor = await tx.get_executor(executor_id)
        if executor is None or executor.workspace_id != workspace_id:
            raise not_found("executor")
        if principal.is_member or executor.application_id != principal.id:
            raise not_found("executor")
        return executor

    async def revoke_executor(
        self, principal: Principal, workspace_id: str, executor_id: str
    ) -> int:
        """Revoke: its parked rows lose their addressee but stay decidable by people."""
        executor = await self.executor(principal, workspace_id, executor_id)
        now = self.clock.now()
        async with self.store.write() as tx:
            await tx.revoke_executor(executor.id)
            cleared = await tx.clear_addressee(executor.id)
            entry = LogEntry(
                workspace_id, "executor_revoked", principal.name, "api", now,
                detail={"executor_id": executor.id, "cleared": [t.key for t in cleared]},
            )  # fmt: skip
            await tx.add_log([entry])
        return len(cleared)
