"""Coalescing: when a chat gets more decisions than Telegram lets us post one by one.

A group takes about 20 messages a minute; 200 parks in a minute would queue for ten. Instead,
once a chat is busy (see `TelegramAdapter.should_coalesce`), further decisions join a digest
page: one message listing up to `digest_page_size` decisions, the first few waiting ones with
buttons (✅ ❌ and 🔎 to post one in full), kept up to date by editing. Pages live in the store
(`chat_digest`), so a restart picks them up; a page is done once all its decisions have ended
and the final state is shown.

One worker per chat per process refreshes that chat's pages, debounced (many changes, one
edit) and paced like every other message. Refreshes are idempotent: each page remembers a
fingerprint of what it shows and is edited only when that changes.
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

    async def recover(self) -> None:
        """After a start: refresh every page not yet done (sent or not)."""
        for page in await self.adapter.chats.digest_pages(CHANNEL):
            self.touch(page.chat_id)

    async def stop(self) -> None:
        self._stopped = True
        for worker in self._workers.values():
            worker.cancel()
        for worker in self._workers.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await worker
        self._workers.clear()

    async def idle(self) -> bool:
        """No refresh pending (for tests and the bench)."""
        return not any(e.is_set() for e in self._events.values())

    async def _worker(self, chat_id: int, event: asyncio.Event) -> None:
        failures = 0
        while True:
            await event.wait()
            await asyncio.sleep(self.adapter.tuning.digest_debounce)
            event.clear()
            try:
                await self.refresh(chat_id)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a fault on Telegram's side: try again, later
                failures += 1
                log.warning("digest refresh for a chat failed (%s)", type(error).__name__)
                await asyncio.sleep(min(30.0, 0.25 * 2**failures))
                event.set()

    async def refresh(self, chat_id: int) -> None:
        for page in await self.adapter.chats.digest_pages(CHANNEL, chat_id):
            await self._refresh(page)

    async def _render(self, page: DigestPage) -> tuple[str, InlineKeyboardMarkup | None, str, bool]:
        adapter = self.adapter
        tasks = [t for t in [await adapter.task(i) for i in page.task_ids] if t is not None]
        final = bool(tasks) and all(not t.parked for t in tasks)
        text, numbered = digest_html(tasks, adapter.now(), adapter.inbox_url(), done=final)
        keys = [(t.id, a, None) for _, t in numbered for a in ("approve", "deny", "expand")]
        ids = await adapter.ensure_callbacks(keys)
        markup = digest_buttons(numbered, ids)
        shown = json.dumps([text, markup.to_dict() if markup else None], sort_keys=True)
        return text, markup, hashlib.sha256(shown.encode()).hexdigest()[:32], final

    async def _refresh(self, page: DigestPage) -> None:
        adapter, chats = self.adapter, self.adapter.chats
        if page.message_id is None:
            if not await self._lease(page.id):
                return  # another instance is sending this page
            try:
                await adapter.pacer.acquire(page.chat_id)
                # Render after the wait: decisions keep joining the page until it leaves.
                current = await chats.get_page(page.id) or page
                text, markup, fingerprint, final = await self._render(current)
                message = await adapter.send(page.chat_id, text, markup=markup, pace=False)
            except BaseException:
                await self._record(page.id, None, lease_until=0.0)
                raise
            await self._record(
                page.id,
                current.task_ids,
                message_id=message.message_id,
                shown=fingerprint,
                lease_until=0.0,
                **({"done": True, "is_open": False} if final else {}),
            )
            return
        text, markup, fingerprint, final = await self._render(page)
        if fingerprint != page.shown:
            await adapter.pacer.acquire(page.chat_id)
            current = await chats.get_page(page.id) or page
            text, markup, fingerprint, final = await self._render(current)
            await adapter.edit(page.chat_id, page.message_id, text, markup, pace=False)
            page = current
        if fingerprint != page.shown or final:
            changes: dict[str, object] = {"shown": fingerprint}
            if final:
                changes.update(done=True, is_open=False)
            await self._record(page.id, page.task_ids, **changes)

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

    async def _record(self, page_id: int, seen: list[str] | None, **changes: object) -> None:
        """Write what the page now shows; if decisions joined since (`seen` differs), it is
        not done after all and needs another refresh."""
        for _ in range(50):
            page = await self.adapter.chats.get_page(page_id)
            if page is None:
                return
            if seen is not None and page.task_ids != seen:
                changes = {k: v for k, v in changes.items() if k not in ("done", "is_open")}
                self.touch(page.chat_id)
            if await self.adapter.chats.swap_page(page_id, page.version, **changes):
                return
        raise RuntimeError("digest page kept changing under us")
