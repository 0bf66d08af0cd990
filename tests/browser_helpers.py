"""What the Chromium tests share: Debian's chromium driven by playwright (never a browser
download), a member signed in through a one-time link, and axe-core's serious findings.

The `browser` (one per test module) and `served` (a service on SQLite) fixtures are in
conftest.py, built on these."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, async_playwright

from bot import logins
from tests.web_helpers import Site

CHROMIUM = os.environ.get("APPROVALBOT_CHROMIUM", "/usr/bin/chromium")
# Without the background-networking flags Chromium dials out, which this machine refuses.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LIVE = 20_000  # ms: what should happen live; a met wait returns at once, so room for load
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} missing: `make test` installs chromium"
)


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def signed_in(browser: Browser, s: Site, who: str = "alice", **options: Any) -> Page:
    """A fresh browser context signed in through a one-time link, on the inbox, live."""
    context = await browser.new_context(**options)
    page = await context.new_page()
    member = s.world.alice if who == "alice" else s.world.bob
    token = await logins.issue(s.core.store, s.core.clock, member)
    await page.goto(f"{s.url}/login/{token}")
    await page.wait_for_selector('body[data-live="1"]', timeout=LIVE)
    await page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    return page


def serious(results: Any) -> list[str]:
    """axe-core's serious and critical violations, one line each."""
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
