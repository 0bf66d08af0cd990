"""`make screenshots`: the images of the docs (docs/img/inbox.png, inbox-mobile.png,
decision.png), taken in Chromium from a service filled with the demo agent's run.

Tests never write into the working tree; this script is the one explicit way the images are
made. The service is the real one (`build_app`) on a temporary SQLite file and a loopback port,
with a fake clock so the countdowns read the same on every run; the browser is Debian's
Chromium (`APPROVALBOT_CHROMIUM`, default /usr/bin/chromium) driven by playwright.

    .venv/bin/python bench/screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from aiohttp import web
from playwright.async_api import Browser, Page, async_playwright

from adapters.http.app import build_app
from bot import logins
from bot.cli.demo import CALLS, DEMO_PROFILE, QUESTIONS, demo_title, slug
from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from bot.domain import Principal
from bot.service import CallSpec, RunSpec
from store.migrate import upgrade
from store.sql import SqlStore

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("APPROVALBOT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
WORKSPACE = "default"


async def demo_inbox(core: Core, clock: FakeClock) -> tuple[Principal, str, str]:
    """The inbox the README shows: the demo agent's run as `approvalbot demo` makes it. The
    person who decides, the run and the first parked call's key."""
    await core.admin.create_workspace(WORKSPACE)
    admin = (await core.admin.add_member(WORKSPACE, "admin")).principal
    agent = (await core.admin.add_application(WORKSPACE, "demo-agent")).principal
    spec = RunSpec(
        approval_mode=DEMO_PROFILE["approval_mode"],
        approval_rules=DEMO_PROFILE["approval_rules"],
        aliases=DEMO_PROFILE["aliases"],
        title=demo_title(clock.now()),
    )
    run = await core.service.declare_run(agent, WORKSPACE, spec)
    parked = []
    for call in CALLS:
        receipt = await core.service.append(
            agent,
            WORKSPACE,
            run.id,
            CallSpec(call.tool, call.input, key=call.key, effect_profile=call.profile),
        )
        if receipt.task.parked:
            parked.append(receipt.task.key)
        await clock.advance(7)
    for question in QUESTIONS:
        ask = CallSpec("ask", question, key=slug(str(question["prompt"])))
        await core.service.append(agent, WORKSPACE, run.id, ask)
        await clock.advance(5)
    return admin, run.id, parked[0]


async def signed_in(
    browser: Browser, core: Core, url: str, admin: Principal, **options: object
) -> Page:
    context = await browser.new_context(**options)  # type: ignore[arg-type]
    page = await context.new_page()
    token = await logins.issue(core.store, core.clock, admin)
    await page.goto(f"{url}/login/{token}")
    await page.wait_for_selector("article[data-id]")
    return page


async def take(out: Path) -> list[Path]:
    with tempfile.TemporaryDirectory() as scratch:
        store = SqlStore(f"sqlite+aiosqlite:///{scratch}/screens.db")
        await upgrade(store.engine)
        clock = FakeClock()
        settings = Settings()
        core = await Core.build(store, settings, clock=clock)
        admin, run_id, edit_key = await demo_inbox(core, clock)
        runner = web.AppRunner(build_app(core, settings), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        url = f"http://{host}:{port}"
        made = [out / "inbox.png", out / "inbox-mobile.png", out / "decision.png"]
        try:
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = await signed_in(
                    browser, core, url, admin, viewport={"width": 1100, "height": 1500}
                )
                await page.screenshot(path=str(made[0]))
                phone = await signed_in(
                    browser,
                    core,
                    url,
                    admin,
                    viewport={"width": 390, "height": 844},
                    device_scale_factor=2,
                )
                await phone.screenshot(path=str(made[1]))
                await page.goto(f"{url}/decisions/{run_id}/{edit_key}")
                await page.screenshot(path=str(made[2]), full_page=True)
                await browser.close()
        finally:
            await runner.cleanup()
            await store.close()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where to write")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} missing: install Debian's chromium (`make chromium`)")
    for path in asyncio.run(take(out)):
        print(f"{path}  {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
