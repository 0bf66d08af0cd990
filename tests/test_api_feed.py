"""The run feed (SSE): event names, ids, resume after a drop with no loss or repeat, live
wake-ups, and two instances on one PostgreSQL schema."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest

from adapters.http import models as m
from adapters.http import sse
from adapters.http.client import parse_sse
from bot.config import Settings
from bot.core import Core
from store.listen import PgListener
from store.sql import SqlStore
from tests.conftest import pg_dsn
from tests.http_harness import Served, fixtures, start_app

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()

FEED_NAMES = {
    "approval_required", "awaiting_human", "attention_required", "task_settled", "nudge",
    "run_held", "run_resumed", "run_stopped",
}  # fmt: skip


@asynccontextmanager
async def feed(
    api: Served, run: str, who: str = "agent", last: int | None = None, url: str | None = None
) -> AsyncIterator[aiohttp.ClientResponse]:
    headers = {"Authorization": f"Bearer {api.token(who)}"}
    if last is not None:
        headers["Last-Event-ID"] = str(last)
    target = (url or api.url) + f"/v1/workspaces/{api.ws}/runs/{run}/events"
    async with api.session.get(target, headers=headers) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        yield response


async def take(
    response: aiohttp.ClientResponse, count: int, timeout: float = 5
) -> list[m.FeedEvent]:
    got: list[m.FeedEvent] = []

    async def read() -> None:
        async for event in parse_sse(response.content):
            got.append(event)
            if len(got) >= count:
                return

    await asyncio.wait_for(read(), timeout)
    return got


async def append(api: Served, run: str, key: str, tool: str = "bash") -> None:
    body = {"key": key, "tool_name": tool, "tool_input": {"command": key}}
    if tool == "ask":
        body["tool_input"] = {"prompt": f"{key}?"}
    status, _ = await api.call("POST", f"/runs/{run}/tasks", body=body)
    assert status == 201


async def test_feed_resumes_without_loss_or_repeat(api: Served) -> None:
    _, executor = await api.call("POST", "/executors", body={"name": "w"})
    _, run = await api.call("POST", "/runs", body={"executor_id": executor["id"]})
    run_id = run["id"]
    await append(api, run_id, "k1")
    await append(api, run_id, "q1", "ask")
    async with feed(api, run_id) as response:
        first = await take(response, 3)
    # dropped mid-stream; the run moves on meanwhile
    await api.call("POST", f"/runs/{run_id}/tasks/k1/approve", "alice")
    await api.call("POST", f"/runs/{run_id}/tasks/q1/resolution", "bob", {"content": "yes"})
    await append(api, run_id, "k2")
    stored = [e for e in await api.core.store.events_after(run_id, 0)]
    expected = [(e.seq, e.name) for e in stored if e.name != "work_available"]
    assert any(e.name == "work_available" for e in stored)  # kept for the cable, not the feed

    async with feed(api, run_id, last=first[-1].id) as response:
        rest = await take(response, len(expected) - len(first))
    seen = [(e.id, e.event) for e in first + rest]
    assert seen == expected
    assert {name for _, name in seen} <= FEED_NAMES

    # the query parameter resumes the same way, and a live event arrives promptly
    target = api.path(f"/runs/{run_id}/events?last_event_id={expected[-1][0]}")
    headers = {"Authorization": f"Bearer {api.token('alice')}"}
    async with api.session.get(target, headers=headers) as response:
        reading = asyncio.create_task(take(response, 2, timeout=20))
        await asyncio.sleep(0.05)
        await api.call("POST", f"/runs/{run_id}/tasks/k2/deny", "alice", {"reason": "later"})
        live = await reading
    assert [e.event for e in live] == ["task_settled", "attention_required"]
    assert live[0].data["error"] == {"code": "approval_denied", "detail": "later"}
    assert live[1].data == {"reason": "cleared", "blocked_task_keys": []}


async def test_feed_frames_and_attention(api: Served) -> None:
    _, run = await api.call("POST", "/runs", body={})
    await append(api, run["id"], "k1")
    await append(api, run["id"], "q1", "ask")
    async with feed(api, run["id"]) as response:
        raw = b""
        while raw.count(b"\n\n") < 5:  # the retry hint and four events
            raw += await asyncio.wait_for(response.content.readany(), 3)
    assert raw.startswith(b"retry: 1000\n\n")
    assert b"id: 1\nevent: approval_required\ndata: {" in raw
    async with feed(api, run["id"]) as response:
        events = await take(response, 4)
    attention = [e.data for e in events if e.event == "attention_required"]
    assert attention[-1]["reason"] == "approval_required"
    assert sorted(attention[-1]["blocked_task_keys"]) == ["k1", "q1"]


async def test_feed_refusals(api: Served) -> None:
    _, run = await api.call("POST", "/runs", body={})
    for bad in ("abc", "-1", "1.5"):
        status, body = await api.call(
            "GET", f"/runs/{run['id']}/events", headers={"Last-Event-ID": bad}
        )
        assert (status, body["error"]["code"]) == (422, "invalid_request")
    assert (await api.call("GET", "/runs/run_nope/events"))[0] == 404


async def test_an_event_on_one_instance_reaches_a_subscriber_on_another(
    api: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    if api.server.schema is None:
        pytest.skip("two instances share work through PostgreSQL")
    # Only the LISTEN/NOTIFY wake-up can deliver within the test's timeout now.
    monkeypatch.setattr(sse, "RECHECK", 30.0)
    second_store = SqlStore(pg_dsn(), schema=api.server.schema)
    second = await Core.build(second_store, Settings(), clock=api.clock)
    listeners = [
        PgListener(pg_dsn(), api.core.hub.notify_run),
        PgListener(pg_dsn(), second.hub.notify_run),
    ]
    for listener in listeners:
        await listener.start()
    runner, url = await start_app(second, Settings())
    try:
        _, run = await api.call("POST", "/runs", body={})
        run_id = run["id"]
        async with feed(api, run_id, url=url) as on_second:
            await asyncio.sleep(0.1)  # subscribed and waiting
            reading = asyncio.create_task(take(on_second, 2, timeout=5))
            await append(api, run_id, "k1")  # written through the first instance
            events = await reading
        assert [e.event for e in events] == ["approval_required", "attention_required"]
        # and the other way round: decided on the second, seen on the first
        async with feed(api, run_id, last=events[1].id) as on_first:
            reading = asyncio.create_task(take(on_first, 1, timeout=5))
            await asyncio.sleep(0.1)
            headers = {"Authorization": f"Bearer {api.token('alice')}"}
            async with api.session.post(
                f"{url}/v1/workspaces/{api.ws}/runs/{run_id}/tasks/k1/approve", headers=headers
            ) as response:
                assert response.status == 200
            settled = await reading
        assert settled[0].event == "task_settled" and settled[0].data["resolved_by"] == "alice"
    finally:
        await runner.cleanup()
        for listener in listeners:
            await listener.stop()
        await second_store.close()
