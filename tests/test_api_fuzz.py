"""Fuzzing the API with hypothesis: random and mutated bodies, path parameters, query values and
tokens against every POST route (and the GET routes with parameters) of a real server. Whatever
comes in, the answer is never a 500, and every refusal is the JSON error envelope.

Hypothesis drives a blocking HTTP client from a worker thread while the server runs on the
test's event loop; examples are derandomised so CI sees the same inputs every run.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import sys
import urllib.parse
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["", "ask", "bash", "author", "kernel", "failed", "rules", "\x00", "é"])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = [
    "key", "tool_name", "tool_input", "origin", "effect_profile", "failure_policy", "tool_names",
    "approval_mode", "approval_rules", "aliases", "profile", "title", "executor_id",
    "parent_run", "reason", "content", "outcome", "resolution_token", "name", "run_id",
    "task_key", "prompt", "options", "multi",
]  # fmt: skip
VALID: dict[str, dict[str, Any]] = {
    "tasks": {"tool_name": "bash", "tool_input": {"command": "ls"}},
    "runs": {"approval_mode": "ask", "approval_rules": [{"tool": "ls", "verdict": "allow"}]},
    "resolution": {"content": "yes"},
    "deny": {"reason": "no"},
    "executors": {"name": "w"},
    "claim": {"run_id": "r", "task_key": "k"},
}


@st.composite
def bodies(draw: st.DrawFn, kind: str) -> bytes:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=64))
    if choice == 1:
        return json.dumps(draw(json_values)).encode()
    body = dict(VALID.get(kind, {}))
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4)):
        body[name] = draw(json_values)
    if choice == 3 and body:
        body.pop(draw(st.sampled_from(sorted(body))))
    return json.dumps(body).encode()


segments = st.text(min_size=1, max_size=20).map(lambda s: urllib.parse.quote(s, safe=""))


def request(port: int, method: str, path: str, body: bytes | None, token: str) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        connection.close()


async def test_no_input_makes_a_500(api: Served) -> None:
    _, run = await api.call("POST", "/runs", body={})
    _, spare = await api.call("POST", "/runs", body={})
    _, executor = await api.call("POST", "/executors", body={"name": "w"})
    run_id, spare_id, exe = run["id"], spare["id"], executor["id"]
    # Keys no random segment will hit: a `?wait=` on a parked task would hold the request.
    call, question = "parked-call-7f3a", "parked-question-7f3a"
    for body in (
        {"key": call, "tool_name": "bash", "tool_input": {}},
        {"key": question, "tool_name": "ask", "tool_input": {"prompt": "?"}},
    ):
        await api.call("POST", f"/runs/{run_id}/tasks", body=body)
    port = int(api.url.rsplit(":", 1)[1])
    base = f"/v1/workspaces/{api.ws}"
    targets = [
        ("POST", f"{base}/runs", "runs"),
        ("POST", f"{base}/runs/{run_id}/tasks", "tasks"),
        ("POST", f"{base}/runs/{run_id}/tasks/{call}/approve", "approve"),
        ("POST", f"{base}/runs/{run_id}/tasks/{call}/deny", "deny"),
        ("POST", f"{base}/runs/{run_id}/tasks/{question}/resolution", "resolution"),
        ("POST", f"{base}/runs/{spare_id}/stop", "stop"),
        ("POST", f"{base}/runs/{spare_id}/retry", "retry"),
        ("POST", f"{base}/runs/{spare_id}/abandon", "abandon"),
        ("POST", f"{base}/executors", "executors"),
        ("POST", f"{base}/executors/{exe}/claim", "claim"),
        ("POST", f"{base}/executors/{exe}/commit", "claim"),
    ]
    tokens = [api.token("agent"), api.token("alice"), api.token("carol"), "x"]
    failures: list[str] = []

    def check(status: int, body: Any, what: str) -> None:
        error = body.get("error") if isinstance(body, dict) else None
        if status >= 500 or (status >= 400 and not (isinstance(error, dict) and "code" in error)):
            failures.append(f"{what} -> {status} {body}")

    @settings(
        max_examples=120, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(st.data())
    def fuzz(data: st.DataObject) -> None:
        method, path, kind = data.draw(st.sampled_from(targets))
        token = data.draw(st.sampled_from(tokens))
        if data.draw(st.booleans()):
            status, body = request(port, method, path, data.draw(bodies(kind)), token)
            check(status, body, f"{method} {path}")
            return
        # GET routes with random path segments and query values
        key, wait = data.draw(segments), data.draw(st.text(max_size=8))
        run = data.draw(st.sampled_from([run_id, "run_x", key]))
        for target in (
            f"{base}/runs/{run}/tasks/{key}?wait={urllib.parse.quote(wait)}&wait=0",
            f"{base}/runs/{key}",
            f"{base}/asks?run_id={key}",
            f"{base}/executors/{key}/inbox",
            f"/v1/workspaces/{key}/runs/{run_id}",
        ):
            status, body = request(port, "GET", target, None, token)
            check(status, body, f"GET {target}")

    # Three threads want the GIL here (hypothesis, the event loop, the SQLite driver's worker);
    # a shorter switch interval keeps each request from waiting out 5 ms hand-overs.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    try:
        await asyncio.to_thread(fuzz)
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
