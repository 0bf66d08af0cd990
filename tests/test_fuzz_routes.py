"""Every route of the API under hostile input, on SQLite and PostgreSQL: identifiers (NUL,
non-ASCII, huge, `..`, `%2F`, random bytes), headers (non-ASCII, odd bytes, huge), body
encodings (gzip, deflate, br, garbage, corrupt) and bodies (random JSON, deep nesting,
duplicate keys, huge numbers). Whatever comes, the answer is never a 5xx, every refusal of the
API is the JSON error envelope, and nothing in the store moves.

"Nothing moves" holds by construction: each request carries something that must be refused —
an identifier that names nothing, a stranger's credential, or a body no request model accepts
(an unknown field, a key twice, a non-object). The input families complement
tests/test_api_fuzz.py, which sends random values in the real fields (and may change things).

Hypothesis drives a blocking raw-socket client (any bytes in any header) from a worker thread
while the server runs on the test's event loop; examples are derandomised, so CI sees the same
inputs every run. Each input family sends each example to every route it applies to.
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import socket
import sys
import urllib.parse
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.http import ids
from adapters.http.routes import ROUTES
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()

EXAMPLES = 50
META = [("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/healthz"), ("GET", "/readyz")]
DECIDING = ("/approve", "/deny", "/resolution", "/retry", "/abandon", "/asks")
POISON = b'{"zz_not_a_field": 1}'  # refused by every request model (they forbid unknown keys)


# the client ----------------------------------------------------------------------------------
@dataclass
class Answer:
    status: int
    content_type: str
    body: bytes


class _Replay:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, *_args: object, **_kwargs: object) -> Any:
        import io

        return io.BytesIO(self._data)


def send(port: int, method: str, target: bytes, headers: Sequence[tuple[bytes, bytes]],
         body: bytes | None) -> Answer:  # fmt: skip
    """One request as given, on its own connection. An event stream that opens is answered
    as soon as its headers are in (the stream itself is not waited for)."""
    head = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1",
            b"Connection: close"]  # fmt: skip
    head += [name + b": " + value for name, value in headers]
    if body is not None:
        head.append(b"Content-Length: %d" % len(body))
    data = b"\r\n".join(head) + b"\r\n\r\n" + (body or b"")
    received = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while chunk := sock.recv(65536):
                received += chunk
                end = received.find(b"\r\n\r\n")
                if end >= 0 and b"text/event-stream" in received[:end].lower():
                    break
        except ConnectionResetError:
            pass
    response = http.client.HTTPResponse(_Replay(bytes(received)))  # type: ignore[arg-type]
    response.begin()
    content_type = response.headers.get("Content-Type") or ""
    if "text/event-stream" in content_type:
        return Answer(response.status, content_type, b"")
    return Answer(response.status, content_type, response.read())


# the scene -----------------------------------------------------------------------------------
@dataclass
class Scene:
    api: Served
    port: int
    params: dict[str, str]

    def token(self, method: str, path: str) -> str:
        """A credential that may call the route (so refusals come from the input)."""
        return self.api.token("alice" if path.endswith(DECIDING) else "agent")


async def make_scene(api: Served) -> Scene:
    _, run = await api.call("POST", "/runs", body={"approval_mode": "ask"})
    _, executor = await api.call("POST", "/executors", body={"name": "worker"})
    tail = f"/runs/{run['id']}/tasks"
    for body in (
        {"key": "k1", "tool_name": "bash", "tool_input": {"command": "ls"}},
        {"key": "q", "tool_name": "ask", "tool_input": {"prompt": "Go?"}},
        {"key": "done", "tool_name": "bash", "tool_input": {}},
    ):
        status, _ = await api.call("POST", tail, body=body)
        assert status == 201
    status, _ = await api.call("POST", f"{tail}/done/approve", "alice", {})
    assert status == 200
    params = {
        "ws": api.ws,
        "run": run["id"],
        "key": "done",
        "executor": executor["id"],
        "rule": "lrn_0",
    }
    return Scene(api, int(api.url.rsplit(":", 1)[1]), params)


async def snapshot(api: Served, executor: str) -> Any:
    store = api.core.store
    runs = await store.runs(api.ws)
    async with store.read() as tx:
        found = await tx.get_executor(executor)
    return (
        sorted((r.id, r.state, r.held_task_key) for r in runs),
        sorted((t.run_id, t.key, t.state, t.resolved_by) for t in await store.tasks(api.ws)),
        [[(e.seq, e.name) for e in await store.events_after(r.id, 0)] for r in runs],
        len(await store.log_entries(api.ws)),
        (found.id, found.revoked) if found is not None else None,
        await store.count_parked(),
    )


def every_route() -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in ROUTES] + META


def quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def fill(path: str, params: dict[str, str]) -> str:
    return path.format(**{name: quote(value) for name, value in params.items()})


# strategies ----------------------------------------------------------------------------------
NAMED_IDS = ["\x00", "a\x00b", "é", "\udcff", "/", "a/b", "..", ".", "\n", "k\n", "\r\n", " ",
             "%", "%00", "\x7f", "~", "x" * 300, "x" * 3000, "run_" + "0" * 40, "\u2028",
             "\ufeff", "😀", "'; DROP TABLE runs; --", "${x}", "../../etc/passwd"]  # fmt: skip
hostile_ids = st.one_of(
    st.sampled_from(NAMED_IDS),
    st.text(min_size=1, max_size=40),
    st.binary(min_size=1, max_size=24).map(lambda b: b.decode("utf-8", "surrogateescape")),
)


def encode_segment(value: str) -> str:
    return urllib.parse.quote(value.encode("utf-8", "surrogateescape"), safe="")


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=16,
)
header_names = st.sampled_from([
    b"Authorization", b"Last-Event-ID", b"Content-Type", b"Cookie", b"Accept", b"Origin",
    b"Accept-Encoding", b"X-Forwarded-For", b"X-Forwarded-Proto", b"User-Agent", b"Referer",
    b"X-Request-Id", b"If-None-Match", b"Range", b"Expect", b"Forwarded", b"Host2",
    b"X-Telegram-Bot-Api-Secret-Token", b"X-Slack-Signature", b"Upgrade", b"Content-Language",
])  # fmt: skip
_ODD = bytes(b for b in range(256) if b not in (0, 10, 13))  # NUL-free, line-break-free
header_values = st.one_of(
    st.text(min_size=1, max_size=60).map(lambda t: t.encode("utf-8", "surrogateescape")),
    st.binary(min_size=1, max_size=60).map(lambda b: bytes(c for c in b if c in _ODD) or b"\xff"),
    st.sampled_from([b"\xff\xfe", "é".encode(), b"Bearer \xff", b"Bearer " + b"a" * 9000,
                     b"x" * 9000, b"\t", b"\x01\x02", "Bearer abm_é".encode(),
                     b"text/event-stream", b"100-continue", b"websocket"]),
)  # fmt: skip
ENCODINGS = ["gzip", "deflate", "br", "zstd", "compress", "identity", "x-gzip", "gzip, br",
             "GZIP", "deflate;q=1", "*", "", "é", "chunked", "\xff"]  # fmt: skip


def poisoned(value: Any) -> bytes:
    """JSON no request model accepts: non-objects as they are, objects with an unknown key."""
    if isinstance(value, dict):
        value = {**value, "zz_not_a_field": value.get("zz_not_a_field", 1)}
    return json.dumps(value).encode()


@st.composite
def hostile_bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 6))
    if kind == 0:  # random JSON
        return poisoned(draw(json_values))
    if kind == 1:  # deep nesting, in lists or objects, past any parser's limit or not
        depth = draw(st.sampled_from([50, 199, 200, 201, 1000, 5000, 100_000]))
        if draw(st.booleans()):
            inner = b"[" * depth + b"]" * depth
        else:
            inner = b'{"a": ' * depth + b"1" + b"}" * depth
        return b'{"tool_name": "x", "zz_not_a_field": ' + inner + b"}"
    if kind == 2:  # a key twice, at the top or inside a value
        name = draw(st.sampled_from(["title", "tool_name", "reason", "content", "name", "zz"]))
        if draw(st.booleans()):
            return b'{"%s": "a", "%s": "b"}' % (name.encode(), name.encode())
        return b'{"tool_name": "x", "tool_input": {"k": 1, "k": 2}, "zz_not_a_field": 1}'
    if kind == 3:  # huge numbers
        numbers = [b"1" * 5000, b"-" + b"9" * 400, b"1e99999", b"-1e400", b"1" * 300 + b".5",
                   b"0." + b"0" * 5000 + b"1"]  # fmt: skip
        number = draw(st.sampled_from(numbers))
        field = draw(st.sampled_from([b"tool_input", b"content", b"title", b"zz_not_a_field"]))
        return b'{"tool_name": "x", "' + field + b'": ' + number + b', "zz_not_a_field": 1}'
    if kind == 4:  # random bytes (poisoned if they happen to be JSON)
        raw = draw(st.binary(min_size=1, max_size=80))
        try:
            return poisoned(json.loads(raw))
        except (ValueError, RecursionError):
            return raw if raw.strip() else b"\xff"
    if kind == 5:  # JSON that is not UTF-8, or with lone surrogates, or with a BOM
        return draw(st.sampled_from([
            '{"title": "é"}'.encode("latin-1"), b'{"title": "\\udcff"}', b"\xef\xbb\xbf" + POISON,
            '{"title": "x"}'.encode("utf-16"), b'{"title": "\xff"}', b'{"a": NaN}',
        ]))  # fmt: skip
    return poisoned(draw(st.dictionaries(st.text(max_size=12), json_values, max_size=6)))


def compress(encoding: str, body: bytes, corrupt: bool) -> bytes:
    name = encoding.strip().lower()
    if name in ("gzip", "x-gzip"):
        packed = gzip.compress(body)
    elif name == "deflate":
        packed = zlib.compress(body)
    else:
        packed = body
    return packed[: max(1, len(packed) // 2)] if corrupt else packed


# the check -----------------------------------------------------------------------------------
@dataclass
class Record:
    failures: list[str]
    sent: int = 0

    def check(self, what: str, answer: Answer, allowed: Callable[[int], bool]) -> None:
        self.sent += 1
        problem = None
        if answer.status >= 500:
            problem = "a 5xx"
        elif not allowed(answer.status):
            problem = "an unexpected status"
        elif answer.status >= 400 and answer.content_type.startswith("application/json"):
            body = json.loads(answer.body)
            error = body.get("error") if isinstance(body, dict) else None
            if not (isinstance(error, dict) and isinstance(error.get("code"), str)):
                problem = "no error envelope"
        elif answer.status >= 400 and not (
            answer.status == 400 and answer.content_type.startswith("text/plain")
        ):
            problem = "a refusal that is not JSON"  # only aiohttp's parser answers in text
        if problem and len(self.failures) < 20:
            self.failures.append(f"{problem}: {what} -> {answer.status} {answer.body[:200]!r}")


def run_hypothesis(test: Callable[[st.DataObject], None]) -> None:
    fuzz = settings(
        max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck),
    )(given(st.data())(test))  # fmt: skip
    # Three threads want the GIL (hypothesis, the event loop, the SQLite driver's worker): a
    # shorter switch interval keeps each request from waiting out 5 ms hand-overs.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    try:
        fuzz()
    finally:
        sys.setswitchinterval(interval)


def _refused(status: int) -> bool:
    return 400 <= status < 500


async def fuzz_family(api: Served, family: str) -> Record:
    scene = await make_scene(api)
    record = Record([])
    before = await snapshot(api, scene.params["executor"])
    test = FAMILIES[family]
    await asyncio.to_thread(run_hypothesis, lambda data: test(scene, record, data))
    assert await snapshot(api, scene.params["executor"]) == before
    assert record.failures == [], "\n".join(record.failures)
    return record


# the families --------------------------------------------------------------------------------
def identifiers(scene: Scene, record: Record, data: st.DataObject) -> None:
    """A hostile value in one path parameter of each route (and in the id-like query values):
    404 when it cannot be an identifier; a refusal in any case."""
    bad = data.draw(hostile_ids, label="id")
    segment = encode_segment(bad)
    for method, path in every_route():
        names = [n for n in ("ws", "run", "key", "executor", "rule") if "{" + n + "}" in path]
        if not names:
            continue
        name = data.draw(st.sampled_from(names), label="which")
        target = path.format(**{n: quote(v) for n, v in scene.params.items()} | {name: segment})
        headers = [(b"Authorization", b"Bearer " + scene.token(method, path).encode()),
                   (b"Content-Type", b"application/json")]  # fmt: skip
        body = POISON if method == "POST" else None
        answer = send(scene.port, method, target.encode(), headers, body)
        try:
            impossible = not ids.fits(name, bad.encode("utf-8", "surrogateescape").decode())
        except UnicodeDecodeError:
            impossible = True
        # (the resolution route reads its body first: the poisoned body is its 422)
        impossible = impossible and not path.endswith("/resolution")
        if impossible:
            expected: Callable[[int], bool] = lambda s: s == 404  # noqa: E731
        elif method == "GET":  # a random value may name something real: reading is fine
            expected = lambda s: s < 300 or _refused(s)  # noqa: E731
        else:
            expected = _refused
        record.check(f"{method} {target}", answer, expected)
    base = fill("/v1/workspaces/{ws}", scene.params)
    run = fill("{run}", scene.params)
    member = [(b"Authorization", b"Bearer " + scene.api.token("alice").encode())]
    agent = [(b"Authorization", b"Bearer " + scene.api.token("agent").encode())]
    for target, headers in (
        (f"{base}/asks?run_id={segment}", member),
        (f"{base}/runs/{run}/tasks/done?wait={segment}", agent),
        (f"{base}/runs/{run}/events?last_event_id=x{segment}", agent),
        (f"{base}/executors/{scene.params['executor']}/cable?last_event_id=-{segment}", agent),
    ):
        answer = send(scene.port, "GET", target.encode(), headers, None)
        record.check(f"GET {target}", answer, lambda s: s in (200, 422))


def headers(scene: Scene, record: Record, data: st.DataObject) -> None:
    """One hostile header on a request to each route that would otherwise be refused for its
    body (POST), its owner (DELETE) or not at all (GET: nothing to change)."""
    name = data.draw(header_names, label="header")
    value = data.draw(header_values, label="value")
    if name == b"Last-Event-ID" and value.strip().isdigit():
        value = b"x" + value  # a real resume point would open the stream: not hostile
    for method, path in every_route():
        target = fill(path, scene.params)
        sent = [(b"Content-Type", b"application/json")]
        token = scene.token(method, path)
        if method == "DELETE":
            token = scene.api.token("other-agent")  # not its executor: 404, nothing revoked
        if name != b"Authorization":
            sent.append((b"Authorization", b"Bearer " + token.encode()))
        sent.append((name, value))
        body = POISON if method == "POST" else None
        answer = send(scene.port, method, target.encode(), sent, body)
        record.check(f"{method} {target} {name!r}: {value[:40]!r}", answer,
                     lambda s: s < 300 or _refused(s))  # fmt: skip


def encodings(scene: Scene, record: Record, data: st.DataObject) -> None:
    """Each body route with a Content-Encoding (right, corrupt or unknown) over a refused
    body: 422 when it decoded, 400 when it did not, 415 when the encoding is not accepted."""
    any_text = st.text(max_size=12).filter(lambda t: not set(t) & {"\r", "\n", "\x00"})
    encoding = data.draw(st.sampled_from(ENCODINGS) | any_text, label="encoding")
    corrupt = data.draw(st.booleans(), label="corrupt")
    inner = data.draw(hostile_bodies(), label="body")
    body = compress(encoding, inner, corrupt)
    name = encoding.strip().lower()
    for method, path in every_route():
        if method != "POST":
            continue
        target = fill(path, scene.params)
        sent = [(b"Authorization", b"Bearer " + scene.token(method, path).encode()),
                (b"Content-Type", b"application/json"),
                (b"Content-Encoding", encoding.encode("utf-8", "surrogateescape"))]  # fmt: skip
        answer = send(scene.port, method, target.encode(), sent, body)
        if name not in ("", "identity", "gzip", "x-gzip", "deflate"):
            expected: Callable[[int], bool] = lambda s: s in (400, 415)  # noqa: E731
        else:
            expected = _refused
        record.check(f"POST {target} {encoding!r} corrupt={corrupt}", answer, expected)


def bodies(scene: Scene, record: Record, data: st.DataObject) -> None:
    """Each body route with a body no model accepts: a 4xx, whatever is in it."""
    body = data.draw(hostile_bodies(), label="body")
    content_type = data.draw(st.sampled_from([b"application/json", b"text/plain", b"\xff"]))
    for method, path in every_route():
        if method != "POST":
            continue
        target = fill(path, scene.params)
        sent = [(b"Authorization", b"Bearer " + scene.token(method, path).encode()),
                (b"Content-Type", content_type)]  # fmt: skip
        answer = send(scene.port, method, target.encode(), sent, body)
        record.check(f"POST {target} {body[:60]!r}", answer, _refused)


FAMILIES: dict[str, Callable[[Scene, Record, st.DataObject], None]] = {
    "identifiers": identifiers,
    "headers": headers,
    "encodings": encodings,
    "bodies": bodies,
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_hostile_input_is_refused_and_changes_nothing(api: Served, family: str) -> None:
    record = await fuzz_family(api, family)
    assert record.sent >= EXAMPLES  # every example reached the server
