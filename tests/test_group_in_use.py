"""`409 group_in_use`: a group (or a member of it) that a running run's requirement needs cannot
be removed when that would leave the requirement fewer eligible approvers than it asks for,
unless forced; on SQLite and PostgreSQL, and through `approvalbot admin group remove`. Two
removals at once, or a removal and a declaration naming the group, are one after the other."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bot import errors
from bot.admin import GroupRemoval
from bot.cli import main
from bot.errors import ApprovalError
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()
LEADS_TWO = [{"tool": "deploy", "approvals": 2, "groups": ["leads"]}]


async def declare(api: Served, requirements: list[dict[str, Any]], **run: Any) -> str:
    body = {"approval_mode": "ask", "approval_requirements": requirements} | run
    status, answer = await api.call("POST", "/runs", "agent", body)
    assert status == 201, answer
    return str(answer["id"])


async def refused(api: Served, name: str, *members: str) -> ApprovalError:
    with pytest.raises(ApprovalError) as caught:
        await api.core.admin.remove_group(api.ws, name, members)
    assert (caught.value.code, caught.value.status) == (errors.GROUP_IN_USE, 409)
    return caught.value


async def test_a_removal_that_leaves_running_runs_short_is_refused_unless_forced(
    api: Served,
) -> None:
    admin = api.core.admin
    await admin.add_group(api.ws, "leads", ["alice", "bob"])
    await admin.add_group(api.ws, "ops", ["alice"])
    first, second = await declare(api, LEADS_TWO), await declare(api, LEADS_TWO)
    await declare(api, [{"tool": "deploy", "approvals": 1, "groups": ["leads"]}])  # not short

    error = await refused(api, "leads", "bob")
    assert error.detail == "leads is required by 2 running runs (needs 2 approvers, would have 1)"
    error = await refused(api, "leads")  # the whole group: nobody left
    assert error.detail == "leads is required by 3 running runs (needs 2 approvers, would have 0)"
    assert (await admin.groups(api.ws))["leads"] == ["alice", "bob"]  # nothing changed

    # A group no running run names, and a stopped run, do not hold a removal up.
    assert (await admin.remove_group(api.ws, "ops", ["alice"])).removed == ["alice"]
    status, _ = await api.call("POST", f"/runs/{first}/stop", "agent", {})
    assert status == 200
    error = await refused(api, "leads", "bob")
    assert error.detail == "leads is required by 1 running run (needs 2 approvers, would have 1)"

    forced = await admin.remove_group(api.ws, "leads", ["bob"], force=True)
    assert forced.removed == ["bob"] and forced.forced is not None
    assert forced.forced.run_ids == (second,)
    assert forced.forced.affected() == f"{forced.forced.detail}: {second}"
    assert (await admin.groups(api.ws))["leads"] == ["alice"]


async def test_only_a_change_that_takes_approvers_away_counts(api: Served) -> None:
    """A member also eligible through another group of the requirement may go; a requirement
    already short keeps being served by whoever is left; self-approval excluded counts."""
    admin = api.core.admin
    await admin.add_member(api.ws, "cleo")
    await admin.add_group(api.ws, "leads", ["alice", "bob"])
    await admin.add_group(api.ws, "sre", ["bob", "cleo"])
    both = [{"tool": "deploy", "approvals": 3, "groups": ["leads", "sre"]}]
    await declare(api, both)
    assert (await admin.remove_group(api.ws, "leads", ["bob"])).removed == ["bob"]  # still in sre
    error = await refused(api, "sre", "cleo")
    assert error.detail == "sre is required by 1 running run (needs 3 approvers, would have 2)"

    await admin.add_group(api.ws, "pair", ["alice", "bob"])
    guarded = [{"tool": "deploy", "approvals": 1, "groups": ["pair"]}]
    await declare(api, guarded, forbid_self_approval=True, on_behalf_of="alice")
    error = await refused(api, "pair", "bob")  # alice may not approve the run acting for her
    assert error.detail == "pair is required by 1 running run (needs 1 approver, would have 0)"


async def test_a_held_run_needs_its_group_too(api: Served) -> None:
    await api.core.admin.add_group(api.ws, "leads", ["alice", "bob"])
    run_id = await declare(api, LEADS_TWO)
    task = {"key": "d1", "tool_name": "deploy", "tool_input": {}, "failure_policy": "hold"}
    assert (await api.call("POST", f"/runs/{run_id}/tasks", "agent", task))[0] == 201
    await api.clock.advance(timedelta(hours=25))  # the park expires: the run is held
    await api.core.scheduler.run_once()
    assert (await api.call("GET", f"/runs/{run_id}", "agent"))[1]["state"] == "held"
    error = await refused(api, "leads", "alice")
    assert error.detail == "leads is required by 1 running run (needs 2 approvers, would have 1)"


def in_process(*args: str, env: dict[str, str]) -> Any:
    return asyncio.to_thread(CliRunner().invoke, main, list(args), env=env)


async def test_the_cli_prints_the_refusal_and_forces(api: Served) -> None:
    url = api.server.store.url
    if not url.startswith("sqlite"):
        pytest.skip("the CLI test reads the SQLite server's file")
    await api.core.admin.add_group(api.ws, "leads", ["alice", "bob"])
    run_id = await declare(api, LEADS_TWO)
    env = {"APPROVALBOT_STORE__URL": url}
    remove = ("admin", "group", "remove", "--workspace", api.ws, "--name", "leads")
    result: Result = await in_process(*remove, "--member", "bob", env=env)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == (
        "error: group_in_use: leads is required by 1 running run (needs 2 approvers, would have 1)"
    )
    result = await in_process(*remove, "--member", "bob", "--force", "--json", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"workspace": api.ws, "group": "leads", "removed": ["bob"]}
    assert result.stderr.strip() == (
        "warning: group_in_use: leads is required by 1 running run (needs 2 approvers, "
        f"would have 1): {run_id} (removed anyway: --force)"
    )


async def test_two_removals_at_once_never_both_spend_the_spare_approver(api: Served) -> None:
    """leads {alice, bob, cleo}, a running run needs 2 of them: removing alice and bob at the
    same moment leaves 2, one of the two refused (PostgreSQL serialises them by the workspace's
    group lock; SQLite's writers are one at a time)."""
    admin = api.core.admin
    await admin.add_member(api.ws, "cleo")
    for round_ in range(20):
        group = f"leads{round_}"
        await admin.add_group(api.ws, group, ["alice", "bob", "cleo"])
        await declare(api, [{"tool": "deploy", "approvals": 2, "groups": [group]}])
        outcomes = await asyncio.gather(
            admin.remove_group(api.ws, group, ["alice"]),
            admin.remove_group(api.ws, group, ["bob"]),
            return_exceptions=True,
        )
        refusals = [o for o in outcomes if isinstance(o, ApprovalError)]
        assert [e.code for e in refusals] == [errors.GROUP_IN_USE], (round_, outcomes)
        assert len((await admin.groups(api.ws))[group]) == 2, round_


async def test_a_run_declared_as_its_group_goes_holds_it_or_finds_it_gone(api: Served) -> None:
    """A declaration naming a group and the group's removal at the same moment: either the run
    comes first and holds the removal up (group_in_use), or it finds the group gone; never a
    running run that names a group no longer there."""
    admin = api.core.admin
    for round_ in range(10):
        group = f"ops{round_}"
        await admin.add_group(api.ws, group, ["alice"])
        needs = [{"tool": "deploy", "approvals": 1, "groups": [group]}]
        body = {"approval_mode": "ask", "approval_requirements": needs}
        declared, removal = await asyncio.gather(
            api.call("POST", "/runs", "agent", body),
            admin.remove_group(api.ws, group),
            return_exceptions=True,
        )
        assert not isinstance(declared, BaseException), declared
        status, answer = declared
        left = await admin.groups(api.ws)
        if status == 201:
            assert isinstance(removal, ApprovalError), (round_, removal)
            assert removal.code == errors.GROUP_IN_USE and group in left
        else:
            assert answer["error"]["code"] == "unknown_group", (round_, answer)
            assert isinstance(removal, GroupRemoval) and group not in left
