"""Executors over HTTP: register, inbox of approval/ask rows, claim/commit refused as
not_claimable_kind, the work_available cable with resume, and revocation."""

from __future__ import annotations

import asyncio

import pytest

from adapters.http import models as m
from adapters.http.client import parse_sse
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()


async def setup_run(api: Served) -> tuple[str, str]:
    status, executor = await api.call("POST", "/executors", body={"name": "worker-1"})
    assert status == 201 and set(executor) == {"id", "name", "revoked"}
    status, run = await api.call("POST", "/runs", body={"executor_id": executor["id"]})
    assert status == 201 and run["executor_id"] == executor["id"]
    for body in (
        {"key": "k1", "tool_name": "bash", "tool_input": {"command": "deploy"}},
        {"key": "q1", "tool_name": "ask", "tool_input": {"prompt": "Region?"}},
    ):
        assert (await api.call("POST", f"/runs/{run['id']}/tasks", body=body))[0] == 201
    return executor["id"], run["id"]


async def test_inbox_and_claims(api: Served) -> None:
    executor, run = await setup_run(api)
    status, body = await api.call("GET", f"/executors/{executor}")
    assert (status, body["name"], body["revoked"]) == (200, "worker-1", False)
    status, inbox = await api.call("GET", f"/executors/{executor}/inbox")
    assert status == 200
    rows = m.InboxOut.model_validate(inbox).items
    assert sorted((r.kind, r.run_id, r.key, r.state) for r in rows) == [
        ("approval", run, "k1", "needs_approval"),
        ("ask", run, "q1", "awaiting_input"),
    ]
    for verb in ("claim", "commit"):
        for key, kind in (("k1", "approval"), ("q1", "ask")):
            status, body = await api.call(
                "POST", f"/executors/{executor}/{verb}", body={"run_id": run, "task_key": key}
            )
            assert (status, body["error"]["code"]) == (409, "not_claimable_kind")
            assert body["error"]["kind"] == kind
        status, body = await api.call(
            "POST", f"/executors/{executor}/{verb}", body={"run_id": run, "task_key": "nope"}
        )
        assert (status, body["error"]["code"]) == (404, "not_found")
        status, body = await api.call("POST", f"/executors/{executor}/{verb}", body={"run_id": 1})
        assert status == 422 and "task_key" in body["error"]["detail"]
    # a person decides; the row leaves the inbox
    await api.call("POST", f"/runs/{run}/tasks/k1/approve", "alice")
    _, inbox = await api.call("GET", f"/executors/{executor}/inbox")
    assert [row["key"] for row in inbox["items"]] == ["q1"]
    assert (await api.call("GET", "/executors/exe_nope/inbox"))[0] == 404


async def test_cable_carries_work_available_and_resumes(api: Served) -> None:
    executor, run = await setup_run(api)
    headers = {"Authorization": f"Bearer {api.token('agent')}"}
    url = api.path(f"/executors/{executor}/cable")

    async def take(after: int | None, count: int) -> list[m.FeedEvent]:
        sent = headers | ({"Last-Event-ID": str(after)} if after is not None else {})
        got: list[m.FeedEvent] = []
        async with api.session.get(url, headers=sent) as response:
            assert response.status == 200

            async def read() -> None:
                async for event in parse_sse(response.content):
                    got.append(event)
                    if len(got) >= count:
                        return

            await asyncio.wait_for(read(), 5)
        return got

    first = await take(None, 2)
    assert sorted((e.event, e.data["key"], e.data["kind"]) for e in first) == [
        ("work_available", "k1", "approval"),
        ("work_available", "q1", "ask"),
    ]
    assert all(e.data["executor_id"] == executor and e.data["run_id"] == run for e in first)
    await api.call(
        "POST", f"/runs/{run}/tasks",
        body={"key": "k2", "tool_name": "bash", "tool_input": {"command": "x"}},
    )  # fmt: skip
    rest = await take(first[-1].id, 1)
    assert [e.data["key"] for e in rest] == ["k2"] and rest[0].id > first[-1].id


async def test_revoking_clears_the_addressee(api: Served) -> None:
    executor, run = await setup_run(api)
    status, body = await api.call("DELETE", f"/executors/{executor}")
    assert (status, body) == (200, {"id": executor, "revoked": True, "cleared": 2})
    tasks = await api.core.store.tasks(api.ws, run_id=run)
    assert {(t.key, t.state, t.addressee) for t in tasks} == {
        ("k1", "needs_approval", None),
        ("q1", "awaiting_input", None),
    }
    # people still decide them; the executor is gone for its own routes
    status, task = await api.call("POST", f"/runs/{run}/tasks/k1/approve", "bob")
    assert (status, task["state"]) == (200, "granted")
    for tail in ("/inbox", "/cable"):
        assert (await api.call("GET", f"/executors/{executor}{tail}"))[0] == 404
    status, body = await api.call("GET", f"/executors/{executor}")
    assert (status, body["revoked"]) == (200, True)
    status, body = await api.call("DELETE", f"/executors/{executor}")
    assert (status, body["cleared"]) == (200, 0)
    status, body = await api.call("POST", "/runs", body={"executor_id": executor})
    assert status == 404


async def test_register_refusals(api: Served) -> None:
    for body in ({}, {"name": ""}, {"name": "x" * 201}, {"name": 5}, {"name": "a", "b": 1}):
        status, answer = await api.call("POST", "/executors", body=body)
        assert (status, answer["error"]["code"]) == (422, "invalid_request"), body
