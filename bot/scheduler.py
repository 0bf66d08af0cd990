"""The clock loop: deadlines and nudges are rows in the store, not sleeping coroutines.

One loop per instance sleeps until the earliest due row (an indexed query), then claims due rows
in batches and acts on each exactly once. After a restart overdue rows fire at once. Memory does
not grow with the number of parks held.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from bot.background import BackgroundLoop
from bot.clock import Clock
from bot.service import ApprovalService

log = logging.getLogger(__name__)

# Rows due in another instance's write (SQLite shared file, PostgreSQL) are seen within this.
_IDLE_RECHECK = timedelta(seconds=5)
# Fired timers and delivered notifications are kept this long (for inspection), then dropped.
RETENTION = timedelta(days=7)
_PURGE_EVERY = timedelta(hours=1)


class Scheduler(BackgroundLoop):
    name = "approvalbot-clock"

    def __init__(self, service: ApprovalService, clock: Clock, batch: int = 1000) -> None:
        self.service = service
        self.clock = clock
        self.batch = batch
        self._wake = asyncio.Event()
        self._next_purge: datetime | None = None
        service.on_timers = self.wake

    def wake(self) -> None:
        self._wake.set()

    async def run_once(self) -> int:
        """Fire everything due now; return how many rows were claimed."""
        total = 0
        while True:
            fired = await self.service.fire_due(self.batch)
            total += fired
            if fired < self.batch:
                break
        now = self.clock.now()
        if self._next_purge is None or now >= self._next_purge:
            await self.service.store.purge(now - RETENTION)
            self._next_purge = now + _PURGE_EVERY
        return total

    async def _loop(self) -> None:
        while True:
            # Clear before looking, so a timer added while we look wakes the next round.
            self._wake.clear()
            try:
                await self.run_once()
                due = await self.service.store.next_timer_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("clock: firing due deadlines failed; retrying")
                due = None
                await asyncio.sleep(1)
            now = self.clock.now()
            until = min(due, now + _IDLE_RECHECK) if due is not None else now + _IDLE_RECHECK
            await self.clock.sleep_until(until, self._wake)
