"""Keeping under a platform's flood limits instead of bouncing off them.

Every message (sends and edits) is booked here first: per place, a token bucket (`per_burst`,
refilled every `per_interval` seconds) and, for places the platform counts per minute too
(Telegram groups), a sliding window (`window_count` per `window` seconds). Bookings are first
come, first served per place, and may lie in the future: `reserve` answers how long to wait, so
a caller can choose to coalesce rather than queue (digests.py). Overall, a sliding one-second
window is checked when the message actually leaves. A 429 is still honoured: `penalise` blocks
the place for as long as the platform said.

Several instances sharing one database share one budget (`SharedBudget`): each booking is a
compare-and-swap on the place's record in the store, so two instances never post twice the
allowed rate into one place.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adapters.chat.port import Busy
from adapters.chat.records import swap
from bot.ports import ChatState


@dataclass(frozen=True)
class Limits:
    per_interval: float = 1.1
    per_burst: int = 3
    window_count: int = 19
    window: float = 61.0
    global_per_second: int = 25


@dataclass
class _Place:
    tokens: float
    at: float  # when `tokens` was true (the last booking)
    last: float = 0.0  # the latest booked slot (bookings are FIFO per place)
    blocked_until: float = 0.0
    booked: deque[float] = field(default_factory=deque)
    posts: deque[float] = field(default_factory=deque)  # the bookings that were decisions

    def data(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens, "at": self.at, "last": self.last,
            "blocked_until": self.blocked_until, "booked": list(self.booked),
            "posts": list(self.posts),
        }  # fmt: skip

    @classmethod
    def of(cls, data: dict[str, Any]) -> _Place:
        return cls(
            float(data["tokens"]), float(data["at"]), float(data.get("last", 0.0)),
            float(data.get("blocked_until", 0.0)), deque(data.get("booked", [])),
            deque(data.get("posts", [])),
        )  # fmt: skip


class Pacer:
    """The bookings of this process (one instance), or the arithmetic of a shared budget."""

    def __init__(
        self, limits: Limits | None = None, clock: Callable[[], float] = time.monotonic,
        windowed: Callable[[str], bool] = lambda place: True,
    ) -> None:  # fmt: skip
        self.limits = limits or Limits()
        self.clock = clock
        self.windowed = windowed  # does the per-minute window apply to this place?
        self._places: dict[str, _Place] = {}
        self._sent: deque[float] = deque()
        self.waited = 0.0  # total seconds callers slept here (for the bench and metrics)

    def _place(self, key: str, now: float) -> _Place:
        state = self._places.get(key)
        if state is None:
            state = _Place(tokens=float(self.limits.per_burst), at=now)
            self._places[key] = state
        window = max(self.limits.window, 60.0)
        while state.booked and state.booked[0] <= now - window:
            state.booked.popleft()
        while state.posts and state.posts[0] <= now - window:
            state.posts.popleft()
        return state

    def _slot(self, key: str, state: _Place, now: float) -> tuple[float, float]:
        """The earliest time a message to the place may leave, and the bucket's tokens then."""
        lim = self.limits
        t = max(now, state.last, state.blocked_until)
        for _ in range(3):  # the two limits push each other at most a couple of times
            tokens = min(float(lim.per_burst), state.tokens + (t - state.at) / lim.per_interval)
            if tokens < 1.0:
                t += (1.0 - tokens) * lim.per_interval
                tokens = 1.0
            if self.windowed(key) and len(state.booked) >= lim.window_count:
                free = state.booked[-lim.window_count] + lim.window
                if free > t:
                    t = free
                    continue
            return t, tokens
        return t, 1.0

    def estimate(self, key: str) -> float:
        """Seconds until a message to the place could leave, booking nothing."""
        now = self.clock()
        state = self._place(key, now)
        t, _ = self._slot(key, state, now)
        return t - now

    def recent_posts(self, key: str, window: float = 60.0) -> int:
        """Decisions posted to the place in the last `window` seconds."""
        now = self.clock()
        return sum(1 for t in self._place(key, now).posts if t > now - window)

    def reserve(self, key: str, max_wait: float | None = None, post: bool = False) -> float:
        """Book the place's next slot (`post`: for a decision); return the seconds to wait
        for it. Raise Busy (booking nothing) if that is more than `max_wait`."""
        now = self.clock()
        state = self._place(key, now)
        t, tokens = self._slot(key, state, now)
        if max_wait is not None and t - now > max_wait:
            raise Busy(t - now)
        state.tokens, state.at, state.last = tokens - 1.0, t, t
        state.booked.append(t)
        if post:
            state.posts.append(t)
        return t - now

    def penalise(self, key: str, seconds: float) -> None:
        """The platform said 429: nothing more to this place for `seconds`."""
        now = self.clock()
        state = self._place(key, now)
        state.blocked_until = max(state.blocked_until, now + seconds)
        state.tokens, state.at = 0.0, max(state.at, now + seconds - self.limits.per_interval)

    async def overall(self) -> None:
        """Wait for a slot in this process's overall one-second window."""
        while True:
            now = self.clock()
            while self._sent and self._sent[0] <= now - 1.0:
                self._sent.popleft()
            if len(self._sent) < self.limits.global_per_second:
                self._sent.append(now)
                return
            delay = self._sent[0] + 1.0 - now
            self.waited += delay
            await asyncio.sleep(delay)

    def load(self, key: str, data: dict[str, Any] | None) -> None:
        if data:
            self._places[key] = _Place.of(data)
        else:
            self._places.pop(key, None)

    def dump(self, key: str) -> dict[str, Any]:
        return self._places[key].data()


class Budget:
    """Where a platform books its messages: in this process, or (`shared`) in the store, for
    instances that share one bot. Shared bookings use the wall clock, which the instances
    agree on; a process's own, the monotonic one."""

    def __init__(
        self, channel: str, limits: Limits | None = None, *, shared: ChatState | None = None,
        windowed: Callable[[str], bool] = lambda place: True,
    ) -> None:  # fmt: skip
        clock = time.time if shared is not None else time.monotonic
        self.pacer = Pacer(limits, clock, windowed)
        self.channel = channel
        self.shared = shared

    @property
    def waited(self) -> float:
        return self.pacer.waited

    async def _booked(self, key: str, book: Callable[[], float]) -> float:
        """Run `book` on the place's shared state, saved by compare-and-swap."""
        if self.shared is None:
            return book()
        chats, record = self.shared, f"budget:{key}"
        result: list[float] = []

        def change(data: dict[str, Any]) -> dict[str, Any]:
            self.pacer.load(key, data)
            result[:] = [book()]
            return self.pacer.dump(key)

        await swap(
            lambda: chats.get_record(self.channel, record),
            lambda data, version: chats.swap_record(self.channel, record, data, version),
            change,
            attempts=50,
        )
        return result[0]

    async def _load(self, key: str) -> None:
        if self.shared is not None:
            found = await self.shared.get_record(self.channel, f"budget:{key}")
            self.pacer.load(key, found.data if found else None)

    async def estimate(self, key: str) -> tuple[float, int]:
        """Seconds until a message to the place could leave, and the decisions posted there
        in the last minute."""
        await self._load(key)
        return self.pacer.estimate(key), self.pacer.recent_posts(key)

    async def acquire(self, key: str, max_wait: float | None = None, post: bool = False) -> None:
        """Wait for the place's next slot (and the overall limit), booking it."""
        delay = await self._booked(key, lambda: self.pacer.reserve(key, max_wait, post))
        if delay > 0:
            self.pacer.waited += delay
            await asyncio.sleep(delay)
        await self.pacer.overall()

    async def penalise(self, key: str, seconds: float) -> None:
        def block() -> float:
            self.pacer.penalise(key, seconds)
            return 0.0

        await self._booked(key, block)
