"""Wake-ups for subscribers. Events themselves live in the store with a per-run sequence; the hub
only says "run R (of workspace W) has something new", so a subscriber re-reads from its last
sequence and can never miss or repeat an event. Other instances' writes arrive through an
EventSignal (PostgreSQL LISTEN/NOTIFY) and land here too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class EventHub:
    def __init__(self) -> None:
        self._gates: dict[str, asyncio.Event] = {}

    def gate(self, topic: str) -> asyncio.Event:
        """The event that the next `notify` of `topic` sets. Take it *before* reading the store."""
        gate = self._gates.get(topic)
        if gate is None:
            gate = self._gates[topic] = asyncio.Event()
        return gate

    def notify(self, topics: Iterable[str]) -> None:
        for topic in topics:
            gate = self._gates.pop(topic, None)
            if gate is not None:
                gate.set()

    def notify_run(self, workspace_id: str, run_id: str) -> None:
        if self._gates:  # most writes have nobody waiting
            self.notify((run_topic(run_id), workspace_topic(workspace_id), ANY))

    @staticmethod
    async def wait_either(gate: asyncio.Event, stopping: asyncio.Event, timeout: float) -> None:
        """Until there is news (`gate`), the service stops (`stopping`), or `timeout` passes."""
        waits = [asyncio.ensure_future(gate.wait()), asyncio.ensure_future(stopping.wait())]
        try:
            await asyncio.wait(
                waits, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for wait in waits:
                wait.cancel()

    async def wait(self, gate: asyncio.Event, timeout: float) -> bool:
        try:
            await asyncio.wait_for(gate.wait(), timeout=max(0.0, timeout))
        except TimeoutError:
            return False
        return True


ANY = "*"


def run_topic(run_id: str) -> str:
    return f"run:{run_id}"


def workspace_topic(workspace_id: str) -> str:
    return f"ws:{workspace_id}"
