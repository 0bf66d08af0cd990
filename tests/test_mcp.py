"""`approvalbot mcp` end to end: the MCP SDK's own client starts the server over stdio
(`python -m bot.cli mcp`) against a real approvalbot HTTP server, and a person (alice) decides
through the API. Tools and their schemas; questions answered, with options, several, declined;
approval requests approved, denied with a reason, refused by a rule at once, expired on the
service's clock and after `--wait`; errors as `isError` results."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, Implementation, TextContent

from adapters.http import client as sdk
from bot.config import ProfileConfig, Settings
from tests.conftest import bytecode_env
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")

STRICT = ProfileConfig(
    approval_mode="ask",
    approval_rules=[
        {"tool": "ask", "verdict": "allow"},
        {
            "tool": "request_approval",
            "path": "command",
            "match": "rm -rf*",
            "verdict": "deny",
            "reason": "no recursive deletes",
        },
    ],
)
# The MCP server talks HTTP only, so one backend is enough here (the API tests cover both).
server, api = fixtures(Settings(profiles={"mcp-strict": STRICT}), backends=["sqlite"])

ROOT = Path(__file__).resolve().parents[1]


def server_env(api: Served, tmp_path: Path, token: str, url: str | None = None) -> dict[str, str]:
    """APPROVALBOT_URL/TOKEN/WORKSPACE, and a home of its own so nothing lands in the tree."""
    home = tmp_path / "home"
    return {
        "APPROVALBOT_URL": url or api.url,
        "APPROVALBOT_TOKEN": api.tokens.get(token, token),
        "APPROVALBOT_WORKSPACE": api.ws,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "PYTHONPATH": str(ROOT),
        **bytecode_env(),
    }


@asynccontextmanager
async def mcp_session(
    api: Served,
    tmp_path: Path,
    *args: str,
    token: str = "agent",
    url: str | None = None,
) -> AsyncIterator[ClientSession]:
    """The MCP server as an MCP client starts it: a subprocess on stdio, configured by env."""
    env = server_env(api, tmp_path, token, url)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot.cli", "mcp", *args],
        env=env,
        cwd=str(tmp_path),
    )
    with (tmp_path / "mcp-stderr.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            info = Implementation(name="Probe Desktop", version="1.2")
            async with ClientSession(read, write, client_info=info) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def person(api: Served) -> AsyncIterator[sdk.Workspace]:
    async with sdk.Client(api.url, api.token("alice")) as client:
        yield client.workspace(api.ws)


async def next_decision(alice: sdk.Workspace) -> sdk.Decision:
    """Wait until something rests on alice; the newest of it."""
    for _ in range(500):
        found = await alice.decisions.list()
        if found:
            return found[-1]
        await asyncio.sleep(0.02)
    raise AssertionError("nothing to decide")


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def ok(result: Any) -> str:
    done = await asyncio.wait_for(result, 15)
    assert isinstance(done, CallToolResult)
    assert not done.is_error, text(done)
    return text(done)


async def test_tools_are_listed_with_their_schemas(api: Served, tmp_path: Path) -> None:
    async with mcp_session(api, tmp_path) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert sorted(tools) == ["ask_human", "request_approval"]
    ask, approval = tools["ask_human"], tools["request_approval"]
    assert ask.input_schema["required"] == ["prompt"]
    assert set(ask.input_schema["properties"]) == {"prompt", "options", "multi"}
    assert ask.input_schema["properties"]["multi"]["default"] is False
    assert approval.input_schema["required"] == ["action"]
    assert set(approval.input_schema["properties"]) == {"action", "details", "effect_profile"}
    # the descriptions tell the model when to use each
    assert ask.description and "only a person can give" in ask.description
    assert '", "' in ask.description  # how several chosen options come back
    assert approval.description and "side effects" in approval.description
    assert "`action`" in approval.description


async def test_ask_human_returns_the_answer(api: Served, tmp_path: Path) -> None:
    async with mcp_session(api, tmp_path) as session, person(api) as alice:
        call = asyncio.ensure_future(session.call_tool("ask_human", {"prompt": "Why?"}))
        decision = await next_decision(alice)
        assert decision.is_question and decision.prompt == "Why?"
        assert decision.task.run_title == "MCP · Probe Desktop 1.2"
        await decision.answer("because the tests say so")
        assert await ok(call) == "because the tests say so"
        run = await alice.runs.run(decision.run_id).get()
        assert (run.profile, run.title) == ("mcp", "MCP · Probe Desktop 1.2")

        call = asyncio.ensure_future(
            session.call_tool("ask_human", {"prompt": "Region?", "options": ["eu", "us"]})
        )
        decision = await next_decision(alice)
        assert (decision.options, decision.multi) == (["eu", "us"], False)
        assert decision.run_id == run.id  # one run per session
        await decision.answer("us")
        assert await ok(call) == "us"

        several = {"prompt": "Which checks?", "options": ["lint", "unit", "load"], "multi": True}
        call = asyncio.ensure_future(session.call_tool("ask_human", several))
        decision = await next_decision(alice)
        assert decision.multi
        await decision.answer(["load", "lint"])
        assert await ok(call) == "lint, load"

        call = asyncio.ensure_future(session.call_tool("ask_human", {"prompt": "Go?"}))
        await (await next_decision(alice)).decline()
        assert await ok(call) == "alice declined to answer"


async def test_request_approval_approved_and_denied(api: Served, tmp_path: Path) -> None:
    arguments: dict[str, Any] = {
        "action": "deploy shop 1.4.0 to production",
        "details": {"command": "make deploy", "version": "1.4.0"},
        "effect_profile": {"effects": ["external"], "risk": "high", "reversible": False},
    }
    heard: list[str] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    async with mcp_session(api, tmp_path) as session, person(api) as alice:
        call = asyncio.ensure_future(
            session.call_tool("request_approval", arguments, progress_callback=note)
        )
        decision = await next_decision(alice)
        assert not decision.is_question
        assert decision.tool == "request_approval"
        assert decision.tool_input == {"command": "make deploy", "version": "1.4.0"}
        assert decision.effect_profile == {
            "summary": "deploy shop 1.4.0 to production",
            "effects": ["external"],
            "risk": "high",
            "reversible": False,
        }
        await decision.approve()
        assert await ok(call) == "approved by alice"
        # while it waited, the client heard where the person decides
        link = f"/decisions/{decision.run_id}/{decision.key}"
        assert heard and heard[0].startswith("waiting for a person") and link in heard[0]

        call = asyncio.ensure_future(
            session.call_tool("request_approval", {"action": "drop the staging database"})
        )
        decision = await next_decision(alice)
        assert (decision.tool_input, decision.effect_profile) == (
            {}, {"summary": "drop the staging database"},
        )  # fmt: skip
        await decision.deny(reason="not on a Friday")
        assert await ok(call) == "denied by alice: not on a Friday"

        details = {"action": "email the customers", "details": "the 1.4.0 release notes"}
        call = asyncio.ensure_future(session.call_tool("request_approval", details))
        decision = await next_decision(alice)
        assert decision.tool_input == {"details": "the 1.4.0 release notes"}
        await decision.deny()
        assert await ok(call) == "denied by alice"


async def test_a_deny_rule_refuses_at_once(api: Served, tmp_path: Path) -> None:
    async with (
        mcp_session(api, tmp_path, "--profile", "mcp-strict") as session,
        person(api) as alice,
    ):
        refused = session.call_tool(
            "request_approval",
            {"action": "clean the build directory", "details": {"command": "rm -rf build"}},
        )
        assert await ok(refused) == "denied: no recursive deletes"
        assert await alice.asks() == []
        # anything else still parks for a person, in a run of the chosen profile
        call = asyncio.ensure_future(
            session.call_tool("request_approval", {"action": "x", "details": {"command": "ls"}})
        )
        decision = await next_decision(alice)
        assert (await alice.runs.run(decision.run_id).get()).profile == "mcp-strict"
        await decision.approve()
        assert await ok(call) == "approved by alice"


async def test_expiry_on_the_service_clock(api: Served, tmp_path: Path) -> None:
    async with mcp_session(api, tmp_path) as session, person(api) as alice:
        call = asyncio.ensure_future(session.call_tool("request_approval", {"action": "deploy"}))
        await next_decision(alice)
        await api.clock.advance(timedelta(hours=24, seconds=1))
        await api.core.scheduler.run_once()
        assert (await ok(call)).startswith("nobody decided within the time allowed")

        call = asyncio.ensure_future(session.call_tool("ask_human", {"prompt": "Anyone?"}))
        await next_decision(alice)
        await api.clock.advance(timedelta(hours=24, seconds=1))
        await api.core.scheduler.run_once()
        assert (await ok(call)).startswith("nobody answered within the time allowed")


async def test_wait_runs_out_and_a_repeat_picks_it_up(api: Served, tmp_path: Path) -> None:
    async with mcp_session(api, tmp_path, "--wait", "1") as session, person(api) as alice:
        request = {"action": "rotate the API keys", "details": {"service": "billing"}}
        assert (await ok(session.call_tool("request_approval", request))).startswith(
            "nobody decided within 1 s"
        )
        decision = await next_decision(alice)  # still open for a person, who approves later
        await decision.approve()
        # the same request again is the same task: its decision is the answer
        assert await ok(session.call_tool("request_approval", request)) == "approved by alice"
        # once answered, the same request is a new one
        assert (await ok(session.call_tool("request_approval", request))).startswith(
            "nobody decided within 1 s"
        )
        assert [a.key for a in await alice.asks()] != [decision.key]

        question = {"prompt": "Still there?"}
        assert (await ok(session.call_tool("ask_human", question))).startswith(
            "nobody answered within 1 s"
        )
        open_question = [d for d in await alice.decisions.list() if d.is_question]
        assert [d.prompt for d in open_question] == ["Still there?"]
        call = asyncio.ensure_future(session.call_tool("ask_human", question))
        await open_question[0].answer("yes")
        assert await ok(call) == "yes"
        assert not [d for d in await alice.decisions.list() if d.is_question]  # no second one


async def test_errors_are_tool_results(api: Served, tmp_path: Path) -> None:
    async with mcp_session(api, tmp_path, token="aba_not-a-token") as session:
        result = await session.call_tool("ask_human", {"prompt": "Hello?"})
        assert result.is_error and "401" in text(result) and "\n" not in text(result)
        # the server is still there: the next call answers the same way
        again = await session.call_tool("request_approval", {"action": "deploy"})
        assert again.is_error and "APPROVALBOT_TOKEN" in text(again)

    async with mcp_session(api, tmp_path, url="http://127.0.0.1:9") as session:
        result = await session.call_tool("request_approval", {"action": "deploy"})
        assert result.is_error and text(result).startswith("approvalbot is unreachable at")

    async with mcp_session(api, tmp_path) as session, person(api) as alice:
        wrong = {"action": "deploy", "effect_profile": {"risk": "extreme"}}
        result = await session.call_tool("request_approval", wrong)
        assert result.is_error and "invalid_request" in text(result)
        call = asyncio.ensure_future(session.call_tool("ask_human", {"prompt": "Fine?"}))
        await (await next_decision(alice)).answer("fine")
        assert await ok(call) == "fine"

    async with mcp_session(api, tmp_path, "--profile", "no-such-profile") as session:
        result = await session.call_tool("ask_human", {"prompt": "Hello?"})
        assert result.is_error and "unknown_profile" in text(result)
    log = (tmp_path / "mcp-stderr.log").read_text()
    assert "declared run" in log and api.token("agent") not in log


async def test_stdout_carries_only_protocol_messages(api: Served, tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "Claude Desktop", "version": "1.2"},
        }},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "request_approval",
            "arguments": {"action": "wipe", "details": {"command": "rm -rf /"}},
        }},
    ]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "mcp", "--profile", "mcp-strict",
        env=os.environ | server_env(api, tmp_path, "agent"), cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    answers: dict[int, Any] = {}
    lines: list[str] = []
    for message in messages:
        process.stdin.write(json.dumps(message).encode() + b"\n")
        await process.stdin.drain()
        if "id" in message:  # wait for its answer before the next, as a client does
            while message["id"] not in answers:
                line = (await asyncio.wait_for(process.stdout.readline(), 15)).decode()
                assert line, "the server ended early"
                lines.append(line)
                parsed = json.loads(line)
                if "id" in parsed:
                    answers[parsed["id"]] = parsed
    process.stdin.close()
    rest, errors = await asyncio.wait_for(process.communicate(), 15)
    lines += rest.decode().splitlines(keepends=True)
    assert process.returncode == 0
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in lines if line.strip())
    assert answers[1]["result"]["serverInfo"]["name"] == "approvalbot"
    listed = {tool["name"] for tool in answers[2]["result"]["tools"]}
    assert listed == {"ask_human", "request_approval"}
    result = answers[3]["result"]
    assert result["content"][0]["text"] == "denied: no recursive deletes"
    assert not result.get("isError")
    assert "declared run" in errors.decode() and "MCP · Claude Desktop 1.2" in errors.decode()
