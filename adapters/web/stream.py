"""The page's live feed (Server-Sent Events): tells an open page what rests on people now.

It waits on the workspace's gate in the event hub (taken *before* reading, so nothing slips
between the read and the wait), and re-reads at least every two seconds so writers in another
process sharing a SQLite file are seen too. An `inbox` event carries the real total (`count`),
a `version` that changes whenever anything resting on people does, and the newest decisions'
ids (`keys`, at most `queue.NEWEST_KEYS`): two small queries and a small event even with
thousands waiting. The script swaps in the inbox fragment when the version moves. A decision's
page opens the feed with `?watch=<run_id>/<key>`; its events then say whether that decision
still waits (`watched`) and, under a quorum, how many approvals it has (`approvals`); the page
reloads to show how it ended, and shows a new count in place.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from adapters.web.context import member_of, start_stream, state, still_signed_in, storable
from adapters.web.queue import inbox_version
from bot.core import Core
from bot.domain import Principal
from bot.events import EventHub, workspace_topic

# Re-read at least this often without a wake-up: other processes writing the same SQLite file
# (the CLI) cannot wake this one. PostgreSQL instances wake each other (LISTEN/NOTIFY).
RECHECK_SECONDS = 2.0
RECHECK_SECONDS_POSTGRES = 15.0
HEARTBEAT_SECONDS = 15.0  # a comment line now and then finds connections that went away


async def _still_waits(
    core: Core, member: Principal, watch: str
) -> tuple[bool, dict[str, Any] | None]:
    """Whether the decision a page watches still waits (another workspace's never does), and
    its approvals under a quorum (`{"required", "given": [names]}`; None without one)."""
    run_id, _, key = watch.partition("/")
    async with core.store.read() as tx:
        task = await tx.get_task(run_id, key)
    if task is None or task.workspace_id != member.workspace_id:
        return False, None
    if task.approvals_given is None:
        return task.parked, None
    names = [str(g["by"]) for g in task.approvals_given]
    return task.parked, {"required": task.required_approvals, "given": names}


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
    watch = request.query.get("watch", "")
    if not storable(watch, 500) or "/" not in watch:
        watch = ""
    last: tuple[str, bool, dict[str, Any] | None] | None = None
    quiet = 0.0
    recheck = (
        RECHECK_SECONDS_POSTGRES if getattr(core.store, "postgres", False) else RECHECK_SECONDS
    )
    try:
        while not web_state.stopping.is_set() and await still_signed_in(request):
            gate = core.hub.gate(workspace_topic(member.workspace_id))
            version, count, keys = await inbox_version(core.service, member)
            watched, approvals = await _still_waits(core, member, watch) if watch else (False, None)
            if (version, watched, approvals) != last:
                data: dict[str, object] = {
                    "keys": keys,
                    "count": count,
                    "version": version,
                    "now": core.clock.now().isoformat(),
                }
                if watch:
                    data["watched"] = watched
                if approvals is not None:
                    data["approvals"] = approvals  # the page shows the new count in place
                await response.write(sse("inbox", data))
                last, quiet = (version, watched, approvals), 0.0
            elif quiet >= HEARTBEAT_SECONDS:
                await response.write(b": keep-alive\n\n")
                quiet = 0.0
            await EventHub.wait_either(gate, web_state.stopping, recheck)
            quiet += recheck
    except (ConnectionResetError, ConnectionError):
        pass  # the page went away
    return response
