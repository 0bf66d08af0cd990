"""The pages that are a person's record: a run's timeline, how runs ended, a decision after its
ending, history (titles, outcome colours, the search). Plain HTTP where the browser does not
matter (on SQLite and PostgreSQL); Debian's Chromium where it does (clicks, axe-core)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser

from adapters.web.render import diff_lines
from tests.browser_helpers import LIVE, needs_chromium, serious, signed_in
from tests.conftest import World
from tests.web_helpers import Site, append, browserless, declare, get_text, post_form, sign_in, site

RULES = [
    {"tool": "Read", "verdict": "allow"},
    {"tool": "bash", "path": "command", "match": "git push *", "verdict": "ask"},
    {
        "tool": "bash",
        "path": "command",
        "match": "rm *",
        "verdict": "ask",
        "reason": "deletions need a person",
    },
    {"tool": "ask", "verdict": "allow"},
]


async def story(world: World) -> tuple[str, dict[str, str]]:
    """A run with a rule-granted call, a parked call approved by alice, one denied by bob with
    a reason, an answered question; the agent finishes it. Keys are the stored (hash) keys."""
    service = world.core.service
    run_id = await declare(world, approval_mode="rules", approval_rules=RULES, title="release")
    read = await append(world, run_id, "Read", {"file_path": "README.md"})
    await world.clock.advance(1)
    push = await append(world, run_id, "bash", {"command": "git push origin main"})
    await world.clock.advance(1)
    await service.approve(world.alice, world.ws, run_id, push.key, via="web")
    await world.clock.advance(1)
    rm = await append(world, run_id, "bash", {"command": "rm -rf build"})
    await world.clock.advance(1)
    await service.deny(world.bob, world.ws, run_id, rm.key, reason="build is shared", via="slack")
    await world.clock.advance(1)
    question = {"prompt": "Which region?", "options": ["eu", "us"]}
    region = await append(world, run_id, "ask", question)
    await world.clock.advance(1)
    await service.resolve(world.alice, world.ws, run_id, region.key, content="eu", via="telegram")
    await world.clock.advance(1)
    await service.stop(world.agent, world.ws, run_id)
    return run_id, {"read": read.key, "push": push.key, "rm": rm.key, "region": region.key}


# the run's timeline, in plain HTTP ----------------------------------------------------------
def _steps(html: str) -> list[str]:
    """Each timeline step's text, tags stripped, the raw JSON (in its <details>) left out."""
    body = html.split('<ol class="timeline">', 1)[1].split("</section>", 1)[0]
    steps = body.split('<li class="step')[1:]
    out = []
    for step in steps:
        step = re.sub(r"<details class=\"raw\">.*?</details>", "", step, flags=re.S)
        out.append(" ".join(re.sub(r"<[^>]+>", " ", step).split()))
    return out


async def test_the_run_page_is_a_timeline_of_who_asked_what_and_who_decided(world: World) -> None:
    run_id, keys = await story(world)
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        status, html = await get_text(client, f"{s.url}/runs/{run_id}")
    assert status == 200
    steps = _steps(html)
    expected = [
        ("started", "the agent (agent) started the run (rules mode)"),
        ("granted", "asked to run Read: Read README.md", "granted by the rules: allowed by rule 0"),
        ("parked", "asked to run bash: git push origin main", "waits for a person: rule 1 (ask)"),
        ("approved", "alice approved: git push origin main", "via web"),
        ("parked", "asked to run bash: rm -rf build", "rule 2 (ask)", "— deletions need a person"),
        ("denied", "bob denied: rm -rf build", "via slack", "reason: build is shared"),
        ("asked", "asked: Which region?", "waits for a person&#39;s answer", "options: eu , us"),
        ("answered", "alice answered: Which region?", "via telegram", "answer: eu"),
        ("finished", "the agent (agent) finished the run"),
    ]
    assert len(steps) == len(expected), steps
    for text, words in zip(steps, expected, strict=True):
        for word in words:
            assert word in text, (word, text)
    # The badges take the outcome's colour, as in the inbox.
    assert '<span class="outcome-badge tone-approved">approved</span>' in html
    assert '<span class="outcome-badge tone-denied">denied</span>' in html
    # Keys are never what a person reads: the stored ones are bare hashes.
    readable = " ".join(steps) + html.split("<h1>", 1)[1].split("</h1>", 1)[0]
    for key in keys.values():
        assert key not in readable
    # The rules read as a table, every rule whole, its reason included.
    rules = html.split('<table class="rules-table">', 1)[1].split("</table>", 1)[0]
    assert "<code>command matches rm *</code>" in rules and "deletions need a person" in rules
    assert "finished by the agent (agent)" in html


async def test_how_a_run_ended_reads_on_the_runs_list_and_the_run_page(world: World) -> None:
    service = world.core.service
    finished = await declare(world, title="nightly")
    await append(world, finished, "bash", {"command": "make nightly"})
    await service.stop(world.agent, world.ws, finished)
    stopped = await declare(world, title="nightly")
    await append(world, stopped, "bash", {"command": "make docs"})
    held = await declare(world, title="nightly")
    await append(world, held, "ask", {"prompt": "Ship it?"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        page_url = f"{s.url}/runs/{stopped}"
        await post_form(client, f"{page_url}/stop", {}, page_url=page_url)
        await world.clock.advance(timedelta(hours=25))
        await world.core.scheduler.run_once()
        waiting = await declare(world, title="deploy")
        await append(world, waiting, "deploy", {"env": "prod"})
        await append(world, waiting, "deploy", {"env": "staging"})
        await sign_in(client, s.url, world.tokens["alice"])  # 25 h outlive a session
        _, listing = await get_text(client, f"{s.url}/runs")
        rows = {
            run_id: listing.split(f'href="/runs/{run_id}"', 1)[1].split("</tr>", 1)[0]
            for run_id in (finished, stopped, held, waiting)
        }
        assert "finished by the agent (agent)" in rows[finished]
        assert "stopped by alice" in rows[stopped]
        assert "held: waiting for a person to retry or abandon" in rows[held]
        assert 'aria-label="2 waiting for a person">2</a>' in rows[waiting]
        # Runs with one title are told apart by their first call.
        assert "first: make nightly" in rows[finished] and "first: make docs" in rows[stopped]
        assert "first: Ship it?" in rows[held]

        _, page = await get_text(client, f"{s.url}/runs/{held}")
        assert "held: waiting for a person to retry or abandon" in page
        await world.clock.advance(timedelta(hours=1))
        await post_form(client, f"{s.url}/runs/{held}/abandon", {}, page_url=f"{s.url}/runs/{held}")
        _, page = await get_text(client, f"{s.url}/runs/{held}")
        assert "abandoned by alice after it was held for 1 h" in page
        assert "nightly: abandoned by you" in page  # the notice names the run by its title


async def test_a_retried_run_reads_asked_again_after_the_retry(world: World) -> None:
    run_id = await declare(world, title="nightly")
    await append(world, run_id, "ask", {"prompt": "Ship it?"})
    await world.clock.advance(timedelta(hours=25))
    await world.core.scheduler.run_once()
    await world.core.service.retry(world.bob, world.ws, run_id, via="cli")
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/runs/{run_id}")
    steps = _steps(html)
    expected = [
        "the agent (agent) started the run",
        "the agent (agent) asked: Ship it?",
        "nobody decided in time: Ship it?",
        "the run is held",
        "asked again after bob retried: Ship it?",
        "bob retried",
    ]
    assert len(steps) == len(expected), steps
    for text, words in zip(steps, expected, strict=True):
        assert words in text, (words, text)
    assert "expired" in steps[2] and "via cli" in steps[4] and "via cli" in steps[5]
    assert '<span class="state state-running ending-running">running</span>' in html


async def test_calls_the_rules_granted_in_a_row_fold_into_one_step(world: World) -> None:
    run_id = await declare(world, approval_mode="rules", approval_rules=RULES)
    for name in ("a.py", "b.py", "c.py", "d.py"):
        await append(world, run_id, "Read", {"file_path": name})
    await append(world, run_id, "bash", {"command": "git push origin main"})
    await append(world, run_id, "Read", {"file_path": "e.py"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/runs/{run_id}")
    steps = _steps(html)
    assert len(steps) == 4, steps  # started, the four reads as one, the park, the last read
    assert "4 calls granted by the rules (Read ×4)" in steps[1]
    assert all(f"Read {name}" in steps[1] for name in ("a.py", "b.py", "c.py", "d.py"))
    assert "git push origin main" in steps[2] and "Read e.py" in steps[3]


# a decision after its ending; history ------------------------------------------------------
async def test_a_decision_page_after_its_ending_says_how_it_ended(world: World) -> None:
    run_id = await declare(world)
    push = await append(world, run_id, "bash", {"command": "git push origin main"})
    rm = await append(world, run_id, "bash", {"command": "rm -rf build"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, before = await get_text(client, f"{s.url}/decisions/{run_id}/{push.key}")
        assert "why it waits" in before
        await world.core.service.approve(world.bob, world.ws, run_id, push.key, via="telegram")
        _, after = await get_text(client, f"{s.url}/decisions/{run_id}/{push.key}")
        assert "why it waits" not in after and 'action="/decisions' not in after
        ending = after.split('<div class="ending', 1)[1].split("</div>", 1)[0]
        assert ending.startswith(' tone-approved"')
        assert "approved</span> by bob via telegram" in ending
        assert '<h1 class="decision-title">git push origin main</h1>' in after

        page_url = f"{s.url}/decisions/{run_id}/{rm.key}"
        await post_form(
            client, f"{page_url}/deny", {"reason": "build is shared"}, page_url=page_url
        )
        _, denied = await get_text(client, page_url)
        assert 'class="flash ok outcome-denied"' in denied  # the notice is red, not green
        assert "rm -rf build: denied by you" in denied
        ending = denied.split('<div class="ending', 1)[1].split("</div>", 1)[0]
        assert ending.startswith(' tone-denied"') and "by alice via web" in ending
        assert "reason: build is shared" in ending


async def test_history_reads_titles_and_outcomes_never_raw_json(world: World) -> None:
    service = world.core.service
    run_id = await declare(world)
    a = await append(world, run_id, "bash", {"command": "make release"})
    b = await append(world, run_id, "deploy", {"env": "prod"})
    await service.approve(world.alice, world.ws, run_id, a.key, via="web")
    await service.deny(world.bob, world.ws, run_id, b.key, via="api")  # no reason given
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        _, html = await get_text(client, f"{s.url}/history")
        body = html.split("<tbody>", 1)[1]
        assert "{&#34;" not in body and '{"' not in body  # no raw JSON such as {"reason": ""}
        assert ">make release</a>" in body and ">deploy call</a>" in body
        assert '<span class="outcome-badge tone-approved">approved</span>' in body
        assert '<span class="outcome-badge tone-denied">denied</span>' in body
        for key in (a.key, b.key):
            assert f">{key}<" not in body  # keys only in links, never as text
        # The decision's own history is a readable timeline too, its raw entry one click away.
        _, page = await get_text(client, f"{s.url}/decisions/{run_id}/{b.key}")
        steps = _steps(page)
        assert "bob denied: deploy" in steps[-1] and "reason:" not in steps[-1]


async def test_history_search_by_tool_command_and_person_literally(world: World) -> None:
    service = world.core.service
    run_id = await declare(world)
    calls: dict[str, Any] = {
        "release": ("bash", {"command": "make release"}),
        "deploy": ("deploy", {"env": "prod"}),
        "percent": ("bash", {"command": "echo 100% done"}),
        "thousand": ("bash", {"command": "echo 1000 done"}),
        "under": ("bash", {"command": "rm a_b"}),
        "nounder": ("bash", {"command": "rm axb"}),
        "quoted": ("bash", {"command": 'say "hi" \\ there'}),
    }
    keys = {}
    for name, (tool, tool_input) in calls.items():
        task = await append(world, run_id, tool, tool_input)
        keys[name] = task.key
        who = world.bob if name == "deploy" else world.alice
        await service.approve(who, world.ws, run_id, task.key, via="web")

    async def found(q: str) -> set[str]:
        async with client.get(f"{s.url}/history", params={"q": q}) as answer:
            assert answer.status == 200
            html = await answer.text()
        return {name for name, key in keys.items() if f'/{key}"' in html}

    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        assert await found("deploy") == {"deploy"}  # by tool
        assert await found("MAKE rel") == {"release"}  # by command text, any case
        assert await found("bob") == {"deploy"}  # by person
        assert await found("100%") == {"percent"}  # % is a percent sign, not a wildcard
        assert await found("a_b") == {"under"}  # _ is an underscore
        assert await found('say "hi" \\') == {"quoted"}  # quotes and backslashes as typed
        assert await found("'; DROP TABLE task; --") == set()
        assert await found("%") == {"percent"}
        _, html = await get_text(client, f"{s.url}/history?q=100%25")
        assert 'value="100%"' in html and "1 decision matching" in html
        # The search box is a plain GET form: it works without JavaScript.
        assert '<input type="search" name="q"' in html
        status, _ = await get_text(client, f"{s.url}/history?q=%00")
        assert status == 422


def test_diffs_carry_line_numbers() -> None:
    lines = diff_lines("a\nb\nc\n", "a\nB\nc\nd\n", "x.txt")
    numbered = [(ln.cls, ln.old, ln.new, ln.text) for ln in lines if ln.cls != "meta"]
    assert numbered == [
        ("hunk", None, None, "@@ -1,3 +1,4 @@"),
        ("ctx", 1, 1, " a"),
        ("del", 2, None, "-b"),
        ("add", None, 2, "+B"),
        ("ctx", 3, 3, " c"),
        ("add", None, 4, "+d"),
    ]


# in Chromium ----------------------------------------------------------------------------------
@needs_chromium
@pytest.mark.asyncio(loop_scope="module")
async def test_the_timeline_in_chromium_raw_json_one_click_away(
    browser: Browser, served: Site
) -> None:
    run_id, keys = await story(served.world)
    page = await signed_in(browser, served)
    await page.goto(f"{served.url}/runs/{run_id}")
    steps = page.locator("ol.timeline > li.step")
    assert await steps.count() == 9
    denied = steps.nth(5)
    assert "bob denied: rm -rf build" in await denied.inner_text()
    assert await denied.locator(".outcome-badge").inner_text() == "denied"
    visible = await page.locator("main").inner_text()
    for key in keys.values():
        assert key not in visible  # hash keys only inside the (closed) raw entries
    raw = denied.locator("details.raw pre")
    assert not await raw.is_visible()
    await denied.locator("details.raw summary").click()
    await raw.wait_for(state="visible", timeout=LIVE)
    assert '"reason": "build is shared"' in await raw.inner_text()
    # The rules never run off the right edge: the table fits the page's width.
    fits = await page.evaluate(
        "() => { const t = document.querySelector('.rules-table');"
        " return t.getBoundingClientRect().right <= document.documentElement.clientWidth; }"
    )
    assert fits
    await page.context.close()


@needs_chromium
@pytest.mark.asyncio(loop_scope="module")
async def test_axe_finds_no_serious_violations_on_the_record_pages(
    browser: Browser, served: Site
) -> None:
    run_id, keys = await story(served.world)
    axe = Axe()
    paths = [
        f"/runs/{run_id}",
        "/runs",
        "/history",
        "/history?q=git",
        f"/decisions/{run_id}/{keys['rm']}",
    ]
    for scheme in ("light", "dark"):
        page = await signed_in(browser, served, color_scheme=scheme)
        for path in paths:
            await page.goto(served.url + path)
            await page.keyboard.press("Tab")  # a focus ring is part of what is checked
            found = serious(await axe.run(page))
            assert found == [], (scheme, path, found)
        await page.context.close()


@needs_chromium
@pytest.mark.asyncio(loop_scope="module")
async def test_the_record_pages_fit_a_phone_without_sideways_scrolling(
    browser: Browser, served: Site
) -> None:
    run_id, keys = await story(served.world)
    page = await signed_in(browser, served, viewport={"width": 390, "height": 800})
    for path in (f"/runs/{run_id}", "/runs", "/history", f"/decisions/{run_id}/{keys['rm']}"):
        await page.goto(served.url + path)
        # Neither the page nor a table's own scroll box runs wider than the screen.
        wide = await page.evaluate(
            "() => [document.documentElement, ...document.querySelectorAll('.scroll')]"
            ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className || e.tagName)"
        )
        assert wide == [], path
        # Everything a row says is still there, stacked.
        if path == "/history":
            assert await page.locator(".history-list td.col-who").first.is_visible()
    await page.context.close()
