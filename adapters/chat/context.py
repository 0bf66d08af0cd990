"""The core as a chat platform's collaborators see it.

Chat adapters are built before the core (the core needs their notifiers) and bound to it
after; `CoreLink` is that late binding, handed to every collaborator through its constructor
instead of each reaching back into a platform object.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from bot.domain import Member, Principal, Run, Task

if TYPE_CHECKING:
    from bot.core import Core
    from bot.service import ApprovalService


class CoreLink:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url  # the service's public address, for links in messages
        self._core: Core | None = None

    def bind(self, core: Core) -> None:
        self._core = core

    @property
    def core(self) -> Core:
        if self._core is None:
            raise RuntimeError("the chat adapter is not bound to a core yet")
        return self._core

    @property
    def service(self) -> ApprovalService:
        return self.core.service

    def now(self) -> datetime:
        return self.core.clock.now()

    async def task(self, task_id: str) -> Task | None:
        async with self.core.store.read() as tx:
            return await tx.get_task_by_id(task_id)

    async def run(self, run_id: str) -> Run | None:
        async with self.core.store.read() as tx:
            return await tx.get_run(run_id)

    async def parked_tasks(self, run_id: str) -> list[Task]:
        async with self.core.store.read() as tx:
            return await tx.parked_tasks(run_id)

    async def members(self, workspace_id: str) -> list[Member]:
        async with self.core.store.read() as tx:
            return await tx.list_members(workspace_id)

    async def member(
        self, workspace_id: str, *, telegram_user_id: int | None = None,
        slack_user_id: str | None = None,
    ) -> Principal | None:  # fmt: skip
        return await self.core.admin.member_by_chat(
            telegram_user_id=telegram_user_id, slack_user_id=slack_user_id,
            workspace_id=workspace_id,
        )  # fmt: skip
