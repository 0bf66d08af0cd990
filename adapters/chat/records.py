"""Typed records kept per decision and per run, and the one compare-and-swap helper.

A delivery record says what was sent about a decision on one platform: where, which messages,
its copies in the other places routes show it in (`Copy`), whether its ending is shown, which
nudges went out (per place), and which steps an instance has claimed.
Every change is a compare-and-swap on the record's version (`swap`), so a redelivered outbox
item finds its message and sends nothing, and two instances never both post.

Older Telegram records stored integer ids (`chat_id`, `messages`, `nudges`); they read as
strings here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from adapters.chat.port import MessageRef, Place
from bot.ports import Versioned

R = TypeVar("R")
CLAIM_SECONDS = 120.0


class Contended(RuntimeError):
    """A record kept changing under us for every attempt."""


async def until_won(attempt: Callable[[], Awaitable[tuple[bool, R]]], attempts: int = 20) -> R:
    """Run `attempt` (one read and one compare-and-swap, answering whether it won and what
    to return) until it wins: the one retry loop of every compare-and-swap in the layer."""
    for _ in range(attempts):
        won, result = await attempt()
        if won:
            return result
    raise Contended("a chat record kept changing under us")


async def swap(
    load: Callable[[], Awaitable[Versioned | None]],
    store: Callable[[dict[str, Any], int], Awaitable[bool]],
    change: Callable[[dict[str, Any]], dict[str, Any] | None],
    *,
    attempts: int = 20,
) -> dict[str, Any] | None:
    """Read, change, compare-and-swap a versioned record, again until it sticks. `change`
    gets a copy of the data and returns the new data, or None to write nothing; answers what
    was written (None if nothing)."""

    async def attempt() -> tuple[bool, dict[str, Any] | None]:
        seen = await load() or Versioned({}, 0)
        new = change(dict(seen.data))
        if new is None:
            return True, None
        return await store(new, seen.version), new

    return await until_won(attempt, attempts)


def strs(values: Any) -> list[str]:
    """A record's list of strings (anything else reads as empty)."""
    return [str(v) for v in values] if isinstance(values, list) else []


@dataclass(frozen=True)
class Copy:
    """The decision shown in one more place (routing.py): another channel, a person's direct
    messages, or where it was escalated to. `message` is "" until it is posted; `attempts`
    as for the main post (>0 with no message: one may have gone out unseen)."""

    place: Place
    message: str = ""
    attempts: int = 0
    escalation: bool = False
    gone: bool = False  # the platform refused the place for good (port.Unreachable)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Copy:
        return cls(
            Place(str(data.get("chat", "")), data.get("thread")),
            str(data.get("message") or ""),
            int(data.get("attempts") or 0),
            bool(data.get("escalation")),
            bool(data.get("gone")),
        )

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"chat": self.place.chat}
        if self.place.thread is not None:
            out["thread"] = self.place.thread
        if self.message:
            out["message"] = self.message
        if self.attempts:
            out["attempts"] = self.attempts
        if self.escalation:
            out["escalation"] = True
        if self.gone:
            out["gone"] = True
        return out

    @property
    def ref(self) -> MessageRef | None:
        if not self.message:
            return None
        return MessageRef(self.place.chat, self.message, self.place.thread)


@dataclass(frozen=True)
class Delivery:
    """What one platform shows about one decision."""

    place: Place | None = None
    messages: tuple[str, ...] = ()  # the decision's own messages (a first, then expansions)
    digest: int | None = None  # the digest page listing it, if any
    ended: bool = False  # its ending is shown
    skipped: bool = False  # its workspace had no place to post to
    nudges: dict[str, str] = field(default_factory=dict)  # nudge number -> message id ("")
    claims: dict[str, float] = field(default_factory=dict)  # step -> claimed until (epoch s)
    attempts: int = 0  # posts tried; >0 with no message: one may have gone out unseen
    copies: tuple[Copy, ...] = ()  # the other places it is shown in (routes, escalation)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Delivery:
        chat = data.get("chat_id")
        place = None if chat is None else Place(str(chat), data.get("thread"))
        digest = data.get("digest")
        return cls(
            place=place,
            messages=tuple(strs(data.get("messages"))),
            digest=None if digest is None else int(digest),
            ended=bool(data.get("ended")),
            skipped=bool(data.get("skipped")),
            nudges={str(k): str(v) for k, v in (data.get("nudges") or {}).items()},
            claims={str(k): float(v) for k, v in (data.get("claims") or {}).items()},
            attempts=int(data.get("attempts") or 0),
            copies=tuple(Copy.of(c) for c in data.get("copies") or [] if isinstance(c, dict)),
        )

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.place is not None:
            out["chat_id"] = self.place.chat
            if self.place.thread is not None:
                out["thread"] = self.place.thread
        if self.messages:
            out["messages"] = list(self.messages)
        if self.digest is not None:
            out["digest"] = self.digest
        if self.ended:
            out["ended"] = True
        if self.skipped:
            out["skipped"] = True
        if self.nudges:
            out["nudges"] = dict(self.nudges)
        if self.claims:
            out["claims"] = dict(self.claims)
        if self.attempts:
            out["attempts"] = self.attempts
        if self.copies:
            out["copies"] = [c.data() for c in self.copies]
        return out

    @property
    def shown(self) -> bool:
        """Posted somewhere: as a message of its own or on a digest page."""
        return bool(self.messages) or self.digest is not None

    def refs(self) -> list[MessageRef]:
        """Every message of the decision: its own ones, then its copies'."""
        return [*self.own_refs(), *(c.ref for c in self.copies if c.ref is not None)]

    def own_refs(self) -> list[MessageRef]:
        if self.place is None:
            return []
        return [MessageRef(self.place.chat, m, self.place.thread) for m in self.messages]

    def shows(self, ref: MessageRef) -> bool:
        """Is `ref` one of the decision's messages (in any place)?"""
        return any((r.chat, r.id) == (ref.chat, ref.id) for r in self.refs())

    def shown_in(self, chat: str) -> bool:
        """Is it shown in `chat`, or on its way there: its own message or digest line (the
        place is recorded once posted), or a copy (recorded when claimed, before it is
        posted) the platform did not refuse?"""
        if self.place is not None and self.place.chat == chat:
            return True
        return any(c.place.chat == chat and not c.gone for c in self.copies)

    def copy_in(self, chat: str) -> Copy | None:
        return next((c for c in self.copies if c.place.chat == chat), None)

    def with_copy(self, copy: Copy) -> Delivery:
        """`copy` in place of the one in its chat (or added at the end)."""
        copies = list(self.copies)
        for i, existing in enumerate(copies):
            if existing.place.chat == copy.place.chat:
                copies[i] = copy
                break
        else:
            copies.append(copy)
        return replace(self, copies=tuple(copies))

    def claimed(self, step: str, now: float) -> bool:
        return self.claims.get(step, 0.0) > now

    def claim(self, step: str, now: float) -> Delivery:
        return replace(self, claims={**self.claims, step: now + CLAIM_SECONDS})

    def release(self, step: str) -> Delivery:
        return replace(self, claims={k: v for k, v in self.claims.items() if k != step})


@dataclass(frozen=True)
class RunThread:
    """A run's thread on a platform with threads: its parent message and what it shows."""

    chat: str = ""
    ts: str = ""  # the parent message; "" while being created
    waiting: int = -1  # the count the parent shows
    announced: bool = False  # a decision was broadcast to the channel already
    claimed_until: float = 0.0  # an instance is creating the parent

    @classmethod
    def of(cls, data: dict[str, Any]) -> RunThread:
        return cls(
            chat=str(data.get("chat", "")),
            ts=str(data.get("ts", "")),
            waiting=int(data.get("waiting", -1)),
            announced=bool(data.get("announced")),
            claimed_until=float(data.get("claimed_until", 0.0)),
        )

    def data(self) -> dict[str, Any]:
        return {
            "chat": self.chat,
            "ts": self.ts,
            "waiting": self.waiting,
            "announced": self.announced,
            "claimed_until": self.claimed_until,
        }
