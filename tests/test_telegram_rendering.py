"""Rendering, masking, Telegram's size limits and pacing, without a network."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.chat.buttons import button_id as callback_id
from adapters.chat.pacing import Limits, Pacer
from adapters.telegram.format import (
    MAX_CALLBACK_BYTES,
    card_html,
    digest_html,
    visible_length,
)
from adapters.telegram.platform import is_group
from bot.domain import Run, Task
from bot.masking import MASK, mask_text, mask_value, shorten, truncate_middle, utf16_len
from bot.rendering import ACTIONS, render_decision, render_ending
from tests.fakes.telegram_api import parse_html

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def run() -> Run:
    rules: list[dict[str, Any]] = [{"tool": "bash", "verdict": "ask", "reason": "shell & co"}]
    return Run("run_1", "acme", "app_1", "running", "rules", rules, None, {}, NOW, title="ci")


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


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuv", "abcdefghijklmnopqrstuv"),
        ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc'", "eyJzdWIi"),
        ("git clone https://ghp_abcdefghijklmnopqrstuvwxyz012345@github.com/x", "ghp_abcdef"),
        ("psql postgresql://admin:s3cr3t@db:5432/prod", "s3cr3t"),
        ("SLACK=xoxb-12345-67890-abcdefghijkl", "67890-abcdefghijkl"),
        ("aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
        ('{"password": "hunter2", "user": "bob"}', "hunter2"),
        ("mysql --password='correct horse' -u root", "correct horse"),
        ("login?user=bob&token=abc123def456&x=1", "abc123def456"),
        ("DB_PASSWORD=pa55 ./migrate", "pa55"),
        (
            "key: |\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
            "MIIEow",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk (cut off", "b3BlbnNzaC1rZXk"),
        ("bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0 here", "AAHdqTcvCH1v"),
        ("sk_live_abcdefghijklmnop", "abcdefghijklmnop"),
    ],
)
def test_secrets_are_masked(text: str, secret: str) -> None:
    masked = mask_text(text)
    assert secret not in masked and MASK in masked, masked


def test_masking_keeps_ordinary_text() -> None:
    for text in ("ls -la /tmp", "max_tokens=100", "git push origin main", "cp -pr a b"):
        assert mask_text(text) == text
    value = mask_value({"api_key": "x1", "nested": {"client_secret": 5}, "n": 1, "ok": "fine"})
    assert value == {"api_key": MASK, "nested": {"client_secret": MASK}, "n": 1, "ok": "fine"}


def test_truncate_middle_keeps_head_and_tail_within_the_limit() -> None:
    text = "HEAD" + "é😀x" * 5000 + "TAIL"
    cut = truncate_middle(text, 1000, "\n[{n} cut]\n")
    assert utf16_len(cut) <= 1000 and cut.startswith("HEAD") and cut.endswith("TAIL")
    assert "cut]" in cut
    assert truncate_middle("short", 10) == "short"
    assert shorten("a  b\nc " * 10, 8) == "a b c a…"


def huge_input() -> dict[str, Any]:
    return {
        "command": "<b>&amp;" * 5000,
        "description": "d" * 5000,
        **{f"k{i}": "v" * 1000 for i in range(30)},
    }


def test_cards_fit_telegram_and_parse_as_html() -> None:
    cases = [
        task({"command": "rm -rf /tmp/x && echo '<done>'"}),
        task(huge_input(), effect_profile={f"x{i}": "y" * 500 for i in range(40)}),
        task({"file_path": "a.py", "old_string": "x = 1\n" * 3000, "new_string": "x = 2\n"}),
        task("😀" * 5000),
        task(
            {"prompt": "Why? " * 3000, "options": [f"o{i}" * 20 for i in range(60)]},
            tool="ask",
            kind="ask",
            state="awaiting_input",
        ),
    ]
    for t in cases:
        card = render_decision(t, run(), NOW, "https://x.example/decisions/run_1/k1")
        html = card_html(card)
        text, _ = parse_html(html, strict_ampersand=True)
        assert utf16_len(text.strip()) <= 4096 and visible_length(html) <= 4096
        assert "https://x.example/decisions/run_1/k1" in html
        assert sum(len(row) for row in card.buttons) <= 100


def test_card_content() -> None:
    card = render_decision(task({"command": "make deploy", "timeout": 30}), run(), NOW, None)
    html = card_html(card)
    assert '<pre><code class="language-bash">make deploy</code></pre>' in html
    assert "rule 0 (ask) matches bash — shell &amp; co" in html
    assert "expires in 1 d" in html and "<b>timeout:</b> 30" in html
    edit = render_decision(
        task({"file_path": "app.py", "old_string": "a\nb\n", "new_string": "a\nc\n"}, "Edit"),
        run(),
        NOW,
        None,
    )
    assert edit.code is not None and edit.code.language == "diff"
    assert "-b\n+c" in edit.code.text and "b/app.py" in edit.code.text


def test_endings_read_like_people_talk() -> None:
    denied = task(
        {"command": "x"},
        state="failed",
        error={"code": "approval_denied", "detail": "too risky"},
        resolved_by="alice",
        via="telegram",
        decided_at=NOW,
    )
    outcome = render_ending(denied)
    assert outcome is not None
    assert outcome.headline == "❌ Denied by alice" and outcome.detail == "too risky"
    assert outcome.ago(NOW + timedelta(minutes=3)) == "denied by alice 3 min ago"
    assert render_ending(task({"command": "x"})) is None
    html = card_html(render_decision(denied, run(), NOW, None))
    assert html.startswith("<b>❌ Denied by alice</b> · via telegram · 2026-01-01 12:00 UTC")


def test_callback_ids_are_opaque_short_and_stable() -> None:
    ids = {
        callback_id("secret", "telegram", "-100200300", f"task_{i:016x}", action, option)
        for i in range(50)
        for action in ACTIONS
        for option in (None, 0, 99)
    }
    assert len(ids) == 50 * len(ACTIONS) * 3
    assert all(len(i.encode()) <= MAX_CALLBACK_BYTES and "task" not in i for i in ids)
    one = callback_id("s", "telegram", "-1", "t", "approve", None)
    assert one == callback_id("s", "telegram", "-1", "t", "approve", None)
    assert one != callback_id("other", "telegram", "-1", "t", "approve", None)
    assert one != callback_id("s", "slack", "-1", "t", "approve", None)  # per platform
    assert one != callback_id("s", "telegram", "-2", "t", "approve", None)  # per place


def test_digest_page_fits() -> None:
    tasks = [
        task({"command": f"echo {i} " + "x" * 300}, id=f"t{i}", deadline=NOW + timedelta(minutes=5))
        for i in range(50)
    ]
    html, with_buttons = digest_html(tasks, NOW, "https://x.example/inbox")
    assert visible_length(html) <= 4096
    parse_html(html, strict_ampersand=True)
    assert "50 decisions waiting" in html and "(5 min left)" in html
    assert len(with_buttons) == 8 and with_buttons[0][0] == 1


class FakeTelegramLimits:
    """The fake server's rules (token bucket 3 @ 1/s per chat, 20 per sliding minute per
    group), to check the pacer's bookings against."""

    def __init__(self) -> None:
        self.tokens: dict[str, tuple[float, float]] = {}
        self.window: dict[str, list[float]] = {}

    def accept(self, chat: str, t: float) -> bool:
        tokens, last = self.tokens.get(chat, (3.0, t))
        tokens = min(3.0, tokens + (t - last))
        recent = [x for x in self.window.get(chat, []) if t - x < 60.0]
        if tokens < 1.0 or (is_group(chat) and len(recent) >= 20):
            return False
        self.tokens[chat] = (tokens - 1.0, t)
        self.window[chat] = [*recent, t]
        return True


def test_pacer_bookings_never_hit_the_limits() -> None:
    now = [0.0]
    pacer = Pacer(Limits(), clock=lambda: now[0], windowed=is_group)
    server = FakeTelegramLimits()
    group, person = "-100", "42"
    times: list[float] = []
    for i in range(120):
        chat = group if i % 3 else person
        delay = pacer.reserve(chat)
        assert server.accept(chat, now[0] + delay + 0.05), i  # arriving a little late is fine
        times.append(now[0] + delay)
        now[0] += 0.01
    group_times = [t for i, t in enumerate(times) if i % 3]
    assert max(group_times) > 180  # 80 group messages take four minutes, as they must
    assert pacer.estimate(group) > 0
    with pytest.raises(Exception, match="next slot"):
        pacer.reserve(group, max_wait=1.0)
    pacer.penalise(person, 30)
    assert pacer.estimate(person) >= 29
