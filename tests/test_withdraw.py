"""Withdrawing a parked call or question (bot/lifecycle/withdraw.py): the agent stopped waiting,
so the park ends `cancelled` with error `withdrawn` and nobody approves it any more. Through the
API (who may, the log entry, bad bodies), the core (a withdrawal racing an approval ends the
task once), the SDK, and a chat's decision message. On SQLite and PostgreSQL; the Claude Code
hook's withdrawal when its wait runs out is in tests/test_claude_code_hook.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.http import client as sdk
from adapters.http.sdk_errors import ApiError
from adapters.http.sync_client import SyncClient
from bot.errors import ApprovalError
from bot.service import CallSpec
from store.sql import SqlStore
from tests.chat_drivers import PLATFORMS, WS, ChatDriver, open_driver
from tests.http_harness import Served, fixtures, sdk_fixtures
from tests.web_helpers import browserless, get_text, sign_in

server, api = fixtures()
agent, person = sdk_fixtures()
ON_THE_SERVER = pytest.mark.asyncio(loop_scope="module")
QUESTION = {"prompt": "Which region?", "options": ["eu", "us"]}


async def parked(api: Served, key: str, tool_input: Any = None, tool: str = "bash") -> str:
    """A run of the agent's with one parked call (or, with tool `ask`, question): its id."""
    status, run = await api.call("POST", "/runs", body={"approval_mode": "ask"})
    assert status == 201
    body = {"tool_name": tool, "tool_input": tool_input or {"command": "make deploy"}, "key": key}
    status, task = await api.call("POST", f"/runs/{run['id']}/tasks", body=body)
    assert status == 201 and task["state"] in ("needs_approval", "awaiting_input"), task
    return str(run["id"])


async def withdrawals(api: Served, run_id: str) -> list[dict[str, Any]]:
    """The run's `withdrawn` log entries, as a member reads them."""
    status, log = await api.call("GET", f"/log?run_id={run_id}", "alice")
    assert status == 200
    return [e for e in log["entries"] if e["action"] == "withdrawn"]


# the API ---------------------------------------------------------------------------------------
@ON_THE_SERVER
async def test_the_agent_withdraws_a_parked_call_and_a_question(api: Served) -> None:
    for tool, tool_input in (("bash", None), ("ask", QUESTION)):
        run_id = await parked(api, "k1", tool_input, tool)
        path = f"/runs/{run_id}/tasks/k1/withdraw"
        status, task = await api.call("POST", path, body={"reason": "  stopped waiting \n"})
        assert status == 200, task
        assert (task["state"], task["resolved_by"], task["via"]) == ("cancelled", "agent", "api")
        assert task["error"] == {
            "code": "withdrawn",
            "detail": "withdrawn by agent: stopped waiting",
        }
        [entry] = await withdrawals(api, run_id)
        assert (entry["actor"], entry["via"], entry["task_key"]) == ("agent", "api", "k1")
        assert entry["detail"] == {"reason": "stopped waiting", "principal_kind": "application"}
        # Nothing rests on people any more, and a second withdrawal (or a review) is too late.
        status, asks = await api.call("GET", f"/asks?run_id={run_id}", "alice")
        assert status == 200 and asks["asks"] == []
        status, again = await api.call("POST", path)
        assert (status, again["error"]["code"]) == (409, "already_decided")
        assert again["error"]["state"] == "cancelled"
        assert again["error"]["outcome"] == "withdrawn"
    # History's outcome filter finds them by the word people read.
    async with browserless() as client:
        await sign_in(client, api.url, api.token("alice"))
        status, page = await get_text(client, f"{api.url}/history?outcome=withdrawn")
        assert status == 200 and "withdrawn" in page and "Which region?" in page
        status, page = await get_text(client, f"{api.url}/history?outcome=cancelled")
        assert status == 200 and "Which region?" not in page


@ON_THE_SERVER
async def test_who_may_withdraw(api: Served) -> None:
    run_id = await parked(api, "k1")
    path = f"/runs/{run_id}/tasks/k1/withdraw"
    status, refused = await api.call("POST", path, "other-agent")  # not its run
    assert (status, refused["error"]["code"]) == (403, "member_credential_required")
    for stranger in ("carol", "beta-agent"):  # another workspace's credentials
        status, refused = await api.call("POST", path, stranger)
        assert (status, refused["error"]["code"]) == (404, "not_found")
    status, missing = await api.call("POST", f"/runs/{run_id}/tasks/nope/withdraw")
    assert (status, missing["error"]["code"]) == (404, "not_found")
    status, task = await api.call("POST", path, "alice")  # a member may, saying nothing
    assert status == 200 and task["state"] == "cancelled"
    assert task["error"] == {"code": "withdrawn", "detail": "withdrawn by alice"}
    [entry] = await withdrawals(api, run_id)
    assert (entry["actor"], entry["detail"]) == (
        "alice",
        {"reason": "", "principal_kind": "member"},
    )


@ON_THE_SERVER
async def test_an_ended_task_cannot_be_withdrawn_and_bad_bodies_are_refused(api: Served) -> None:
    run_id = await parked(api, "k1")
    path = f"/runs/{run_id}/tasks/k1/withdraw"
    for sent in ({"reason": "x" * 501}, {"reason": 7}, {"why": "typo"}, ["x"], {"reason": "a\0b"}):
        status, answer = await api.call("POST", path, raw=json.dumps(sent).encode())
        assert (status, answer["error"]["code"]) == (422, "invalid_request"), sent
    status, _ = await api.call("POST", f"/runs/{run_id}/tasks/k1/approve", "alice")
    assert status == 200
    status, late = await api.call("POST", path, body={"reason": "too late"})
    assert (status, late["error"]["code"]) == (409, "already_decided")
    assert (late["error"]["state"], late["error"]["resolved_by"]) == ("granted", "alice")
    assert await withdrawals(api, run_id) == []


# the core: exactly one ending --------------------------------------------------------------
@ON_THE_SERVER
async def test_a_withdrawal_racing_an_approval_ends_the_task_once(api: Served) -> None:
    service, admin = api.core.service, api.core.admin
    app = await admin.principal(api.ws, "application", "agent")
    alice = await admin.principal(api.ws, "member", "alice")
    status, run = await api.call("POST", "/runs", body={"approval_mode": "ask"})
    assert status == 201
    run_id = str(run["id"])
    outcomes: set[str] = set()
    for round_ in range(15):
        key = f"k{round_}"
        spec = CallSpec("bash", {"command": f"make deploy {round_}"}, key=key)
        assert (await service.append(app, api.ws, run_id, spec)).task.parked
        races = [
            service.withdraw(app, api.ws, run_id, key, reason="gave up"),
            service.approve(alice, api.ws, run_id, key),
        ]
        if round_ % 2:
            races.reverse()
        results = await asyncio.gather(*races, return_exceptions=True)
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(won) == 1 and len(lost) == 1, results
        assert isinstance(lost[0], ApprovalError) and lost[0].code == "already_decided"
        task = await service.get_task(app, api.ws, run_id, key)
        assert task.state == won[0].state in ("cancelled", "granted")
        outcomes.add(task.state)
    _, log = await api.call("GET", f"/log?run_id={run_id}", "alice")
    endings = [e for e in log["entries"] if e["action"] in ("withdrawn", "approved")]
    assert sorted(e["task_key"] for e in endings) == sorted(f"k{i}" for i in range(15))


# the SDK ---------------------------------------------------------------------------------------
@ON_THE_SERVER
async def test_the_sdk_withdraws(api: Served, agent: sdk.Workspace) -> None:
    run = await agent.runs.declare(approval_mode="ask")
    receipt = await run.append("bash", {"command": "make deploy"}, key="k1")
    assert receipt.parked
    task = await run.withdraw("k1", reason="no longer needed")
    assert task.state == "cancelled" and task.error is not None
    assert task.error["detail"] == "withdrawn by agent: no longer needed"
    with pytest.raises(ApiError) as refused:
        await run.withdraw("k1")
    assert (refused.value.status, refused.value.code) == (409, "already_decided")
    assert refused.value.detail.startswith("already withdrawn by agent at ")
    assert refused.value.body["outcome"] == "withdrawn"
    # A call waiting in `run.call` that is withdrawn meanwhile says so by its type.
    waiting = asyncio.ensure_future(run.call("bash", {"command": "make docs"}, key="k2"))
    for _ in range(2000):  # until the call is parked (its append may not have landed yet)
        try:
            if (await run.task("k2")).parked:
                break
        except ApiError as missing:
            assert missing.code == "not_found"
        await asyncio.sleep(0.01)
    await run.withdraw("k2", reason="done without it")
    with pytest.raises(sdk.CallWithdrawn) as withdrawn:
        await asyncio.wait_for(waiting, 20)
    assert withdrawn.value.code == "withdrawn"
    await run.append("ask", QUESTION, key="q1")

    def blocking() -> Any:
        with SyncClient(api.url, api.token("agent")) as client:
            return client.workspace(api.ws).runs.run(run.id).withdraw("q1")

    asked = await asyncio.to_thread(blocking)
    assert asked.state == "cancelled" and asked.error["detail"] == "withdrawn by agent"


# a chat ----------------------------------------------------------------------------------------
@pytest.fixture(params=PLATFORMS)
async def chat(request: pytest.FixtureRequest, sqlite_store: SqlStore) -> AsyncIterator[ChatDriver]:
    async with open_driver(request.param, sqlite_store) as driver:
        yield driver


@pytest.mark.usefixtures("ptb_timedelta")
async def test_the_chat_message_shows_the_withdrawal_without_buttons(chat: ChatDriver) -> None:
    await chat.park("k1")
    await chat.flush()
    message = chat.decision("make deploy k1")
    assert chat.shown(message).has_buttons
    await chat.service.withdraw(chat.agent, WS, chat.run_id, "k1", reason="stopped waiting")
    await chat.flush()

    def done() -> Any:
        shown = chat.shown(message)
        return None if shown.has_buttons else shown

    shown = await chat.eventually(done)
    assert "Withdrawn by agent" in shown.text and "stopped waiting" in shown.text
    assert "make deploy k1" in shown.text


@ON_THE_SERVER
async def test_the_store_tells_withdrawn_from_cancelled_by_the_error_code(api: Served) -> None:
    """History's outcome filters ask the store by error code: the one stopped-run cancellation
    is found under newer withdrawals, whatever the page's limit (a filter in Python after the
    query lost it once enough newer withdrawals came first)."""
    stopped = await parked(api, "s1")
    assert (await api.call("POST", f"/runs/{stopped}/stop"))[0] == 200
    for n in range(3):
        run_id = await parked(api, f"w{n}")
        assert (await api.call("POST", f"/runs/{run_id}/tasks/w{n}/withdraw"))[0] == 200
    store = api.core.store
    [cancelled] = await store.tasks(
        api.ws, states=["cancelled"], not_error_codes=("withdrawn",), limit=1
    )
    assert cancelled.key == "s1" and (cancelled.error or {}).get("code") == "run_stopped"
    withdrawn = await store.tasks(api.ws, states=["cancelled"], error_codes=("withdrawn",))
    assert {t.key for t in withdrawn} >= {"w0", "w1", "w2"} and "s1" not in {
        t.key for t in withdrawn
    }


def test_each_history_filter_finds_exactly_the_tasks_its_word_names() -> None:
    """ENDING_QUERIES is `ending_word` read backwards, for every state and error code."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from bot.decisions import ENDING_QUERIES, ending_word
    from bot.domain import Task

    base = Task(
        id="t", run_id="r", workspace_id="ws", key="k", kind="tool_call", origin="model",
        tool_name="bash", tool="bash", tool_input={}, state="granted",
        created_at=datetime(2026, 12, 1, tzinfo=UTC),
    )  # fmt: skip
    codes = (None, "approval_denied", "declined", "tool_not_declared", "withdrawn", "run_stopped")
    for state in ("granted", "failed", "resolved", "timed_out", "cancelled"):
        for code in codes:
            task = replace(base, state=state, error=None if code is None else {"code": code})
            for word, query in ENDING_QUERIES.items():
                found = (code or "") not in (query.not_error_codes or ()) and (
                    query.error_codes is None or (code or "") in query.error_codes
                )
                matches = state in query.states and found
                assert matches == (ending_word(task) == word), (state, code, word)
