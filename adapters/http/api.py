"""Handlers of the runs, tasks, decisions and /asks routes (SPEC 4). Each one parses the wire
model, calls the core and renders its answer; the rules about who may do what live in the core
(bot.service), so every surface enforces them the same way."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime

from aiohttp import web

from adapters.http import ids, sse
from adapters.http import models as m
from adapters.http.bodies import read_body
from adapters.http.middleware import (
    json_response,
    principal_or_none,
    still_holds,
    unauthorized,
)
from adapters.http.openapi import Query
from bot import access, errors
from bot.core import Core
from bot.domain import Principal, Task
from bot.errors import ApprovalError
from bot.events import run_topic
from bot.service import CallSpec, RunSpec

MAX_WAIT = 60.0  # seconds a `?wait=` long-poll may hold a request; clients simply ask again
ASKS_DETAIL = "this route is for people: use a member credential, not an application's"

# `/asks` pages: newest first, keyset on (created_at, task id) behind an opaque cursor.
ASKS_LIMIT = 100  # without `?limit=`
ASKS_MAX_LIMIT = 500  # a larger `?limit=` is a 400, not silently cut (the caller would miss some)
INVALID_LIMIT = "invalid_limit"
INVALID_CURSOR = "invalid_cursor"
ASKS_QUERY = (
    Query(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": ASKS_MAX_LIMIT, "default": ASKS_LIMIT},
        f"At most this many decisions (default {ASKS_LIMIT}); another value is a 400 "
        f"`{INVALID_LIMIT}`.",
    ),
    Query(
        "cursor",
        {"type": "string", "maxLength": 200},
        "The previous page's `next_cursor` (opaque); one this route never gave out is a 400 "
        f"`{INVALID_CURSOR}`.",
    ),
)

# Which surface a person decided from: the SDK's Client says `cli` when `approvalbot` drives it
# (History's "cli" filter). Only the two surfaces that talk HTTP can be named here; anything else
# (absent, misspelt, "web", "telegram") is `api`, so no caller can pass for a chat or the page.
SURFACE_HEADER = "X-Approvalbot-Surface"
HTTP_SURFACES = ("api", "cli")


@dataclass(frozen=True)
class Ctx:
    """What the route wrapper established before the handler runs."""

    core: Core
    principal: Principal | None
    ws: str

    @property
    def who(self) -> Principal:
        if self.principal is None:
            raise unauthorized()
        return self.principal


def _run_id(request: web.Request) -> str:
    return request.match_info["run"]


def _key(request: web.Request) -> str:
    return request.match_info["key"]


def via(request: web.Request) -> str:
    """The surface recorded with what this request decides or changes: `cli` or `api`."""
    named = request.headers.get(SURFACE_HEADER, "").strip().lower()
    return named if named in HTTP_SURFACES else "api"


def seconds_param(request: web.Request, name: str, cap: float) -> float:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ApprovalError(errors.INVALID_REQUEST, f"{name}: a number of seconds >= 0", 422)
    return min(value, cap)


# runs ------------------------------------------------------------------------------------------
async def declare_run(request: web.Request, ctx: Ctx) -> web.Response:
    body = await read_body(request, m.RunIn)
    spec = RunSpec(
        approval_mode=body.approval_mode,
        approval_rules=body.approval_rules,
        tool_names=body.tool_names,
        aliases=body.aliases,
        profile=body.profile,
        title=body.title,
        executor_id=body.executor_id,
        parent_run=body.parent_run,
        approval_requirements=body.approval_requirements,
        forbid_self_approval=body.forbid_self_approval,
        on_behalf_of=body.on_behalf_of,
        shell_commands=body.shell_commands,
    )
    run = await ctx.core.service.declare_run(ctx.who, ctx.ws, spec)
    return json_response(m.run_out(run), 201)


async def get_run(request: web.Request, ctx: Ctx) -> web.Response:
    run = await ctx.core.service.get_run(ctx.who, ctx.ws, _run_id(request))
    return json_response(m.run_out(run))


async def stop_run(request: web.Request, ctx: Ctx) -> web.Response:
    body = await read_body(request, m.StopIn)
    run = await ctx.core.service.stop(
        ctx.who,
        ctx.ws,
        _run_id(request),
        via=via(request),
        outcome=body.outcome,
        reason=body.reason,
    )
    return json_response(m.run_out(run))


async def retry_run(request: web.Request, ctx: Ctx) -> web.Response:
    await read_body(request, m.EmptyIn)
    run = await ctx.core.service.retry(ctx.who, ctx.ws, _run_id(request), via=via(request))
    return json_response(m.run_out(run))


async def abandon_run(request: web.Request, ctx: Ctx) -> web.Response:
    await read_body(request, m.EmptyIn)
    run = await ctx.core.service.abandon(ctx.who, ctx.ws, _run_id(request), via=via(request))
    return json_response(m.run_out(run))


# tasks -----------------------------------------------------------------------------------------
async def append_task(request: web.Request, ctx: Ctx) -> web.Response:
    body = await read_body(request, m.TaskIn)
    spec = CallSpec(
        tool_name=body.tool_name,
        tool_input=body.tool_input,
        key=body.key,
        origin=body.origin,
        effect_profile=body.effect_profile_json(),
        failure_policy=body.failure_policy,
        tool_names=body.tool_names,
        approval_mode=body.approval_mode,
    )
    receipt = await ctx.core.service.append(
        ctx.who, ctx.ws, _run_id(request), spec, via=via(request)
    )
    # 200 for an idempotent replay of the same key and body: nothing new was created.
    status = 200 if receipt.replayed else 201
    return json_response(m.task_out(receipt.task, receipt.resolution_token), status)


async def get_task(request: web.Request, ctx: Ctx) -> web.Response:
    wait = seconds_param(request, "wait", MAX_WAIT)
    service = ctx.core.service
    run_id, key = _run_id(request), _key(request)
    task = await service.get_task(ctx.who, ctx.ws, run_id, key)
    if wait > 0 and task.parked:
        # At shutdown a long-poll answers at once (the task as it is) instead of holding the
        # server for up to a minute; the client simply asks again.
        waiting = asyncio.ensure_future(service.wait_task(ctx.who, ctx.ws, run_id, key, wait))
        closing = asyncio.ensure_future(request.app[sse.CLOSING].wait())
        await asyncio.wait({waiting, closing}, return_when=asyncio.FIRST_COMPLETED)
        closing.cancel()
        if waiting.done():
            task = waiting.result()
        else:
            waiting.cancel()
    return json_response(m.task_out(task))


async def deny(request: web.Request, ctx: Ctx) -> web.Response:
    body = await read_body(request, m.DenyIn)
    task = await ctx.core.service.deny(
        ctx.who, ctx.ws, _run_id(request), _key(request), reason=body.reason, via=via(request)
    )
    return json_response(m.task_out(task))


async def withdraw(request: web.Request, ctx: Ctx) -> web.Response:
    """The agent stopped waiting: its parked call or question ends cancelled (withdrawn)."""
    body = await read_body(request, m.WithdrawIn)
    task = await ctx.core.service.withdraw(
        ctx.who, ctx.ws, _run_id(request), _key(request), reason=body.reason or "",
        via=via(request),
    )  # fmt: skip
    return json_response(m.task_out(task))


async def resolve(request: web.Request, ctx: Ctx) -> web.Response:
    """Answer or decline a question: with a member credential, or with the resolution token of
    an author ask instead of any credential. With a token, every refusal before the token is
    checked is the token's own 403: no run, no key, another workspace and a wrong token read
    alike, so the route tells someone without a credential nothing about what exists."""
    body = await read_body(request, m.ResolutionIn)
    token = body.resolution_token
    if token is None:
        principal = ctx.who
        access.check_workspace(principal, ctx.ws)
        ids.check_path(request.match_info)
        task = await _resolve(request, ctx, principal, None, body)
        return json_response(m.task_out(task))
    if not ids.token_shaped(token) or ids.bad_parameter(request.match_info) is not None:
        raise _token_does_not_fit()
    try:
        task = await _resolve(request, ctx, ctx.principal, token, body)
    except ApprovalError as error:
        if error.status == 404:
            raise _token_does_not_fit() from None
        raise
    return json_response(m.task_out(task))


def _token_does_not_fit() -> ApprovalError:
    return ApprovalError(errors.INVALID_RESOLUTION_TOKEN, "the resolution token does not fit", 403)


async def _resolve(
    request: web.Request,
    ctx: Ctx,
    principal: Principal | None,
    token: str | None,
    body: m.ResolutionIn,
) -> Task:
    return await ctx.core.service.resolve(
        principal,
        ctx.ws,
        _run_id(request),
        _key(request),
        content=body.content,
        outcome=body.outcome,
        resolution_token=token,
        via=via(request),
    )


# who is calling ---------------------------------------------------------------------------------
async def whoami(request: web.Request) -> web.Response:
    """`GET /v1/whoami`: the bearer token's kind, name and the workspaces it can see (a token
    belongs to one today), so a client can default the workspace."""
    principal = await principal_or_none(request)
    if principal is None:
        raise unauthorized()
    return json_response(
        {"kind": principal.kind, "name": principal.name, "workspaces": [principal.workspace_id]}
    )


# the member plane's inbox ----------------------------------------------------------------------
_CURSOR_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def encode_cursor(task: Task) -> str:
    """Where the next page starts: after this task. Opaque to clients (base64url of JSON)."""
    raw = json.dumps([task.created_at.isoformat(), task.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    def bad() -> ApprovalError:
        return ApprovalError(INVALID_CURSOR, "cursor: not one this route gave out", 400)

    if len(cursor) > 200:
        raise bad()
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at_text, task_id = json.loads(raw)
        at = datetime.fromisoformat(at_text)
    except (ValueError, TypeError, binascii.Error):
        raise bad() from None
    if at.tzinfo is None or not isinstance(task_id, str) or not _CURSOR_ID.fullmatch(task_id):
        raise bad()
    return at, task_id


def limit_param(request: web.Request) -> int:
    raw = request.query.get("limit")
    if raw is None or raw == "":
        return ASKS_LIMIT
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= ASKS_MAX_LIMIT:
        raise ApprovalError(INVALID_LIMIT, f"limit: a whole number from 1 to {ASKS_MAX_LIMIT}", 400)
    return int(raw)


async def asks(request: web.Request, ctx: Ctx) -> web.Response:
    """Decisions now resting on a person, newest first, one page at a time: `next_cursor` is
    null on the last page. Keyset paging, so a decision parked between two pages never shifts
    the next one (it is newer than the cursor) and none is seen twice."""
    access.require_member(ctx.who, ASKS_DETAIL)
    run_id = ids.run_filter(request.query.get("run_id"))
    limit = limit_param(request)
    cursor = request.query.get("cursor")
    before = decode_cursor(cursor) if cursor else None
    tasks = await ctx.core.service.asks(
        ctx.who, ctx.ws, run_id=run_id, limit=limit + 1, before=before
    )
    page, more = tasks[:limit], len(tasks) > limit
    titles: dict[str, str] = {}
    async with ctx.core.store.read() as tx:
        for run_key in {t.run_id for t in page}:
            run = await tx.get_run(run_key)
            titles[run_key] = run.title if run is not None else ""
    items = [m.ask_out(t, titles.get(t.run_id, "")) for t in page]
    next_cursor = encode_cursor(page[-1]) if more else None
    return json_response({"asks": items, "next_cursor": next_cursor})


async def run_events(request: web.Request, ctx: Ctx) -> web.StreamResponse:
    """The run's lifecycle feed. `work_available` notices are stored with the run's events but
    belong to the executor's cable, so the feed leaves them out (their ids are simply skipped)."""
    after = sse.last_event_id(request)
    run = await ctx.core.service.get_run(ctx.who, ctx.ws, _run_id(request))
    return await sse.stream(
        request,
        ctx.core.hub,
        run_topic(run.id),
        after,
        lambda seq: ctx.core.service.events_after(run.id, seq),
        position=lambda event: event.seq,
        keep=lambda event: event.name != "work_available",
        allowed=lambda: still_holds(request, ctx.who),
    )
