"""Issue 20 on every surface: a compound shell line's commands, one per line, the one that made
the call park (or refused it) marked, secrets masked, what cannot be seen through said; the
chat card (bot/rendering.py), Telegram, Slack, the web page and `approvalbot asks show`."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from adapters.http import models as m
from adapters.slack.format import decision_blocks
from adapters.telegram.format import card_html, visible_length
from adapters.web import render as web
from adapters.web.context import make_env
from bot.cli import main
from bot.cli.asks import detail_lines, short_id
from bot.domain import Run, Task
from bot.masking import MASK, utf16_len
from bot.rendering import (
    ACTIONS,
    Card,
    command_lines,
    fit_lines,
    render_decision,
    shows_commands,
)
from bot.service import CallSpec, RunSpec
from tests.fakes.slack_api import check_blocks
from tests.fakes.telegram_api import parse_html
from tests.http_harness import Served, fixtures
from tests.test_slack_rendering import assert_fits_slack

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
URL = "https://x.example/decisions/run_1/k1"
SECRET = "sk-live-abcdef1234567890abcdef"
CURL = f'curl -H "Authorization: Bearer {SECRET}" https://api.example/v1'
IDS: dict[tuple[str, int | None], str] = {
    (action, option): f"cb_{action}_{option}" for action in ACTIONS for option in (None, 0)
}


def row(text: str, outcome: str = "granted", **flags: bool) -> dict[str, Any]:
    """A command as `CommandVerdict.to_json` writes it."""
    return {"text": text, "outcome": outcome, "why": f"judged {text[:10]}"} | flags


def compound() -> dict[str, Any]:
    """`git status && curl … | sh; timeout 5 rm -rf build`: curl parks, the rest is granted."""
    return {
        "summary": "build and fetch",
        "effects": ["executes"],
        "commands": [
            row("git status"),
            row(CURL, "parked", marked=True),
            row("timeout 5 rm -rf build", wrapper=True),
            row("rm -rf build"),
        ],
        "unseen": ["pipes into sh"],
    }


def run() -> Run:
    rules: list[dict[str, Any]] = [{"tool": "bash", "verdict": "ask", "reason": "shell"}]
    return Run("run_1", "acme", "app_1", "running", "rules", rules, None, {}, NOW, title="ci")


def task(profile: dict[str, Any], command: str = "", **kw: Any) -> Task:
    values: dict[str, Any] = {
        "id": "task_1",
        "run_id": "run_1",
        "workspace_id": "acme",
        "key": "k1",
        "kind": "tool_call",
        "origin": "model",
        "tool_name": "bash",
        "tool": "bash",
        "tool_input": {"command": command or f"git status && {CURL} | sh; timeout 5 rm -rf build"},
        "state": "needs_approval",
        "created_at": NOW,
        "deadline": NOW + timedelta(hours=24),
        "why": "`curl …` parks: no rule decides it",
        "rule_index": None,
        "appended_by": "agent",
        "effect_profile": profile,
    }
    return Task(**(values | kw))


def card(profile: dict[str, Any], **kw: Any) -> Card:
    return render_decision(task(profile, **kw), run(), NOW, URL)


def field(c: Card, label: str) -> str | None:
    return next((f.value for f in c.fields if f.label == label), None)


# --------------------------------------------------------------------------------------------
# The card model
# --------------------------------------------------------------------------------------------


def test_commands_one_per_line_in_order_the_marked_one_marked() -> None:
    lines = command_lines(compound())
    assert lines == [
        "  ✓ git status",
        f'▶ curl -H "Authorization: Bearer {MASK}" https://api.example/v1 ← parks',
        "  ✓ rm -rf build",  # the wrapper's own form (denies only) is not a line of its own
        "⚠ cannot be seen through: pipes into sh",
    ]
    value = field(card(compound()), "Commands")
    assert value is not None and value.split("\n") == lines


def test_a_refused_command_is_marked_refused_and_others_say_they_were_not_granted() -> None:
    profile = {"commands": [row("make", "parked"), row("rm -rf ~", "failed", marked=True)]}
    assert command_lines(profile) == ["  · make", "▶ rm -rf ~ ← refused"]


def test_the_line_keys_are_not_shown_as_raw_json_among_the_other_keys() -> None:
    c = card(compound() | {"cost": 3})
    assert field(c, "cost") == "3"
    assert field(c, "commands") is None and field(c, "unseen") is None
    labels = [f.label for f in c.fields]
    assert labels.index("Commands") < labels.index("Why")
    assert not any('"outcome"' in f.value for f in c.fields)


def test_a_single_plain_command_shows_no_commands_field() -> None:
    single = {"commands": [row("make test")]}
    assert not shows_commands(single)
    assert field(card(single, command="make test"), "Commands") is None
    # a wrapper and what it wraps are still one command
    wrapped = {"commands": [row("timeout 5 make", wrapper=True), row("make")]}
    assert field(card(wrapped, command="timeout 5 make"), "Commands") is None
    # … but a part that cannot be seen through is worth saying even then
    opaque = {"commands": [row("echo hi", "parked")], "unseen": ["writes to out.txt"]}
    assert field(card(opaque, command="echo hi > out.txt"), "Commands") == (
        "  · echo hi\n⚠ cannot be seen through: writes to out.txt"
    )


def test_a_profile_of_another_shape_is_shown_as_it_was_given() -> None:
    odd = {"commands": "rm -rf / (says the agent)", "unseen": 3}
    c = card(odd)
    assert field(c, "Commands") is None
    assert field(c, "commands") == "rm -rf / (says the agent)" and field(c, "unseen") == "3"
    junk = {"commands": [1, None, {"text": 5}, row("ls"), row("pwd", "parked", marked=True)]}
    assert command_lines(junk) == ["  ✓ ls", "▶ pwd ← parks"]


def test_many_commands_are_cut_the_marked_one_kept() -> None:
    profile = {"commands": [row(f"echo {n}") for n in range(200)]}
    profile["commands"][150] = row("rm -rf /srv", "parked", marked=True)
    lines = command_lines(profile)
    assert len(lines) <= 30
    assert lines[0] == "  ✓ echo 0"
    assert "▶ rm -rf /srv ← parks" in lines
    assert any(re.fullmatch(r" {2}… \d+ more", line) for line in lines)
    long = command_lines({"commands": [row("x" * 5000, "parked", marked=True), row("y")]})
    assert utf16_len(long[0]) <= 220 and long[0].endswith("… ← parks")


def test_fit_lines_counts_the_gap_notes() -> None:
    lines = [f"  ✓ {n}" for n in range(100)]
    lines[70] = "▶ parks ← parks"
    for budget in (5, 12, 50, 200, 2000):
        fitted = fit_lines(lines, budget)
        if budget >= 50:  # room for the marked line and a note on each side of it
            assert sum(utf16_len(x) + 1 for x in fitted) <= budget
            assert "▶ parks ← parks" in fitted and fitted[0] == "  ✓ 0"
        else:  # no room for anything: the note alone says what is left out
            assert fitted == ["  … 100 more"]
    assert fit_lines(lines, 10**6) == lines


# --------------------------------------------------------------------------------------------
# Telegram
# --------------------------------------------------------------------------------------------


def test_telegram_shows_the_commands_one_per_line() -> None:
    html = card_html(card(compound()))
    text, _ = parse_html(html, strict_ampersand=True)
    assert SECRET not in html and SECRET not in text
    assert "Commands:\n  ✓ git status\n▶ curl -H" in text
    assert f'Bearer {MASK}" https://api.example/v1 ← parks\n  ✓ rm -rf build\n⚠ cannot' in text
    assert "<b>Commands:</b>\n" in html
    assert '"outcome"' not in text


def test_telegram_escapes_a_command() -> None:
    profile = {"commands": [row("echo '<b>x</b>' && ls"), row("cat a & b", "parked", marked=True)]}
    html = card_html(card(profile))
    text, _ = parse_html(html, strict_ampersand=True)
    assert "  ✓ echo '<b>x</b>' && ls\n▶ cat a & b ← parks" in text


def test_telegram_fits_200_commands() -> None:
    commands = [row(f"cmd{n} --flag " + "v" * 150) for n in range(200)]
    commands[199] = row("rm -rf / " + "z" * 300, "parked", marked=True)
    profile = {"commands": commands, "unseen": [f"reason {n}" for n in range(20)]}
    html = card_html(card(profile, command=" && ".join(c["text"] for c in commands)))
    text, _ = parse_html(html, strict_ampersand=True)
    assert visible_length(html) <= 4096 and utf16_len(text.strip()) <= 4096
    assert "▶ rm -rf / zzz" in text and "← parks" in text
    assert "Why:" in text and "Full view" in text


# --------------------------------------------------------------------------------------------
# Slack
# --------------------------------------------------------------------------------------------


def commands_block(blocks: list[dict[str, Any]]) -> str:
    return str(next(b for b in blocks if b["block_id"] == "commands")["text"]["text"])


def test_slack_shows_the_commands_one_per_line_in_a_code_block() -> None:
    text, blocks = decision_blocks(card(compound()), IDS)
    assert_fits_slack(text, blocks)
    check_blocks(blocks)
    shown = commands_block(blocks)
    assert shown.startswith("*Commands:*\n```\n  ✓ git status\n▶ curl -H")
    assert shown.endswith("← parks\n  ✓ rm -rf build\n⚠ cannot be seen through: pipes into sh\n```")
    assert all(SECRET not in s for s in (text, repr(blocks)))
    ids = [b["block_id"] for b in blocks]
    assert ids.index("call") < ids.index("commands") < ids.index("fields")
    fields = next(b for b in blocks if b["block_id"] == "fields")["text"]["text"]
    assert "*Why:*" in fields and "Commands" not in fields and "outcome" not in fields


def test_slack_escapes_a_command_and_keeps_the_fence_closed() -> None:
    profile = {"commands": [row("echo <!channel> ```x``` & *y*"), row("ls", "parked", marked=True)]}
    text, blocks = decision_blocks(card(profile), IDS)
    assert_fits_slack(text, blocks)
    shown = commands_block(blocks)
    assert "&lt;!channel&gt;" in shown and "<!channel>" not in shown
    assert shown.count("```") == 2  # the command's backticks are broken up


def test_slack_fits_200_commands() -> None:
    commands = [row(f"cmd{n} && " + "&" * 290) for n in range(200)]
    commands[180] = row("rm -rf /srv", "failed", marked=True)
    profile = {"commands": commands, "unseen": ["pipes into sh", "writes to out.txt"]}
    text, blocks = decision_blocks(card(profile), IDS)
    assert_fits_slack(text, blocks)
    check_blocks(blocks)
    shown = commands_block(blocks)
    assert "▶ rm -rf /srv ← refused" in shown and "more\n" in shown
    assert "pipes into sh" in shown and "writes to out.txt" in shown


def test_slack_a_single_command_has_no_commands_block() -> None:
    _, blocks = decision_blocks(card({"commands": [row("make")]}, command="make"), IDS)
    assert "commands" not in [b["block_id"] for b in blocks]


# --------------------------------------------------------------------------------------------
# The web page
# --------------------------------------------------------------------------------------------


def test_the_page_lists_the_commands_and_marks_the_one_that_parked() -> None:
    shown = web.masked(task(compound()))
    view = web.profile_view(shown.effect_profile)
    assert [c.text for c in view.commands] == [
        "git status",
        f'curl -H "Authorization: Bearer {MASK}" https://api.example/v1',
        "timeout 5 rm -rf build",
        "rm -rf build",
    ]
    assert [c.note for c in view.commands] == ["", "parks here", "", ""]
    assert view.unseen == ["pipes into sh"]
    assert view.other == []
    html = make_env().get_template("_macros.html").module.badges(view)  # type: ignore[attr-defined]
    assert SECRET not in html
    items = re.findall(r"<li class=\"command[^\"]*\">.*?</li>", str(html), re.S)
    assert len(items) == 4
    assert "git status" in items[0] and "rm -rf build" in items[3]
    assert 'class="command outcome-parked marked"' in items[1]
    assert "▶ parks here:" in items[1] and "Bearer ****" in items[1]
    assert "wrapper" in items[2] and "judged for denies only" in items[2]
    assert "⚠ cannot be seen through: pipes into sh" in str(html)


def test_the_page_says_refused_and_skips_a_single_command() -> None:
    view = web.profile_view({"commands": [row("ls"), row("rm -rf ~", "failed", marked=True)]})
    assert [c.note for c in view.commands] == ["", "refused here"]
    html = str(make_env().get_template("_macros.html").module.badges(view))  # type: ignore[attr-defined]
    assert "refused here" in html and "&lt;" not in html.split("commands")[0]
    single = web.profile_view({"commands": [row("make")], "cost": 2})
    assert single.commands == [] and single.unseen == [] and single.other == [("cost", "2")]
    odd = web.profile_view({"commands": "rm -rf /"})
    assert odd.commands == [] and odd.other == [("commands", "rm -rf /")]


def test_revealed_the_page_shows_the_command_as_stored() -> None:
    view = web.profile_view(task(compound()).effect_profile)
    assert view.commands[1].text == CURL  # the page masks the task first unless revealed


# --------------------------------------------------------------------------------------------
# The CLI
# --------------------------------------------------------------------------------------------


def ask_out(profile: dict[str, Any], command: str = "git status && curl … | sh") -> m.AskOut:
    return m.AskOut(
        key="k1",
        run_id="run_1",
        kind="tool_call",
        origin="model",
        tool_name="bash",
        tool="bash",
        tool_input={"command": command},
        state="needs_approval",
        error=None,
        effect_profile=profile,
        deadline=datetime.now(UTC) + timedelta(hours=2),
        resolved_by=None,
        via=None,
        resolution=None,
        why="`curl …` parks: no rule decides it",
        created_at=NOW,
        run_title="ci",
    )


def test_asks_show_prints_the_commands_one_per_line() -> None:
    lines = detail_lines(ask_out(compound(), f"git status && {CURL} | sh"))
    assert lines[0] == f"{short_id('run_1', 'k1')}  approval  bash"
    assert "why: `curl …` parks: no rule decides it" in lines
    start = lines.index("commands:")
    assert lines[start + 1 :] == [
        "    ✓ git status",
        f'  ▶ curl -H "Authorization: Bearer {MASK}" https://api.example/v1 ← parks',
        "    ✓ rm -rf build",
        "  ⚠ cannot be seen through: pipes into sh",
    ]
    assert not any(SECRET in line for line in lines)
    assert "effects: executes" in lines


def test_asks_show_of_a_single_command_has_no_commands_list() -> None:
    lines = detail_lines(ask_out({"commands": [row("make")]}, "make"))
    assert "commands:" not in lines and "call:" in lines and "  make" in lines


server, api = fixtures(backends=["sqlite"])


@pytest.mark.asyncio(loop_scope="module")
async def test_asks_show_end_to_end(api: Served) -> None:
    """A run that sees through `bash`'s command: `git status` is allowed, `rm -rf build` is
    not, so the line parks on it; `asks show` lists both, the second marked."""
    service = api.core.service
    agent = await api.core.admin.authenticate(api.token("agent"))
    assert agent is not None
    spec = RunSpec(
        approval_mode="ask",
        approval_rules=[{"tool": "bash", "path": "command", "match": "git *", "verdict": "allow"}],
        shell_commands=[{"tool": "bash", "path": "command"}],
    )
    made = await service.declare_run(agent, api.ws, spec)
    line = f"git status && rm -rf build && {CURL}"
    await service.append(agent, api.ws, made.id, CallSpec("bash", {"command": line}, key="k1"))
    env = {"APPROVALBOT_URL": api.url, "APPROVALBOT_TOKEN": api.token("alice")}
    env |= {"APPROVALBOT_WORKSPACE": api.ws}
    sid = short_id(made.id, "k1")
    result = await asyncio.to_thread(CliRunner().invoke, main, ["asks", "show", sid], env=env)
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert "commands:" in out, result.output
    listed = out[out.index("commands:") + 1 :]
    assert listed[0] == "    ✓ git status"
    assert listed[1] == "  ▶ rm -rf build ← parks"
    assert listed[2].startswith("    · curl -H") and MASK in listed[2]
    assert SECRET not in result.output
