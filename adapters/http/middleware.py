"""What every API request goes through: JSON errors, the body bound, bearer authentication.

Errors on the API paths are always `{"error": {"code", "detail", …}}`: refusals from the core
keep their code and status, aiohttp's own HTTP errors (unknown route, wrong method, body too
large) get a code of their own, and anything unexpected is logged (type and stack frames only —
exception messages can carry request data, tool inputs or SQL parameters) and answered as a
JSON 500 rather than aiohttp's HTML page.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from adapters.http.app import CORE, SETTINGS
from bot import errors, jsontext
from bot.domain import Principal
from bot.errors import ApprovalError

log = logging.getLogger("approvalbot.http")

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Paths whose errors are JSON; the web page and chat webhooks answer in their own way.
API_PATHS = ("/v1/", "/metrics", "/openapi.json")

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
    return response


def too_large(limit: int) -> ApprovalError:
    return ApprovalError(
        errors.PAYLOAD_TOO_LARGE, f"the request body is larger than {limit} bytes", 413
    )


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
        return error_response(_http_error(error))
    except Exception as error:
        frames = "".join(traceback.format_tb(error.__traceback__))
        log.error(
            "unexpected %s on %s %s\n%s",
            type(error).__name__, request.method, request.match_info.route.resource, frames,
        )  # fmt: skip
        return error_response(ApprovalError("internal_error", "unexpected server error", 500))


# authentication --------------------------------------------------------------------------------
def bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def principal_or_none(request: web.Request) -> Principal | None:
    token = bearer(request)
    if token is None:
        return None
    return await request.app[CORE].admin.authenticate(token)


def unauthorized() -> ApprovalError:
    return ApprovalError(
        errors.UNAUTHORIZED, "a valid bearer token is required (Authorization: Bearer …)", 401
    )


def check_workspace(principal: Principal, workspace_id: str) -> None:
    """A credential of one workspace sees nothing of another: the same 404 as a missing one."""
    if principal.workspace_id != workspace_id:
        raise ApprovalError(errors.NOT_FOUND, "workspace not found", 404)


def require_member(principal: Principal) -> None:
    if not principal.is_member:
        raise ApprovalError(
            errors.MEMBER_CREDENTIAL_REQUIRED,
            "this route is for people: use a member credential, not an application's",
            403,
        )


# bodies ----------------------------------------------------------------------------------------
def _where(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "body"


def problems(error: ValidationError) -> list[str]:
    found = []
    for item in error.errors(include_url=False, include_input=False):
        message = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
        found.append(f"{_where(tuple(item['loc']))}: {message.removeprefix('Value error, ')}")
    return found


async def read_body(request: web.Request, model: type[M]) -> M:
    """The body validated as `model`; an empty body counts as `{}`. Invalid: 422 naming the
    field (`tool_input.options[0]: …`)."""
    raw = await request.read()
    try:
        if not raw.strip():
            return model.model_validate({})
        return model.model_validate_json(raw)
    except ValidationError as error:
        found = problems(error)
        raise ApprovalError(
            errors.INVALID_REQUEST, "; ".join(found[:5]), 422, {"problems": found}
        ) from None
