"""Executors (SPEC 3.6): an agent application's workers. Their inbox lists the decisions parked
for them and their cable carries `work_available` notices — both only tell the executor that a
person is deciding something it waits on. Nothing here is work to claim: claim and commit answer
`409 not_claimable_kind` for any task they name (404 when there is no such task)."""

from __future__ import annotations

from aiohttp import web

from adapters.http import models as m
from adapters.http import sse
from adapters.http.api import Ctx
from adapters.http.bodies import read_body
from adapters.http.middleware import json_response, still_holds
from bot import errors
from bot.domain import Executor
from bot.errors import ApprovalError
from bot.events import workspace_topic


async def _live(request: web.Request, ctx: Ctx) -> Executor:
    executor = await ctx.core.service.executor(ctx.who, ctx.ws, request.match_info["executor"])
    if executor.revoked:
        raise ApprovalError(errors.NOT_FOUND, "executor not found (revoked)", 404)
    return executor


async def register(request: web.Request, ctx: Ctx) -> web.Response:
    body = await read_body(request, m.ExecutorIn)
    executor = await ctx.core.service.register_executor(ctx.who, ctx.ws, body.name)
    return json_response(m.executor_out(executor), 201)


async def show(request: web.Request, ctx: Ctx) -> web.Response:
    executor = await ctx.core.service.executor(ctx.who, ctx.ws, request.match_info["executor"])
    return json_response(m.executor_out(executor))


async def revoke(request: web.Request, ctx: Ctx) -> web.Response:
    """Revoke (idempotent): rows it held lose their addressee and stay decidable by people."""
    executor_id = request.match_info["executor"]
    cleared = await ctx.core.service.revoke_executor(ctx.who, ctx.ws, executor_id)
    return json_response({"id": executor_id, "revoked": True, "cleared": cleared})


async def inbox(request: web.Request, ctx: Ctx) -> web.Response:
    executor = await _live(request, ctx)
    tasks = await ctx.core.store.executor_inbox(executor.id)
    return json_response({"items": [m.inbox_row(t) for t in tasks]})


async def _not_claimable(request: web.Request, ctx: Ctx, verb: str) -> web.Response:
    await _live(request, ctx)
    body = await read_body(request, m.ClaimIn)
    task = await ctx.core.service.get_task(ctx.who, ctx.ws, body.run_id, body.task_key)
    kind = "a question" if task.kind == "ask" else "an approval"
    raise ApprovalError(
        errors.NOT_CLAIMABLE_KIND,
        f"cannot {verb} {task.key}: it is {kind}, decided by people on the member plane "
        "(approve, deny, resolution); the executor only waits for the outcome",
        409,
        extra={"kind": "ask" if task.kind == "ask" else "approval", "state": task.state},
    )


async def claim(request: web.Request, ctx: Ctx) -> web.Response:
    return await _not_claimable(request, ctx, "claim")


async def commit(request: web.Request, ctx: Ctx) -> web.Response:
    return await _not_claimable(request, ctx, "commit")


async def cable(request: web.Request, ctx: Ctx) -> web.StreamResponse:
    """`work_available` for this executor as SSE; ids are global event ids (resume with
    `Last-Event-ID`)."""
    after = sse.last_event_id(request)
    executor = await _live(request, ctx)
    return await sse.stream(
        request,
        ctx.core.hub,
        workspace_topic(executor.workspace_id),
        after,
        lambda last: ctx.core.store.work_events(executor.id, last),
        position=lambda event: event.id,
        allowed=lambda: live_still(request, ctx),
    )


async def live_still(request: web.Request, ctx: Ctx) -> bool:
    """The cable's application token still holds and its executor is not revoked."""
    if not await still_holds(request, ctx.who):
        return False
    try:
        await _live(request, ctx)
    except ApprovalError:
        return False
    return True
