"""The aiohttp application: health endpoints now; the API routes are added by their module."""

from __future__ import annotations

from aiohttp import web

from adapters.web import setup_web
from bot.config import Settings
from bot.core import Core
from store.migrate import is_current

CORE = web.AppKey("core", Core)
SETTINGS = web.AppKey("settings", Settings)


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


def build_app(core: Core, settings: Settings) -> web.Application:
    app = web.Application(client_max_size=settings.server.max_body_bytes)
    app[CORE] = core
    app[SETTINGS] = settings
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    from adapters.http.routes import setup_api  # the API routes import this module's keys

    setup_api(app)
    setup_web(app, core, settings)  # the browser page (adapters/web)
    return app
