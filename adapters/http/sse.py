"""Server-Sent Events over aiohttp, fed from the store.

Events live in the store with a sequence; the hub only says "something new". So a stream takes
the wake-up gate *before* reading, writes everything after its last id, then waits. A client that
reconnects with `Last-Event-ID` gets exactly the events after that id: none lost, none repeated.
The wait is capped so writers the hub cannot hear (another process on the same SQLite file) are
still seen within a second, and a silent stream sends a comment now and then so proxies and
clients can tell a quiet feed from a dead one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from bot import errors, jsontext
from bot.domain import Event
from bot.errors import ApprovalError
from bot.events import EventHub

RECHECK = 1.0  # seconds between store reads when no wake-up came
# Seconds between checks that the stream's credential still holds (and before any events are
# sent): a revoked token's stream ends within this (issue 21, 7).
CREDENTIAL_RECHECK = 5.0
KEEPALIVE = 15.0  # seconds of silence before a comment line

CLOSING = web.AppKey("sse_closing", asyncio.Event)
MAX_EVENT_ID = 10**18 - 1  # a resume point has at most 18 digits


def last_event_id(request: web.Request) -> int:
    """Where to resume: the `Last-Event-ID` header (EventSource sends it on reconnect) or
    `?last_event_id=`; 0 means from the start."""
    raw = request.headers.get("Last-Event-ID") or request.query.get("last_event_id") or "0"
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(MAX_EVENT_ID)):  # '²' too
        raise ApprovalError(
            errors.INVALID_REQUEST, "last_event_id: a non-negative integer event id", 422
        )
    return int(raw)


def frame(event_id: int, name: str, data: object) -> bytes:
    return f"id: {event_id}\nevent: {name}\ndata: {jsontext.dumps(data)}\n\n".encode()


async def stream(
    request: web.Request,
    hub: EventHub,
    topic: str,
    after: int,
    read: Callable[[int], Awaitable[Sequence[Event]]],
    position: Callable[[Event], int],
    keep: Callable[[Event], bool] = lambda _e: True,
    allowed: Callable[[], Awaitable[bool]] | None = None,
) -> web.StreamResponse:
    """Stream `read(after)` forever: `position(event)` is the SSE id and the resume point.
    `allowed` says whether the credential that opened it still holds: asked before events are
    sent and every `CREDENTIAL_RECHECK` seconds; the stream ends when it no longer does."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx: do not hold events back
        }
    )
    await response.prepare(request)
    closing = request.app[CLOSING]
    loop = asyncio.get_running_loop()
    quiet_since = checked = loop.time()
    with contextlib.suppress(ConnectionResetError):
        await response.write(b"retry: 1000\n\n")
        while not closing.is_set():
            transport = request.transport
            if transport is None or transport.is_closing():
                break
            gate = hub.gate(topic)
            events = await read(after)
            if allowed is not None and (events or loop.time() - checked >= CREDENTIAL_RECHECK):
                if not await allowed():
                    break  # revoked (or removed) since it was opened: nothing more is sent
                checked = loop.time()
            chunk = b"".join(frame(position(e), e.name, e.data) for e in events if keep(e))
            if events:
                after = position(events[-1])
            if chunk:
                await response.write(chunk)
                quiet_since = loop.time()
            elif loop.time() - quiet_since >= KEEPALIVE:
                await response.write(b": keepalive\n\n")
                quiet_since = loop.time()
            if events:
                continue  # there may be more than one page: read again before waiting
            await EventHub.wait_either(gate, closing, RECHECK)
    return response


def setup(app: web.Application) -> None:
    app[CLOSING] = asyncio.Event()

    async def closing(app: web.Application) -> None:
        # Long-lived streams end at shutdown instead of holding the server open.
        app[CLOSING].set()

    app.on_shutdown.append(closing)
