"""Hostile input at the HTTP layer, on both stores: a credential that cannot be valid is a
401/403, an identifier that cannot exist a 404 (a malformed filter a 422) before any SQL runs,
compressed bodies are decoded or refused, duplicate JSON keys are refused, 405 says what is
allowed, `/openapi.json` states what identifiers may contain, malformed request lines make one
rate-limited WARNING, the resolution route answers alike whether or not a run and key exist,
and the Telegram webhook ignores malformed updates. Never a 500, and nothing in the store moves.

Requests go over a raw socket (`raw_request`): clients refuse to send most of this.
"""

from __future__ import annotations

import ast
import asyncio
import gzip
import http.client
import io
import json
import logging
import re
import socket
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.http import ids
from adapters.http.keys import REQUEST_LOG
from adapters.http.request_log import RequestLog
from adapters.telegram import mount
from store.sql import SqlStore
from tests.http_harness import Served, fixtures
from tests.telegram_harness import build_world, close_world, fake_telegram, settings_for

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()

Headers = Sequence[tuple[str, str | bytes]]


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def code(self) -> str | None:
        body = self.json() if self.is_json else None
        error = body.get("error") if isinstance(body, dict) else None
        return error.get("code") if isinstance(error, dict) else None

    @property
    def is_json(self) -> bool:
        return (self.headers.get("Content-Type") or "").startswith("application/json")


class _Replay:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, *_args: object, **_kwargs: object) -> io.BytesIO:
        return io.BytesIO(self._data)


def raw_request(
    port: int,
    method: str,
    target: str,
    headers: Headers = (),
    body: bytes | None = None,
    *,
    timeout: float = 10.0,
    line: bytes | None = None,
) -> Answer:
    """One request exactly as given (header values may be any bytes), on its own connection."""
    head = [line or f"{method} {target} HTTP/1.1".encode(), b"Host: 127.0.0.1"]
    head.append(b"Connection: close")
    for name, value in headers:
        head.append(name.encode() + b": " + (value if isinstance(value, bytes) else value.encode()))
    if body is not None:
        head.append(b"Content-Length: %d" % len(body))
    data = b"\r\n".join(head) + b"\r\n\r\n" + (body or b"")
    received = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered (and closed) before the whole body was read
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    response = http.client.HTTPResponse(_Replay(bytes(received)))  # type: ignore[arg-type]
    response.begin()
    return Answer(response.status, response.headers, response.read())


def port_of(api: Served) -> int:
    return int(api.url.rsplit(":", 1)[1])


async def send(api: Served, method: str, target: str, who: str | None = "agent",
               headers: Headers = (), body: bytes | None = None) -> Answer:  # fmt: skip
    sent = list(headers)
    if who is not None:
        sent.append(("Authorization", f"Bearer {api.token(who)}"))
    if body is not None and not any(n.lower() == "content-type" for n, _ in sent):
        sent.append(("Content-Type", "application/json"))
    return await asyncio.to_thread(raw_request, port_of(api), method, target, sent, body)


async def scene(api: Served) -> dict[str, str]:
    """A run with a parked call (k1), an author question (mine) and an executor."""
    _, run = await api.call("POST", "/runs", body={"approval_mode": "ask"})
    _, executor = await api.call("POST", "/executors", body={"name": "worker"})
    call = {"key": "k1", "tool_name": "bash", "tool_input": {"command": "ls"}}
    await api.call("POST", f"/runs/{run['id']}/tasks", body=call)
    # an author question (people append author rows): its receipt holds a resolution token
    status, mine = await api.call(
        "POST", f"/runs/{run['id']}/tasks", "alice",
        body={"key": "mine", "tool_name": "ask", "tool_input": {"prompt": "?"}, "origin": "author"},
    )  # fmt: skip
    assert status == 201, mine
    return {"run": run["id"], "executor": executor["id"], "token": mine["resolution_token"]}


async def snapshot(api: Served, executors: Sequence[str] = ()) -> Any:
    """What a refused request must leave alone: runs, tasks, events, log, executors."""
    store = api.core.store
    runs = await store.runs(api.ws)
    tasks = await store.tasks(api.ws)
    events = [[(e.seq, e.name) for e in await store.events_after(r.id, 0)] for r in runs]
    async with store.read() as tx:
        found = [await tx.get_executor(e) for e in executors]
    return (
        sorted((r.id, r.state) for r in runs),
        sorted((t.run_id, t.key, t.state, t.resolved_by) for t in tasks),
        events,
        len(await store.log_entries(api.ws)),
        [(e.id, e.revoked) if e is not None else None for e in found],
        await store.count_parked(),
    )


# 3. a credential that cannot be valid --------------------------------------------------------
ODD_TOKENS: list[bytes] = [
    b"abm_\xff\xfe",  # not UTF-8: aiohttp hands it on as surrogates
    "abm_é".encode(),
    b"abm_\xc3\x28",
    b"\xe2\x80\xa6",
    b"abm_" + b"\x7f" * 5,
    b"abm_" + b"x" * 5000,
]


async def test_a_credential_that_cannot_be_valid_is_401(api: Served) -> None:
    params = await scene(api)
    before = await snapshot(api)
    base = f"/v1/workspaces/{api.ws}"
    targets = [
        ("GET", f"{base}/runs/{params['run']}"),
        ("POST", f"{base}/runs"),
        ("GET", f"{base}/asks"),
        ("POST", f"{base}/runs/{params['run']}/tasks/k1/approve"),
        ("GET", f"{base}/executors/{params['executor']}"),
    ]
    for method, target in targets:
        for token in ODD_TOKENS:
            body = b"{}" if method == "POST" else None
            answer = await send(api, method, target, None, [("Authorization", b"Bearer " + token)],
                                body)  # fmt: skip
            if b"\x7f" in token:  # aiohttp's parser refuses control bytes in a header itself
                assert answer.status == 400, (target, token)
                continue
            assert (answer.status, answer.code) == (401, "unauthorized"), (target, token)
        # a session cookie means nothing to the API, whatever its bytes
        for cookie in (b"approvalbot_session=\xff\xfe.abc", "approvalbot_session=é.é".encode()):
            answer = await send(api, method, target, None, [("Cookie", cookie)],
                                b"{}" if method == "POST" else None)  # fmt: skip
            assert (answer.status, answer.code) == (401, "unauthorized"), (target, cookie)
    # an odd resolution token stands for nobody either
    for token in ("abr_é", "abr_\u2028", "é" * 150):
        answer = await send(
            api, "POST", f"{base}/runs/{params['run']}/tasks/mine/resolution", None,
            body=json.dumps({"content": "x", "resolution_token": token}).encode(),
        )  # fmt: skip
        assert (answer.status, answer.code) == (403, "invalid_resolution_token"), token
    assert await snapshot(api) == before


# 4. identifiers that cannot exist ------------------------------------------------------------
HOSTILE_IDS = ["%00", "run%00x", "%C3%A9", "%FF", "x" * 300, "%2F", "a%2Fb", "%0A", "r%0A",
               "%20", "%25", "~%7F"]  # fmt: skip


def routes_with(name: str) -> list[tuple[str, str]]:
    from adapters.http.routes import ROUTES

    return [(r.method, r.path) for r in ROUTES if "{" + name + "}" in r.path]


def body_for(path: str) -> bytes:
    if path.endswith("/tasks"):
        return b'{"tool_name": "bash", "tool_input": {}}'
    if path.endswith(("/claim", "/commit")):
        return b'{"run_id": "x", "task_key": "y"}'
    if path.endswith("/executors"):
        return b'{"name": "w"}'
    if path.endswith("/resolution"):
        return b'{"content": "yes"}'
    return b"{}"


async def test_impossible_identifiers_are_404_before_sql(api: Served) -> None:
    params = await scene(api)
    before = await snapshot(api, [params["executor"]])
    real = {"ws": api.ws, "run": params["run"], "key": "k1", "executor": params["executor"],
            "rule": "lrn_0123456789abcdef"}  # fmt: skip
    for name, who in (("ws", "agent"), ("run", "agent"), ("key", "alice"), ("executor", "agent"),
                      ("rule", "alice")):  # fmt: skip
        for method, path in routes_with(name):
            who_here = "alice" if path.endswith(("/approve", "/deny", "/resolution", "/retry",
                                                 "/abandon")) else who  # fmt: skip
            for bad in HOSTILE_IDS:
                target = path.format(**(real | {name: bad}))
                body = body_for(path) if method == "POST" else None
                answer = await send(api, method, target, who_here, body=body)
                assert (answer.status, answer.code) == (404, "not_found"), (target, answer.body)
    assert await snapshot(api, [params["executor"]]) == before


async def test_a_malformed_filter_is_422(api: Served) -> None:
    await scene(api)
    base = f"/v1/workspaces/{api.ws}"
    for bad in HOSTILE_IDS:
        answer = await send(api, "GET", f"{base}/asks?run_id={bad}", "alice")
        assert (answer.status, answer.code) == (422, "invalid_request"), bad
    answer = await send(api, "GET", f"{base}/asks?run_id=run_0123456789abcdef", "alice")
    assert (answer.status, answer.json()) == (200, {"asks": [], "next_cursor": None})
    for bad in ("%C2%B2", "%D9%A3", "1%00", "-1", "9" * 30):  # '²' and '٣' pass str.isdigit
        target = f"{base}/runs/run_0123456789abcdef/events?last_event_id={bad}"
        answer = await send(api, "GET", target)
        assert answer.status in (404, 422), (bad, answer.status)
        answer = await send(api, "GET", f"{base}/runs/run_0123456789abcdef/events", "agent",
                            [("Last-Event-ID", bytes.fromhex("c2b2"))])  # fmt: skip
        assert answer.status in (404, 422)


# the resolution route without a credential ---------------------------------------------------
async def test_the_resolution_route_reveals_nothing_without_a_credential(api: Served) -> None:
    params = await scene(api)
    before = await snapshot(api)
    run, token = params["run"], params["token"]
    wrong = token[:-4] + ("0000" if not token.endswith("0000") else "1111")
    base = f"/v1/workspaces/{api.ws}"
    cases = [
        (f"{base}/runs/run_0123456789abcdef/tasks/mine/resolution", token),  # no such run
        (f"{base}/runs/{run}/tasks/nothing/resolution", token),  # no such key
        (f"{base}/runs/{run}/tasks/mine/resolution", wrong),  # the task, a wrong token
        (f"{base}/runs/{run}/tasks/k1/resolution", token),  # another task
        (f"/v1/workspaces/{api.beta}/runs/{run}/tasks/mine/resolution", token),  # other ws
        (f"/v1/workspaces/nope/runs/{run}/tasks/mine/resolution", token),  # no such ws
        (f"{base}/runs/%00/tasks/%00/resolution", token),  # impossible ids
        (f"{base}/runs/{run}/tasks/x%C3%A9/resolution", wrong),
    ]
    answers = set()
    for target, sent in cases:
        body = json.dumps({"content": "yes", "resolution_token": sent}).encode()
        answer = await send(api, "POST", target, None, body=body)
        answers.add((answer.status, answer.body))
        assert (answer.status, answer.code) == (403, "invalid_resolution_token"), target
    assert len(answers) == 1  # the very same answer, byte for byte
    # without a resolution token and without a credential: 401, existing or not
    for target in (
        f"{base}/runs/{run}/tasks/mine/resolution",
        f"{base}/runs/%00/tasks/%00/resolution",
    ):
        answer = await send(api, "POST", target, None, body=b'{"content": "x"}')
        assert (answer.status, answer.code) == (401, "unauthorized"), target
    assert await snapshot(api) == before
    # and the right token on the right path still answers
    body = json.dumps({"content": "yes", "resolution_token": token}).encode()
    answer = await send(api, "POST", f"{base}/runs/{run}/tasks/mine/resolution", None, body=body)
    assert answer.status == 200, answer.body


# 6. Content-Encoding -------------------------------------------------------------------------
async def test_compressed_bodies_are_decoded_or_refused(api: Served) -> None:
    params = await scene(api)
    tasks = f"/v1/workspaces/{api.ws}/runs/{params['run']}/tasks"
    call = json.dumps({"tool_name": "bash", "tool_input": {"command": "ls"}}).encode()
    raw_deflate = zlib.compressobj(wbits=-15)
    deflated = raw_deflate.compress(call) + raw_deflate.flush()
    for encoding, body in (
        ("gzip", gzip.compress(call)),
        ("GZip", gzip.compress(call)),
        ("x-gzip", gzip.compress(call)),
        ("deflate", zlib.compress(call)),
        ("deflate", deflated),  # raw deflate, as some clients send it
        ("identity", call),
    ):
        answer = await send(api, "POST", tasks, headers=[("Content-Encoding", encoding)],
                            body=body)  # fmt: skip
        assert answer.status == 201, (encoding, answer.body)
    before = await snapshot(api)
    # a plain JSON body announced as gzip (the 500 of the issue), truncated and trailing data
    for encoding, body in (
        ("gzip", call),
        ("deflate", call),
        ("gzip", gzip.compress(call)[:-6]),
        ("gzip", gzip.compress(call) + b"garbage"),
    ):
        answer = await send(api, "POST", tasks, headers=[("Content-Encoding", encoding)],
                            body=body)  # fmt: skip
        assert (answer.status, answer.code) == (400, "invalid_json"), (encoding, answer.body)
    for encoding in ("br", "zstd", "compress", "gzip, gzip", "zz", "\xe9", "gzip;q=1"):
        answer = await send(api, "POST", tasks,
                            headers=[("Content-Encoding", encoding.encode("latin-1"))],
                            body=gzip.compress(call))  # fmt: skip
        assert (answer.status, answer.code) == (415, "unsupported_encoding"), encoding
    # a truncated gzip of `{}` was read as an empty body, that is `{}`: it stopped the run
    stop = f"/v1/workspaces/{api.ws}/runs/{params['run']}/stop"
    for cut in (10, 12, len(gzip.compress(b"{}")) - 1):
        answer = await send(api, "POST", stop, headers=[("Content-Encoding", "gzip")],
                            body=gzip.compress(b"{}")[:cut])  # fmt: skip
        assert (answer.status, answer.code) == (400, "invalid_json"), cut
    # a bomb: small on the wire, far past the body limit once decoded
    bomb = gzip.compress(b'{"tool_name": "x", "tool_input": "' + b"y" * (8 * 1024 * 1024) + b'"}')
    assert len(bomb) < 64 * 1024
    answer = await send(api, "POST", tasks, headers=[("Content-Encoding", "gzip")], body=bomb)
    assert (answer.status, answer.code) == (413, "payload_too_large")
    assert await snapshot(api) == before


# 11. duplicate keys, 405 Allow, openapi patterns ---------------------------------------------
async def test_duplicate_json_keys_are_refused(api: Served) -> None:
    params = await scene(api)
    before = await snapshot(api)
    base = f"/v1/workspaces/{api.ws}"
    for target, body in (
        (f"{base}/runs", b'{"title": "a", "title": "b"}'),
        (f"{base}/runs/{params['run']}/tasks",
         b'{"tool_name": "bash", "tool_input": {"command": "ls", "command": "rm -rf /"}}'),
        (f"{base}/runs/{params['run']}/tasks",
         b'{"tool_name": "a", "tool_input": [{"x": {"y": 1, "y": 2}}]}'),
        (f"{base}/runs/{params['run']}/tasks/k1/deny", b'{"reason": "a", "reason": "b"}'),
    ):  # fmt: skip
        who = "alice" if target.endswith("/deny") else "agent"
        answer = await send(api, "POST", target, who, body=body)
        assert (answer.status, answer.code) == (400, "invalid_json"), (target, answer.body)
    assert await snapshot(api) == before


async def test_effect_profile_extras_the_store_cannot_hold_are_a_422(api: Served) -> None:
    """Were a 500 (the HTTP model's own check raised outside validation); now the core
    refuses them, naming the key, or the JSON parser does."""
    params = await scene(api)
    before = await snapshot(api)
    tasks = f"/v1/workspaces/{api.ws}/runs/{params['run']}/tasks"
    for extra, where in (
        (b'"\\u0000"', "effect_profile"),
        (b'{"\\u0000": 1}', "effect_profile"),
        (b"[Infinity]", "effect_profile"),
        (b"NaN", "effect_profile"),
        (b"1" + b"0" * 400, "effect_profile"),  # more digits than any JSON value here may have
        (b"1" + b"0" * 5000, "body"),  # past what the parser reads as a number
    ):
        body = b'{"tool_name": "x", "tool_input": {}, "effect_profile": {"summary": "s", "x": '
        answer = await send(api, "POST", tasks, body=body + extra + b"}}")
        assert (answer.status, answer.code) == (422, "invalid_request"), (extra, answer.body)
        assert where in answer.json()["error"]["detail"], (extra, answer.body)
    assert await snapshot(api) == before


async def test_an_odd_expect_header_is_a_json_417(api: Served) -> None:
    """aiohttp's own Expect handler quoted the header and failed on non-UTF-8 bytes: a 500
    before any middleware."""
    params = await scene(api)
    before = await snapshot(api)
    base = f"/v1/workspaces/{api.ws}"
    for method, target in (("POST", f"{base}/runs/{params['run']}/stop"), ("GET", "/healthz"),
                           ("GET", f"{base}/runs/{params['run']}")):  # fmt: skip
        for expect in (b"\xff\xfe", "é".encode(), b"something-else"):
            answer = await send(api, method, target, headers=[("Expect", expect)],
                                body=b"{}" if method == "POST" else None)  # fmt: skip
            assert (answer.status, answer.code) == (417, "expectation_failed"), (target, expect)
    assert await snapshot(api) == before
    answer = await send(api, "POST", f"{base}/runs", headers=[("Expect", "100-continue")],
                        body=b"{}")  # fmt: skip
    assert answer.status == 201


async def test_405_names_the_allowed_methods(api: Served) -> None:
    params = await scene(api)
    base = f"/v1/workspaces/{api.ws}"
    for method, target, allowed in (
        ("PUT", f"{base}/runs", {"POST"}),
        ("DELETE", f"{base}/runs/{params['run']}", {"GET"}),
        ("POST", f"{base}/executors/{params['executor']}", {"GET", "DELETE"}),
        ("PATCH", f"{base}/runs/{params['run']}/tasks/k1/approve", {"POST"}),
    ):
        answer = await send(api, method, target, body=b"{}")
        assert (answer.status, answer.code) == (405, "method_not_allowed"), target
        listed = {m.strip() for m in (answer.headers.get("Allow") or "").split(",")}
        assert allowed <= listed, (target, answer.headers.get("Allow"))


async def test_openapi_states_what_identifiers_may_contain(api: Served) -> None:
    params = await scene(api)
    async with api.session.get(api.url + "/openapi.json") as response:
        doc = await response.json()
    real = {"ws": api.ws, "run": params["run"], "key": "k1", "executor": params["executor"],
            "rule": "lrn_0123456789abcdef"}  # fmt: skip
    seen = set()
    for path, operations in doc["paths"].items():
        for operation in operations.values():
            for parameter in operation["parameters"]:
                if parameter["in"] == "path":
                    pattern = parameter["schema"]["pattern"]
                    assert pattern.startswith("^") and pattern.endswith("$"), path
                    name = parameter["name"]
                    assert re.fullmatch(pattern[1:-1], real[name]), (path, name)
                    for bad in ("", "\x00", "é", "a/b", "x" * 300, "k\n"):
                        # ECMA-262's `$` is the end of the text: fullmatch is Python's
                        assert not re.fullmatch(pattern[1:-1], bad), (path, name, bad)
                    seen.add(name)
                elif parameter["name"] == "run_id":
                    assert re.fullmatch(parameter["schema"]["pattern"][1:-1], params["run"])
    assert seen == {"ws", "run", "key", "executor", "rule"}
    # the body models document the same alphabets the paths are checked against
    schemas = doc["components"]["schemas"]
    assert schemas["TaskIn"]["properties"]["key"]["anyOf"][0]["pattern"] == ids.KEY
    assert schemas["ClaimIn"]["properties"]["task_key"]["pattern"] == ids.KEY
    assert schemas["ClaimIn"]["properties"]["run_id"]["pattern"] == ids.RECORD
    assert "JsonValue" in schemas and "x-approvalbot" not in json.dumps(doc)


# malformed request lines ---------------------------------------------------------------------
async def test_malformed_request_lines_make_one_warning(
    api: Served, caplog: pytest.LogCaptureFixture
) -> None:
    port = port_of(api)
    api.server.runner.app[REQUEST_LOG].reset()  # earlier tests may have used the window
    caplog.set_level(logging.DEBUG, logger="aiohttp.server")
    secret = b"abm_never-in-a-log"
    lines = [
        b"GET / HTTP/9.9",
        b"GET /\x01 HTTP/1.1",
        b"GET / HTTP/1.1\r\nBroken header line " + secret,
        b"GET /" + b"x" * 10000 + b" HTTP/1.1",
        b"GET / HTTP/1.1\r\nX-Long: " + b"y" * 10000,
    ]

    def flood() -> list[int]:
        statuses = []
        for _ in range(10):
            for line in lines:
                try:
                    answer = raw_request(port, "GET", "/", line=line)
                    statuses.append(answer.status)
                except (http.client.HTTPException, OSError):
                    statuses.append(0)
        return statuses

    statuses = await asyncio.to_thread(flood)
    assert all(s < 500 for s in statuses), statuses
    records = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert [r for r in records if r.levelno >= logging.ERROR] == []
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].exc_info is None
    assert "\n" not in warnings[0].getMessage()
    assert secret.decode() not in caplog.text
    # the service still answers
    answer = await send(api, "GET", "/healthz", None)
    assert answer.status == 200


@pytest.mark.asyncio(loop_scope="function")
async def test_the_request_log_writes_one_line_per_window(caplog: pytest.LogCaptureFixture) -> None:
    from aiohttp.http_exceptions import BadStatusLine, LineTooLong

    now = [100.0]
    request_log = RequestLog(logging.getLogger("test.request_log"), every=60, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="test.request_log")
    for _ in range(100):
        request_log.exception("Error handling request from %s", "1.2.3.4",
                              exc_info=BadStatusLine("GET abm_secret"))  # fmt: skip
    now[0] += 61
    request_log.exception("Error", exc_info=LineTooLong("x", "8190"))
    request_log.exception("Error", exc_info=LineTooLong("x", "8190"))
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert len(lines) == 2 and {level for level, _ in lines} == {"WARNING"}
    assert ": 1 (BadStatusLine)" in lines[0][1]
    assert ": 100 (BadStatusLine, LineTooLong)" in lines[1][1]  # 99 held + the one that came
    assert "abm_secret" not in caplog.text
    # anything else passes through as it was
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        request_log.exception("Unhandled exception")
    assert caplog.records[-1].levelname == "ERROR" and caplog.records[-1].exc_info


# the package's shape -------------------------------------------------------------------------
def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:` (imports for the type checker only)."""
    found: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                todo.extend(child.orelse)
                continue
            todo.append(child)
    return found


def import_graph() -> dict[str, set[str]]:
    """Which modules of adapters/http each one imports when it runs."""
    folder = Path(__file__).resolve().parents[1] / "adapters" / "http"
    graph: dict[str, set[str]] = {}
    for file in folder.glob("*.py"):
        name = file.stem
        graph[name] = set()
        for node in _runtime_nodes(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "adapters.http":
                    graph[name] |= {a.name for a in node.names}
                elif node.module.startswith("adapters.http."):
                    graph[name].add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("adapters.http."):
                        graph[name].add(alias.name.split(".")[2])
    return graph


@pytest.mark.asyncio(loop_scope="function")
async def test_the_http_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert not any("app" in deps for deps in graph.values()), graph  # app.py is the root

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, " -> ".join((*path, node))
        for nxt in graph.get(node, ()):
            visit(nxt, (*path, node))

    for start in graph:
        visit(start, ())


# 3 and 7. the Telegram webhook ---------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.usefixtures("ptb_timedelta")
@pytest.mark.asyncio(loop_scope="function")
async def test_the_telegram_webhook_refuses_odd_secrets_and_ignores_malformed_updates(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    port = _free_port()
    secret = "s3cr3t_-X"
    async with fake_telegram() as fake:
        settings = settings_for(fake, mode="webhook", webhook_secret=secret,
                                public_url=f"http://127.0.0.1:{port}")  # fmt: skip
        app = web.Application()
        runner = web.AppRunner(app)
        tg = None
        try:
            tg = await build_world(store, fake, settings=settings, create=True)
            mount(app, tg.adapter)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            await tg.park("k1")
            await tg.flush()

            def post(body: bytes, given: bytes | None = secret.encode()) -> int:
                headers: list[tuple[str, str | bytes]] = [("Content-Type", "application/json")]
                if given is not None:
                    headers.append(("X-Telegram-Bot-Api-Secret-Token", given))
                return raw_request(port, "POST", "/telegram/webhook", headers, body).status

            update = json.dumps({"update_id": 1}).encode()
            for odd in (b"s3cr3t_-X\xff", b"\xff\xfe", "s3cr3t_-é".encode(), b"", b"s3cr3t_-x",
                        b"s3cr3t_-X" * 100):  # fmt: skip
                assert await asyncio.to_thread(post, update, odd) == 403, odd
            assert await asyncio.to_thread(post, update, None) == 403

            caplog.set_level(logging.DEBUG, logger="adapters.telegram.adapter")
            deep = b'{"update_id": 7, "message": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
            malformed = [
                b"{}",
                b'{"update_id": 2, "callback_query": {}}',
                b'{"update_id": 3, "callback_query": {"id": "1", "from": "alice"}}',
                b'{"update_id": 4, "callback_query": {"id": "1", "chat_instance": "1", '
                b'"from": {"id": "x"}, "data": "d"}}',
                b'{"update_id": 5, "message": {"message_id": 1, "date": 1, "chat": "c"}}',
                b'{"update_id": 6, "message": [1, 2]}',
                b'{"update_id": "six"}',
                b'{"update_id": 8, "update_id": 9}',
                deep,
                b'{"update_id": 10, "message": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}",
                b"[1, 2]",
                b"null",
                b"not json",
                b"\xff\xfe",
            ]
            for body in malformed:
                assert await asyncio.to_thread(post, body) == 200, body[:80]
            errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
            assert errors == [], [r.getMessage() for r in errors]
            assert any(r.levelno == logging.DEBUG and "malformed" in r.getMessage()
                       for r in caplog.records)  # fmt: skip
            # the adapter is alive: a real press still decides
            assert (await tg.task("k1")).parked
            msg = tg.message("make deploy k1")
            answer = await tg.press(msg, "Approve")
            assert answer.text == "✅ Approved"
        finally:
            await runner.cleanup()
            if tg is not None:
                await close_world(tg)


async def test_aiohttp_client_sees_json_errors(api: Served) -> None:
    """The SDK's own client stack (aiohttp): the 415 is JSON it can read."""
    params = await scene(api)
    url = api.path(f"/runs/{params['run']}/tasks")
    headers = {"Authorization": f"Bearer {api.token('agent')}", "Content-Encoding": "br",
               "Content-Type": "application/json"}  # fmt: skip
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.post(url, data=b"{}", headers=headers) as response:
            assert response.status == 415
            assert (await response.json())["error"]["code"] == "unsupported_encoding"


async def test_an_odd_expect_header_on_a_page_is_a_417(api: Served) -> None:
    for target in ("/inbox", "/login", "/history"):
        for expect in (b"\xff\xfe", b"something-else"):
            answer = await send(api, "GET", target, None, headers=[("Expect", expect)])
            assert answer.status == 417, (target, expect, answer.status)
