"""What every API request goes through: JSON errors, the body bound, bearer authentication.

Errors on the API paths are always `{"error": {"code", "detail", …}}`: refusals from the core
keep their code and status, aiohttp's own HTTP errors (unknown route, wrong method — with its
`Allow` header —, body too large) get a code of their own, and anything unexpected is logged
(type and stack frames only — exception messages can carry request data, tool inputs or SQL
parameters) and answered as a JSON 500 rather than aiohttp's HTML page. A storage fault (a full
disk, a read-only database) is the store's 503 `storage_unavailable`, with `Retry-After`; the
store logs it, once, so nothing is logged here.

A bearer token that cannot be one of ours (not a b64token: non-ASCII, control bytes, too long)
is no credential: 401, without hashing or looking it up. Who may do what is `bot.access`'s (the
route wrapper and the handlers call it); bodies are read by `adapters.http.bodies`.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import HttpVersion11, web

from adapters.http.bodies import too_large
from adapters.http.ids import token_shaped
from adapters.http.keys import CORE, SETTINGS
from bot import errors, jsontext
from bot.domain import Principal
from bot.errors import ApprovalError

log = logging.getLogger("approvalbot.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Paths whose errors are JSON; the web page and chat webhooks answer in their own way.
API_PATHS = ("/v1/", "/metrics", "/openapi.json")

# Seconds a client is asked to wait after 503 `storage_unavailable` (a full disk, a read-only
# database: someone has to act, and asking again at once only adds to the log's count).
STORAGE_RETRY_AFTER = 5

_HTTP_CODES = {
    404: errors.NOT_FOUND,
    405: "method_not_allowed",
    413: errors.PAYLOAD_TOO_LARGE,
    415: "unsupported_media_type",
}


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=jsontext.dumpb(body), status=status, content_type="application/json", charset="utf-8"
    )


def error_response(error: ApprovalError) -> web.Response:
    response = json_response(error.to_json(), error.status)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="approvalbot"'
    if error.code == errors.STORAGE_UNAVAILABLE:
        # Nothing was written; the store says in the log why, once (store/faults.py).
        response.headers["Retry-After"] = str(STORAGE_RETRY_AFTER)
    return response


def _http_error(error: web.HTTPException) -> ApprovalError:
    code = _HTTP_CODES.get(error.status, f"http_{error.status}")
    detail = error.reason.lower() if error.reason else code.replace("_", " ")
    return ApprovalError(code, detail, error.status)


@web.middleware
async def api_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith(API_PATHS):
        return await handler(request)
    limit = request.app[SETTINGS].server.max_body_bytes
    try:
        # Refuse an announced oversized body before reading a byte of it; chunked bodies are
        # bounded by aiohttp's client_max_size while being read.
        if request.content_length is not None and request.content_length > limit:
            raise too_large(limit)
        return await handler(request)
    except ApprovalError as error:
        return error_response(error)
    except web.HTTPRequestEntityTooLarge:
        return error_response(too_large(limit))
    except web.HTTPException as error:
        if error.status < 400:
            raise
        response = error_response(_http_error(error))
        if "Allow" in error.headers:  # 405: which methods the resource has
            response.headers["Allow"] = error.headers["Allow"]
        return response
    except Exception as error:
        frames = "".join(traceback.format_tb(error.__traceback__))
        log.error(
            "unexpected %s on %s %s\n%s",
            type(error).__name__, request.method, request.match_info.route.resource, frames,
        )  # fmt: skip
        return error_response(ApprovalError("internal_error", "unexpected server error", 500))


async def expectation_met(request: web.Request) -> bool:
    """Whether a request's `Expect:` lets it go on (HTTP/1.1 `100-continue` is answered here).
    aiohttp's own handler quotes the header in its 417 and fails (a 500, before any
    middleware) when the header is not UTF-8; the API's and the page's handlers never echo it."""
    if request.version != HttpVersion11:
        return True
    if request.headers.get("Expect", "").lower() == "100-continue":
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer proper has not started
        return True
    return False


async def expect_handler(request: web.Request) -> web.StreamResponse | None:
    """`Expect:` on an API route: a 417 in the API's error shape unless it is met."""
    if await expectation_met(request):
        return None
    return error_response(
        ApprovalError("expectation_failed", "Expect: only 100-continue is understood", 417)
    )


# authentication --------------------------------------------------------------------------------
def bearer(request: web.Request) -> str | None:
    """The bearer token, or None when there is none or what is there cannot be a token."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or not token_shaped(token):
        return None
    return token


async def principal_or_none(request: web.Request) -> Principal | None:
    token = bearer(request)
    if token is None:
        return None
    return await request.app[CORE].admin.authenticate(token)


async def still_holds(request: web.Request, who: Principal) -> bool:
    """Whether the request's credential still names `who` (a long stream re-asks)."""
    now = await principal_or_none(request)
    return now is not None and now.id == who.id


def unauthorized() -> ApprovalError:
    return ApprovalError(
        errors.UNAUTHORIZED, "a valid bearer token is required (Authorization: Bearer …)", 401
    )
