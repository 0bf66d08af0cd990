"""A loop that runs as one asyncio task beside the service, started and stopped with it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback


def log_failure(log: logging.Logger, what: str, error: BaseException) -> None:
    """A failure as the log may hold it: the operation, the exception's type and its stack
    frames; never its message, which for a database error carries the SQL and its parameters
    (tool inputs, tokens' hashes)."""
    frames = "".join(traceback.format_tb(error.__traceback__))
    log.error("%s failed: %s; retrying\n%s", what, type(error).__name__, frames)


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
