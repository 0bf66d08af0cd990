"""A real approvalbot HTTP server on a free loopback port, for the API, SDK and CLI tests.

The core is built like `make_world` (workspace `acme` with members alice and bob and the
application `agent`) plus a second workspace `other` with its own member and application, on a
FakeClock; the clock loop and the relay are not started, so tests fire deadlines themselves with
`core.scheduler.run_once()` after advancing the clock.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from adapters.http.app import build_app
from bot.config import Settings
from store.sql import SqlStore
from tests.conftest import World, make_world


@dataclass
class Served:
    world: World
    url: str
    session: aiohttp.ClientSession
    runner: web.AppRunner

    @property
    def core(self):  # type: ignore[no-untyped-def]
        return self.world.core

    def token(self, who: str) -> str:
        return self.world.tokens[who]

    def path(self, tail: str, ws: str = "acme") -> str:
        return f"{self.url}/v1/workspaces/{ws}{tail}"

    async def call(
        self,
        method: str,
        tail: str,
        who: str | None = "agent",
        body: Any = None,
        *,
        ws: str = "acme",
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """One request; returns (status, parsed JSON body)."""
        sent = dict(headers or {})
        if who is not None:
            sent["Authorization"] = f"Bearer {self.token(who) if who in self.world.tokens else who}"
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        async with self.session.request(method, self.path(tail, ws), data=data, headers=sent) as r:
            text = await r.text()
            return r.status, json.loads(text) if text else None


async def start_server(world: World, settings: Settings | None = None) -> tuple[web.AppRunner, str]:
    app = build_app(world.core, settings or Settings())
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


@asynccontextmanager
async def serve(store: SqlStore, settings: Settings | None = None) -> AsyncIterator[Served]:
    world = await make_world(store, settings)
    other = await world.core.admin.add_application("acme", "other-agent")
    world.tokens["other-agent"] = other.token
    await world.core.admin.create_workspace("beta")
    carol = await world.core.admin.add_member("beta", "carol")
    beta_app = await world.core.admin.add_application("beta", "beta-agent")
    world.tokens["carol"] = carol.token
    world.tokens["beta-agent"] = beta_app.token
    runner, url = await start_server(world, settings)
    session = aiohttp.ClientSession()
    try:
        yield Served(world, url, session, runner)
    finally:
        await session.close()
        await runner.cleanup()
