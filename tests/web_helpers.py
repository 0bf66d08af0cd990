"""The browser page under test: a real server on a loopback port and a cookie-keeping client.

The core is `make_world`'s (workspace `acme`: members alice and bob, application `agent`, a
FakeClock); the server is the service's own app (`build_app`), so the page is tested exactly as
it is served.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from adapters.http.app import build_app
from bot.config import Settings
from bot.core import Core
from bot.domain import Task
from bot.service import CallSpec, RunSpec
from tests.conftest import World

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page carries no CSRF token"
    return found.group(1)


@dataclass
class Site:
    world: World
    url: str
    runner: web.AppRunner

    @property
    def core(self) -> Core:
        return self.world.core


@asynccontextmanager
async def site(world: World, settings: Settings | None = None) -> AsyncIterator[Site]:
    app = build_app(world.core, settings or Settings())
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    host, port = runner.addresses[0][:2]
    try:
        yield Site(world, f"http://{host}:{port}", runner)
    finally:
        await runner.cleanup()


def browserless() -> aiohttp.ClientSession:
    """A client like a browser without JavaScript: keeps cookies, never follows redirects
    by itself unless asked."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def sign_in(client: aiohttp.ClientSession, url: str, token: str) -> aiohttp.ClientResponse:
    async with client.get(f"{url}/login") as page:
        csrf = csrf_of(await page.text())
    async with client.post(
        f"{url}/login", data={"csrf": csrf, "token": token, "next": "/inbox"}, allow_redirects=False
    ) as answer:
        await answer.read()
        return answer


async def get_text(client: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    """Status and page; for a redirect, status and where it leads."""
    async with client.get(url, allow_redirects=False) as answer:
        if 300 <= answer.status < 400:
            return answer.status, answer.headers.get("Location", "")
        return answer.status, await answer.text()


async def post_form(
    client: aiohttp.ClientSession, url: str, data: Any, *, page_url: str | None = None
) -> tuple[int, str]:
    """Post a form the way a browser does: with the CSRF token of the page it sits on."""
    if page_url is not None:
        _, html = await get_text(client, page_url)
        if isinstance(data, dict):
            data = {"csrf": csrf_of(html)} | data
        else:
            data = [("csrf", csrf_of(html)), *data]
    async with client.post(url, data=data, allow_redirects=False) as answer:
        return answer.status, answer.headers.get("Location", "")


async def declare(world: World, **fields: Any) -> str:
    spec = RunSpec(**({"approval_mode": "ask", "title": "tidy the repo"} | fields))
    run = await world.core.service.declare_run(world.agent, world.ws, spec)
    return run.id


async def append(world: World, run_id: str, tool: str, tool_input: Any, **fields: Any) -> Task:
    spec = CallSpec(tool_name=tool, tool_input=tool_input, **fields)
    receipt = await world.core.service.append(world.agent, world.ws, run_id, spec)
    return receipt.task
