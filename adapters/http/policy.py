"""Handlers of approve always, edit before approve and the decision log (issue 15): the approve
route with its `allow` and `tool_input`, a decision's proposal, the workspace's learned rules,
and the log. The rules about who may do what are the core's (bot/lifecycle/learn.py)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from adapters.http import ids
from adapters.http import models as m
from adapters.http import policy_models as pm
from adapters.http.api import Ctx, via
from adapters.http.bodies import read_body
from adapters.http.middleware import json_response
from adapters.http.openapi import Query
from bot import errors
from bot.errors import ApprovalError
from bot.service import UNEDITED, AllowSpec

LOG_PAGE = 1000
_JSON: TypeAdapter[Any] = TypeAdapter(m.JsonValue)  # what the store can hold (no NUL, finite)

LOG_QUERY = (
    Query(
        "run_id",
        {"type": "string", "pattern": ids.RUN_FILTER},
        "Only this run's entries (empty: all; a malformed run id is a 422)",
    ),
    Query(
        "after",
        {"type": "integer", "minimum": 0},
        "Entries after this id (the previous page's `next_after`); oldest first",
    ),
)


async def approve(request: web.Request, ctx: Ctx) -> web.Response:
    body = await read_body(request, pm.ApproveIn)
    allow = None if body.allow is None else AllowSpec(body.allow.scope, body.allow.rule)
    task = await ctx.core.service.approve(
        ctx.who,
        ctx.ws,
        request.match_info["run"],
        request.match_info["key"],
        via=via(request),
        allow=allow,
        tool_input=body.tool_input if body.edited else UNEDITED,
    )
    return json_response(m.task_out(task))


PROPOSAL_QUERY = (
    Query(
        "tool_input",
        {"type": "string"},
        "JSON: the call as the person would edit it (the proposal is then for that input)",
    ),
    Query(
        "rule",
        {"type": "string"},
        "JSON: the person's own rule, checked like `allow.rule` and replayed instead",
    ),
)


def _json_param(request: web.Request, name: str) -> Any:
    raw = request.query.get(name)
    if raw is None:
        return UNEDITED
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise ApprovalError(errors.INVALID_REQUEST, f"{name}: not JSON", 422) from None
    try:
        _JSON.validate_python(value)
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
        raise ApprovalError(errors.INVALID_REQUEST, f"{name}: {problem}", 422) from None
    return value


async def proposal(request: web.Request, ctx: Ctx) -> web.Response:
    rule = _json_param(request, "rule")
    found = await ctx.core.service.proposal(
        ctx.who,
        ctx.ws,
        request.match_info["run"],
        request.match_info["key"],
        tool_input=_json_param(request, "tool_input"),
        rule=None if rule is UNEDITED else rule,
    )
    return json_response(pm.proposal_out(found))


async def learned_rules(request: web.Request, ctx: Ctx) -> web.Response:
    rules = await ctx.core.service.learned_rules(ctx.who, ctx.ws)
    return json_response({"rules": [pm.learned_rule_out(r) for r in rules]})


async def remove_learned_rule(request: web.Request, ctx: Ctx) -> web.Response:
    await ctx.core.service.remove_learned_rule(
        ctx.who, ctx.ws, request.match_info["rule"], via=via(request)
    )
    return web.Response(status=204)


def _after(request: web.Request) -> int:
    raw = request.query.get("after")
    if raw is None or raw == "":
        return 0
    after = ids.log_id(raw)
    if after is None:
        raise ApprovalError(errors.INVALID_REQUEST, "after: a log entry id (0 or more)", 422)
    return after


async def decision_log(request: web.Request, ctx: Ctx) -> web.Response:
    """The decision log, oldest first, a page at a time: `next_after` is null on the last."""
    run_id = ids.run_filter(request.query.get("run_id"))
    records = await ctx.core.service.decision_log(
        ctx.who, ctx.ws, run_id=run_id, after=_after(request), limit=LOG_PAGE
    )
    next_after = records[-1].id if len(records) == LOG_PAGE else None
    return json_response(
        {"entries": [pm.log_entry_out(r) for r in records], "next_after": next_after}
    )
