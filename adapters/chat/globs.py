"""Globs people wrote for "Approve & allow like this" on a platform that asks for them in a
reply (Telegram's "✏️ Edit glob": it cannot change a glob in place, as Slack's modal does).

A scope button carries only an opaque id; the glob it learns is kept here, with the decision,
and the button's saved option is its number in the list (buttons.py derives a new id per
number, so an edited offer's buttons never learn another glob). The list only grows, so a
number always names the same glob. Kept in the decision's choice record (a tool call has no
options to tick), which the store drops with the rest of a settled decision's chat state.
Also kept: which offer message each "✏️ Edit glob" prompt belongs to, so an accepted reply
shows the offer again with its glob.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.chat.records import strs, swap
from bot.ports import ChatState

MAX_GLOBS = 20  # per decision: plenty of tries, and the record stays small
MAX_PROMPTS = 20  # the last prompts' offers kept (older prompts' replies re-post the offer)


class Globs:
    def __init__(self, channel: str, chats: ChatState) -> None:
        self.channel = channel
        self.chats = chats

    async def _change(
        self, task_id: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any] | None:
        return await swap(
            lambda: self.chats.get_choice(self.channel, task_id),
            lambda data, version: self.chats.swap_choice(self.channel, task_id, data, version),
            change,
            attempts=50,
        )

    async def add(self, task_id: str, glob: str) -> int | None:
        """The glob's number for the task's scope buttons; None when the task has too many."""

        def append(data: dict[str, Any]) -> dict[str, Any] | None:
            globs = strs(data.get("globs"))
            return None if len(globs) >= MAX_GLOBS else {**data, "globs": [*globs, glob]}

        written = await self._change(task_id, append)
        return None if written is None else len(written["globs"]) - 1

    async def glob(self, task_id: str, number: int) -> str | None:
        found = await self.chats.get_choice(self.channel, task_id)
        globs = strs(found.data.get("globs")) if found else []
        return globs[number] if 0 <= number < len(globs) else None

    async def asked(self, task_id: str, chat: str, prompt: str, offer: str) -> None:
        """Prompt `prompt` in `chat` asks for a glob for the offer message `offer`."""

        def add(data: dict[str, Any]) -> dict[str, Any]:
            offers = _pairs(data.get("offers"))
            offers = [p for p in offers if p[0] != f"{chat}:{prompt}"][-(MAX_PROMPTS - 1) :]
            return {**data, "offers": [*offers, [f"{chat}:{prompt}", offer]]}

        await self._change(task_id, add)

    async def offer_of(self, task_id: str, chat: str, prompt: str) -> str | None:
        """The offer message prompt `prompt` asked a glob for (None: not known any more)."""
        found = await self.chats.get_choice(self.channel, task_id)
        pairs = _pairs(found.data.get("offers")) if found else []
        return next((offer for key, offer in pairs if key == f"{chat}:{prompt}"), None)


def _pairs(value: object) -> list[list[str]]:
    if not isinstance(value, list):
        return []
    return [[str(p[0]), str(p[1])] for p in value if isinstance(p, list) and len(p) == 2]
