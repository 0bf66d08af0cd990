"""Edit before approve, approve always and several approvers from the terminal (issue 15), against
a real service on SQLite and PostgreSQL: `approvalbot asks approve ID --input JSON`,
`--allow run|profile [--rule JSON]`, `approvalbot asks proposal ID`, and the quorum's counts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from adapters.http.policy_models import ProposalOut
from bot.cli import main
from bot.cli.asks import short_id
from bot.config import ProfileConfig, Settings
from tests.http_harness import Served, fixtures

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


def invoke(*args: str, env: dict[str, str]) -> Awaitable[Result]:
    """`approvalbot …` through click's runner in a worker thread (it runs its own loop)."""
    return asyncio.to_thread(CliRunner().invoke, main, list(args), env=env)


def member_env(api: Served, who: str = "alice") -> dict[str, str]:
    return {
        "APPROVALBOT_URL": api.url,
        "APPROVALBOT_TOKEN": api.token(who),
        "APPROVALBOT_WORKSPACE": api.ws,
        "APPROVALBOT_CLI_PROFILE": "/nonexistent/approvalbot-cli.toml",  # no caller's profile
    }


async def declare(api: Served, **run: Any) -> str:
    status, body = await api.call("POST", "/runs", "agent", run or {"profile": "ops"})
    assert status == 201, body
    return str(body["id"])


async def append(api: Served, run_id: str, key: str, tool_input: Any = PUSH) -> dict[str, Any]:
    task = {"key": key, "tool_name": "bash", "tool_input": tool_input}
    status, body = await api.call("POST", f"/runs/{run_id}/tasks", "agent", task)
    assert status == 201, body
    return dict(body)


async def parked(api: Served, key: str = "k1", tool_input: Any = PUSH, **run: Any) -> str:
    run_id = await declare(api, **run)
    assert (await append(api, run_id, key, tool_input))["state"] == "needs_approval"
    return run_id


async def task_of(api: Served, run_id: str, key: str = "k1") -> dict[str, Any]:
    status, body = await api.call("GET", f"/runs/{run_id}/tasks/{key}", "alice")
    assert status == 200, body
    return dict(body)


# edit before approve ----------------------------------------------------------------------------
async def test_approve_an_edited_input_keeps_both_inputs(api: Served) -> None:
    run_id = await parked(api)
    edit = {"command": "git push origin feature"}
    done = await invoke(
        "asks", "approve", short_id(run_id, "k1"), "--input", json.dumps(edit), env=member_env(api)
    )
    assert done.exit_code == 0, done.output
    sid = short_id(run_id, "k1")
    assert done.output.splitlines() == [
        f"approved {sid} as edited (bash git push origin feature)",
        "  proposed: bash git push origin main",
    ]
    task = await task_of(api, run_id)
    assert (task["state"], task["via"], task["resolved_by"]) == ("granted", "cli", "alice")
    assert (task["tool_input"], task["approved_input"]) == (PUSH, edit)


async def test_an_edit_a_rule_denies_is_its_code_and_the_call_stays_parked(api: Served) -> None:
    run_id = await parked(api)
    denied = await invoke(
        "asks", "approve", short_id(run_id, "k1"), "--input", '{"command": "rm -rf /"}',
        env=member_env(api),
    )  # fmt: skip
    assert denied.exit_code == 1
    assert denied.output.startswith("error: approval_denied: "), denied.output
    assert "no rm" in denied.output  # the deny rule's reason
    task = await task_of(api, run_id)
    assert (task["state"], task["approved_input"]) == ("needs_approval", None)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--input", "{command: ls}"], "Invalid value for '--input': not JSON"),
        (["--input", '{"command": "ls"'], "Invalid value for '--input': not JSON"),
        (["--input", "[" * 100_000], "Invalid value for '--input': not JSON"),
        (["--allow", "run", "--rule", "tool=bash"], "Invalid value for '--rule': not JSON"),
        (["--allow", "run", "--rule", '["bash"]'], "a rule is a JSON object"),
        (["--rule", '{"tool": "bash"}'], "--rule needs --allow run or --allow profile"),
        (["--allow", "forever"], "Invalid value for '--allow'"),
    ],
)
async def test_bad_flags_are_usage_errors_before_any_request(
    api: Served, flags: list[str], said: str
) -> None:
    run_id = await parked(api)
    sid = short_id(run_id, "k1")
    # A service that is not there: had the CLI sent anything, it would say it cannot reach it.
    nowhere = member_env(api) | {"APPROVALBOT_URL": "http://127.0.0.1:9"}
    refused = await invoke("asks", "approve", sid, *flags, env=nowhere)
    assert refused.exit_code == 2, refused.output
    assert said in refused.output and "cannot reach" not in refused.output
    # And against the real one, the call is untouched.
    again = await invoke("asks", "approve", sid, *flags, env=member_env(api))
    assert again.exit_code == 2, again.output
    assert (await task_of(api, run_id))["state"] == "needs_approval"


# approve always ---------------------------------------------------------------------------------
async def test_allow_run_grants_the_next_matching_call_without_a_person(api: Served) -> None:
    run_id = await parked(api, approval_mode="ask", shell_commands=SHELL)
    other = await declare(api, approval_mode="ask", shell_commands=SHELL)
    done = await invoke("asks", "approve", short_id(run_id, "k1"), "--allow", "run",
                        env=member_env(api))  # fmt: skip
    assert done.exit_code == 0, done.output
    first, learned = done.output.splitlines()
    assert first == f"approved {short_id(run_id, 'k1')} (bash git push origin main)"
    assert learned.startswith("learned lrn_") and " for this run: " in learned
    assert '"match": "git push *"' in learned
    rule_id = learned.split()[1]

    nobody = await append(api, run_id, "k2", {"command": "git push origin release"})
    assert (nobody["state"], nobody["resolved_by"]) == ("granted", None)
    assert (await append(api, run_id, "k3", {"command": "git pull"}))["state"] == "needs_approval"
    assert (await append(api, other, "k1"))["state"] == "needs_approval"  # only that run

    listed = await invoke("rules", "learned", env=member_env(api, "bob"))
    assert listed.exit_code == 0, listed.output
    [line] = listed.output.splitlines()
    assert line.startswith(rule_id) and f"run {run_id}" in line
    assert f"by alice from {run_id}/k1" in line


async def test_allow_profile_with_a_rule_of_ones_own(api: Served) -> None:
    run_id = await parked(api)
    sid = short_id(run_id, "k1")
    mine = {"tool": "bash", "path": "command", "match": "git *"}
    wrong = await invoke("asks", "approve", sid, "--allow", "profile", "--rule",
                         '{"tool": "deploy"}', env=member_env(api))  # fmt: skip
    assert wrong.exit_code == 1 and wrong.output.startswith("error: rule_does_not_match: "), (
        wrong.output
    )
    assert (await task_of(api, run_id))["state"] == "needs_approval"
    done = await invoke("asks", "approve", sid, "--allow", "profile", "--rule", json.dumps(mine),
                        env=member_env(api))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert " for the profile ops: " in done.output and '"match": "git *"' in done.output
    later = await declare(api)  # a run declared from the profile afterwards
    assert (await append(api, later, "k1", {"command": "git tag v1"}))["state"] == "granted"
    no_profile = await parked(api, approval_mode="ask")
    refused = await invoke("asks", "approve", short_id(no_profile, "k1"), "--allow", "profile",
                           env=member_env(api))  # fmt: skip
    assert refused.exit_code == 1 and refused.output.startswith("error: no_profile: "), (
        refused.output
    )


async def test_allow_with_an_edit_learns_from_the_approved_input(api: Served) -> None:
    run_id = await parked(api, tool_input={"command": "make deploy ENV=prod"})
    done = await invoke(
        "asks", "approve", short_id(run_id, "k1"), "--input", '{"command": "make test"}',
        "--allow", "run", env=member_env(api),
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "as edited (bash make test)" in done.output
    assert '"match": "make test' in done.output  # the proposal of the approved input
    assert (await append(api, run_id, "k2", {"command": "make test"}))["state"] == "granted"
    deploy = await append(api, run_id, "k3", {"command": "make deploy ENV=prod"})
    assert deploy["state"] == "needs_approval"


async def test_the_proposal_command_prints_the_rule_and_past_calls(api: Served) -> None:
    old = await parked(api, "old", {"command": "git push origin dev"})
    run_id = await parked(api)
    sid = short_id(run_id, "k1")
    shown = await invoke("asks", "proposal", sid, env=member_env(api))
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == (
        'rule: {"tool": "bash", "verdict": "allow", "path": "command", "match": "git push *"}'
    )
    assert lines[1] == "it would have allowed 1 past call(s) (last 30 days):"
    assert "needs_approval" in lines[2] and "bash: git push origin dev" in lines[2]
    assert lines[2].endswith(f"{old}/old")
    assert lines[3].startswith(f"learn it: approvalbot asks approve {sid} --allow run")
    machine = await invoke("asks", "proposal", sid, "--json", env=member_env(api))
    _, body = await api.call("GET", f"/runs/{run_id}/tasks/k1/proposal", "alice")
    assert ProposalOut.model_validate(json.loads(machine.output)) == ProposalOut.model_validate(
        body
    )
    assert (await task_of(api, run_id))["state"] == "needs_approval"  # looking decides nothing

    fresh = await parked(api, "k1", {"command": "kubectl apply"}, approval_mode="ask")
    none = await invoke("asks", "proposal", short_id(fresh, "k1"), env=member_env(api))
    assert "it would have allowed none of the past calls" in none.output

    status, _ = await api.call(
        "POST", f"/runs/{run_id}/tasks", "agent",
        {"key": "q", "tool_name": "ask", "tool_input": {"prompt": "Region?"}},
    )  # fmt: skip
    assert status == 201
    question = await invoke("asks", "proposal", short_id(run_id, "q"), env=member_env(api))
    assert question.exit_code == 2 and "is a question" in question.output


# several approvers ------------------------------------------------------------------------------
async def test_a_counted_approval_says_how_many_more_it_waits_for(api: Served) -> None:
    run_id = await parked(
        api, approval_mode="ask", approval_requirements=[{"tool": "bash", "approvals": 2}]
    )
    sid = short_id(run_id, "k1")
    before = await invoke("asks", env=member_env(api) | {"COLUMNS": "120"})
    [row] = [line for line in before.output.splitlines() if line.startswith(sid)]
    assert "approval 0/2" in row
    first = await invoke("asks", "approve", sid, env=member_env(api, "alice"))
    assert first.exit_code == 0, first.output
    assert first.output.startswith("1 of 2 approvals: waiting for one more"), first.output
    between = await invoke("asks", env=member_env(api, "bob") | {"COLUMNS": "120"})
    [row] = [line for line in between.output.splitlines() if line.startswith(sid)]
    assert "approval 1/2" in row
    twice = await invoke("asks", "approve", sid, env=member_env(api, "alice"))
    assert twice.exit_code == 1 and twice.output.startswith("error: already_reviewed: "), (
        twice.output
    )
    last = await invoke("asks", "approve", sid, env=member_env(api, "bob"))
    assert last.output == f"approved {sid} (bash git push origin main)\n", last.output
    task = await task_of(api, run_id)
    assert (task["state"], task["resolved_by"]) == ("granted", "bob")
    assert [g["by"] for g in task["approvals"]["given"]] == ["alice", "bob"]


async def test_quorum_refusals_are_their_codes(api: Served) -> None:
    await api.core.admin.add_group(api.ws, "leads", ["bob"])
    run_id = await parked(
        api,
        approval_mode="ask",
        approval_requirements=[{"tool": "bash", "approvals": 1, "groups": ["leads"]}],
        forbid_self_approval=True,
        on_behalf_of="bob",
    )
    sid = short_id(run_id, "k1")
    outsider = await invoke("asks", "approve", sid, env=member_env(api, "alice"))
    assert outsider.exit_code == 1, outsider.output
    assert outsider.output.startswith("error: not_an_eligible_approver: ")
    itself = await invoke("asks", "approve", sid, env=member_env(api, "bob"))
    assert itself.exit_code == 1, itself.output
    assert itself.output.startswith("error: self_approval_forbidden: ")
    task = await task_of(api, run_id)
    assert (task["state"], task["approvals"]["given"]) == ("needs_approval", [])


async def test_an_edited_approval_under_a_quorum_counts_first_on_the_edit(api: Served) -> None:
    run_id = await parked(
        api, approval_mode="ask", approval_requirements=[{"tool": "bash", "approvals": 2}]
    )
    sid = short_id(run_id, "k1")
    edit = '{"command": "git push origin feature"}'
    first = await invoke("asks", "approve", sid, "--input", edit, env=member_env(api, "alice"))
    assert first.exit_code == 0, first.output
    assert first.output == (
        f"1 of 2 approvals: waiting for one more ({sid} as edited: bash git push origin feature)\n"
    )
    second = await invoke("asks", "approve", sid, env=member_env(api, "bob"))
    assert second.exit_code == 0, second.output
    assert second.output.startswith(f"approved {sid} as edited (bash git push origin feature)")
    task = await task_of(api, run_id)
    assert (task["state"], task["resolved_by"], task["via"]) == ("granted", "bob", "cli")
    assert (task["tool_input"], task["approved_input"]) == (PUSH, json.loads(edit))
    assert [g["by"] for g in task["approvals"]["given"]] == ["alice", "bob"]
