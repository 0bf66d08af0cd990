"""The page's live feed (Server-Sent Events): tells an open page what rests on people now.

It waits on the workspace's gate in the event hub (taken *before* reading, so nothing slips
between the read and the wait), and re-reads at least every two seconds so writers in another
process sharing a SQLite file are seen too. An `inbox` event carries the ids of every decision
still open; the script swaps in the inbox fragment, or reloads a decision page whose decision
ended elsewhere.
"""

from __future__ import annotations

import json

from aiohttp import web

from adapters.web.context import member_of, start_stream, state, still_signed_in
from bot.events import EventHub, workspace_topic

# Re-read at least this often without a wake-up: other processes writing the same SQLite file
# (the CLI) cannot wake this one. PostgreSQL instances wake each other (LISTEN/NOTIFY).
RECHECK_SECONDS = 2.0
RECHECK_SECONDS_POSTGRES = 15.0
HEARTBEAT_SECONDS = 15.0  # a comment line now and then finds connections that went away


def sse(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def stream(request: web.Request) -> web.StreamResponse:
    member = member_of(request)  # a live session (checked again at every turn below)
    if member is None:
        raise web.HTTPUnauthorized(text="unauthorized: sign in again")
    web_state = state(request)
    core = web_state.core
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await start_stream(request, response)
    await response.write(b"retry: 2000\n\n")
    last: list[str] | None = None
    quiet = 0.0
    recheck = (
        RECHECK_SECONDS_POSTGRES if getattr(core.store, "postgres", False) else RECHECK_SECONDS
    )
    try:
        while not web_state.stopping.is_set() and await still_signed_in(request):
            gate = core.hub.gate(workspace_topic(member.workspace_id))
            tasks = await core.service.asks(member, member.workspace_id)
            keys = [f"{t.run_id}/{t.key}" for t in tasks]
            if keys != last:
                data = {"keys": keys, "count": len(keys), "now": core.clock.now().isoformat()}
                await response.write(sse("inbox", data))
                last, quiet = keys, 0.0
            elif quiet >= HEARTBEAT_SECONDS:
                await response.write(b": keep-alive\n\n")
                quiet = 0.0
            await EventHub.wait_either(gate, web_state.stopping, recheck)
            quiet += recheck
    except (ConnectionResetError, ConnectionError):
        pass  # the page went away
    return response
