"""Around the routes: /metrics, /openapi.json, health, and the error envelope for everything
aiohttp or the body parser refuses (404, 405, 413, malformed JSON) and for a crash (500)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from adapters.http import models as m
from adapters.http.routes import ROUTES
from bot.service import ApprovalService
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()


def metric(text: str, name: str, labels: str = "") -> float:
    pattern = re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)"
    found = re.search(r"^" + pattern + "$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def scrape(api: Served) -> str:
    async with api.session.get(api.url + "/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return await response.text()


async def test_metrics(api: Served) -> None:
    before = await scrape(api)
    _, run = await api.call("POST", "/runs", body={})
    for key in ("a", "b"):
        body = {"key": key, "tool_name": "bash", "tool_input": {"command": key}}
        await api.call("POST", f"/runs/{run['id']}/tasks", body=body)
    middle = await scrape(api)
    assert metric(middle, "approvalbot_parks_open") == metric(before, "approvalbot_parks_open") + 2
    await api.call("POST", f"/runs/{run['id']}/tasks/a/approve", "alice")
    after = await scrape(api)
    label = 'outcome="granted",via="api"'
    assert metric(after, "approvalbot_decisions_total", label) == (
        metric(before, "approvalbot_decisions_total", label) + 1
    )
    assert metric(after, "approvalbot_parks_open") == metric(middle, "approvalbot_parks_open") - 1
    assert "approvalbot_decision_latency_seconds_bucket" in after
    assert "approvalbot_outbox_backlog" in after


async def test_openapi_describes_every_route(api: Served) -> None:
    async with api.session.get(api.url + "/openapi.json") as response:
        assert response.status == 200
        doc = await response.json()
    assert doc["openapi"].startswith("3.")
    served = {
        (info.method, info.get_info().get("path") or info.get_info().get("formatter"))
        for info in api.server.runner.app.router.routes()
        if info.method != "HEAD"
    }
    documented = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    api_routes = {(method, path) for method, path in served if path and path.startswith("/v1/")}
    assert api_routes <= documented
    assert {("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/healthz")} <= documented
    schemas = doc["components"]["schemas"]
    for route in ROUTES:
        operation = doc["paths"][route.path][route.method.lower()]
        if route.body is not None:
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.rsplit("/", 1)[1] in schemas
        assert all(p["in"] in ("path", "query") for p in operation["parameters"])
    assert set(schemas["TaskIn"]["properties"]) == set(m.TaskIn.model_fields)
    assert schemas["TaskIn"]["required"] == ["tool_name", "tool_input"]
    assert "resolution_token" in schemas["TaskOut"]["properties"]
    text = json.dumps(doc)
    assert all(f"#/components/schemas/{name}" in text for name in ("RunIn", "ErrorOut", "AskOut"))


async def test_health(api: Served) -> None:
    async with api.session.get(api.url + "/healthz") as response:
        assert (response.status, await response.json()) == (200, {"ok": True})
    async with api.session.get(api.url + "/readyz") as response:
        body = await response.json()
        assert response.status == 200 and body["checks"]["migrations"] is True


async def test_http_errors_are_json(api: Served) -> None:
    _, run = await api.call("POST", "/runs", body={})
    tasks = f"/runs/{run['id']}/tasks"
    status, body = await api.call("GET", "/nothing-here")
    assert (status, body["error"]["code"]) == (404, "not_found")
    status, body = await api.call("PUT", tasks, body={})
    assert (status, body["error"]["code"]) == (405, "method_not_allowed")
    for raw, field in (
        (b"{not json", "body"),
        (b"[1, 2]", "body"),
        (b'{"tool_name": "x"}', "tool_input"),
        (b'{"tool_name": 5, "tool_input": {}}', "tool_name"),
        (b'{"tool_name": "x", "tool_input": {"a": [1, NaN]}}', "tool_input"),
        (b'{"tool_name": "x", "tool_input": {"a": "\\u0000"}}', "tool_input"),
        (b'{"tool_name": "x", "tool_input": 1, "origin": "god"}', "origin"),
        (b'{"tool_name": "x", "tool_input": 1, "effect_profile": {"risk": "huge"}}', "risk"),
        (b'{"tool_name": "x", "tool_input": ' + b"[" * 300 + b"]" * 300 + b"}", "body"),
    ):
        status, body = await api.call("POST", tasks, raw=raw)
        assert (status, body["error"]["code"]) == (422, "invalid_request"), raw
        assert field in body["error"]["detail"], (raw, body)
    assert await api.core.store.tasks(api.ws, run_id=run["id"]) == []


async def test_oversized_bodies_are_413(api: Served) -> None:
    _, run = await api.call("POST", "/runs", body={})
    big = json.dumps({"tool_name": "x", "tool_input": "y" * (1024 * 1024)}).encode()
    status, body = await api.call("POST", f"/runs/{run['id']}/tasks", raw=big)
    assert (status, body["error"]["code"]) == (413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"x" * 65536

    headers = {"Authorization": f"Bearer {api.token('agent')}"}
    async with api.session.post(
        api.path(f"/runs/{run['id']}/tasks"), data=chunks(), headers=headers
    ) as response:
        assert response.status == 413
        assert (await response.json())["error"]["code"] == "payload_too_large"


async def test_a_crash_is_a_json_500_and_logs_no_secrets(
    api: Served, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _, run = await api.call("POST", "/runs", body={})
    secret = "hunter" + "2"  # so the traceback's source line does not hold it either

    async def explode(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError(f"password={secret} in the message")

    monkeypatch.setattr(ApprovalService, "append", explode)
    caplog.set_level(logging.ERROR, logger="approvalbot.http")
    status, body = await api.call(
        "POST", f"/runs/{run['id']}/tasks", body={"tool_name": "x", "tool_input": "secret-input"}
    )
    assert (status, body["error"]["code"]) == (500, "internal_error")
    assert "RuntimeError" in caplog.text
    assert "hunter2" not in caplog.text and "secret-input" not in caplog.text
    assert api.token("agent") not in caplog.text


async def test_non_api_paths_keep_their_own_errors(api: Served) -> None:
    async with api.session.get(api.url + "/no-such-page") as response:
        assert response.status == 404
        assert not response.headers["Content-Type"].startswith("application/json")
    assert isinstance(api.server.runner.app, web.Application)
