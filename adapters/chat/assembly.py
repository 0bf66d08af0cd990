"""The shared layer's parts wired for one platform: every chat adapter builds these the same
way, around its own `Platform`."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.chat.buttons import Buttons, Choices
from adapters.chat.cards import Cards
from adapters.chat.context import CoreLink
from adapters.chat.delivery import ChatNotifier
from adapters.chat.digests import Digests, DigestTuning
from adapters.chat.globs import Globs
from adapters.chat.pacing import Budget
from adapters.chat.port import Platform
from adapters.chat.presses import MemberOf, Presses
from adapters.chat.routing import Routing
from bot.ports import ChatState


@dataclass(frozen=True)
class ChatLayer:
    notifier: ChatNotifier  # the core's Notifier for this platform
    digests: Digests
    presses: Presses


def assemble(
    platform: Platform, chats: ChatState, link: CoreLink, budget: Budget,
    tuning: DigestTuning, member_of: MemberOf, *, toggles: bool, routing: Routing | None = None,
    globs: Globs | None = None,
) -> ChatLayer:  # fmt: skip
    """`toggles`: the platform's multi-select buttons tick one option a press (Telegram), so
    the ticks are kept in the store; otherwise the ticked options come with Submit (Slack).
    `routing`: the configured routes (routing.py); none, every decision goes to the
    workspace's usual chat. `globs`: where the globs people write are kept when an offer's
    glob is changed by replying to a prompt (Telegram's "✏️ Edit glob", the platform's own);
    otherwise it comes with the chosen scope (Slack's modal)."""
    buttons = Buttons(platform.name, chats, lambda: link.service.secret, link.now)
    cards = Cards(link, buttons, Choices(platform.name, chats) if toggles else None)
    notifier = ChatNotifier(platform, chats, link, cards, routing=routing)
    digests = Digests(platform, chats, link, buttons, budget, notifier.post_alone, tuning)
    notifier.coalescer = digests
    presses = Presses(
        platform, chats, link, cards, member_of, touch=digests.touch, expand=notifier.expand,
        globs=globs,
    )  # fmt: skip
    return ChatLayer(notifier, digests, presses)
