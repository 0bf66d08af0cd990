"""Delivers outbox notifications after commit, with retries and backoff.

Items are leased (so two instances never deliver the same item at once) and marked done after
the notifier returns. A crash between delivery and marking hands the item out again; notifiers
make that harmless by keying what they send on `idempotency_key`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import timedelta

from bot.background import BackgroundLoop, log_failure
from bot.clock import Clock
from bot.errors import StorageUnavailable
from bot.metrics import NOTIFICATIONS
from bot.ports import Notifier, Store

log = logging.getLogger(__name__)


class OutboxRelay(BackgroundLoop):
    name = "approvalbot-relay"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        notifiers: Mapping[str, Notifier],
        *,
        batch: int = 50,
        lease: float = 60.0,
        max_backoff: float = 300.0,
        poll: float = 1.0,
    ) -> None:
        self.store = store
        self.clock = clock
        self.notifiers = dict(notifiers)
        self.batch = batch
        self.lease = lease
        self.max_backoff = max_backoff
        self.poll = poll
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run_once(self) -> int:
        """Deliver what is due now; return how many items were attempted."""
        items = await self.store.claim_outbox(self.clock.now(), self.batch, self.lease)
        for item in items:
            notifier = self.notifiers.get(item.channel)
            try:
                if notifier is None:
                    raise RuntimeError(f"no notifier for channel {item.channel!r}")
                async with self.store.read() as tx:
                    task = await tx.get_task_by_id(item.task_id)
                    run = await tx.get_run(item.run_id)
                if task is None or run is None:
                    raise RuntimeError("task or run vanished")
                await notifier.deliver(item, task, run)
            except (asyncio.CancelledError, StorageUnavailable):
                raise  # a storage fault stops the round: nothing can be marked (see _loop)
            except Exception as error:  # one bad item must not stop the others
                backoff = min(self.max_backoff, 0.5 * 2 ** min(item.attempts, 20))
                await self.store.outbox_retry(
                    item.id, self.clock.now() + timedelta(seconds=backoff), type(error).__name__
                )
                NOTIFICATIONS.labels(channel=item.channel, result="retry").inc()
                log.warning(
                    "delivery of %s to %s failed (%s), retry in %.1fs",
                    item.kind, item.channel, type(error).__name__, backoff,
                )  # fmt: skip
                continue
            await self.store.outbox_done(item.id, self.clock.now())
            NOTIFICATIONS.labels(channel=item.channel, result="delivered").inc()
        return len(items)

    async def _loop(self) -> None:
        while True:
            # Clear before the round, not after: a wake-up during the round (a new item
            # committed meanwhile) must start the next round at once, not after `poll`.
            self._wake.clear()
            try:
                count = await self.run_once()
            except asyncio.CancelledError:
                raise
            except StorageUnavailable:
                # A full disk, a read-only database: the store says so in the log, once, not
                # every round. Leased items are handed out again when their lease ends.
                count = 0
            except Exception as error:
                log_failure(log, "outbox relay", error)
                count = 0
            if count >= self.batch:
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll)
            except TimeoutError:
                pass
