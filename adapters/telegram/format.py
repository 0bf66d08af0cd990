"""Cards to Telegram: HTML parse mode, inline keyboards, Telegram's size limits.

Everything from the call is escaped with `html.escape` (PTB has no HTML helper). Telegram counts
the 4096-character limit on the text people see (after entity parsing, in UTF-16 units), so the
budget is measured on the visible text and the largest piece (the command, the diff, the
question's prompt) is cut head-and-tail to fit, pointing at the full view on the web page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.domain import Task
from bot.durations import format_duration
from bot.masking import shorten, truncate_middle, utf16_len
from bot.rendering import (
    Button,
    Card,
    Field,
    Outcome,
    cut_line,
    digest_line,
    fit_lines,
    render_ending,
)

MAX_TEXT = 4096
MAX_CALLBACK_BYTES = 64
_SLACK = 24  # room for trimming differences and the cut marker's digits
_TAG = re.compile(r"<[^>]*>")
_FIELD_LINES = 1500  # a field of several lines (a shell line's commands), visible characters

ButtonKey = tuple[str, int | None]


def esc(text: str) -> str:
    return html.escape(text, quote=False)


def visible_length(markup: str) -> int:
    """What Telegram counts: tags removed, entities decoded, whitespace trimmed, UTF-16."""
    return utf16_len(html.unescape(_TAG.sub("", markup)).strip())


def keyboard(
    rows: Sequence[Sequence[Button]], ids: Mapping[ButtonKey, str]
) -> InlineKeyboardMarkup | None:
    if not rows:
        return None
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(b.label, callback_data=ids[(b.action, b.option)]) for b in row]
            for row in rows
        ]
    )


def when(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if at else ""


def outcome_html(outcome: Outcome) -> str:
    line = f"<b>{esc(outcome.headline)}</b>"
    extras = [x for x in (f"via {outcome.via}" if outcome.via else "", when(outcome.at)) if x]
    if extras:
        line += " · " + esc(" · ".join(extras))
    if outcome.detail:
        label = {"answered": "Answer", "denied": "Reason"}.get(outcome.word, "")
        text = esc(shorten(outcome.detail, 600))
        line += "\n" + (f"{label}: <i>{text}</i>" if label else f"<i>{text}</i>")
    return line


def field_html(f: Field) -> str:
    """A field in one line; a field of several lines (a shell line's Commands) as its label
    and one line each, within `_FIELD_LINES` visible characters."""
    if "\n" not in f.value:
        return f"<b>{esc(f.label)}:</b> {esc(shorten(f.value, 400))}"
    lines = fit_lines([cut_line(line, 300) for line in f.value.split("\n")], _FIELD_LINES)
    return f"<b>{esc(f.label)}:</b>\n" + "\n".join(esc(line) for line in lines)


def card_html(card: Card) -> str:
    """The card as Telegram HTML, within 4096 visible characters."""
    head: list[str] = []
    if card.outcome is not None:
        head.append(outcome_html(card.outcome))
    head.append(f"{card.icon} <b>{esc(card.title)}</b>")
    head.append(" · ".join(f"{esc(f.label)} <b>{esc(f.value)}</b>" for f in card.context))
    tail: list[str] = []
    if card.summary:
        tail.append(f"📋 {esc(card.summary)}")
    if card.badges:
        tail.append("🏷 " + " ".join(f"<code>{esc(b)}</code>" for b in card.badges))
    if card.progress:
        tail.append(f"👥 {esc(shorten(card.progress, 400))}")
    fields = list(card.fields[:12])
    tail.extend(field_html(f) for f in fields)
    if card.deadline:
        tail.append(f"⏳ {esc(card.deadline)}")
    if card.link:
        tail.append(f'🔗 <a href="{html.escape(card.link, quote=True)}">Full view</a>')

    def assemble(body: str) -> str:
        return "\n".join([*head, *([body] if body else []), *tail])

    raw, wrap = "", ("", "")
    if card.code is not None and card.code.text:
        lang = f' class="language-{esc(card.code.language)}"' if card.code.language else ""
        raw, wrap = card.code.text, (f"<pre><code{lang}>", "</code></pre>")
    elif card.text:
        raw = card.text
    marker = "\n… {n} characters cut (see the full view) …\n"
    budget = MAX_TEXT - _SLACK - visible_length(assemble(""))
    if budget < 200 and fields:  # pathological profiles: keep the call, drop the extras
        tail = [t for t in tail if not t.startswith("<b>")]
        budget = MAX_TEXT - _SLACK - visible_length(assemble(""))
    body = truncate_middle(raw, max(budget, 0), marker) if raw else ""
    return assemble(wrap[0] + esc(body) + wrap[1] if body else "")


# --------------------------------------------------------------------------------------------
# Digests
# --------------------------------------------------------------------------------------------

DIGEST_BUTTON_ROWS = 8
_LINE = 52


def digest_html(
    tasks: Sequence[Task], now: datetime, inbox_url: str, *, done: bool = False
) -> tuple[str, list[tuple[int, Task]]]:
    """A digest page: one line per decision (numbered within the page). Returns the HTML and
    the (number, task) pairs that get buttons: the first few still waiting."""
    waiting = [t for t in tasks if t.parked]
    settled = len(tasks) - len(waiting)
    if waiting:
        title = f"📥 <b>{len(waiting)} decisions waiting</b>"
        title += f" · {settled} settled" if settled else ""
    else:
        title = f"📥 <b>All {len(tasks)} decisions settled</b>"
    lines = [
        title,
        "Too many at once to post one by one: decide here, press 🔎 for the details, or open "
        f'the <a href="{html.escape(inbox_url, quote=True)}">inbox</a>.',
        "",
    ]
    with_buttons: list[tuple[int, Task]] = []
    for number, task in enumerate(tasks, start=1):
        outcome = render_ending(task)
        if outcome is None:
            left = (task.deadline - now) if task.deadline else None
            soon = f" ({format_duration(left)} left)" if left and left < timedelta(hours=1) else ""
            icon = "⏰" if soon else "⏳"
            text = shorten(digest_line(task), _LINE) + soon
            if len(with_buttons) < DIGEST_BUTTON_ROWS:
                with_buttons.append((number, task))
        else:
            icon = outcome.icon
            who = f" by {outcome.who}" if outcome.who else ""
            text = (
                shorten(digest_line(task), _LINE - 24) + " " + shorten(f"— {outcome.word}{who}", 30)
            )
        lines.append(f"{number}. {icon} {esc(text)}")
    body = "\n".join(lines)
    while visible_length(body) > MAX_TEXT - _SLACK and len(lines) > 4:
        lines.pop()
        body = "\n".join([*lines, "…"])
    return body, ([] if done else with_buttons)


def digest_buttons(
    numbered: Sequence[tuple[int, Task]], ids: Mapping[tuple[str, str, int | None], str]
) -> InlineKeyboardMarkup | None:
    rows: list[list[InlineKeyboardButton]] = []
    for number, task in numbered:
        row: list[InlineKeyboardButton] = []
        if task.kind == "tool_call":
            row.append(
                InlineKeyboardButton(f"✅ {number}", callback_data=ids[(task.id, "approve", None)])
            )
            row.append(
                InlineKeyboardButton(f"❌ {number}", callback_data=ids[(task.id, "deny", None)])
            )
        row.append(
            InlineKeyboardButton(f"🔎 {number}", callback_data=ids[(task.id, "expand", None)])
        )
        rows.append(row)
    return InlineKeyboardMarkup(rows) if rows else None
