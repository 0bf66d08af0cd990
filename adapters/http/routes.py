"""The route table of the HTTP API and its wiring into the aiohttp application.

One table serves both the router and `/openapi.json`. Every route is wrapped the same way:
authenticate the bearer token (401 without a valid one), refuse any workspace but the
credential's own with the 404 a missing one gets, answer a path naming what cannot exist (an
identifier outside its alphabet, `adapters.http.ids`) with that 404 too, then call the handler.
The resolution route, where a resolution token may stand in for a credential, does the last
two itself (`api.resolve`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from adapters.http import api, executors, ids, policy, sse
from adapters.http import models as m
from adapters.http import policy_models as pm
from adapters.http.health import healthz, readyz
from adapters.http.keys import CORE
from adapters.http.middleware import (
    api_errors,
    expect_handler,
    json_response,
    principal_or_none,
    unauthorized,
)
from adapters.http.openapi import Query, Route, document
from bot import access
from bot.metrics import REGISTRY

WS = "/v1/workspaces/{ws}"
RUN = WS + "/runs/{run}"
TASK = RUN + "/tasks/{key}"
EXE = WS + "/executors/{executor}"
LEARNED = WS + "/rules/learned"

_SSE = "text/event-stream"
_WAIT = Query(
    "wait",
    {"type": "number", "minimum": 0},
    "Long-poll: hold the answer until the task leaves needs_approval/awaiting_input or this many "
    f"seconds pass (capped at {api.MAX_WAIT:g}).",
)
_LAST = Query(
    "last_event_id",
    {"type": "integer", "minimum": 0, "maximum": sse.MAX_EVENT_ID},
    "Resume after this event id (same as the Last-Event-ID header).",
)
_FEED = (
    "Server-Sent Events: `approval_required`, `awaiting_human`, `attention_required` "
    "(`{reason, blocked_task_keys}`), `task_settled`, `nudge`, `run_held`, `run_resumed`, "
    "`run_stopped`. Each event's `id:` is the run's event sequence; reconnect with "
    "`Last-Event-ID` to resume without loss or repeats."
)

ROUTES: tuple[Route, ...] = (
    Route("POST", WS + "/runs", api.declare_run, "Declare a run (mode, rules, tool names, "
          "aliases, profile, executor)", "app, member", m.RunIn, m.RunOut, 201,
          (401, 404, 422)),
    Route("GET", RUN, api.get_run, "Read a run", "app, member", None, m.RunOut),
    Route("POST", RUN + "/tasks", api.append_task, "Append a tool call or a question; the "
          "receipt holds state, error and resolution_token", "app, member", m.TaskIn,
          m.TaskOut, 201, (401, 403, 404, 409, 413, 422), also=(200,),
          description="201 for a new task; 200 when the same key and body were appended "
          "before (idempotent retry). The same key with another body is 409."),
    Route("GET", TASK, api.get_task, "Read a task (optionally long-poll with ?wait=S)",
          "app, member", None, m.TaskOut, query=(_WAIT,)),
    Route("POST", TASK + "/approve", policy.approve, "Approve a parked call (optionally "
          "edited, optionally learning a rule)", "member", pm.ApproveIn, m.TaskOut,
          errors=(401, 403, 404, 409, 422),
          description="`tool_input` approves the call as edited: the run's rules evaluate it "
          "again (a deny still binds: `422 approval_denied`, and the task stays parked). "
          "`allow` learns a rule from the approved input: `scope` run or profile, `rule` the "
          "proposal when absent (verdict allow; it must match the call, else "
          "`422 rule_does_not_match`; `422 no_profile` for scope profile on a run without one)."),
    Route("GET", TASK + "/proposal", policy.proposal, "The rule \"Approve & allow like "
          "this\" would learn, and the past calls it would have allowed", "member", None,
          pm.ProposalOut, errors=(401, 403, 404, 409, 422),
          query=policy.PROPOSAL_QUERY,
          description="`would_allow`: up to 50 of the workspace's calls of the last 30 days "
          "(never this one), newest first. A task no longer parked is `409 already_decided`."),
    Route("POST", TASK + "/deny", api.deny, "Deny a parked call, with an optional reason",
          "member", m.DenyIn, m.TaskOut, errors=(401, 403, 404, 409, 422)),
    Route("POST", TASK + "/resolution", api.resolve, "Answer (or, with outcome: failed, "
          "decline) a question", "member / resolution token", m.ResolutionIn, m.TaskOut,
          errors=(401, 403, 404, 409, 422),
          description="An author ask's resolution_token (from its append receipt) replaces "
          "any other credential: single use, that task only."),
    Route("POST", TASK + "/withdraw", api.withdraw, "Withdraw a parked call or question: "
          "the agent stopped waiting for it", "app (the run's), member", m.WithdrawIn,
          m.TaskOut, errors=(401, 403, 404, 409, 422),
          description="The task ends `cancelled` with error `withdrawn` (`withdrawn by <name>`, "
          "then `: <reason>` when given); people's messages show it withdrawn. Only the "
          "application that declared the run, or a member, may (else `403`). A task no longer "
          "parked is `409 already_decided`: the first ending wins."),
    Route("POST", RUN + "/stop", api.stop_run, "Stop the run; parked tasks are cancelled",
          "app, member", m.StopIn, m.RunOut, errors=(401, 404, 409, 422)),
    Route("POST", RUN + "/retry", api.retry_run, "Take a held run up again; expired holds are "
          "asked anew", "member", m.EmptyIn, m.RunOut, errors=(401, 403, 404, 409, 422)),
    Route("POST", RUN + "/abandon", api.abandon_run, "Stop a held run", "member", m.EmptyIn,
          m.RunOut, errors=(401, 403, 404, 409, 422)),
    Route("GET", RUN + "/events", api.run_events, "The run's lifecycle feed (SSE)",
          "app, member", query=(_LAST,), stream=_SSE, description=_FEED),
    Route("GET", WS + "/asks", api.asks, "Every decision now resting on a person", "member",
          None, m.AsksOut, errors=(400, 401, 403, 404, 422),
          query=(Query("run_id", {"type": "string", "pattern": ids.RUN_FILTER},
                       "Only this run's decisions (empty: all; a malformed run id is a 422)"),
                 *api.ASKS_QUERY)),
    Route("GET", LEARNED, policy.learned_rules, "Rules learned from decisions (both scopes)",
          "member", None, pm.LearnedRulesOut, errors=(401, 403, 404)),
    Route("DELETE", LEARNED + "/{rule}", policy.remove_learned_rule, "Remove a learned rule: "
          "runs declared afterwards (and the run of a run-scoped one) go without it", "member",
          None, None, 204, (401, 403, 404)),
    Route("GET", WS + "/log", policy.decision_log, "The decision log (the page's export), "
          "oldest first", "member", None, pm.LogOut, errors=(401, 403, 404, 422),
          query=policy.LOG_QUERY),
    Route("POST", WS + "/executors", executors.register, "Register an executor", "app",
          m.ExecutorIn, m.ExecutorOut, 201, (401, 403, 404, 422)),
    Route("GET", EXE, executors.show, "Read an executor", "app", None, m.ExecutorOut),
    Route("DELETE", EXE, executors.revoke, "Revoke an executor; its parked rows stay "
          "decidable by people", "app", None, m.RevokedOut),
    Route("GET", EXE + "/inbox", executors.inbox, "Decisions parked for this executor (rows of "
          "kind approval and ask)", "app", None, m.InboxOut),
    Route("POST", EXE + "/claim", executors.claim, "Claim: never possible for approval and ask "
          "rows (409 not_claimable_kind)", "app", m.ClaimIn, None, 409, (401, 404, 422)),
    Route("POST", EXE + "/commit", executors.commit, "Commit: never possible for approval and "
          "ask rows (409 not_claimable_kind)", "app", m.ClaimIn, None, 409, (401, 404, 422)),
    Route("GET", EXE + "/cable", executors.cable, "work_available notices for this executor "
          "(SSE)", "app", query=(_LAST,), stream=_SSE,
          description="Each event's `id:` is a global event id; resume with Last-Event-ID."),
)  # fmt: skip


def _wrap(route: Route) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    optional = "token" in route.who  # the resolution token may stand in for a credential

    async def handler(request: web.Request) -> web.StreamResponse:
        principal = await principal_or_none(request)
        workspace = request.match_info["ws"]
        if not optional:
            if principal is None:
                raise unauthorized()
            access.check_workspace(principal, workspace)
            ids.check_path(request.match_info)
        return await route.handler(request, api.Ctx(request.app[CORE], principal, workspace))

    handler.__name__ = route.handler.__name__
    return handler


# /metrics: the core's counters plus gauges read from the store at scrape time.
_GAUGES = CollectorRegistry(auto_describe=True)
PARKS_OPEN = Gauge(
    "approvalbot_parks_open", "Calls and questions now resting on a person.", registry=_GAUGES
)
OUTBOX_BACKLOG = Gauge(
    "approvalbot_outbox_backlog", "Notifications for people not yet delivered.", registry=_GAUGES
)


async def metrics(request: web.Request) -> web.Response:
    store = request.app[CORE].store
    PARKS_OPEN.set(await store.count_parked())
    OUTBOX_BACKLOG.set(await store.outbox_backlog())
    body = generate_latest(REGISTRY) + generate_latest(_GAUGES)
    response = web.Response(body=body)
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


async def openapi(_request: web.Request) -> web.Response:
    return json_response(_DOCUMENT)


_META: tuple[Route, ...] = (
    Route("GET", "/metrics", metrics, "Prometheus metrics", "public", stream="text/plain",
          errors=()),
    Route("GET", "/openapi.json", openapi, "This document", "public", errors=()),
    Route("GET", "/healthz", healthz, "Liveness", "public", errors=()),
    Route("GET", "/v1/whoami", api.whoami, "Who this bearer token is: kind, name and the "
          "workspaces it can see", "app, member", None, None, errors=(401,)),
    Route("GET", "/readyz", readyz, "Readiness: store reachable, migrations applied, "
          "adapters healthy (503 when not)", "public", also=(503,), errors=()),
)  # fmt: skip
_DOCUMENT = document(ROUTES + _META)


def setup_api(app: web.Application) -> None:
    """Add the API routes, the meta routes (metrics, openapi, health), the error middleware
    and the stream shutdown hook to `app`."""
    app.middlewares.append(api_errors)
    sse.setup(app)
    for route in ROUTES:
        app.router.add_route(route.method, route.path, _wrap(route), expect_handler=expect_handler)
    for path, handler in (
        ("/metrics", metrics),
        ("/openapi.json", openapi),
        ("/healthz", healthz),
        ("/readyz", readyz),
        ("/v1/whoami", api.whoami),
    ):
        app.router.add_get(path, handler, expect_handler=expect_handler)
