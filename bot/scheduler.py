"""The clock loop: deadlines and nudges are rows in the store, not sleeping coroutines.

One loop per instance sleeps until the earliest due row (an indexed query), then claims due rows
in batches and acts on each exactly once: a nudge, or an expiry (one compare-and-set per kind
for the whole batch, so a person's ending and the deadline can never both win). After a restart
overdue rows fire at once. Memory does not grow with the number of parks held.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from bot import errors
from bot.background import BackgroundLoop, log_failure
from bot.clock import Clock
from bot.decisions import Writes, attention_event, log_entry, work_available
from bot.domain import PARKED_STATES, Ending, NewEvent, Run, Task, Timer
from bot.errors import StorageUnavailable
from bot.ports import Tx
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
            fired = await self.fire_due(self.batch)
            total += fired
            if fired < self.batch:
                break
        now = self.clock.now()
        if self._next_purge is None or now >= self._next_purge:
            await self.service.store.purge(now - RETENTION)
            self._next_purge = now + _PURGE_EVERY
        return total

    async def fire_due(self, limit: int = 200) -> int:
        """Act on every due deadline and nudge (claimed, so each fires once across instances)."""
        service = self.service
        now = self.clock.now()
        touched: dict[str, Run] = {}
        expiring: list[Task] = []
        writes = Writes()
        async with service.store.write() as tx:
            timers = await tx.claim_due_timers(now, limit)
            await tx.finish_timers([t.id for t in timers])
            tasks = {t.id: t for t in await tx.tasks_by_ids([t.task_id for t in timers])}
            # Runs are locked in id order so two instances' batches never deadlock.
            runs = await tx.lock_runs([t.run_id for t in timers])
            for timer in sorted(timers, key=lambda t: (t.run_id, t.due_at)):
                run = runs.get(timer.run_id)
                task = tasks.get(timer.task_id)
                if run is None or task is None or not task.parked or task.deadline is None:
                    continue
                touched[run.id] = run
                if timer.kind == "deadline":
                    expiring.append(task)
                elif task.deadline > now:  # a nudge; when expiring now, the ending says it
                    self._nudge(run, task, timer, now, writes)
            await self._expire(tx, touched, expiring, now, writes)
            # One attention_required per run for the whole batch, not one per ending.
            for run_id, parked in (await tx.parked_keys_of(list(touched))).items():
                writes.events.append(attention_event(run_id, parked))
            await writes.flush(tx, now)
        outbox = bool(writes.outbox) and bool(service.channels)
        for run in touched.values():
            service.after_commit(run, outbox=outbox)
        return len(timers)

    def _nudge(self, run: Run, task: Task, timer: Timer, now: datetime, writes: Writes) -> None:
        assert task.deadline is not None
        remaining = int((task.deadline - now).total_seconds())
        data = {"key": task.key, "deadline": task.deadline.isoformat(), "remaining": remaining}
        writes.events.append(NewEvent(run.id, "nudge", data))
        if task.addressee:
            writes.events.append(work_available(task))
        writes.log.append(log_entry(run, task, "nudged", None, "clock", data, at=now))
        if task.resolution_token_hash is None:
            payload = {"remaining": remaining, "seq": timer.seq}
            items = self.service.outbox_items(task, "nudge", now, f":{timer.seq}", payload)
            writes.outbox.extend(items)

    async def _expire(
        self,
        tx: Tx,
        runs: Mapping[str, Run],
        tasks: Sequence[Task],
        now: datetime,
        writes: Writes,
    ) -> None:
        """End every task whose deadline passed, with one compare-and-set per kind."""
        for kind, code, what in (
            ("tool_call", errors.APPROVAL_EXPIRED, "approval"),
            ("ask", errors.QUESTION_EXPIRED, "question"),
        ):
            ids = [t.id for t in tasks if t.kind == kind]
            if not ids:
                continue
            error = {"code": code, "detail": f"nobody answered the {what} in time"}
            ending = Ending("timed_out", now, None, "clock", error=error)
            for ended in await tx.end_tasks(ids, PARKED_STATES, ending):
                run = runs[ended.run_id]
                self.service.record_ending(run, ended, ending, "expired", None, None, writes)
                if kind == "tool_call" and ended.failure_policy != "hold":
                    continue
                held = await tx.set_run_state(run.id, ("running",), "held", ended.key)
                if held:
                    run.state = "held"
                    data = {"reason": code, "task_key": ended.key}
                    writes.events.append(NewEvent(run.id, "run_held", data))
                    writes.log.append(log_entry(run, ended, "run_held", None, "clock", data, now))

    async def _loop(self) -> None:
        while True:
            # Clear before looking, so a timer added while we look wakes the next round.
            self._wake.clear()
            try:
                await self.run_once()
                due = await self.service.store.next_timer_due()
            except asyncio.CancelledError:
                raise
            except StorageUnavailable:
                # A full disk, a read-only database: the store says so in the log, once, not
                # every round; nothing fired, so everything due is due again next round.
                due = None
            except Exception as error:
                log_failure(log, "clock: firing due deadlines", error)
                due = None
                await asyncio.sleep(1)
            now = self.clock.now()
            until = min(due, now + _IDLE_RECHECK) if due is not None else now + _IDLE_RECHECK
            await self.clock.sleep_until(until, self._wake)
