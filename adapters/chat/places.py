"""A decision in several places on one platform: routes' targets mapped to places, and the
copies posted there (beside the decision's own message, which delivery.py posts).

A copy is a full message with every button, recorded in the decision's delivery record
(records.Copy) and claimed there first by compare-and-swap, so it is posted once however
often the outbox hands the item over or however many instances try. Its ending is shown with
the others' (ChatNotifier.show_ending edits every ref); a copy that lands after the ending was
shown edits itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from adapters.chat.cards import Cards
from adapters.chat.context import CoreLink
from adapters.chat.port import NotYet, Place, Platform, Unreachable
from adapters.chat.records import Copy, Delivery, swap, until_won
from adapters.chat.routing import DEFAULT
from bot.domain import Member, Run, Task
from bot.ports import ChatState, Versioned

log = logging.getLogger(__name__)


async def shown_in(
    chats: ChatState, channel: str, tasks: Sequence[Task], chat: str,
    posting: Collection[str] = (),
) -> list[Task]:  # fmt: skip
    """Those of `tasks` shown in `chat` on the platform `channel` (their delivery records say
    so), `posting` (task ids being posted there now, not yet recorded) included: a run's
    thread parent counts only the decisions of its own place, and a reply in a thread answers
    only a question shown there. One read of the records, however many are waiting."""
    refs = await chats.get_refs(channel, [t.id for t in tasks if t.id not in posting])
    return [
        t for t in tasks
        if t.id in posting or (t.id in refs and Delivery.of(refs[t.id].data).shown_in(chat))
    ]  # fmt: skip


class Places:
    def __init__(self, platform: Platform, chats: ChatState, link: CoreLink, cards: Cards) -> None:
        self.platform = platform
        self.name = platform.name
        self.chats = chats
        self.link = link
        self.cards = cards

    async def resolve(self, workspace_id: str, targets: Sequence[str]) -> list[Place]:
        """The places on this platform the targets name, in order, each chat once: `default`
        is the workspace's usual chat, `slack:`/`telegram:` a chat of that platform (others'
        are left to them), `member:NAME` the member's direct messages (if they have an
        identity here)."""
        found: list[Place] = []
        members: dict[str, Member] | None = None
        for target in targets:
            kind, _, value = target.partition(":")
            place: Place | None = None
            if target == DEFAULT:
                place = self.platform.place_for(workspace_id)
            elif kind == self.name:
                place = Place(value)
            elif kind == "member":
                if members is None:
                    members = {m.name: m for m in await self.link.members(workspace_id)}
                member = members.get(value)
                if member is None:
                    log.info("%s: a route names %r, no member here", self.name, value)
                else:
                    place = await self.platform.direct(member)
            if place is not None and all(p.chat != place.chat for p in found):
                found.append(place)
        return found

    async def record(self, task_id: str) -> Delivery:
        return Delivery.of((await self.chats.get_ref(self.name, task_id) or Versioned({}, 0)).data)

    async def update(self, task_id: str, change: Any) -> None:
        await swap(
            lambda: self.chats.get_ref(self.name, task_id),
            lambda data, version: self.chats.swap_ref(self.name, task_id, data, version),
            lambda data: change(Delivery.of(data)).data(),
        )

    async def post(
        self, task: Task, run: Run, places: Sequence[Place], *, escalation: bool = False
    ) -> None:
        """Show the decision in each of `places` it is not shown in yet."""
        for place in places:

            async def attempt(place: Place = place) -> tuple[bool, None]:
                return await self._post_one(task, run, place, escalation)

            await until_won(attempt, 10)

    async def _post_one(
        self, task: Task, run: Run, place: Place, escalation: bool
    ) -> tuple[bool, None]:
        seen = await self.chats.get_ref(self.name, task.id)
        if seen is None:
            raise NotYet("the decision's own message is not posted yet")
        delivery = Delivery.of(seen.data)
        if delivery.place is not None and delivery.place.chat == place.chat:
            return True, None  # its own message is there
        copy = delivery.copy_in(place.chat)
        if copy is not None and (copy.message or copy.gone):
            return True, None  # posted before, or given up
        step, now = f"copy:{place.chat}", time.time()
        if delivery.claimed(step, now):
            raise NotYet(f"a copy in {place.chat} is being posted elsewhere")
        attempts = (copy.attempts if copy else 0) + 1
        escalation = escalation or (copy is not None and copy.escalation)
        claimed = delivery.with_copy(Copy(place, "", attempts, escalation)).claim(step, now)
        if not await self.chats.swap_ref(self.name, task.id, claimed.data(), seen.version):
            return False, None
        try:
            fresh = await self.link.task(task.id) or task
            post = await self.cards.rendered(fresh, run, place.chat)
            if attempts > 1:
                post = replace(post, maybe_sent=True)
            target = await self.platform.open_thread(run, place, posting=task.id)
            sent = await self.platform.post(target, post, max_wait=30.0)
        except Unreachable as error:  # for good: recorded, so no retry tries it again
            log.warning("%s: a route's place is unreachable, skipped (%s)", self.name, error)
            gone = Copy(place, "", attempts, escalation, gone=True)
            await self.update(task.id, lambda d: d.with_copy(gone).release(step))
            return True, None
        except BaseException:
            await self.update(task.id, lambda d: d.release(step))
            raise
        posted = Copy(target, sent.id, attempts, escalation)
        await self.update(task.id, lambda d: d.with_copy(posted).release(step))
        if fresh.parked and (await self.record(task.id)).ended:
            # The ending was shown while this copy was on its way, without it: show it here.
            ended = await self.link.task(task.id) or fresh
            assert posted.ref is not None
            await self.cards.show(self.platform, posted.ref, ended, run, max_wait=30.0)
        return True, None
