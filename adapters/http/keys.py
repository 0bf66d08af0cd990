"""The application keys every part of the HTTP layer reads: the core, the settings, and the
logger handed to aiohttp's request handler.

A leaf module: the handlers, the middleware and the health checks import these, and `app.py`
(the root, which nothing imports) sets them.
"""

from __future__ import annotations

from aiohttp import web

from adapters.http.request_log import RequestLog
from bot.config import Settings
from bot.core import Core

CORE = web.AppKey("core", Core)
SETTINGS = web.AppKey("settings", Settings)
REQUEST_LOG = web.AppKey("request_log", RequestLog)  # what aiohttp's request handler logs to
