"""Keeping under Telegram's flood limits instead of bouncing off them.

Telegram documents about 1 message/s per chat (short bursts tolerated), 20 messages/min per
group and 30 messages/s overall, and answers 429 `retry_after` beyond them. PTB's
AIORateLimiter covers the group and overall limits but lets 20 messages into a group at once,
which the per-chat limit refuses; so we book every message (sends and edits) here:

* per chat, a token bucket (`per_chat_burst`, refilled every `per_chat_interval` seconds) and,
  for groups, a sliding window (`group_per_window` per `group_window` seconds). Bookings are
  first come, first served per chat, and may lie in the future: `reserve` answers how long
  to wait, so a caller can choose to coalesce rather than queue (see digest.py);
* overall, a sliding one-second window, checked when the message actually leaves.

Margins are built in (1.1 s, 19 per 61 s, 25/s) because a booking is made a few milliseconds
before Telegram counts it. A 429 still honoured: `penalise` blocks the chat for `retry_after`.
Limits are per process: two instances sharing one bot share Telegram's budget, so give each a
proportional share (`Limits`) or let one instance own the chats.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limits:
    per_chat_interval: float = 1.1
    per_chat_burst: int = 3
    group_per_window: int = 19
    group_window: float = 61.0
    global_per_second: int = 25


class Busy(Exception):
    """The next slot for the chat is further away than the caller would wait."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"next slot in {wait:.1f} s")
        self.wait = wait


@dataclass
class _Chat:
    tokens: float
    at: float  # when `tokens` was true (the last booking)
    last: float = 0.0  # the latest booked slot (bookings are FIFO per chat)
    blocked_until: float = 0.0
    booked: deque[float] = field(default_factory=deque)


def is_group(chat_id: int) -> bool:
    """Groups, supergroups and channels have negative ids; people's private chats positive."""
    return chat_id < 0


class Pacer:
    def __init__(
        self, limits: Limits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or Limits()
        self.clock = clock
        self._chats: dict[int, _Chat] = {}
        self._sent: deque[float] = deque()
        self.waited = 0.0  # total seconds callers slept here (for the bench and metrics)

    def _chat(self, chat_id: int, now: float) -> _Chat:
        state = self._chats.get(chat_id)
        if state is None:
            state = _Chat(tokens=float(self.limits.per_chat_burst), at=now)
            self._chats[chat_id] = state
        window = self.limits.group_window
        while state.booked and state.booked[0] <= now - window:
            state.booked.popleft()
        return state

    def _slot(self, chat_id: int, state: _Chat, now: float) -> tuple[float, float]:
        """The earliest time a message to the chat may leave, and the bucket's tokens then."""
        lim = self.limits
        t = max(now, state.last, state.blocked_until)
        for _ in range(3):  # the two limits push each other at most a couple of times
            tokens = min(
                float(lim.per_chat_burst), state.tokens + (t - state.at) / lim.per_chat_interval
            )
            if tokens < 1.0:
                t += (1.0 - tokens) * lim.per_chat_interval
                tokens = 1.0
            if is_group(chat_id) and len(state.booked) >= lim.group_per_window:
                free = state.booked[-lim.group_per_window] + lim.group_window
                if free > t:
                    t = free
                    continue
            return t, tokens
        return t, 1.0

    def estimate(self, chat_id: int) -> float:
        """Seconds until a message to the chat could leave, booking nothing."""
        now = self.clock()
        state = self._chat(chat_id, now)
        t, _ = self._slot(chat_id, state, now)
        return t - now

    def recent(self, chat_id: int, window: float = 60.0) -> int:
        """How many messages were booked for the chat in the last `window` seconds."""
        now = self.clock()
        state = self._chat(chat_id, now)
        return sum(1 for t in state.booked if t > now - window)

    def reserve(self, chat_id: int, max_wait: float | None = None) -> float:
        """Book the chat's next slot; return the seconds to wait for it. Raise Busy (booking
        nothing) if that is more than `max_wait`."""
        now = self.clock()
        state = self._chat(chat_id, now)
        t, tokens = self._slot(chat_id, state, now)
        if max_wait is not None and t - now > max_wait:
            raise Busy(t - now)
        state.tokens, state.at, state.last = tokens - 1.0, t, t
        state.booked.append(t)
        return t - now

    async def acquire(self, chat_id: int, max_wait: float | None = None) -> None:
        """Wait for the chat's next slot (and the overall limit), booking it."""
        delay = self.reserve(chat_id, max_wait)
        if delay > 0:
            self.waited += delay
            await asyncio.sleep(delay)
        await self._overall()

    async def _overall(self) -> None:
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

    def penalise(self, chat_id: int, seconds: float) -> None:
        """Telegram said 429 `retry_after`: nothing more to this chat before then."""
        now = self.clock()
        state = self._chat(chat_id, now)
        state.blocked_until = max(state.blocked_until, now + seconds)
        state.tokens, state.at = 0.0, max(state.at, now + seconds - self.limits.per_chat_interval)
