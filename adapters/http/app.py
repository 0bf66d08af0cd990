"""The aiohttp application: the API routes, health, the browser page. The root of the HTTP
layer — it imports the others and nothing imports it but the composition (`build_app`)."""

from __future__ import annotations

from aiohttp import web

from adapters.http.keys import CORE, REQUEST_LOG, SETTINGS
from adapters.http.request_log import RequestLog
from adapters.http.routes import setup_api
from adapters.web.mount import setup_web
from bot.config import Settings
from bot.core import Core

__all__ = ["CORE", "SETTINGS", "build_app"]


def build_app(core: Core, settings: Settings) -> web.Application:
    request_log = RequestLog()
    app = web.Application(
        client_max_size=settings.server.max_body_bytes,
        handler_args={
            # API bodies are decoded by adapters.http.bodies (gzip and deflate, within the
            # body limit; other encodings a JSON 415): aiohttp's own decoding fails a bad body
            # with an exception in the handler, and an unknown encoding before it.
            "auto_decompress": False,
            # Malformed requests: one rate-limited warning, not an ERROR traceback each.
            "logger": request_log,
        },
    )
    app[CORE] = core
    app[REQUEST_LOG] = request_log
    app[SETTINGS] = settings
    setup_api(app)  # the API, /metrics, /openapi.json, /healthz, /readyz
    setup_web(app, core, settings)  # the browser page (adapters/web)
    return app
