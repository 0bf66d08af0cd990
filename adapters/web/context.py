"""What every page handler shares: the core, templates, the signed session and CSRF checks."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import jinja2
from aiohttp import web
from multidict import MultiDict

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

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


@dataclass
class WebState:
    core: Core
    settings: Settings
    env: jinja2.Environment
    signer: Signer
    secure: bool
    stopping: asyncio.Event = field(default_factory=asyncio.Event)


WEB = web.AppKey("web", WebState)


# The page's own paths (the API and chat webhooks set their own headers).
WEB_PATHS = ("/login", "/logout", "/inbox", "/decisions/", "/runs", "/history", "/web/")
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


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: the page's responses carry the headers above."""
    if request.path == "/" or request.path.startswith(WEB_PATHS):
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
        when=render.when,
    )
    return env


def state(request: web.Request) -> WebState:
    return request.app[WEB]


def now_ts(request: web.Request) -> float:
    return state(request).core.clock.now().timestamp()


def session_of(request: web.Request) -> Session | None:
    return state(request).signer.session_from(request, now_ts(request))


def member_of(request: web.Request) -> Principal | None:
    session = session_of(request)
    return session.member if session is not None else None


def safe_next(value: object, default: str = "/inbox") -> str:
    """Only same-site paths: never an open redirect."""
    if isinstance(value, str) and value.startswith("/") and not value.startswith(("//", "/\\")):
        return value
    return default


async def require_member(request: web.Request) -> Principal:
    """The signed-in person; a session ends as soon as all of the person's tokens are revoked."""
    member = member_of(request)
    if member is None or not await state(request).core.admin.is_active(member):
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
    if existing is None:
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
