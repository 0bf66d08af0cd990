"""The bridges' shared gate (`adapters.frameworks.gate`) against a real approvalbot server: what
happens to calls that wait when the gate closes, a gate used again after closing, a sync entry
point called on the gate's own loop, the token kept out of reprs and messages, and a process
that ends without closing its gates."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from adapters.frameworks import gate as gate_module
from adapters.frameworks.gate import (
    CLOSED,
    Answer,
    Outcome,
    Target,
    find_target,
    gate_for,
    shown_url,
)
from adapters.http import client as sdk
from tests.conftest import bytecode_env
from tests.frameworks_harness import alice, closed_port, framework_fixtures, keywords
from tests.frameworks_harness import next_decision as parked_decision
from tests.http_harness import Served

on_the_loop = pytest.mark.asyncio(loop_scope="module")
server, api = framework_fixtures()
__all__ = ["alice"]
ROOT = Path(__file__).resolve().parents[1]


async def _parked_with(alice: sdk.Workspace, tool_input: object) -> sdk.Decision:
    """The decision resting on alice for the call with `tool_input`, once it is parked."""
    for _ in range(500):
        found = [d for d in await alice.decisions.list() if d.tool_input == tool_input]
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no call with {tool_input} was parked")


@on_the_loop
async def test_closing_ends_waiting_calls_as_not_run_and_the_gate_works_again(
    api: Served, alice: sdk.Workspace
) -> None:
    gate = gate_for(find_target(**keywords(api)), "gate-close")
    from_thread: list[Outcome] = []
    thread = threading.Thread(
        target=lambda: from_thread.append(
            gate.decide_sync("s", "deploy", {"env": "prod"}, call_id="c1")
        )
    )
    thread.start()
    from_loop = asyncio.ensure_future(gate.decide("s", "deploy", {"env": "dev"}, call_id="c2"))
    for _ in range(500):  # both calls parked on alice
        if len(await alice.decisions.list()) == 2:
            break
        await asyncio.sleep(0.02)
    assert len(await alice.decisions.list()) == 2
    run_id = gate.run_id("s")

    await asyncio.to_thread(gate.close)
    thread.join(10)
    assert not thread.is_alive()  # the sync caller was not left blocked forever
    assert from_thread == [Outcome(False, f"deploy was not run: {CLOSED}")]
    assert await asyncio.wait_for(from_loop, 10) == Outcome(False, f"deploy was not run: {CLOSED}")

    # The gate is usable again, on a new loop, with the same run for the same session.
    asked = asyncio.ensure_future(gate.decide("s", "lookup", {"q": "x"}, call_id="c3"))
    assert (await asyncio.wait_for(asked, 10)).allowed
    assert gate.run_id("s") == run_id
    again = asyncio.ensure_future(gate.decide("s", "deploy", {"env": "qa"}, call_id="c4"))
    await (await _parked_with(alice, {"env": "qa"})).approve()
    assert (await asyncio.wait_for(again, 10)).allowed
    for decision in await alice.decisions.list():  # leave nothing parked for the next test
        await decision.deny("cleanup")
    await asyncio.to_thread(gate.close)


@on_the_loop
async def test_the_framework_cancelling_a_call_still_cancels(
    api: Served, alice: sdk.Workspace
) -> None:
    gate = gate_for(find_target(**keywords(api)), "gate-cancel")
    waiting = asyncio.ensure_future(gate.decide("s", "deploy", {"env": "x"}, call_id="c1"))
    await parked_decision(alice)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    for decision in await alice.decisions.list():
        await decision.deny("cleanup")
    await asyncio.to_thread(gate.close)


@on_the_loop
async def test_a_sync_call_on_the_gates_own_loop_returns_instead_of_hanging(api: Served) -> None:
    gate = gate_for(find_target(**keywords(api)), "gate-own-loop")

    async def inside() -> Outcome:
        return gate.decide_sync("s", "lookup", {"q": "x"})

    future = asyncio.run_coroutine_threadsafe(inside(), gate._loop_started().loop)
    outcome = await asyncio.wait_for(asyncio.wrap_future(future), 10)
    assert not outcome.allowed
    assert outcome.message.startswith("lookup was not run: a sync entry point was called")
    await asyncio.to_thread(gate.close)


def test_the_token_stays_out_of_reprs_and_the_models_text() -> None:
    target = find_target(url="http://bob:pw@127.0.0.1:1/", token="abs_very_secret")
    assert "abs_very_secret" not in repr(target)
    assert "abs_very_secret" not in repr(Target(token="abs_very_secret"))
    assert shown_url(target.url) == "http://127.0.0.1:1"
    gate = gate_for(find_target(url=closed_port(), token="abs_very_secret"), "x")
    outcome = gate.decide_sync("s", "deploy", {})
    assert outcome.message.startswith("deploy was not run: approvalbot is unreachable at http")
    assert "abs_very_secret" not in outcome.message
    # A URL aiohttp cannot use (credentials in it and a token): not run, no exception, no secret.
    odd = gate_for(find_target(url="http://bob:pw@127.0.0.1:1", token="abs_very_secret"), "x")
    outcome = odd.decide_sync("s", "deploy", {})
    assert outcome == Outcome(
        False, "deploy was not run: approvalbot could not be asked (ValueError)"
    )
    gate.close()
    odd.close()


def test_a_process_that_never_closes_its_gates_exits_cleanly(tmp_path: Path) -> None:
    """No "Unclosed client session" at exit, no hang: the gates close themselves."""
    script = (
        "from adapters.frameworks.gate import close_gates, find_target, gate_for\n"
        f"gate = gate_for(find_target(url={closed_port()!r}, token='t', workspace='w'), 'x')\n"
        "print(gate.decide_sync('s', 'deploy', {}).allowed)\n"
        "close_gates()\n"  # a bridge that keeps its gate and uses it again after this
        "print(gate.decide_sync('s', 'deploy', {}).allowed)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **bytecode_env()},
    )
    assert (done.returncode, done.stdout.split()) == (0, ["False", "False"])
    assert "Unclosed" not in done.stderr, done.stderr


@on_the_loop
async def test_a_gate_remembers_a_bounded_number_of_sessions(
    api: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The least recently used session is forgotten first; a forgotten one declares anew."""
    monkeypatch.setattr(gate_module, "MAX_SESSIONS", 2)
    gate = gate_for(find_target(**keywords(api)), "gate-bound")
    for session in ("a", "b"):
        assert (await gate.decide(session, "lookup", {"q": session})).allowed
    first_a = gate.run_id("a")
    assert (await gate.decide("a", "lookup", {"q": "again"})).allowed  # "a" used last now
    assert (await gate.decide("c", "lookup", {"q": "c"})).allowed
    assert gate.run_id("b") is None and gate.run_id("a") == first_a and gate.run_id("c")
    assert (await gate.decide("b", "lookup", {"q": "b"})).allowed
    assert gate.run_id("b") is not None and gate.run_id("a") is None
    await asyncio.to_thread(gate.close)


@on_the_loop
async def test_a_call_reaching_a_loop_that_is_stopping_ends_not_run(api: Served) -> None:
    """The race of a call with `close` from another thread, made certain: the call finds the
    loop it was handed already stopping. It ends "not run" (not a hang, not an exception)."""
    gate = gate_for(find_target(**keywords(api)), "gate-stopping")
    stopping = gate._loop_started()
    await asyncio.to_thread(stopping.stop, asyncio.sleep(0))
    assert gate._loop is stopping  # as a caller that fetched it just before `close` sees it
    assert await asyncio.to_thread(gate.decide_sync, "s", "lookup", {}) == Outcome(
        False, f"lookup was not run: {CLOSED}"
    )
    assert await gate.ask("s", "?") == Answer(False, f"the question was not asked: {CLOSED}")
    gate.close()
    assert (await gate.decide("s", "lookup", {"q": "after"})).allowed  # a new loop
    await asyncio.to_thread(gate.close)


@on_the_loop
async def test_a_call_withdrawn_while_it_waits_tells_the_model_so(
    api: Served, alice: sdk.Workspace
) -> None:
    gate = gate_for(find_target(**keywords(api)), "gate-withdrawn")
    waiting = asyncio.ensure_future(gate.decide("s", "deploy", {"env": "prod"}, call_id="w1"))
    found = await _parked_with(alice, {"env": "prod"})
    await found.run.withdraw(found.task.key, reason="not needed")
    outcome = await asyncio.wait_for(waiting, 20)
    assert outcome == Outcome(
        False, "deploy was not run: the call was withdrawn (withdrawn by alice: not needed)"
    )
    await asyncio.to_thread(gate.close)
