"""How a run's work went, said when it is stopped: the stop's optional body (outcome, reason) on
the API, in the decision log and on the run's page; the SDK's run context saying `succeeded` or
`failed` (the exception's type name only). And the SDK's connect timeout against a loopback port
that never completes a connection. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.http import client as sdk
from adapters.http.sync_client import SyncClient
from tests.http_harness import Served, fixtures, sdk_fixtures
from tests.web_helpers import browserless, get_text, serving, sign_in

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()
agent, person = sdk_fixtures()


async def declared(api: Served) -> str:
    status, run = await api.call("POST", "/runs", body={"approval_mode": "ask"})
    assert status == 201
    return str(run["id"])


async def stops(api: Served, run_id: str) -> list[dict[str, Any]]:
    """The details of the run's `run_stopped` log entries, as a member reads them."""
    status, log = await api.call("GET", f"/log?run_id={run_id}", "alice")
    assert status == 200
    return [e["detail"] for e in log["entries"] if e["action"] == "run_stopped"]


# the API ---------------------------------------------------------------------------------------
async def test_a_stop_says_how_the_work_went_once(api: Served) -> None:
    run_id = await declared(api)
    body = {"outcome": "failed", "reason": "  ValueError \n"}
    status, run = await api.call("POST", f"/runs/{run_id}/stop", body=body)
    assert status == 200 and run["state"] == "stopped"
    expected = {"principal_kind": "application", "outcome": "failed", "reason": "ValueError"}
    assert await stops(api, run_id) == [expected]
    # Stopping again is a no-op: the first stop's outcome stays.
    status, again = await api.call("POST", f"/runs/{run_id}/stop", body={"outcome": "succeeded"})
    assert status == 200 and again["state"] == "stopped"
    assert await stops(api, run_id) == [expected]


async def test_a_stop_without_a_body_or_with_an_empty_one_says_nothing(api: Served) -> None:
    bodies: tuple[dict[str, str] | None, ...] = (None, {})
    for sent in bodies:
        run_id = await declared(api)
        status, run = await api.call("POST", f"/runs/{run_id}/stop", body=sent)
        assert status == 200 and run["state"] == "stopped"
        assert await stops(api, run_id) == [{"principal_kind": "application"}]


async def test_bad_stop_bodies_are_refused_and_stop_nothing(api: Served) -> None:
    run_id = await declared(api)
    refused: list[tuple[Any, int, str]] = [
        ({"outcome": "done"}, 422, "invalid_request"),
        ({"outcome": None, "reason": 7}, 422, "invalid_request"),
        ({"reason": "x" * 501}, 422, "invalid_request"),
        ({"reason": "a\u0000b"}, 422, "invalid_request"),
        ({"why": "typo"}, 422, "invalid_request"),
        (["failed"], 422, "invalid_request"),
        (b"outcome=failed", 422, "invalid_request"),
        (b'{"outcome": "failed", "outcome": "succeeded"}', 400, "invalid_json"),
    ]
    for sent, status_wanted, code in refused:
        raw = sent if isinstance(sent, bytes) else json.dumps(sent).encode()
        status, answer = await api.call("POST", f"/runs/{run_id}/stop", raw=raw)
        assert (status, answer["error"]["code"]) == (status_wanted, code), sent
    _, run = await api.call("GET", f"/runs/{run_id}")
    assert run["state"] == "running" and await stops(api, run_id) == []
    # 500 characters once stripped are within the bound.
    status, _ = await api.call("POST", f"/runs/{run_id}/stop", body={"reason": f" {'r' * 500} "})
    assert status == 200 and await stops(api, run_id) == [
        {"principal_kind": "application", "reason": "r" * 500}
    ]


# the SDK ---------------------------------------------------------------------------------------
async def test_the_run_context_says_succeeded_or_the_exceptions_type(
    api: Served, agent: sdk.Workspace
) -> None:
    async with agent.runs.declare(approval_mode="ask") as finished:
        pass
    with pytest.raises(ValueError, match="token=s3cret"):
        async with agent.runs.declare(approval_mode="ask") as failed:
            raise ValueError("token=s3cret")
    assert await stops(api, finished.id) == [
        {"principal_kind": "application", "outcome": "succeeded"}
    ]
    said = await stops(api, failed.id)
    assert said == [{"principal_kind": "application", "outcome": "failed", "reason": "ValueError"}]
    explicit = await agent.runs.declare(approval_mode="ask")
    stopped = await explicit.stop(outcome="failed", reason="tests are red")
    assert stopped.state == "stopped"
    assert (await stops(api, explicit.id))[0]["reason"] == "tests are red"


async def test_the_blocking_run_context_says_it_too(api: Served) -> None:
    def work() -> str:
        with SyncClient(api.url, api.token("agent")) as client:
            with pytest.raises(KeyError):
                with client.workspace(api.ws).runs.declare(approval_mode="ask") as run:
                    raise KeyError("secret")
            return run.id

    run_id = await asyncio.to_thread(work)
    said = await stops(api, run_id)
    assert said == [{"principal_kind": "application", "outcome": "failed", "reason": "KeyError"}]


# the page --------------------------------------------------------------------------------------
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


async def test_the_run_page_tells_how_the_work_went(api: Served) -> None:
    failed = {"outcome": "failed", "reason": "ValueError"}
    cases = [
        ("agent", failed, "finished by the agent (agent): failed — ValueError"),
        ("agent", {"outcome": "succeeded"}, "finished by the agent (agent): succeeded"),
        ("alice", {"reason": "wrong branch"}, "stopped by alice: wrong branch"),
        ("alice", {"outcome": "failed"}, "stopped by alice: failed"),
        # A reason is free text, shown to every member: a secret in it is masked.
        ("alice", {"reason": f"token {SECRET} leaked"}, "stopped by alice: token ghp_****"),
    ]
    pages = []
    for who, body, wanted in cases:
        run_id = await declared(api)
        status, _ = await api.call("POST", f"/runs/{run_id}/stop", who, body)
        assert status == 200
        pages.append((run_id, wanted))
    async with browserless() as client:
        await sign_in(client, api.url, api.token("alice"))
        for run_id, wanted in pages:
            status, page = await get_text(client, f"{api.url}/runs/{run_id}")
            assert status == 200 and wanted in page, wanted
            assert SECRET not in page
        status, listed = await get_text(client, f"{api.url}/runs")
        assert status == 200 and "token ghp_****" in listed and SECRET not in listed


# connecting (the `blackholed` fixture: tests/conftest.py) -------------------------------------
async def test_an_unanswered_connection_gives_up_after_connect_timeout(blackholed: str) -> None:
    client = sdk.Client(blackholed, "aba_unused", connect_timeout=1)
    # The feed's bounds: connecting bounded, reading and the whole as they were.
    feed = client.timeout(aiohttp.ClientTimeout(total=None, sock_read=60))
    assert (feed.total, feed.sock_read, feed.sock_connect, feed.connect) == (None, 60, 1, None)
    started = time.monotonic()
    try:
        with pytest.raises(aiohttp.ConnectionTimeoutError):
            # A GET, which is retried after other connection failures: not after this one.
            await asyncio.wait_for(client.workspace("acme").runs.run("run_x").get(), 20)
    finally:
        await client.close()
    assert time.monotonic() - started < 15


async def test_waiting_for_a_pooled_connection_is_not_a_connect_timeout() -> None:
    """The bound is on the socket's connect only: a request queued behind busy connections of
    the pool (as the 101st of 100 long-polls is) waits for one instead of giving up."""

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.6)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/slow", slow)
    async with serving(app) as (_, url):
        client = sdk.Client(url, "aba_unused", connect_timeout=0.2)
        client._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))
        try:
            answers = await asyncio.gather(*(client.request("GET", "/slow") for _ in range(2)))
        finally:
            await client.close()
    assert answers == [{"ok": True}, {"ok": True}]


RUN: dict[str, Any] = {
    "id": "run_old", "state": "running", "approval_mode": "ask", "approval_rules": [],
    "tool_names": None, "aliases": {}, "title": "", "profile": None, "executor_id": None,
    "parent_run": None, "held_task_key": None, "created_at": "2026-12-01T12:00:00Z",
}  # fmt: skip


async def test_the_run_context_stops_a_run_on_a_service_that_takes_no_outcome() -> None:
    """A service from before stops took a body refuses it (422 invalid_request): the block's
    end still stops the run, without the outcome."""
    bodies: list[bytes] = []

    async def declare(request: web.Request) -> web.Response:
        return web.json_response(RUN, status=201)

    async def stop(request: web.Request) -> web.Response:
        body = await request.read()
        bodies.append(body)
        if body:
            error = {"code": "invalid_request", "detail": "outcome: extra fields not permitted"}
            return web.json_response({"error": error}, status=422)
        return web.json_response(RUN | {"state": "stopped"})

    app = web.Application()
    app.router.add_post("/v1/workspaces/acme/runs", declare)
    app.router.add_post("/v1/workspaces/acme/runs/run_old/stop", stop)
    async with serving(app) as (_, url), sdk.Client(url, "aba_unused") as client:
        async with client.workspace("acme").runs.declare() as run:
            assert run.id == "run_old"
    assert [json.loads(b) if b else None for b in bodies] == [{"outcome": "succeeded"}, None]
