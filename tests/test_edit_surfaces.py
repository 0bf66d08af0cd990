"""Edit before approve where agents hear the answer: the Claude Code hook runs the approved input
(`updatedInput`), the MCP server tells the model what was approved instead. The hook and the MCP
server are the real commands (subprocesses) against a real HTTP server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.http_harness import Served, fixtures
from tests.test_claude_code_hook import KEYS, Hook, claude
from tests.test_mcp import mcp_session, next_decision, ok, person

pytestmark = pytest.mark.asyncio(loop_scope="module")
# The hook and the MCP server talk HTTP only: one backend is enough (the API tests cover both).
server, api = fixtures(backends=["sqlite"])


@pytest_asyncio.fixture(loop_scope="module")
async def hook(api: Served, tmp_path: Path) -> Hook:
    return Hook(api, tmp_path)


async def test_the_hook_runs_the_approved_input(hook: Hook, api: Served) -> None:
    bash = {"command": "git push --force origin main", "description": "Publish"}
    waiting = await hook.start(claude("Bash", bash, "toolu_push"))
    run_id = await hook.parked("toolu_push")
    edited = {"command": "git push origin main", "description": "Publish"}
    status, task = await api.call(
        "POST", f"/runs/{run_id}/tasks/toolu_push/approve", "alice", {"tool_input": edited}
    )
    assert status == 200, task
    _, out, _ = await waiting
    specific = out["hookSpecificOutput"]
    assert set(specific) == KEYS | {"updatedInput"}
    assert specific["permissionDecision"] == "allow"
    assert specific["updatedInput"] == edited
    assert specific["permissionDecisionReason"] == "approvalbot: approved by alice via api, edited"


async def test_the_hook_passes_no_updated_input_when_not_edited(hook: Hook, api: Served) -> None:
    waiting = await hook.start(claude("Bash", {"command": "make"}, "toolu_make"))
    run_id = await hook.parked("toolu_make")
    await api.call("POST", f"/runs/{run_id}/tasks/toolu_make/approve", "alice", {})
    _, out, _ = await waiting
    assert set(out["hookSpecificOutput"]) == KEYS


async def test_mcp_tells_the_model_what_was_approved(api: Served, tmp_path: Path) -> None:
    arguments: dict[str, Any] = {
        "action": "deploy shop to production",
        "details": {"command": "make deploy", "version": "1.4.0"},
    }
    async with mcp_session(api, tmp_path) as session, person(api) as alice:
        call = asyncio.ensure_future(session.call_tool("request_approval", arguments))
        decision = await next_decision(alice)
        edited = {"command": "make deploy", "version": "1.3.9"}
        status, _ = await api.call(
            "POST",
            f"/runs/{decision.run_id}/tasks/{decision.key}/approve",
            "alice",
            {"tool_input": edited},
        )
        assert status == 200
        assert await ok(call) == (
            "approved by alice with changes: go ahead only with these details instead of "
            'yours: {"command": "make deploy", "version": "1.3.9"}'
        )
