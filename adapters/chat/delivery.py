"""The Notifier port for every chat platform: posts decisions, shows endings, sends nudges.

The outbox relay hands each item here, possibly more than once (a crash between sending and
marking it done) and possibly to two instances at once (a lease that ran out). What was sent is
recorded per decision in its delivery record (records.py) and every step is claimed there
first by compare-and-swap, so a redelivered item finds its message and sends nothing, and two
instances never both post. A post that failed in a way that may have sent it after all (a
timeout) is retried with `maybe_sent`, so a platform that can look for it does so first.

Where a decision goes is the configured routes' choice (routing.py): its own message goes to
the first place, copies to the others (places.py); endings, counts and reminders reach them all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

from adapters.chat.cards import Cards
from adapters.chat.context import CoreLink
from adapters.chat.places import Places
from adapters.chat.port import (
    MessageRef,
    Notice,
    NotYet,
    Place,
    Platform,
    Post,
    Press,
    Unreachable,
)
from adapters.chat.records import Delivery, swap, until_won
from adapters.chat.routing import DEFAULT, Routed, Router, Routing
from bot.domain import OutboxItem, Run, Task
from bot.durations import format_duration
from bot.ports import ChatCallback, ChatState, Versioned

log = logging.getLogger(__name__)


class Coalescer(Protocol):
    """Digests: many decisions on one message when a place gets more than it can take."""

    async def should_coalesce(self, place: Place) -> bool: ...

    async def join(self, task: Task, place: Place, seen: Versioned) -> bool:
        """List the task on the place's digest page, recording it in the delivery record
        (still at `seen.version`) in the same write; False if the record moved on."""
        ...

    def touch(self, place: Place) -> None:
        """Something listed on a page of this place changed: refresh it soon."""
        ...


class ChatNotifier:
    def __init__(
        self, platform: Platform, chats: ChatState, link: CoreLink, cards: Cards,
        coalescer: Coalescer | None = None, routing: Routing | None = None,
    ) -> None:  # fmt: skip
        self.platform = platform
        self.name = platform.name
        self.chats = chats
        self.link = link
        self.cards = cards
        self.coalescer = coalescer
        self.routing = routing or Routing(Router(), 0)
        self.places = Places(platform, chats, link, cards)

    async def healthy(self) -> bool:
        return await self.platform.healthy()

    async def deliver(self, item: OutboxItem, task: Task, run: Run) -> None:
        routed = self.routing.router.route(task, run)
        if routed is None and self.platform.place_for(task.workspace_id) is None:
            if item.kind == "posted":  # remembered, so a place configured later skips it too
                await self.chats.swap_ref(self.name, task.id, {"skipped": True}, 0)
            return  # nowhere to show this workspace's decisions
        places: list[Place] = []
        if item.kind == "posted":
            targets = routed.to if routed is not None else (DEFAULT,)
            places = await self.places.resolve(task.workspace_id, targets)
            if not places:  # routed, but to none of this platform's chats
                await self.chats.swap_ref(self.name, task.id, {"skipped": True}, 0)
                return
        if not await self.platform.healthy():
            raise NotYet(f"the {self.name} adapter is not running")
        if item.kind == "posted":
            await self.post(task, run, places[0])
            await self.places.post(task, run, places[1:])
        elif item.kind == "ended":
            await self.show_ending(task)
        elif item.kind == "nudge":
            await self.nudge(task, int(item.payload.get("seq", 0)), run, routed)
        elif item.kind == "reviewed":
            await self.show_progress(task)

    # the delivery record -------------------------------------------------------------------------
    async def record(self, task_id: str) -> Versioned:
        return await self.chats.get_ref(self.name, task_id) or Versioned({}, 0)

    async def update(self, task_id: str, change: Any) -> None:
        """Apply `change` (Delivery -> Delivery) to the task's record, whatever its version."""
        await swap(
            lambda: self.chats.get_ref(self.name, task_id),
            lambda data, version: self.chats.swap_ref(self.name, task_id, data, version),
            lambda data: change(Delivery.of(data)).data(),
        )

    async def _coalesce(self, place: Place) -> bool:
        return self.coalescer is not None and await self.coalescer.should_coalesce(place)

    # posting -----------------------------------------------------------------------------------
    async def post(self, task: Task, run: Run, place: Place) -> None:
        """Post the decision as the relay read it (an ending since then comes with its own
        item, which waits for this post). The hot path: one write to claim (with the buttons'
        ids), the send, one write to record it."""
        if not await self._coalesce(place):
            # The usual case, a first delivery: claim by creating the record, in the same
            # write as the buttons' ids; only if it exists already, look at it.
            post, missing = await self.cards.render(task, run, place.chat, frozenset())
            claimed = Delivery(attempts=1).claim("post", time.time())
            if await self.chats.swap_ref(
                self.name, task.id, claimed.data(), 0, missing, self.link.now()
            ):
                await self._send_post(task, run, place, post, missing, claimed, 1)
                return

        async def claim_and_send() -> tuple[bool, None]:
            seen = await self.record(task.id)
            delivery = Delivery.of(seen.data)
            if delivery.shown:
                return True, None  # delivered before (a redelivered item)
            if delivery.claimed("post", time.time()):
                raise NotYet("being posted elsewhere")
            if not delivery.attempts and await self._coalesce(place):
                # Joining a digest is one transaction (page and record together): no claim.
                # (Not after an attempt that may have posted it: that one is looked for.)
                assert self.coalescer is not None
                return await self.coalescer.join(task, place, seen), None
            post, missing = await self.cards.render(task, run, place.chat, frozenset())
            if delivery.attempts:
                post = replace(post, maybe_sent=True)
            claimed = replace(delivery, attempts=delivery.attempts + 1).claim("post", time.time())
            if not await self.chats.swap_ref(
                self.name, task.id, claimed.data(), seen.version, missing, self.link.now()
            ):
                return False, None
            await self._send_post(task, run, place, post, missing, claimed, seen.version + 1)
            return True, None

        await until_won(claim_and_send, 10)

    async def _send_post(
        self, task: Task, run: Run, place: Place, post: Post, saved: list[ChatCallback],
        claimed: Delivery, version: int,
    ) -> None:  # fmt: skip
        """Send the claimed post and record its message (releasing the claim on failure)."""
        self.cards.buttons.remember(saved)
        try:
            target = await self.platform.open_thread(run, place, posting=task.id)
            sent = await self.platform.post(target, post)
        except BaseException:
            await self.update(task.id, lambda d: d.release("post"))
            raise

        # A message found rather than posted (`maybe_sent`) shows what an earlier attempt
        # rendered: its ending, if any, is still to be shown (by the ending's own item).
        ended = not task.parked and not post.maybe_sent

        def record(d: Delivery) -> Delivery:
            return replace(d, place=target, messages=(sent.id,), ended=ended).release("post")

        if not await self.chats.swap_ref(self.name, task.id, record(claimed).data(), version):
            await self.update(task.id, record)  # it changed meanwhile (a nudge's claim…)

    async def post_alone(
        self, task: Task, place: Place, reply_to: MessageRef | None = None
    ) -> bool:
        """Post a decision listed on a digest page as a message of its own (🔎, or a page
        left with one decision); False if it has one already."""
        if Delivery.of((await self.record(task.id)).data).messages:
            return False
        run = await self.link.run(task.run_id)
        if run is None:
            return False
        post = await self.cards.rendered(task, run, place.chat)
        target = await self.platform.open_thread(run, place, posting=task.id)
        sent = await self.platform.post(target, post, reply_to=reply_to, max_wait=10.0)

        def add(d: Delivery) -> Delivery:
            return replace(d, place=d.place or target, messages=(*d.messages, sent.id))

        await self.update(task.id, add)
        return True

    async def expand(self, press: Press, task: Task) -> bool:
        if press.message is None:
            return False
        return await self.post_alone(task, Place(press.message.chat), press.message)

    # endings -----------------------------------------------------------------------------------
    async def show_ending(self, task: Task) -> None:
        delivery = Delivery.of((await self.record(task.id)).data)
        if _nowhere(delivery):
            return  # posted nowhere: its workspace had no place then
        if _pending(delivery):
            # Not posted yet: its "posted" item (older, so normally first) is pending or in
            # flight. Come back after it: it may post the waiting view.
            raise NotYet("the decision is not posted yet")
        if delivery.digest is not None and delivery.place and self.coalescer is not None:
            self.coalescer.touch(delivery.place)
        refs = delivery.refs()  # in every place it is shown in
        if delivery.ended or not refs:
            return
        fresh = await self.link.task(task.id) or task
        run = await self.link.run(fresh.run_id)
        if run is None:
            return
        for ref in refs:
            await self.cards.show(self.platform, ref, fresh, run, max_wait=30.0)
        await self.update(task.id, lambda d: replace(d, ended=True))
        for chat in dict.fromkeys(ref.chat for ref in refs):
            try:  # the run's thread shows one open decision less
                await self.platform.open_thread(run, Place(chat))
            except Exception as error:  # the count is cosmetic: the next change corrects it
                log.info("%s: could not update a run's thread (%s)", self.name,
                         type(error).__name__)  # fmt: skip

    async def show_progress(self, task: Task) -> None:
        """An approval counted toward a quorum without ending the decision: every message
        about it shows the new count ("1 of 2 approvals · alice ✓")."""
        delivery = Delivery.of((await self.record(task.id)).data)
        if _nowhere(delivery):
            return
        if _pending(delivery):
            raise NotYet("the decision is not posted yet")
        if delivery.digest is not None and delivery.place and self.coalescer is not None:
            self.coalescer.touch(delivery.place)
        fresh = await self.link.task(task.id) or task
        run = await self.link.run(fresh.run_id)
        if run is None or not fresh.parked:
            return  # ended since: its own item shows the ending
        for ref in delivery.refs():
            await self.cards.show(self.platform, ref, fresh, run, max_wait=30.0)
        ended = await self.link.task(task.id) or fresh
        if not ended.parked:  # it ended while we edited: never leave a waiting view behind
            for ref in delivery.refs():
                await self.cards.show(self.platform, ref, ended, run, max_wait=30.0)

    # nudges ------------------------------------------------------------------------------------
    async def nudge(
        self, task: Task, seq: int, run: Run | None = None, routed: Routed | None = None
    ) -> None:
        """Remind the approvers, once per nudge number and place, in reply to the decision
        there. When an earlier reminder went unanswered (or this is the last one), the
        decision is first shown where its routes escalate to (once: a copy each)."""
        fresh = await self.link.task(task.id) or task
        if not fresh.parked or fresh.deadline is None:
            return  # ended since the clock fired: the ending says it
        delivery = Delivery.of((await self.record(task.id)).data)
        escalating = routed is not None and bool(routed.escalate_to) and run is not None
        if _nowhere(delivery) and not escalating:
            return  # shown nowhere on this platform, and its escalation does not come here
        if _pending(delivery):
            raise NotYet("the decision is not posted yet")
        if routed is not None and routed.escalate_to and run is not None:
            earlier = [int(k) for k in delivery.nudges if k.isdigit()]
            if self.routing.escalates(seq, earlier):
                places = await self.places.resolve(fresh.workspace_id, routed.escalate_to)
                await self.places.post(fresh, run, places, escalation=True)
                delivery = Delivery.of((await self.record(task.id)).data)
        left = format_duration(fresh.deadline - self.link.now())
        members = await self.link.members(fresh.workspace_id)
        still = await self.link.service.may_still_approve(
            fresh.workspace_id, fresh.run_id, fresh.key
        )
        if still is not None:  # under a quorum: only those whose approval would still count
            members = [m for m in members if m.name in still]
        mentions = tuple(m for m in map(self.platform.mention, members) if m)
        what = "question" if fresh.kind == "ask" else fresh.tool
        notice = Notice(f"expires in {left}", bold=what, mentions=mentions, icon="⏰")

        own, place = delivery.own_refs(), delivery.place

        async def main() -> str:
            if own:
                reply = own[0]
                where = Place(reply.chat, reply.thread)
                sent = await self.platform.post(where, notice, reply_to=reply, max_wait=30.0)
                return sent.id
            if self.coalescer is not None and place is not None:  # on a digest: its line
                self.coalescer.touch(place)  # shows the time left
            return ""

        await self._once(task.id, str(seq), main)
        for copy in delivery.copies:
            ref = copy.ref
            if ref is None:
                continue

            async def in_copy(ref: MessageRef = ref) -> str:
                where = Place(ref.chat, ref.thread)
                sent = await self.platform.post(where, notice, reply_to=ref, max_wait=30.0)
                return sent.id

            await self._once(task.id, f"{seq}@{ref.chat}", in_copy)

    async def _once(self, task_id: str, key: str, send: Callable[[], Awaitable[str]]) -> None:
        """Run `send` once for `key` of the task's record (claimed first, so a redelivered
        item or another instance sends nothing), recording the message id it answers."""
        step, now = f"nudge:{key}", time.time()
        claimed = await swap(
            lambda: self.chats.get_ref(self.name, task_id),
            lambda data, version: self.chats.swap_ref(self.name, task_id, data, version),
            lambda data: _claim(Delivery.of(data), step, key, now),
        )
        if claimed is None:
            return  # done before, or meanwhile by another instance
        try:
            message_id = await send()
        except Unreachable as error:  # the place went away since: done there, nothing to send
            log.warning("%s: a reminder's place is unreachable, skipped (%s)", self.name, error)
            message_id = ""
        except BaseException:
            await self.update(task_id, lambda d: d.release(step))
            raise
        await self.update(
            task_id, lambda d: replace(d, nudges={**d.nudges, key: message_id}).release(step)
        )


def _nowhere(delivery: Delivery) -> bool:
    """Not shown on this platform, and never to be: its routes name no place here (copies
    posted since, by an escalation, do show it)."""
    return delivery.skipped and not delivery.copies


def _pending(delivery: Delivery) -> bool:
    """Its own post is still to come (the "posted" item is pending or in flight)."""
    return not delivery.skipped and (not delivery.shown or delivery.place is None)


def _claim(delivery: Delivery, step: str, key: str, now: float) -> dict[str, Any] | None:
    if key in delivery.nudges:
        return None
    if delivery.claimed(step, now):
        raise NotYet(f"{step} in flight elsewhere")
    return delivery.claim(step, now).data()
