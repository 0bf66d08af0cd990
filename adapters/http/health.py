"""`/healthz` (the process answers) and `/readyz` (store reachable, migrations applied,
adapters healthy; 503 when not)."""

from __future__ import annotations

from aiohttp import web

from adapters.http.keys import CORE
from store.migrate import is_current


async def healthz(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def readyz(request: web.Request) -> web.Response:
    core = request.app[CORE]
    checks: dict[str, bool] = {"store": await core.store.ping()}
    engine = getattr(core.store, "engine", None)
    if checks["store"] and engine is not None:
        checks["migrations"] = await is_current(engine)
    for name, notifier in core.notifiers.items():
        checks[name] = await notifier.healthy()
    ready = all(checks.values())
    return web.json_response({"ready": ready, "checks": checks}, status=200 if ready else 503)
