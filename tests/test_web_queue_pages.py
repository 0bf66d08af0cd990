"""The inbox at size, without a browser: grouped by run, paged, small whatever waits, with counts
that are the real totals; its live fragment and feed stay small too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from adapters.web import queue
from store.sql import SqlStore
from tests.conftest import make_world
from tests.web_helpers import append, browserless, bulk_park, declare, get_text, sign_in, site

pytestmark = pytest.mark.asyncio

PAGE_LIMIT = 300_000  # bytes: issue 14's bound for the inbox with 5,000 waiting


def _cards(html: str) -> int:
    return html.count('<article class="card')


def _group_counts(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<span class="waiting">(\d+) waiting</span>', html)]


async def test_five_thousand_waiting_in_one_run_make_a_small_page_with_true_counts(
    store: SqlStore,
) -> None:
    world = await make_world(store)
    (run_id,) = await bulk_park(world, runs=1, per_run=5000)
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        status, html = await get_text(client, f"{s.url}/inbox")
        assert status == 200
        assert len(html.encode()) <= PAGE_LIMIT
        assert '<span class="count" id="inbox-count">5000</span>' in html
        assert '<span class="muted" id="inbox-total">(5000)</span>' in html
        assert "<title>(5000) Inbox · approvalbot</title>" in html
        assert _group_counts(html) == [5000]
        assert _cards(html) == queue.CARDS_PER_GROUP
        assert f"Show {5000 - queue.CARDS_PER_GROUP} more" in html
        # The newest first: the last one the loop parked.
        assert "items/4999/rebuild" in html and "items/0/rebuild" not in html

        # The run's own queue, page by page through the cursor, to the oldest.
        status, html = await get_text(client, f"{s.url}/inbox?run={run_id}")
        assert status == 200 and len(html.encode()) <= PAGE_LIMIT
        assert _cards(html) == queue.CARDS_PER_RUN_PAGE and _group_counts(html) == [5000]
        older = re.search(r'<a class="older" href="([^"]+)"', html)
        assert older is not None
        status, html = await get_text(client, s.url + older.group(1).replace("&amp;", "&"))
        assert status == 200 and _cards(html) == queue.CARDS_PER_RUN_PAGE
        first = 5000 - queue.CARDS_PER_RUN_PAGE - 1
        assert f"items/{first}/rebuild" in html and f"items/{first + 1}/rebuild" not in html

        # What the live script swaps in is as small.
        status, fragment = await get_text(client, f"{s.url}/web/inbox")
        assert status == 200 and len(fragment.encode()) <= PAGE_LIMIT
        assert 'data-total="5000"' in fragment


async def test_five_thousand_waiting_over_many_runs_are_paged_by_run(store: SqlStore) -> None:
    world = await make_world(store)
    run_ids = await bulk_park(world, runs=500, per_run=10)
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/inbox")
        assert len(html.encode()) <= PAGE_LIMIT
        assert '<span class="muted" id="inbox-total">(5000)</span>' in html
        assert _group_counts(html) == [10] * queue.GROUPS_PER_PAGE
        assert _cards(html) == queue.GROUPS_PER_PAGE * queue.CARDS_PER_GROUP
        pages = 500 // queue.GROUPS_PER_PAGE
        assert f"page 1 of {pages} (500 runs)" in html
        assert "batch job 499" in html and "batch job 489" not in html  # newest run first
        _, html = await get_text(client, f"{s.url}/inbox?page=2")
        assert "batch job 489" in html and "batch job 499" not in html
        assert 'href="/inbox" rel="prev"' in html
        _, last = await get_text(client, f"{s.url}/inbox?page={pages}")
        assert "batch job 0<" in last and 'rel="next"' not in last
        # Past the end: the last page (a page emptied by decisions elsewhere still shows some).
        _, beyond = await get_text(client, f"{s.url}/inbox?page={pages + 5}")
        assert f"page {pages} of {pages}" in beyond
        assert run_ids[0] in beyond


async def test_an_odd_page_or_cursor_is_a_422_with_its_code(store: SqlStore) -> None:
    world = await make_world(store)
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "make deploy"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        for query in ("page=0", "page=-1", "page=two", "page=99999999999", "page=%C2%B2"):
            status, html = await get_text(client, f"{s.url}/inbox?{query}")
            assert status == 422 and "invalid_request: page" in html, query
        for cursor in ("yesterday", "2026-01-01T00:00:00", "2026-01-01T00:00:00+00:00~", "~x"):
            status, html = await get_text(client, f"{s.url}/inbox?run={run_id}&before={cursor}")
            assert status == 422 and "invalid_request: before" in html, cursor
        status, html = await get_text(client, f"{s.url}/inbox?run=no-such-run")
        assert status == 200 and "Nothing waits in this run any more." in html


async def test_the_feed_names_few_keys_and_the_true_count(store: SqlStore) -> None:
    world = await make_world(store)
    await bulk_park(world, runs=1, per_run=3000)
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        async with client.get(f"{s.url}/web/stream") as stream:
            data = await _first_event(stream)
        assert data["count"] == 3000
        assert isinstance(data["keys"], list) and len(data["keys"]) == queue.NEWEST_KEYS
        _, fragment = await get_text(client, f"{s.url}/web/inbox")
        assert f'data-version="{data["version"]}"' in fragment


async def test_the_favicon_is_served(store: SqlStore) -> None:
    world = await make_world(store)
    async with site(world) as s, browserless() as client:
        async with client.get(f"{s.url}/favicon.ico") as answer:
            assert answer.status == 200
            assert answer.headers["Content-Type"] == "image/x-icon"
            assert (await answer.read())[:4] == b"\x00\x00\x01\x00"  # an ICO header
        _, login = await get_text(client, f"{s.url}/login")
        linked = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', login)
        assert linked is not None
        async with client.get(s.url + linked.group(1)) as answer:
            assert answer.status == 200 and b"<svg" in await answer.read()
    icon = Path(queue.__file__).parent / "static" / "favicon.ico"
    assert icon.stat().st_size > 0


async def _first_event(stream: object) -> dict[str, object]:
    import aiohttp

    assert isinstance(stream, aiohttp.ClientResponse)
    name = None
    while True:
        raw = await stream.content.readline()
        assert raw, "the stream ended"
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: ") and name == "inbox":
            data: dict[str, object] = json.loads(line.removeprefix("data: "))
            return data
