"""Edit before approve (issue 15), in the core, on SQLite and PostgreSQL.

The edited input is evaluated again by the run's rules: a deny still binds (`approval_denied`,
the task stays parked, nothing recorded); an edit a rule would park is approved by the person's
decision. The task keeps both inputs, and the ending's log entry records both.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.config import Settings
from bot.core import Core
from bot.errors import ApprovalError
from bot.service import AllowSpec, CallSpec, RunSpec
from store.sql import SqlStore
from tests.conftest import World

WS = "acme"
RULES = [
    {"tool": "bash", "verdict": "deny", "path": "command", "match": "rm *", "reason": "no rm"},
    {"tool": "bash", "verdict": "ask", "path": "command", "match": "sudo *"},
    {"tool": "bash", "verdict": "allow", "path": "command", "match": "ls*"},
]


# A shell path (issue 20): a `command` of `bash` is judged, and proposed for, command by command.
SHELL = [{"tool": "bash", "path": "command"}]


async def parked(
    w: World, command: str = "git push origin main", key: str = "k1", **spec: Any
) -> str:
    run = await w.core.service.declare_run(
        w.agent, WS, RunSpec(approval_mode="ask", approval_rules=RULES, **spec)
    )
    receipt = await w.core.service.append(
        w.agent, WS, run.id, CallSpec("bash", {"command": command}, key=key)
    )
    assert receipt.task.state == "needs_approval"
    return run.id


async def refused(code: str, coro: Any) -> ApprovalError:
    with pytest.raises(ApprovalError) as caught:
        await coro
    assert caught.value.code == code, caught.value
    return caught.value


async def test_an_edit_a_deny_refuses_is_422_and_the_task_stays_parked(world: World) -> None:
    s = world.core.service
    run_id = await parked(world)
    edit = {"command": "rm -rf /"}
    error = await refused(
        "approval_denied", s.approve(world.alice, WS, run_id, "k1", tool_input=edit)
    )
    assert error.status == 422 and "no rm" in error.detail
    task = await s.get_task(world.alice, WS, run_id, "k1")
    assert (task.state, task.approved_input) == ("needs_approval", None)
    log = [r.entry.action for r in await s.decision_log(world.alice, WS, run_id=run_id)]
    assert log == ["run_declared", "parked"]  # nothing recorded
    # The same person may still approve it as proposed (their refused edit counted for nothing).
    assert (await s.approve(world.alice, WS, run_id, "k1")).state == "granted"


async def test_an_edit_is_approved_by_the_persons_decision_and_both_inputs_kept(
    world: World,
) -> None:
    s = world.core.service
    for edit in ({"command": "sudo make install"}, {"command": "ls -la"}):  # parks / allowed
        run_id = await parked(world)
        task = await s.approve(world.alice, WS, run_id, "k1", tool_input=edit, via="web")
        assert (task.state, task.resolved_by, task.via) == ("granted", "alice", "web")
        assert task.tool_input == {"command": "git push origin main"}
        assert task.approved_input == edit
        stored = await s.get_task(world.agent, WS, run_id, "k1")
        assert (stored.tool_input, stored.approved_input) == (task.tool_input, edit)
        entry = (await s.decision_log(world.alice, WS, run_id=run_id))[-1].entry
        assert (entry.action, entry.actor, entry.via) == ("approved", "alice", "web")
        assert entry.detail == {"tool_input": task.tool_input, "approved_input": edit}
        # The run feed says so too: an agent following it runs the approved input.
        settled = [e for e in await s.events_after(run_id, 0) if e.name == "task_settled"]
        assert settled[-1].data["approved_input"] == edit


async def test_an_unchanged_edit_is_no_edit(world: World) -> None:
    s = world.core.service
    run_id = await parked(world)
    same = {"command": "git push origin main"}
    task = await s.approve(world.alice, WS, run_id, "k1", tool_input=same)
    assert (task.state, task.approved_input) == ("granted", None)
    entry = (await s.decision_log(world.alice, WS, run_id=run_id))[-1].entry
    assert "approved_input" not in entry.detail


async def test_an_edit_the_store_cannot_hold_is_refused(world: World) -> None:
    s = world.core.service
    run_id = await parked(world)
    await refused(
        "invalid_request", s.approve(world.alice, WS, run_id, "k1", tool_input={"c": "a\x00"})
    )
    assert (await s.get_task(world.alice, WS, run_id, "k1")).parked


async def test_with_allow_the_rule_is_learned_from_the_approved_input(world: World) -> None:
    s = world.core.service
    run_id = await parked(world, "git push --force origin main", shell_commands=SHELL)
    edit = {"command": "git fetch origin main"}
    await s.approve(world.alice, WS, run_id, "k1", tool_input=edit, allow=AllowSpec("run"))
    [learned] = await s.learned_rules(world.alice, WS)
    assert learned.rule["match"] == "git fetch *"
    # A rule that matches only the proposed input does not match the approved one.
    other = await parked(world, "git push --force origin main", key="k2", shell_commands=SHELL)
    push = {"tool": "bash", "path": "command", "match": "git push *"}
    await refused(
        "rule_does_not_match",
        s.approve(world.alice, WS, other, "k2", tool_input=edit, allow=AllowSpec("run", push)),
    )
    log = [r.entry for r in await s.decision_log(world.alice, WS, run_id=run_id)]
    assert [e.action for e in log][-2:] == ["approved", "learned_rule"]
    assert log[-1].detail["from"] == {"run_id": run_id, "key": "k1"}


async def test_racing_approves_with_different_edits_end_once(world: World, store: SqlStore) -> None:
    twin = SqlStore(store.url, schema=store.schema)
    other = await Core.build(twin, Settings(), clock=world.clock)
    try:
        members = [world.alice, world.bob]
        for i in range(6):
            members.append((await world.core.admin.add_member(WS, f"m{i}")).principal)
        run_id = await parked(world)
        attempts = [
            (world.core, other)[i % 2].service.approve(
                member, WS, run_id, "k1", tool_input={"command": f"git push origin b{i}"}
            )
            for i, member in enumerate(members)
        ]
        results = await asyncio.gather(*attempts, return_exceptions=True)
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, ApprovalError)]
        assert len(won) == 1 and len(lost) == len(members) - 1
        assert all(e.code == "already_decided" for e in lost)
        stored = await world.core.service.get_task(world.alice, WS, run_id, "k1")
        assert stored.approved_input == won[0].approved_input
        assert stored.resolved_by == won[0].resolved_by
        endings = [
            r.entry
            for r in await world.core.service.decision_log(world.alice, WS, run_id=run_id)
            if r.entry.action == "approved"
        ]
        assert len(endings) == 1 and endings[0].detail["approved_input"] == stored.approved_input
    finally:
        await twin.close()
