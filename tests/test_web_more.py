"""The page's long lists made whole: a run's timeline page by page through its whole log (plain
HTTP, SQLite and PostgreSQL), the inbox's "Show N more" opened in place, and a desktop
notification that names the new call without its secret (Debian's Chromium)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from axe_playwright_python.async_playwright import Axe  # type: ignore[import-untyped]
from playwright.async_api import Browser

from adapters.web import queue, views
from store.sql import LOG, SqlStore
from tests.browser_helpers import CHROMIUM, LIVE, serious, signed_in
from tests.conftest import World
from tests.web_helpers import (
    Site,
    append,
    browserless,
    bulk_park,
    declare,
    get_text,
    sign_in,
    site,
)

needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} missing")
STEPS = 650
TASKS = 501  # the run page reads a run's newest 500 tasks; older pages fetch the rest


async def long_run(world: World) -> str:
    """A run whose log holds STEPS entries: its declaration, then denials written straight into
    the log in one statement (a thousand decisions through the service would take seconds).
    The first TASKS of them are about its parked calls (more than the page reads at once)."""
    (run_id,) = await bulk_park(world, runs=1, per_run=TASKS)
    store = world.core.store
    assert isinstance(store, SqlStore)
    at = world.clock.now().timestamp()
    rows = [
        {"workspace_id": world.ws, "run_id": run_id, "task_key": f"call-{i}", "action": "denied",
         "actor": "alice", "via": "web", "detail": {"reason": f"no {i}"}, "at": at + i}
        for i in range(STEPS - 1)
    ]  # fmt: skip
    async with store.write() as tx:
        await tx.conn.execute(sa.insert(LOG), rows)
    return run_id


def _step_texts(html: str) -> list[str]:
    body = html.split('<ol class="timeline">', 1)[1].split("</ol>", 1)[0]
    return [" ".join(re.sub(r"<[^>]+>", " ", s.split("<details", 1)[0]).split())
            for s in body.split('<li class="step')[1:]]  # fmt: skip


def _link(html: str, cls: str) -> str | None:
    found = re.search(rf'<a class="{cls}"[^>]* href="([^"]+)"', html)
    return found.group(1).replace("&amp;", "&") if found else None


async def test_a_long_run_reads_page_by_page_to_its_first_step(world: World) -> None:
    run_id = await long_run(world)
    small = await declare(world, title="a short one")
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        status, html = await get_text(client, f"{s.url}/runs/{run_id}")
        assert status == 200
        assert f"showing the latest {views.FEED_LIMIT} of {STEPS} steps" in html
        assert _link(html, "newest-steps") is None
        pages = [_step_texts(html)]
        older = _link(html, "older-steps")
        while older is not None:
            status, html = await get_text(client, s.url + older)
            assert status == 200
            assert _link(html, "newest-steps") == f"/runs/{run_id}"
            pages.append(_step_texts(html))
            older = _link(html, "older-steps")
        # The oldest page: the run's start, counted from 1.
        assert f"showing steps 1–{STEPS % views.FEED_LIMIT} of {STEPS}" in html
        assert pages[1] and "showing steps" not in "".join(pages[1])
        steps = [text for page in reversed(pages) for text in page]
        assert len(steps) == STEPS and all(len(p) <= views.FEED_LIMIT for p in pages)
        assert "started the run" in steps[0]
        # Each entry once, in order; those about a call are titled by it, the oldest too.
        numbers = [re.search(r"(?:call-|rebuild item )(\d+)", t) for t in steps[1:]]
        assert [int(n.group(1)) if n else -1 for n in numbers] == list(range(STEPS - 1))
        assert "alice denied: rebuild item 0 " in steps[1]
        assert f"alice denied: call-{TASKS}" in steps[TASKS + 1]
        # Revealed, the pages stay revealed.
        _, html = await get_text(client, f"{s.url}/runs/{run_id}?reveal=1")
        assert (_link(html, "older-steps") or "").endswith("&reveal=1")

        for bad in ("abc", "-1", "0", "1e3", "9" * 30, "１２", "%00", "3.5", "2147483648"):
            status, html = await get_text(client, f"{s.url}/runs/{run_id}?before={bad}")
            assert status == 400, bad
            assert "invalid_cursor" in html and "Invalid request" in html
        # Before the first entry: nothing, and the way back.
        status, html = await get_text(client, f"{s.url}/runs/{run_id}?before=1")
        assert status == 200 and "no steps before this point" in html
        assert _link(html, "newest-steps") == f"/runs/{run_id}"
        # A short run has no pages.
        _, html = await get_text(client, f"{s.url}/runs/{small}")
        assert "older-steps" not in html and "showing" not in html


def _cards(html: str) -> list[str]:
    return re.findall(r'<article class="card [^"]*" data-id="([^"]+)"', html)


async def test_a_groups_next_cards_come_as_a_fragment_by_cursor(world: World) -> None:
    (run_id,) = await bulk_park(world, runs=1, per_run=queue.CARDS_PER_RUN_PAGE + 5)
    async with site(world) as s, browserless() as client:
        assert (await get_text(client, f"{s.url}/web/inbox?cards=1&run={run_id}"))[0] == 401
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/inbox")
        shown = _cards(html)
        assert len(shown) == queue.CARDS_PER_GROUP
        first = _link(html, "more")
        assert first == f"/inbox?run={run_id}"  # the link without the script
        found = re.search(r'data-cards="([^"]+)"', html)
        assert found is not None
        status, more = await get_text(client, s.url + found.group(1).replace("&amp;", "&"))
        assert status == 200 and 'data-waiting="30"' in more
        batch = _cards(more)
        assert len(batch) == queue.CARDS_PER_RUN_PAGE and not set(batch) & set(shown)
        assert 'name="next" value="/inbox"' in more  # a decision comes back to the inbox
        found = re.search(r'data-cards="([^"]+)"', more)
        assert found is not None
        _, last = await get_text(client, s.url + found.group(1).replace("&amp;", "&"))
        rest = _cards(last)
        assert len(shown + batch + rest) == 30 == len(set(shown + batch + rest))
        assert "data-cards" not in last
        # A live refresh asks for an opened group as it stands; what it could not send is left out.
        _, fresh = await get_text(client, f"{s.url}/web/inbox?open=12~{run_id}&open=x~y&open=9")
        assert _cards(fresh) == (shown + batch)[:12]
        for bad in ("cards=1", f"cards=1&run={run_id}&before=nope", f"cards=1&run={run_id}&page=0"):
            status, html = await get_text(client, f"{s.url}/web/inbox?{bad}")
            assert status == 422 and "invalid_request" in html, bad


# in Chromium ----------------------------------------------------------------------------------
@needs_chromium
@pytest.mark.asyncio(loop_scope="module")
async def test_show_more_opens_in_place_and_the_keyboard_works_the_new_cards(
    browser: Browser, served: Site
) -> None:
    world = served.world
    busy = await declare(world, title="migrate the database")
    for n in range(queue.CARDS_PER_GROUP + 3):
        await append(world, busy, "bash", {"command": f"psql -f step{n}.sql"})
        await world.clock.advance(1)
    other = await declare(world, title="tidy the docs")
    await append(world, other, "bash", {"command": "rm -r docs/old"})
    page = await signed_in(browser, served)
    group = page.locator('details.group:has-text("migrate the database")')
    more = group.locator("a.more")
    assert await more.get_attribute("href") == f"/inbox?run={busy}"  # without the script
    await more.click()
    cards = group.locator("article.card")
    await cards.nth(5).wait_for(timeout=LIVE)
    assert await page.evaluate("window.__sameDocument === true")
    assert await more.count() == 0  # every card is shown: no link left
    assert "6 waiting" in await group.locator("summary").inner_text()
    texts = [await cards.nth(i).locator("pre").inner_text() for i in range(6)]
    assert texts == [f"psql -f step{n}.sql" for n in range(5, -1, -1)]
    # Focus on the first new card; the keyboard goes on from there.
    assert await page.evaluate("document.activeElement.dataset.id") == await cards.nth(
        3
    ).get_attribute("data-id")
    await page.keyboard.press("j")
    assert "step1.sql" in await page.locator("article.card.current pre").inner_text()
    found = serious(await Axe().run(page))
    assert found == [], found

    # A live refresh keeps the group open, its count true.
    await world.clock.advance(1)
    await append(world, busy, "bash", {"command": "psql -f step6.sql"})
    await page.wait_for_function(
        "() => document.getElementById('inbox-total').textContent === '(8)'", timeout=LIVE
    )
    group = page.locator('details.group:has-text("migrate the database")')
    await group.locator('article.card:has-text("step6.sql")').wait_for(timeout=LIVE)
    assert await group.locator("article.card").count() == 6
    assert "7 waiting" in await group.locator("summary").inner_text()
    assert await group.locator("a.more").inner_text() == "Show 1 more"

    # d types a reason into the current (opened) card, Enter denies it.
    current = page.locator("article.card.current")
    assert "step1.sql" in await current.locator("pre").inner_text()
    await page.keyboard.press("d")
    await page.keyboard.type("not tonight")
    await page.keyboard.press("Enter")
    await page.wait_for_function("() => window.__sameDocument !== true", timeout=LIVE)
    ended = [t for t in await world.core.store.tasks(world.ws, run_id=busy) if not t.parked]
    assert [t.tool_input["command"] for t in ended] == ["psql -f step1.sql"]
    assert ended[0].error is not None and "not tonight" in str(ended[0].error)
    await page.context.close()


NOTES = """
window.__notes = [];
Object.defineProperty(Document.prototype, "visibilityState", { get: () => "hidden" });
const Real = window.Notification;
function Recorded(title, options) {
  window.__notes.push({ title: title, body: (options && options.body) || "" });
  this.close = function () {};
}
Object.defineProperty(Recorded, "permission", { get: () => Real.permission });
Recorded.requestPermission = (...args) => Real.requestPermission(...args);
window.Notification = Recorded;
"""


@needs_chromium
@pytest.mark.asyncio(loop_scope="module")
async def test_a_new_park_notifies_with_its_tool_and_never_its_secret(
    browser: Browser, served: Site
) -> None:
    world = served.world
    page = await signed_in(browser, served, permissions=["notifications"])
    await page.context.add_init_script(NOTES)
    await page.goto(f"{served.url}/inbox")
    await page.click("#notify-button")
    await page.wait_for_function(
        "() => document.getElementById('notify-button').getAttribute('aria-pressed') === 'true'",
        timeout=LIVE,
    )
    await page.goto(f"{served.url}/runs")  # not the inbox: the card comes from its fragment
    await page.wait_for_selector('body[data-live="1"]', timeout=LIVE)
    run_id = await declare(world, title="nightly backup")
    secret = "hunter2-s3cr3t-value"
    await append(world, run_id, "bash", {"command": f"PGPASSWORD={secret} pg_dump shop"})
    await page.wait_for_function("() => window.__notes.length === 1", timeout=LIVE)
    (note,) = await page.evaluate("window.__notes")
    assert note["title"] == "approvalbot: bash waits for you"
    assert "pg_dump shop" in note["body"] and "1 waiting in all" in note["body"]
    assert secret not in note["title"] + note["body"]
    await page.context.close()
