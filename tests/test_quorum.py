"""Several approvers (issue 15, section 3) over real HTTP, on SQLite and PostgreSQL: the count,
groups, self-approval, every matching requirement, a run over its profile's, an edit restarting
the count, a concurrent deny among many approvals, and `approvalbot admin group`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pydantic import ValidationError

from bot.admin import Admin
from bot.cli import main
from bot.clock import SystemClock
from bot.config import ConfigError, ProfileConfig, Settings, load_settings
from store.migrate import upgrade
from store.sql import SqlStore
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
GUARDED = ProfileConfig(
    approval_mode="ask",
    approval_requirements=[{"tool": "deploy", "approvals": 2}],
    forbid_self_approval=True,
)
server, api = fixtures(Settings(profiles={"guarded": GUARDED}))
PROD = {"env": "prod", "service": "web"}


async def team(api: Served, *names: str, group: str | None = None) -> None:
    """More members of the test's workspace (alice and bob are there already); with `group`,
    the named ones (new or not) are put in it."""
    for name in names:
        if name not in api.tokens:
            api.tokens[name] = (await api.core.admin.add_member(api.ws, name)).token
    if group is not None:
        await api.core.admin.add_group(api.ws, group, names)


async def declare(api: Served, **run: Any) -> str:
    status, body = await api.call("POST", "/runs", "agent", {"approval_mode": "ask"} | run)
    assert status == 201, body
    return str(body["id"])


async def park(
    api: Served, run_id: str, key: str, tool: str = "deploy", tool_input: Any = PROD
) -> dict[str, Any]:
    task = {"key": key, "tool_name": tool, "tool_input": tool_input}
    status, body = await api.call("POST", f"/runs/{run_id}/tasks", "agent", task)
    assert (status, body["state"]) == (201, "needs_approval"), body
    return dict(body)


async def review(
    api: Served, who: str, run_id: str, key: str, verb: str = "approve", body: Any = None
) -> tuple[int, Any]:
    return await api.call("POST", f"/runs/{run_id}/tasks/{key}/{verb}", who, body or {})


def given(task: dict[str, Any]) -> list[str]:
    return [g["by"] for g in task["approvals"]["given"]]


async def log_actions(api: Served, run_id: str) -> list[tuple[str, str]]:
    status, body = await api.call("GET", f"/log?run_id={run_id}", "alice")
    assert status == 200, body
    return [(e["action"], e["actor"]) for e in body["entries"] if e["task_key"]]


async def test_two_approvals_end_it_the_first_only_counts(api: Served) -> None:
    await team(api, "cleo")
    run_id = await declare(api, approval_requirements=[{"tool": "deploy", "approvals": 2}])
    status, run = await api.call("GET", f"/runs/{run_id}", "agent")
    assert run["approval_requirements"] == [{"tool": "deploy", "approvals": 2}]
    assert "forbid_self_approval" not in run and "on_behalf_of" not in run
    parked = await park(api, run_id, "d1")
    assert parked["approvals"] == {"required": 2, "given": []}

    status, first = await review(api, "alice", run_id, "d1")
    assert (status, first["state"], first["resolved_by"]) == (200, "needs_approval", None)
    assert first["approvals"]["required"] == 2 and given(first) == ["alice"]
    assert first["approvals"]["given"][0]["at"]  # when alice approved
    status, again = await review(api, "alice", run_id, "d1")
    assert (status, again["error"]["code"]) == (409, "already_reviewed")
    status, read = await api.call("GET", f"/runs/{run_id}/tasks/d1", "agent")
    assert (read["state"], given(read)) == ("needs_approval", ["alice"])

    status, second = await review(api, "bob", run_id, "d1")
    assert (status, second["state"], second["resolved_by"]) == (200, "granted", "bob")
    assert given(second) == ["alice", "bob"]
    status, late = await review(api, "cleo", run_id, "d1")
    assert (status, late["error"]["code"]) == (409, "already_decided")
    assert await log_actions(api, run_id) == [
        ("parked", "agent"), ("reviewed", "alice"), ("approved", "bob"),
    ]  # fmt: skip

    # A call no requirement matches needs one person, and shows no count.
    other = await park(api, run_id, "b1", "bash", {"command": "make"})
    assert "approvals" not in other
    status, done = await review(api, "alice", run_id, "b1")
    assert (status, done["state"], "approvals" in done) == (200, "granted", False)


async def test_only_the_named_groups_count(api: Served) -> None:
    await team(api, "cleo", "dave", group="leads")
    requirement = {"tool": "deploy", "approvals": 2, "groups": ["leads"]}
    run_id = await declare(api, approval_requirements=[requirement])
    await park(api, run_id, "d1")
    for verb in ("approve", "deny"):  # the groups name who reviews such a call, either way
        status, refused = await review(api, "alice", run_id, "d1", verb)
        assert (status, refused["error"]["code"]) == (403, "not_an_eligible_approver")
        assert "leads" in refused["error"]["detail"]
    status, read = await api.call("GET", f"/runs/{run_id}/tasks/d1", "agent")
    assert (read["state"], read["approvals"]["given"]) == ("needs_approval", [])  # not counted
    assert await api.core.service.may_still_approve(api.ws, run_id, "d1") == ["cleo", "dave"]
    status, first = await review(api, "cleo", run_id, "d1")
    assert (status, first["state"], given(first)) == (200, "needs_approval", ["cleo"])
    assert await api.core.service.may_still_approve(api.ws, run_id, "d1") == ["dave"]
    status, done = await review(api, "dave", run_id, "d1")
    assert (status, done["state"], done["resolved_by"]) == (200, "granted", "dave")
    assert await api.core.service.may_still_approve(api.ws, run_id, "d1") == []


async def test_one_deny_ends_it_at_once(api: Served) -> None:
    await team(api, "cleo")
    run_id = await declare(api, approval_requirements=[{"tool": "deploy", "approvals": 3}])
    await park(api, run_id, "d1")
    assert (await review(api, "alice", run_id, "d1"))[0] == 200
    status, denied = await review(api, "bob", run_id, "d1", "deny", {"reason": "not today"})
    assert (status, denied["state"], denied["resolved_by"]) == (200, "failed", "bob")
    assert denied["error"] == {"code": "approval_denied", "detail": "not today"}
    assert given(denied) == ["alice"]
    status, late = await review(api, "cleo", run_id, "d1")
    assert (status, late["error"]["code"]) == (409, "already_decided")


async def test_many_approvers_and_a_denier_at_once_end_it_exactly_once(api: Served) -> None:
    approvers = [f"p{i}" for i in range(6)]
    await team(api, *approvers, "denier")
    run_id = await declare(api, approval_requirements=[{"tool": "deploy", "approvals": 3}])
    for round_ in range(4):
        key = f"race{round_}"
        await park(api, run_id, key)
        verdicts = [(who, "approve") for who in approvers] + [("denier", "deny")]
        if round_ % 2:
            verdicts.reverse()  # the denier first in line, as often as last
        answers = await asyncio.gather(*(review(api, w, run_id, key, v) for w, v in verdicts))
        ended = [b for s, b in answers if s == 200 and b["state"] != "needs_approval"]
        counted = [b for s, b in answers if s == 200 and b["state"] == "needs_approval"]
        late = [b["error"]["code"] for s, b in answers if s == 409]
        assert len(ended) == 1, answers
        assert len(ended) + len(counted) + len(late) == len(verdicts)
        assert set(late) <= {"already_decided"}
        status, final = await api.call("GET", f"/runs/{run_id}/tasks/{key}", "agent")
        assert status == 200 and final["state"] == ended[0]["state"]
        assert final["resolved_by"] == ended[0]["resolved_by"]
        if final["state"] == "granted":
            assert len(given(final)) == 3 and final["resolved_by"] == given(final)[-1]
        else:
            assert final["resolved_by"] == "denier" and len(given(final)) <= 2
        assert len(counted) == len(given(final)) - (final["state"] == "granted")
        endings = [a for a, _ in await log_actions(api, run_id) if a in ("approved", "denied")]
        assert len(endings) == round_ + 1  # one ending per decision, never two


async def test_two_racing_for_the_last_slot_and_one_member_twice_at_once(api: Served) -> None:
    """Each review reads and writes the count under the run's lock (PostgreSQL runs READ
    COMMITTED): two people racing for the last approval end it once, and the log names only
    the one who counted; one person pressing twice at once is counted once."""
    await team(api, "cleo")
    run_id = await declare(api, approval_requirements=[{"tool": "deploy", "approvals": 2}])
    for round_ in range(4):
        key = f"last{round_}"
        await park(api, run_id, key)
        assert (await review(api, "alice", run_id, key))[0] == 200
        racers = ["bob", "cleo"] if round_ % 2 else ["cleo", "bob"]
        answers = await asyncio.gather(*(review(api, who, run_id, key) for who in racers))
        won = [(who, b) for who, (s, b) in zip(racers, answers, strict=True) if s == 200]
        lost = [b["error"]["code"] for s, b in answers if s != 200]
        assert len(won) == 1 and lost == ["already_decided"], answers
        winner, ended = won[0]
        assert (ended["state"], ended["resolved_by"]) == ("granted", winner)
        assert given(ended) == ["alice", winner]
        actions = [(a, who) for a, who in await log_actions(api, run_id)]
        mine = actions[-3:]
        assert mine == [("parked", "agent"), ("reviewed", "alice"), ("approved", winner)]

        twice = f"twice{round_}"
        await park(api, run_id, twice)
        answers = await asyncio.gather(*(review(api, "alice", run_id, twice) for _ in range(3)))
        assert sorted(s for s, _ in answers) == [200, 409, 409], answers
        assert {b["error"]["code"] for s, b in answers if s == 409} == {"already_reviewed"}
        status, read = await api.call("GET", f"/runs/{run_id}/tasks/{twice}", "agent")
        assert (read["state"], given(read)) == ("needs_approval", ["alice"])
        assert (await log_actions(api, run_id))[-1] == ("reviewed", "alice")
        status, done = await review(api, "bob", run_id, twice)
        assert (status, done["state"], given(done)) == (200, "granted", ["alice", "bob"])


async def test_the_person_a_run_acts_for_cannot_approve_its_calls(api: Served) -> None:
    run_id = await declare(api, on_behalf_of="alice", forbid_self_approval=True)
    status, run = await api.call("GET", f"/runs/{run_id}", "agent")
    assert (run["on_behalf_of"], run["forbid_self_approval"]) == ("alice", True)
    await park(api, run_id, "b1", "bash", {"command": "make deploy"})
    status, refused = await review(api, "alice", run_id, "b1")
    assert (status, refused["error"]["code"]) == (403, "self_approval_forbidden")
    status, done = await review(api, "bob", run_id, "b1")
    assert (status, done["resolved_by"]) == (200, "bob")
    await park(api, run_id, "b2", "bash", {"command": "make deploy"})
    status, denied = await review(api, "alice", run_id, "b2", "deny")  # refusing is hers
    assert (status, denied["state"]) == (200, "failed")

    # Named but not forbidden: she may approve.
    free = await declare(api, on_behalf_of="alice")
    await park(api, free, "b1", "bash", {"command": "make deploy"})
    assert (await review(api, "alice", free, "b1"))[1]["state"] == "granted"


async def test_every_matching_requirement_must_be_met(api: Served) -> None:
    await team(api, "cleo", group="leads")
    run_id = await declare(
        api,
        approval_requirements=[
            {"tool": "deploy", "approvals": 1, "groups": ["leads"]},
            {"tool": "deploy", "path": "env", "match": "prod", "approvals": 2},
        ],
    )
    parked = await park(api, run_id, "prod")
    assert parked["approvals"]["required"] == 2
    assert (await review(api, "alice", run_id, "prod"))[1]["state"] == "needs_approval"
    status, two = await review(api, "bob", run_id, "prod")  # two approvals, but no lead yet
    assert (status, two["state"], given(two)) == (200, "needs_approval", ["alice", "bob"])
    status, done = await review(api, "cleo", run_id, "prod")
    assert (status, done["state"], done["resolved_by"]) == (200, "granted", "cleo")

    # Only the leads requirement matches a dev deploy: one lead ends it, nobody else counts.
    await park(api, run_id, "dev", tool_input={"env": "dev"})
    assert (await review(api, "alice", run_id, "dev"))[0] == 403
    status, done = await review(api, "cleo", run_id, "dev")
    assert (status, done["state"], done["approvals"]["required"]) == (200, "granted", 1)


async def test_a_run_may_only_tighten_its_profiles(api: Served) -> None:
    inherited = await declare(api, profile="guarded")
    status, run = await api.call("GET", f"/runs/{inherited}", "agent")
    assert run["approval_requirements"] == [{"tool": "deploy", "approvals": 2}]
    assert run["forbid_self_approval"] is True

    tighter = {
        "profile": "guarded",
        "forbid_self_approval": True,
        "approval_requirements": [
            {"tool": "deploy", "approvals": 3},
            {"tool": "bash", "path": "command", "match": "git push *", "approvals": 2},
        ],
    }
    status, run = await api.call("POST", "/runs", "agent", tighter)
    assert status == 201, run
    assert run["approval_requirements"] == tighter["approval_requirements"]
    parked = await park(api, run["id"], "d1")
    assert parked["approvals"]["required"] == 3

    # Two of the run's own for one selector: the larger counts; only the profile's binds.
    both = [{"tool": "deploy", "approvals": 4}, {"tool": "deploy", "approvals": 3}]
    status, run = await api.call("POST", "/runs", "agent", {"approval_requirements": both})
    assert (status, run["approval_requirements"]) == (201, both[:1]), run

    for looser, where in (
        ({"approval_requirements": [{"tool": "deploy", "approvals": 1}]}, "approvals"),
        ({"forbid_self_approval": False}, "forbid_self_approval"),
    ):
        status, body = await api.call("POST", "/runs", "agent", {"profile": "guarded"} | looser)
        assert (status, body["error"]["code"]) == (422, "approval_widening"), body
        assert where in body["error"]["detail"]


async def test_unknown_groups_members_and_keys_are_refused_at_declaration(api: Served) -> None:
    for run, code, needle in (
        (
            {"approval_requirements": [{"tool": "deploy", "approvals": 2, "groups": ["nope"]}]},
            "unknown_group",
            "nope",
        ),
        ({"on_behalf_of": "zed"}, "unknown_member", "zed"),
        (
            {"approval_requirements": [{"tool": "deploy", "approvals": 2, "mtach": "x"}]},
            "invalid_rules",
            "approval_requirements[0].mtach: unknown key",
        ),
        (
            {"approval_requirements": [{"tool": "deploy", "approvals": 0}]},
            "invalid_rules",
            "approval_requirements[0].approvals",
        ),
        (
            {"approval_requirements": [{"approvals": 2, "match": "x"}]},
            "invalid_rules",
            "approval_requirements[0].tool: required",
        ),
    ):
        status, body = await api.call("POST", "/runs", "agent", run)
        assert (status, body["error"]["code"]) == (422, code), body
        assert needle in body["error"]["detail"], body
    with pytest.raises(ValidationError, match="approval_requirements"):
        ProfileConfig(approval_requirements=[{"tool": "deploy"}])


async def test_profiles_declare_the_same_keys_in_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "approvalbot.toml"
    path.write_text(
        "[profiles.ops]\n"
        'approval_requirements = [{ tool = "deploy", approvals = 2, groups = ["leads"] }]\n'
        "forbid_self_approval = true\n"
    )
    ops = load_settings(path).profiles["ops"]
    assert ops.approval_requirements == [{"tool": "deploy", "approvals": 2, "groups": ["leads"]}]
    assert ops.forbid_self_approval is True
    path.write_text('[profiles.ops]\napproval_requirements = [{ tool = "deploy" }]\n')
    with pytest.raises(ConfigError, match=r"profiles\.ops\.approval_requirements: .*approvals"):
        load_settings(path)


async def test_an_edit_restarts_the_count_on_the_edited_input(api: Served) -> None:
    await team(api, "cleo")
    run_id = await declare(api, approval_requirements=[{"tool": "deploy", "approvals": 2}])
    await park(api, run_id, "d1")
    assert (await review(api, "alice", run_id, "d1"))[0] == 200
    edit = {"env": "prod", "service": "web", "canary": True}
    status, edited = await review(api, "bob", run_id, "d1", body={"tool_input": edit})
    assert (status, edited["state"], given(edited)) == (200, "needs_approval", ["bob"])
    # The next approver sees what they are approving.
    assert (edited["tool_input"], edited["approved_input"]) == (PROD, edit)
    status, again = await review(api, "bob", run_id, "d1")
    assert (status, again["error"]["code"]) == (409, "already_reviewed")
    status, done = await review(api, "alice", run_id, "d1")  # alice approves the edited call
    assert (status, done["state"], done["resolved_by"]) == (200, "granted", "alice")
    assert (done["tool_input"], done["approved_input"]) == (PROD, edit)
    assert given(done) == ["bob", "alice"]
    status, log = await api.call("GET", f"/log?run_id={run_id}", "alice")
    entries = [e for e in log["entries"] if e["task_key"] == "d1"]
    assert [(e["action"], e["actor"]) for e in entries] == [
        ("parked", "agent"), ("reviewed", "alice"), ("reviewed", "bob"), ("approved", "alice"),
    ]  # fmt: skip
    assert entries[2]["detail"]["count_restarted"] is True
    assert entries[3]["detail"] == {"tool_input": PROD, "approved_input": edit}


async def test_sending_the_proposed_input_back_undoes_the_edit(api: Served) -> None:
    """An approver who sends the call's own input while the count is for someone's edit
    approves the call as proposed: their approval never counts toward the edit."""
    await team(api, "cleo")
    run_id = await declare(api, approval_requirements=[{"tool": "deploy", "approvals": 2}])
    await park(api, run_id, "d1")
    edit = {"env": "prod", "service": "web", "canary": True}
    status, edited = await review(api, "bob", run_id, "d1", body={"tool_input": edit})
    assert (status, edited["approved_input"]) == (200, edit)
    status, undone = await review(api, "alice", run_id, "d1", body={"tool_input": PROD})
    assert (status, undone["state"], given(undone)) == (200, "needs_approval", ["alice"])
    assert undone["approved_input"] is None
    status, done = await review(api, "cleo", run_id, "d1")
    assert (status, done["state"], done["resolved_by"]) == (200, "granted", "cleo")
    assert (done["approved_input"], given(done)) == (None, ["alice", "cleo"])


async def test_an_edit_never_escapes_the_quorum_of_the_call_as_proposed(api: Served) -> None:
    """One person rewording a call so that no requirement matches it any more (a leading
    space runs the same command) still needs the others' approvals."""
    await team(api, "cleo")
    requirement = {"tool": "bash", "path": "command", "match": "git push *", "approvals": 2}
    run_id = await declare(api, approval_requirements=[requirement])
    await park(api, run_id, "b1", "bash", {"command": "git push origin main"})
    reworded = {"command": " git push origin main"}
    status, edited = await review(api, "alice", run_id, "b1", body={"tool_input": reworded})
    assert (status, edited["state"], given(edited)) == (200, "needs_approval", ["alice"])
    assert await api.core.service.may_still_approve(api.ws, run_id, "b1") == ["bob", "cleo"]
    status, done = await review(api, "bob", run_id, "b1")
    assert (status, done["state"], done["approved_input"]) == (200, "granted", reworded)
    assert given(done) == ["alice", "bob"]


async def test_who_may_still_approve_and_a_retry_counts_anew(api: Served) -> None:
    """The chat surfaces' "who may still approve" leaves out who approved and the person the
    run acts for; a decision asked again after it expired needs the whole count again."""
    await team(api, "cleo")
    run_id = await declare(
        api,
        approval_requirements=[{"tool": "deploy", "approvals": 2}],
        on_behalf_of="alice",
        forbid_self_approval=True,
    )
    task = {"key": "d1", "tool_name": "deploy", "tool_input": PROD, "failure_policy": "hold"}
    status, body = await api.call("POST", f"/runs/{run_id}/tasks", "agent", task)
    assert status == 201, body
    service = api.core.service
    assert await service.may_still_approve(api.ws, run_id, "d1") == ["bob", "cleo"]
    assert (await review(api, "bob", run_id, "d1"))[1]["state"] == "needs_approval"
    assert await service.may_still_approve(api.ws, run_id, "d1") == ["cleo"]
    await api.clock.advance(timedelta(hours=25))
    await api.core.scheduler.run_once()
    status, run = await api.call("GET", f"/runs/{run_id}", "agent")
    assert (run["state"], run["held_task_key"]) == ("held", "d1")
    status, run = await api.call("POST", f"/runs/{run_id}/retry", "bob")
    assert (status, run["state"]) == (200, "running"), run
    status, asks = await api.call("GET", f"/asks?run_id={run_id}", "bob")
    [again] = asks["asks"]
    assert again["approvals"] == {"required": 2, "given": []}
    assert await service.may_still_approve(api.ws, run_id, again["key"]) == ["bob", "cleo"]


def in_process(*args: str, env: dict[str, str]) -> Awaitable[Result]:
    return asyncio.to_thread(CliRunner().invoke, main, list(args), env=env)


async def test_admin_group_commands(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/groups.db"
    env = {"APPROVALBOT_STORE__URL": url}
    assert (await in_process("admin", "workspace", "create", "acme", env=env)).exit_code == 0
    for name in ("alice", "bob"):
        args = ("admin", "member", "add", "--workspace", "acme", "--name", name)
        assert (await in_process(*args, env=env)).exit_code == 0
    group = ("admin", "group")
    added = await in_process(*group, "add", "--workspace", "acme", "--name", "leads",
                             "--member", "alice", "--member", "bob", "--json", env=env)  # fmt: skip
    assert added.exit_code == 0, added.output
    assert json.loads(added.output) == {
        "workspace": "acme", "group": "leads", "created": True, "added": ["alice", "bob"],
    }  # fmt: skip
    unknown = await in_process(*group, "add", "--workspace", "acme", "--name", "leads",
                               "--member", "zed", env=env)  # fmt: skip
    assert (unknown.exit_code, "not_found" in unknown.output) == (1, True), unknown.output
    removed = await in_process(*group, "remove", "--workspace", "acme", "--name", "leads",
                               "--member", "bob", env=env)  # fmt: skip
    assert (removed.exit_code, "removed bob" in removed.output) == (0, True), removed.output
    listed = await in_process(*group, "list", "--workspace", "acme", "--json", env=env)
    assert json.loads(listed.output) == {"workspace": "acme", "groups": {"leads": ["alice"]}}

    store = SqlStore(url)
    try:
        await upgrade(store.engine)
        assert await Admin(store, SystemClock()).groups("acme") == {"leads": ["alice"]}
    finally:
        await store.close()
    gone = await in_process(*group, "remove", "--workspace", "acme", "--name", "leads", env=env)
    assert gone.exit_code == 0, gone.output
    listed = await in_process(*group, "list", "--workspace", "acme", env=env)
    assert listed.output.strip() == "(no groups)"


async def test_the_proposal_under_a_quorum_is_for_the_edit_being_counted(api: Served) -> None:
    """A plain Approve after an edit approves the edit, so "Approve & allow like this" proposes
    the rule of the edit — the rule that would be learned — not of the call as proposed."""
    run_id = await declare(
        api,
        approval_requirements=[{"tool": "bash", "approvals": 2}],
        shell_commands=[{"tool": "bash", "path": "command"}],  # a command's first words proposed
    )
    await park(api, run_id, "b1", tool="bash", tool_input={"command": "git push origin main"})
    before = await api.call("GET", f"/runs/{run_id}/tasks/b1/proposal", "alice")
    assert before[1]["rule"]["match"] == "git push *", before
    edit = {"command": "git fetch origin main"}
    status, body = await review(api, "bob", run_id, "b1", body={"tool_input": edit})
    assert (status, body["state"]) == (200, "needs_approval"), body
    status, proposal = await api.call("GET", f"/runs/{run_id}/tasks/b1/proposal", "alice")
    assert (status, proposal["rule"]["match"]) == (200, "git fetch *"), proposal


async def test_the_member_who_declared_a_run_cannot_approve_its_calls(api: Served) -> None:
    """Issue 21 (6): the declaring member is a requester too, with or without on_behalf_of."""
    for extra in ({}, {"on_behalf_of": "bob"}):
        body = {"approval_mode": "ask", "forbid_self_approval": True} | extra
        status, run = await api.call("POST", "/runs", "alice", body)
        assert status == 201 and run["declared_by"] == "alice", run
        task = {"key": "d1", "tool_name": "bash", "tool_input": {"command": "make deploy"}}
        status, parked = await api.call("POST", f"/runs/{run['id']}/tasks", "agent", task)
        assert (status, parked["state"]) == (201, "needs_approval"), parked
        status, refused = await review(api, "alice", run["id"], "d1")
        assert (status, refused["error"]["code"]) == (403, "self_approval_forbidden")
        assert "declared by alice" in refused["error"]["detail"]
        approver = "zed" if extra else "bob"
        await team(api, "zed")
        status, done = await review(api, approver, run["id"], "d1")
        assert (status, done.get("resolved_by")) == (200, approver), done


async def test_a_requirement_is_never_skipped_by_a_learned_rule_or_an_author_row(
    api: Served,
) -> None:
    """Issue 21 (5): a learned rule made at the final approval does not grant later calls the
    requirement matches, and a member's author row under a requirement parks for its count."""
    run_id = await declare(api, approval_requirements=[{"tool": "deploy", "approvals": 2}])
    await park(api, run_id, "d1")
    await review(api, "alice", run_id, "d1")
    status, done = await review(api, "bob", run_id, "d1", body={"allow": {"scope": "run"}})
    assert (status, done["state"]) == (200, "granted"), done
    status, learned = await api.call("GET", "/rules/learned", "alice")
    assert status == 200 and any(r["rule"]["tool"] == "deploy" for r in learned["rules"])
    again = await park(api, run_id, "d2")  # the learned rule does not stand in for two people
    assert again["approvals"] == {"required": 2, "given": []}
    other = {"key": "b1", "tool_name": "bash", "tool_input": {"command": "make"}}
    await api.call("POST", f"/runs/{run_id}/tasks", "agent", other)

    author = {"key": "a1", "tool_name": "deploy", "tool_input": PROD, "origin": "author"}
    status, row = await api.call("POST", f"/runs/{run_id}/tasks", "alice", author)
    assert (status, row["state"]) == (201, "needs_approval"), row
    assert given(row) == ["alice"]  # the appending member is its first approval
    status, again = await review(api, "alice", run_id, "a1")
    assert (status, again["error"]["code"]) == (409, "already_reviewed")
    status, done = await review(api, "bob", run_id, "a1")
    assert (status, done["state"], done["resolved_by"]) == (200, "granted", "bob")
    # Under forbid_self_approval the appending member is not counted.
    strict = await declare(
        api, approval_requirements=[{"tool": "deploy", "approvals": 2}], on_behalf_of="alice",
        forbid_self_approval=True,
    )  # fmt: skip
    status, row = await api.call("POST", f"/runs/{strict}/tasks", "alice", author)
    assert (status, row["state"], given(row)) == (201, "needs_approval", []), row
    plain = {"key": "a2", "tool_name": "bash", "tool_input": {"command": "ls"}, "origin": "author"}
    status, row = await api.call("POST", f"/runs/{run_id}/tasks", "alice", plain)
    assert (status, row["state"]) == (201, "granted"), row  # no requirement: pre-approved
