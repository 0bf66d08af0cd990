"""Issue 21 (10): `POST /slack/events` without a usable `X-Slack-Request-Timestamp` (absent,
empty, not a number) is a 401 and logs nothing above debug, never a 500 with a traceback."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from store.sql import SqlStore
from tests.slack_harness import slack_world


@pytest.mark.parametrize("timestamp", [None, "", "soon", "１２３", "12.5", "-1", "1e9"])
async def test_a_request_without_a_usable_timestamp_is_401(
    sqlite_store: SqlStore, caplog: pytest.LogCaptureFixture, timestamp: str | None
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"X-Slack-Signature": "v0=" + "0" * 64, "Content-Type": "application/json"}
    if timestamp is not None:
        headers["X-Slack-Request-Timestamp"] = timestamp
    async with slack_world(sqlite_store) as sl, aiohttp.ClientSession() as client:
        async with client.post(sl.events_url, data=b'{"type": "event_callback"}',
                               headers=headers) as answer:  # fmt: skip
            assert answer.status == 401
            body = await answer.json()
    assert body["error"]["code"] == "unauthorized"
    loud = [r for r in caplog.records if r.levelno > logging.DEBUG and r.exc_info]
    assert not loud and "Traceback" not in caplog.text
