"""The Notifier port for Telegram: posts decisions, shows endings, replies with nudges.

The outbox relay hands each item here, possibly more than once (a crash between sending and
marking it done) and possibly to two instances at once (a lease that ran out). What was sent is
recorded per task in `delivery_ref` and every step is claimed there first by compare-and-swap,
so a redelivered item finds its message and sends nothing, and two instances never both post:

    data = {"chat_id": …, "messages": [message ids], "digest": page id, "ended": bool,
            "nudges": {"0": message id}, "claims": {"post": until, "nudge:0": until}}

Telegram has no idempotency key, so one window stays: a send that Telegram applied but whose
answer was lost (a timeout after the fact) is sent again on retry.
"""

from __future__ import annotations

import html
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from telegram import Message

from adapters.telegram.format import esc
from bot.domain import OutboxItem, Run, Task
from bot.durations import format_duration
from bot.ports import Versioned

if TYPE_CHECKING:
    from adapters.telegram.adapter import Rendered, TelegramAdapter

log = logging.getLogger(__name__)

CHANNEL = "telegram"
_CLAIM_SECONDS = 120.0


class NotYet(Exception):
    """The step depends on another one still in flight (retried by the relay)."""


class TelegramNotifier:
    name = CHANNEL

    def __init__(self, adapter: TelegramAdapter) -> None:
        self.adapter = adapter

    async def healthy(self) -> bool:
        return self.adapter.running

    async def deliver(self, item: OutboxItem, task: Task, run: Run) -> None:
        chat_id = self.adapter.chat_for(task.workspace_id)
        if chat_id is None:
            if item.kind == "posted":  # remembered, so a chat configured later skips it too
                await self.adapter.chats.swap_ref(CHANNEL, task.id, {"skipped": True}, 0)
            return  # no chat configured for this workspace: nothing to show
        if not self.adapter.running:
            raise NotYet("the Telegram adapter is not running")
        if item.kind == "posted":
            await self.post(task, run, chat_id)
        elif item.kind == "ended":
            await self.show_ending(task)
        elif item.kind == "nudge":
            await self.nudge(task, run, int(item.payload.get("seq", 0)))

    # compare-and-swap helpers ------------------------------------------------------------------
    async def _ref(self, task_id: str) -> Versioned:
        ref = await self.adapter.chats.get_ref(CHANNEL, task_id)
        return ref or Versioned({}, 0)

    async def _update(self, task_id: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply `change` to the task's record, retrying on concurrent writers."""
        for _ in range(20):
            ref = await self._ref(task_id)
            data = dict(ref.data)
            change(data)
            if await self.adapter.chats.swap_ref(CHANNEL, task_id, data, ref.version):
                return
        raise RuntimeError("delivery record kept changing under us")

    async def _claim(self, task_id: str, step: str, done: Callable[[dict[str, Any]], bool]) -> bool:
        """Claim `step` for this instance: False if it is done or another instance holds it."""
        while True:
            ref = await self._ref(task_id)
            if done(ref.data):
                return False
            claims = dict(ref.data.get("claims", {}))
            if claims.get(step, 0.0) > time.time():
                raise NotYet(f"{step} in flight elsewhere")
            claims[step] = time.time() + _CLAIM_SECONDS
            data = {**ref.data, "claims": claims}
            if await self.adapter.chats.swap_ref(CHANNEL, task_id, data, ref.version):
                return True

    async def _release(self, task_id: str, step: str) -> None:
        def drop(data: dict[str, Any]) -> None:
            data["claims"] = {k: v for k, v in data.get("claims", {}).items() if k != step}

        await self._update(task_id, drop)

    async def _once(
        self,
        task_id: str,
        step: str,
        done: Callable[[dict[str, Any]], bool],
        act: Callable[[], Awaitable[Callable[[dict[str, Any]], None]]],
    ) -> None:
        """Claim, act, record (through the change `act` returns), release; at most once."""
        if not await self._claim(task_id, step, done):
            return
        try:
            record = await act()
        except BaseException:
            await self._release(task_id, step)
            raise

        def commit(data: dict[str, Any]) -> None:
            record(data)
            data["claims"] = {k: v for k, v in data.get("claims", {}).items() if k != step}

        await self._update(task_id, commit)

    # posting -----------------------------------------------------------------------------------
    async def post(self, task: Task, run: Run, chat_id: int) -> None:
        """Post the decision as the relay read it (an ending since then comes with its own
        item, which waits for this post). The hot path: one write to claim (with the buttons'
        ids), the send, one write to record it."""
        adapter = self.adapter
        claim = {"post": time.time() + _CLAIM_SECONDS}
        if not adapter.should_coalesce(chat_id):
            # The usual case, a first delivery: claim by creating the record, in the same
            # write as the buttons' ids; only if it exists already, look at it.
            rendered = await adapter.prepare(task, run, frozenset())
            claimed: dict[str, Any] = {"claims": claim}
            if await adapter.chats.swap_ref(
                CHANNEL, task.id, claimed, 0, rendered.callbacks, adapter.now()
            ):
                await self._send_post(task, chat_id, rendered, claimed, 1)
                return
        for _ in range(10):
            ref = await self._ref(task.id)
            if ref.data.get("messages") or ref.data.get("digest"):
                return  # delivered before (a redelivered item)
            if ref.data.get("claims", {}).get("post", 0.0) > time.time():
                raise NotYet("being posted elsewhere")
            if adapter.should_coalesce(chat_id):
                # Joining a digest is one transaction (page and ref together): no claim.
                size = adapter.tuning.digest_page_size
                seen = Versioned({**ref.data, "chat_id": chat_id}, ref.version)
                page = await adapter.chats.join_digest(
                    CHANNEL, str(chat_id), task.id, size, adapter.now(), seen
                )
                if page is not None:
                    adapter.digests.added(chat_id)
                    return
                continue
            rendered = await adapter.prepare(task, run, frozenset())
            claimed = {**ref.data, "claims": {**ref.data.get("claims", {}), **claim}}
            if await adapter.chats.swap_ref(
                CHANNEL, task.id, claimed, ref.version, rendered.callbacks, adapter.now()
            ):
                await self._send_post(task, chat_id, rendered, claimed, ref.version + 1)
                return
        raise NotYet("the delivery record kept changing")

    async def _send_post(
        self, task: Task, chat_id: int, rendered: Rendered, claimed: dict[str, Any], version: int
    ) -> None:
        """Send the claimed post and record its message (releasing the claim on failure)."""
        adapter = self.adapter
        adapter.remember(rendered.callbacks)
        try:
            message = await adapter.send(chat_id, rendered.text, markup=rendered.markup)
        except BaseException:
            await self._release(task.id, "post")
            raise

        def record(data: dict[str, Any]) -> None:
            data.update(chat_id=chat_id, messages=[message.message_id], ended=not task.parked)
            data["claims"] = {k: v for k, v in data.get("claims", {}).items() if k != "post"}

        done = dict(claimed)
        record(done)
        if not await adapter.chats.swap_ref(CHANNEL, task.id, done, version):
            await self._update(task.id, record)  # it changed meanwhile (a nudge's claim…)

    async def add_message(self, task_id: str, chat_id: int, message: Message) -> None:
        """Record one more message about the task (a digest entry expanded on its own)."""

        def add(data: dict[str, Any]) -> None:
            data.setdefault("chat_id", chat_id)
            data["messages"] = [*data.get("messages", []), message.message_id]

        await self._update(task_id, add)

    # endings -----------------------------------------------------------------------------------
    async def show_ending(self, task: Task) -> None:
        adapter = self.adapter
        ref = await self._ref(task.id)
        data = ref.data
        if data.get("skipped"):
            return  # posted nowhere: its workspace had no chat then
        if not (data.get("messages") or data.get("digest")):
            # Not posted yet: its "posted" item (older, so normally first) is pending or in
            # flight. Come back after it: it may post the waiting view.
            raise NotYet("the decision is not posted yet")
        chat_id = int(data["chat_id"])
        if data.get("digest") is not None:
            adapter.digests.touch(chat_id)
        if data.get("ended") or not data.get("messages"):
            return
        fresh = await adapter.task(task.id) or task
        run = await adapter.run(fresh.run_id)
        if run is None:
            return
        for message_id in data["messages"]:
            await adapter.refresh_message(chat_id, message_id, fresh, run, max_wait=30.0)

        def ended(d: dict[str, Any]) -> None:
            d["ended"] = True

        await self._update(task.id, ended)

    # nudges ------------------------------------------------------------------------------------
    async def nudge(self, task: Task, run: Run, seq: int) -> None:
        adapter = self.adapter
        fresh = await adapter.task(task.id) or task
        if not fresh.parked or fresh.deadline is None:
            return  # ended since the clock fired: the ending says it
        ref = await self._ref(task.id)
        if ref.data.get("skipped"):
            return
        if not (ref.data.get("messages") or ref.data.get("digest")):
            raise NotYet("the decision is not posted yet")
        chat_id = int(ref.data["chat_id"])
        key = str(seq)

        def nudged(data: dict[str, Any]) -> bool:
            return key in data.get("nudges", {})

        async def act() -> Callable[[dict[str, Any]], None]:
            messages = ref.data.get("messages") or []
            message_id = 0
            if messages:
                left = format_duration(fresh.deadline - adapter.now()) if fresh.deadline else ""
                mentions = await self._mentions(fresh.workspace_id)
                text = f"⏰ <b>{esc(fresh.tool)}</b> expires in {esc(left)}" + (
                    f" — {mentions}" if mentions else ""
                )
                sent = await adapter.send(chat_id, text, reply_to=int(messages[0]), max_wait=30.0)
                message_id = sent.message_id
            else:  # listed in a digest: the digest line shows the time left instead
                adapter.digests.touch(chat_id)

            def record(data: dict[str, Any]) -> None:
                data["nudges"] = {**data.get("nudges", {}), key: message_id}

            return record

        await self._once(task.id, f"nudge:{key}", nudged, act)

    async def _mentions(self, workspace_id: str) -> str:
        members = await self.adapter.members(workspace_id)
        return " ".join(
            f'<a href="tg://user?id={m.telegram_user_id}">{html.escape(m.name, quote=False)}</a>'
            for m in members
            if m.telegram_user_id is not None
        )
