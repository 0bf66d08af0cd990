"""A decision as a platform message: the neutral card (bot/rendering.py) with its buttons' ids."""

from __future__ import annotations

from adapters.chat.buttons import Buttons, Choices
from adapters.chat.context import CoreLink
from adapters.chat.port import ButtonKey, MessageRef, Platform, Post
from adapters.web.links import decision_url
from bot.domain import Run, Task
from bot.ports import ChatCallback
from bot.rendering import render_decision


class Cards:
    def __init__(self, link: CoreLink, buttons: Buttons, choices: Choices | None = None) -> None:
        self.link = link
        self.buttons = buttons
        self.choices = choices  # None: the platform sends the ticked options with Submit

    async def render(
        self, task: Task, run: Run, chat: str, chosen: frozenset[int] | None = None
    ) -> tuple[Post, list[ChatCallback]]:
        """The decision's message for the place `chat` (its buttons are that place's), and
        the button ids still to be saved (by the caller, in whatever write suits it)."""
        if chosen is None:
            chosen = frozenset()
            if task.kind == "ask" and self.choices is not None:
                chosen = frozenset(await self.choices.chosen(task.id))
        url = decision_url(self.link.base_url, run.id, task.key)
        card = render_decision(task, run, self.link.now(), url, chosen=chosen)
        keys: list[ButtonKey] = [(b.action, b.option) for row in card.buttons for b in row]
        if any(action == "toggle" for action, _ in keys):
            keys.append(("toggle", None))  # one element for all options (Slack's checkboxes)
        ids, missing = self.buttons.for_card(task.id, keys, chat)
        return Post(task.id, card, ids), missing

    async def rendered(self, task: Task, run: Run, chat: str) -> Post:
        """`render`, its button ids saved."""
        post, missing = await self.render(task, run, chat)
        if missing:
            await self.buttons.chats.save_callbacks(missing, self.link.now())
            self.buttons.remember(missing)
        return post

    async def show(
        self, platform: Platform, ref: MessageRef, task: Task, run: Run,
        max_wait: float | None = None,
    ) -> bool:  # fmt: skip
        post = await self.rendered(task, run, ref.chat)
        return await platform.edit(ref, post, max_wait=max_wait)
