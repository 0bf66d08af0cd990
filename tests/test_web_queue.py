"""The inbox as a queue worth keeping open, in a real headless Chromium (Debian's `chromium`,
driven by playwright): grouped by run, relative times, the keyboard alone clearing a queue, the
phone layout, the favicon, accessibility (axe-core), the tab's title counting new parks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from axe_playwright_python.async_playwright import Axe  # type: ignore[import-untyped]
from playwright.async_api import Browser, Page

from adapters.web import queue
from bot.cli.demo import CALLS, DEMO_PROFILE, QUESTIONS, slug
from bot.service import CallSpec, RunSpec
from tests.browser_helpers import CHROMIUM, LIVE, serious, signed_in
from tests.conftest import World
from tests.web_helpers import Site, append, bulk_park, declare

PHONE = {"width": 390, "height": 844}

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} missing"),
]


async def demo_inbox(world: World) -> tuple[str, str]:
    """The inbox the README shows: the demo agent's calls and questions, in one run."""
    spec = RunSpec(
        approval_mode=DEMO_PROFILE["approval_mode"],
        approval_rules=DEMO_PROFILE["approval_rules"],
        aliases=DEMO_PROFILE["aliases"],
        title="demo: prepare the shop 1.4.0 release",
    )
    run = await world.core.service.declare_run(world.agent, world.ws, spec)
    parked = []
    for call in CALLS:
        receipt = await world.core.service.append(
            world.agent,
            world.ws,
            run.id,
            CallSpec(call.tool, call.input, key=call.key, effect_profile=call.profile),
        )
        if receipt.task.parked:
            parked.append(receipt.task.key)
        await world.clock.advance(7)
    for question in QUESTIONS:
        ask = CallSpec("ask", question, key=slug(str(question["prompt"])))
        await world.core.service.append(world.agent, world.ws, run.id, ask)
        await world.clock.advance(5)
    return run.id, parked[0]


async def test_cards_are_grouped_by_run_with_show_more_and_relative_times(
    browser: Browser, served: Site
) -> None:
    world = served.world
    busy = await declare(world, title="migrate the database")
    for n in range(5):
        await append(world, busy, "bash", {"command": f"psql -f step{n}.sql"})
        await world.clock.advance(60)
    quiet = await declare(world, title="tidy the docs")
    await append(world, quiet, "bash", {"command": "rm -r docs/old"})
    await world.clock.advance(300)
    page = await signed_in(browser, served)

    groups = page.locator("details.group")
    assert await groups.count() == 2
    newest, older = groups.nth(0), groups.nth(1)
    assert "tidy the docs" in await newest.locator("summary").inner_text()
    summary = " ".join((await older.locator("summary").inner_text()).split())
    assert summary.startswith("migrate the database 5 waiting from agent")
    assert await older.locator("article.card").count() == queue.CARDS_PER_GROUP
    # The run and the sender are said once, on the group, not on every card.
    assert await older.locator("article.card .meta").count() == 0
    assert await older.locator("article.card .from").count() == 0

    # Relative time shown, the absolute one on hover, the machine one in datetime.
    stamp = newest.locator("article.card time.ago")
    assert await stamp.inner_text() == "5 min ago"
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", await stamp.get_attribute("title") or ""
    )
    assert (await stamp.get_attribute("datetime") or "").endswith("+00:00")

    # Groups fold. "Show N more" is a link to the run's whole queue (what a page without the
    # script follows); with the script it opens in place (tests/test_web_more.py).
    await older.locator("summary").click()
    assert not await older.locator("article.card").first.is_visible()
    await older.locator("summary").click()
    more = older.get_by_role("link", name="Show 2 more")
    href = await more.get_attribute("href")
    assert href is not None and href.startswith("/inbox?run=")
    await page.goto(served.url + href)
    assert await page.locator("article.card").count() == 5
    assert "(6)" in await page.inner_text("#inbox-total")  # still the whole inbox's count
    await page.context.close()


async def _act_on_current(page: Page, world: World) -> str:
    """Decide the card the keyboard is on, by keys only; what was done."""
    current = page.locator("article.card.current")
    await current.wait_for(timeout=LIVE)
    text = await current.inner_text()
    async with page.expect_navigation():
        if "Which region" in text:
            await page.keyboard.press("1")
            done = "answered"
        elif "git push --force" in text:
            await page.keyboard.press("d")
            focused = await page.evaluate("document.activeElement.getAttribute('name')")
            assert focused == "reason", "d focuses the reason box"
            # Letters the page uses as keys go into the box, not to the page.
            await page.keyboard.type("ask me again after the freeze, just a day")
            await page.keyboard.press("Enter")
            done = "denied"
        else:
            await page.keyboard.press("a")
            done = "approved"
    await page.wait_for_selector('body[data-live="1"]', timeout=LIVE)
    return done


async def test_the_keyboard_alone_clears_a_queue_of_ten(browser: Browser, served: Site) -> None:
    world = served.world
    run_id = await declare(world, title="release 2.0")
    keys = []
    for n in range(7):
        task = await append(world, run_id, "bash", {"command": f"make step-{n}"})
        keys.append(task.key)
        await world.clock.advance(1)
    force = await append(world, run_id, "bash", {"command": "git push --force origin main"})
    await world.clock.advance(1)
    other = await declare(world, title="deploy the shop")
    question = {"prompt": "Which region first?", "options": ["eu-west", "us-east"]}
    asked = await append(world, other, "ask", question)
    await world.clock.advance(1)
    keys.append((await append(world, other, "bash", {"command": "kubectl apply -f shop.yaml"})).key)
    page = await signed_in(browser, served)

    assert await page.locator("article.card.current").count() == 0
    await page.keyboard.press("j")
    await page.keyboard.press("k")  # k at the top stays at the top
    done = []
    for _ in range(10):
        done.append(await _act_on_current(page, world))
    assert sorted(done) == ["answered"] + ["approved"] * 8 + ["denied"]
    assert "Nothing is waiting for you" in await page.inner_text("#inbox-list")

    service = world.core.service
    for run, key in [(run_id, k) for k in keys[:7]] + [(other, keys[7])]:
        ended = await service.get_task(world.agent, world.ws, run, key)
        assert (ended.state, ended.resolved_by, ended.via) == ("granted", "alice", "web")
    denied = await service.get_task(world.agent, world.ws, run_id, force.key)
    assert denied.state == "failed"
    assert denied.error == {
        "code": "approval_denied",
        "detail": "ask me again after the freeze, just a day",
    }
    answered = await service.get_task(world.agent, world.ws, other, asked.key)
    assert answered.state == "resolved" and answered.resolution == {"content": "eu-west"}
    await page.context.close()


async def test_help_and_keys_typed_into_fields_stay_there(browser: Browser, served: Site) -> None:
    world = served.world
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "make deploy"})
    page = await signed_in(browser, served)
    assert await page.locator("#keys-help").is_hidden()
    await page.keyboard.press("?")
    assert await page.locator("#keys-help").is_visible()
    assert "deny" in await page.inner_text("#keys-help")
    await page.keyboard.press("Escape")
    assert await page.locator("#keys-help").is_hidden()

    await page.locator('input[name="reason"]').click()
    await page.keyboard.type("a j k d 1 ?")
    assert await page.locator('input[name="reason"]').input_value() == "a j k d 1 ?"
    assert await page.locator("#keys-help").is_hidden()
    await page.keyboard.press("Escape")  # back to the card, the box keeps its text
    assert await page.evaluate("document.activeElement.dataset.id") == f"{run_id}/{task.key}"
    still = await world.core.service.get_task(world.agent, world.ws, run_id, task.key)
    assert still.parked
    await page.context.close()


async def test_on_a_phone_who_is_signed_in_shows_and_nothing_scrolls_sideways(
    browser: Browser, served: Site
) -> None:
    run_id, edit_key = await demo_inbox(served.world)
    page = await signed_in(browser, served, viewport=PHONE, is_mobile=True, has_touch=True)
    for path in ("/inbox", f"/decisions/{run_id}/{edit_key}"):
        await page.goto(served.url + path)
        me = page.locator("header.top .me")
        assert await me.is_visible(), path
        assert "alice" in await me.inner_text()
        box = await me.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        width = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], (path, width)
    await page.context.close()


async def test_the_favicon_is_there_for_every_page(browser: Browser, served: Site) -> None:
    page = await signed_in(browser, served)
    answer = await page.request.get(f"{served.url}/favicon.ico")
    assert answer.status == 200 and answer.headers["content-type"] == "image/x-icon"
    href = await page.locator('link[rel="icon"]').get_attribute("href")
    assert href is not None
    linked = await page.request.get(served.url + href)
    assert linked.status == 200 and linked.headers["content-type"] == "image/svg+xml"
    await page.context.close()


async def test_axe_finds_no_serious_violations_on_the_inbox_and_a_decision(
    browser: Browser, served: Site
) -> None:
    run_id, edit_key = await demo_inbox(served.world)
    axe = Axe()
    for scheme in ("light", "dark"):
        page = await signed_in(browser, served, color_scheme=scheme)
        await page.keyboard.press("j")  # the keyboard's focus ring is part of the page
        for path in ("/inbox", f"/decisions/{run_id}/{edit_key}"):
            if path != "/inbox":
                await page.goto(served.url + path)
            found = serious(await axe.run(page))
            assert found == [], (scheme, path, found)
        await page.context.close()


async def test_the_tab_title_counts_new_parks(browser: Browser, served: Site) -> None:
    world = served.world
    page = await signed_in(browser, served)
    assert await page.title() == "Inbox · approvalbot"
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "make one"})
    await page.wait_for_function("() => document.title === '(1) Inbox · approvalbot'", timeout=LIVE)
    await world.clock.advance(1)
    await append(world, run_id, "bash", {"command": "make two"})
    await page.wait_for_function("() => document.title === '(2) Inbox · approvalbot'", timeout=LIVE)
    assert await page.inner_text("#inbox-count") == "2"
    # Another page counts too, under its own title.
    await page.goto(f"{served.url}/runs")
    await page.wait_for_function("() => document.title.startsWith('(2) ')", timeout=LIVE)

    # Desktop notifications: only once the person turns them on, by the button.
    await page.goto(f"{served.url}/inbox")
    button = page.locator("#notify-button")
    await button.wait_for(timeout=LIVE)
    assert await button.get_attribute("aria-pressed") == "false"
    await page.context.grant_permissions(["notifications"], origin=served.url)
    await button.click()
    await page.wait_for_function(
        "() => document.getElementById('notify-button').getAttribute('aria-pressed') === 'true'",
        timeout=LIVE,
    )
    await page.context.close()


async def test_a_decision_page_deep_in_a_big_queue_reloads_only_when_it_ends(
    browser: Browser, served: Site
) -> None:
    world = served.world
    (run_id,) = await bulk_park(world, runs=1, per_run=queue.NEWEST_KEYS * 3)
    page = await signed_in(browser, served)
    await page.goto(f"{served.url}/decisions/{run_id}/call-0")  # the oldest: not among the keys
    await page.wait_for_selector('body[data-live="1"]', timeout=LIVE)
    await page.evaluate("window.__sameDocument = true")
    # Other changes in the queue reach the page (its title counts them) without a reload.
    await append(world, run_id, "bash", {"command": "make more"})
    total = queue.NEWEST_KEYS * 3 + 1
    await page.wait_for_function(f"() => document.title.startsWith('({total}) ')", timeout=LIVE)
    assert await page.evaluate("window.__sameDocument === true")
    await world.core.service.approve(world.bob, world.ws, run_id, "call-0", via="api")
    await page.wait_for_function("() => window.__sameDocument !== true", timeout=LIVE)
    await page.wait_for_selector("body:not([data-watch])", timeout=LIVE)
    assert "approved" in await page.inner_text("main")
    await page.context.close()


async def test_live_updates_keep_folded_groups_folded_and_counts_true(
    browser: Browser, served: Site
) -> None:
    world = served.world
    folded = await declare(world, title="nightly cleanup")
    for n in range(4):
        await append(world, folded, "bash", {"command": f"rm -r /tmp/build-{n}"})
    await world.clock.advance(1)
    other = await declare(world, title="deploy the shop")
    await append(world, other, "bash", {"command": "make deploy"})
    page = await signed_in(browser, served)
    await page.evaluate("window.__sameDocument = true")
    group = page.locator('details.group:has-text("nightly cleanup")')
    await group.locator("summary").click()
    assert await group.get_attribute("open") is None

    await world.clock.advance(1)
    await append(world, folded, "bash", {"command": "rm -r /tmp/build-4"})
    await page.wait_for_function(
        "() => document.getElementById('inbox-total').textContent === '(6)'", timeout=LIVE
    )
    assert await page.evaluate("window.__sameDocument === true")
    group = page.locator('details.group:has-text("nightly cleanup")')
    assert await group.get_attribute("open") is None, "a folded group stays folded"
    assert "5 waiting" in await group.locator("summary").inner_text()
    assert await group.locator("a.more").text_content() == "Show 2 more"  # folded: hidden
    # The run with the newest park comes first.
    assert "nightly cleanup" in await page.locator("details.group").first.inner_text()
    await page.context.close()
