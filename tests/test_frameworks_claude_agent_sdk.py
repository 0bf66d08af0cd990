"""`approvalbot.claude_agent_sdk` against a real approvalbot server: the `can_use_tool` callback
called as the Claude Agent SDK calls it (its own `ToolPermissionContext`, no CLI process), a
person (alice) deciding over the API."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from adapters.frameworks.claude_agent_sdk import make_can_use_tool
from adapters.frameworks.gate import close_gates
from adapters.http import client as sdk
from approvalbot.claude_agent_sdk import can_use_tool
from tests.frameworks_harness import (
    Person,
    alice,
    closed_port,
    framework_fixtures,
    keywords,
    load_example,
    needs_editing,
    next_decision,
)
from tests.frameworks_harness import with_person as person_meanwhile
from tests.http_harness import Served

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = framework_fixtures()
__all__ = ["alice"]


def context(tool_use_id: str) -> ToolPermissionContext:
    return ToolPermissionContext(tool_use_id=tool_use_id)


async def test_granted_and_refused_at_once(api: Served) -> None:
    callback = can_use_tool(**keywords(api))
    allowed = await callback("Read", {"file_path": "/srv/app.py"}, context("toolu_1"))
    assert allowed == PermissionResultAllow()
    refused = await callback("Bash", {"command": "rm -rf /srv"}, context("toolu_2"))
    assert refused == PermissionResultDeny(
        message="Bash was not run: denied by the approval rules: no recursive deletes",
        interrupt=False,
    )


async def test_parked_call_is_allowed_after_approval(api: Served, alice: sdk.Workspace) -> None:
    callback = can_use_tool(**keywords(api))
    person = Person(alice)
    result = await person_meanwhile(
        callback("Bash", {"command": "make deploy"}, context("toolu_1")), person.approve
    )
    assert isinstance(result, PermissionResultAllow) and result.updated_input is None
    decision = person.seen[0]
    assert (decision.tool, decision.tool_input) == ("Bash", {"command": "make deploy"})
    assert decision.effect_profile["summary"] == "make deploy"  # the hook's effect profile
    status, run = await api.call("GET", f"/runs/{decision.run_id}")
    assert (status, run["title"]) == (200, "Claude Agent SDK")


async def test_denied_call_carries_the_reason(api: Served, alice: sdk.Workspace) -> None:
    callback = can_use_tool(**keywords(api))
    person = Person(alice)
    result = await person_meanwhile(
        callback("Write", {"file_path": "/etc/hosts", "content": "x"}, context("toolu_1")),
        lambda: person.deny("not that file"),
    )
    assert result == PermissionResultDeny(
        message="Write was not run: denied by alice: not that file", interrupt=False
    )


async def test_ask_user_question_is_answered_by_a_person(api: Served, alice: sdk.Workspace) -> None:
    callback = can_use_tool(**keywords(api))
    person = Person(alice)
    questions = [
        {"question": "Which database?", "header": "DB", "multiSelect": False,
         "options": [{"label": "Postgres", "description": ""}, {"label": "SQLite"}]},
        {"question": "Which checks?", "header": "CI", "multiSelect": True,
         "options": [{"label": "lint"}, {"label": "unit"}, {"label": "e2e"}]},
    ]  # fmt: skip
    result = await person_meanwhile(
        callback("AskUserQuestion", {"questions": questions}, context("toolu_q")),
        lambda: person.answer("SQLite"),
        lambda: person.answer(["unit", "lint"]),
    )
    assert result == PermissionResultAllow(
        updated_input={
            "questions": questions,
            "answers": {"Which database?": "SQLite", "Which checks?": "lint, unit"},
        }
    )
    first, second = person.seen
    assert (first.prompt, first.options, first.multi) == (
        "Which database?", ["Postgres", "SQLite"], False,
    )  # fmt: skip
    assert second.multi and first.run_id == second.run_id
    # declined: the question tool is denied with who declined
    declined = person_meanwhile(
        callback("AskUserQuestion", {"questions": questions[:1]}, context("toolu_r")),
        lambda: _decline(alice),
    )
    assert await declined == PermissionResultDeny(
        message="no answer: alice declined to answer", interrupt=False
    )


async def _decline(alice: sdk.Workspace) -> None:
    await (await next_decision(alice)).decline()


async def test_one_run_per_callback(api: Served) -> None:
    first, second = make_can_use_tool(**keywords(api)), make_can_use_tool(**keywords(api))
    for callback, tool_use_id in ((first, "a"), (first, "b"), (second, "a")):
        await callback("Read", {"file_path": f"/{tool_use_id}"}, context(tool_use_id))
    assert first.run_id and second.run_id and first.run_id != second.run_id
    assert len(await api.core.store.tasks(api.ws, run_id=first.run_id)) == 2


async def test_unreachable_service_or_bad_token_denies(api: Served) -> None:
    down = can_use_tool(**(keywords(api) | {"url": closed_port()}))
    result = await down("Read", {"file_path": "/x"}, context("toolu_1"))
    assert isinstance(result, PermissionResultDeny) and not result.interrupt
    assert result.message.startswith("Read was not run: approvalbot is unreachable at")
    bad = can_use_tool(**keywords(api, token="aba_not_a_token"))
    result = await bad("Read", {"file_path": "/x"}, context("toolu_1"))
    assert result == PermissionResultDeny(
        message="Read was not run: approvalbot refused the token (401 unauthorized): "
        "check APPROVALBOT_TOKEN",
        interrupt=False,
    )
    result = await bad("AskUserQuestion", {"questions": [{"question": "?"}]}, context("toolu_2"))
    assert isinstance(result, PermissionResultDeny)
    assert "refused the token" in result.message


async def test_bare_callback_reads_the_environment_with_the_claude_code_profile(
    api: Served, alice: sdk.Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ClaudeAgentOptions(can_use_tool=can_use_tool)`: the service from the environment, the
    built-in `claude-code` profile (reads and read-only Bash lines granted, the rest asks a
    person)."""
    for name, value in (("URL", api.url), ("TOKEN", api.token("agent")), ("WORKSPACE", api.ws)):
        monkeypatch.setenv(f"APPROVALBOT_{name}", value)
    close_gates()
    options = ClaudeAgentOptions(can_use_tool=can_use_tool)
    assert options.can_use_tool is can_use_tool
    assert await can_use_tool("Grep", {"pattern": "x"}, context("t1")) == PermissionResultAllow()
    person = Person(alice)
    result = await person_meanwhile(
        can_use_tool("Bash", {"command": "make build"}, context("t2")), lambda: person.deny("no")
    )
    assert result == PermissionResultDeny(message="Bash was not run: denied by alice: no")
    assert person.seen[0].tool == "bash"  # the profile's alias
    close_gates()


async def test_the_example_runs_against_the_service(api: Served, alice: sdk.Workspace) -> None:
    """The example drives the real SDK client (`ClaudeSDKClient`) over its offline transport:
    the permission requests travel the SDK's own control protocol to the callback."""
    example = load_example("claude_agent_sdk_agent")
    person = Person(alice)
    lines = await person_meanwhile(
        example.main(api.url, api.token("agent"), api.ws, lambda _line: None),
        lambda: person.answer("staging"),
        person.approve,
    )
    assert lines == [
        "Read deploy.toml: allowed",
        "Asked where to deploy: staging",
        "Bash make deploy ENV=staging: allowed",
    ]
    assert person.seen[1].tool_input == {"command": "make deploy ENV=staging"}


@needs_editing
async def test_an_edited_input_is_the_updated_input(api: Served, alice: sdk.Workspace) -> None:
    callback = can_use_tool(**keywords(api))
    person = Person(alice)
    result = await person_meanwhile(
        callback("Bash", {"command": "make deploy"}, context("toolu_1")),
        lambda: person.approve_edited({"command": "make deploy ENV=staging"}),
    )
    assert result == PermissionResultAllow(updated_input={"command": "make deploy ENV=staging"})


@needs_editing
async def test_an_edit_that_is_not_an_input_object_is_denied(
    api: Served, alice: sdk.Workspace
) -> None:
    """Edited to a bare string: allowing would run the proposed input, which was not approved."""
    callback = can_use_tool(**keywords(api))
    person = Person(alice)
    result = await person_meanwhile(
        callback("Bash", {"command": "make deploy"}, context("toolu_s")),
        lambda: person.approve_edited("make deploy ENV=staging"),
    )
    assert result == PermissionResultDeny(
        message="Bash was not run: approved by alice with an edited input that is not a set of "
        'arguments ("make deploy ENV=staging")',
        interrupt=False,
    )


async def test_nobody_deciding_runs_nothing(api: Served, alice: sdk.Workspace) -> None:
    """`wait` ran out, or the service's deadline passed: denied, with why."""
    waited = can_use_tool(**keywords(api), wait=0.2)
    result = await waited("Bash", {"command": "make deploy"}, context("toolu_w"))
    assert result == PermissionResultDeny(
        message="Bash was not run: nobody decided within 0.2 s", interrupt=False
    )
    callback = can_use_tool(**keywords(api))

    async def expire() -> None:
        for _ in range(500):  # until this call is parked (the earlier one still is, too)
            if any(d.tool_input == {"command": "make migrate"} for d in await alice.asks()):
                break
            await asyncio.sleep(0.02)
        await api.clock.advance(timedelta(hours=24, seconds=1))
        await api.core.scheduler.run_once()

    result = await person_meanwhile(
        callback("Bash", {"command": "make migrate"}, context("toolu_e")), expire
    )
    assert isinstance(result, PermissionResultDeny)
    assert result.message.startswith("Bash was not run: nobody decided within the time allowed")
