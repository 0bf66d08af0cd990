"""`/healthz` (the process answers) and `/readyz` (store reachable and taking writes,
migrations applied, adapters healthy; 503 when not).

While a write has just met a storage fault (a full disk, a read-only database: store/faults.py)
`/readyz` is 503 with `"writes": false` and the fault's cause; it tries a write itself (at most
once a second) and is 200 again as soon as one succeeds."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from adapters.http.keys import CORE
from store.migrate import is_current
from store.sql import SqlStore


async def healthz(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def readyz(request: web.Request) -> web.Response:
    core = request.app[CORE]
    checks: dict[str, bool] = {"store": await core.store.ping()}
    body: dict[str, Any] = {}
    engine = getattr(core.store, "engine", None)
    if checks["store"] and engine is not None:
        checks["migrations"] = await is_current(engine)
    store = core.store
    if isinstance(store, SqlStore):
        checks["writes"] = checks["store"] and await store.writable()
        fault = store.health.fault
        if not checks["writes"] and fault is not None:
            body["storage"] = {"cause": fault.cause}
    for name, notifier in core.notifiers.items():
        checks[name] = await notifier.healthy()
    ready = all(checks.values())
    return web.json_response(
        {"ready": ready, "checks": checks, **body}, status=200 if ready else 503
    )
