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
from bot.rules import compile_policy
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
# A shell path (issue 20): a `command` of `bash` is judged, and proposed for, command by command.
SHELL = [{"tool": "bash", "path": "command"}]
OPS = ProfileConfig(
    approval_mode="ask", approval_rules=[DENY_FORCE, ASK_BASH], shell_commands=SHELL
)


@pytest.fixture
async def ops(store: SqlStore) -> World:
    """A world whose configuration has the profile `ops` (a deny before an ask, a shell path)."""
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
    assert propose("bash", bash("git push origin main"), shell_commands=SHELL) == {
        "tool": "bash",
        "verdict": "allow",
        "path": "command",
        "match": "git push *",
    }
    assert propose("write", {"file_path": "src/app/x.py"})["match"] == "src/app/*"
    assert propose("edit", {"path": "/etc/hosts"})["match"] == "/etc/*"
    # one word: that command only
    assert propose("bash", bash("ls"), shell_commands=SHELL)["match"] == "ls"
    # An argv list is no shell line: its exact text.
    argv = {"command": ["git", "push", "-u", "x"]}
    assert propose("bash", argv, shell_commands=SHELL)["match"] == "git push -u x"
    assert propose("deploy", {"env": "prod"}) == {"tool": "deploy", "verdict": "allow"}
    assert propose("bash", bash("make x"), "author")["origin"] == "author"


def test_off_a_shell_path_the_proposal_is_the_commands_exact_text() -> None:
    """Without `shell_commands` the whole text is matched against the glob, so a `*` would let
    a longer line ride on it: the proposal is the text itself, its own wildcards made `?`."""
    assert propose("bash", bash("git push origin main")) == {
        "tool": "bash",
        "verdict": "allow",
        "path": "command",
        "match": "git push origin main",
    }
    assert propose("bash", bash("cat *.md"))["match"] == "cat ?.md"
    assert propose("bash", bash("ls -l file?.txt"))["match"] == "ls -l file?.txt"
    # A tool with no shell path of the run's: its command is not seen through either.
    assert propose("sh", bash("git push origin main"), shell_commands=SHELL)["match"] == (
        "git push origin main"
    )
    # On a shell path a command's own wildcards are `?` too, in the words it keeps.
    assert propose("bash", bash("cat *.md"), shell_commands=SHELL)["match"] == "cat ?.md"
    assert propose("bash", bash("cp *.md out/"), shell_commands=SHELL)["match"] == "cp ?.md *"


async def test_proposal_and_its_honest_bounded_replay(world: World) -> None:
    s = world.core.service
    run_id = await declare(
        world, approval_mode="ask", approval_rules=[DENY_FORCE], shell_commands=SHELL
    )
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
    recent = await declare(
        world, approval_mode="ask", approval_rules=[DENY_FORCE], shell_commands=SHELL
    )
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
    run_id = await declare(world, approval_mode="ask", shell_commands=SHELL)
    other = await declare(world, approval_mode="ask", shell_commands=SHELL)
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
    run_id = await declare(ops, approval_mode="ask", shell_commands=SHELL)
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
        run_id = await declare(world, approval_mode="ask", shell_commands=SHELL)
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


# on a shell path (issue 20) --------------------------------------------------------------------
def allow_command(match: str) -> dict[str, str]:
    return {"tool": "bash", "verdict": "allow", "path": "command", "match": match}


async def test_a_compound_line_proposes_a_rule_per_command_and_learns_them_all(
    world: World,
) -> None:
    s = world.core.service
    run_id = await declare(world, approval_mode="ask", shell_commands=SHELL)
    line = bash("git push origin main && npm publish")
    assert await call(world, run_id, "k1", line) == "needs_approval"
    push, publish = allow_command("git push *"), allow_command("npm publish")
    proposal = await s.proposal(world.alice, WS, run_id, "k1")
    assert proposal.rules == (push, publish) and proposal.rule == push

    task = await s.approve(world.alice, WS, run_id, "k1", allow=AllowSpec("run"))
    assert (task.state, task.resolved_by) == ("granted", "alice")
    learned = await s.learned_rules(world.alice, WS)
    assert sorted(r.rule["match"] for r in learned) == ["git push *", "npm publish"]
    assert {(r.scope, r.run_id, r.from_run_id, r.from_key) for r in learned} == {
        ("run", run_id, run_id, "k1")
    }
    run = await s.get_run(world.alice, WS, run_id)
    assert {e["id"] for e in run.learned_rules} == {r.id for r in learned}
    log = [r.entry for r in await s.decision_log(world.alice, WS, run_id=run_id)]
    assert [e.action for e in log] == [
        "run_declared", "parked", "approved", "learned_rule", "learned_rule",
    ]  # fmt: skip
    assert {e.detail["rule_id"] for e in log[-2:]} == {r.id for r in learned}

    # Every command of the next line is granted on its own: the line is.
    assert await call(world, run_id, "k2", bash("git push origin dev && npm publish")) == "granted"
    assert await call(world, run_id, "k3", bash("npm publish")) == "granted"
    # rm is granted by neither: the line parks.
    chained = bash("git push origin dev && rm -rf build")
    assert await call(world, run_id, "k4", chained) == "needs_approval"
    # A command twice in a line is proposed once.
    twice = bash("git pull origin main && git pull origin dev")
    assert await call(world, run_id, "k5", twice) == "needs_approval"
    proposal = await s.proposal(world.alice, WS, run_id, "k5")
    assert proposal.rules == (allow_command("git pull *"),)


async def test_a_learned_rule_never_lets_a_longer_line_ride_on_it(world: World) -> None:
    s = world.core.service
    # On a shell path, `git push *` is judged per command: the rm after it is not git push.
    shell_run = await declare(world, approval_mode="ask", shell_commands=SHELL)
    await call(world, shell_run, "k1", bash("git push origin main"))
    await s.approve(world.alice, WS, shell_run, "k1", allow=AllowSpec("run"))
    [learned] = await s.learned_rules(world.alice, WS)
    assert learned.rule == allow_command("git push *")
    assert await call(world, shell_run, "k2", bash("git push x")) == "granted"
    riders = ("git push x && rm -rf ~", "git push x; rm -rf ~", "git push $(rm x)")
    for n, line in enumerate(riders):
        assert await call(world, shell_run, f"r{n}", bash(line)) == "needs_approval", line

    # Off a shell path, the exact text: a longer line (or another push) is not that text.
    plain = await declare(world, approval_mode="ask")
    await call(world, plain, "k1", bash("git push origin main"))
    await s.approve(world.alice, WS, plain, "k1", allow=AllowSpec("run"))
    exact = next(r for r in await s.learned_rules(world.alice, WS) if r.run_id == plain)
    assert exact.rule == allow_command("git push origin main")
    assert await call(world, plain, "k2", bash("git push origin main")) == "granted"
    longer = bash("git push origin main && rm -rf ~")
    assert await call(world, plain, "k3", longer) == "needs_approval"
    assert await call(world, plain, "k4", bash("git push origin main2")) == "needs_approval"
    # A wildcard of the agent's own is one byte in the rule, never any text.
    await call(world, plain, "k5", bash("cat *.md"))
    await s.approve(world.alice, WS, plain, "k5", allow=AllowSpec("run"))
    assert await call(world, plain, "k6", bash("cat *.md")) == "granted"
    assert await call(world, plain, "k7", bash("cat a.md")) == "granted"  # `?`: one byte
    assert await call(world, plain, "k8", bash("cat ~/.ssh/id.md")) == "needs_approval"


async def test_a_command_the_run_already_grants_is_not_proposed(world: World) -> None:
    s = world.core.service
    run_id = await declare(
        world,
        approval_mode="ask",
        approval_rules=[allow_command("git status*")],
        shell_commands=SHELL,
    )
    line = bash("git status && npm publish --tag next")
    assert await call(world, run_id, "k1", line) == "needs_approval"
    publish = allow_command("npm publish *")
    proposal = await s.proposal(world.alice, WS, run_id, "k1")
    assert (proposal.rule, proposal.rules) == (publish, (publish,))
    await s.approve(world.alice, WS, run_id, "k1", allow=AllowSpec("run"))
    [learned] = await s.learned_rules(world.alice, WS)
    assert learned.rule == publish
    # A learned rule grants too: only the new command of the next line is proposed.
    next_line = bash("npm publish --tag latest && make dist")
    assert await call(world, run_id, "k2", next_line) == "needs_approval"
    proposal = await s.proposal(world.alice, WS, run_id, "k2")
    assert proposal.rules == (allow_command("make dist"),)


async def test_the_replay_on_a_shell_path_judges_past_lines_command_by_command(
    world: World,
) -> None:
    s = world.core.service
    run_id = await declare(world, approval_mode="ask", shell_commands=SHELL)
    assert await call(world, run_id, "chained", bash("git push x && rm y")) == "needs_approval"
    assert await call(world, run_id, "alone", bash("git push origin dev")) == "needs_approval"
    assert await call(world, run_id, "now", bash("git push origin main")) == "needs_approval"
    proposal = await s.proposal(world.alice, WS, run_id, "now")
    assert proposal.rule == allow_command("git push *")
    assert [t.key for t in proposal.would_allow] == ["alone"]  # rm y: not a git push
    # A person's rule is replayed the same way on this run.
    mine = {"tool": "bash", "path": "command", "match": "git *"}
    shown = await s.proposal(world.alice, WS, run_id, "now", rule=mine)
    assert [t.key for t in shown.would_allow] == ["alone"]

    # Off a shell path the glob sees the whole text, and the replay says what it would let by.
    plain = await declare(world, approval_mode="ask")
    await call(world, plain, "now", bash("git push origin main"))
    wide = {"tool": "bash", "path": "command", "match": "git push *"}
    shown = await s.proposal(world.alice, WS, plain, "now", rule=wide)
    listed = {(t.run_id, t.key) for t in shown.would_allow}
    assert listed == {(run_id, "chained"), (run_id, "alone"), (run_id, "now")}


async def test_the_replay_of_a_compound_proposal_uses_all_its_rules_together(world: World) -> None:
    s = world.core.service
    run_id = await declare(world, approval_mode="ask", shell_commands=SHELL)
    past = {
        "p1": "npm publish",
        "p2": "git push origin dev && npm publish",
        "p3": "git push origin dev && rm -rf build",
    }
    for key, line in past.items():
        assert await call(world, run_id, key, bash(line)) == "needs_approval"
        await s.deny(world.alice, WS, run_id, key, reason="not yet")
        await world.clock.advance(1)
    assert await call(world, run_id, "now", bash("git push origin main && npm publish")) == (
        "needs_approval"
    )
    proposal = await s.proposal(world.alice, WS, run_id, "now")
    assert len(proposal.rules) == 2
    assert sorted(t.key for t in proposal.would_allow) == ["p1", "p2"]  # never p3's rm


@pytest.mark.parametrize(
    ("tool", "tool_input", "expected"),
    [
        ("bash", {"command": "cat *.md"}, {"path": "command", "match": "cat ?.md"}),
        ("mcp__*", {}, {}),
        ("write", {"file_path": "*/notes.txt"}, {"path": "file_path", "match": "?/*"}),
        ("write", {"file_path": "a?b.txt"}, {"path": "file_path", "match": "a?b.txt"}),
        ("edit", {"path": "src/*/x.py"}, {"path": "path", "match": "src/?/*"}),
    ],
)
def test_a_proposal_never_copies_the_calls_own_wildcards(
    tool: str, tool_input: dict[str, Any], expected: dict[str, str]
) -> None:
    """Issue 21 (4): only the wildcard the service adds is `*`; the call's own `*` and `?`
    become `?`, so `cat *.md` never learns a rule that grants `cat ~/.ssh/id_rsa # .md`."""
    rule = propose(tool, tool_input)
    assert rule == {"tool": tool.replace("*", "?"), "verdict": "allow", **expected}
    policy = compile_policy([rule])
    if tool == "mcp__*":
        assert policy.evaluate(tool_name="mcp__evil", tool_input={}, mode="rules").outcome == (
            "failed"
        )
