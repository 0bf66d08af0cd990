"""Approve always, edit before approve and the Policy view on the page (issue 15), by plain form
posts (the page works without JavaScript), on SQLite and PostgreSQL."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import aiohttp
import pytest
from axe_playwright_python.async_playwright import Axe  # type: ignore[import-untyped]

from bot.config import ProfileConfig, Settings
from bot.service import AllowSpec, CallSpec, RunSpec
from store.sql import SqlStore
from tests.browser_helpers import LIVE, chromium, needs_chromium, serious, signed_in
from tests.conftest import World, make_store, make_world
from tests.web_helpers import append, browserless, declare, get_text, post_form, sign_in, site

DENY_FORCE = {
    "tool": "bash",
    "verdict": "deny",
    "path": "command",
    "match": "*--force*",
    "reason": "never force-push",
}
# A shell path (issue 20): a `command` of `bash` is judged, and proposed for, command by command.
SHELL = [{"tool": "bash", "path": "command"}]
OPS = ProfileConfig(
    approval_mode="ask",
    approval_rules=[DENY_FORCE, {"tool": "bash", "verdict": "ask"}],
    shell_commands=SHELL,
)


@pytest.fixture
async def ops(store: SqlStore) -> World:
    """A world configured with the profile `ops` (a deny before an ask, a shell path)."""
    return await make_world(store, Settings(profiles={"ops": OPS}))


def _settings() -> Settings:
    return Settings(profiles={"ops": OPS})


def text_of(html: str) -> str:
    """The page's text as a person reads it: tags gone, entities decoded, spaces collapsed."""
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def past_calls(html: str) -> str:
    found = re.search(r'<ul class="would-allow">(.*?)</ul>', html, re.S)
    assert found, "the allow page lists no past calls"
    return text_of(found.group(1))


async def state_of(w: World, run_id: str, key: str) -> str:
    return (await w.core.service.get_task(w.alice, w.ws, run_id, key)).state


async def call(w: World, run_id: str, key: str, command: str) -> str:
    spec = CallSpec("bash", {"command": command}, key=key)
    receipt = await w.core.service.append(w.agent, w.ws, run_id, spec)
    return receipt.task.state


async def flash(client: aiohttp.ClientSession, url: str) -> str:
    _, html = await get_text(client, url)
    found = re.search(r'<p class="flash [^"]*"[^>]*>(.*?)</p>', html, re.S)
    return html_lib.unescape(found.group(1)) if found else ""


# approve & allow like this ---------------------------------------------------------------------
async def test_approve_and_allow_from_the_page_learns_and_grants_the_next_call(
    ops: World,
) -> None:
    w = ops
    run_id = (await w.core.service.declare_run(w.agent, w.ws, RunSpec(profile="ops"))).id
    assert await call(w, run_id, "old", "git push origin dev") == "needs_approval"
    await w.core.service.deny(w.alice, w.ws, run_id, "old", reason="not yet")
    assert await call(w, run_id, "pull", "git pull") == "needs_approval"
    await w.clock.advance(60)
    assert await call(w, run_id, "now", "git push origin main") == "needs_approval"
    allow = f"/decisions/{run_id}/now/allow"
    async with site(w, _settings()) as s, browserless() as client:
        await sign_in(client, s.url, w.tokens["alice"])
        _, inbox = await get_text(client, f"{s.url}/inbox")
        assert f'href="{allow}"' in inbox and "Approve &amp; allow like this" in inbox
        _, decision = await get_text(client, f"{s.url}/decisions/{run_id}/now")
        assert f'href="{allow}"' in decision

        status, page = await get_text(client, s.url + allow)
        assert status == 200
        assert 'name="match" value="git push *"' in page
        listed = past_calls(page)
        assert "git push origin dev" in listed and "denied" in listed  # a person denied it
        assert "git pull" not in listed
        assert 'value="profile"' in page and "disabled" not in page.split("Where it applies")[1]

        # An edited glob previews its own replay; nothing is decided yet.
        async with client.post(
            s.url + allow,
            data={"csrf": _csrf(page), "do": "preview", "match": "git *", "scope": "run"},
        ) as answer:
            assert answer.status == 200
            preview = await answer.text()
        assert "git pull" in past_calls(preview) and 'value="git *"' in preview
        assert await state_of(w, run_id, "now") == "needs_approval"

        status, location = await post_form(
            client,
            s.url + allow,
            {"do": "approve", "match": "git push *", "scope": "profile"},
            page_url=s.url + allow,
        )
        assert (status, location) == (303, f"/decisions/{run_id}/now")
        message = await flash(client, s.url + location)
        assert "approved by you" in message and "profile ops" in message

        # The learned rule grants the next matching call of a run declared afterwards.
        later = (await w.core.service.declare_run(w.agent, w.ws, RunSpec(profile="ops"))).id
        assert await call(w, later, "k1", "git push origin feature") == "granted"
        assert await call(w, later, "k2", "git push --force") == "failed"  # a deny still binds

        [learned] = await w.core.service.learned_rules(w.alice, w.ws)
        assert (learned.scope, learned.profile, learned.added_by) == ("profile", "ops", "alice")
        _, policy = await get_text(client, f"{s.url}/policy")
        row = text_of(policy.split(f'data-rule="{learned.id}"')[1].split("</tr>")[0])
        assert "command matches git push *" in row and "profile ops" in row and "alice" in row
        assert "git push origin main" in row  # from which decision, by its title
        assert f'href="/decisions/{run_id}/now"' in policy
        assert "claude-code" in policy and "never force-push" in policy  # declared rules too
        # the profiles' shell paths (issue 20): claude-code's Bash lines, ops' own
        assert policy.count('class="shell-commands"') >= 2

        status, location = await post_form(
            client, f"{s.url}/policy/learned/{learned.id}/remove", {}, page_url=f"{s.url}/policy"
        )
        assert (status, location) == (303, "/policy")
        assert "removed by you" in await flash(client, f"{s.url}/policy")
    assert await w.core.service.learned_rules(w.alice, w.ws) == []
    third = (await w.core.service.declare_run(w.agent, w.ws, RunSpec(profile="ops"))).id
    assert await call(w, third, "k1", "git push origin feature") == "needs_approval"


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found
    return found.group(1)


async def test_scope_run_allows_that_run_only(world: World) -> None:
    run_id = await declare(world)
    other = await declare(world)
    await append(world, run_id, "bash", {"command": "make test"}, key="k1")
    allow = f"/decisions/{run_id}/k1/allow"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, page = await get_text(client, s.url + allow)
        # No profile: the scope is disabled, with the reason.
        assert "this run was not declared from a profile" in page
        assert re.search(r'value="profile" disabled', page)
        status, _ = await post_form(
            client, s.url + allow, {"do": "approve", "scope": "run"}, page_url=s.url + allow
        )
        assert status == 303
        _, policy = await get_text(client, f"{s.url}/policy")
        row = policy.split("<tbody>")[1].split("</tr>")[0]
        assert f'run <a href="/runs/{run_id}">tidy the repo</a>' in row  # by its title
    assert await state_of(world, run_id, "k1") == "granted"
    assert await call(world, run_id, "k2", "make test") == "granted"
    assert await call(world, other, "k2", "make test") == "needs_approval"
    [learned] = await world.core.service.learned_rules(world.alice, world.ws)
    assert (learned.scope, learned.run_id, learned.rule["match"]) == ("run", run_id, "make test")


@pytest.mark.parametrize(
    ("form", "code", "detail"),
    [
        ({"match": "git pull*"}, "rule_does_not_match", "does not match the call"),
        (
            {"rule": '{"tool": "bash", "mtach": "x"}'},
            "invalid_rules",
            "allow.rule.mtach: unknown key",
        ),
        ({"scope": "profile"}, "no_profile", "not declared from a profile"),
        ({"rule": "{not json"}, "invalid_request", "allow.rule: not JSON"),
    ],
)
async def test_a_refused_rule_is_shown_and_nothing_is_learned(
    world: World, form: dict[str, str], code: str, detail: str
) -> None:
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "git push origin main"}, key="k1")
    allow = f"/decisions/{run_id}/k1/allow"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, page = await get_text(client, s.url + allow)
        data = {"csrf": _csrf(page), "do": "approve", "scope": "run"} | form
        async with client.post(s.url + allow, data=data, allow_redirects=False) as answer:
            assert answer.status == 422
            shown = await answer.text()
    error = re.search(
        r'<p class="flash error" role="alert" id="allow-error">(.*?)</p>', shown, re.S
    )
    assert error, shown
    assert html_lib.unescape(error.group(1)).startswith(f"{code}: ") and detail in error.group(1)
    assert await state_of(world, run_id, "k1") == "needs_approval"
    assert await world.core.service.learned_rules(world.alice, world.ws) == []


async def test_an_ended_decision_has_no_allow_page(world: World) -> None:
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "make"}, key="k1")
    allow = f"/decisions/{run_id}/k1/allow"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, page = await get_text(client, s.url + allow)
        await world.core.service.approve(world.bob, world.ws, run_id, "k1")
        status, location = await get_text(client, s.url + allow)
        assert (status, location) == (303, f"/decisions/{run_id}/k1")
        assert (await flash(client, s.url + location)).startswith(
            "already_decided: already approved by bob"
        )
        data = {"csrf": _csrf(page), "do": "approve", "scope": "run"}
        async with client.post(s.url + allow, data=data, allow_redirects=False) as answer:
            assert answer.status == 303
        assert (await flash(client, s.url + location)).startswith("already_decided: ")
        status, _ = await get_text(client, f"{s.url}/decisions/{run_id}/nope/allow")
        assert status == 404
    assert await world.core.service.learned_rules(world.alice, world.ws) == []


async def test_the_new_posts_need_the_csrf_token(world: World) -> None:
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "make"}, key="k1")
    await world.core.service.approve(world.alice, world.ws, run_id, "k1", allow=AllowSpec("run"))
    await append(world, run_id, "bash", {"command": "make"}, key="k2")  # granted by the rule
    await append(world, run_id, "bash", {"command": "rm x"}, key="k3")
    [learned] = await world.core.service.learned_rules(world.alice, world.ws)
    base = f"/decisions/{run_id}/k3"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        for path, data in [
            (f"{base}/allow", {"do": "approve", "scope": "run"}),
            (f"{base}/approve-edited", {"edit_as": "command", "edited": "rm y"}),
            (f"/policy/learned/{learned.id}/remove", {}),
        ]:
            for forged in ({}, {"csrf": "forged"}):
                status, _ = await post_form(client, s.url + path, data | forged)
                assert status == 403, path
    assert await state_of(world, run_id, "k3") == "needs_approval"
    assert len(await world.core.service.learned_rules(world.alice, world.ws)) == 1


async def test_the_policy_view_needs_a_member_and_carries_the_page_headers(world: World) -> None:
    async with site(world) as s, browserless() as client:
        status, location = await get_text(client, f"{s.url}/policy")
        assert status == 303 and location in ("/login?next=%2Fpolicy", "/login?next=/policy")
        await sign_in(client, s.url, world.tokens["alice"])
        async with client.get(f"{s.url}/policy") as page:
            assert page.status == 200
            assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
            html = await page.text()
        assert '<a href="/policy" aria-current="page">Policy</a>' in html
        assert "claude-code" in html and "mcp" in html and "built in" in html
        assert "None yet" in html
        status, location = await post_form(
            client, f"{s.url}/policy/learned/lrn_nope/remove", {}, page_url=f"{s.url}/policy"
        )
        assert status == 303
        assert (await flash(client, f"{s.url}/policy")).startswith("not_found: ")


# edit before approve ---------------------------------------------------------------------------
async def test_an_edited_command_reaches_the_task_and_the_pages_say_edited(world: World) -> None:
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "rm -rf build", "timeout": 5}, key="k1")
    page_url = f"/decisions/{run_id}/k1"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, page = await get_text(client, s.url + page_url)
        assert 'name="edit_as" value="command"' in page
        assert re.search(
            r'<textarea id="edited-input" name="edited"[^>]*>\nrm -rf build</textarea>', page
        )
        status, location = await post_form(
            client,
            f"{s.url}{page_url}/approve-edited",
            {"edit_as": "command", "edited": "rm -rf build/cache\r\n"},
            page_url=s.url + page_url,
        )
        assert (status, location) == (303, page_url)
        assert "approved by you as edited" in await flash(client, s.url + location)
        task = await world.core.service.get_task(world.alice, world.ws, run_id, "k1")
        assert task.state == "granted"
        assert task.approved_input == {"command": "rm -rf build/cache\n", "timeout": 5}
        assert task.tool_input == {"command": "rm -rf build", "timeout": 5}
        # The decision's page (its ending and its history), the run's timeline and history say it
        # was edited, with the diff of the command.
        _, ended = await get_text(client, s.url + page_url)
        _, history = await get_text(client, f"{s.url}/history")
        _, run_page = await get_text(client, f"{s.url}/runs/{run_id}")
        timeline = ended.split('class="timeline"')[1]
        for shown in (ended.split('class="ending tone-')[1], history, timeline, run_page):
            diff = shown.split('<figure class="block diff edit-diff">')[1].split("</figure>")[0]
            assert "edited" in diff
            assert '<span class="tx">-rm -rf build</span>' in diff
            assert '<span class="tx">+rm -rf build/cache</span>' in diff
            assert "timeout" not in diff  # only the command changed: its text alone


async def test_an_edit_a_deny_rule_binds_is_refused_and_stays_parked(world: World) -> None:
    run_id = await declare(world, approval_rules=[DENY_FORCE])
    await append(world, run_id, "bash", {"command": "git push origin main"}, key="k1")
    page_url = f"/decisions/{run_id}/k1"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        status, location = await post_form(
            client,
            f"{s.url}{page_url}/approve-edited",
            {"edit_as": "command", "edited": "git push --force origin main"},
            page_url=s.url + page_url,
        )
        assert (status, location) == (303, page_url)
        message = await flash(client, s.url + location)
        assert message.startswith("approval_denied: the edited input is refused")
        assert "never force-push" in message
        status, _ = await post_form(
            client,
            f"{s.url}{page_url}/approve-edited",
            {"edit_as": "json", "edited": "{oops"},
            page_url=s.url + page_url,
        )
        assert (await flash(client, s.url + page_url)).startswith(
            "invalid_request: tool_input: not JSON"
        )
    task = await world.core.service.get_task(world.alice, world.ws, run_id, "k1")
    assert task.state == "needs_approval" and task.approved_input is None


async def test_other_inputs_are_edited_as_json_and_masked_ones_after_reveal(
    world: World,
) -> None:
    run_id = await declare(world)
    await append(world, run_id, "deploy", {"env": "prod", "replicas": 3}, key="k1")
    await append(
        world,
        run_id,
        "bash",
        {"command": "curl -H 'Authorization: Bearer sk-live-0123456789abcdef0123'"},
        key="k2",
    )
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        path = f"/decisions/{run_id}/k1"
        _, page = await get_text(client, s.url + path)
        assert 'name="edit_as" value="json"' in page
        status, _ = await post_form(
            client,
            f"{s.url}{path}/approve-edited",
            {"edit_as": "json", "edited": '{"env": "staging", "replicas": 3}'},
            page_url=s.url + path,
        )
        assert status == 303
        secret = f"/decisions/{run_id}/k2"
        _, masked = await get_text(client, s.url + secret)
        assert "sk-live-0123456789abcdef0123" not in masked and 'name="edited"' not in masked
        assert "reveal them</a> to edit" in masked
        _, revealed = await get_text(client, s.url + secret + "?reveal=1")
        assert 'name="edited"' in revealed
    task = await world.core.service.get_task(world.alice, world.ws, run_id, "k1")
    assert task.approved_input == {"env": "staging", "replicas": 3}


# several approvers -----------------------------------------------------------------------------
async def test_two_approvals_show_their_count_and_who_approved(world: World) -> None:
    carol = await world.core.admin.add_member(world.ws, "carol")
    await world.core.admin.add_group(world.ws, "leads", ["alice", "carol"])
    two = [{"tool": "deploy", "approvals": 2, "groups": ["leads"]}]
    run_id = await declare(world, approval_requirements=two, forbid_self_approval=True,
                           on_behalf_of="carol")  # fmt: skip
    await append(world, run_id, "deploy", {"env": "prod"}, key="k1")
    path = f"/decisions/{run_id}/k1"
    async with site(world) as s, browserless() as alice, browserless() as bob:
        await sign_in(alice, s.url, world.tokens["alice"])
        _, page = await get_text(alice, s.url + path)
        assert "0 of 2 approvals" in text_of(page)
        status, _ = await post_form(alice, s.url + path + "/approve", {}, page_url=s.url + path)
        assert status == 303
        assert "your approval is recorded; more are needed" in await flash(alice, s.url + path)
        # The card stays open, counts alice, and her Approve button says she approved.
        for url in (s.url + path, f"{s.url}/inbox"):
            _, shown = await get_text(alice, url)
            assert "1 of 2 approvals · alice ✓" in text_of(shown), url
            assert "You approved ✓" in shown and f'action="{path}/approve"' not in shown
        # Who may still: nobody (bob is in no group, carol is the person the run acts for).
        _, page = await get_text(alice, s.url + path)
        assert "nobody else may approve it" in page
        # Approving again (a stale page) is the 409, shown as the refusal.
        await post_form(alice, s.url + path + "/approve", {}, page_url=s.url + "/history")
        assert (await flash(alice, s.url + path)).startswith("already_reviewed: ")
        # Bob is in no group that reviews deploys; carol is the person the run acts for.
        await sign_in(bob, s.url, world.tokens["bob"])
        await post_form(bob, s.url + path + "/approve", {}, page_url=s.url + path)
        assert (await flash(bob, s.url + path)).startswith("not_an_eligible_approver: ")
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, carol.token)
        await post_form(client, s.url + path + "/approve", {}, page_url=s.url + path)
        assert (await flash(client, s.url + path)).startswith("self_approval_forbidden: ")
    task = await world.core.service.get_task(world.alice, world.ws, run_id, "k1")
    assert task.state == "needs_approval" and [g["by"] for g in task.approvals_given or []] == [
        "alice"
    ]


# in Chromium -----------------------------------------------------------------------------------


@needs_chromium
async def test_in_chromium_the_keyboard_opens_allow_a_glob_previews_and_policy_removes(
    tmp_path: Path,
) -> None:
    store, _ = await make_store("sqlite", tmp_path)
    w = await make_world(store)
    run_id = await declare(w)
    assert await call(w, run_id, "old", "git pull --rebase") == "needs_approval"
    await w.core.service.approve(w.alice, w.ws, run_id, "old")
    assert await call(w, run_id, "now", "git push origin main") == "needs_approval"
    try:
        async with site(w) as s, chromium() as browser:
            page = await signed_in(browser, s)
            await page.keyboard.press("j")
            await page.keyboard.press("Shift+A")  # approve & allow like this
            await page.wait_for_url(f"**/decisions/{run_id}/now/allow")
            replay = page.locator("ul.would-allow")
            assert "no past call matches" in await replay.inner_text()
            await page.fill("#allow-match", "git *")
            await page.click("button[value=preview]")
            await page.wait_for_selector("ul.would-allow a")
            assert "git pull --rebase" in await replay.inner_text()
            assert await page.input_value("#allow-match") == "git *"
            assert await page.is_disabled("input[name=scope][value=profile]")
            await page.click("button[value=approve]")
            await page.wait_for_url(f"**/decisions/{run_id}/now")
            assert "calls like it are allowed in this run now" in await page.inner_text(".flash")
            assert await call(w, run_id, "next", "git status") == "granted"

            await page.click("nav >> text=Policy")
            await page.wait_for_url("**/policy")
            row = page.locator("table.learned-table tbody tr")
            assert await row.count() == 1
            assert "command matches git *" in await row.inner_text()
            await row.locator("button", has_text="Remove").click()
            await page.wait_for_selector(".flash.ok")
            assert await page.locator("table.learned-table").count() == 0
            assert await call(w, run_id, "again", "git status") == "needs_approval"
            await page.context.close()
    finally:
        await store.close()


@needs_chromium
async def test_axe_finds_nothing_serious_on_the_allow_policy_and_edit_pages(
    tmp_path: Path,
) -> None:
    store, _ = await make_store("sqlite", tmp_path)
    w = await make_world(store)
    await w.core.admin.add_group(w.ws, "leads", ["alice", "bob"])
    run_id = await declare(
        w, approval_requirements=[{"tool": "deploy", "approvals": 2, "groups": ["leads"]}]
    )
    await call(w, run_id, "k1", "make release")
    await w.core.service.approve(w.alice, w.ws, run_id, "k1", allow=AllowSpec("run"))
    await call(w, run_id, "k2", "rm -rf build")
    await append(w, run_id, "deploy", {"env": "prod"}, key="k3")
    await w.core.service.approve(w.bob, w.ws, run_id, "k3")
    await append(w, run_id, "write", {"file_path": "src/a.py", "content": "x = 1\n"}, key="k4")
    await w.core.service.approve(
        w.alice, w.ws, run_id, "k4", tool_input={"file_path": "src/a.py", "content": "x = 2\n"}
    )
    axe = Axe()
    paths = [
        f"/decisions/{run_id}/k2/allow",
        f"/decisions/{run_id}/k2",  # the edit box, open
        f"/decisions/{run_id}/k3",  # 1 of 2 approvals
        f"/decisions/{run_id}/k4",  # approved as edited
        "/policy",
        "/history",
    ]
    try:
        async with site(w) as s, chromium() as browser:
            for scheme in ("light", "dark"):
                page = await signed_in(browser, s, color_scheme=scheme)
                for path in paths:
                    await page.goto(s.url + path)
                    if await page.locator("details.edit").count():
                        await page.click("details.edit > summary")
                    found = serious(await axe.run(page))
                    assert found == [], (scheme, path, found)
                # A refused rule's page, with its error.
                await page.goto(s.url + paths[0])
                await page.fill("#allow-match", "nothing like it")
                await page.click("button[value=approve]")
                await page.wait_for_selector("#allow-error")
                assert (await page.inner_text("#allow-error")).startswith("rule_does_not_match")
                assert serious(await axe.run(page)) == []
                await page.context.close()
            # On a phone nothing scrolls sideways, the learned rules' table included.
            phone = {"width": 390, "height": 844}
            page = await signed_in(browser, s, viewport=phone, is_mobile=True, has_touch=True)
            for path in paths:
                await page.goto(s.url + path)
                width = await page.evaluate(
                    "[document.documentElement.scrollWidth, window.innerWidth]"
                )
                assert width[0] <= width[1], (path, width)
            await page.context.close()
    finally:
        await store.close()


async def test_approve_edited_and_allow_learns_from_the_edited_call(world: World) -> None:
    run_id = await declare(world, approval_rules=[DENY_FORCE], shell_commands=SHELL)
    await append(world, run_id, "bash", {"command": "git push origin main"}, key="k1")
    page_url = f"/decisions/{run_id}/k1"
    allow = f"{page_url}/allow"
    edit = {"edit_as": "command", "edited": "make deploy STAGE=1"}
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, decision = await get_text(client, s.url + page_url)
        assert f'formaction="{allow}" name="do" value="edit"' in decision
        data = {"csrf": _csrf(decision), "do": "edit"} | edit
        async with client.post(s.url + allow, data=data) as answer:
            assert answer.status == 200
            page = await answer.text()
        # The rule is proposed from the edited call, the edit shown and carried on.
        assert 'name="match" value="make deploy *"' in page
        assert '<span class="tx">+make deploy STAGE=1</span>' in page
        assert 'name="edited" value="make deploy STAGE=1"' in page
        status, location = await post_form(
            client, s.url + allow, {"do": "approve", "scope": "run"} | edit, page_url=s.url + allow
        )
        assert (status, location) == (303, page_url)
        assert "approved by you as edited; calls like it" in await flash(client, s.url + page_url)
        # An edit a deny binds goes back to the decision, refused, learning nothing.
        await append(world, run_id, "bash", {"command": "git pull"}, key="k2")
        denied = {"edit_as": "command", "edited": "git push --force", "do": "edit"}
        status, location = await post_form(
            client, f"{s.url}/decisions/{run_id}/k2/allow", denied, page_url=s.url + page_url
        )
        assert (status, location) == (303, f"/decisions/{run_id}/k2")
        assert (await flash(client, s.url + location)).startswith("approval_denied: ")
    task = await world.core.service.get_task(world.alice, world.ws, run_id, "k1")
    assert task.approved_input == {"command": "make deploy STAGE=1"}
    [learned] = await world.core.service.learned_rules(world.alice, world.ws)
    assert learned.rule["match"] == "make deploy *"
    assert await state_of(world, run_id, "k2") == "needs_approval"
    assert await call(world, run_id, "k3", "make deploy STAGE=2") == "granted"


async def test_the_policy_view_shows_a_profiles_approval_requirements(store: SqlStore) -> None:
    leads = ProfileConfig(
        approval_mode="ask",
        approval_rules=[DENY_FORCE],
        approval_requirements=[{"tool": "deploy", "approvals": 2, "groups": ["leads"]}],
        forbid_self_approval=True,
    )
    w = await make_world(store, Settings(profiles={"release": leads}))
    async with site(w, Settings(profiles={"release": leads})) as s, browserless() as client:
        await sign_in(client, s.url, w.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/policy")
    section = text_of(html.split("<code>release</code>")[1].split("</section>")[0])
    assert "configured · ask mode" in section and "never force-push" in section
    assert "2 approvals for deploy , from leads" in section  # (tags read as spaces)
    assert "may not approve its calls" in section


@needs_chromium
async def test_in_chromium_a_decision_page_shows_anothers_approval_live(tmp_path: Path) -> None:
    store, _ = await make_store("sqlite", tmp_path)
    w = await make_world(store)
    carol = await w.core.admin.add_member(w.ws, "carol")
    run_id = await declare(w, approval_requirements=[{"tool": "deploy", "approvals": 2}])
    await append(w, run_id, "deploy", {"env": "prod"}, key="k1")
    try:
        async with site(w) as s, chromium() as browser:
            page = await signed_in(browser, s)
            await page.goto(f"{s.url}/decisions/{run_id}/k1")
            await page.wait_for_selector('body[data-live="1"]', timeout=LIVE)
            await page.fill('input[name="reason"]', "half typed")
            await w.core.service.approve(w.bob, w.ws, run_id, "k1")
            line = page.locator("p.approvals")
            await page.wait_for_selector('p.approvals[data-given="1"]', timeout=LIVE)
            assert (await line.inner_text()).strip() == "1 of 2 approvals · bob ✓"
            assert await page.input_value('input[name="reason"]') == "half typed"
            await w.core.service.approve(carol.principal, w.ws, run_id, "k1")
            await page.wait_for_selector(".ending", timeout=LIVE)  # reloaded: how it ended
            assert "approved" in await page.inner_text(".ending")
            await page.context.close()
    finally:
        await store.close()


@pytest.mark.parametrize("field", ["match", "tool", "rule", "edited"])
async def test_text_no_store_can_hold_is_a_refusal_not_a_500(world: World, field: str) -> None:
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "git push origin main"}, key="k1")
    base = f"/decisions/{run_id}/k1"
    bad = "git push \x00*"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, page = await get_text(client, s.url + base + "/allow")
        if field == "edited":
            data = {"edit_as": "command", "edited": bad}
            url = s.url + base + "/approve-edited"
        else:
            value = (
                '{"tool": "bash", "path": "command", "match": "\\u0000"}'
                if field == "rule"
                else bad
            )
            data = {"do": "approve", "scope": "run", field: value}
            url = s.url + base + "/allow"
        async with client.post(
            url, data={"csrf": _csrf(page)} | data, allow_redirects=False
        ) as answer:
            assert answer.status in (303, 422), answer.status
    assert await state_of(world, run_id, "k1") == "needs_approval"
    assert await world.core.service.learned_rules(world.alice, world.ws) == []


async def test_under_a_quorum_a_card_shows_the_edit_its_count_is_for(world: World) -> None:
    run_id = await declare(world, approval_requirements=[{"tool": "bash", "approvals": 2}])
    await append(world, run_id, "bash", {"command": "make deploy"}, key="k1")
    edited = {"command": "make deploy DRY_RUN=1"}
    counted = await world.core.service.approve(world.bob, world.ws, run_id, "k1", tool_input=edited)
    assert counted.parked
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        for url in (f"{s.url}/inbox", f"{s.url}/decisions/{run_id}/k1"):
            _, html = await get_text(client, url)
            diff = html.split('<figure class="block diff edit-diff">')[1].split("</figure>")[0]
            assert "edited by bob" in diff and "approve the call as edited" in diff
            assert '<span class="tx">+make deploy DRY_RUN=1</span>' in diff
            assert "1 of 2 approvals · bob ✓" in text_of(html)
        assert "may still approve: alice" in html  # the decision's page names who may
        path = f"/decisions/{run_id}/k1"
        await post_form(client, s.url + path + "/approve", {}, page_url=s.url + path)
    task = await world.core.service.get_task(world.alice, world.ws, run_id, "k1")
    assert task.state == "granted" and task.approved_input == edited


async def test_a_secret_in_an_edit_is_masked_until_revealed(world: World) -> None:
    run_id = await declare(world)
    await append(world, run_id, "bash", {"command": "deploy"}, key="k1")
    secret = "sk-live-0123456789abcdef0123"
    edited = {"command": f"deploy --token {secret}"}
    await world.core.service.approve(world.alice, world.ws, run_id, "k1", tool_input=edited)
    path = f"/decisions/{run_id}/k1"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, masked = await get_text(client, s.url + path)
        _, history = await get_text(client, f"{s.url}/history")
        _, revealed = await get_text(client, s.url + path + "?reveal=1")
    for page in (masked, history):
        assert secret not in page and "edit-diff" in page
    assert f"{path}?reveal=1" in masked  # the page offers to reveal it
    assert secret in revealed.split('<figure class="block diff edit-diff">')[1]


async def test_the_timeline_says_a_rule_was_learned_and_removed_in_words(world: World) -> None:
    run_id = await declare(world, shell_commands=SHELL)
    await append(world, run_id, "bash", {"command": "git push origin main"}, key="k1")
    await world.core.service.approve(world.alice, world.ws, run_id, "k1", allow=AllowSpec("run"))
    [learned] = await world.core.service.learned_rules(world.alice, world.ws)
    await world.core.service.remove_learned_rule(world.alice, world.ws, learned.id, via="web")
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/runs/{run_id}")
    steps = [
        text_of(li.split('<details class="raw"')[0])
        for li in re.findall(r'<li class="step.*?</li>', html, re.S)
    ]
    learned_step = next(s for s in steps if "allowed calls like it" in s)
    assert "learned alice allowed calls like it from now on, in this run" in learned_step
    assert "bash when command matches git push *" in learned_step
    removed = next(s for s in steps if "removed the learned rule" in s)
    assert f"alice removed the learned rule {learned.id}" in removed
    assert not any("learned_rule" in s.split("via")[0] for s in steps)


async def test_a_glob_holding_a_secret_is_masked_and_learned_as_proposed(world: World) -> None:
    run_id = await declare(world)
    token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
    command = f"export GITHUB_TOKEN={token} && make"
    await append(world, run_id, "bash", {"command": command}, key="k1")
    allow = f"/decisions/{run_id}/k1/allow"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, page = await get_text(client, s.url + allow)
        assert token not in page and 'name="match"' not in page
        assert f"{allow}?reveal=1" in page
        _, revealed = await get_text(client, s.url + allow + "?reveal=1")
        assert 'name="match"' in revealed and token in revealed
        status, _ = await post_form(
            client, s.url + allow, {"do": "approve", "scope": "run"}, page_url=s.url + allow
        )
        assert status == 303
    [learned] = await world.core.service.learned_rules(world.alice, world.ws)
    assert learned.rule["match"] == command  # the proposal (no shell path: the text), as is


async def test_under_a_quorum_the_allow_page_proposes_from_the_edit_being_counted(
    world: World,
) -> None:
    run_id = await declare(
        world, approval_requirements=[{"tool": "bash", "approvals": 2}], shell_commands=SHELL
    )
    await append(world, run_id, "bash", {"command": "git push origin main"}, key="k1")
    edited = {"command": "make deploy DRY_RUN=1"}
    await world.core.service.approve(world.bob, world.ws, run_id, "k1", tool_input=edited)
    allow = f"/decisions/{run_id}/k1/allow"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, page = await get_text(client, s.url + allow)
        assert 'name="match" value="make deploy *"' in page
        assert '<span class="tx">+make deploy DRY_RUN=1</span>' in page
        status, location = await post_form(
            client, s.url + allow, {"do": "approve", "scope": "run"}, page_url=s.url + allow
        )
        assert status == 303
        assert "calls like it are allowed" in await flash(client, s.url + location)
    task = await world.core.service.get_task(world.alice, world.ws, run_id, "k1")
    assert task.state == "granted" and task.approved_input == edited
    [learned] = await world.core.service.learned_rules(world.alice, world.ws)
    assert learned.rule["match"] == "make deploy *"


async def test_the_timeline_counts_approvals_and_shows_an_edit_that_restarted_them(
    world: World,
) -> None:
    run_id = await declare(world, approval_requirements=[{"tool": "bash", "approvals": 2}])
    await append(world, run_id, "bash", {"command": "make deploy"}, key="k1")
    await world.core.service.approve(world.bob, world.ws, run_id, "k1")
    edited = {"command": "make deploy DRY_RUN=1"}
    await world.core.service.approve(world.alice, world.ws, run_id, "k1", tool_input=edited)
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/runs/{run_id}")
    steps = re.findall(r'<li class="step.*?</li>', html, re.S)
    counted = [text_of(li.split('<details class="raw"')[0]) for li in steps]
    assert any("bob approved (1 of 2 approvals): make deploy" in c for c in counted), counted
    restarted = next(li for li in steps if "the count starts again" in li)
    assert "alice approved (1 of 2 approvals)" in text_of(restarted)
    assert '<span class="tx">+make deploy DRY_RUN=1</span>' in restarted


async def test_an_approval_that_does_not_complete_a_quorum_learns_nothing(world: World) -> None:
    run_id = await declare(world, approval_requirements=[{"tool": "bash", "approvals": 2}])
    await append(world, run_id, "bash", {"command": "make deploy"}, key="k1")
    allow = f"/decisions/{run_id}/k1/allow"
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, page = await get_text(client, s.url + allow)
        assert "only the approval that completes the count learns a rule" in page
        data = {"csrf": _csrf(page), "do": "approve", "scope": "run"}
        async with client.post(s.url + allow, data=data, allow_redirects=False) as answer:
            assert answer.status == 422
            assert "invalid_request: allow: only the approval that ends" in await answer.text()
    task = await world.core.service.get_task(world.alice, world.ws, run_id, "k1")
    assert task.approvals_given == [] and task.parked  # not counted either
    assert await world.core.service.learned_rules(world.alice, world.ws) == []
