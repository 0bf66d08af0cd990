"""The browser page without JavaScript: plain form posts decide, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

from bot import logins
from bot.config import Settings
from bot.service import CallSpec
from store.sql import SqlStore
from tests.conftest import World, make_world
from tests.web_helpers import (
    append,
    browserless,
    csrf_of,
    declare,
    get_text,
    post_form,
    sign_in,
    site,
)


async def test_sign_in_with_a_member_token_shows_the_inbox(world: World) -> None:
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "git push origin main"})
    async with site(world) as s, browserless() as client:
        status, location = await get_text(client, f"{s.url}/inbox")
        assert status == 303 and location.startswith("/login")
        answer = await sign_in(client, s.url, world.tokens["alice"])
        assert answer.status == 303 and answer.headers["Location"] == "/inbox"
        cookie = answer.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
        async with client.get(f"{s.url}/inbox") as page:
            status, html = page.status, await page.text()
            assert page.headers["X-Frame-Options"] == "DENY"  # no clickjacking of Approve
            assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
            assert page.headers["Cache-Control"] == "no-store"
        assert status == 200
        assert "git push origin main" in html and "alice" in html
        assert f'data-id="{run_id}/{task.key}"' in html
        assert "expires in 1 d" in html  # the 24 h park, on the fake clock


async def test_an_application_token_or_a_wrong_one_does_not_sign_in(world: World) -> None:
    async with site(world) as s, browserless() as client:
        answer = await sign_in(client, s.url, world.tokens["agent"])
        assert answer.status == 401
        async with client.get(f"{s.url}/login") as page:
            csrf = csrf_of(await page.text())
        async with client.post(
            f"{s.url}/login", data={"csrf": csrf, "token": world.tokens["agent"]}
        ) as page:
            assert "member_credential_required" in await page.text()
        async with client.post(f"{s.url}/login", data={"csrf": csrf, "token": "abm_nope"}) as page:
            assert page.status == 401 and "unauthorized" in await page.text()
        status, _ = await get_text(client, f"{s.url}/inbox")
        assert status == 303


async def test_a_post_without_the_csrf_token_is_refused(world: World) -> None:
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "make deploy"})
    async with site(world) as s, browserless() as client:
        approve = f"{s.url}/decisions/{run_id}/{task.key}/approve"
        await sign_in(client, s.url, world.tokens["alice"])
        status, _ = await post_form(client, approve, {})
        assert status == 403
        status, _ = await post_form(client, approve, {"csrf": "forged"})
        assert status == 403
        # A token from another visitor's session does not fit this one.
        async with browserless() as other:
            async with other.get(f"{s.url}/login") as page:
                foreign = csrf_of(await page.text())
        status, _ = await post_form(client, approve, {"csrf": foreign})
        assert status == 403
        async with client.post(f"{s.url}/login", data={"token": world.tokens["bob"]}) as page:
            assert page.status == 403
        current = await world.core.service.get_task(world.alice, world.ws, run_id, task.key)
        assert current.state == "needs_approval"


async def test_approve_and_deny_with_a_reason_by_form(world: World) -> None:
    run_id = await declare(world)
    first = await append(world, run_id, "bash", {"command": "make release"})
    second = await append(world, run_id, "bash", {"command": "rm -rf build"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        inbox = f"{s.url}/inbox"
        status, location = await post_form(
            client,
            f"{s.url}/decisions/{run_id}/{first.key}/approve",
            {"next": "/inbox"},
            page_url=inbox,
        )
        assert (status, location) == (303, "/inbox")
        _, html = await get_text(client, inbox)
        assert "make release: approved by you" in html  # the call's title, never its key
        status, _ = await post_form(
            client,
            f"{s.url}/decisions/{run_id}/{second.key}/deny",
            {"reason": "build dir is shared <b>today</b>"},
            page_url=inbox,
        )
        assert status == 303
    service = world.core.service
    approved = await service.get_task(world.alice, world.ws, run_id, first.key)
    assert (approved.state, approved.resolved_by, approved.via) == ("granted", "alice", "web")
    denied = await service.get_task(world.alice, world.ws, run_id, second.key)
    assert denied.state == "failed"
    assert denied.error == {
        "code": "approval_denied",
        "detail": "build dir is shared <b>today</b>",
    }
    assert denied.via == "web"


async def test_questions_are_answered_and_declined_by_form(world: World) -> None:
    run_id = await declare(world)
    single = await append(world, run_id, "ask", {"prompt": "Region?", "options": ["eu", "us"]})
    multi = await append(
        world,
        run_id,
        "ask",
        {"prompt": "Checks?", "options": ["lint", "unit", "e2e"], "multi": True},
    )
    free = await append(world, run_id, "ask", {"prompt": "Release name?"})
    declined = await append(world, run_id, "ask", {"prompt": "Anything else?"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["bob"])
        inbox = f"{s.url}/inbox"
        base = f"{s.url}/decisions/{run_id}"
        # a wrong option is refused with its code, nothing changes
        await post_form(client, f"{base}/{single.key}/answer", {"content": "mars"}, page_url=inbox)
        _, html = await get_text(client, inbox)
        assert "invalid_option: not an option: &#39;mars&#39;" in html
        await post_form(client, f"{base}/{single.key}/answer", {"content": "eu"}, page_url=inbox)
        await post_form(
            client,
            f"{base}/{multi.key}/answer",
            [("content", "e2e"), ("content", "lint")],
            page_url=inbox,
        )
        await post_form(client, f"{base}/{free.key}/answer", {"content": "Otter"}, page_url=inbox)
        await post_form(client, f"{base}/{declined.key}/decline", {}, page_url=inbox)
    service = world.core.service

    async def content(key: str) -> object:
        task = await service.get_task(world.bob, world.ws, run_id, key)
        assert task.via == "web" and task.resolved_by == "bob"
        return (task.resolution or {}).get("content") if task.state == "resolved" else task.error

    assert await content(single.key) == "eu"
    assert await content(multi.key) == ["lint", "e2e"]  # in the question's order
    assert await content(free.key) == "Otter"
    assert await content(declined.key) == {"code": "declined", "detail": "declined by bob"}


async def test_a_decision_ended_elsewhere_reads_already_decided(world: World) -> None:
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "make deploy"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        page_url = f"{s.url}/decisions/{run_id}/{task.key}"
        _, html = await get_text(client, page_url)
        csrf = csrf_of(html)
        await world.core.service.approve(world.bob, world.ws, run_id, task.key, via="telegram")
        status, location = await post_form(client, f"{page_url}/deny", {"csrf": csrf})
        assert status == 303 and location == f"/decisions/{run_id}/{task.key}"
        _, html = await get_text(client, page_url)
        assert "already_decided: already approved by bob" in html
        assert "approved</span> by bob via telegram" in html
        assert 'action="/decisions' not in html  # no forms on an ended decision


async def test_one_time_sign_in_links(world: World) -> None:
    core = world.core
    async with site(world) as s, browserless() as client:
        token = await logins.issue(core.store, core.clock, world.alice)
        # A link preview's HEAD (issue 21, 14) leaves the link to the person's GET.
        async with client.head(f"{s.url}/login/{token}", allow_redirects=False) as answer:
            assert answer.status == 200 and "Set-Cookie" not in answer.headers
        async with client.get(f"{s.url}/login/{token}", allow_redirects=False) as answer:
            assert answer.status == 303 and answer.headers["Location"] == "/inbox"
        status, html = await get_text(client, f"{s.url}/inbox")
        assert status == 200 and "alice" in html
        async with browserless() as again:
            async with again.get(f"{s.url}/login/{token}", allow_redirects=False) as answer:
                assert answer.status == 401  # single use
            late = await logins.issue(core.store, core.clock, world.bob)
            await world.clock.advance(timedelta(minutes=31))
            async with again.get(f"{s.url}/login/{late}", allow_redirects=False) as answer:
                assert answer.status == 401  # expired
            async with again.get(f"{s.url}/login/abl_unknown", allow_redirects=False) as answer:
                assert answer.status == 401


async def test_sessions_are_signed_expire_and_end_on_sign_out(world: World) -> None:
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        cookie = next(c for c in client.cookie_jar if c.key == "approvalbot_session")
        payload, _, signature = cookie.value.partition(".")
        async with browserless() as forger:
            forged = payload.replace("a", "b", 1) + "." + signature
            forger.cookie_jar.update_cookies({"approvalbot_session": forged})
            status, _ = await get_text(forger, f"{s.url}/inbox")
            assert status == 303
        _, html = await get_text(client, f"{s.url}/inbox")
        status, location = await post_form(client, f"{s.url}/logout", {"csrf": csrf_of(html)})
        assert (status, location) == (303, "/login")
        assert (await get_text(client, f"{s.url}/inbox"))[0] == 303
        await sign_in(client, s.url, world.tokens["alice"])
        await world.clock.advance(timedelta(hours=13))
        assert (await get_text(client, f"{s.url}/inbox"))[0] == 303


async def test_a_session_ends_when_the_persons_tokens_are_revoked(world: World) -> None:
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        assert (await get_text(client, f"{s.url}/inbox"))[0] == 200
        await world.clock.advance(1)
        rotated = await world.core.admin.rotate("acme", "member", "alice")
        assert (await get_text(client, f"{s.url}/inbox"))[0] == 303  # rotation ends sessions
        await world.clock.advance(1)
        await sign_in(client, s.url, rotated.token)
        assert (await get_text(client, f"{s.url}/inbox"))[0] == 200
        await world.core.admin.revoke("acme", "member", "alice")
        assert (await get_text(client, f"{s.url}/inbox"))[0] == 303
        async with client.get(f"{s.url}/web/stream") as response:
            assert response.status == 401


async def test_no_open_redirect_after_sign_in(world: World) -> None:
    async with site(world) as s, browserless() as client:
        async with client.get(f"{s.url}/login?next=//evil.example/") as page:
            csrf = csrf_of(await page.text())
        data = {"csrf": csrf, "token": world.tokens["alice"], "next": "//evil.example/"}
        async with client.post(f"{s.url}/login", data=data, allow_redirects=False) as answer:
            assert answer.headers["Location"] == "/inbox"


async def test_another_workspace_sees_nothing(world: World) -> None:
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "make deploy"})
    await world.core.admin.create_workspace("other")
    mallory = await world.core.admin.add_member("other", "mallory")
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, mallory.token)
        status, html = await get_text(client, f"{s.url}/decisions/{run_id}/{task.key}")
        assert status == 404 and "make deploy" not in html
        assert (await get_text(client, f"{s.url}/runs/{run_id}"))[0] == 404
        _, inbox = await get_text(client, f"{s.url}/inbox")
        assert "make deploy" not in inbox
        await post_form(
            client,
            f"{s.url}/decisions/{run_id}/{task.key}/approve",
            {},
            page_url=f"{s.url}/inbox",
        )
    current = await world.core.service.get_task(world.alice, world.ws, run_id, task.key)
    assert current.state == "needs_approval"


async def test_everything_printed_is_escaped(world: World) -> None:
    run_id = await declare(world, title="<img src=x onerror=alert(1)>")
    await append(
        world,
        run_id,
        "bash",
        {"command": "echo '<script>alert(1)</script>'", "note": "</code><b>x</b>"},
        effect_profile={"summary": "<i>hi</i>", "effects": ["<u>"], "owner": "<a href=x>"},
    )
    await append(world, run_id, "ask", {"prompt": "<svg onload=alert(2)>", "options": ["<b>"]})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        for path in ("/inbox", f"/runs/{run_id}", "/runs", "/web/inbox"):
            _, html = await get_text(client, s.url + path)
            for raw in ("<script>alert", "<img src=x", "<b>x</b>", "<i>hi", "<svg", "<a href=x"):
                assert raw not in html, (path, raw)
        _, html = await get_text(client, f"{s.url}/inbox")
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


async def test_decision_page_shows_the_rule_the_input_and_the_history(world: World) -> None:
    rules = [
        {"tool": "bash", "path": "command", "match": "git push*", "verdict": "ask"},
        {"tool": "bash", "verdict": "allow"},
    ]
    run_id = await declare(world, approval_mode="rules", approval_rules=rules)
    edit = {"file_path": "app.py", "old_string": "x = 1\n", "new_string": "x = 2\n"}
    spec = CallSpec("bash", {"command": "git push origin main", "timeout": 30})
    receipt = await world.core.service.append(world.agent, world.ws, run_id, spec)
    key = receipt.task.key
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/decisions/{run_id}/{key}")
        assert "rule 0 (decisive)" in html
        assert "git push*" in html
        assert "&#34;timeout&#34;: 30" in html  # the whole input
        assert ">parked<" in html
        await post_form(
            client,
            f"{s.url}/decisions/{run_id}/{key}/approve",
            {},
            page_url=f"{s.url}/decisions/{run_id}/{key}",
        )
        _, html = await get_text(client, f"{s.url}/decisions/{run_id}/{key}")
        assert ">approved<" in html and "alice" in html
        edit_run = await declare(world, approval_mode="ask")
        task = await append(world, edit_run, "Edit", edit)
        _, html = await get_text(client, f"{s.url}/decisions/{edit_run}/{task.key}")
        assert '<span class="del">-x = 1</span>' in html
        assert '<span class="add">+x = 2</span>' in html


async def test_run_page_and_its_actions(world: World) -> None:
    run_id = await declare(world, approval_mode="ask", title="nightly")
    task = await append(world, run_id, "bash", {"command": "make nightly"})
    question = await append(world, run_id, "ask", {"prompt": "Proceed?"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        status, html = await get_text(client, f"{s.url}/runs/{run_id}")
        assert status == 200
        assert "nightly" in html and "approval_required" in html and task.key in html
        _, listing = await get_text(client, f"{s.url}/runs")
        assert "nightly" in listing
        # the question expires: the run is held until a person retries or abandons it
        await world.clock.advance(timedelta(hours=25))
        await world.core.scheduler.run_once()
        await sign_in(client, s.url, world.tokens["alice"])  # 25 h outlive a session
        _, html = await get_text(client, f"{s.url}/runs/{run_id}")
        assert "Retry (ask again)" in html
        page_url = f"{s.url}/runs/{run_id}"
        await post_form(client, f"{page_url}/retry", {}, page_url=page_url)
        run = await world.core.service.get_run(world.alice, world.ws, run_id)
        assert run.state == "running"
        await post_form(client, f"{page_url}/abandon", {}, page_url=page_url)
        _, html = await get_text(client, page_url)
        assert "run_not_held: run is running, not held" in html
        await post_form(client, f"{page_url}/stop", {}, page_url=page_url)
    run = await world.core.service.get_run(world.alice, world.ws, run_id)
    assert run.state == "stopped"
    asks = await world.core.service.asks(world.alice, world.ws)
    assert asks == [] and question.key


async def test_history_filters_and_the_decision_log_exports(world: World) -> None:
    service = world.core.service
    run_id = await declare(world)
    a = await append(world, run_id, "bash", {"command": "make a"})
    b = await append(world, run_id, "deploy", {"env": "prod"})
    c = await append(world, run_id, "bash", {"command": "=HYPERLINK(1)"})
    script = await world.core.admin.add_application(world.ws, "script", may_claim="author")
    read = CallSpec("Read", {"file_path": "x"}, origin="author")
    await service.append(script.principal, world.ws, run_id, read)  # granted at once
    await service.approve(world.alice, world.ws, run_id, a.key, via="web")
    await service.deny(world.bob, world.ws, run_id, b.key, reason="not today", via="api")
    await world.clock.advance(timedelta(hours=25))
    await world.core.scheduler.run_once()
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/history")
        assert all(t.key in html for t in (a, b, c))
        assert "Read" not in html.split("<tbody>")[1]  # granted by the engine: no decision
        _, html = await get_text(client, f"{s.url}/history?outcome=denied")
        assert b.key in html and a.key not in html and "not today" in html
        _, html = await get_text(client, f"{s.url}/history?who=alice")
        assert a.key in html and b.key not in html
        _, html = await get_text(client, f"{s.url}/history?via=clock")
        assert c.key in html and a.key not in html and "expired" in html
        _, html = await get_text(client, f"{s.url}/history?tool=deploy")
        assert b.key in html and a.key not in html
        async with client.get(f"{s.url}/history/log.csv") as answer:
            assert answer.headers["Content-Type"].startswith("text/csv")
            rows = list(csv.DictReader(io.StringIO(await answer.text())))
        actions = [(r["action"], r["actor"], r["via"]) for r in rows]
        assert ("approved", "alice", "web") in actions and ("denied", "bob", "api") in actions
        assert ("expired", "clock", "clock") in actions
        assert all(not r["detail"].startswith("=") for r in rows)
        async with client.get(f"{s.url}/history/log.json") as answer:
            entries = json.loads(await answer.text())
        assert [e["id"] for e in entries] == sorted(e["id"] for e in entries)
        denied = next(e for e in entries if e["action"] == "denied")
        assert denied["detail"] == {"reason": "not today"} and denied["task_key"] == b.key


async def test_the_fragment_and_the_stream_follow_the_inbox(store: SqlStore) -> None:
    settings = Settings.model_validate({"decisions": {"park_ttl": "1h"}})
    world = await make_world(store, settings)
    run_id = await declare(world)
    task = await append(world, run_id, "bash", {"command": "make deploy"})
    async with site(world) as s, browserless() as client:
        async with client.get(f"{s.url}/web/stream") as answer:
            assert answer.status == 401
        await sign_in(client, s.url, world.tokens["alice"])
        _, fragment = await get_text(client, f"{s.url}/web/inbox")
        assert fragment.startswith('<div id="inbox-list"') and "make deploy" in fragment
        async with client.get(f"{s.url}/web/stream") as stream:
            assert stream.headers["Content-Type"] == "text/event-stream"
            first = await _next_event(stream)
            assert first["keys"] == [f"{run_id}/{task.key}"]
            await world.clock.advance(1)
            later = await append(world, run_id, "bash", {"command": "make later"})
            second = await _next_event(stream)
            assert second["keys"] == [f"{run_id}/{later.key}", f"{run_id}/{task.key}"]
            await world.core.service.approve(world.bob, world.ws, run_id, task.key)
            third = await _next_event(stream)
            assert third["keys"] == [f"{run_id}/{later.key}"]
            await world.clock.advance(timedelta(hours=1))  # the clock ends the other one
            await world.core.scheduler.run_once()
            fourth = await _next_event(stream)
            assert fourth["keys"] == [] and fourth["count"] == 0


async def _next_event(stream: object) -> dict[str, object]:
    import aiohttp

    assert isinstance(stream, aiohttp.ClientResponse)
    name = None
    while True:
        raw = await stream.content.readline()
        assert raw, "the stream ended"
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: ") and name == "inbox":
            data: dict[str, object] = json.loads(line.removeprefix("data: "))
            return data
