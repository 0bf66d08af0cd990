"""Server-Sent Events for the SDK: follow a feed across drops, resuming from the last event id."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import aiohttp

from adapters.http import models as m
from adapters.http.sdk_errors import error_from

if TYPE_CHECKING:
    from adapters.http.client import Client


async def follow(client: Client, path: str, last_event_id: int = 0) -> AsyncIterator[m.FeedEvent]:
    """Yield events from an SSE route forever, reconnecting with `Last-Event-ID` after drops."""
    last = last_event_id
    pause = 0.1
    while True:
        try:
            headers = client.headers({"Accept": "text/event-stream"})
            if last:
                headers["Last-Event-ID"] = str(last)
            # Never a total: a feed lasts as long as it is followed; connecting is bounded.
            timeout = client.timeout(aiohttp.ClientTimeout(total=None, sock_read=60))
            async with client.session.get(
                client.url + path, headers=headers, timeout=timeout
            ) as response:
                if response.status >= 400:
                    raise error_from(response.status, await response.text())
                pause = 0.1
                async for event in parse_sse(response.content):
                    last = event.id
                    yield event
        except (TimeoutError, aiohttp.ClientConnectionError, aiohttp.ClientPayloadError):
            pass  # dropped: reconnect from `last`
        await asyncio.sleep(pause)
        pause = min(5.0, pause * 2)


async def parse_sse(stream: aiohttp.StreamReader) -> AsyncIterator[m.FeedEvent]:
    event_id, name = 0, "message"
    data: list[str] = []
    async for raw in stream:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                yield m.FeedEvent(id=event_id, event=name, data=json.loads("\n".join(data)))
            name, data = "message", []
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "id" and value.isdigit():
            event_id = int(value)
        elif field == "event":
            name = value
        elif field == "data":
            data.append(value)
