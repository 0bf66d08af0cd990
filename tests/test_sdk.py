"""The Python SDK end to end against a real server: an agent calls and asks and waits, a person
decides through `decisions`; denial, expiry, decline and stop arrive as typed errors; the feed
reconnects from its last event id; the blocking wrapper and the decorator."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web

from adapters.http import client as sdk
from adapters.http import models as m
from adapters.http.app import build_app
from adapters.http.sync_client import SyncClient
from bot.config import Settings
from tests.http_harness import Served, first_decision, fixtures, sdk_fixtures, with_person

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()


agent, person = sdk_fixtures()


async def test_call_is_approved_by_a_person(agent: sdk.Workspace, person: sdk.Workspace) -> None:
    run = await agent.runs.declare(approval_mode="ask", title="deploys")
    assert run.declared is not None and run.declared.approval_mode == "ask"

    async def approve() -> None:
        decision = await first_decision(person, run.id)
        assert not decision.is_question
        assert (decision.tool, decision.tool_input) == ("bash", {"command": "make deploy"})
        assert decision.effect_profile == {"summary": "deploy", "risk": "high"}
        assert decision.why and decision.deadline is not None
        await decision.approve()

    task = await with_person(
        run.call("bash", {"command": "make deploy"}, effect_profile={"summary": "deploy",
                                                                     "risk": "high"}),
        approve,
    )  # fmt: skip
    assert (task.state, task.resolved_by, task.via) == ("granted", "alice", "api")
    # granted at once needs no person
    allowed = await agent.runs.declare(approval_mode="bypass")
    assert (await allowed.call("ls")).via == "engine"


async def test_deny_with_reason_raises_approval_denied(
    agent: sdk.Workspace, person: sdk.Workspace
) -> None:
    run = await agent.runs.declare(approval_mode="ask")

    async def deny() -> None:
        await (await first_decision(person, run.id)).deny(reason="not on a Friday")

    with pytest.raises(sdk.ApprovalDenied) as denied:
        await with_person(run.call("bash", {"command": "deploy"}), deny)
    assert (denied.value.code, denied.value.detail) == ("approval_denied", "not on a Friday")
    assert denied.value.task.resolved_by == "alice"
    rules = await agent.runs.declare(approval_mode="rules")
    with pytest.raises(sdk.ApprovalDenied) as refused:
        await rules.call("bash", {"command": "ls"})
    assert refused.value.detail == "no approval rule allows bash"


async def test_questions(agent: sdk.Workspace, person: sdk.Workspace) -> None:
    run = await agent.runs.declare(approval_mode="ask")

    async def pick() -> None:
        decision = await first_decision(person, run.id)
        assert decision.is_question
        assert (decision.prompt, decision.options, decision.multi) == (
            "Region?", ["eu", "us"], False,
        )  # fmt: skip
        await decision.answer("us")

    assert await with_person(run.ask("Region?", options=["eu", "us"]), pick) == "us"

    async def several() -> None:
        decision = await first_decision(person, run.id)
        assert decision.multi
        await decision.answer(["c", "a"])

    asked = run.ask("Which?", options=["a", "b", "c"], multi=True)
    assert await with_person(asked, several) == ["a", "c"]

    async def free_text() -> None:
        await (await first_decision(person, run.id)).answer("because")

    assert await with_person(run.ask("Why?"), free_text) == "because"

    async def decline() -> None:
        await (await first_decision(person, run.id)).decline()

    with pytest.raises(sdk.QuestionDeclined) as declined:
        await with_person(run.ask("Go?"), decline)
    assert declined.value.code == "declined"


async def test_expiry_and_stop(api: Served, agent: sdk.Workspace, person: sdk.Workspace) -> None:
    run = await agent.runs.declare(approval_mode="ask")

    async def expire() -> None:
        await first_decision(person, run.id)
        await api.clock.advance(timedelta(hours=24, seconds=1))
        await api.core.scheduler.run_once()

    with pytest.raises(sdk.ApprovalExpired) as expired:
        await with_person(run.call("bash", {"command": "x"}), expire)
    assert expired.value.code == "approval_expired"
    assert (await run.get()).state == "running"  # the default failure policy continues

    async def stop() -> None:
        await first_decision(person, run.id)
        await run.stop()

    with pytest.raises(sdk.RunStopped) as stopped:
        await with_person(run.call("bash", {"command": "y"}), stop)
    assert stopped.value.code == "run_stopped"
    with pytest.raises(sdk.ApiError) as refused:
        await run.call("bash", {"command": "z"})
    assert (refused.value.status, refused.value.code) == (409, "run_not_running")


async def test_workspace_wide_decisions_and_api_errors(
    api: Served, agent: sdk.Workspace, person: sdk.Workspace
) -> None:
    runs = [await agent.runs.declare(approval_mode="ask") for _ in range(2)]
    for index, run in enumerate(runs):
        await run.append("bash", {"command": f"job {index}"}, key=f"job{index}")
    seen = []
    async for decision in person.decisions:
        seen.append((decision.run_id, decision.key))
        await decision.approve()
    assert sorted(seen) == sorted((run.id, f"job{i}") for i, run in enumerate(runs))
    assert await person.asks() == []
    with pytest.raises(sdk.ApiError) as refused:
        await agent.asks()
    assert (refused.value.status, refused.value.code) == (403, "member_credential_required")
    # an append retried with the same key is the same task
    first = await runs[0].append("bash", {"command": "again"}, key="same")
    assert await runs[0].append("bash", {"command": "again"}, key="same") == first


async def test_require_approval_decorator(agent: sdk.Workspace, person: sdk.Workspace) -> None:
    run = await agent.runs.declare(approval_mode="ask")
    ran: list[tuple[str, int]] = []

    @sdk.require_approval(run, tool="deploy")
    async def deploy(env: str, replicas: int = 2) -> str:
        ran.append((env, replicas))
        return f"deployed {env}"

    async def approve() -> None:
        decision = await first_decision(person, run.id)
        assert (decision.tool, decision.tool_input) == ("deploy", {"env": "prod", "replicas": 2})
        await decision.approve()

    assert await with_person(deploy("prod"), approve) == "deployed prod"

    async def deny() -> None:
        await (await first_decision(person, run.id)).deny()

    with pytest.raises(sdk.ApprovalDenied):
        await with_person(deploy("staging", replicas=1), deny)
    assert ran == [("prod", 2)]


async def test_sync_client_and_plain_function_decorator(api: Served, person: sdk.Workspace) -> None:
    def agent_side() -> tuple[str, Any, str]:
        with SyncClient(api.url, api.token("agent")) as client:
            run = client.workspace(api.ws).runs.declare(approval_mode="ask")

            @sdk.require_approval(run)
            def rotate_keys(service: str) -> str:
                return f"rotated {service}"

            done = rotate_keys("billing")
            answer = run.ask("Region?", options=["eu", "us"])
            return done, answer, run.get().state

    async def person_side() -> None:
        for expected in ("rotate_keys", "ask"):
            for _ in range(300):
                found = await person.decisions.list()
                if found:
                    break
                await asyncio.sleep(0.01)
            decision = found[0]
            assert decision.tool == expected
            await (decision.answer("eu") if decision.is_question else decision.approve())

    result = await with_person(asyncio.to_thread(agent_side), person_side)
    assert result == ("rotated billing", "eu", "running")


async def test_closing_a_sync_client_ends_a_call_another_thread_waits_on(
    api: Served, person: sdk.Workspace
) -> None:
    """close() from one thread while another waits for a person: the waiter is not left
    blocked on a loop that no longer turns, later use is refused, and closing twice is fine."""
    import concurrent.futures
    import threading

    client = SyncClient(api.url, api.token("agent"))
    # Blocking calls go to threads: the service answers on this test's own loop.
    run = await asyncio.to_thread(client.workspace(api.ws).runs.declare, approval_mode="ask")
    outcome: list[BaseException | None] = []

    def waiter() -> None:
        try:
            run.call("bash", {"command": "make deploy"})
            outcome.append(None)
        except BaseException as error:  # the waiter's own ending is what the test reads
            outcome.append(error)

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    for _ in range(500):
        if await person.decisions.list():
            break
        await asyncio.sleep(0.01)
    await asyncio.to_thread(client.close)
    await asyncio.to_thread(thread.join, 10)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], concurrent.futures.CancelledError)
    await asyncio.to_thread(client.close)  # twice: harmless
    with pytest.raises(RuntimeError, match="closed"):
        await asyncio.to_thread(run.get)


async def test_feed_reconnects_from_its_last_event_id(api: Served) -> None:
    """The server goes away mid-stream and comes back on the same port: the SDK's feed
    resumes where it stopped, nothing lost and nothing twice."""
    app_runner = web.AppRunner(build_app(api.core, Settings()), shutdown_timeout=0.5)
    await app_runner.setup()
    site = web.TCPSite(app_runner, "127.0.0.1", 0)
    await site.start()
    port = app_runner.addresses[0][1]
    client = sdk.Client(f"http://127.0.0.1:{port}", api.token("agent"))
    run = await client.workspace(api.ws).runs.declare(approval_mode="ask")
    for key in ("a", "b"):
        await run.append("bash", {"command": key}, key=key)
    got: list[m.FeedEvent] = []
    two = asyncio.Event()

    async def follow() -> None:
        async for event in run.events():
            got.append(event)
            if len(got) == 4:
                two.set()
            if len(got) == 8:
                return

    following = asyncio.create_task(follow())
    await asyncio.wait_for(two.wait(), 5)
    await app_runner.cleanup()  # drop every connection
    local = sdk.Client(api.url, api.token("alice")).workspace(api.ws).runs.run(run.id)
    await local.approve("a")
    await local.deny("b", "no")
    await local.client.close()
    app_runner = web.AppRunner(build_app(api.core, Settings()), shutdown_timeout=0.5)
    await app_runner.setup()
    await web.TCPSite(app_runner, "127.0.0.1", port).start()
    try:
        await asyncio.wait_for(following, 10)
    finally:
        await client.close()
        await app_runner.cleanup()
    stored = await api.core.store.events_after(run.id, 0)
    assert [(e.id, e.event) for e in got] == [(e.seq, e.name) for e in stored]


async def test_a_waiting_call_survives_a_restart(api: Served) -> None:
    """Shutdown answers pending long-polls at once (no minute-long hang), and the SDK keeps
    waiting across the restart until a person decides."""
    runner = web.AppRunner(build_app(api.core, Settings()))  # default shutdown timeout (60 s)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    async with sdk.Client(f"http://127.0.0.1:{port}", api.token("agent")) as client:
        run = await client.workspace(api.ws).runs.declare(approval_mode="ask")
        waiting = asyncio.create_task(run.call("bash", {"command": "migrate"}, key="m"))
        await asyncio.sleep(0.2)  # the long-poll is held by the server
        started = asyncio.get_running_loop().time()
        await runner.cleanup()
        assert asyncio.get_running_loop().time() - started < 5
        assert not waiting.done()
        runner = web.AppRunner(build_app(api.core, Settings()))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            async with sdk.Client(api.url, api.token("bob")) as person:
                await person.workspace(api.ws).runs.run(run.id).approve("m")
            task = await asyncio.wait_for(waiting, 10)
        finally:
            await runner.cleanup()
    assert (task.state, task.resolved_by) == ("granted", "bob")
