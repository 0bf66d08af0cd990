"""A tiny blocking HTTP/1.1 JSON client on a bare socket, for the hook.

`http.client` costs about 15 ms of imports (it pulls the `email` package), as much as the rest
of the hook's start-up together; a JSON request with `Connection: close` needs none of it. HTTPS
URLs go through `http.client` (imported only then).
"""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import quote, urlsplit

# A service that does not even take the connection within this many seconds is unreachable:
# a blackholed address would otherwise hold the hook for a request's whole timeout (up to the
# long-poll's 85 s) before it says so. Reading the answer keeps the request's own timeout.
CONNECT_TIMEOUT = 5.0


class Unreachable(Exception):
    """No HTTP answer at all: refused connection, unknown host, timeout, garbled reply."""


class Reply:
    __slots__ = ("body", "status")

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body  # the decoded JSON, or None when the body was empty or not JSON

    @property
    def error(self) -> tuple[str, str]:
        """(code, detail) of an `{"error": {...}}` envelope, or the bare status."""
        error = self.body.get("error") if isinstance(self.body, dict) else None
        if isinstance(error, dict):
            return str(error.get("code", "")), str(error.get("detail", ""))
        return f"http_{self.status}", ""


def segment(value: str) -> str:
    """One URL path segment."""
    return quote(value, safe="")


class Endpoint:
    """`APPROVALBOT_URL` and a bearer token: `request("POST", "/v1/…", body)`."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url.strip().rstrip("/")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.token = token
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = (self.tls and self.port == 443) or (not self.tls and self.port == 80)
        self.host_header = host if default else f"{host}:{self.port}"

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Reply:
        data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode()
        headers = {
            "Host": self.host_header,
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "User-Agent": "approvalbot-hook-claude-code",
            "Connection": "close",
        }
        if body is not None or method in ("POST", "PUT", "PATCH"):
            headers["Content-Type"] = "application/json"
            headers["Content-Length"] = str(len(data))
        target = self.prefix + path
        try:
            if self.tls:
                status, raw = _https(self, method, target, headers, data, timeout)
            else:
                status, raw = _plain(self, method, target, headers, data, timeout)
        except (OSError, ValueError) as error:
            raise Unreachable(_describe(error)) from None
        try:
            decoded = json.loads(raw) if raw.strip() else None
        except ValueError:
            decoded = None
        return Reply(status, decoded)


def _describe(error: BaseException) -> str:
    if isinstance(error, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def _plain(
    end: Endpoint, method: str, target: str, headers: dict[str, str], data: bytes, timeout: float
) -> tuple[int, bytes]:
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    # An ASCII host as bytes: a str would be IDNA-encoded, importing `encodings.idna`.
    host: str | bytes = end.host.encode() if end.host.isascii() else end.host
    connect = min(timeout, CONNECT_TIMEOUT)
    with socket.create_connection((host, end.port), timeout=connect) as sock:  # type: ignore[arg-type]
        sock.settimeout(timeout)
        sock.sendall(head.encode("latin-1") + b"\r\n" + data)
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return _parse(b"".join(chunks))


def _parse(raw: bytes) -> tuple[int, bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("the service closed the connection without a complete answer")
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
        raise ValueError(f"not an HTTP answer: {lines[0][:80]!r}")
    status = int(status_line[1])
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = _unchunk(body)
    elif "content-length" in fields:
        body = body[: int(fields["content-length"])]
    return status, body


def _unchunk(body: bytes) -> bytes:
    out: list[bytes] = []
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        body = rest[size + 2 :]
    return b"".join(out)


def _https(
    end: Endpoint, method: str, target: str, headers: dict[str, str], data: bytes, timeout: float
) -> tuple[int, bytes]:
    import http.client

    connection = http.client.HTTPSConnection(
        end.host, end.port, timeout=min(timeout, CONNECT_TIMEOUT)
    )
    try:
        connection.connect()
        assert connection.sock is not None
        connection.sock.settimeout(timeout)
        connection.request(method, target, body=data or None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    except http.client.HTTPException as error:
        raise ValueError(f"garbled answer: {type(error).__name__}") from None
    finally:
        connection.close()
