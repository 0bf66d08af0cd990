"""Coalescing: when a place gets more decisions than the platform lets us post one by one.

A Telegram group takes about 20 messages a minute, a Slack channel about one a second; 500
parks in a minute would queue for many minutes. So once a place had `coalesce_after` decisions
in the last minute, or a decision would wait more than `max_post_wait` seconds for its slot,
it and the ones after it join a digest page instead: one
message listing up to `page_size` decisions, the first few waiting ones with buttons (approve,
deny, and expand to post one in full), kept up to date by editing. A place getting a few
decisions a minute sees each as its own full message. Pages live in the store (`chat_digest`),
so a restart picks them up; a page is done once all its decisions have ended and its final
state is shown. A page left holding a single decision is never sent: that one is posted in full.

The budget is spent on making decisions visible first. During a burst a page is sent once it is
full, or once the place has been quiet for `quiet` seconds, or after `hold` seconds at the
latest, so the pages of a burst cost one message each instead of one edit per arrival. Edits
(endings, nudges) wait for the same quiet moment (or `hold`) and come at most every
`edit_interval` seconds per page. One worker per place per process does all this, paced like
every other message; refreshes are idempotent (a page remembers a fingerprint of what it shows
and is edited only on a change).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from adapters.chat.buttons import Buttons
from adapters.chat.context import CoreLink
from adapters.chat.pacing import Budget
from adapters.chat.port import MessageRef, Page, Place, Platform
from adapters.chat.records import until_won
from adapters.web.links import inbox_url
from bot.domain import Task
from bot.durations import format_duration
from bot.ports import ChatState, DigestPage, Versioned

log = logging.getLogger(__name__)
_LEASE = 120.0
BUTTON_ROWS = 8  # waiting decisions with buttons on a page


@dataclass(frozen=True)
class DigestTuning:
    """Knobs with production defaults; tests and the bench shorten the waits."""

    max_post_wait: float = 10.0  # a decision that would wait longer for its slot joins a page
    coalesce_after: int = 8  # decisions posted to a place in a minute before pages take over
    page_size: int = 50
    quiet: float = 1.0  # a page goes out once no decision joined for this long…
    max_delay: float = 5.0  # …(looking at least this often while they keep coming)…
    hold: float = 10.0  # …or when its first decision has waited this long
    edit_interval: float = 5.0  # at most one edit per page in this many seconds
    active_for: float = 60.0  # after a join, new decisions join too (in order, not one by one)


PostAlone = Callable[[Task, Place], Awaitable[object]]


def fingerprint(tasks: list[Task], now_minutes: Callable[[Task], str], done: bool) -> str:
    """What a page shows, platform-neutrally: each decision's state and outcome, the time left
    once under an hour, and whether it is final."""
    shown = [[t.id, t.state, t.resolved_by, now_minutes(t) if t.parked else ""] for t in tasks]
    text = json.dumps([shown, done], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Digests:
    def __init__(
        self, platform: Platform, chats: ChatState, link: CoreLink, buttons: Buttons,
        budget: Budget, post_alone: PostAlone, tuning: DigestTuning | None = None,
    ) -> None:  # fmt: skip
        self.platform = platform
        self.channel = platform.name
        self.chats = chats
        self.link = link
        self.buttons = buttons
        self.budget = budget
        self.post_alone = post_alone  # posts a decision in full (the notifier's path)
        self.tuning = tuning or DigestTuning()
        self._events: dict[str, asyncio.Event] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._first_seen: dict[int, float] = {}  # page id -> when we first held it back
        self._last_edit: dict[int, float] = {}  # page id -> when we last edited it
        self._dirty_since: dict[int, float] = {}  # page id -> when it first differed from shown
        self._last_add: dict[str, float] = {}  # place -> when a decision last joined a page
        self._stopped = False

    # the Coalescer port ------------------------------------------------------------------------
    async def should_coalesce(self, place: Place) -> bool:
        """True when a new decision should join the place's digest rather than be posted on
        its own: a digest is filling, the place had its share of decisions this minute (the
        rest of the budget is for showing endings and nudges), or its slot is further away
        than `max_post_wait`."""
        if self.active(place.chat):
            return True
        wait, posted = await self.budget.estimate(place.chat)
        return posted >= self.tuning.coalesce_after or wait > self.tuning.max_post_wait

    async def join(self, task: Task, place: Place, seen: Versioned) -> bool:
        data = {**seen.data, "chat_id": place.chat}
        page = await self.chats.join_digest(
            self.channel, place.chat, task.id, self.tuning.page_size, self.link.now(),
            Versioned(data, seen.version),
        )  # fmt: skip
        if page is None:
            return False
        self._last_add[place.chat] = time.monotonic()
        self.touch(place)
        return True

    def touch(self, place: Place) -> None:
        """Something on a page of this place changed: refresh it soon."""
        self._touch(place.chat)

    # the workers -------------------------------------------------------------------------------
    def active(self, chat: str) -> bool:
        last = self._last_add.get(chat)
        return last is not None and time.monotonic() - last < self.tuning.active_for

    def _touch(self, chat: str) -> None:
        if self._stopped:
            return
        event = self._events.setdefault(chat, asyncio.Event())
        event.set()
        worker = self._workers.get(chat)
        if worker is None or worker.done():
            self._workers[chat] = asyncio.create_task(
                self._worker(chat, event), name=f"{self.channel}-digest"
            )

    async def recover(self) -> None:
        """After a start: refresh every page not yet done (sent or not)."""
        for page in await self.chats.digest_pages(self.channel):
            self._touch(page.chat_id)

    async def stop(self) -> None:
        self._stopped = True
        for worker in self._workers.values():
            worker.cancel()
        for worker in self._workers.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await worker
        self._workers.clear()

    def _later(self, chat: str, delay: float) -> None:
        asyncio.get_running_loop().call_later(max(delay, 0.01), self._touch, chat)

    async def _worker(self, chat: str, event: asyncio.Event) -> None:
        tuning = self.tuning
        failures = 0
        while True:
            await event.wait()
            # Debounce: wait for a quiet moment, but not longer than `max_delay`.
            started, quiet = time.monotonic(), False
            while True:
                event.clear()
                try:
                    await asyncio.wait_for(event.wait(), tuning.quiet)
                except TimeoutError:
                    quiet = True
                    break
                if time.monotonic() - started >= tuning.max_delay:
                    break
            event.clear()
            try:
                await self.refresh(chat, quiet=quiet)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a fault on the platform's side: try again, later
                failures += 1
                log.warning("%s digest refresh failed (%s)", self.channel, type(error).__name__)
                await asyncio.sleep(min(30.0, 0.25 * 2**failures))
                event.set()

    async def refresh(self, chat: str, *, quiet: bool = True) -> None:
        """Send the pages that are due, then edit the sent ones that changed."""
        tuning = self.tuning
        pages = await self.chats.digest_pages(self.channel, chat)
        now = time.monotonic()
        for page in pages:
            if page.message_id is not None:
                continue
            first = self._first_seen.setdefault(page.id, now)
            if page.is_open and not quiet and now - first < tuning.hold:
                self._later(chat, tuning.quiet)  # still filling: hold it back
                continue
            await self._send(page.id)
            self._first_seen.pop(page.id, None)
        for page in pages:
            if page.message_id is None:
                continue
            wait = self._last_edit.get(page.id, 0.0) + tuning.edit_interval - now
            if wait > 0:
                self._later(chat, wait)
                continue
            current = await self.chats.get_page(page.id)
            if current is not None and not current.done:
                await self._edit(current, quiet=quiet)

    # rendering and sending ---------------------------------------------------------------------
    def _left(self, task: Task) -> str:
        left = (task.deadline - self.link.now()) if task.deadline else None
        return format_duration(left) if left is not None and left < timedelta(hours=1) else ""

    async def _render(self, page: DigestPage) -> tuple[Page, str, bool]:
        tasks = await self.chats.tasks(page.task_ids)
        final = bool(tasks) and all(not t.parked for t in tasks)
        waiting = [] if final else [t for t in tasks if t.parked][:BUTTON_ROWS]
        keys = [(t.id, a, None) for t in waiting for a in ("approve", "deny", "expand")]
        ids = await self.buttons.ensure(keys, page.chat_id)
        buttons = {(task_id, action): v for (task_id, action, _), v in ids.items()}
        view = Page(tuple(tasks), buttons, inbox_url(self.link.base_url), final)
        return view, fingerprint(tasks, self._left, final), final

    async def _send(self, page_id: int) -> None:
        if not await self._lease(page_id):
            return  # sent already, or another instance is sending it
        try:
            page = await self.chats.get_page(page_id)
            assert page is not None
            await self.budget.acquire(page.chat_id)
            # Render after the wait: decisions keep joining the page until it leaves.
            page = await self.chats.get_page(page_id) or page
            if len(page.task_ids) == 1 and await self._alone(page):
                return
            view, shown, final = await self._render(page)
            sent = await self.platform.post(Place(page.chat_id), view)
        except BaseException:
            await self._record(page_id, None, {"lease_until": 0.0})
            raise
        self._last_edit[page_id] = time.monotonic()
        # Sent pages take no more decisions: later ones start a page at the bottom of the
        # place, where people look, and cost a message either way.
        changes = {"message_id": sent.id, "shown": shown, "lease_until": 0.0, "is_open": False}
        await self._record(page_id, page.task_ids, changes, final)

    async def _alone(self, page: DigestPage) -> bool:
        """A page with one decision: post that decision in full instead, and take it off the
        page (which is then done, unless another decision joined meanwhile)."""
        (task_id,) = page.task_ids
        task = await self.link.task(task_id)
        if task is None:
            return False
        await self.post_alone(task, Place(page.chat_id))

        async def take_off() -> tuple[bool, None]:
            current = await self.chats.get_page(page.id)
            if current is None:
                return True, None
            rest = [t for t in current.task_ids if t != task_id]
            won = await self.chats.swap_page(
                page.id, current.version, task_ids=rest, done=not rest, is_open=bool(rest),
                lease_until=0.0,
            )  # fmt: skip
            if won and rest:
                self._touch(page.chat_id)
            return won, None

        await until_won(take_off, 50)
        return True

    async def _edit(self, page: DigestPage, *, quiet: bool) -> None:
        assert page.message_id is not None
        view, shown, final = await self._render(page)
        if shown != page.shown and not quiet:
            # Endings arriving in a stream (a run stopped, a batch approved): one edit once
            # they settle, or after `hold` at the latest, not one per ending.
            since = self._dirty_since.setdefault(page.id, time.monotonic())
            if time.monotonic() - since < self.tuning.hold:
                self._later(page.chat_id, self.tuning.quiet)
                return
        self._dirty_since.pop(page.id, None)
        if shown != page.shown:
            await self.budget.acquire(page.chat_id)
            page = await self.chats.get_page(page.id) or page
            view, shown, final = await self._render(page)
            assert page.message_id is not None
            await self.platform.edit(MessageRef(page.chat_id, page.message_id), view)
            self._last_edit[page.id] = time.monotonic()
        elif not final:
            return
        if final:
            self._last_edit.pop(page.id, None)
        await self._record(page.id, page.task_ids, {"shown": shown}, final)

    async def _lease(self, page_id: int) -> bool:
        """Take the right to send the page's first message (decisions joining the page change
        its version meanwhile, hence the retries)."""

        async def attempt() -> tuple[bool, bool]:
            page = await self.chats.get_page(page_id)
            if page is None or page.message_id is not None or page.lease_until > time.time():
                return True, False
            lease = time.time() + _LEASE
            return await self.chats.swap_page(page_id, page.version, lease_until=lease), True

        return await until_won(attempt, 50)

    async def _record(
        self, page_id: int, seen: list[str] | None, changes: dict[str, object], final: bool = False
    ) -> None:
        """Write what the page now shows, and that it is done if `final`; unless decisions
        joined since it was rendered (`seen` differs): then it needs another refresh."""

        async def attempt() -> tuple[bool, None]:
            page = await self.chats.get_page(page_id)
            if page is None:
                return True, None
            values = dict(changes)
            if seen is not None and page.task_ids != seen:
                self._touch(page.chat_id)
            elif final:
                values.update(done=True, is_open=False)
            return await self.chats.swap_page(page_id, page.version, **values), None

        await until_won(attempt, 50)
