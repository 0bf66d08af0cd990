"""The browser page mounted on the service's aiohttp application: its routes, its state and
its security headers."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from adapters.http.middleware import expectation_met
from adapters.web import actions, edits, exports, policy, queue, stream, views
from adapters.web.context import STATIC, WEB, WebState, make_env, security_headers, web_errors
from adapters.web.session import Signer
from bot.config import Settings
from bot.core import Core
from bot.ports import WebSessions
from store.sessions import SqlSessions
from store.sql import SqlStore

_FAVICON = (STATIC / "favicon.ico").read_bytes()


async def favicon(request: web.Request) -> web.Response:
    """`/favicon.ico`, which browsers ask for whatever the page links (pages link the SVG)."""
    return web.Response(
        body=_FAVICON,
        content_type="image/x-icon",
        headers={"Cache-Control": "public, max-age=86400"},
    )


async def _stop_streams(app: web.Application) -> None:
    app[WEB].stopping.set()


def _sessions_of(core: Core) -> WebSessions:
    if not isinstance(core.store, SqlStore):
        raise TypeError("the web page keeps its sessions in the SQL store: pass `sessions`")
    return SqlSessions(core.store)


async def _expect(request: web.Request) -> web.StreamResponse | None:
    """`Expect:` on a page route: a plain 417 unless it is met (adapters/http/middleware.py)."""
    if await expectation_met(request):
        return None
    return web.Response(status=417, text="Expect: only 100-continue is understood")


class _Routes:
    """The router, each page route with `_expect`."""

    def __init__(self, router: web.UrlDispatcher) -> None:
        self.router = router

    def add_get(self, path: str, handler: Any) -> None:
        self.router.add_get(path, handler, expect_handler=_expect)

    def add_post(self, path: str, handler: Any) -> None:
        self.router.add_post(path, handler, expect_handler=_expect)


def setup_web(
    app: web.Application, core: Core, settings: Settings, sessions: WebSessions | None = None
) -> None:
    """Mount the page. Its sessions live in the store (`web_session`) unless `sessions` says
    otherwise."""
    secure = settings.server.public_url.startswith("https://")
    signer = Signer(core.service.secret)
    sessions = sessions or _sessions_of(core)
    env = make_env()
    env.globals["ago"] = queue.ago  # relative times: "4 min ago", the absolute one on hover
    env.globals["edit_field"] = edits.edit_field  # edit before approve: what a person edits
    env.globals["edit_diff"] = edits.edit_diff  # and what they changed, once approved
    env.globals["review_diff"] = edits.review_diff  # the edit a quorum's count is for
    env.globals["allow_path"] = policy.allow_path
    app[WEB] = WebState(core, settings, env, signer, secure, sessions)
    app.middlewares.append(web_errors)
    app.on_shutdown.append(_stop_streams)
    app.on_response_prepare.append(security_headers)
    add = _Routes(app.router)
    add.add_get("/", views.index)
    add.add_get("/login", actions.login_form)
    add.add_post("/login", actions.login)
    add.add_get("/login/{token}", actions.login_link)
    add.add_post("/logout", actions.logout)
    add.add_get("/inbox", queue.inbox)
    add.add_get("/decisions/{run_id}/{key}", views.decision)
    # Before the generic action route, which would take their posts for unknown actions.
    add.add_get("/decisions/{run_id}/{key}/allow", policy.allow_form)
    add.add_post("/decisions/{run_id}/{key}/allow", policy.allow_post)
    add.add_post("/decisions/{run_id}/{key}/approve-edited", policy.approve_edited)
    add.add_post("/decisions/{run_id}/{key}/{action}", actions.decide)
    add.add_get("/runs", views.runs)
    add.add_get("/runs/{run_id}", views.run_page)
    add.add_post("/runs/{run_id}/{action}", actions.run_action)
    add.add_get("/history", views.history)
    add.add_get("/history/log.csv", exports.export_csv)
    add.add_get("/history/log.json", exports.export_json)
    add.add_get("/policy", policy.policy)
    add.add_post("/policy/learned/{rule_id}/remove", policy.remove_learned)
    add.add_get("/web/inbox", queue.inbox_fragment)
    add.add_get("/web/stream", stream.stream)
    add.add_get("/favicon.ico", favicon)
    app.router.add_static("/web/static", STATIC)


__all__ = ["setup_web"]
