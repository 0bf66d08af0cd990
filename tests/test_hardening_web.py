"""The browser page hardened: no open redirect after sign-in, sessions that end when they are
ended (sign-out, token rotation or revocation, in every instance), identifiers and filters no
record could have refused before they reach SQL, errors logged without their messages, secrets
masked until the member asks to see them, and a cookie with stray bytes read as no session.

Against a real server (tests/web_helpers.py), on SQLite and PostgreSQL where the store is
involved; one test drives Debian's chromium to see where a browser really lands.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from yarl import URL

from adapters.web import exports
from adapters.web.context import safe_next
from adapters.web.session import SESSION_COOKIE, Signer
from bot.config import Settings
from bot.core import Core
from store.sql import SqlStore
from tests.conftest import World, make_world
from tests.web_helpers import (
    Site,
    append,
    browserless,
    csrf_of,
    declare,
    get_text,
    post_form,
    sign_in,
    site,
)

BASE = "http://approvalbot.test/login"


def lands_on(base: str, location: str) -> str:
    """Where a browser goes for `Location: location` on `base`: it drops tabs and newlines and
    leading/trailing controls and spaces, and reads backslashes as slashes (WHATWG URL)."""
    seen = "".join(c for c in location if c not in "\t\n\r").strip("".join(map(chr, range(33))))
    seen = seen.replace("\\", "/")
    return urlsplit(urljoin(base, seen)).netloc


def session_cookie(client: Any) -> str:
    return str(next(c.value for c in client.cookie_jar if c.key == SESSION_COOKIE))


# 1. open redirect ----------------------------------------------------------------------------
# What `next` may be once aiohttp has decoded the query: every way of naming another site.
OFF_SITE = [
    "//evil.example/x",
    "///evil.example/x",
    "/\\evil.example/x",
    "/\\/evil.example/x",
    "\\/evil.example/x",
    "\\\\evil.example/x",
    "/\t/evil.example/x",  # /%09/evil.example/x
    "/\n/evil.example/x",  # %0a
    "/\r/evil.example/x",  # %0d
    "/\r\n/evil.example/x",
    "\t//evil.example/x",
    " //evil.example/x",
    "\x00//evil.example/x",
    "/\x00/evil.example/x",
    "//evil.example%2F",
    "//evil.example\\@here",
    "https:evil.example",
    "https:/evil.example",
    "https://evil.example/x",
    "HTTPS://evil.example",
    "//user:pass@evil.example",
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "\tjavascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "evil.example",
    "",
    "/\udcff/x",
]
ON_SITE = [
    "/inbox",
    "/decisions/run_1/k1",
    "/runs/run_1",
    "/history?tool=bash&who=alice",
    "/history?next=//evil.example",  # another site named in the query is still a path here
    "/%2F%2Fevil.example/x",  # the raw form of `/%252F%252F…`: a path on this site
    "/%5Cevil.example",
    "/.//evil.example/x",
    "/inbox#top",
]


@pytest.mark.parametrize("value", OFF_SITE)
def test_next_never_names_another_site(value: str) -> None:
    assert safe_next(value) == "/inbox"
    assert safe_next(value, "/runs/r") == "/runs/r"


@pytest.mark.parametrize("value", ON_SITE)
def test_next_keeps_a_path_on_this_service(value: str) -> None:
    assert safe_next(value) == value
    location = str(URL(value))  # what aiohttp writes into Location
    assert lands_on(BASE, location) == "approvalbot.test"


def test_next_that_is_not_text_is_dropped() -> None:
    for value in (None, 42, ["/inbox"], b"/inbox", "/" + "x" * 3000):
        assert safe_next(value) == "/inbox"


PIECES = ["/", "\\", "\t", "\n", "\r", " ", "\x00", "\x7f", ":", "@", "%2F", "..", "evil.example",
          "https:", "javascript:", "\udcff"]  # fmt: skip
NEXTS = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.one_of(NEXTS, NEXTS.map(lambda text: "/" + text)))
def test_whatever_next_says_a_browser_stays_here(value: str) -> None:
    location = str(URL(safe_next(value)))
    assert location.startswith("/") and not location.startswith("//")
    assert lands_on(BASE, location) == "approvalbot.test"


async def test_signed_in_login_with_a_control_character_next_stays_on_site(world: World) -> None:
    """The issue's report: `GET /login?next=/%09/evil.example/x` answered
    `303 Location: //evil.example/x`; %0a and %0d did the same. And the form's `next`."""
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        for raw in ("%09", "%0a", "%0d", "%0d%0a", "%5C", "/", "%2F"):
            target = URL(f"{s.url}/login?next=/{raw}/evil.example/x", encoded=True)
            async with client.get(target, allow_redirects=False) as answer:
                assert answer.status == 303
                location = answer.headers["Location"]
            assert lands_on(f"{s.url}/login", location) == urlsplit(s.url).netloc, (raw, location)
            assert location == "/inbox", (raw, location)
    async with site(world) as s, browserless() as client:
        async with client.get(f"{s.url}/login") as page:
            csrf = csrf_of(await page.text())
        data = {"csrf": csrf, "token": world.tokens["alice"], "next": "/\t/evil.example/x"}
        async with client.post(f"{s.url}/login", data=data, allow_redirects=False) as answer:
            assert answer.status == 303 and answer.headers["Location"] == "/inbox"


CHROMIUM = os.environ.get("APPROVALBOT_CHROMIUM", "/usr/bin/chromium")


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} missing")
async def test_a_real_browser_never_leaves_the_site(sqlite_store: SqlStore) -> None:
    from playwright.async_api import Route, async_playwright

    from bot import logins

    world = await make_world(sqlite_store)
    off_site: list[str] = []

    async def guard(route: Route) -> None:
        if urlsplit(route.request.url).hostname != "127.0.0.1":
            off_site.append(route.request.url)
            await route.abort()
        else:
            await route.continue_()

    async with site(world) as s, async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = await browser.new_context()
            await context.route("**/*", guard)
            page = await context.new_page()
            token = await logins.issue(world.core.store, world.core.clock, world.alice)
            await page.goto(f"{s.url}/login/{token}")
            for raw in ("%09", "%0a", "%0d", "%5C"):
                await page.goto(f"{s.url}/login?next=/{raw}/evil.example/x")
                assert page.url.startswith(s.url + "/"), (raw, page.url)
        finally:
            await browser.close()
    assert off_site == []


# 9. server-side sessions ---------------------------------------------------------------------
async def test_a_cookie_copied_before_sign_out_no_longer_works(world: World) -> None:
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "make deploy"})
    async with site(world) as s, browserless() as client, browserless() as thief:
        await sign_in(client, s.url, world.tokens["alice"])
        thief.cookie_jar.update_cookies({SESSION_COOKIE: session_cookie(client)})
        assert (await get_text(thief, f"{s.url}/inbox"))[0] == 200
        _, html = await get_text(client, f"{s.url}/inbox")
        assert await post_form(client, f"{s.url}/logout", {"csrf": csrf_of(html)}) == (
            303,
            "/login",
        )
        # the copy is signed and unexpired, but it names a session that has ended
        status, location = await get_text(thief, f"{s.url}/inbox")
        assert status == 303 and location.startswith("/login")
        assert (await get_text(thief, f"{s.url}/history/log.json"))[0] == 303
        assert (await get_text(thief, f"{s.url}/history/log.csv"))[0] == 303
        assert (await get_text(thief, f"{s.url}/web/inbox"))[0] == 401
        async with thief.get(f"{s.url}/web/stream") as answer:
            assert answer.status == 401
        # nor does the browser that signed out, on any page
        assert (await get_text(client, f"{s.url}/runs/{run_id}"))[0] == 303


async def test_signing_out_ends_an_open_live_feed(world: World) -> None:
    async with site(world) as s, browserless() as client, browserless() as other:
        await sign_in(client, s.url, world.tokens["alice"])
        other.cookie_jar.update_cookies({SESSION_COOKIE: session_cookie(client)})
        async with other.get(f"{s.url}/web/stream") as stream:
            assert stream.status == 200
            _, html = await get_text(client, f"{s.url}/inbox")
            await post_form(client, f"{s.url}/logout", {"csrf": csrf_of(html)})
            await asyncio.wait_for(stream.read(), timeout=10)  # the feed ends by itself


async def test_rotating_or_revoking_a_token_ends_every_session(world: World) -> None:
    admin = world.core.admin
    async with (
        site(world) as s,
        browserless() as laptop,
        browserless() as phone,
        browserless() as bob,
    ):
        await sign_in(laptop, s.url, world.tokens["alice"])
        await sign_in(phone, s.url, world.tokens["alice"])
        await sign_in(bob, s.url, world.tokens["bob"])
        await world.clock.advance(60)
        rotated = await admin.rotate("acme", "member", "alice")
        for client in (laptop, phone):
            assert (await get_text(client, f"{s.url}/inbox"))[0] == 303
            assert (await get_text(client, f"{s.url}/history/log.json"))[0] == 303
        assert (await get_text(bob, f"{s.url}/inbox"))[0] == 200  # someone else's stay
        await world.clock.advance(1)
        await sign_in(laptop, s.url, rotated.token)
        assert (await get_text(laptop, f"{s.url}/inbox"))[0] == 200
        await admin.revoke("acme", "member", "alice")
        assert (await get_text(laptop, f"{s.url}/inbox"))[0] == 303


async def test_sessions_are_rows_in_the_store(world: World) -> None:
    from store.sessions import WEB_SESSION, SqlSessions

    store = world.core.store
    assert isinstance(store, SqlStore)

    async def rows() -> list[Any]:
        async with store.read() as tx:
            query = sa.select(WEB_SESSION).order_by(WEB_SESSION.c.created_at)
            return list((await tx.conn.execute(query)).mappings().all())

    async with site(world) as s, browserless() as client, browserless() as again:
        async with client.get(f"{s.url}/login") as page:
            await page.read()
        assert await rows() == []  # a visitor who has not signed in costs no row
        await sign_in(client, s.url, world.tokens["alice"])
        (row,) = await rows()
        assert (row["member_id"], row["workspace_id"], row["revoked_at"]) == (
            world.alice.id,
            "acme",
            None,
        )
        assert row["expires_at"] - row["created_at"] == 12 * 3600
        signed = Signer(world.core.service.secret).loads(session_cookie(client))
        assert signed is not None and row["id"] == signed["sid"]
        # signing in again ends the browser's previous session (a fresh id: no fixation)
        await world.clock.advance(1)
        await sign_in(client, s.url, world.tokens["alice"])
        first, second = await rows()
        assert first["revoked_at"] is not None and second["revoked_at"] is None
        # revoke_for_member ends every live session of the person, and nobody else's
        await sign_in(again, s.url, world.tokens["bob"])
        sessions = SqlSessions(store)
        assert await sessions.revoke_for_member(world.alice.id, world.clock.now()) == 1
        assert (await get_text(client, f"{s.url}/inbox"))[0] == 303
        assert (await get_text(again, f"{s.url}/inbox"))[0] == 200
        assert await sessions.get("\x00", world.clock.now()) is None
        assert await sessions.get("x" * 65, world.clock.now()) is None
        assert not await sessions.revoke("\udcff", world.clock.now())


async def test_another_instance_sees_a_sign_out_at_once(store: SqlStore) -> None:
    """Two instances of the service on one database: no session outlives its sign-out in the
    other one (the row is read on every request, not cached)."""
    world = await make_world(store)
    other_store = SqlStore(store.url, schema=store.schema)
    try:
        other_world = await make_world_on(other_store, world)
        async with (
            site(world) as a,
            site(other_world) as b,
            browserless() as client,
            browserless() as copy,
        ):
            await sign_in(client, a.url, world.tokens["alice"])
            copy.cookie_jar.update_cookies({SESSION_COOKIE: session_cookie(client)})
            assert (await get_text(copy, f"{b.url}/inbox"))[0] == 200
            _, html = await get_text(client, f"{a.url}/inbox")
            await post_form(client, f"{a.url}/logout", {"csrf": csrf_of(html)})
            assert (await get_text(copy, f"{b.url}/inbox"))[0] == 303
            # a rotation made elsewhere (the admin CLI, another instance) ends it too
            await sign_in(client, a.url, world.tokens["alice"])
            assert (await get_text(client, f"{a.url}/inbox"))[0] == 200
            await world.clock.advance(1)
            await other_world.core.admin.rotate("acme", "member", "alice")
            assert (await get_text(client, f"{a.url}/inbox"))[0] == 303
    finally:
        await other_store.close()


async def make_world_on(store: SqlStore, first: World) -> World:
    """A second instance's core on the same database (same instance secret, same people)."""
    core = await Core.build(store, Settings(), clock=first.clock)
    return World(
        core, first.clock, first.notifier, first.alice, first.bob, first.agent, first.tokens
    )


# 3. a cookie with bytes that are not ASCII ---------------------------------------------------
async def raw_request(s: Site, request: bytes) -> tuple[int, bytes]:
    host, port = urlsplit(s.url).hostname, urlsplit(s.url).port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()
    return int(head.split(b" ", 2)[1]), head


async def test_a_cookie_that_is_not_ascii_is_no_session(world: World) -> None:
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        value = session_cookie(client).encode()
        for cookie in (
            value[:10] + b"\xff" + value[10:],
            value + b"\xe9",
            b"\xc3\xa9." + value,
            b"caf\xc3\xa9.x",
        ):
            for path, method in (("/inbox", b"GET"), ("/login", b"GET"), ("/logout", b"POST")):
                request = (
                    method + b" " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Length: 0\r\nConnection: close\r\n"
                    b"Cookie: " + SESSION_COOKIE.encode() + b"=" + cookie + b"; "
                    b"approvalbot_flash=" + cookie + b"\r\n\r\n"
                )
                status, _ = await raw_request(s, request)
                expected = {"/inbox": 303, "/login": 200, "/logout": 403}[path]
                assert status == expected, (cookie, path, status)
    signer = Signer("secret")
    assert signer.loads("ab\udcffc.d\udce9") is None
    assert signer.loads("é." + signer.dumps({"sid": "x"})) is None


# 4. NUL and other impossible characters ------------------------------------------------------
async def test_impossible_identifiers_and_filters_are_refused_before_sql(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "make deploy"})
    caplog.set_level(logging.ERROR)
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        not_found = [
            "/runs/%00",
            f"/runs/{run_id}%00",
            "/decisions/%00/x",
            f"/decisions/{run_id}/%00",
            f"/decisions/{run_id}/{task.key}%00",
            f"/runs/{'r' * 300}",
        ]
        unprocessable = [
            "/history?tool=%00",
            "/history?who=%00",
            "/history?via=%00",
            "/history?outcome=%00",
            "/history/log.csv?run=%00",
            "/history/log.json?run=%00",
            f"/history?tool={'t' * 300}",
        ]
        for path, expected in [(p, 404) for p in not_found] + [(p, 422) for p in unprocessable]:
            async with client.get(URL(s.url + path, encoded=True)) as answer:
                body = await answer.read()  # the whole answer: no connection dropped
                assert answer.status == expected, (path, answer.status)
                assert answer.headers["Content-Type"].startswith("text/html"), path
                assert b"not_found" in body or b"invalid_request" in body
        _, inbox = await get_text(client, f"{s.url}/inbox")
        for path in (
            "/decisions/%00/x/approve",
            f"/decisions/{run_id}/%00/deny",
            "/runs/%00/stop",
        ):
            async with client.post(
                URL(s.url + path, encoded=True), data={"csrf": csrf_of(inbox)}
            ) as answer:
                await answer.read()
                assert answer.status == 404, path
        async with client.get(URL(f"{s.url}/login/abl_%00", encoded=True)) as answer:
            assert answer.status == 401
        # and the page still works
        _, html = await get_text(client, f"{s.url}/runs/{run_id}")
        assert "make deploy" in html or task.key in html
    current = await world.core.service.get_task(world.alice, world.ws, run_id, task.key)
    assert current.state == "needs_approval"
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


SECRET_PARAMETER = "hunter2-in-a-parameter"


def _database_error() -> sa.exc.DBAPIError:
    return sa.exc.DBAPIError(
        f"SELECT * FROM task WHERE tool = '{SECRET_PARAMETER}'",
        {"tool": SECRET_PARAMETER},
        ValueError(f"invalid byte sequence near {SECRET_PARAMETER}"),
    )


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    text = []
    for record in caplog.records:
        text.append(record.getMessage())
        if record.exc_info:
            text.append(logging.Formatter().formatException(record.exc_info))
        if record.exc_text:
            text.append(record.exc_text)
    return "\n".join(text)


async def test_a_web_error_is_a_page_and_the_log_never_holds_sql_parameters(
    world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = world.core.store
    caplog.set_level(logging.DEBUG)

    async def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise _database_error()

    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        monkeypatch.setattr(store, "runs", broken)
        monkeypatch.setattr(store, "log_entries", broken)
        for path in ("/runs", "/history/log.csv", "/history/log.json"):
            async with client.get(s.url + path) as answer:
                body = await answer.text()
                # the export fails before it starts: an error page, not a 200 cut short
                assert answer.status == 500, path
                assert answer.headers["Content-Type"].startswith("text/html")
            assert "internal_error" in body and SECRET_PARAMETER not in body
    logged = _logged(caplog)
    assert "unexpected DBAPIError on GET" in logged
    assert SECRET_PARAMETER not in logged and "SELECT" not in logged


async def test_an_export_that_fails_midway_is_cut_short_without_logging_the_sql(
    world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = world.core.store
    run_id = await declare(world)
    for n in range(3):
        await append(world, run_id, "bash", {"command": f"make {n}"})
    real = store.log_entries
    calls = 0

    async def fails_later(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise _database_error()
        return await real(*args, **kwargs)

    caplog.set_level(logging.DEBUG)
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        monkeypatch.setattr(exports, "PAGE", 1)
        monkeypatch.setattr(store, "log_entries", fails_later)
        async with client.get(f"{s.url}/history/log.csv") as answer:
            assert answer.status == 200
            with pytest.raises(Exception):  # noqa: B017 - the download is cut short
                await answer.read()
        monkeypatch.setattr(store, "log_entries", real)
        assert (await get_text(client, f"{s.url}/inbox"))[0] == 200  # the server is fine
    logged = _logged(caplog)
    assert "unexpected DBAPIError on GET" in logged
    assert SECRET_PARAMETER not in logged and "SELECT" not in logged


# 8. masking, with a Reveal -------------------------------------------------------------------
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
API_KEY = "zq81-very-private-value"


async def test_the_decision_page_masks_secrets_until_revealed(world: World) -> None:
    run_id = await declare(world)
    tool_input = {
        "command": f"curl -H 'Authorization: token {GITHUB_TOKEN}' https://api.github.com",
        "api_key": API_KEY,
    }
    task = await append(world, run_id, "bash", tool_input)
    path = f"/decisions/{run_id}/{task.key}"
    async with site(world) as s, browserless() as client:
        status, location = await get_text(client, f"{s.url}{path}?reveal=1")
        assert status == 303 and location.startswith("/login")  # no reveal without sign-in
        await sign_in(client, s.url, world.tokens["alice"])
        for shown in (path, "/inbox", "/web/inbox"):
            _, html = await get_text(client, s.url + shown)
            assert GITHUB_TOKEN not in html and API_KEY not in html, shown
            assert "****" in html, shown
        _, html = await get_text(client, s.url + path)
        assert f'href="{path}?reveal=1"' in html  # a plain link: works without JavaScript
        assert "Reveal" in html
        _, revealed = await get_text(client, f"{s.url}{path}?reveal=1")
        assert GITHUB_TOKEN in revealed and API_KEY in revealed
        assert f'href="{path}"' in revealed and "Mask secrets again" in revealed
        # the decision is made on the input as stored, whichever view it was made from
        await post_form(client, f"{s.url}{path}/approve", {}, page_url=f"{s.url}{path}")
    approved = await world.core.service.get_task(world.alice, world.ws, run_id, task.key)
    assert approved.state == "granted" and approved.tool_input == tool_input


async def test_the_run_page_masks_secrets_until_revealed(world: World) -> None:
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "psql"})
    question = await append(world, run_id, "ask", {"prompt": f"Use api_key={API_KEY}?"})
    reason = f"do not paste password={API_KEY} here"
    await world.core.service.deny(world.alice, world.ws, run_id, task.key, reason=reason)
    path = f"/runs/{run_id}"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["bob"])
        _, html = await get_text(client, s.url + path)
        assert API_KEY not in html and "****" in html
        assert f'href="{path}?reveal=1"' in html
        _, revealed = await get_text(client, f"{s.url}{path}?reveal=1")
        assert API_KEY in revealed
        _, decision = await get_text(client, f"{s.url}/decisions/{run_id}/{question.key}")
        assert API_KEY not in decision  # a question's prompt too
        _, history = await get_text(client, f"{s.url}/history")
        assert API_KEY not in history
        # the audit export stays as recorded
        async with client.get(f"{s.url}/history/log.json") as answer:
            assert API_KEY in await answer.text()


async def test_nothing_to_mask_offers_no_reveal(world: World) -> None:
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "make test"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/decisions/{run_id}/{task.key}")
        assert "make test" in html and "?reveal=1" not in html
