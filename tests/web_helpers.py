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
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import sqlalchemy as sa
from aiohttp import web

from adapters.http.app import build_app
from bot.config import Settings
from bot.core import Core
from bot.domain import Task
from bot.service import CallSpec, RunSpec
from store import convert
from store.sql import TASK, TIMER, SqlStore
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
async def serving(app: web.Application) -> AsyncIterator[tuple[web.AppRunner, str]]:
    """`app` on a free loopback port for the block: its runner and its URL (the service, or a
    stand-in for one: a broken server, a proxy that fails one kind of request)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        yield runner, f"http://{host}:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def site(world: World, settings: Settings | None = None) -> AsyncIterator[Site]:
    async with serving(build_app(world.core, settings or Settings())) as (runner, url):
        yield Site(world, url, runner)


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


def waiting_task(world: World, run_id: str, i: int, at: datetime) -> Task:
    """A parked call as an agent in a loop makes them: a shell command with its profile."""
    return Task(
        id=f"task_{run_id[-8:]}_{i:08d}",
        run_id=run_id,
        workspace_id=world.ws,
        key=f"call-{i}",
        kind="tool_call",
        origin="model",
        tool_name="bash",
        tool="bash",
        tool_input={"command": f"curl -fsS -X POST https://api.example.com/v1/items/{i}/rebuild"},
        state="needs_approval",
        created_at=at,
        effect_profile={"summary": f"rebuild item {i}", "effects": ["network", "writes"]},
        deadline=at + timedelta(hours=24),
        why="no rule allows bash in ask mode",
        appended_by="agent",
    )


async def bulk_park(world: World, runs: int, per_run: int) -> list[str]:
    """`runs` runs with `per_run` decisions waiting in each, written straight into the store in
    a few statements (thousands of appends through HTTP would take minutes); newest run last.
    Each park has its deadline timer, as an append leaves it."""
    store = world.core.store
    assert isinstance(store, SqlStore)
    run_ids = [await declare(world, title=f"batch job {r}") for r in range(runs)]
    start = world.clock.now()
    tasks, timers = [], []
    for r, run_id in enumerate(run_ids):
        for i in range(per_run):
            task = waiting_task(world, run_id, i, start + timedelta(seconds=r * per_run + i))
            assert task.deadline is not None
            tasks.append(convert.task_values(task))
            timers.append(
                {"id": f"{task.id}:deadline", "task_id": task.id, "run_id": run_id,
                 "kind": "deadline", "seq": 0, "due_at": task.deadline.timestamp(), "done": False}
            )  # fmt: skip
    async with store.write() as tx:
        for at in range(0, len(tasks), 2000):
            await tx.conn.execute(sa.insert(TASK), tasks[at : at + 2000])
            await tx.conn.execute(sa.insert(TIMER), timers[at : at + 2000])
    await world.clock.advance(runs * per_run + 60)
    return run_ids
