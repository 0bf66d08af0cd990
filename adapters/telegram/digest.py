"""Coalescing: when a chat gets more decisions than Telegram lets us post one by one.

A group takes about 20 messages a minute; 200 parks in a minute would queue for ten. Instead,
once a chat is busy (see `TelegramAdapter.should_coalesce`), further decisions join a digest
page: one message listing up to `digest_page_size` decisions, the first few waiting ones with
buttons (✅ ❌, and 🔎 to post one in full), kept up to date by editing. Pages live in the store
(`chat_digest`), so a restart picks them up; a page is done once all its decisions have ended
and its final state is shown.

The budget is spent on making decisions visible first. During a burst a page is sent once it is
full, or once the chat has been quiet for `digest_quiet` seconds, or after `digest_hold` seconds
at the latest, so the pages of a burst cost one message each instead of one edit per arrival.
Edits (endings, nudges) wait for the same quiet moment (or `digest_hold`) and come at most
every `digest_edit_interval` seconds per page. One
worker per chat per process does all this, paced like every other message; refreshes are
idempotent (a page remembers a fingerprint of what it shows and is edited only on a change).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from typing import TYPE_CHECKING

from adapters.telegram.format import digest_buttons, digest_html
from adapters.telegram.notifier import CHANNEL
from bot.ports import DigestPage

if TYPE_CHECKING:
    from telegram import InlineKeyboardMarkup

    from adapters.telegram.adapter import TelegramAdapter

log = logging.getLogger(__name__)
_LEASE = 120.0


class Digests:
    def __init__(self, adapter: TelegramAdapter) -> None:
        self.adapter = adapter
        self._events: dict[int, asyncio.Event] = {}
        self._workers: dict[int, asyncio.Task[None]] = {}
        self._first_seen: dict[int, float] = {}  # page id -> when we first held it back
        self._last_edit: dict[int, float] = {}  # page id -> when we last edited it
        self._dirty_since: dict[int, float] = {}  # page id -> when it first differed from shown
        self._last_add: dict[int, float] = {}  # chat id -> when a decision last joined a page
        self._stopped = False

    def touch(self, chat_id: int) -> None:
        """Something on a page of this chat changed: refresh it soon."""
        if self._stopped:
            return
        event = self._events.setdefault(chat_id, asyncio.Event())
        event.set()
        worker = self._workers.get(chat_id)
        if worker is None or worker.done():
            self._workers[chat_id] = asyncio.create_task(
                self._worker(chat_id, event), name=f"telegram-digest-{chat_id}"
            )

    def added(self, chat_id: int) -> None:
        """A decision joined a page of this chat."""
        self._last_add[chat_id] = time.monotonic()
        self.touch(chat_id)

    def active(self, chat_id: int, within: float = 60.0) -> bool:
        """Did decisions join this chat's digest lately? Then new ones join too, in order,
        rather than jump the queue one by one."""
        last = self._last_add.get(chat_id)
        return last is not None and time.monotonic() - last < within

    async def recover(self) -> None:
        """After a start: refresh every page not yet done (sent or not)."""
        for page in await self.adapter.chats.digest_pages(CHANNEL):
            self.touch(int(page.chat_id))

    async def stop(self) -> None:
        self._stopped = True
        for worker in self._workers.values():
            worker.cancel()
        for worker in self._workers.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await worker
        self._workers.clear()

    def _later(self, chat_id: int, delay: float) -> None:
        asyncio.get_running_loop().call_later(max(delay, 0.01), self.touch, chat_id)

    async def _worker(self, chat_id: int, event: asyncio.Event) -> None:
        tuning = self.adapter.tuning
        failures = 0
        while True:
            await event.wait()
            # Debounce: wait for a quiet moment, but not longer than `digest_max_delay`.
            started, quiet = time.monotonic(), False
            while True:
                event.clear()
                try:
                    await asyncio.wait_for(event.wait(), tuning.digest_quiet)
                except TimeoutError:
                    quiet = True
                    break
                if time.monotonic() - started >= tuning.digest_max_delay:
                    break
            event.clear()
            try:
                await self.refresh(chat_id, quiet=quiet)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a fault on Telegram's side: try again, later
                failures += 1
                log.warning("digest refresh for a chat failed (%s)", type(error).__name__)
                await asyncio.sleep(min(30.0, 0.25 * 2**failures))
                event.set()

    async def refresh(self, chat_id: int, *, quiet: bool = True) -> None:
        """Send the pages that are due, then edit the sent ones that changed."""
        tuning = self.adapter.tuning
        pages = await self.adapter.chats.digest_pages(CHANNEL, str(chat_id))
        now = time.monotonic()
        for page in pages:
            if page.message_id is not None:
                continue
            first = self._first_seen.setdefault(page.id, now)
            if page.is_open and not quiet and now - first < tuning.digest_hold:
                self._later(chat_id, tuning.digest_quiet)  # still filling: hold it back
                continue
            await self._send(page.id)
            self._first_seen.pop(page.id, None)
        for page in pages:
            if page.message_id is None:
                continue
            wait = self._last_edit.get(page.id, 0.0) + tuning.digest_edit_interval - now
            if wait > 0:
                self._later(chat_id, wait)
                continue
            current = await self.adapter.chats.get_page(page.id)
            if current is not None and not current.done:
                await self._edit(current, quiet=quiet)

    async def _render(self, page: DigestPage) -> tuple[str, InlineKeyboardMarkup | None, str, bool]:
        adapter = self.adapter
        tasks = await adapter.chats.tasks(page.task_ids)
        final = bool(tasks) and all(not t.parked for t in tasks)
        text, numbered = digest_html(tasks, adapter.now(), adapter.inbox_url(), done=final)
        keys = [(t.id, a, None) for _, t in numbered for a in ("approve", "deny", "expand")]
        ids = await adapter.ensure_callbacks(keys)
        markup = digest_buttons(numbered, ids)
        shown = json.dumps([text, markup.to_dict() if markup else None], sort_keys=True)
        return text, markup, hashlib.sha256(shown.encode()).hexdigest()[:32], final

    async def _send(self, page_id: int) -> None:
        adapter, chats = self.adapter, self.adapter.chats
        if not await self._lease(page_id):
            return  # sent already, or another instance is sending it
        try:
            page = await chats.get_page(page_id)
            assert page is not None
            await adapter.pacer.acquire(int(page.chat_id))
            # Render after the wait: decisions keep joining the page until it leaves.
            page = await chats.get_page(page_id) or page
            text, markup, fingerprint, final = await self._render(page)
            message = await adapter.send(int(page.chat_id), text, markup=markup, pace=False)
        except BaseException:
            await self._record(page_id, None, {"lease_until": 0.0})
            raise
        self._last_edit[page_id] = time.monotonic()
        # Sent pages take no more decisions: later ones start a page at the bottom of the
        # chat, where people look, and cost a message either way.
        sent = {"message_id": str(message.message_id), "shown": fingerprint, "lease_until": 0.0}
        await self._record(page_id, page.task_ids, {**sent, "is_open": False}, final)

    async def _edit(self, page: DigestPage, *, quiet: bool) -> None:
        assert page.message_id is not None
        adapter = self.adapter
        text, markup, fingerprint, final = await self._render(page)
        if fingerprint != page.shown and not quiet:
            # Endings arriving in a stream (a run stopped, a batch approved): one edit once
            # they settle, or after `digest_hold` at the latest, not one per ending.
            since = self._dirty_since.setdefault(page.id, time.monotonic())
            if time.monotonic() - since < adapter.tuning.digest_hold:
                self._later(int(page.chat_id), adapter.tuning.digest_quiet)
                return
        self._dirty_since.pop(page.id, None)
        if fingerprint != page.shown:
            await adapter.pacer.acquire(int(page.chat_id))
            page = await adapter.chats.get_page(page.id) or page
            text, markup, fingerprint, final = await self._render(page)
            assert page.message_id is not None
            await adapter.edit(int(page.chat_id), int(page.message_id), text, markup, pace=False)
            self._last_edit[page.id] = time.monotonic()
        elif not final:
            return
        if final:
            self._last_edit.pop(page.id, None)
        await self._record(page.id, page.task_ids, {"shown": fingerprint}, final)

    async def _lease(self, page_id: int) -> bool:
        """Take the right to send the page's first message (decisions joining the page change
        its version meanwhile, hence the loop)."""
        for _ in range(50):
            page = await self.adapter.chats.get_page(page_id)
            if page is None or page.message_id is not None or page.lease_until > time.time():
                return False
            lease = time.time() + _LEASE
            if await self.adapter.chats.swap_page(page_id, page.version, lease_until=lease):
                return True
        return False

    async def _record(
        self, page_id: int, seen: list[str] | None, changes: dict[str, object], final: bool = False
    ) -> None:
        """Write what the page now shows, and that it is done if `final`; unless decisions
        joined since it was rendered (`seen` differs): then it needs another refresh."""
        for _ in range(50):
            page = await self.adapter.chats.get_page(page_id)
            if page is None:
                return
            values = dict(changes)
            if seen is not None and page.task_ids != seen:
                self.touch(int(page.chat_id))
            elif final:
                values.update(done=True, is_open=False)
            if await self.adapter.chats.swap_page(page_id, page.version, **values):
                return
        raise RuntimeError("digest page kept changing under us")
