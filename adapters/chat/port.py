"""The port a chat platform implements, and the values that cross it.

Ids are strings whatever the platform: a Telegram chat id "-100200300" and message id "17", a
Slack channel "C0123" and message ts "1700000000.000100". Each platform maps its own errors
once, into `RateLimited` (the platform said "too many, come back in N s") and `Busy` (our own
pacing would make the caller wait longer than it said it would).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from adapters.chat.offers import Offer
from bot.domain import Member, Run, Task
from bot.rendering import Action, Card

ButtonKey = tuple[str, int | None]  # a button of a card: its action and option index


@dataclass(frozen=True)
class Place:
    """Where messages go: a chat or channel, and optionally a thread in it."""

    chat: str
    thread: str | None = None


@dataclass(frozen=True)
class MessageRef:
    """A message the bot sent."""

    chat: str
    id: str
    thread: str | None = None


@dataclass(frozen=True)
class Press:
    """Someone pressed one of our buttons. `button` is the opaque id it carried; `chosen`
    the ticked options when the platform sends them along (Slack's checkboxes on Submit);
    `handle` whatever the platform needs to answer this press (a query, a trigger id)."""

    user: str
    user_name: str
    button: str
    message: MessageRef | None
    chosen: tuple[int, ...] | None = None
    handle: Any = None


@dataclass(frozen=True)
class Notice:
    """A short message that is not a decision: a nudge, a reply in a thread. `mentions` are
    platform markup made by `Platform.mention` (trusted); everything else is plain text the
    platform escapes."""

    text: str
    bold: str = ""  # shown first, emphasised (a tool name)
    mentions: tuple[str, ...] = ()
    icon: str = ""
    lines: tuple[str, ...] = ()  # more plain lines below (an offer's past calls)
    buttons: tuple[tuple[str, str], ...] = ()  # (label, opaque id), one row


@dataclass(frozen=True)
class Post:
    """A decision to show. `maybe_sent`: an earlier attempt failed in a way that may have
    posted it after all (a timeout): a platform that can look for it first should."""

    task_id: str
    card: Card
    buttons: Mapping[ButtonKey, str]
    maybe_sent: bool = False


@dataclass(frozen=True)
class Page:
    """A digest page: many decisions listed on one message (digests.py). `buttons` holds the
    ids of the first few waiting ones' buttons, keyed by (task id, action): approve, deny,
    and expand (post that decision in full)."""

    tasks: tuple[Task, ...]
    buttons: Mapping[tuple[str, str], str]
    inbox_url: str
    done: bool


class RateLimited(Exception):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited: retry after {retry_after:.1f} s")
        self.retry_after = retry_after


class Busy(Exception):
    """The next slot for the place is further away than the caller would wait."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"next slot in {wait:.1f} s")
        self.wait = wait


class Unreachable(Exception):
    """The platform refuses to post to a place for good: no such chat, the bot is not in it,
    a person who never opened a conversation with the bot. A copy there is given up (a retry
    would only be refused again)."""


class NotYet(Exception):
    """The step depends on another one still in flight (the outbox relay retries it)."""


class Platform(Protocol):
    """One chat platform, as the shared layer needs it."""

    name: str  # "telegram", "slack": also the outbox channel

    async def post(
        self, place: Place, message: Post | Notice | Page, *, reply_to: MessageRef | None = None,
        max_wait: float | None = None,
    ) -> MessageRef:  # fmt: skip
        """Send a decision, a notice or a digest page, paced by the platform's budget (a page
        is booked by its caller: digests.py); raise Busy or RateLimited rather than wait past
        `max_wait`."""
        ...

    async def edit(
        self, ref: MessageRef, message: Post | Page | Notice, *, max_wait: float | None = None
    ) -> bool:
        """Show `message` in place of what `ref` shows; False if it can no longer be edited."""
        ...

    async def offer_rule(self, press: Press, offer: Offer) -> bool:
        """Show the presser the rule "Approve & allow like this" would learn, the past calls it
        would have allowed and a choice of scope (a message with a button per scope, or a
        modal that may also change the glob); the choice comes back as a press of a scope's
        button (`Presses.on_press`) or through `Presses.on_allow`. False if it could not."""
        ...

    async def tell(self, press: Press, text: str, *, alert: bool = False) -> None:
        """A short private answer to the person who pressed (best effort)."""
        ...

    async def ask_text(self, press: Press, task: Task, action: Action) -> bool:
        """Ask the presser for free text (a deny reason, an answer); its arrival comes back
        through `Presses.on_text`. False if it could not be asked."""
        ...

    async def open_thread(self, run: Run, place: Place, *, posting: str | None = None) -> Place:
        """Where the run's decisions go inside `place`: on a platform with threads, the run's
        thread, created once (even by racing instances) and its parent kept current (the
        count of the run's open decisions shown in that place, `posting` included: the
        decision about to be posted there, not recorded yet); elsewhere `place` itself."""
        ...

    def mention(self, member: Member) -> str | None:
        """Markup that notifies the member; None if they have no identity here."""
        ...

    def place_for(self, workspace_id: str) -> Place | None:
        """Where a workspace's decisions are posted; None: nowhere."""
        ...

    async def direct(self, member: Member) -> Place | None:
        """The member's direct-message conversation with the bot (a route's `member:NAME`);
        None if they have no identity here."""
        ...

    async def healthy(self) -> bool: ...
