"""A loop that runs as one asyncio task beside the service, started and stopped with it."""

from __future__ import annotations

import asyncio
import contextlib


class BackgroundLoop:
    name = "approvalbot-loop"
    _task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
