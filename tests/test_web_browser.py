"""The browser page in a real headless Chromium (Debian's `chromium`, driven by playwright; no
browser download). One browser for the module, a fresh context (cookies) per test. The
screenshots in docs/img/ come from `make screenshots` (bench/screenshots.py): tests never write
into the working tree."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from playwright.async_api import Browser, Locator, Page

from tests.browser_helpers import CHROMIUM, LIVE, signed_in
from tests.web_helpers import Site, append, declare

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} missing: `make test` installs chromium"
    ),
]


async def same_document(page: Page) -> bool:
    return bool(await page.evaluate("window.__sameDocument === true"))


def card(page: Page, run_id: str, key: str) -> Locator:
    return page.locator(f'article[data-id="{run_id}/{key}"]')


async def test_sign_in_see_a_park_arrive_live_approve_and_the_agent_goes_on(
    browser: Browser, served: Site
) -> None:
    world = served.world
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{served.url}/inbox")
    assert "/login?next=" in page.url
    await page.fill("#token", world.tokens["alice"])
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(f"{served.url}/inbox")
    await page.wait_for_selector('body[data-live="1"]', timeout=LIVE)
    await page.evaluate("window.__sameDocument = true")
    assert "Nothing is waiting for you" in await page.inner_text("#inbox-list")

    run_id = await declare(world, title="deploy the shop")
    task = await append(world, run_id, "bash", {"command": "kubectl rollout restart deploy/shop"})
    item = card(page, run_id, task.key)
    await item.wait_for(timeout=LIVE)
    assert await same_document(page), "the call must arrive without a reload"
    assert "kubectl rollout restart deploy/shop" in await item.inner_text()
    assert "expires in 23 h 59 min" in await item.locator(".deadline").inner_text()
    assert await page.inner_text("#inbox-count") == "1"

    waiting = asyncio.create_task(
        world.core.service.wait_task(world.agent, world.ws, run_id, task.key, timeout=30)
    )
    await item.locator("button.approve").click()
    await page.wait_for_selector(".flash.ok", timeout=LIVE)
    ended = await asyncio.wait_for(waiting, 10)
    assert (ended.state, ended.resolved_by, ended.via) == ("granted", "alice", "web")
    await item.wait_for(state="detached", timeout=LIVE)
    await context.close()


async def test_deny_with_a_reason(browser: Browser, served: Site) -> None:
    world = served.world
    page = await signed_in(browser, served)
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "git push --force origin main"})
    item = card(page, run_id, task.key)
    await item.wait_for(timeout=LIVE)
    await item.locator('input[name="reason"]').fill("open a pull request instead")
    await item.locator("button.deny").click()
    await page.wait_for_selector(".flash.ok", timeout=LIVE)
    ended = await world.core.service.get_task(world.agent, world.ws, run_id, task.key)
    assert ended.state == "failed" and ended.via == "web"
    assert ended.error == {"code": "approval_denied", "detail": "open a pull request instead"}
    await page.context.close()


async def test_answer_a_multi_question(browser: Browser, served: Site) -> None:
    world = served.world
    page = await signed_in(browser, served, "bob")
    run_id = await declare(world)
    question = {"prompt": "Which checks?", "options": ["lint", "unit", "e2e"], "multi": True}
    task = await append(world, run_id, "ask", question)
    item = card(page, run_id, task.key)
    await item.wait_for(timeout=LIVE)
    await item.get_by_label("e2e").check()
    await item.get_by_label("lint").check()
    await item.get_by_role("button", name="Submit answer").click()
    await page.wait_for_selector(".flash.ok", timeout=LIVE)
    ended = await world.core.service.get_task(world.agent, world.ws, run_id, task.key)
    assert ended.state == "resolved" and ended.resolved_by == "bob" and ended.via == "web"
    assert ended.resolution == {"content": ["lint", "e2e"]}
    await page.context.close()


async def test_a_decision_ended_from_the_api_leaves_the_page_live(
    browser: Browser, served: Site
) -> None:
    world = served.world
    page = await signed_in(browser, served)
    run_id = await declare(world)
    gone = await append(world, run_id, "bash", {"command": "make deploy"})
    stays = await append(world, run_id, "bash", {"command": "make migrate"})
    await card(page, run_id, stays.key).wait_for(timeout=LIVE)
    # Half-typed reason on the card that stays: live updates must not wipe it.
    await card(page, run_id, stays.key).locator('input[name="reason"]').fill("half typed")
    decision_page = await page.context.new_page()
    await decision_page.goto(f"{served.url}/decisions/{run_id}/{gone.key}")
    await decision_page.wait_for_selector('body[data-live="1"]', timeout=LIVE)

    await world.core.service.approve(world.bob, world.ws, run_id, gone.key, via="api")
    await card(page, run_id, gone.key).wait_for(state="detached", timeout=LIVE)
    assert await same_document(page)
    reason = card(page, run_id, stays.key).locator('input[name="reason"]')
    assert await reason.input_value() == "half typed"
    assert await page.inner_text("#inbox-count") == "1"
    # The decision's own page shows how it ended, by itself.
    outcome = decision_page.locator(".ending")
    await outcome.wait_for(timeout=LIVE)
    assert "approved by bob via api" in " ".join((await outcome.inner_text()).split())
    await page.context.close()


async def test_a_form_post_without_the_csrf_token_is_refused(
    browser: Browser, served: Site
) -> None:
    world = served.world
    page = await signed_in(browser, served)
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "make deploy"})
    item = card(page, run_id, task.key)
    await item.wait_for(timeout=LIVE)
    await item.locator('form.approve input[name="csrf"]').evaluate("input => input.remove()")
    async with page.expect_response(lambda r: r.request.method == "POST") as answer:
        await item.locator("button.approve").click()
    assert (await answer.value).status == 403
    assert "csrf_failed" in await page.inner_text("main")
    still = await world.core.service.get_task(world.agent, world.ws, run_id, task.key)
    assert still.state == "needs_approval"
    await page.context.close()
