"""Cross-instance wake-ups on PostgreSQL: LISTEN for the NOTIFY each event write sends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from store.sql import NOTIFY_CHANNEL

log = logging.getLogger(__name__)


class PgListener:
    """Keeps one LISTEN connection open and reconnects when it drops."""

    def __init__(
        self, url: str, on_event: Callable[[str, str], None], schema: str | None = None
    ) -> None:
        parsed = make_url(url)
        self._dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        self._on_event = on_event
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    def _callback(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        workspace_id, _, run_id = payload.partition(" ")
        self._on_event(workspace_id, run_id)

    async def _loop(self) -> None:
        while True:
            try:
                conn = await asyncpg.connect(self._dsn)
                try:
                    await conn.add_listener(NOTIFY_CHANNEL, self._callback)
                    self.connected.set()
                    while not conn.is_closed():
                        await asyncio.sleep(5)
                        await conn.execute("SELECT 1")
                finally:
                    self.connected.clear()
                    await conn.close()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.warning("LISTEN connection lost (%s); reconnecting", type(error).__name__)
                await asyncio.sleep(1)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="approvalbot-listen")
        await asyncio.wait_for(self.connected.wait(), timeout=10)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
