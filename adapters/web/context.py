"""What every page handler shares: the core, templates, the session and CSRF checks, the guards
on what a request may carry, and the page's error handling."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote, urljoin, urlsplit

import jinja2
from aiohttp import web
from multidict import MultiDict
from yarl import URL

from adapters.http.middleware import STORAGE_RETRY_AFTER
from adapters.web import links, render
from adapters.web.session import (
    CSRF_FIELD,
    FLASH_COOKIE,
    Session,
    Signer,
    new_session,
    set_flash,
    set_session_cookie,
    take_flash,
)
from bot.config import Settings
from bot.core import Core
from bot.domain import Principal
from bot.errors import StorageUnavailable
from bot.ports import WebSessions

log = logging.getLogger("approvalbot.web")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


@dataclass
class WebState:
    core: Core
    settings: Settings
    env: jinja2.Environment
    signer: Signer
    secure: bool
    sessions: WebSessions
    stopping: asyncio.Event = field(default_factory=asyncio.Event)


WEB = web.AppKey("web", WebState)


# The page's own paths (the API and chat webhooks set their own headers).
WEB_PATHS = (
    "/login", "/logout", "/inbox", "/decisions/", "/runs", "/history", "/policy", "/web/",
)  # fmt: skip
SECURITY_HEADERS = {
    # Nothing may frame the page (no clickjacking of the Approve button), and it loads nothing
    # from elsewhere: its one script and one stylesheet are its own.
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'self'; object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def is_page_path(path: str) -> bool:
    return path == "/" or path.startswith(WEB_PATHS)


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: the page's responses carry the headers above."""
    if is_page_path(request.path):
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)


def make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    version = hashlib.sha256(
        b"".join(p.read_bytes() for p in sorted(STATIC.glob("*")) if p.is_file())
    ).hexdigest()[:10]
    env.globals.update(
        static=lambda name: f"/web/static/{name}?v={version}",
        decision_path=links.decision_path,
        run_path=links.run_path,
        run_name=render.run_name,
        when=render.when,
    )
    return env


def state(request: web.Request) -> WebState:
    return request.app[WEB]


def now_ts(request: web.Request) -> float:
    return state(request).core.clock.now().timestamp()


# sessions ------------------------------------------------------------------------------------
_SESSION = web.RequestKey[Session | None]("session")
_STALE = web.RequestKey("stale_cookie", bool)  # a signed-in cookie whose session ended
_STREAMING = web.RequestKey("streaming", bool)  # a streamed response's head is sent


async def resolve_session(request: web.Request) -> Session | None:
    """The visitor's session, once per request (`web_errors` calls it before the handler).

    The signed cookie alone makes an anonymous session. A signed-in one counts only while its
    `web_session` row is live (one read): signed out, expired, or the person's token rotated or
    revoked, and the cookie is anonymous again, whoever holds a copy of it."""
    if _SESSION in request:
        return request[_SESSION]
    web_state = state(request)
    now = web_state.core.clock.now()
    session = web_state.signer.session_from(request, now.timestamp())
    if session is not None and session.member is not None:
        live = await web_state.sessions.get(session.sid, now)
        if live is None or live.member.id != session.member.id:
            session = Session(session.sid, session.expires)
            request[_STALE] = True  # page() rewrites the cookie without its member
        else:
            session = Session(session.sid, session.expires, live.member)
    request[_SESSION] = session
    return session


def session_of(request: web.Request) -> Session | None:
    """The session `resolve_session` found for this request (None before it ran)."""
    return request.get(_SESSION)


def member_of(request: web.Request) -> Principal | None:
    session = session_of(request)
    return session.member if session is not None else None


async def still_signed_in(request: web.Request) -> bool:
    """For a long response (the live feed): whether its session is still live now."""
    session = session_of(request)
    if session is None or session.member is None:
        return False
    web_state = state(request)
    now = web_state.core.clock.now()
    if session.expires <= now.timestamp():
        return False
    live = await web_state.sessions.get(session.sid, now)
    return live is not None and live.member.id == session.member.id


def as_datetime(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


# what a request may carry --------------------------------------------------------------------
MAX_NAME = 200  # ids, keys, tool and member names are at most this long in the store
_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))
_HERE = "http://approvalbot.invalid/"


def storable(text: str, limit: int = MAX_NAME) -> bool:
    """Text both databases can compare: no NUL (PostgreSQL refuses it), no lone surrogate
    (no codec takes one), not longer than anything the store holds."""
    if len(text) > limit or "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def path_values(request: web.Request, *names: str) -> list[str]:
    """The named parts of the path; one no record could have is a 404 before any query."""
    values = [request.match_info[name] for name in names]
    if not all(value and storable(value) for value in values):
        raise web.HTTPNotFound(
            text=error_html(request, 404, "Not found", "not_found: no such page"),
            content_type="text/html",
        )
    return values


def query_value(request: web.Request, name: str) -> str:
    """A filter from the query string, stripped; one no record could match is a 422."""
    value = request.query.get(name, "").strip()
    if not storable(value):
        message = f"invalid_request: {name}: not a value this service stores"
        raise web.HTTPUnprocessableEntity(
            text=error_html(request, 422, "Invalid filter", message), content_type="text/html"
        )
    return value


def _as_browser_reads(value: str) -> str:
    """What a browser makes of a URL before it parses it (WHATWG URL): leading and trailing
    C0 controls and spaces go, and so does every tab and newline within."""
    return value.strip(_C0_AND_SPACE).replace("\t", "").replace("\n", "").replace("\r", "")


def _same_site_path(value: str) -> bool:
    if not value.startswith("/") or value.startswith("//"):
        return False  # `//host/…` is another site (a network-path reference)
    if "\\" in value:
        return False  # browsers read a backslash as a slash: `/\host` is `//host`
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return False
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return False
    landing = urlsplit(urljoin(_HERE, value))
    return f"{landing.scheme}://{landing.netloc}/" == _HERE


def safe_next(value: object, default: str = "/inbox") -> str:
    """Only a path on this service: never an open redirect. `value` must read the same to us,
    to a browser and once it is in the Location header (aiohttp writes it through yarl), and
    be a path on this site every time; anything else is dropped for `default`."""
    if not isinstance(value, str) or not value or len(value) > 2000 or not storable(value, 2000):
        return default
    if _as_browser_reads(value) != value or not _same_site_path(value):
        return default
    try:
        written = str(URL(value))
    except ValueError:
        return default
    return value if _same_site_path(written) else default


async def require_member(request: web.Request) -> Principal:
    """The signed-in person (the session is live: see `resolve_session`), or off to sign in."""
    member = member_of(request)
    if member is None:
        target = request.path_qs if request.method == "GET" else "/inbox"
        raise web.HTTPSeeOther(f"/login?next={quote(target, safe='')}")
    return member


def _values(request: web.Request, current: Session | None) -> dict[str, Any]:
    web_state = state(request)
    return {
        "member": current.member if current else None,
        "csrf": web_state.signer.csrf(current) if current else "",
        "csrf_field": CSRF_FIELD,
        "flash": None,
        "now": web_state.core.clock.now(),
        "path": request.path,
    }


def page(
    request: web.Request,
    template: str,
    context: dict[str, Any] | None = None,
    *,
    status: int = 200,
) -> web.Response:
    """Render a page; every visitor gets a session id so every form can carry a CSRF token."""
    web_state = state(request)
    existing = session_of(request)
    current = existing or new_session(now_ts(request))
    values = _values(request, current)
    values["flash"] = take_flash(request, web_state.signer)
    values.update(context or {})
    body = web_state.env.get_template(template).render(values)
    response = web.Response(text=body, status=status, content_type="text/html")
    response.headers["Cache-Control"] = "no-store"
    if existing is None or request.get(_STALE):
        set_session_cookie(response, web_state.signer, current, secure=web_state.secure)
    if values["flash"] is not None:
        response.del_cookie(FLASH_COOKIE, path="/")
    return response


def fragment(request: web.Request, template: str, context: dict[str, Any]) -> web.Response:
    values = _values(request, session_of(request)) | context
    body = state(request).env.get_template(template).render(values)
    response = web.Response(text=body, content_type="text/html")
    response.headers["Cache-Control"] = "no-store"
    return response


def error_html(request: web.Request, status: int, title: str, message: str) -> str:
    values = _values(request, session_of(request))
    values.update(status=status, title=title, message=message)
    return state(request).env.get_template("error.html").render(values)


async def checked_form(request: web.Request) -> tuple[Session, MultiDict[str]]:
    """The posted form, after the CSRF check: a post without the right token gets 403."""
    form = await request.post()
    current = session_of(request)
    if current is None or not state(request).signer.csrf_ok(current, form.get(CSRF_FIELD)):
        message = (
            "csrf_failed: this form is missing its security token, or the token is stale. "
            "Reload the page and try again."
        )
        raise web.HTTPForbidden(
            text=error_html(request, 403, "Form refused", message), content_type="text/html"
        )
    return current, MultiDict((k, v) for k, v in form.items() if isinstance(v, str))


def redirect(request: web.Request, target: str, message: str = "", kind: str = "info") -> NoReturn:
    """After a form post: back to a page, with a one-shot message for it."""
    response = web.HTTPSeeOther(target)
    if message:
        set_flash(response, state(request).signer, message, kind, secure=state(request).secure)
    raise response


# long responses and errors -------------------------------------------------------------------
async def start_stream(request: web.Request, response: web.StreamResponse) -> None:
    """Send a streamed response's head; from here on an error can only cut it short."""
    await response.prepare(request)
    request[_STREAMING] = True


@web.middleware
async def web_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The page's requests: the session resolved first (one read), and anything unexpected
    logged by its type and code location only (never its message: a database error's message
    holds the SQL and its parameters, which hold what people typed) and answered as a page. A
    storage fault (a full disk, a read-only database) is a 503 page naming it, not logged here:
    the store says it in the log, once."""
    if not is_page_path(request.path) or request.path.startswith("/web/static/"):
        return await handler(request)
    try:
        await resolve_session(request)
        return await handler(request)
    except web.HTTPException:
        raise
    except ConnectionResetError:
        raise  # the browser went away
    except StorageUnavailable as error:
        # A full disk, a read-only database: the store has said so in the log, once.
        if request.get(_STREAMING):
            raise ConnectionResetError("response cut short: storage unavailable") from None
        if _SESSION not in request:
            request[_SESSION] = None
        return web.Response(
            text=error_html(request, 503, "Storage unavailable", f"{error.code}: {error.detail}"),
            status=503,
            content_type="text/html",
            headers={"Retry-After": str(STORAGE_RETRY_AFTER)},
        )
    except Exception as error:
        frames = "".join(traceback.format_tb(error.__traceback__))
        log.error(
            "unexpected %s on %s %s\n%s",
            type(error).__name__, request.method, request.match_info.route.resource, frames,
        )  # fmt: skip
        if request.get(_STREAMING):
            # The head is sent: close the connection rather than hand aiohttp the error,
            # whose own log line would carry the message.
            raise ConnectionResetError("response cut short (logged above)") from None
        if _SESSION not in request:
            request[_SESSION] = None
        message = "internal_error: something went wrong on our side; it is logged"
        return web.Response(
            text=error_html(request, 500, "Server error", message),
            status=500,
            content_type="text/html",
        )
