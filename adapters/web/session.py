"""Web sessions: a signed cookie (HMAC of the instance secret), CSRF tokens and flash messages.

The cookie carries `{sid, member…, exp}` and a signature. Every visitor gets a session id
(anonymous until sign-in, kept in the cookie alone), so even the sign-in form carries a CSRF
token. Signing in rotates the id (no session fixation) and makes it name a `web_session` row
(bot.ports.WebSessions): the page reads that row on every request, so signing out, or rotating
or revoking the person's token, ends the session at once, whatever copies of the cookie exist.
The CSRF token is an HMAC of the session id.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aiohttp import web

from bot.domain import Principal

SESSION_COOKIE = "approvalbot_session"
FLASH_COOKIE = "approvalbot_flash"
SESSION_TTL = timedelta(hours=12)
CSRF_FIELD = "csrf"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Session:
    """Read from a cookie, `member` is only what the cookie claims: the page trusts it once the
    store has the session live (adapters.web.context.resolve_session)."""

    sid: str
    expires: float
    member: Principal | None = None


class Signer:
    """Signs small JSON values with keys derived from the instance secret."""

    def __init__(self, secret: str) -> None:
        root = secret.encode()
        self._cookie_key = hmac.new(root, b"approvalbot web session v1", hashlib.sha256).digest()
        self._csrf_key = hmac.new(root, b"approvalbot web csrf v1", hashlib.sha256).digest()

    def dumps(self, value: dict[str, Any]) -> str:
        payload = _b64(json.dumps(value, separators=(",", ":")).encode())
        signature = hmac.new(self._cookie_key, payload.encode(), hashlib.sha256).digest()
        return f"{payload}.{_b64(signature)}"

    def loads(self, text: str | None) -> dict[str, Any] | None:
        # A cookie is ASCII; other bytes reach us as lone surrogates (aiohttp decodes headers
        # with surrogateescape), which no codec takes: such a cookie is simply not ours.
        if not text or "." not in text or len(text) > 4096 or not text.isascii():
            return None
        payload, _, signature = text.partition(".")
        expected = hmac.new(self._cookie_key, payload.encode(), hashlib.sha256).digest()
        try:
            if not hmac.compare_digest(_unb64(signature), expected):
                return None
            value = json.loads(_unb64(payload))
        except (ValueError, UnicodeDecodeError):
            return None
        return value if isinstance(value, dict) else None

    def csrf(self, session: Session) -> str:
        digest = hmac.new(self._csrf_key, session.sid.encode(), hashlib.sha256).digest()
        return _b64(digest)

    def csrf_ok(self, session: Session, token: object) -> bool:
        return isinstance(token, str) and hmac.compare_digest(token, self.csrf(session))

    # sessions ------------------------------------------------------------------------------
    def session_from(self, request: web.Request, now: float) -> Session | None:
        value = self.loads(request.cookies.get(SESSION_COOKIE))
        if value is None:
            return None
        try:
            expires = float(value["exp"])
            sid = str(value["sid"])
            member = None
            if "mid" in value:
                member = Principal("member", str(value["mid"]), str(value["mn"]), str(value["ws"]))
        except (KeyError, TypeError, ValueError):
            return None
        if expires <= now:
            return None
        return Session(sid, expires, member)

    def encode(self, session: Session) -> str:
        value: dict[str, Any] = {"sid": session.sid, "exp": session.expires}
        if session.member is not None:
            value |= {
                "mid": session.member.id,
                "mn": session.member.name,
                "ws": session.member.workspace_id,
            }
        return self.dumps(value)


def new_session(now: float, member: Principal | None = None) -> Session:
    return Session(secrets.token_urlsafe(32), now + SESSION_TTL.total_seconds(), member)


def set_session_cookie(
    response: web.StreamResponse, signer: Signer, session: Session, *, secure: bool
) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        signer.encode(session),
        max_age=int(SESSION_TTL.total_seconds()),
        path="/",
        httponly=True,
        samesite="Lax",
        secure=secure,
    )


def clear_session_cookie(response: web.StreamResponse) -> None:
    response.del_cookie(SESSION_COOKIE, path="/")


def set_flash(
    response: web.StreamResponse, signer: Signer, message: str, kind: str, *, secure: bool
) -> None:
    """A one-shot message for the next page (after a form post's redirect)."""
    response.set_cookie(
        FLASH_COOKIE,
        signer.dumps({"m": message[:600], "k": kind}),
        max_age=60,
        path="/",
        httponly=True,
        samesite="Lax",
        secure=secure,
    )


def take_flash(request: web.Request, signer: Signer) -> tuple[str, str] | None:
    value = signer.loads(request.cookies.get(FLASH_COOKIE))
    if value is None:
        return None
    return str(value.get("m", "")), str(value.get("k", "info"))
