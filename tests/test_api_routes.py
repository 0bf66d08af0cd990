"""Every route of SPEC 4 over real HTTP, on SQLite and PostgreSQL: bodies, statuses, codes."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from bot.config import ProfileConfig, Settings
from tests.http_harness import Served, fixtures

TASK_KEYS = {
    "key", "run_id", "kind", "origin", "tool_name", "tool", "tool_input", "state", "error",
    "effect_profile", "deadline", "resolved_by", "via", "resolution", "approved_input",
}  # fmt: skip
RUN_KEYS = {"id", "state", "approval_mode", "approval_rules", "tool_names", "aliases"}


pytestmark = pytest.mark.asyncio(loop_scope="module")
CAREFUL = ProfileConfig(
    approval_mode="rules",
    approval_rules=[{"tool": "ls", "verdict": "allow"}],
    tool_names=["ls", "bash", "ask"],
)
server, api = fixtures(Settings(profiles={"careful": CAREFUL}))


async def declare(api: Served, who: str = "agent", **body: object) -> str:
    status, run = await api.call("POST", "/runs", who, body or {"approval_mode": "ask"})
    assert status == 201, run
    return str(run["id"])


async def author_app(api: Served, name: str = "script") -> str:
    """An application registered to claim origin author (`admin app add --may-claim author`)."""
    api.tokens[name] = (
        await api.core.admin.add_application(api.ws, name, may_claim="author")
    ).token
    return name


async def park(api: Served, run: str, key: str = "k1", **extra: object) -> dict[str, object]:
    body = {"key": key, "tool_name": "bash", "tool_input": {"command": "make deploy"}} | extra
    status, task = await api.call("POST", f"/runs/{run}/tasks", "agent", body)
    assert status == 201, task
    return dict(task)


async def test_declare_and_read_runs(api: Served) -> None:
    status, run = await api.call(
        "POST",
        "/runs",
        body={
            "approval_mode": "rules",
            "approval_rules": [{"tool": "shell", "verdict": "allow"}],
            "tool_names": ["bash"],
            "aliases": {"shell": "bash"},
            "title": "nightly",
        },
    )
    assert status == 201
    assert RUN_KEYS <= set(run)
    assert run["state"] == "running" and run["approval_mode"] == "rules"
    assert run["aliases"] == {"shell": "bash"} and run["tool_names"] == ["bash"]
    for who in ("agent", "alice"):
        status, again = await api.call("GET", f"/runs/{run['id']}", who)
        assert (status, again) == (200, run)
    assert (await api.call("GET", "/runs/run_nope"))[0] == 404

    # a member may declare too; a profile is a base that explicit fields only tighten
    status, careful = await api.call("POST", "/runs", "alice", {"profile": "careful"})
    assert status == 201 and careful["approval_mode"] == "rules"
    assert careful["tool_names"] == ["ask", "bash", "ls"]
    status, body = await api.call(
        "POST", "/runs", body={"profile": "careful", "approval_mode": "ask"}
    )
    assert (status, body["error"]["code"]) == (422, "approval_widening")
    status, body = await api.call("POST", "/runs", body={"profile": "nope"})
    assert (status, body["error"]["code"]) == (422, "unknown_profile")


async def test_declare_refusals_name_the_field(api: Served) -> None:
    status, body = await api.call("POST", "/runs", body={"approval_mode": "yolo"})
    assert status == 422 and body["error"]["detail"].startswith("approval_mode:")
    status, body = await api.call(
        "POST", "/runs", body={"approval_rules": [{"tool": "x", "verdict": "allow", "mtach": "*"}]}
    )
    assert (status, body["error"]["code"]) == (422, "invalid_rules")
    assert "approval_rules[0].mtach: unknown key" in body["error"]["detail"]
    status, body = await api.call("POST", "/runs", body={"approval_mode": "ask", "colour": 1})
    assert status == 422 and "colour: unknown field" in body["error"]["detail"]
    status, body = await api.call("POST", "/runs", body={"executor_id": "exe_nope"})
    assert (status, body["error"]["code"]) == (404, "not_found")


async def test_append_receipts(api: Served) -> None:
    run = await declare(
        api, approval_mode="ask", approval_rules=[
            {"tool": "ls", "verdict": "allow"},
            {"tool": "rm", "verdict": "deny", "reason": "never"},
        ], tool_names=["ls", "rm", "bash", "ask"],
    )  # fmt: skip
    status, granted = await api.call(
        "POST", f"/runs/{run}/tasks", body={"tool_name": "ls", "tool_input": {"path": "/"}}
    )
    assert status == 201 and set(granted) == TASK_KEYS
    assert granted["state"] == "granted" and granted["kind"] == "tool_call"
    assert granted["origin"] == "model" and granted["via"] == "engine"

    status, denied = await api.call(
        "POST", f"/runs/{run}/tasks", body={"tool_name": "rm", "tool_input": {}}
    )
    assert denied["state"] == "failed"
    assert denied["error"] == {"code": "approval_denied", "detail": "never"}

    status, undeclared = await api.call(
        "POST", f"/runs/{run}/tasks", body={"tool_name": "curl", "tool_input": {}}
    )
    assert undeclared["error"]["code"] == "tool_not_declared"

    parked = await park(api, run, effect_profile={"summary": "deploy", "risk": "high"})
    assert parked["state"] == "needs_approval" and parked["deadline"]
    assert parked["effect_profile"] == {"summary": "deploy", "risk": "high"}
    body = {"key": "k1", "tool_name": "bash", "tool_input": {"command": "make deploy"},
            "effect_profile": {"summary": "deploy", "risk": "high"}}  # fmt: skip
    status, replay = await api.call("POST", f"/runs/{run}/tasks", body=body)
    assert (status, replay) == (200, parked)  # idempotent retry
    status, clash = await api.call("POST", f"/runs/{run}/tasks", body=body | {"tool_input": {}})
    assert (status, clash["error"]["code"]) == (409, "conflict")

    status, wider = await api.call(
        "POST", f"/runs/{run}/tasks",
        body={"tool_name": "ls", "tool_input": {}, "approval_mode": "bypass"},
    )  # fmt: skip
    assert (status, wider["error"]["code"]) == (422, "approval_widening")

    # a question: the author's own ask carries its resolution token; a model's does not
    question = {"tool_name": "ask", "tool_input": {"prompt": "Region?", "options": ["eu", "us"]}}
    status, mine = await api.call(
        "POST", f"/runs/{run}/tasks", await author_app(api), question | {"origin": "author"}
    )
    assert mine["kind"] == "ask" and mine["state"] == "awaiting_input"
    assert mine["resolution_token"].startswith("abr_")
    status, model = await api.call("POST", f"/runs/{run}/tasks", body=question)
    assert model["state"] == "awaiting_input" and "resolution_token" not in model
    status, bad = await api.call(
        "POST", f"/runs/{run}/tasks", body={"tool_name": "ask", "tool_input": {"prompt": ""}}
    )
    assert status == 422 and "tool_input.prompt" in bad["error"]["detail"]

    status, body = await api.call("GET", f"/runs/{run}/tasks/k1", "alice")
    assert (status, body) == (200, parked)
    assert (await api.call("GET", f"/runs/{run}/tasks/nope"))[0] == 404


async def test_member_append_is_not_reprompted(api: Served) -> None:
    run = await declare(
        api,
        approval_mode="ask",
        approval_rules=[{"tool": "bash", "verdict": "ask", "origin": "author"}],
    )
    _, task = await api.call(
        "POST", f"/runs/{run}/tasks", "alice",
        body={"tool_name": "bash", "tool_input": {"command": "ls"}, "origin": "author"},
    )  # fmt: skip
    assert task["state"] == "granted" and task["resolved_by"] == "alice"


async def test_long_poll_returns_when_decided(api: Served) -> None:
    run = await declare(api)
    await park(api, run)
    started = time.monotonic()
    status, task = await api.call("GET", f"/runs/{run}/tasks/k1?wait=0.2")
    assert status == 200 and task["state"] == "needs_approval"
    assert 0.15 < time.monotonic() - started < 2

    async def approve_soon() -> None:
        await asyncio.sleep(0.2)
        await api.call("POST", f"/runs/{run}/tasks/k1/approve", "alice")

    started = time.monotonic()
    approving = asyncio.create_task(approve_soon())
    status, task = await api.call("GET", f"/runs/{run}/tasks/k1?wait=30")
    await approving
    assert task["state"] == "granted" and task["resolved_by"] == "alice" and task["via"] == "api"
    assert time.monotonic() - started < 2
    for bad in ("abc", "-1", "nan", "inf"):
        status, body = await api.call("GET", f"/runs/{run}/tasks/k1?wait={bad}")
        assert (status, body["error"]["code"]) == (422, "invalid_request")


async def test_approve_and_deny(api: Served) -> None:
    run = await declare(api)
    await park(api, run, "a")
    await park(api, run, "d")
    status, task = await api.call("POST", f"/runs/{run}/tasks/a/approve", "alice")
    assert (status, task["state"], task["resolved_by"], task["via"]) == (
        200, "granted", "alice", "api",
    )  # fmt: skip
    status, again = await api.call("POST", f"/runs/{run}/tasks/a/deny", "bob")
    assert (status, again["error"]["code"]) == (409, "already_decided")
    assert again["error"]["resolved_by"] == "alice" and "alice" in again["error"]["detail"]

    status, task = await api.call("POST", f"/runs/{run}/tasks/d/deny", "bob", {"reason": "not now"})
    assert task["state"] == "failed"
    assert task["error"] == {"code": "approval_denied", "detail": "not now"}
    await park(api, run, "d2")
    status, task = await api.call("POST", f"/runs/{run}/tasks/d2/deny", "bob")
    assert task["error"]["detail"] == "denied by bob"
    status, body = await api.call("POST", f"/runs/{run}/tasks/d2/approve", "bob", {"x": 1})
    assert status == 422 and "x: unknown field" in body["error"]["detail"]


async def test_resolution(api: Served) -> None:
    run = await declare(api)
    ask = {"tool_name": "ask"}
    for key, question in {
        "one": {"prompt": "Region?", "options": ["eu", "us"]},
        "many": {"prompt": "Which?", "options": ["a", "b", "c"], "multi": True},
        "free": {"prompt": "Why?"},
        "no": {"prompt": "Go?"},
    }.items():
        status, _ = await api.call(
            "POST", f"/runs/{run}/tasks", body=ask | {"key": key, "tool_input": question}
        )
        assert status == 201
    status, body = await api.call(
        "POST", f"/runs/{run}/tasks/one/resolution", "alice", {"content": "mars"}
    )
    assert (status, body["error"]["code"]) == (422, "invalid_option")
    status, task = await api.call(
        "POST", f"/runs/{run}/tasks/one/resolution", "alice", {"content": "eu"}
    )
    assert task["state"] == "resolved" and task["resolution"] == {"content": "eu"}
    status, task = await api.call(
        "POST", f"/runs/{run}/tasks/many/resolution", "bob", {"content": ["c", "a"]}
    )
    assert task["resolution"] == {"content": ["a", "c"]} and task["resolved_by"] == "bob"
    status, task = await api.call(
        "POST", f"/runs/{run}/tasks/free/resolution", "bob", {"content": "because"}
    )
    assert task["resolution"] == {"content": "because"}
    status, task = await api.call(
        "POST", f"/runs/{run}/tasks/no/resolution", "bob", {"outcome": "failed"}
    )
    assert task["state"] == "failed" and task["error"]["code"] == "declined"
    status, body = await api.call(
        "POST", f"/runs/{run}/tasks/no/resolution", "bob", {"content": "yes"}
    )
    assert (status, body["error"]["code"]) == (409, "already_decided")
    await park(api, run, "call")
    status, body = await api.call(
        "POST", f"/runs/{run}/tasks/call/resolution", "bob", {"content": "x"}
    )
    assert (status, body["error"]["code"]) == (409, "conflict")
    status, body = await api.call("POST", f"/runs/{run}/tasks/one/approve", "bob")
    assert status == 409


async def test_resolution_token_needs_no_credential(api: Served) -> None:
    run = await declare(api)
    status, mine = await api.call(
        "POST", f"/runs/{run}/tasks", await author_app(api),
        body={"key": "q", "tool_name": "ask", "tool_input": {"prompt": "ok?"}, "origin": "author"},
    )  # fmt: skip
    token = mine["resolution_token"]
    status, task = await api.call(
        "POST",
        f"/runs/{run}/tasks/q/resolution",
        None,
        {"content": "yes", "resolution_token": token},
    )
    assert status == 200 and task["state"] == "resolved" and task["via"] == "token"
    assert task["resolved_by"] == "script"


async def test_stop_retry_abandon(api: Served) -> None:
    run = await declare(api)
    await park(api, run, "a")
    status, body = await api.call("POST", f"/runs/{run}/retry", "alice")
    assert (status, body["error"]["code"]) == (409, "run_not_held")
    status, body = await api.call("POST", f"/runs/{run}/retry", "agent")
    assert (status, body["error"]["code"]) == (403, "member_credential_required")
    status, stopped = await api.call("POST", f"/runs/{run}/stop", "agent")
    assert (status, stopped["state"]) == (200, "stopped")
    status, task = await api.call("GET", f"/runs/{run}/tasks/a")
    assert task["state"] == "cancelled" and task["error"]["code"] == "run_stopped"
    assert (await api.call("POST", f"/runs/{run}/stop", "alice"))[0] == 200  # no-op
    status, body = await api.call(
        "POST", f"/runs/{run}/tasks", body={"tool_name": "x", "tool_input": 1}
    )
    assert (status, body["error"]["code"]) == (409, "run_not_running")

    # an expired question holds the run: a person retries (asked anew) or abandons
    for action in ("retry", "abandon"):
        run = await declare(api)
        await api.call(
            "POST", f"/runs/{run}/tasks",
            body={"key": "q", "tool_name": "ask", "tool_input": {"prompt": "still there?"}},
        )  # fmt: skip
        await api.clock.advance(timedelta(hours=25))
        await api.core.scheduler.run_once()
        status, held = await api.call("GET", f"/runs/{run}")
        assert held["state"] == "held" and held["held_task_key"] == "q"
        status, task = await api.call("GET", f"/runs/{run}/tasks/q")
        assert task["state"] == "timed_out" and task["error"]["code"] == "question_expired"
        status, body = await api.call("POST", f"/runs/{run}/{action}", "alice")
        assert status == 200
        assert body["state"] == ("running" if action == "retry" else "stopped")
        status, asks = await api.call("GET", f"/asks?run_id={run}", "alice")
        assert len(asks["asks"]) == (1 if action == "retry" else 0)


async def test_asks_has_what_a_person_needs(api: Served) -> None:
    run = await declare(api, title="release")
    await park(api, run, "call", effect_profile={"summary": "deploy prod", "effects": ["writes"]})
    question = {"prompt": "Region?", "options": ["eu"]}
    await api.call(
        "POST", f"/runs/{run}/tasks", body={"key": "q", "tool_name": "ask", "tool_input": question}
    )
    await api.call(  # an author ask rests on its client, not on people
        "POST", f"/runs/{run}/tasks", await author_app(api),
        body={"key": "mine", "tool_name": "ask", "tool_input": {"prompt": "x"}, "origin": "author"},
    )  # fmt: skip
    other = await declare(api)
    await park(api, other, "elsewhere")
    status, body = await api.call("GET", "/asks", "bob")
    assert status == 200
    by_key = {a["key"]: a for a in body["asks"]}
    assert set(by_key) == {"call", "q", "elsewhere"}
    call = by_key["call"]
    assert call["tool"] == "bash" and call["tool_input"] == {"command": "make deploy"}
    assert call["effect_profile"]["summary"] == "deploy prod"
    assert call["why"] and call["deadline"] and call["run_id"] == run
    assert call["run_title"] == "release"
    q = by_key["q"]
    assert (q["prompt"], q["options"], q["multi"]) == ("Region?", ["eu"], False)
    status, body = await api.call("GET", f"/asks?run_id={other}", "bob")
    assert [a["key"] for a in body["asks"]] == ["elsewhere"]
    status, body = await api.call("GET", "/asks", "agent")
    assert (status, body["error"]["code"]) == (403, "member_credential_required")


async def test_decisions_are_logged_with_via_api(api: Served) -> None:
    run = await declare(api)
    await park(api, run, "a")
    await api.call("POST", f"/runs/{run}/tasks/a/approve", "alice")
    entries = await api.core.store.log_entries(api.ws, run_id=run, task_key="a")
    approved = [e.entry for e in entries if e.entry.action == "approved"]
    assert [(e.actor, e.via) for e in approved] == [("alice", "api")]
