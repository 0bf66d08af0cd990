"""The first five minutes: the first start's bootstrap, and the demo agent against a live
service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from click.testing import CliRunner

from adapters.http.app import build_app
from adapters.http.client import Client
from bot import logins
from bot.cli import main
from bot.cli.bootstrap import bootstrap, describe, public_base
from bot.cli.demo import DEMO_PROFILE, demo_token, run_demo
from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from store.migrate import upgrade
from store.sql import SqlStore


async def test_the_first_start_bootstraps_once(store: SqlStore) -> None:
    settings = Settings()
    core = await Core.build(store, settings, clock=FakeClock())
    first = await bootstrap(core, settings)
    assert first is not None and first.created
    assert first.admin_token and first.app_token and first.login_link
    admin = await core.admin.authenticate(first.admin_token)
    app = await core.admin.authenticate(first.app_token)
    assert admin is not None and (admin.kind, admin.name, admin.workspace_id) == (
        "member",
        "admin",
        "default",
    )
    assert app is not None and app.kind == "application"
    assert first.login_link.startswith("http://127.0.0.1:8787/login/abl_")
    printed = "\n".join(describe(first))
    assert first.admin_token in printed and first.login_link in printed

    again = await bootstrap(core, settings)
    assert again is not None and not again.created
    assert again.admin_token is None and again.app_token is None
    assert again.login_link and again.login_link != first.login_link
    assert "shown once" not in "\n".join(describe(again))
    token = again.login_link.rsplit("/", 1)[1]
    signed = await logins.consume(core.store, core.clock, token)
    assert signed == admin
    assert await logins.consume(core.store, core.clock, token) is None

    off = Settings.model_validate({"bootstrap": {"enabled": False}})
    assert await bootstrap(core, off) is None and describe(None) == []


def test_links_use_the_public_address() -> None:
    assert public_base(Settings()) == "http://127.0.0.1:8787"
    wild = Settings.model_validate({"server": {"host": "0.0.0.0", "port": 9000}})
    assert public_base(wild) == "http://127.0.0.1:9000"
    public = Settings.model_validate({"server": {"public_url": "https://ok.example/"}})
    assert public_base(public) == "https://ok.example"


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[Core, Settings, str]]:
    """A bootstrapped service on a loopback port, on a SQLite file the demo can open too."""
    url = f"sqlite+aiosqlite:///{tmp_path}/approvalbot.db"
    settings = Settings.model_validate({"store": {"url": url}})
    store = SqlStore(url)
    await upgrade(store.engine)
    core = await Core.build(store, settings, clock=FakeClock())
    await bootstrap(core, settings)
    runner = web.AppRunner(build_app(core, settings), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    yield core, settings, f"http://{host}:{port}"
    await runner.cleanup()
    await store.close()


async def test_the_demo_agent_waits_for_people_and_carries_on(
    live: tuple[Core, Settings, str],
) -> None:
    core, settings, url = live
    said: list[str] = []
    token = await demo_token(settings, "default")
    async with Client(url, token) as client:
        agent = asyncio.create_task(run_demo(client, "default", url, DEMO_PROFILE, said.append))
        admin = await core.admin.authenticate(
            (await core.admin.rotate("default", "member", "admin")).token
        )
        assert admin is not None
        for _ in range(200):
            asks = await core.service.asks(admin, "default")
            if len(asks) == 6 and any("waiting for 6" in line for line in said):
                break
            await asyncio.sleep(0.05)
        assert len(asks) == 6
        service = core.service
        for task in asks:
            if task.kind == "ask" and task.tool_input.get("multi"):
                content: object = ["unit tests", "lint"]
                await service.resolve(admin, "default", task.run_id, task.key, content=content)
            elif task.kind == "ask":
                await service.resolve(admin, "default", task.run_id, task.key, content="v1.4.0")
            elif task.tool == "deploy":
                await service.deny(admin, "default", task.run_id, task.key, reason="not on Friday")
            else:
                await service.approve(admin, "default", task.run_id, task.key, via="web")
        tally = await asyncio.wait_for(agent, 20)
    text = "\n".join(said)
    assert tally.at_once == {"granted": 3, "refused": 3}
    assert tally.by_people == {"approved": 3, "denied": 1, "answered": 2}
    assert "refused install a release helper  (approval_denied: no piping downloads" in text
    assert "no approval rule allows WebFetch" in text
    assert f"{url}/decisions/" in text
    assert "denied by admin: deploy skipped (approval_denied: not on Friday)" in text
    assert "granted make test" in text and "granted make lint" in text
    assert "approved by admin: bash, done: release/1.4 pushed" in text


async def test_the_demo_command_leaves_decisions_in_the_inbox(
    live: tuple[Core, Settings, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    core, settings, url = live
    monkeypatch.setenv("APPROVALBOT_STORE__URL", settings.store.url)
    result = await asyncio.to_thread(
        CliRunner().invoke, main, ["demo", "--no-wait", "--url", url], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "demo agent: done. At once by rule: 3 granted, 3 refused." in result.output
    admin = await core.admin.authenticate(
        (await core.admin.rotate("default", "member", "admin")).token
    )
    assert admin is not None
    assert len(await core.service.asks(admin, "default")) == 6
    offline = await asyncio.to_thread(
        CliRunner().invoke, main, ["demo", "--url", "http://127.0.0.1:9", "--token", "aba_x"]
    )
    assert offline.exit_code == 1 and "cannot reach the service" in offline.output
