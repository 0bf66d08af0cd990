"""The decision lifecycle (SPEC 3) on SQLite and PostgreSQL: every transition and refusal."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa

from bot.errors import ApprovalError
from bot.service import CallSpec, RunSpec
from store.sql import OUTBOX, TIMER
from tests.conftest import World

WS = "acme"


async def run_of(
    w: World, mode: str = "ask", rules: list[object] | None = None, **kw: object
) -> str:
    spec = RunSpec(approval_mode=mode, approval_rules=rules or [], **kw)  # type: ignore[arg-type]
    run = await w.core.service.declare_run(w.agent, WS, spec)
    return run.id


async def park(w: World, run_id: str, key: str = "k1", **kw: object) -> None:
    receipt = await w.core.service.append(
        w.agent,
        WS,
        run_id,
        CallSpec("bash", {"command": "make deploy"}, key=key, **kw),  # type: ignore[arg-type]
    )
    assert receipt.task.state == "needs_approval"


async def refused(code: str, coro: object) -> ApprovalError:
    with pytest.raises(ApprovalError) as caught:
        await coro  # type: ignore[misc]
    assert caught.value.code == code, caught.value
    return caught.value


async def events(w: World, run_id: str) -> list[tuple[str, dict[str, object]]]:
    return [(e.name, e.data) for e in await w.core.service.events_after(run_id, 0)]


async def test_park_announces_and_approve_grants(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    await park(world, run_id)
    task = await s.get_task(world.agent, WS, run_id, "k1")
    assert task.deadline == world.clock.now() + timedelta(hours=24)
    assert task.effect_profile["summary"] == "bash: make deploy"
    names = [n for n, _ in await events(world, run_id)]
    assert names == ["approval_required", "attention_required"]
    assert (await events(world, run_id))[1][1] == {
        "reason": "approval_required",
        "blocked_task_keys": ["k1"],
    }
    assert [t.key for t in await s.asks(world.alice, WS)] == ["k1"]
    ended = await s.approve(world.alice, WS, run_id, "k1", via="telegram")
    assert (ended.state, ended.resolved_by, ended.via) == ("granted", "alice", "telegram")
    assert await s.asks(world.alice, WS) == []
    feed = await events(world, run_id)
    assert feed[-2][0] == "task_settled" and feed[-2][1]["state"] == "granted"
    assert feed[-1] == ("attention_required", {"reason": "cleared", "blocked_task_keys": []})
    # The first ending wins; every later attempt names it.
    err = await refused("already_decided", s.deny(world.bob, WS, run_id, "k1"))
    assert err.status == 409 and err.extra["resolved_by"] == "alice"
    assert "approved by alice" in err.detail
    await refused("already_decided", s.approve(world.bob, WS, run_id, "k1"))


async def test_deny_with_and_without_reason(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    await park(world, run_id, "a")
    await park(world, run_id, "b")
    a = await s.deny(world.alice, WS, run_id, "a", reason="not on a Friday")
    assert a.state == "failed"
    assert a.error == {"code": "approval_denied", "detail": "not on a Friday"}
    b = await s.deny(world.bob, WS, run_id, "b")
    assert b.error == {"code": "approval_denied", "detail": "denied by bob"}


async def test_engine_outcomes_settle_at_once(world: World) -> None:
    s = world.core.service
    rules = [
        {"tool": "bash", "path": "command", "match": "rm *", "verdict": "deny", "reason": "no"},
        {"tool": "ls", "verdict": "allow"},
    ]
    run_id = await run_of(world, "rules", rules)
    ok = await s.append(world.agent, WS, run_id, CallSpec("ls", {}))
    assert ok.task.state == "granted" and ok.task.via == "engine"
    no = await s.append(world.agent, WS, run_id, CallSpec("bash", {"command": "rm -rf /"}))
    assert no.task.error == {"code": "approval_denied", "detail": "no"}
    other = await s.append(world.agent, WS, run_id, CallSpec("cat", {}))
    assert other.task.error == {
        "code": "approval_denied",
        "detail": "no approval rule allows cat",
    }
    assert [n for n, _ in await events(world, run_id)] == ["task_settled"] * 3
    assert world.notifier.delivered == [] and await world.core.store.outbox_backlog() == 0


async def test_member_author_row_is_not_reprompted(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world, "ask", [{"tool": "bash", "verdict": "ask", "origin": "author"}])
    mine = await s.append(
        world.alice, WS, run_id, CallSpec("bash", {"command": "ls"}, origin="author")
    )
    assert (mine.task.state, mine.task.resolved_by) == ("granted", "alice")
    script = (await world.core.admin.add_application(WS, "script", may_claim="author")).principal
    app = await s.append(script, WS, run_id, CallSpec("bash", {"command": "ls"}, origin="author"))
    assert app.task.state == "needs_approval"  # the rule naming author opts it back in
    model = await s.append(world.alice, WS, run_id, CallSpec("bash", {"command": "ls"}))
    assert model.task.state == "needs_approval"  # origin defaults to model


async def test_idempotent_append(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    spec = CallSpec("bash", {"command": "x"}, key="same")
    first = await s.append(world.agent, WS, run_id, spec)
    again = await s.append(world.agent, WS, run_id, spec)
    assert again.replayed and again.task.id == first.task.id
    await refused(
        "conflict",
        s.append(world.agent, WS, run_id, CallSpec("bash", {"command": "y"}, key="same")),
    )
    assert len(await s.asks(world.alice, WS)) == 1


async def test_tightening_per_request(world: World) -> None:
    s = world.core.service
    run_id = await run_of(
        world, "ask", [{"tool": "*", "verdict": "allow"}], tool_names=["ls", "cat"]
    )
    narrow = CallSpec("ls", {}, approval_mode="rules", tool_names=["ls"])
    assert (await s.append(world.agent, WS, run_id, narrow)).task.state == "granted"
    await refused(
        "approval_widening",
        s.append(world.agent, WS, run_id, CallSpec("ls", {}, approval_mode="bypass")),
    )
    await refused(
        "approval_widening",
        s.append(world.agent, WS, run_id, CallSpec("ls", {}, tool_names=["rm"])),
    )
    outside = await s.append(world.agent, WS, run_id, CallSpec("rm", {}))
    assert outside.task.state == "failed" and outside.task.error["code"] == "tool_not_declared"  # type: ignore[index]


async def test_questions(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world, "ask", [{"tool": "ask", "verdict": "allow"}])
    q = CallSpec("ask", {"prompt": "Which env?", "options": ["staging", "prod"]}, key="q")
    receipt = await s.append(world.agent, WS, run_id, q)
    assert receipt.task.state == "awaiting_input" and receipt.resolution_token is None
    assert [n for n, _ in await events(world, run_id)] == ["awaiting_human", "attention_required"]
    await refused("invalid_option", s.resolve(world.alice, WS, run_id, "q", content="dev"))
    await refused("conflict", s.approve(world.alice, WS, run_id, "q"))
    await refused(
        "member_credential_required", s.resolve(world.agent, WS, run_id, "q", content="prod")
    )
    done = await s.resolve(world.alice, WS, run_id, "q", content="prod", via="web")
    assert (done.state, done.resolution, done.resolved_by) == (
        "resolved",
        {"content": "prod"},
        "alice",
    )

    multi = CallSpec(
        "ask", {"prompt": "Which?", "options": ["a", "b", "c"], "multi": True}, key="m"
    )
    await s.append(world.agent, WS, run_id, multi)
    await refused("invalid_option", s.resolve(world.alice, WS, run_id, "m", content="a"))
    await refused("invalid_option", s.resolve(world.alice, WS, run_id, "m", content=["a", "z"]))
    done = await s.resolve(world.alice, WS, run_id, "m", content=["c", "a"])
    assert done.resolution == {"content": ["a", "c"]}

    await s.append(world.agent, WS, run_id, CallSpec("ask", {"prompt": "Free?"}, key="f"))
    declined = await s.resolve(world.bob, WS, run_id, "f", outcome="failed")
    assert declined.state == "failed" and declined.error == {
        "code": "declined",
        "detail": "declined by bob",
    }
    await refused(
        "invalid_request", s.append(world.agent, WS, run_id, CallSpec("ask", {"prompt": ""}))
    )


async def test_question_needs_approval_to_cross_in_rules_mode(world: World) -> None:
    run_id = await run_of(world, "rules", [])
    receipt = await world.core.service.append(
        world.agent, WS, run_id, CallSpec("ask", {"prompt": "?"})
    )
    assert receipt.task.error == {
        "code": "approval_denied",
        "detail": "no approval rule allows ask",
    }


async def test_author_ask_resolution_token(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    script = (await world.core.admin.add_application(WS, "script", may_claim="author")).principal
    spec = CallSpec("ask", {"prompt": "Go?", "options": ["yes", "no"]}, key="t", origin="author")
    receipt = await s.append(script, WS, run_id, spec)
    token = receipt.resolution_token
    assert token and receipt.task.resolution_token_hash and token not in str(receipt.task)
    assert (await s.append(script, WS, run_id, spec)).resolution_token == token
    assert await s.asks(world.alice, WS) == []  # nobody else is nagged
    await refused(
        "invalid_resolution_token",
        s.resolve(None, WS, run_id, "t", content="yes", resolution_token="abr_wrong"),
    )
    other = await s.append(
        script, WS, run_id, CallSpec("ask", {"prompt": "?"}, key="o", origin="author")
    )
    await refused(
        "invalid_resolution_token",
        s.resolve(None, WS, run_id, "o", content="x", resolution_token=token),
    )
    assert other.resolution_token != token
    done = await s.resolve(None, WS, run_id, "t", content="yes", resolution_token=token)
    assert (done.state, done.via) == ("resolved", "token")
    await refused(
        "already_decided", s.resolve(None, WS, run_id, "t", content="no", resolution_token=token)
    )
    await world.core.relay.run_once()
    assert "t" not in {t.key for _, t in world.notifier.delivered}


async def test_expiry_continue_and_hold(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    await park(world, run_id, "c")
    await park(world, run_id, "h", failure_policy="hold")
    await world.clock.advance(timedelta(hours=24))
    assert await world.core.scheduler.run_once() >= 2
    c = await s.get_task(world.agent, WS, run_id, "c")
    assert c.state == "timed_out" and c.error["code"] == "approval_expired"  # type: ignore[index]
    assert c.via == "clock"
    run = await s.get_run(world.agent, WS, run_id)
    assert run.state == "held" and run.held_task_key == "h"
    assert ("run_held", {"reason": "approval_expired", "task_key": "h"}) in await events(
        world, run_id
    )
    await refused("already_decided", s.approve(world.alice, WS, run_id, "c"))
    await refused("run_not_running", s.append(world.agent, WS, run_id, CallSpec("bash", {})))
    # Retry asks the held decision again with a new deadline.
    await refused("member_credential_required", s.retry(world.agent, WS, run_id))
    run = await s.retry(world.alice, WS, run_id)
    assert run.state == "running"
    again = [t for t in await s.asks(world.alice, WS)]
    assert [t.key for t in again] == ["h~retry2"]
    assert again[0].deadline == world.clock.now() + timedelta(hours=24)
    await refused("run_not_held", s.retry(world.alice, WS, run_id))


async def test_expired_question_holds_and_abandon_stops(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world, "bypass")
    await s.append(world.agent, WS, run_id, CallSpec("ask", {"prompt": "?"}, key="q"))
    await world.clock.advance(timedelta(hours=24, seconds=1))
    await world.core.scheduler.run_once()
    q = await s.get_task(world.agent, WS, run_id, "q")
    assert q.state == "timed_out" and q.error["code"] == "question_expired"  # type: ignore[index]
    assert (await s.get_run(world.agent, WS, run_id)).state == "held"
    run = await s.abandon(world.alice, WS, run_id)
    assert run.state == "stopped"
    await refused("run_not_held", s.abandon(world.alice, WS, run_id))


async def test_stop_cancels_parked(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    await park(world, run_id, "a")
    await s.append(world.agent, WS, run_id, CallSpec("ask", {"prompt": "?"}, key="q"))
    run = await s.stop(world.agent, WS, run_id)
    assert run.state == "stopped"
    for key in ("a", "q"):
        task = await s.get_task(world.agent, WS, run_id, key)
        assert task.state == "cancelled" and task.error["code"] == "run_stopped"  # type: ignore[index]
    assert (await events(world, run_id))[-1][0] == "run_stopped"
    await refused("already_decided", s.approve(world.alice, WS, run_id, "a"))
    await refused("run_not_running", s.append(world.agent, WS, run_id, CallSpec("bash", {})))
    await s.stop(world.agent, WS, run_id)  # stopping twice is a no-op
    # Their timers fire into nothing later: no nudge, no second ending.
    await world.clock.advance(timedelta(days=2))
    await world.core.scheduler.run_once()
    assert (await events(world, run_id))[-1][0] == "run_stopped"
    assert await world.core.store.next_timer_due() is None


async def test_nudges_once_each_and_skip_when_expiring(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    await park(world, run_id, "n")
    await world.clock.advance(timedelta(hours=23))
    await world.core.scheduler.run_once()
    await world.core.scheduler.run_once()
    await world.clock.advance(timedelta(minutes=50))
    await world.core.scheduler.run_once()
    nudges = [d for n, d in await events(world, run_id) if n == "nudge"]
    assert [d["remaining"] for d in nudges] == [3600, 600]
    await world.core.relay.run_once()
    assert world.notifier.kinds("n") == ["posted", "nudge", "nudge"]
    # A park whose nudges and deadline are all overdue (a long outage) expires without nudging.
    await park(world, run_id, "late")
    await world.clock.advance(timedelta(days=2))
    await world.core.scheduler.run_once()
    late = [d for n, d in await events(world, run_id) if n == "nudge" and d["key"] == "late"]
    assert late == [] and (await s.get_task(world.agent, WS, run_id, "late")).state == "timed_out"


async def test_security_scoping(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    await park(world, run_id)
    await world.core.admin.create_workspace("other")
    stranger = (await world.core.admin.add_member("other", "eve")).principal
    await refused("not_found", s.approve(stranger, WS, run_id, "k1"))
    await refused("not_found", s.approve(stranger, "other", run_id, "k1"))
    await refused("member_credential_required", s.approve(world.agent, WS, run_id, "k1"))
    assert (await s.get_task(world.alice, WS, run_id, "k1")).state == "needs_approval"


async def test_revoke_executor_keeps_rows_decidable(world: World) -> None:
    s = world.core.service
    executor = await s.register_executor(world.agent, WS, "laptop")
    run = await s.declare_run(
        world.agent, WS, RunSpec(approval_mode="ask", executor_id=executor.id)
    )
    await park(world, run.id)
    inbox = await world.core.store.executor_inbox(executor.id)
    assert [t.key for t in inbox] == ["k1"]
    work = await world.core.store.work_events(executor.id, 0)
    assert [e.data["kind"] for e in work] == ["approval"]
    assert await s.revoke_executor(world.agent, WS, executor.id) == 1
    assert await world.core.store.executor_inbox(executor.id) == []
    assert (await s.approve(world.alice, WS, run.id, "k1")).state == "granted"


async def test_outbox_retries_and_delivers_in_order(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    await park(world, run_id)
    await s.approve(world.alice, WS, run_id, "k1")
    world.notifier.fail_next = 1
    await world.core.relay.run_once()
    assert world.notifier.kinds() == ["ended"] or world.notifier.kinds() == []
    await world.clock.advance(timedelta(seconds=5))
    await world.core.relay.run_once()
    assert world.notifier.kinds() in (["posted", "ended"], ["ended", "posted"])
    assert world.notifier.delivered[0][0].kind in ("posted", "ended")
    assert await world.core.store.outbox_backlog() == 0


async def test_decision_log_is_complete(world: World) -> None:
    s = world.core.service
    run_id = await run_of(world)
    await park(world, run_id, "a")
    await s.deny(world.alice, WS, run_id, "a", reason="no", via="slack")
    log = [
        (r.entry.action, r.entry.actor, r.entry.via) for r in await world.core.store.log_entries(WS)
    ]
    assert log == [
        ("run_declared", "agent", "api"),
        ("parked", "agent", "api"),
        ("denied", "alice", "slack"),
    ]


async def test_clock_loop_fires_when_time_moves(world: World) -> None:
    """The real loop, not run_once: it sleeps until the next deadline and wakes on new ones."""
    s = world.core.service
    world.core.start()
    try:
        run_id = await run_of(world)
        await park(world, run_id)
        task = await s.wait_task(world.agent, WS, run_id, "k1", 0.05)
        assert task.state == "needs_approval"
        await world.clock.advance(timedelta(hours=24))
        task = await s.wait_task(world.agent, WS, run_id, "k1", 5)
        assert task.state == "timed_out"
        # The relay loop delivers on its own; the nudges were overtaken by the deadline.
        for _ in range(100):
            if world.notifier.kinds("k1") == ["posted", "ended"]:
                break
            await asyncio.sleep(0.05)
        assert world.notifier.kinds("k1") == ["posted", "ended"]
    finally:
        await world.core.stop()


async def test_old_bookkeeping_is_purged_but_the_audit_trail_stays(world: World) -> None:
    s = world.core.service
    store = world.core.store
    run_id = await run_of(world)
    await park(world, run_id)
    await s.approve(world.alice, WS, run_id, "k1")
    await world.core.relay.run_once()
    await world.clock.advance(timedelta(days=2))
    await world.core.scheduler.run_once()  # the deadline fires into nothing; purge runs
    log_before = len(await store.log_entries(WS))
    events_before = len(await s.events_after(run_id, 0))
    async with store.read() as tx:
        outbox = (await tx.conn.execute(sa.select(sa.func.count()).select_from(OUTBOX))).scalar()
        timers = (await tx.conn.execute(sa.select(sa.func.count()).select_from(TIMER))).scalar()
    assert outbox == 2 and timers == 3  # younger than the retention: kept
    await world.clock.advance(timedelta(days=8))
    await world.core.scheduler.run_once()
    async with store.read() as tx:
        outbox = (await tx.conn.execute(sa.select(sa.func.count()).select_from(OUTBOX))).scalar()
        timers = (await tx.conn.execute(sa.select(sa.func.count()).select_from(TIMER))).scalar()
    assert (outbox, timers) == (0, 0)
    assert len(await store.log_entries(WS)) == log_before
    assert len(await s.events_after(run_id, 0)) == events_before
    assert (await s.get_task(world.alice, WS, run_id, "k1")).state == "granted"
