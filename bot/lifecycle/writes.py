"""What a park and an ending write besides the task row: events, decision-log entries, timers
and notifications, in the transaction of the change. The clock loop (bot/scheduler.py) assembles
its batched endings and nudges from the same pieces."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.decisions import (
    Writes,
    already_decided,
    attention_event,
    log_entry,
    settled_event,
    work_available,
)
from bot.domain import (
    PARKED_STATES,
    Ending,
    NewEvent,
    OutboxItem,
    Principal,
    Run,
    Task,
    Timer,
    ordered_id,
)
from bot.lifecycle.base import ServiceBase
from bot.metrics import DECISION_LATENCY, DECISIONS
from bot.ports import Tx


class Recording(ServiceBase):
    """Assembles the writes of parks and endings."""

    async def _record_park(
        self, tx: Tx, run: Run, task: Task, principal: Principal | None, via: str
    ) -> None:
        """Everything a park writes besides the row: events, log, timers, notifications."""
        assert task.deadline is not None
        now = task.created_at
        if task.kind == "ask":
            question = task.tool_input
            first = NewEvent(
                run.id,
                "awaiting_human",
                {
                    "key": task.key,
                    "prompt": question.get("prompt"),
                    "options": question.get("options"),
                    "multi": bool(question.get("multi")),
                    "deadline": task.deadline.isoformat(),
                },
            )
        else:
            first = NewEvent(
                run.id,
                "approval_required",
                {
                    "key": task.key,
                    "tool": task.tool,
                    "why": task.why,
                    "deadline": task.deadline.isoformat(),
                },
            )
        events = [first, await self._attention(tx, run.id)]
        if task.addressee:
            events.append(work_available(task))
        await tx.add_events(events, now)
        action = "asked" if task.kind == "ask" else "parked"
        detail = {"why": task.why, "deadline": task.deadline.isoformat(), "matched": task.matched}
        await tx.add_log([log_entry(run, task, action, principal, via, detail)])
        await tx.add_timers(self._timers(task))
        if task.resolution_token_hash is None:
            await tx.add_outbox(self.outbox_items(task, "posted", now))

    async def _attention(self, tx: Tx, run_id: str) -> NewEvent:
        """`attention_required` naming every task of the run now resting on a person."""
        return attention_event(run_id, await tx.parked_keys(run_id))

    def _timers(self, task: Task) -> list[Timer]:
        assert task.deadline is not None
        timers = [Timer(f"{task.id}:deadline", task.id, task.run_id, "deadline", task.deadline)]
        for seq, before in enumerate(sorted(self.settings.nudge_before, reverse=True)):
            due = task.deadline - before
            if due > task.created_at:
                timers.append(
                    Timer(f"{task.id}:nudge:{seq}", task.id, task.run_id, "nudge", due, seq)
                )
        return timers

    def outbox_items(
        self, task: Task, kind: str, at: datetime, suffix: str = "", payload: Any = None
    ) -> list[OutboxItem]:
        return [
            OutboxItem(
                id=ordered_id("out"),
                channel=channel,
                kind=kind,  # type: ignore[arg-type]
                task_id=task.id,
                run_id=task.run_id,
                workspace_id=task.workspace_id,
                idempotency_key=f"{channel}:{task.id}:{kind}{suffix}",
                created_at=at,
                payload=payload or {},
            )
            for channel in self.channels
        ]

    async def _end(
        self,
        tx: Tx,
        run: Run,
        task: Task,
        ending: Ending,
        action: str,
        principal: Principal | None,
        detail: dict[str, Any] | None = None,
        batch: Writes | None = None,
    ) -> Task:
        """Compare-and-set the ending and write what goes with it; the loser gets
        `already_decided` naming the winner. With `batch`, the writes are collected for the
        caller to flush once (the clock ends many tasks per transaction)."""
        ended = await tx.end_task(task.id, PARKED_STATES, ending)
        if ended is None:
            current = await tx.get_task_by_id(task.id)
            raise already_decided(current or task)
        # Its timers are left to fire into nothing: touching timer rows here would lock them
        # in the opposite order to the clock loop (timer, then run).
        writes = batch or Writes()
        self.record_ending(run, ended, ending, action, principal, detail, writes)
        if batch is None:
            writes.events.append(await self._attention(tx, run.id))
            await writes.flush(tx, ending.at)
        return ended

    def record_ending(
        self,
        run: Run,
        ended: Task,
        ending: Ending,
        action: str,
        principal: Principal | None,
        detail: dict[str, Any] | None,
        writes: Writes,
    ) -> None:
        writes.events.append(settled_event(ended))
        writes.log.append(log_entry(run, ended, action, principal, ending.via, detail, ending.at))
        if ended.resolution_token_hash is None:
            writes.outbox.extend(self.outbox_items(ended, "ended", ending.at))
        DECISIONS.labels(outcome=ended.state, via=ending.via).inc()
        DECISION_LATENCY.observe((ending.at - ended.created_at).total_seconds())
