"""Approve always (issue 15): rules learned from decisions, in the core, on SQLite and PostgreSQL.

A learned rule goes after the declared denies and before the declared asks, so it allows what
its decision allowed and never what a deny refuses; scope `run` changes that run, scope `profile`
the runs declared from the profile afterwards (and the run it came from), never the others.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from bot.config import ProfileConfig, Settings
from bot.core import Core
from bot.errors import ApprovalError
from bot.learning import propose
from bot.service import AllowSpec, CallSpec, RunSpec
from store.sql import SqlStore
from tests.conftest import World, make_world

WS = "acme"
ASK_BASH = {"tool": "bash", "verdict": "ask"}
DENY_FORCE = {
    "tool": "bash",
    "verdict": "deny",
    "path": "command",
    "match": "*--force*",
    "reason": "never force-push",
}
OPS = ProfileConfig(approval_mode="ask", approval_rules=[DENY_FORCE, ASK_BASH])


@pytest.fixture
async def ops(store: SqlStore) -> World:
    """A world whose configuration has the profile `ops` (a deny before an ask)."""
    return await make_world(store, Settings(profiles={"ops": OPS}))


async def declare(w: World, **spec: Any) -> str:
    run = await w.core.service.declare_run(w.agent, WS, RunSpec(**spec))
    return run.id


async def call(w: World, run_id: str, key: str, tool_input: Any, tool: str = "bash") -> str:
    receipt = await w.core.service.append(w.agent, WS, run_id, CallSpec(tool, tool_input, key=key))
    return receipt.task.state


def bash(command: str) -> dict[str, str]:
    return {"command": command}


async def refused(code: str, coro: Any) -> ApprovalError:
    with pytest.raises(ApprovalError) as caught:
        await coro
    assert caught.value.code == code, caught.value
    return caught.value


# the proposal ----------------------------------------------------------------------------------
def test_the_proposal_keeps_a_commands_first_two_words_or_a_files_folder() -> None:
    assert propose("bash", bash("git push origin main")) == {
        "tool": "bash",
        "verdict": "allow",
        "path": "command",
        "match": "git push *",
    }
    assert propose("write", {"file_path": "src/app/x.py"})["match"] == "src/app/*"
    assert propose("edit", {"path": "/etc/hosts"})["match"] == "/etc/*"
    assert propose("bash", bash("ls"))["match"] == "ls"  # one word: that command only
    assert propose("bash", {"command": ["git", "push", "-u", "x"]})["match"] == "git push *"
    assert propose("deploy", {"env": "prod"}) == {"tool": "deploy", "verdict": "allow"}
    assert propose("bash", bash("make x"), "author")["origin"] == "author"


async def test_proposal_and_its_honest_bounded_replay(world: World) -> None:
    s = world.core.service
    run_id = await declare(world, approval_mode="ask", approval_rules=[DENY_FORCE])
    # The history: calls like it (one a person denied, one a deny rule refused), others not.
    assert await call(world, run_id, "old1", bash("git push origin dev")) == "needs_approval"
    await s.deny(world.alice, WS, run_id, "old1")
    assert await call(world, run_id, "old2", bash("git push --force")) == "failed"
    assert await call(world, run_id, "old3", bash("git pull")) == "needs_approval"
    assert await call(world, run_id, "old4", bash("git push x"), tool="write") == "needs_approval"
    await world.clock.advance(timedelta(days=31))
    for n in range(55):
        await call(world, run_id, f"p{n}", bash(f"git push origin b{n}"))
    await world.clock.advance(timedelta(days=29))
    assert await call(world, run_id, "now", bash("git push origin main")) == "needs_approval"

    proposal = await s.proposal(world.alice, WS, run_id, "now")
    assert proposal.rule == {
        "tool": "bash",
        "verdict": "allow",
        "path": "command",
        "match": "git push *",
    }
    keys = [t.key for t in proposal.would_allow]
    assert len(keys) == 50 and "now" not in keys  # bounded; never the call itself
    assert keys[0] == "p54"  # newest first
    assert all(k.startswith("p") for k in keys)  # old1 is past 30 days, old2-4 never match

    # Within the window, a call a person denied is listed; one a deny rule refused is not.
    recent = await declare(world, approval_mode="ask", approval_rules=[DENY_FORCE])
    await call(world, recent, "d1", bash("git push origin dev"))
    await s.deny(world.alice, WS, recent, "d1")
    await call(world, recent, "d2", bash("git push origin --force"))
    replay = await s.proposal(world.alice, WS, run_id, "now")
    listed = {(t.key, t.state) for t in replay.would_allow}
    assert ("d1", "failed") in listed and all(k != "d2" for k, _ in listed)

    # A person's glob is checked and replayed too; members only; decided: 409.
    narrower = {"tool": "bash", "path": "command", "match": "git push origin b1*"}
    shown = await s.proposal(world.alice, WS, run_id, "now", rule={**narrower, "match": "git *"})
    assert len(shown.would_allow) == 50
    await refused("rule_does_not_match", s.proposal(world.alice, WS, run_id, "now", rule=narrower))
    await refused("member_credential_required", s.proposal(world.agent, WS, run_id, "now"))
    await s.approve(world.alice, WS, run_id, "now")
    await refused("already_decided", s.proposal(world.alice, WS, run_id, "now"))


# learning and its scope ------------------------------------------------------------------------
async def test_a_run_scoped_rule_allows_the_next_call_of_that_run_only(world: World) -> None:
    s = world.core.service
    run_id = await declare(world, approval_mode="ask")
    other = await declare(world, approval_mode="ask")
    await call(world, run_id, "k1", bash("git push origin main"))
    task = await s.approve(world.alice, WS, run_id, "k1", allow=AllowSpec("run"))
    assert task.state == "granted" and task.resolved_by == "alice"
    assert await call(world, run_id, "k2", bash("git push origin dev")) == "granted"
    assert await call(world, run_id, "k3", bash("git pull")) == "needs_approval"
    assert await call(world, other, "k1", bash("git push origin dev")) == "needs_approval"
    granted = await s.get_task(world.alice, WS, run_id, "k2")
    [learned] = await s.learned_rules(world.alice, WS)
    assert granted.via == "engine" and granted.why == f"allowed by learned rule {learned.id}"
    assert (learned.scope, learned.run_id, learned.profile) == ("run", run_id, None)
    assert (learned.added_by, learned.from_run_id, learned.from_key) == ("alice", run_id, "k1")


async def test_a_learned_rule_never_beats_a_deny(ops: World) -> None:
    s = ops.core.service
    run_id = await declare(ops, profile="ops")
    await call(ops, run_id, "k1", bash("git push origin main"))
    # The person's rule overlaps the deny on purpose: accepted, and the deny still wins.
    wide = {"tool": "bash", "verdict": "allow"}
    await s.approve(ops.alice, WS, run_id, "k1", allow=AllowSpec("profile", wide))
    assert await call(ops, run_id, "k2", bash("rm -rf build")) == "granted"
    forced = await s.append(
        ops.agent, WS, run_id, CallSpec("bash", bash("git push --force"), key="k3")
    )
    assert forced.task.state == "failed"
    assert forced.task.error == {"code": "approval_denied", "detail": "never force-push"}
    later = await declare(ops, profile="ops")
    assert await call(ops, later, "k1", bash("git push --force")) == "failed"
    assert await call(ops, later, "k2", bash("anything")) == "granted"


async def test_profile_scope_reaches_later_runs_and_its_own_never_other_running_ones(
    ops: World,
) -> None:
    s = ops.core.service
    source = await declare(ops, profile="ops")
    running = await declare(ops, profile="ops")  # declared before the rule: stays frozen
    plain = await declare(ops, approval_mode="ask")  # no profile
    await call(ops, source, "k1", bash("git push origin main"))
    await s.approve(ops.alice, WS, source, "k1", allow=AllowSpec("profile"))
    later = await declare(ops, profile="ops")
    assert await call(ops, source, "k2", bash("git push origin x")) == "granted"
    assert await call(ops, later, "k1", bash("git push origin y")) == "granted"
    assert await call(ops, running, "k1", bash("git push origin z")) == "needs_approval"
    assert await call(ops, plain, "k1", bash("git push origin z")) == "needs_approval"
    [learned] = await s.learned_rules(ops.alice, WS)
    assert (learned.scope, learned.profile, learned.run_id) == ("profile", "ops", None)
    # A continuation keeps its parent's learned rules.
    child = await declare(ops, parent_run=later)
    assert await call(ops, child, "k1", bash("git push origin w")) == "granted"


async def test_every_refusal_of_learning_leaves_the_task_parked(ops: World) -> None:
    s = ops.core.service
    plain = await declare(ops, approval_mode="ask")
    await call(ops, plain, "k1", bash("git push origin main"))

    async def no(code: str, allow: AllowSpec) -> ApprovalError:
        error = await refused(code, s.approve(ops.alice, WS, plain, "k1", allow=allow))
        assert (await s.get_task(ops.alice, WS, plain, "k1")).state == "needs_approval"
        return error

    await no("no_profile", AllowSpec("profile"))
    await no("invalid_request", AllowSpec("forever"))
    error = await no("invalid_rules", AllowSpec("run", {"tool": "bash", "mtach": "x"}))
    assert "allow.rule.mtach: unknown key" in error.detail
    error = await no("invalid_rules", AllowSpec("run", {"tool": "bash", "verdict": "ask"}))
    assert "allow.rule.verdict" in error.detail
    await no("invalid_rules", AllowSpec("run", ["not", "an", "object"]))
    await no("rule_does_not_match", AllowSpec("run", {"tool": "write"}))
    other = {"tool": "bash", "path": "command", "match": "git pull*"}
    await no("rule_does_not_match", AllowSpec("run", other))
    assert await s.learned_rules(ops.alice, WS) == []
    await s.approve(ops.alice, WS, plain, "k1", allow=AllowSpec("run", {"tool": "bash"}))
    await refused("already_decided", s.approve(ops.alice, WS, plain, "k1", allow=AllowSpec("run")))


async def test_removing_a_learned_rule(ops: World) -> None:
    s = ops.core.service
    run_id = await declare(ops, profile="ops")
    await call(ops, run_id, "a", bash("git push origin main"))
    await s.approve(ops.alice, WS, run_id, "a", allow=AllowSpec("run"))
    await call(ops, run_id, "b", {"file_path": "src/app/x.py"}, tool="write")
    await s.approve(ops.alice, WS, run_id, "b", allow=AllowSpec("profile"))
    run_rule, profile_rule = await s.learned_rules(ops.alice, WS)
    assert (run_rule.scope, profile_rule.scope) == ("run", "profile")
    before = await declare(ops, profile="ops")

    await s.remove_learned_rule(ops.bob, WS, run_rule.id)
    assert await call(ops, run_id, "c", bash("git push origin x")) == "needs_approval"
    await s.remove_learned_rule(ops.bob, WS, profile_rule.id)
    # Runs declared before keep it (frozen), the run it came from too; later ones go without.
    assert await call(ops, before, "w", {"file_path": "src/app/y.py"}, "write") == "granted"
    assert await call(ops, run_id, "w", {"file_path": "src/app/y.py"}, "write") == "granted"
    after = await declare(ops, profile="ops")
    assert await call(ops, after, "w", {"file_path": "src/app/y.py"}, "write") == "needs_approval"
    assert await s.learned_rules(ops.alice, WS) == []
    await refused("not_found", s.remove_learned_rule(ops.bob, WS, run_rule.id))
    await refused("member_credential_required", s.learned_rules(ops.agent, WS))


async def test_the_log_names_the_rule_its_scope_who_and_the_decision(ops: World) -> None:
    s = ops.core.service
    run_id = await declare(ops, profile="ops")
    await call(ops, run_id, "k1", bash("git push origin main"))
    await s.approve(ops.alice, WS, run_id, "k1", allow=AllowSpec("profile"), via="web")
    [learned] = await s.learned_rules(ops.alice, WS)
    await s.remove_learned_rule(ops.bob, WS, learned.id)
    log = [r.entry for r in await s.decision_log(ops.alice, WS, run_id=run_id)]
    assert [e.action for e in log] == ["run_declared", "parked", "approved", "learned_rule"]
    entry = log[-1]
    assert (entry.actor, entry.via, entry.task_key) == ("alice", "web", "k1")
    assert entry.detail == {
        "rule_id": learned.id,
        "rule": {"tool": "bash", "verdict": "allow", "path": "command", "match": "git push *"},
        "scope": "profile",
        "profile": "ops",
        "from": {"run_id": run_id, "key": "k1"},
    }
    everything = await s.decision_log(ops.alice, WS)
    removed = everything[-1].entry
    assert (removed.action, removed.actor, removed.detail["rule_id"]) == (
        "learned_rule_removed",
        "bob",
        learned.id,
    )
    after = await s.decision_log(ops.alice, WS, after=everything[-2].id)
    assert [r.id for r in after] == [everything[-1].id]


async def test_the_rule_is_learned_on_every_instance(ops: World) -> None:
    """Another instance that had the run in memory sees its new learned rule at once."""
    s = ops.core.service
    run_id = await declare(ops, approval_mode="ask")
    other = await Core.build(ops.core.store, Settings(), clock=ops.clock)
    await call(ops, run_id, "k1", bash("git push origin main"))
    assert (await other.service.get_run(ops.agent, WS, run_id)).learned_rules == []
    await s.approve(ops.alice, WS, run_id, "k1", allow=AllowSpec("run"))
    receipt = await other.service.append(
        ops.agent, WS, run_id, CallSpec("bash", bash("git push origin x"), key="k2")
    )
    assert receipt.task.state == "granted"


async def test_rule_order_in_every_mode(world: World) -> None:
    """Learned allows sit between the declared denies and asks: they beat an ask rule and a
    `rules`-mode refusal for want of an allow, never a deny or an undeclared tool."""
    s = world.core.service
    ask_push = {"tool": "bash", "verdict": "ask", "path": "command", "match": "git push *"}
    ls_only = {"tool": "bash", "verdict": "allow", "path": "command", "match": "ls"}
    strict = await declare(
        world,
        approval_mode="rules",
        approval_rules=[DENY_FORCE, ask_push, ls_only],
        tool_names=["bash", "write"],
    )
    await call(world, strict, "k1", bash("git push origin main"))
    wide = {"tool": "bash|deploy", "verdict": "allow"}
    await s.approve(world.alice, WS, strict, "k1", allow=AllowSpec("run", wide))
    assert await call(world, strict, "k2", bash("git push origin x")) == "granted"  # beat ask
    assert await call(world, strict, "k3", bash("make")) == "granted"  # rules mode: allowed
    assert await call(world, strict, "k4", bash("git push --force")) == "failed"  # deny binds
    refused_tool = await s.append(
        world.agent, WS, strict, CallSpec("deploy", {}, key="k5")
    )  # outside tool_names: never allowed by any rule
    assert refused_tool.task.error is not None
    assert refused_tool.task.error["code"] == "tool_not_declared"
    # A stricter mode asked by one call still lets the learned rule through, a deny never.
    tightened = await s.append(
        world.agent, WS, strict, CallSpec("bash", bash("make x"), key="k6", approval_mode="rules")
    )
    assert tightened.task.state == "granted"


async def test_rules_learned_at_once_in_one_run_are_all_kept(world: World, store: SqlStore) -> None:
    """Two instances learn in the same run at the same moment: neither rule is lost."""
    twin = SqlStore(store.url, schema=store.schema)
    other = await Core.build(twin, Settings(), clock=world.clock)
    try:
        s = world.core.service
        run_id = await declare(world, approval_mode="ask")
        commands = [f"tool{n} go now" for n in range(6)]
        for n, command in enumerate(commands):
            await call(world, run_id, f"k{n}", bash(command))
        await asyncio.gather(
            *(
                (s, other.service)[n % 2].approve(
                    world.alice, WS, run_id, f"k{n}", allow=AllowSpec("run")
                )
                for n in range(len(commands))
            )
        )
        run = await s.get_run(world.alice, WS, run_id)
        assert len(run.learned_rules) == len(commands)
        for n in range(len(commands)):
            assert await call(world, run_id, f"again{n}", bash(f"tool{n} go later")) == "granted"
    finally:
        await twin.close()
