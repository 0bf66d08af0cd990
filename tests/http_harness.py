"""A real approvalbot HTTP server on a free loopback port, for the API, SDK and CLI tests.

One server per test module and backend (SQLite and PostgreSQL, through `make_store`): building
a store costs far more than a test. Each test gets a fresh workspace of its own (`acme-…` with
members alice and bob and applications agent and other-agent), so tests never see each other's
runs; the server's second workspace `beta` (member carol, application beta-agent) is the
stranger for cross-workspace refusals. The core runs on a FakeClock;
the clock loop and the relay are not started — tests fire deadlines with
`core.scheduler.run_once()` after advancing the clock. Modules using this say
`pytestmark = pytest.mark.asyncio(loop_scope="module")` and `server, api = fixtures()`.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from adapters.http.app import build_app
from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from store.sql import SqlStore
from tests.conftest import BACKENDS, drop_schema, make_store


@dataclass
class Server:
    core: Core
    clock: FakeClock
    store: SqlStore
    url: str
    session: aiohttp.ClientSession
    runner: web.AppRunner
    schema: str | None = None  # the PostgreSQL schema, for a second instance on the same data
    strangers: dict[str, str] = field(default_factory=dict)  # tokens of workspace `beta`


@dataclass
class Served:
    """One test's view of the server: its own workspaces and tokens."""

    server: Server
    ws: str
    beta: str
    tokens: dict[str, str]

    @property
    def core(self) -> Core:
        return self.server.core

    @property
    def clock(self) -> FakeClock:
        return self.server.clock

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def session(self) -> aiohttp.ClientSession:
        return self.server.session

    def token(self, who: str) -> str:
        return self.tokens[who]

    def path(self, tail: str, ws: str | None = None) -> str:
        return f"{self.url}/v1/workspaces/{ws or self.ws}{tail}"

    async def call(
        self,
        method: str,
        tail: str,
        who: str | None = "agent",
        body: Any = None,
        *,
        ws: str | None = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """One request as `who` (a name from `tokens`, or a literal token); (status, JSON)."""
        sent = dict(headers or {})
        if who is not None:
            sent["Authorization"] = f"Bearer {self.tokens.get(who, who)}"
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        async with self.session.request(method, self.path(tail, ws), data=data, headers=sent) as r:
            text = await r.text()
            return r.status, json.loads(text) if text else None


async def start_app(core: Core, settings: Settings) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(build_app(core, settings), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


async def start_server(
    backend: str, directory: Path, settings: Settings | None = None
) -> tuple[Server, str | None]:
    settings = settings or Settings()
    store, schema = await make_store(backend, directory)
    clock = FakeClock()
    core = await Core.build(store, settings, clock=clock)
    runner, url = await start_app(core, settings)
    server = Server(core, clock, store, url, aiohttp.ClientSession(), runner, schema)
    await core.admin.create_workspace("beta")
    server.strangers["carol"] = (await core.admin.add_member("beta", "carol")).token
    server.strangers["beta-agent"] = (await core.admin.add_application("beta", "beta-agent")).token
    return server, schema


async def stop_server(server: Server, schema: str | None) -> None:
    await server.session.close()
    await server.runner.cleanup()
    await server.store.close()
    await drop_schema(schema)


async def people(server: Server) -> Served:
    """A fresh workspace for one test."""
    admin = server.core.admin
    suffix = secrets.token_hex(3)
    ws = f"acme-{suffix}"
    tokens = dict(server.strangers)
    await admin.create_workspace(ws)
    for name in ("alice", "bob"):
        tokens[name] = (await admin.add_member(ws, name)).token
    for name in ("agent", "other-agent"):
        tokens[name] = (await admin.add_application(ws, name)).token
    return Served(server, ws, "beta", tokens)


def fixtures(settings: Settings | None = None, backends: list[str] = BACKENDS) -> tuple[Any, Any]:
    """`server, api = fixtures()`: a module-scoped server parametrised over the backends, and
    a per-test view of it with fresh workspaces."""

    @pytest_asyncio.fixture(scope="module", loop_scope="module", params=backends)
    async def server(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> AsyncIterator[Server]:
        started, schema = await start_server(
            request.param, tmp_path_factory.mktemp("api"), settings
        )
        yield started
        await stop_server(started, schema)

    @pytest_asyncio.fixture(loop_scope="module")
    async def api(server: Server) -> Served:
        return await people(server)

    return server, api


def sdk_fixtures() -> tuple[Any, Any]:
    """`agent, person = sdk_fixtures()` beside `fixtures()`: the SDK's workspace as the agent
    (an application token) and as alice (a member)."""
    from adapters.http import client as sdk

    @pytest_asyncio.fixture(loop_scope="module")
    async def agent(api: Served) -> AsyncIterator[sdk.Workspace]:
        client = sdk.Client(api.url, api.token("agent"))
        yield client.workspace(api.ws)
        await client.close()

    @pytest_asyncio.fixture(loop_scope="module")
    async def person(api: Served) -> AsyncIterator[sdk.Workspace]:
        client = sdk.Client(api.url, api.token("alice"))
        yield client.workspace(api.ws)
        await client.close()

    return agent, person


async def first_decision(person: Any, run_id: str) -> Any:
    """The person's side (an SDK workspace): wait until something of the run rests on them."""
    for _ in range(500):
        found = await person.runs.run(run_id).decisions.list()
        if found:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError("nothing to decide")


async def with_person(agent_side: Awaitable[Any], person_side: Callable[[], Awaitable[Any]]) -> Any:
    """Run the agent's side while the person's side decides; the agent's result."""
    waiting = asyncio.ensure_future(agent_side)
    try:
        await person_side()
        return await asyncio.wait_for(waiting, 10)
    finally:
        waiting.cancel()
