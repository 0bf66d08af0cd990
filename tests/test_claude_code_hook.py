"""`approvalbot hook claude-code` end to end: the hook as Claude Code runs it (a subprocess fed
the exact PreToolUse JSON on stdin) against a real running service; a member decides over the
API while the hook waits. State goes to XDG_STATE_HOME=tmp_path, never the home or the tree.

SQLite only: the hook talks HTTP, the store behind the service is not what is tested here.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from adapters.claude_code.state import endpoint_dir, session_name
from bot.config import Settings
from tests.http_harness import Served, fixtures
from tests.web_helpers import serving

pytestmark = pytest.mark.asyncio(loop_scope="module")

STRICT = {
    "approval_mode": "rules",
    "approval_rules": [
        {"tool": "bash", "verdict": "deny", "reason": "no shell in this repository"},
        {"tool": "read", "verdict": "allow"},
    ],
    "aliases": {"Bash": "bash", "Read": "read"},
}
server, api = fixtures(Settings(profiles={"strict": STRICT}), backends=["sqlite"])

CWD = "/home/dev/src/app"
HOOK = [sys.executable, "-m", "bot.cli", "hook", "claude-code"]
HEAVY = ("aiohttp", "sqlalchemy", "sqlmodel", "pydantic", "telegram", "slack_bolt", "slack_sdk")
KEYS = {"hookEventName", "permissionDecision", "permissionDecisionReason"}


def claude(
    tool_name: str, tool_input: dict[str, Any], use_id: str, session: str = "3f2a9c1e-aaaa"
) -> dict[str, Any]:
    """The JSON Claude Code sends a PreToolUse hook."""
    return {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/app/{session}.jsonl",
        "cwd": CWD,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": use_id,
    }


class Hook:
    """Runs the hook as a subprocess for one test (its own state directory)."""

    def __init__(self, api: Served, state: Path) -> None:
        self.api = api
        self.state = state

    def env(self, **overrides: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            APPROVALBOT_URL=self.api.url,
            APPROVALBOT_TOKEN=self.api.token("agent"),
            APPROVALBOT_WORKSPACE=self.api.ws,
            XDG_STATE_HOME=str(self.state),
        )
        env.update(overrides)
        return env

    async def start(
        self, payload: dict[str, Any] | bytes, *args: str, **env: str
    ) -> asyncio.Task[tuple[int, Any, str]]:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        process = await asyncio.create_subprocess_exec(
            *HOOK, *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env(**env), cwd=self.state,
        )  # fmt: skip

        async def finish() -> tuple[int, Any, str]:
            out, err = await asyncio.wait_for(process.communicate(data), 30)
            text = err.decode()
            assert "Traceback" not in text
            return process.returncode or 0, json.loads(out), text

        return asyncio.create_task(finish())

    async def __call__(
        self, payload: dict[str, Any] | bytes, *args: str, **env: str
    ) -> tuple[Any, str]:
        code, out, err = await (await self.start(payload, *args, **env))
        assert code == 0
        return out, err

    def remembered(self, session: str = "3f2a9c1e-aaaa") -> str | None:
        """The run the state directory remembers for a session."""
        found = list((self.state / "approvalbot" / "claude-code").glob(f"*/{session}.json"))
        if not found:
            return None
        assert len(found) == 1
        run_id = json.loads(found[0].read_text())["run_id"]
        assert isinstance(run_id, str)
        return run_id

    async def parked(self, key: str, session: str = "3f2a9c1e-aaaa") -> str:
        """Wait until the call `key` rests on a person; its run id."""
        for _ in range(500):
            run_id = self.remembered(session)
            if run_id:
                status, task = await self.api.call("GET", f"/runs/{run_id}/tasks/{key}")
                if status == 200 and task["state"] in ("needs_approval", "awaiting_input"):
                    return run_id
            await asyncio.sleep(0.02)
        raise AssertionError(f"{key} never parked")

    async def task(self, run_id: str, key: str) -> dict[str, Any]:
        status, task = await self.api.call("GET", f"/runs/{run_id}/tasks/{key}")
        assert status == 200, task
        assert isinstance(task, dict)
        return task


@pytest_asyncio.fixture(loop_scope="module")
async def hook(api: Served, tmp_path: Path) -> Hook:
    return Hook(api, tmp_path)


def decision(out: Any, expected: str) -> str:
    """Check the documented shape exactly; the reason."""
    assert set(out) == {"hookSpecificOutput"}
    specific = out["hookSpecificOutput"]
    assert set(specific) == KEYS
    assert specific["hookEventName"] == "PreToolUse"
    assert specific["permissionDecision"] == expected, specific
    reason = specific["permissionDecisionReason"]
    assert isinstance(reason, str) and "approvalbot" in reason
    return reason


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------------------------
async def test_read_is_allowed_by_the_profile(hook: Hook, api: Served) -> None:
    read = claude("Read", {"file_path": f"{CWD}/README.md"}, "toolu_read1")
    out, err = await hook(read)
    decision(out, "allow")
    assert err == ""
    run_id = hook.remembered()
    assert run_id is not None
    task = await hook.task(run_id, "toolu_read1")
    assert (task["origin"], task["tool_name"], task["tool"], task["via"]) == (
        "model", "Read", "read", "engine",
    )  # fmt: skip
    assert task["effect_profile"] == {
        "summary": f"Read {CWD}/README.md",
        "effects": ["reads"],
        "targets": [f"{CWD}/README.md", CWD],
    }
    status, run = await api.call("GET", f"/runs/{run_id}")
    assert status == 200
    assert (run["profile"], run["title"]) == ("claude-code", f"Claude Code · 3f2a9c1e · {CWD}")
    # a retry of the same tool_use_id is the same task
    out, _ = await hook(read)
    decision(out, "allow")


async def test_a_rule_denies_with_its_reason(hook: Hook) -> None:
    out, _ = await hook(
        claude("Bash", {"command": "rm -rf build"}, "toolu_b1"), "--profile", "strict"
    )
    reason = decision(out, "deny")
    assert "no shell in this repository" in reason


async def test_park_then_approve_answers_within_3_s(hook: Hook, api: Served) -> None:
    bash = {"command": "make deploy", "description": "Deploy the app"}
    waiting = await hook.start(claude("Bash", bash, "toolu_deploy"))
    run_id = await hook.parked("toolu_deploy")
    task = await hook.task(run_id, "toolu_deploy")
    assert task["effect_profile"] == {
        "summary": "make deploy", "effects": ["executes"], "targets": [CWD],
    }  # fmt: skip
    await asyncio.sleep(0.3)  # the hook is long-polling by now
    assert not waiting.done()
    loop = asyncio.get_running_loop()
    approved = loop.time()
    status, _ = await api.call("POST", f"/runs/{run_id}/tasks/toolu_deploy/approve", who="alice")
    assert status == 200
    _, out, _ = await waiting
    assert loop.time() - approved < 3
    assert decision(out, "allow") == "approvalbot: approved by alice via api"


async def test_park_then_deny_carries_the_persons_reason(hook: Hook, api: Served) -> None:
    write = {"file_path": f"{CWD}/prod.env", "content": "DEBUG=1\n"}
    waiting = await hook.start(claude("Write", write, "toolu_w1"))
    run_id = await hook.parked("toolu_w1")
    task = await hook.task(run_id, "toolu_w1")
    assert task["effect_profile"] == {
        "summary": f"Edit {CWD}/prod.env", "effects": ["writes"],
        "targets": [f"{CWD}/prod.env", CWD],
    }  # fmt: skip
    assert task["tool_input"] == write  # the page renders it as a diff
    body = {"reason": "not the prod env, use .env.local"}
    status, _ = await api.call("POST", f"/runs/{run_id}/tasks/toolu_w1/deny", "alice", body)
    assert status == 200
    _, out, _ = await waiting
    reason = decision(out, "deny")
    assert "not the prod env, use .env.local" in reason and "alice" in reason


async def test_edit_and_mcp_calls_are_approved(hook: Hook, api: Served) -> None:
    edit = {"file_path": f"{CWD}/app.py", "old_string": "x = 1", "new_string": "x = 2"}
    mcp = {"owner": "acme", "repo": "app", "title": "Flaky test"}
    edit_waiting = await hook.start(claude("Edit", edit, "toolu_e1"))
    mcp_waiting = await hook.start(claude("mcp__github__create_issue", mcp, "toolu_m1"))
    for key, summary in (("toolu_e1", f"Edit {CWD}/app.py"), ("toolu_m1", None)):
        run_id = await hook.parked(key)
        task = await hook.task(run_id, key)
        assert CWD in task["effect_profile"]["targets"]
        if summary:
            assert task["effect_profile"]["summary"] == summary
        else:
            assert task["tool"] == "mcp__github__create_issue"
            assert task["effect_profile"]["summary"] == "MCP github: create_issue"
        status, _ = await api.call("POST", f"/runs/{run_id}/tasks/{key}/approve", who="bob")
        assert status == 200
    for waiting in (edit_waiting, mcp_waiting):
        _, out, _ = await waiting
        assert decision(out, "allow") == "approvalbot: approved by bob via api"


async def withdrawn(hook: Hook, run_id: str, key: str) -> None:
    """The task was withdrawn by the hook (the agent's token) when its wait ran out."""
    task = await hook.task(run_id, key)
    assert (task["state"], task["resolved_by"]) == ("cancelled", "agent"), task
    assert task["error"] == {
        "code": "withdrawn", "detail": "withdrawn by agent: Claude Code stopped waiting",
    }  # fmt: skip


async def test_nobody_decides_in_time(hook: Hook) -> None:
    asked = await hook.start(claude("Bash", {"command": "make build"}, "toolu_t1"), "--wait", "1")
    denied = await hook.start(
        claude("Bash", {"command": "make test"}, "toolu_t2"), "--wait", "1s", "--on-timeout", "deny"
    )
    _, out, _ = await asked
    assert "nobody decided within 1 s" in decision(out, "ask")
    _, out, _ = await denied
    assert "nobody decided within 1 s" in decision(out, "deny")
    # Both calls were withdrawn on the way out: nobody is left to approve what nobody waits for.
    run_id = hook.remembered()
    assert run_id is not None
    for key in ("toolu_t1", "toolu_t2"):
        await withdrawn(hook, run_id, key)


async def test_a_service_failing_mid_wait_answers_on_error_and_withdraws_the_call(
    hook: Hook,
) -> None:
    """The call is parked, then the service fails the long-poll (a proxy answering 502): the
    hook gives --on-error, and the call it hands to Claude's prompt is withdrawn."""

    async def forward(request: web.Request) -> web.StreamResponse:
        if request.method == "GET" and "wait" in request.query:
            return web.Response(status=502, text="<html>Bad Gateway</html>")
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
        async with aiohttp.ClientSession() as client, client.request(
            request.method, hook.api.url + request.path_qs, data=await request.read(),
            headers=headers,
        ) as answer:  # fmt: skip
            body = await answer.read()
            return web.Response(status=answer.status, body=body, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    async with serving(app) as (_, url):
        bash = claude("Bash", {"command": "make build"}, "toolu_m")
        out, err = await hook(bash, APPROVALBOT_URL=url)
        assert "502" in decision(out, "ask") and "502" in err
    run_id = hook.remembered()
    assert run_id is not None
    await withdrawn(hook, run_id, "toolu_m")


FORWARDED = ("authorization", "content-type", "accept", "user-agent")


async def test_service_down_and_bad_token_answer_on_error(hook: Hook) -> None:
    bash = claude("Bash", {"command": "make build"}, "toolu_x")
    down = f"http://127.0.0.1:{closed_port()}"
    out, err = await hook(bash, APPROVALBOT_URL=down)
    assert "cannot reach" in decision(out, "ask")
    assert err.count("\n") == 1 and "cannot reach" in err
    out, err = await hook(bash, "--on-error", "deny", APPROVALBOT_URL=down)
    decision(out, "deny")
    out, err = await hook(bash, APPROVALBOT_TOKEN="aba_not_a_token")
    assert "401" in decision(out, "ask") and "401" in err and err.count("\n") == 1
    out, _ = await hook(bash, "--on-error", "deny", APPROVALBOT_TOKEN="aba_not_a_token")
    decision(out, "deny")
    out, err = await hook(bash, APPROVALBOT_TOKEN="")
    assert "APPROVALBOT_TOKEN" in decision(out, "ask") and "APPROVALBOT_TOKEN" in err


async def test_a_blackholed_service_answers_on_error_within_the_connect_bound(
    hook: Hook, blackholed: str
) -> None:
    """A service that never takes the connection: the hook says so after its 5 s connect
    bound (adapters/claude_code/wire.py), not after a request's whole timeout."""
    started = time.monotonic()
    out, err = await hook(
        claude("Bash", {"command": "make build"}, "toolu_b"), APPROVALBOT_URL=blackholed
    )
    assert "cannot reach" in decision(out, "ask") and "timed out" in err
    assert time.monotonic() - started < 25  # the bound is 5 s; before, 30 s


async def test_a_5xx_answers_on_error(hook: Hook) -> None:
    async def broken(request: web.Request) -> web.Response:
        body = {"error": {"code": "internal_error", "detail": "boom"}}
        return web.json_response(body, status=500)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", broken)
    async with serving(app) as (_, url):
        bash = claude("Bash", {"command": "make build"}, "toolu_5")
        out, err = await hook(bash, APPROVALBOT_URL=url)
        assert "500" in decision(out, "ask") and "boom" in err
        out, _ = await hook(bash, "--on-error", "deny", APPROVALBOT_URL=url)
        decision(out, "deny")


@pytest.mark.parametrize(
    "stdin",
    [b"", b"not json", b"[1, 2]", json.dumps({"session_id": "s", "tool_input": {}}).encode()],
)
async def test_malformed_input_is_never_allowed(hook: Hook, stdin: bytes) -> None:
    out, err = await hook(stdin)
    decision(out, "ask")
    assert err.startswith("approvalbot hook: ") and err.count("\n") == 1
    out, _ = await hook(stdin, "--on-error", "deny")
    decision(out, "deny")


async def test_one_run_per_session(hook: Hook) -> None:
    """Two sessions, two runs; one session twice, one run; eight parallel first calls of a
    session, one run."""
    for use_id in ("toolu_s1", "toolu_s2"):
        out, _ = await hook(claude("Read", {"file_path": "/a"}, use_id, session="one"))
        decision(out, "allow")
    out, _ = await hook(claude("Read", {"file_path": "/b"}, "toolu_s3", session="two"))
    decision(out, "allow")
    one, two = hook.remembered("one"), hook.remembered("two")
    assert one and two and one != two
    for use_id in ("toolu_s1", "toolu_s2"):
        assert (await hook.task(one, use_id))["state"] == "granted"
    assert (await hook.task(two, "toolu_s3"))["state"] == "granted"
    # parallel first calls of a new session declare one run between them: all of them wait on
    # the session's lock (held here until they are all started), then one declares
    directory = endpoint_dir(hook.state / "approvalbot" / "claude-code", hook.api.url, hook.api.ws)
    directory.mkdir(parents=True, exist_ok=True)  # the sessions above made it
    lock = os.open(directory / f"{session_name('par')}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        started = [
            await hook.start(claude("Glob", {"pattern": "**/*.py"}, f"toolu_p{i}", session="par"))
            for i in range(8)
        ]
        await asyncio.sleep(0.5)
        assert not any(waiting.done() for waiting in started)
    finally:
        os.close(lock)
    for waiting in started:
        _, out, _ = await waiting
        decision(out, "allow")
    par = hook.remembered("par")
    assert par and par not in (one, two)
    for i in range(8):
        assert (await hook.task(par, f"toolu_p{i}"))["state"] == "granted"
    declared = await hook.api.core.store.runs(hook.api.ws)
    assert sorted(run.id for run in declared) == sorted([one, two, par])


async def test_a_forgotten_run_is_replaced(hook: Hook) -> None:
    out, _ = await hook(claude("Read", {"file_path": "/a"}, "toolu_f1"))
    decision(out, "allow")
    first = hook.remembered()
    assert first
    (remembered,) = (hook.state / "approvalbot" / "claude-code").glob("*/3f2a9c1e-aaaa.json")
    remembered.write_text(json.dumps({"run_id": "run_0000000000000000"}))
    out, _ = await hook(claude("Read", {"file_path": "/a"}, "toolu_f2"))
    decision(out, "allow")
    second = hook.remembered()
    assert second and second not in (first, "run_0000000000000000")
    assert (await hook.task(second, "toolu_f2"))["state"] == "granted"


ASK = {
    "questions": [
        {
            "question": "Which region should I deploy to?",
            "header": "Region",
            "options": [
                {"label": "eu-west-1", "description": "Ireland"},
                {"label": "us-east-1", "description": "Virginia"},
            ],
            "multiSelect": False,
        },
        {
            "question": "Which checks should run first?",
            "header": "Checks",
            "options": [
                {"label": "lint", "description": "ruff"},
                {"label": "types", "description": "mypy"},
                {"label": "tests", "description": "pytest"},
            ],
            "multiSelect": True,
        },
    ]
}


async def test_ask_user_question_single_and_multi(hook: Hook, api: Served) -> None:
    waiting = await hook.start(claude("AskUserQuestion", ASK, "toolu_q"))
    run_id = await hook.parked("toolu_q-q2")
    first, second = [await hook.task(run_id, f"toolu_q-q{i}") for i in (1, 2)]
    assert (first["tool"], first["tool_input"]) == ("ask", {
        "prompt": "Which region should I deploy to?", "options": ["eu-west-1", "us-east-1"],
        "multi": False,
    })  # fmt: skip
    assert second["tool_input"]["multi"] is True
    for key, content in (("toolu_q-q2", ["tests", "lint"]), ("toolu_q-q1", "us-east-1")):
        body = {"content": content}
        status, _ = await api.call("POST", f"/runs/{run_id}/tasks/{key}/resolution", "alice", body)
        assert status == 200
    _, out, _ = await waiting
    specific = out["hookSpecificOutput"]
    assert set(specific) == KEYS | {"updatedInput"}
    assert specific["permissionDecision"] == "allow"
    assert specific["permissionDecisionReason"] == "approvalbot: answered by alice via api"
    assert specific["updatedInput"] == {
        **ASK,
        "answers": {
            "Which region should I deploy to?": "us-east-1",
            "Which checks should run first?": "lint, tests",
        },
    }


async def test_a_declined_question_is_denied(hook: Hook, api: Served) -> None:
    """The first of two questions declined: the call is denied, and the second question, which
    nobody needs answered any more, is withdrawn."""
    waiting = await hook.start(claude("AskUserQuestion", ASK, "toolu_d"))
    run_id = await hook.parked("toolu_d-q1")
    body = {"outcome": "failed"}
    status, _ = await api.call("POST", f"/runs/{run_id}/tasks/toolu_d-q1/resolution", "bob", body)
    assert status == 200
    _, out, _ = await waiting
    reason = decision(out, "deny")
    question = "'Which region should I deploy to?'"
    assert reason == f"approvalbot: bob declined to answer the question {question} (via api)"
    await withdrawn(hook, run_id, "toolu_d-q2")


async def test_print_settings(hook: Hook) -> None:
    process = await asyncio.create_subprocess_exec(
        *HOOK, "--print-settings", stdout=asyncio.subprocess.PIPE, env=hook.env()
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    settings = json.loads(out)
    entry = settings["hooks"]["PreToolUse"][0]["hooks"][0]
    assert entry == {"type": "command", "command": "approvalbot hook claude-code", "timeout": 1800}


async def test_the_hook_imports_nothing_heavy(hook: Hook, api: Served) -> None:
    out, err = await hook(
        claude("Read", {"file_path": "/a"}, "toolu_i1"),
        PYTHONPROFILEIMPORTTIME="1",  # the same as -X importtime
    )
    decision(out, "allow")
    imported = {line.split("|")[-1].strip() for line in err.splitlines() if "|" in line}
    assert "adapters.claude_code.hook" in imported
    heavy = sorted(m for m in imported if m.split(".")[0].lower() in HEAVY)
    assert heavy == []


async def test_a_stopped_run_denies_the_sessions_calls(hook: Hook, api: Served) -> None:
    out, _ = await hook(claude("Read", {"file_path": "/a"}, "toolu_r1"))
    decision(out, "allow")
    run_id = hook.remembered()
    status, _ = await api.call("POST", f"/runs/{run_id}/stop", who="alice")
    assert status == 200
    out, _ = await hook(claude("Read", {"file_path": "/a"}, "toolu_r2"))
    assert "not running" in decision(out, "deny")


async def test_questions_nobody_answers_in_time_are_withdrawn(hook: Hook) -> None:
    waiting = await hook.start(claude("AskUserQuestion", ASK, "toolu_qt"), "--wait", "0.5")
    _, out, _ = await waiting
    assert "nobody answered within 0.5 s" in decision(out, "ask")
    run_id = hook.remembered()
    assert run_id is not None
    for key in ("toolu_qt-q1", "toolu_qt-q2"):
        await withdrawn(hook, run_id, key)


async def test_a_decision_made_just_before_the_withdrawal_is_the_one_given(
    hook: Hook, api: Served
) -> None:
    """The wait ran out as a person approved: the withdrawal loses (409), and the hook reads the
    task back and gives the approval rather than handing a granted call to Claude's prompt."""
    from adapters.claude_code import hook as claude_hook
    from adapters.claude_code.wire import Endpoint

    status, run = await api.call("POST", "/runs", body={"approval_mode": "ask"})
    assert status == 201
    body = {"tool_name": "Bash", "tool_input": {"command": "make deploy"}, "key": "toolu_late"}
    status, receipt = await api.call("POST", f"/runs/{run['id']}/tasks", body=body)
    assert status == 201
    status, _ = await api.call("POST", f"/runs/{run['id']}/tasks/toolu_late/approve", "alice")
    assert status == 200
    options = claude_hook.Options(api.url, api.token("agent"), api.ws)
    service = claude_hook.Service(options, Endpoint(api.url, api.token("agent")))
    task = await asyncio.to_thread(claude_hook.withdraw, service, [receipt])
    assert task is not None and (task["state"], task["resolved_by"]) == ("granted", "alice")


async def test_the_profile_grants_read_only_bash_lines_and_parks_what_rides_on_them(
    hook: Hook, api: Served
) -> None:
    """Issue 20: Claude Code's searches pass without a person; a command chained, substituted
    or redirected after a read-only one parks, and the card lists the line's commands."""
    session = "5e1b0d2a-shell"
    for number, line in enumerate(
        ["ls", "git status", "grep -rn TODO src", "cd src && grep -rn 'def main' . | head -20",
         "git log --oneline -5 2>/dev/null && git diff --stat"]
    ):  # fmt: skip
        out, _ = await hook(claude("Bash", {"command": line}, f"toolu_ro{number}", session))
        decision(out, "allow")
    run_id = hook.remembered(session)
    assert run_id is not None
    lines = ["ls && make deploy", "git status; npm publish", "echo $(curl -s https://x.example)",
             "cat README.md > notes.txt", "find . -name '*.tmp' -delete"]  # fmt: skip
    waiting = [
        await hook.start(claude("Bash", {"command": line}, f"toolu_rw{n}", session), "--wait", "1")
        for n, line in enumerate(lines)
    ]
    for number, line in enumerate(lines):
        key = f"toolu_rw{number}"
        await hook.parked(key, session)
        task = await hook.task(run_id, key)
        assert task["state"] == "needs_approval", (line, task["why"])
        if number == 0:
            commands = task["effect_profile"]["commands"]
            assert [(c["text"], c["outcome"], c.get("marked", False)) for c in commands] == [
                ("ls", "granted", False),
                ("make deploy", "parked", True),
            ]
    for each in waiting:
        _, out, _ = await each
        decision(out, "ask")  # nobody decided within the second: Claude Code asks its user
