"""Issue 21 (7): an open event stream ends once the credential that opened it is revoked: a
run feed opened with a member token, and an executor's cable opened with its application's
token. The recheck interval is shortened here (production: every 5 s, and before any events
are sent)."""

from __future__ import annotations

import asyncio

import pytest

from adapters.http import sse
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()


async def _ends_within(api: Served, path: str, token: str, revoke: str, seconds: float) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with api.session.get(api.path(path), headers=headers) as response:
        assert response.status == 200
        await response.content.readuntil(b"\n\n")  # the stream is open (its retry line)
        kind, name = revoke.split(":")
        await api.core.admin.revoke(api.ws, kind, name)

        async def drain() -> None:
            while await response.content.readany():
                pass

        await asyncio.wait_for(drain(), seconds)  # EOF: the server ended it


async def test_a_member_feed_ends_when_the_token_is_revoked(
    api: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sse, "CREDENTIAL_RECHECK", 0.2)
    status, run = await api.call("POST", "/runs", "agent", {"approval_mode": "ask"})
    assert status == 201
    token = (await api.core.admin.add_member(api.ws, "dora")).token
    await _ends_within(api, f"/runs/{run['id']}/events", token, "member:dora", 10)


async def test_an_executor_cable_ends_when_its_applications_token_is_revoked(
    api: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sse, "CREDENTIAL_RECHECK", 0.2)
    added = await api.core.admin.add_application(api.ws, "worker-app")
    api.tokens["worker-app"] = added.token
    status, executor = await api.call("POST", "/executors", "worker-app", {"name": "w1"})
    assert status == 201, executor
    path = f"/executors/{executor['id']}/cable"
    await _ends_within(api, path, added.token, "application:worker-app", 10)
