"""What the page's forms do: sign in and out, approve, deny, answer, decline, stop/retry/abandon.

Every post carries the CSRF token (403 without it) and answers with a redirect back, carrying a
one-shot message: the outcome, or the refusal as `code: detail`. Decisions record `via: "web"`.
"""

from __future__ import annotations

from typing import NoReturn

from aiohttp import web

from adapters.web import links, render
from adapters.web.context import (
    as_datetime,
    checked_form,
    page,
    path_values,
    redirect,
    require_member,
    safe_next,
    session_of,
    state,
)
from adapters.web.session import clear_session_cookie, new_session, set_session_cookie
from bot import logins
from bot.decisions import ending_word
from bot.domain import Principal
from bot.errors import ApprovalError
from bot.events import workspace_topic
from bot.ports import WebSession

VIA = "web"


# signing in ----------------------------------------------------------------------------------
async def sign_in(request: web.Request, principal: Principal, target: str) -> NoReturn:
    """A fresh session (new id: no fixation) for the person, kept server-side so that signing
    out ends it, then on to `target`. A session the browser held before ends here."""
    web_state = state(request)
    now = web_state.core.clock.now()
    previous = session_of(request)
    if previous is not None and previous.member is not None:
        await web_state.sessions.revoke(previous.sid, now)
    session = new_session(now.timestamp(), principal)
    await web_state.sessions.create(
        WebSession(session.sid, principal, now, as_datetime(session.expires))
    )
    response = web.HTTPSeeOther(target)
    set_session_cookie(response, web_state.signer, session, secure=web_state.secure)
    raise response


async def login_form(request: web.Request) -> web.Response:
    current = session_of(request)
    target = safe_next(request.query.get("next"))
    if current is not None and current.member is not None:
        raise web.HTTPSeeOther(target)
    return page(request, "login.html", {"next": target, "error": ""})


async def login(request: web.Request) -> web.Response:
    _, form = await checked_form(request)
    target = safe_next(form.get("next"))
    token = form.get("token", "").strip()
    # Tokens are ASCII: anything else is no token (and never reaches the store).
    principal = await state(request).core.admin.authenticate(token) if token.isascii() else None
    error = ""
    if principal is None:
        error = "unauthorized: this token is not valid (or it was revoked)"
    elif not principal.is_member:
        error = (
            "member_credential_required: this is an application's token; "
            "sign in with a person's (member) token"
        )
    if principal is None or error:
        return page(request, "login.html", {"next": target, "error": error}, status=401)
    await sign_in(request, principal, target)


async def login_link(request: web.Request) -> web.Response:
    """A one-time sign-in link: used once, within its short lifetime, by a GET. A HEAD (a link
    preview, a mail scanner looking before the person clicks) is answered and leaves it be."""
    if request.method != "GET":
        return web.Response(status=200, content_type="text/html")
    core = state(request).core
    principal = await logins.consume(core.store, core.clock, request.match_info["token"])
    if principal is None:
        message = (
            "This sign-in link has expired or was already used. Restart the service for a new "
            "one, or sign in with your member token."
        )
        return page(request, "login.html", {"next": "/inbox", "error": message}, status=401)
    await sign_in(request, principal, "/inbox")


async def logout(request: web.Request) -> web.Response:
    """Sign-out ends the session in the store: a copy of the cookie no longer signs anyone in."""
    current, _ = await checked_form(request)
    if current.member is not None:
        core = state(request).core
        await state(request).sessions.revoke(current.sid, core.clock.now())
        # Open live feeds re-check their session when woken: the one signed out ends now.
        core.hub.notify([workspace_topic(current.member.workspace_id)])
    response = web.HTTPSeeOther("/login")
    clear_session_cookie(response)
    raise response


# decisions -----------------------------------------------------------------------------------
def _back(request: web.Request, form_next: str | None) -> str:
    run_id, key = path_values(request, "run_id", "key")
    return safe_next(form_next, links.decision_path(run_id, key))


async def decide(request: web.Request) -> web.Response:
    """POST /decisions/{run_id}/{key}/{action}: approve, deny, answer or decline."""
    member = await require_member(request)
    _, form = await checked_form(request)
    action = request.match_info["action"]
    run_id, key = path_values(request, "run_id", "key")
    service = state(request).core.service
    ws = member.workspace_id
    target = _back(request, form.get("next"))
    try:
        if action == "approve":
            task = await service.approve(member, ws, run_id, key, via=VIA)
        elif action == "deny":
            reason = form.get("reason", "")
            task = await service.deny(member, ws, run_id, key, reason=reason, via=VIA)
        elif action == "answer":
            content: object = form.getall("content", [])
            task = await service.get_task(member, ws, run_id, key)
            if not (isinstance(task.tool_input, dict) and task.tool_input.get("multi")):
                content = form.get("content", "")
            task = await service.resolve(member, ws, run_id, key, content=content, via=VIA)
        elif action == "decline":
            task = await service.resolve(member, ws, run_id, key, outcome="failed", via=VIA)
        else:
            raise web.HTTPNotFound()
    except ApprovalError as error:
        redirect(request, target, f"{error.code}: {error.detail}", "error")
    # The notice names the call by its title (masked, as the page shows it), never its key.
    title = render.title_of(render.masked(task))
    if task.parked:  # an approval that needs more reviewers than one
        redirect(request, target, f"{title}: your approval is recorded; more are needed", "info")
    word = ending_word(task)
    redirect(request, target, f"{title}: {word} by you", f"ok outcome-{word}")


async def run_action(request: web.Request) -> web.Response:
    """POST /runs/{run_id}/{action}: stop, retry or abandon."""
    member = await require_member(request)
    _, form = await checked_form(request)
    (run_id,) = path_values(request, "run_id")
    action = request.match_info["action"]
    service = state(request).core.service
    ws = member.workspace_id
    target = safe_next(form.get("next"), links.run_path(run_id))
    try:
        if action == "stop":
            run = await service.stop(member, ws, run_id, via=VIA)
        elif action == "retry":
            run = await service.retry(member, ws, run_id, via=VIA)
        elif action == "abandon":
            run = await service.abandon(member, ws, run_id, via=VIA)
        else:
            raise web.HTTPNotFound()
    except ApprovalError as error:
        redirect(request, target, f"{error.code}: {error.detail}", "error")
    done = {"stop": "stopped", "retry": "resumed", "abandon": "abandoned"}[action]
    tone = "outcome-approved" if action == "retry" else "outcome-cancelled"
    redirect(request, target, f"{render.run_name(run)}: {done} by you", f"ok {tone}")
