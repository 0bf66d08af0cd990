"""The Telegram calls the adapter makes, each paced (adapters/chat/pacing.py) and with 429s
honoured.

Sends and edits wait for the chat's next slot (or give up with `Busy` past `max_wait`, so the
caller can coalesce or retry later); a `RetryAfter` pauses the chat for as long as Telegram says
and the call is tried again (past the caller's patience it becomes the chat layer's
`RateLimited`). Edits that cannot apply any more (message gone, not modified) are not errors.
Answers to button presses are best effort: the decision is made already.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from telegram import (
    Bot,
    CallbackQuery,
    ForceReply,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    ReplyParameters,
)
from telegram.constants import ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter

from adapters.chat.pacing import Budget
from adapters.chat.port import RateLimited
from adapters.telegram.format import esc
from bot.masking import shorten

log = logging.getLogger(__name__)
T = TypeVar("T")


def retry_seconds(error: RetryAfter) -> float:
    with warnings.catch_warnings():  # PTB 22 warns on reading an int; the value is what we need
        warnings.simplefilter("ignore")
        value: Any = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class TelegramCalls:
    def __init__(self, bot: Callable[[], Bot], budget: Budget) -> None:
        self._bot = bot  # the application's, once built
        self.budget = budget
        self.retry_afters = 0  # 429s received (the bench reports them; the target is 0)

    async def _paced(
        self, chat_id: int, call: Callable[[], Awaitable[T]], max_wait: float | None, pace: bool,
        post: bool = False,
    ) -> T:  # fmt: skip
        for attempt in range(4):
            if pace or attempt:
                await self.budget.acquire(str(chat_id), max_wait, post and not attempt)
            try:
                return await call()
            except RetryAfter as error:
                seconds = retry_seconds(error)
                self.retry_afters += 1
                await self.budget.penalise(str(chat_id), seconds)
                if attempt == 3 or (max_wait is not None and seconds > max_wait):
                    raise RateLimited(seconds) from None
        raise AssertionError("unreachable")

    async def send(
        self,
        chat_id: int,
        text: str,
        *,
        markup: InlineKeyboardMarkup | None = None,
        reply_to: int | None = None,
        force_reply: str | None = None,
        max_wait: float | None = None,
        pace: bool = True,
        decision: bool = False,
    ) -> Message:
        reply_markup: InlineKeyboardMarkup | ForceReply | None = markup
        if force_reply is not None:
            reply_markup = ForceReply(selective=True, input_field_placeholder=force_reply)
        reply = (
            ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None
        )
        bot = self._bot()

        async def call() -> Message:
            sent: Message = await bot.send_message(
                chat_id,
                text,
                parse_mode=ParseMode.HTML,
                reply_markup=reply_markup,
                reply_parameters=reply,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )
            return sent

        return await self._paced(chat_id, call, max_wait, pace, decision)

    async def edit(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        markup: InlineKeyboardMarkup | None,
        *,
        max_wait: float | None = None,
        pace: bool = True,
    ) -> bool:
        """Edit a message; True if it shows `text` now. A message gone or no longer editable
        is not an error worth retrying (False)."""
        bot = self._bot()

        async def call() -> None:
            await bot.edit_message_text(
                text,
                chat_id,
                message_id,
                parse_mode=ParseMode.HTML,
                reply_markup=markup,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )

        try:
            await self._paced(chat_id, call, max_wait, pace)
        except BadRequest as error:
            reason = str(error).lower()
            if "not modified" in reason:
                return True
            if "message to edit not found" in reason or "can't be edited" in reason:
                log.info("a decision message can no longer be edited (%s)", reason)
                return False
            raise
        return True

    async def answer(self, query: CallbackQuery, text: str, *, alert: bool = False) -> None:
        """Answer a press (Telegram shows a spinner until then). Best effort: the decision is
        made already, and a query is only answerable for a short while."""
        for _ in range(2):
            try:
                await query.answer(text=shorten(text, 200) or None, show_alert=alert)
                return
            except BadRequest:
                return  # too old or answered: nothing left to do
            except RetryAfter as error:
                await asyncio.sleep(min(retry_seconds(error), 2.0))
            except NetworkError:
                continue

    async def reply(self, message: Message, text: str, *, html: bool = False) -> None:
        if not text:
            return
        try:
            await self.send(
                message.chat_id,
                text if html else esc(text),
                reply_to=message.message_id,
                max_wait=10.0,
            )
        except Exception as error:  # a notice only; never fail the update for it
            log.info("could not reply in a chat (%s)", type(error).__name__)
