"""Opaque button ids and multi-select state, the same on every platform.

A button carries only an id; what it stands for (task, action, option) is saved in the store
and looked up on a press, so nothing a client sends back is trusted. Ids are derived from a
secret (not random) so that a retried post, or two instances rendering the same decision,
agree on them without coordination.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Sequence
from datetime import datetime

from adapters.chat.port import ButtonKey
from adapters.chat.records import swap
from bot.ports import ChatCallback, ChatState

BUTTON_ID_LENGTH = 16  # 96 bits of HMAC, base64url: far under Telegram's 64 bytes
TaskButton = tuple[str, str, int | None]  # task id, action, option


def button_id(secret: str, task_id: str, action: str, option: int | None) -> str:
    digest = hmac.new(
        secret.encode(), f"{task_id}|{action}|{option}".encode(), hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(digest).decode()[:BUTTON_ID_LENGTH]


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

    def ids(self, keys: Sequence[TaskButton]) -> tuple[dict[TaskButton, str], list[ChatCallback]]:
        """The buttons' ids, and those not known to be saved yet (the caller saves them in
        whatever write suits it, then calls `remember`)."""
        secret = self._secret()
        ids = {key: button_id(secret, *key) for key in keys}
        missing = [
            ChatCallback(ids[key], self.channel, key[0], key[1], key[2])
            for key in keys
            if ids[key] not in self._saved
        ]
        return ids, missing

    def for_card(
        self, task_id: str, keys: Sequence[ButtonKey]
    ) -> tuple[dict[ButtonKey, str], list[ChatCallback]]:
        ids, missing = self.ids([(task_id, action, option) for action, option in keys])
        return {(action, option): v for (_, action, option), v in ids.items()}, missing

    def remember(self, saved: Sequence[ChatCallback]) -> None:
        if len(self._saved) > 200_000:
            self._saved.clear()
        self._saved.update(c.id for c in saved)

    async def ensure(self, keys: Sequence[TaskButton]) -> dict[TaskButton, str]:
        ids, missing = self.ids(keys)
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
