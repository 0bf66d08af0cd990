"""Time as a dependency: the service reads it from a Clock so tests move 24 hours in a blink."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    async def sleep_until(self, when: datetime, wake: asyncio.Event) -> None:
        """Return at `when`, or earlier when `wake` is set."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime, wake: asyncio.Event) -> None:
        delay = max(0.0, (when - self.now()).total_seconds())
        try:
            await asyncio.wait_for(wake.wait(), timeout=delay)
        except TimeoutError:
            pass


class FakeClock:
    """A clock that only moves when told to. `advance` wakes every sleeper whose time has come."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._tick = asyncio.Event()

    def now(self) -> datetime:
        return self._now

    async def advance(self, delta: timedelta | float) -> None:
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        self._now += delta
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()
        # Let woken sleepers run before the caller looks at the result.
        for _ in range(10):
            await asyncio.sleep(0)

    async def sleep_until(self, when: datetime, wake: asyncio.Event) -> None:
        while self._now < when and not wake.is_set():
            tick = asyncio.ensure_future(self._tick.wait())
            woken = asyncio.ensure_future(wake.wait())
            await asyncio.wait({tick, woken}, return_when=asyncio.FIRST_COMPLETED)
            tick.cancel()
            woken.cancel()
