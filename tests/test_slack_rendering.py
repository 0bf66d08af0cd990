"""Cards to Slack Block Kit, without a network: exact labels, escaping, Slack's size limits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.slack.format import (
    CHOICES_BLOCK_PREFIX,
    decision_blocks,
    digest_blocks,
    escape,
    outcome_line,
    selected_options,
    thread_parent,
)
from bot.domain import Run, Task
from bot.masking import utf16_len
from bot.rendering import ACTIONS, Action, Button, Card, Field, render_decision, render_ending

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
URL = "https://x.example/decisions/run_1/k1"
EVIL = "<!channel> <!here> <@U123> <#C1> <https://evil.example|click> <!subteam^S1> & @here"
PINGS = ("<!", "<@", "<#", "<http")

IDS: dict[tuple[str, int | None], str] = {
    (action, option): f"cb_{action}_{option}"
    for action in ACTIONS
    for option in (None, *range(400))
}


def run(title: str = "ci", reason: str = "shell & co") -> Run:
    rules: list[dict[str, Any]] = [{"tool": "bash", "verdict": "ask", "reason": reason}]
    return Run("run_1", "acme", "app_1", "running", "rules", rules, None, {}, NOW, title=title)


def task(tool_input: Any, tool: str = "bash", **kw: Any) -> Task:
    values: dict[str, Any] = {
        "id": "task_1",
        "run_id": "run_1",
        "workspace_id": "acme",
        "key": "k1",
        "kind": "tool_call",
        "origin": "model",
        "tool_name": tool,
        "tool": tool,
        "tool_input": tool_input,
        "state": "needs_approval",
        "created_at": NOW,
        "deadline": NOW + timedelta(hours=24),
        "why": "rule 0 (ask) matches bash",
        "rule_index": 0,
        "appended_by": "agent",
    }
    values.update(kw)
    return Task(**values)


def question(prompt: str, options: list[str] | None = None, **kw: Any) -> Task:
    tool_input: dict[str, Any] = {"prompt": prompt}
    if options is not None:
        tool_input["options"] = options
    if kw.pop("multi", False):
        tool_input["multi"] = True
    kw.setdefault("state", "awaiting_input")
    return task(tool_input, tool="ask", kind="ask", **kw)


def render(t: Task, r: Run | None = None, **kw: Any) -> tuple[str, list[dict[str, Any]]]:
    return decision_blocks(render_decision(t, r or run(), NOW, URL, **kw), IDS)


# --------------------------------------------------------------------------------------------
# Checkers
# --------------------------------------------------------------------------------------------


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def assert_no_pings(text: str, blocks: list[dict[str, Any]], ours: tuple[str, ...] = ()) -> None:
    """Nothing that Slack would parse as a mention or a link, but for our own markup."""
    for s in [text, *strings(blocks)]:
        for own in (f"<{URL}|Full view>", *ours):
            s = s.replace(own, "")
        for ping in PINGS:
            assert ping not in s, (ping, s)


def text_ok(obj: dict[str, Any], limit: int, kind: str | None = None) -> None:
    assert obj["type"] in ("plain_text", "mrkdwn")
    if kind:
        assert obj["type"] == kind
    if obj["type"] == "mrkdwn":
        assert obj.get("verbatim") is True
    assert obj["text"].strip(), obj
    assert utf16_len(obj["text"]) <= limit, (utf16_len(obj["text"]), obj["text"][:200])


def assert_fits_slack(text: str, blocks: list[dict[str, Any]]) -> None:
    assert text.strip() and utf16_len(text) <= 3000
    assert 0 < len(blocks) <= 50
    block_ids = [b["block_id"] for b in blocks]
    assert len(set(block_ids)) == len(block_ids)
    for block in blocks:
        assert 0 < len(block["block_id"]) <= 255
        kind = block["type"]
        if kind == "header":
            text_ok(block["text"], 150, "plain_text")
        elif kind == "section":
            text_ok(block["text"], 3000)
        elif kind == "context":
            assert 0 < len(block["elements"]) <= 10
            for element in block["elements"]:
                text_ok(element, 3000)
        elif kind == "actions":
            elements = block["elements"]
            assert 0 < len(elements) <= 25
            action_ids = [e["action_id"] for e in elements]
            assert len(set(action_ids)) == len(action_ids)
            for element in elements:
                assert 0 < len(element["action_id"]) <= 255
                if element["type"] == "button":
                    text_ok(element["text"], 75, "plain_text")
                    assert 0 < len(element["value"]) <= 2000
                else:
                    assert element["type"] == "checkboxes"
                    assert 0 < len(element["options"]) <= 10
                    for option in element["options"]:
                        text_ok(option["text"], 75)
                        assert 0 < len(option["value"]) <= 150
                    for option in element.get("initial_options", []):
                        assert option in element["options"]
        else:
            raise AssertionError(f"unexpected block {kind}")
    json.dumps(blocks)  # plain JSON, nothing else


def actions(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in blocks if b["type"] == "actions"]


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in actions(blocks) for e in b["elements"] if e["type"] == "button"]


def labels(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["text"]["text"] for e in buttons(blocks)]


def block(blocks: list[dict[str, Any]], block_id: str) -> dict[str, Any]:
    return next(b for b in blocks if b["block_id"] == block_id)


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


def test_escape() -> None:
    assert escape("<!channel> & <@U1> a>b") == "&lt;!channel&gt; &amp; &lt;@U1&gt; a&gt;b"
    assert escape("&amp;") == "&amp;amp;"  # as written, not as decoded
    assert escape("plain *text* @here") == "plain *text* @here"


def test_button_texts_are_exact() -> None:
    _, blocks = render(task({"command": "make deploy"}))
    assert labels(blocks) == [
        "Approve", "Deny", "Deny with reason", "Edit & approve", "Approve & allow like this"
    ]  # fmt: skip
    assert [b.get("style") for b in buttons(blocks)] == ["primary", "danger", None, None, None]
    for element in buttons(blocks):
        assert element["action_id"] == element["value"]
    assert [e["value"] for e in buttons(blocks)] == [
        "cb_approve_None",
        "cb_deny_None",
        "cb_deny_reason_None",
        "cb_edit_None",
        "cb_allow_None",
    ]

    _, blocks = render(question("Which?", ["red", "green", "x" * 200]))
    assert labels(blocks)[:2] == ["red", "green"] and labels(blocks)[3] == "Decline"
    assert labels(blocks)[2].startswith("xxx") and utf16_len(labels(blocks)[2]) <= 75
    assert [e["value"] for e in buttons(blocks)] == [
        "cb_option_0",
        "cb_option_1",
        "cb_option_2",
        "cb_decline_None",
    ]

    _, blocks = render(question("Your name?"))
    assert labels(blocks) == ["Answer", "Decline"]

    _, blocks = render(question("Which?", ["a", "b"], multi=True))
    assert labels(blocks) == ["Submit", "Decline"]
    assert buttons(blocks)[0]["style"] == "primary"
    assert "style" not in buttons(blocks)[1]


def test_card_content() -> None:
    text, blocks = render(task({"command": "make deploy", "timeout": 30}))
    assert block(blocks, "header")["text"]["text"] == "🛂 Approve bash?"
    context = [e["text"] for e in block(blocks, "context")["elements"]]
    assert context == ["Run *ci*", "Run id *run_1*", "Agent *agent*"]
    assert block(blocks, "call")["text"]["text"] == "```\nmake deploy\n```"
    fields = block(blocks, "fields")["text"]["text"]
    assert "*timeout:* 30" in fields and "matches bash — shell &amp; co" in fields
    meta = [e["text"] for e in block(blocks, "meta")["elements"]]
    assert meta == ["⏳ expires in 1 d", f"🔗 <{URL}|Full view>"]
    assert text.startswith("🛂 Approve bash?") and "make deploy" in text
    assert [b["type"] for b in blocks][:2] == ["header", "context"]

    _, blocks = render(
        task(
            {"command": "x"},
            effect_profile={"summary": "wipes it", "effects": ["fs.write", "a`b"], "risk": "high"},
        )
    )
    assert block(blocks, "summary")["text"]["text"] == (
        "📋 wipes it\n🏷 `fs.write` `aˋb` `risk: high`"
    )

    edit = task({"file_path": "a.py", "old_string": "a\nb\n", "new_string": "a\nc\n"}, "Edit")
    call = block(render(edit)[1], "call")["text"]["text"]
    assert call.startswith("```\n") and "-b\n+c" in call and call.endswith("\n```")


def test_code_fences_in_the_command_cannot_close_the_block() -> None:
    _, blocks = render(task({"command": "echo ```*bold* <!channel>```; ls"}))
    call = block(blocks, "call")["text"]["text"]
    assert call.count("```") == 2 and call.startswith("```\n") and call.endswith("\n```")
    assert "&lt;!channel&gt;" in call


def adversarial_cases() -> list[tuple[str, Task, Run]]:
    evil_run = run(title=EVIL * 20, reason=EVIL * 50)
    huge = {
        "command": "<!channel>&amp;<b>😀" * 3000,
        "description": EVIL * 100,
        **{f"k{i}<@U1>": EVIL * 30 for i in range(30)},
    }
    profile = {
        "summary": EVIL * 40,
        "effects": [EVIL] * 300,
        "targets": [EVIL * 10] * 40,
        **{f"x{i}": EVIL * 20 for i in range(40)},
    }
    return [
        ("plain", task({"command": "rm -rf /tmp/x && echo '<done>'"}), run()),
        ("huge", task(huge, tool=EVIL * 10, effect_profile=profile), evil_run),
        (
            "diff",
            task({"file_path": "a.py", "old_string": "<x> = 1\n" * 3000, "new_string": "&"}),
            run(),
        ),
        ("emoji", task("😀" * 10000), run()),
        ("angles", task("<" * 10000, appended_by=EVIL * 50), evil_run),
        (
            "prompt",
            question(EVIL * 200, [EVIL * 8 for _ in range(40)], appended_by=EVIL),
            evil_run,
        ),
        (
            "multi",
            question("😀" * 10000, [f"{i} " + EVIL * 8 for i in range(40)], multi=True),
            run(),
        ),
        ("free", question("<" * 10000), run()),
        ("empty options", question("?", ["", " ", "<"]), run()),
        (
            "denied",
            task(
                {"command": EVIL},
                state="failed",
                error={"code": "approval_denied", "detail": EVIL * 200},
                resolved_by=EVIL * 10,
                via="slack",
                decided_at=NOW,
            ),
            evil_run,
        ),
        (
            "answered",
            question(
                EVIL,
                [EVIL],
                state="resolved",
                resolution={"content": [EVIL * 100, "😀" * 3000]},
                resolved_by="bob",
                via="slack",
                decided_at=NOW,
            ),
            evil_run,
        ),
    ]


@pytest.mark.parametrize(("t", "r"), [pytest.param(t, r, id=n) for n, t, r in adversarial_cases()])
def test_limits_and_escaping_under_adversarial_input(t: Task, r: Run) -> None:
    text, blocks = render(t, r)
    assert_fits_slack(text, blocks)
    assert_no_pings(text, blocks)
    assert f"<{URL}|Full view>" in json.dumps(blocks, ensure_ascii=False)


def test_too_many_options_are_cut_and_said() -> None:
    many = tuple(f"option {i} " + "😀" * 100 for i in range(2000))

    def card(multi: bool) -> Card:
        action: Action = "toggle" if multi else "option"
        rows: list[tuple[Button, ...]] = [(Button(o, action, i),) for i, o in enumerate(many)]
        rows.append((Button("✔️ Submit", "submit"), Button("🚫 Decline", "decline")))
        return Card(
            kind="question",
            icon="❓",
            title=EVIL * 10,
            context=tuple(Field(EVIL, EVIL * 100) for _ in range(30)),
            text=EVIL * 500,
            code=None,
            summary=EVIL * 100,
            badges=(EVIL,) * 500,
            fields=tuple(Field(EVIL * 10, EVIL * 100) for _ in range(100)),
            deadline="expires in 5 min",
            buttons=tuple(rows),
            outcome=None,
            link=URL,
            options=many,
        )

    ids: dict[tuple[str, int | None], str] = {**IDS}
    ids.update({("option", i): f"cb_option_{i}" for i in range(2000)})
    for multi in (False, True):
        text, blocks = decision_blocks(card(multi), ids)
        assert_fits_slack(text, blocks)
        assert_no_pings(text, blocks)
        assert len(blocks) == 50
        note = block(blocks, "not-shown")["elements"][0]["text"]
        assert "more options did not fit" in note
        assert labels(blocks)[-2:] == ["Submit", "Decline"]
        assert "more in the full view" in block(blocks, "fields")["text"]["text"]


def test_multi_select_renders_checkboxes() -> None:
    _, blocks = render(question("Pick", ["a", "b", "<!here>"], multi=True), chosen=frozenset({1}))
    choices = block(blocks, CHOICES_BLOCK_PREFIX)
    assert choices["type"] == "actions" and len(choices["elements"]) == 1
    element = choices["elements"][0]
    assert element["type"] == "checkboxes" and element["action_id"] == "cb_toggle_None"
    assert [o["value"] for o in element["options"]] == ["0", "1", "2"]
    assert [o["text"]["type"] for o in element["options"]] == ["plain_text"] * 3
    assert [o["value"] for o in element["initial_options"]] == ["1"]
    assert not any("☐" in label or "☑" in label for label in labels(blocks))
    state = {
        "choices": {"cb_toggle_None": {"type": "checkboxes", "selected_options": [{"value": "2"}]}},
        "buttons-0": {},
    }
    assert selected_options(state) == [2]

    _, blocks = render(question("Pick", [f"o{i}" for i in range(40)], multi=True))
    groups = [b for b in blocks if b["block_id"].startswith(CHOICES_BLOCK_PREFIX)]
    assert [b["block_id"] for b in groups] == [f"choices-{n}" for n in range(4)]
    values = [o["value"] for b in groups for o in b["elements"][0]["options"]]
    assert values == [str(i) for i in range(40)]
    ids = [b["elements"][0]["action_id"] for b in groups]  # unique within the message
    assert ids == [f"cb_toggle_None-{n}" for n in range(4)]
    state = {
        "choices-0": {"cb_toggle_None": {"selected_options": [{"value": "3"}]}},
        "choices-3": {"cb_toggle_None": {"selected_options": [{"value": "39"}, {"value": "x"}]}},
        "other": {"a": {"selected_options": [{"value": "7"}]}},
    }
    assert selected_options(state) == [3, 39]


def test_ended_cards_show_the_outcome_and_no_buttons() -> None:
    denied = task(
        {"command": "x"},
        state="failed",
        error={"code": "approval_denied", "detail": "too risky <!channel>"},
        resolved_by="alice",
        via="slack",
        decided_at=NOW,
    )
    text, blocks = render(denied)
    assert not actions(blocks)
    outcome = block(blocks, "outcome")["text"]["text"]
    assert outcome == (
        "*❌ Denied by alice* · via slack · 2026-01-01 12:00 UTC\n"
        "Reason: _too risky &lt;!channel&gt;_"
    )
    assert block(blocks, "header")["text"]["text"] == "🛂 bash"
    assert "⏳" not in json.dumps(blocks, ensure_ascii=False)
    assert "Denied by alice" in text

    answered = question(
        "Name?",
        state="resolved",
        resolution={"content": "bob & co"},
        resolved_by="carol",
        via="web",
        decided_at=NOW,
    )
    _, blocks = render(answered)
    assert not actions(blocks)
    assert "Answer: _bob &amp; co_" in block(blocks, "outcome")["text"]["text"]

    outcome_obj = render_ending(answered)
    assert outcome_obj is not None
    assert outcome_line(outcome_obj).startswith("*💬 Answered by carol* · via web")


def test_long_input_is_cut_head_and_tail() -> None:
    command = "HEAD " + "x" * 20000 + " TAIL"
    text, blocks = render(task({"command": command}))
    call = block(blocks, "call")["text"]["text"]
    assert utf16_len(call) <= 3000
    assert call.startswith("```\nHEAD ") and call.endswith(" TAIL\n```")
    assert "characters cut (see the full view) …" in call
    assert utf16_len(text) <= 3000

    _, blocks = render(task({"command": "<&>" * 5000}))  # escaping quadruples it
    call = block(blocks, "call")["text"]["text"]
    assert 2500 <= utf16_len(call) <= 3000 and "characters cut" in call
    assert call.startswith("```\n&lt;&amp;&gt;") and call.endswith("&lt;&amp;&gt;\n```")

    _, blocks = render(question("Q: " + "why? " * 2000 + "END"))
    prompt = block(blocks, "prompt")["text"]["text"]
    assert utf16_len(prompt) <= 3000 and prompt.startswith("Q: why?")
    assert prompt.endswith("END") and "characters cut (see the full view)" in prompt


def test_thread_parent() -> None:
    text, blocks = thread_parent("deploy <!channel>", "claude <@U1>", 3, "https://x.example/runs/1")
    assert text == "deploy &lt;!channel&gt; · claude &lt;@U1&gt; · 3 waiting"
    assert blocks[0]["text"]["text"] == (
        "🏃 *deploy &lt;!channel&gt;* · claude &lt;@U1&gt; · 3 waiting"
        " · 🔗 <https://x.example/runs/1|Run page>"
    )
    assert_fits_slack(text, blocks)
    text, blocks = thread_parent(EVIL * 200, None, 0, "https://x.example/r|<evil>")
    assert_fits_slack(text, blocks)
    assert_no_pings(text, blocks, ours=("<https://x.example/revil|Run page>",))
    assert "@\u2060here" in text  # the notification text has no verbatim flag
    text, blocks = thread_parent("", None, 1, None)
    assert text == "Untitled run · 1 waiting" and "<" not in blocks[0]["text"]["text"]


def test_digest_page_fits() -> None:
    tasks = [
        task(
            {"command": "x"},
            id=f"t{i}",
            deadline=NOW + timedelta(minutes=5),
            effect_profile={"summary": f"echo {i} " + "x" * 300},
        )
        for i in range(50)
    ]
    ids = {(t.id, a): f"d_{t.id}_{a}" for t in tasks for a in ("approve", "deny", "expand")}
    text, blocks = digest_blocks(tasks, NOW, "https://x.example/inbox", ids, done=False)
    assert_fits_slack(text, blocks)
    assert text == "📥 50 decisions waiting"
    page = json.dumps(blocks, ensure_ascii=False)
    assert "(5 min left)" in page and "<https://x.example/inbox|inbox>" in page
    assert len(actions(blocks)) == 8
    assert labels(blocks)[:3] == ["Approve", "Deny", "Show"]
    assert [e["value"] for e in buttons(blocks)[:3]] == ["d_t0_approve", "d_t0_deny", "d_t0_expand"]
    assert block(blocks, "item-1")["text"]["text"].startswith("1. ⏰ echo 0 ")
    assert "50. ⏰ echo 49" in page

    text, blocks = digest_blocks(tasks, NOW, "https://x.example/inbox", ids, done=True)
    assert not actions(blocks)


def test_digest_under_adversarial_input() -> None:
    tasks: list[Task] = []
    for i in range(1500):
        if i % 3 == 0:
            t = question(EVIL * 20, [EVIL], id=f"t{i}")
        elif i % 3 == 1:
            t = task({"command": EVIL * 20}, id=f"t{i}", effect_profile={"summary": EVIL * 20})
        else:
            t = task(
                {"command": "x"},
                id=f"t{i}",
                state="granted",
                resolved_by=EVIL,
                via="slack",
                decided_at=NOW,
            )
        tasks.append(t)
    ids = {(t.id, a): f"d_{t.id}_{a}" for t in tasks for a in ("approve", "deny", "expand")}
    text, blocks = digest_blocks(tasks, NOW, "https://x.example/inbox", ids, done=False)
    assert_fits_slack(text, blocks)
    assert_no_pings(text, blocks, ours=("<https://x.example/inbox|inbox>",))
    assert text == "📥 1000 decisions waiting · 500 settled"
    assert len(actions(blocks)) == 8
    assert labels(blocks)[0] == "Show"  # the first one is a question
    assert labels(blocks)[1:4] == ["Approve", "Deny", "Show"]
    assert "more in the" in block(blocks, "more")["elements"][0]["text"]
    assert "✅" in json.dumps(blocks, ensure_ascii=False)

    settled = [t for t in tasks if not t.parked][:5]
    text, blocks = digest_blocks(settled, NOW, "https://x.example/inbox", ids, done=True)
    assert text == "📥 All 5 decisions settled" and not actions(blocks)
    assert_fits_slack(text, blocks)
