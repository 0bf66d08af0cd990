"""The SDK's side of issue 15 against a real server, on SQLite and PostgreSQL: a person approves
edited (`approve(tool_input=…)`) and always (`approve(allow=…)`, `proposal()`), lists and removes
learned rules and reads the decision log; the agent's `run.call` gives the approved input and
`@require_approval` runs it. The blocking twin does the same."""

from __future__ import annotations

import asyncio
import queue
import time
from typing import Any

import pytest

from adapters.http import client as sdk
from adapters.http import models as m
from adapters.http import policy
from adapters.http.sync_client import SyncClient
from bot.config import ProfileConfig, Settings
from tests.http_harness import Served, first_decision, fixtures, sdk_fixtures, with_person

pytestmark = pytest.mark.asyncio(loop_scope="module")
# A shell path (issue 20): a `command` of `bash` is judged, and proposed for, command by command.
SHELL = [{"tool": "bash", "path": "command"}]
OPS = ProfileConfig(
    approval_mode="ask",
    shell_commands=SHELL,
    approval_rules=[
        {"tool": "bash", "verdict": "deny", "path": "command", "match": "rm *", "reason": "no rm"}
    ],
)
server, api = fixtures(Settings(profiles={"ops": OPS}))
PUSH = {"command": "git push origin main"}


agent, person = sdk_fixtures()


# edit before approve ----------------------------------------------------------------------------
async def test_run_call_gives_the_input_a_person_approved(
    agent: sdk.Workspace, person: sdk.Workspace
) -> None:
    edit = {"command": "git push origin feature"}
    async with agent.runs.declare(profile="ops") as run:

        async def approve_edited() -> None:
            decision = await first_decision(person, run.id)
            task = await decision.approve(tool_input=edit)
            assert (task.state, task.approved_input) == ("granted", edit)

        task = await with_person(run.call("bash", PUSH), approve_edited)
        assert (task.tool_input, task.approved_input, task.via) == (PUSH, edit, "api")
        assert sdk.input_to_run(task) == edit

        async def approve_as_is() -> None:
            await (await first_decision(person, run.id)).approve()

        plain = await with_person(run.call("bash", PUSH), approve_as_is)
        assert plain.approved_input is None and sdk.input_to_run(plain) == PUSH


async def test_an_edit_a_rule_denies_is_an_api_error_and_stays_parked(
    agent: sdk.Workspace, person: sdk.Workspace
) -> None:
    run = await agent.runs.declare(profile="ops")
    receipt = await run.append("bash", PUSH)
    decision = await first_decision(person, run.id)
    with pytest.raises(sdk.ApiError) as refused:
        await decision.approve(tool_input={"command": "rm -rf /"})
    assert (refused.value.status, refused.value.code) == (422, "approval_denied")
    assert "no rm" in refused.value.detail
    assert (await run.task(receipt.key)).state == "needs_approval"
    with pytest.raises(ValueError, match="only with allow"):
        await decision.approve(rule={"tool": "bash"})  # nothing sent: a rule needs a scope
    assert [d.key for d in await person.runs.run(run.id).decisions.list()] == [receipt.key]


async def test_require_approval_runs_the_approved_arguments(
    agent: sdk.Workspace, person: sdk.Workspace
) -> None:
    ran: list[tuple[str, bool]] = []
    async with agent.runs.declare(approval_mode="ask") as run:

        @sdk.require_approval(run)
        async def deploy(env: str, force: bool = False) -> str:
            ran.append((env, force))
            return env

        async def to_staging() -> None:
            decision = await first_decision(person, run.id)
            assert decision.tool_input == {"env": "prod", "force": False}
            await decision.approve(tool_input={"env": "staging", "force": False})

        assert await with_person(deploy("prod"), to_staging) == "staging"

        async def unfit() -> None:
            await (await first_decision(person, run.id)).approve(tool_input={"region": "eu"})

        with pytest.raises(sdk.EditedInputUnfit) as error:
            await with_person(deploy("prod"), unfit)
        assert "region" in error.value.detail
    assert ran == [("staging", False)]  # the unfit edit ran nothing, the proposed call neither


# approve always and the log ---------------------------------------------------------------------
async def test_proposal_allow_learned_rules_and_the_log(
    agent: sdk.Workspace, person: sdk.Workspace
) -> None:
    run = await agent.runs.declare(approval_mode="ask", title="pushes", shell_commands=SHELL)
    receipt = await run.append("bash", PUSH)
    decision = await first_decision(person, run.id)
    proposal = await decision.proposal()
    assert proposal.rule == {
        "tool": "bash", "verdict": "allow", "path": "command", "match": "git push *",
    }  # fmt: skip
    assert proposal.would_allow == []
    task = await decision.approve(allow="run")
    assert task.state == "granted"
    # The next matching call of the run is granted by the rule, nobody asked.
    again = await run.call("bash", {"command": "git push origin release"})
    assert (again.state, again.resolved_by) == ("granted", None)

    [rule] = await person.learned_rules()
    assert (rule.scope, rule.run_id, rule.added_by) == ("run", run.id, "alice")
    assert (rule.from_.run_id, rule.from_.key) == (run.id, receipt.key)
    assert rule.rule["match"] == "git push *"

    entries = await person.log(run.id)
    actions = [e.action for e in entries]
    assert actions[:4] == ["run_declared", "parked", "approved", "learned_rule"]
    assert entries[3].detail["rule_id"] == rule.id and entries[3].actor == "alice"
    later = await person.log(run.id, after=entries[1].id)
    assert [e.id for e in later] == [e.id for e in entries[2:]]

    await person.remove_learned_rule(rule.id)
    assert await person.learned_rules() == []
    with pytest.raises(sdk.ApiError) as gone:
        await person.remove_learned_rule(rule.id)
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    with pytest.raises(sdk.ApiError) as forbidden:
        await agent.learned_rules()
    assert forbidden.value.status == 403


async def test_the_log_follows_its_pages(
    agent: sdk.Workspace, person: sdk.Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await agent.runs.declare(approval_mode="ask")
    for n in range(3):
        await run.append("bash", {"command": f"echo {n}"}, key=f"k{n}")
    whole = await person.log(run.id)
    assert [e.action for e in whole] == ["run_declared", "parked", "parked", "parked"]
    monkeypatch.setattr(policy, "LOG_PAGE", 3)  # pages of 3 entries: the SDK reads both
    first = await person.log_page(run.id)
    assert len(first.entries) == 3 and first.next_after == first.entries[-1].id
    assert [e.id for e in await person.log(run.id)] == [e.id for e in whole]


# the blocking twin ------------------------------------------------------------------------------
async def test_the_sync_client_approves_edited_and_always(api: Served) -> None:
    edit = {"command": "git push origin feature"}
    declared: queue.Queue[str] = queue.Queue()

    def agent_side() -> tuple[list[str], m.TaskOut]:
        with SyncClient(api.url, api.token("agent")) as client:
            with client.workspace(api.ws).runs.declare(profile="ops") as run:
                ran: list[str] = []

                @sdk.require_approval(run)
                def bash(command: str) -> None:
                    ran.append(command)

                declared.put(run.id)
                bash("git push origin main")  # blocks until a person decides
                return ran, run.call("bash", {"command": "git push origin dev"})

    def person_side() -> dict[str, Any]:
        run_id = declared.get(timeout=10)
        with SyncClient(api.url, api.token("alice")) as client:
            workspace = client.workspace(api.ws)
            for _ in range(500):
                found = [d for d in workspace.decisions() if d.run_id == run_id]
                if found:
                    break
                time.sleep(0.01)
            [decision] = found
            proposal = decision.proposal()
            task = decision.approve(tool_input=edit, allow="run")
            [rule] = workspace.learned_rules()
            return {
                "match": proposal.rule["match"],
                "task": (task.state, task.tool_input, task.approved_input),
                "rule": (rule.scope, rule.run_id, rule.rule["match"]),
                "actions": [e.action for e in workspace.log(run_id)],
                "rule_id": rule.id,
            }

    # the served app runs on this test's loop: the blocking code goes to threads
    both = asyncio.gather(asyncio.to_thread(agent_side), asyncio.to_thread(person_side))
    (ran, by_rule), seen = await asyncio.wait_for(both, 30)
    assert seen["match"] == "git push *"
    assert seen["task"] == ("granted", {"command": "git push origin main"}, edit)
    assert seen["rule"] == ("run", by_rule.run_id, "git push *")
    assert seen["actions"][:4] == ["run_declared", "parked", "approved", "learned_rule"]
    assert ran == ["git push origin feature"]  # the decorated function ran the edited input
    assert (by_rule.state, by_rule.resolved_by) == ("granted", None)  # the learned rule's grant

    def remove() -> list[Any]:
        with SyncClient(api.url, api.token("bob")) as client:
            workspace = client.workspace(api.ws)
            workspace.remove_learned_rule(seen["rule_id"])
            return workspace.learned_rules()

    assert await asyncio.to_thread(remove) == []
