"""Opaque button ids and multi-select state, the same on every platform.

A button carries only an id; what it stands for (task, action, option) is saved in the store
and looked up on a press, so nothing a client sends back is trusted. Ids are derived from a
secret (not random) so that a retried post, or two instances rendering the same decision,
agree on them without coordination.

Each platform's buttons, and each place's, are their own: the id is derived from the platform
and the chat it is shown in too, saved under (platform, id) with that chat, and a press is
looked up on its own platform and honoured only in that chat. With Telegram and Slack both on,
or a decision routed to several chats, every copy's buttons work where they are shown (and
nowhere else: an id copied into another chat, or to the other platform, is unknown there).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable, Sequence
from datetime import datetime

from adapters.chat.port import ButtonKey, MessageRef
from adapters.chat.records import swap
from bot.ports import ChatCallback, ChatState

BUTTON_ID_LENGTH = 16  # 96 bits of HMAC, base64url: far under Telegram's 64 bytes
TaskButton = tuple[str, str, int | None]  # task id, action, option


def button_id(
    secret: str, channel: str, chat: str | None, task_id: str, action: str, option: int | None
) -> str:
    """The id of a button on the platform `channel` in the place `chat` (None: a button not
    shown in a chat of its own)."""
    message = json.dumps(["button", channel, chat, task_id, action, option])
    digest = hmac.new(secret.encode(), message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode()[:BUTTON_ID_LENGTH]


def pressed_where_shown(callback: ChatCallback, message: MessageRef | None) -> bool:
    """Was the button pressed in the place it was saved for? (An id saved before migration
    0011 names no place: any of its platform's; a press the platform reports without its
    message cannot be placed.)"""
    return callback.chat is None or message is None or message.chat == callback.chat


class Buttons:
    """The ids of a platform's buttons, and which of them this process knows are saved."""

    def __init__(
        self, channel: str, chats: ChatState, secret: Callable[[], str],
        now: Callable[[], datetime],
    ) -> None:  # fmt: skip
        self.channel = channel
        self.chats = chats
        self._secret = secret  # the service's, known once the core is bound
        self._now = now
        self._saved: set[str] = set()

    def ids(
        self, keys: Sequence[TaskButton], chat: str | None
    ) -> tuple[dict[TaskButton, str], list[ChatCallback]]:
        """The ids of the buttons shown in `chat`, and those not known to be saved yet (the
        caller saves them in whatever write suits it, then calls `remember`)."""
        secret = self._secret()
        ids = {key: button_id(secret, self.channel, chat, *key) for key in keys}
        missing = [
            ChatCallback(ids[key], self.channel, key[0], key[1], key[2], chat)
            for key in keys
            if ids[key] not in self._saved
        ]
        return ids, missing

    def for_card(
        self, task_id: str, keys: Sequence[ButtonKey], chat: str | None
    ) -> tuple[dict[ButtonKey, str], list[ChatCallback]]:
        ids, missing = self.ids([(task_id, action, option) for action, option in keys], chat)
        return {(action, option): v for (_, action, option), v in ids.items()}, missing

    def remember(self, saved: Sequence[ChatCallback]) -> None:
        if len(self._saved) > 200_000:
            self._saved.clear()
        self._saved.update(c.id for c in saved)

    async def ensure(self, keys: Sequence[TaskButton], chat: str | None) -> dict[TaskButton, str]:
        """The ids of the buttons shown in `chat`, saved."""
        ids, missing = self.ids(keys, chat)
        if missing:
            await self.chats.save_callbacks(missing, self._now())
            self.remember(missing)
        return ids


class Choices:
    """The ticked options of a multi-select question on a platform whose buttons toggle them
    one press at a time (Telegram), shared by everyone in the chat until Submit."""

    def __init__(self, channel: str, chats: ChatState) -> None:
        self.channel = channel
        self.chats = chats

    async def chosen(self, task_id: str) -> set[int]:
        ref = await self.chats.get_choice(self.channel, task_id)
        return set(ref.data.get("chosen", [])) if ref else set()

    async def toggle(self, task_id: str, index: int) -> set[int]:
        new = await swap(
            lambda: self.chats.get_choice(self.channel, task_id),
            lambda data, version: self.chats.swap_choice(self.channel, task_id, data, version),
            lambda data: {"chosen": sorted(set(data.get("chosen", [])) ^ {index})},
            attempts=50,
        )
        assert new is not None
        return set(new["chosen"])
