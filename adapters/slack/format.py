"""Cards to Slack: Block Kit blocks (plain dicts), mrkdwn escaping, Slack's size limits.

Everything from a task or a run (tool names, inputs, prompts, options, reasons, titles, field
values) goes through `escape` before it lands in mrkdwn: Slack reads `&`, `<` and `>` as control
characters, so `<!channel>`, `<!here>`, `<@U123>`, `<#C1>` or `<https://x|y>` written by an agent
would otherwise ping a channel or disguise a link. Our own markup (the full-view link, the
mentions we build from user ids) is added after escaping. Every mrkdwn text object also sets
`verbatim: true`, so Slack does not auto-link URLs, channel names or bare `@here`-style words
in it either.

Slack checks its limits on the characters we send (after escaping), so text is escaped first
and measured after, in UTF-16 units (never fewer than Slack's count). The largest piece (the
command, the diff, the question's prompt) is cut head-and-tail to fit a section, pointing at the
full view on the web page.

Nothing here talks to Slack: the functions are pure, the adapter posts what they return.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from bot.domain import Task
from bot.durations import format_duration
from bot.masking import mask_text, shorten, truncate_middle, utf16_len
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

T = TypeVar("T")
Block = dict[str, Any]
ButtonKey = tuple[str, int | None]

# Slack's limits (https://docs.slack.dev/reference/block-kit).
MAX_BLOCKS = 50
MAX_TEXT = 3000  # a section's text; our fallback `text` too
MAX_CONTEXT_ELEMENTS = 10
MAX_HEADER = 150
MAX_BUTTON_TEXT = 75
MAX_VALUE = 2000
MAX_ID = 255  # action_id, block_id
MAX_ACTION_ELEMENTS = 25
MAX_CHECKBOX_OPTIONS = 10
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150

CHOICES_BLOCK_PREFIX = "choices"
"""Block id of a multi-select question's checkboxes: `choices` when one block holds them all
(at most `MAX_CHECKBOX_OPTIONS`), else `choices-0`, `choices-1`, … with the options in order.
Each holds one `checkboxes` element whose action_id is the id of ("toggle", None) and whose
option values are the options' indices ("0", "1", …, counted over the whole question). The
submit handler reads them all from `state.values` (see `selected_options`)."""

CUT_MARKER = "\n… {n} characters cut (see the full view) …\n"

_LABELS: dict[str, tuple[str, str | None]] = {
    "approve": ("Approve", "primary"),
    "deny": ("Deny", "danger"),
    "deny_reason": ("Deny with reason", None),
    "decline": ("Decline", None),
    "answer_text": ("Answer", None),
    "submit": ("Submit", "primary"),
    "expand": ("Show", None),
    "edit": ("Edit & approve", None),
    "allow": ("Approve & allow like this", None),
}
_FENCE_OPEN, _FENCE_CLOSE = "```\n", "\n```"
_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
_URL_UNSAFE = re.compile(r"[<>|\s]")


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def escape(text: str) -> str:
    """Slack mrkdwn escaping: the three control characters as entities, nothing else.

    This alone stops `<!channel>`, `<@U123>`, `<#C1>` and `<url|label>` from an agent. A bare
    `@channel`/`@here`/`@everyone` does not ping in what we post through the API (no
    `link_names`, no `parse=full`; mrkdwn objects are `verbatim`), so it is left as written in
    blocks; the fallback texts (notifications) get a word joiner anyway (`_defuse`)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _defuse(text: str) -> str:
    """Escaped, and bare broadcast words broken with a word joiner (invisible): for top-level
    message texts, which are not text objects and so have no `verbatim` flag."""
    return _BROADCAST.sub("@\u2060\\1", escape(text))


def _code_escape(text: str) -> str:
    """Escaped for a ``` block, with runs of backticks broken (zero-width space) so that a
    ``` in the command cannot close our block early."""
    return re.sub(r"`(?=`)", "`\u200b", escape(text))


def _plain_safe(text: str) -> str:
    """For plain_text objects, which Slack shows as is (no markup, no entities): a word joiner
    after each `<`, so that nothing that looks like Slack markup travels even there."""
    return text.replace("<", "<\u2060")


def _cut_middle(text: str, limit: int) -> str:
    return truncate_middle(text, limit, CUT_MARKER)


def _fit(
    text: str,
    limit: int,
    cut: Callable[[str, int], str] = shorten,
    esc: Callable[[str], str] = escape,
) -> str:
    """`text` cut by `cut` and escaped by `esc`, within `limit` UTF-16 units once escaped."""
    room = limit
    while room > 0:
        out = esc(cut(text, room))
        size = utf16_len(out)
        if size <= limit:
            return out
        room = min(room - 1, room * limit // size)
    return ""


def _plain(text: str, limit: int, fallback: str = "…") -> Block:
    """A plain_text object within `limit` (one line); never empty (Slack rejects that)."""
    fitted = _fit(text, limit, esc=_plain_safe)
    return {"type": "plain_text", "text": fitted if fitted.strip() else fallback, "emoji": True}


def _mrkdwn(text: str) -> Block:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _safe_url(url: str | None) -> str:
    """Our own URL, for `<url|label>`: anything that would end the link markup is removed."""
    if not url:
        return ""
    cleaned = _URL_UNSAFE.sub("", url)
    return cleaned if len(cleaned) <= 1500 else ""


def _link(url: str | None, label: str) -> str:
    safe = _safe_url(url)
    return f"<{safe}|{label}>" if safe else ""


def when(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if at else ""


# --------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------


def _header(block_id: str, text: str) -> Block:
    return {"type": "header", "block_id": block_id, "text": _plain(text, MAX_HEADER)}


def _section(block_id: str, text: str) -> Block:
    return {"type": "section", "block_id": block_id, "text": _mrkdwn(text)}


def _context(block_id: str, texts: Sequence[str]) -> Block:
    return {
        "type": "context",
        "block_id": block_id,
        "elements": [_mrkdwn(t) for t in texts[:MAX_CONTEXT_ELEMENTS]],
    }


def _id(ids: Mapping[Any, str], key: Any) -> str:
    value = ids[key]
    if not value or len(value) > min(MAX_ID, MAX_VALUE):  # it is the action_id and the value
        raise ValueError(f"the id for {key!r} must be 1 to {MAX_ID} characters")
    return value


def _button(text: str, action_id: str, style: str | None = None) -> Block:
    element: Block = {
        "type": "button",
        "text": _plain(text, MAX_BUTTON_TEXT),
        "action_id": action_id,
        "value": action_id,
    }
    if style:
        element["style"] = style
    return element


def _actions(block_id: str, elements: Sequence[Block]) -> Block:
    return {"type": "actions", "block_id": block_id, "elements": list(elements)}


def _chunks(items: Sequence[T], size: int) -> list[list[T]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _option_text(card: Card, index: int | None) -> str:
    text = card.options[index] if index is not None and 0 <= index < len(card.options) else ""
    return text if text.strip() else f"Option {(index or 0) + 1}"


# --------------------------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------------------------


def outcome_line(outcome: Outcome) -> str:
    """How a decision ended, in mrkdwn (escaped, under 3000 characters): "*✅ Approved by
    alice* · via slack · 2026-01-01 12:00 UTC" and the reason or the answer below."""
    line = f"*{_fit(outcome.headline, 300)}*"
    extras = [x for x in (f"via {outcome.via}" if outcome.via else "", when(outcome.at)) if x]
    if extras:
        line += " · " + _fit(" · ".join(extras), 200)
    if outcome.detail:
        label = {"answered": "Answer", "denied": "Reason"}.get(outcome.word, "")
        text = _fit(outcome.detail, 2000)
        line += "\n" + (f"{label}: _{text}_" if label else f"_{text}_")
    return line


def _fallback(card: Card) -> str:
    """The message's `text`: what notifications and screen readers get."""
    parts = [f"{card.icon} {card.title}"]
    if card.outcome is not None:
        parts.append(card.outcome.headline)
    gist = card.code.text if card.code is not None else card.text
    if gist.strip():
        parts.append(shorten(gist, 200))
    if card.context:
        parts.append(shorten(card.context[0].value, 120))
    return _fit(" · ".join(parts), MAX_TEXT, esc=_defuse)


def _summary(card: Card) -> str:
    lines: list[str] = []
    if card.summary:
        lines.append("📋 " + _fit(card.summary, 1000))
    if card.badges:
        shown: list[str] = []
        size = 0
        for badge in card.badges:
            span = f"`{_fit(badge.replace('`', 'ˋ'), 100)}`"
            if size + utf16_len(span) + 1 > 1800:
                break
            shown.append(span)
            size += utf16_len(span) + 1
        more = len(card.badges) - len(shown)
        lines.append("🏷 " + " ".join(shown) + (f" (+{more} more)" if more else ""))
    if card.progress:
        lines.append("👥 " + _fit(card.progress, 600))
    return "\n".join(lines)


def _multiline(card: Card) -> list[Field]:
    """Fields of several lines (a shell line's Commands): each a section of its own."""
    return [f for f in card.fields if "\n" in f.value]


def _lines_section(f: Field) -> str:
    """A field of several lines as its label over a ``` block, one line each: mrkdwn stays
    off inside it (a `*` in a command is not bold), the lines keep their indent, and the
    marked line survives the cut (`fit_lines`), all within a section's 3000 characters."""
    label = f"*{_fit(f.label, 100)}:*\n"
    room = MAX_TEXT - utf16_len(label) - len(_FENCE_OPEN) - len(_FENCE_CLOSE) - 40
    lines = [_code_escape(cut_line(line, 300)) for line in f.value.split("\n")]
    return label + _FENCE_OPEN + "\n".join(fit_lines(lines, room)) + _FENCE_CLOSE


def _fields(card: Card) -> str:
    lines: list[str] = []
    size = 0
    single = [f for f in card.fields if "\n" not in f.value]
    for number, f in enumerate(single):
        line = f"*{_fit(f.label, 100)}:* {_fit(f.value, 400)}"
        if size + utf16_len(line) + 1 > MAX_TEXT - 80:
            lines.append(f"… {len(single) - number} more in the full view")
            break
        lines.append(line)
        size += utf16_len(line) + 1
    return "\n".join(lines)


def _content_blocks(card: Card) -> list[Block]:
    blocks = [_header("header", f"{card.icon} {card.title}")]
    context = [
        f"{_fit(f.label, 100)} *{_fit(f.value, 500)}*" if f.value.strip() else _fit(f.label, 100)
        for f in card.context
    ]
    if context:
        blocks.append(_context("context", context))
    if card.outcome is not None:
        blocks.append(_section("outcome", outcome_line(card.outcome)))
    if card.code is not None and card.code.text:
        room = MAX_TEXT - len(_FENCE_OPEN) - len(_FENCE_CLOSE)
        body = _fit(card.code.text, room, _cut_middle, _code_escape)
        if body:
            blocks.append(_section("call", _FENCE_OPEN + body + _FENCE_CLOSE))
    elif card.text.strip():
        blocks.append(_section("prompt", _fit(card.text, MAX_TEXT, _cut_middle)))
    for number, f in enumerate(_multiline(card)[:2]):  # (only Commands has several lines)
        slug = re.sub(r"[^a-z0-9]+", "-", f.label.lower()).strip("-")[:40] or "lines"
        blocks.append(_section(f"{slug}-{number}" if number else slug, _lines_section(f)))
    for block_id, text in (("summary", _summary(card)), ("fields", _fields(card))):
        if text.strip():
            blocks.append(_section(block_id, text))
    meta = []
    if card.deadline:
        meta.append("⏳ " + _fit(card.deadline, 200))
    link = _link(card.link, "Full view")
    if link:
        meta.append("🔗 " + link)
    if meta:
        blocks.append(_context("meta", meta))
    return blocks


def _control_button(button: Button, ids: Mapping[ButtonKey, str]) -> Block:
    text, style = _LABELS.get(button.action, (button.label, None))
    return _button(text, _id(ids, (button.action, button.option)), style)


def decision_blocks(card: Card, ids: Mapping[ButtonKey, str]) -> tuple[str, list[dict[str, Any]]]:
    """The card as a Slack message: the fallback `text` (for notifications) and its blocks.

    `ids` maps (action, option index) to the opaque id of that button, used as both its
    `action_id` and its `value`. A multi-select question gets checkboxes (see
    `CHOICES_BLOCK_PREFIX`) instead of toggle buttons. Within every Block Kit limit; options
    that do not fit in 50 blocks are left out, saying so."""
    blocks = _content_blocks(card)
    flat = [b for row in card.buttons for b in row]
    toggles = [b for b in flat if b.action == "toggle"]
    options = [b for b in flat if b.action == "option"]
    controls = [_control_button(b, ids) for b in flat if b.action not in ("toggle", "option")]
    control_blocks = _chunks(controls, MAX_ACTION_ELEMENTS)
    room = MAX_BLOCKS - len(blocks) - len(control_blocks) - 1  # 1: the "not shown" note
    choice_blocks: list[Block] = []
    left_out = 0
    if toggles:
        toggle_id = _id(ids, ("toggle", None))
        groups = _chunks(toggles, MAX_CHECKBOX_OPTIONS)[: max(room, 0)]
        left_out = len(toggles) - sum(len(g) for g in groups)
        for n, group in enumerate(groups):
            choices = [
                {
                    "text": _plain(_option_text(card, b.option), MAX_OPTION_TEXT),
                    "value": str(b.option)[:MAX_OPTION_VALUE],
                }
                for b in group
            ]
            # action ids are unique within a message: one per group of ten (ticking answers
            # nothing, so only Submit's id is looked up; the ticks are read by block id)
            action_id = toggle_id if len(groups) == 1 else f"{toggle_id}-{n}"
            element: Block = {"type": "checkboxes", "action_id": action_id, "options": choices}
            # The card marks chosen options "☑": a re-render keeps the ticks.
            ticked = [c for c, b in zip(choices, group, strict=True) if b.label.startswith("☑")]
            if ticked:
                element["initial_options"] = ticked
            block_id = CHOICES_BLOCK_PREFIX if len(groups) == 1 else f"{CHOICES_BLOCK_PREFIX}-{n}"
            choice_blocks.append(_actions(block_id, [element]))
    elif options:
        groups = _chunks(options, MAX_ACTION_ELEMENTS)[: max(room, 0)]
        left_out = len(options) - sum(len(g) for g in groups)
        for n, group in enumerate(groups):
            buttons = [
                _button(_option_text(card, b.option), _id(ids, ("option", b.option))) for b in group
            ]
            choice_blocks.append(_actions(f"options-{n}", buttons))
    blocks.extend(choice_blocks)
    if left_out:
        blocks.append(
            _context("not-shown", [f"… {left_out} more options did not fit: see the full view"])
        )
    blocks.extend(_actions(f"buttons-{n}", chunk) for n, chunk in enumerate(control_blocks))
    return _fallback(card), blocks


def selected_options(values: Mapping[str, Any]) -> list[int]:
    """The option indices ticked in a multi-select question, from a block action payload's
    `state.values` (block id -> action id -> element state); see `CHOICES_BLOCK_PREFIX`."""
    chosen: set[int] = set()
    for block_id, actions in values.items():
        if block_id != CHOICES_BLOCK_PREFIX and not block_id.startswith(CHOICES_BLOCK_PREFIX + "-"):
            continue
        if not isinstance(actions, Mapping):
            continue
        for state in actions.values():
            selected = state.get("selected_options") if isinstance(state, Mapping) else None
            for option in selected or ():
                value = option.get("value") if isinstance(option, Mapping) else None
                if isinstance(value, str) and value.isdigit():
                    chosen.add(int(value))
    return sorted(chosen)


# --------------------------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------------------------


def thread_parent(
    title: str, agent: str | None, waiting: int, run_url: str | None
) -> tuple[str, list[dict[str, Any]]]:
    """A run's thread parent: "<run title> · <agent> · N waiting", linking to the run page."""
    name = mask_text(title) if title.strip() else "Untitled run"
    who = mask_text(agent) if agent and agent.strip() else ""
    count = f"{max(waiting, 0)} waiting"
    text = _fit(" · ".join(x for x in (name, who, count) if x), MAX_TEXT, esc=_defuse)
    line = f"🏃 *{_fit(name, 300)}*" + (f" · {_fit(who, 200)}" if who else "") + f" · {count}"
    link = _link(run_url, "Run page")
    if link:
        line += f" · 🔗 {link}"
    return text, [_section("run", line)]


# --------------------------------------------------------------------------------------------
# Digests
# --------------------------------------------------------------------------------------------

DIGEST_BUTTON_ROWS = 8
_LINE = 80


def _digest_entry(number: int, task: Task, now: datetime) -> str:
    outcome = render_ending(task)
    if outcome is None:
        left = (task.deadline - now) if task.deadline else None
        soon = left is not None and left < timedelta(hours=1)
        text = _fit(digest_line(task), _LINE)
        if left is not None:
            text += f" ({format_duration(left)} left)"
        return f"{number}. {'⏰' if soon else '⏳'} {text}"
    who = f" by {outcome.who}" if outcome.who else ""
    text = _fit(digest_line(task), _LINE - 24) + " " + _fit(f"— {outcome.word}{who}", 40)
    return f"{number}. {outcome.icon} {text}"


def digest_blocks(
    tasks: Sequence[Task],
    now: datetime,
    inbox_url: str,
    ids: Mapping[tuple[str, str], str],
    *,
    done: bool,
) -> tuple[str, list[dict[str, Any]]]:
    """A digest page: one numbered line per decision (the time left, or the outcome), the first
    few waiting ones with Approve / Deny / Show buttons (ids keyed by (task id, action) for
    approve, deny and expand; questions get Show only). No buttons once `done`. Lines that do
    not fit in 50 blocks are left out, pointing at the inbox."""
    waiting = sum(1 for t in tasks if t.parked)
    settled = len(tasks) - waiting
    if waiting:
        title = f"📥 {waiting} decisions waiting" + (f" · {settled} settled" if settled else "")
    else:
        title = f"📥 All {len(tasks)} decisions settled"
    inbox = _link(inbox_url, "inbox") or "inbox"
    intro = (
        f"Open the {inbox} for the details."
        if done
        else "Too many at once to post one by one: decide here, press *Show* for the details, "
        f"or open the {inbox}."
    )
    blocks: list[Block] = [_header("header", title), _context("intro", [intro])]
    buffer: list[str] = []
    buttons_left = 0 if done else DIGEST_BUTTON_ROWS
    shown = 0

    def flush() -> None:
        if buffer:
            blocks.append(_section(f"lines-{len(blocks)}", "\n".join(buffer)))
            buffer.clear()

    for number, task in enumerate(tasks, start=1):
        line = _digest_entry(number, task, now)
        pending = 1 if buffer else 0
        if buttons_left and task.parked and len(blocks) + pending + 2 + 1 <= MAX_BLOCKS:
            flush()
            actions = ["approve", "deny", "expand"] if task.kind == "tool_call" else ["expand"]
            elements = [
                _button(_LABELS[a][0], _id(ids, (task.id, a)), _LABELS[a][1]) for a in actions
            ]
            blocks.append(_section(f"item-{number}", line))
            blocks.append(_actions(f"actions-{number}", elements))
            buttons_left -= 1
        else:
            if buffer and sum(utf16_len(x) + 1 for x in buffer) + utf16_len(line) > MAX_TEXT:
                flush()  # its block was set aside when it started
            if not buffer and len(blocks) + 1 + 1 > MAX_BLOCKS:  # a new section, the note
                break
            buffer.append(line)
        shown += 1
    flush()
    if shown < len(tasks):
        blocks.append(_context("more", [f"… and {len(tasks) - shown} more in the {inbox}"]))
    return _fit(title, MAX_TEXT, esc=_defuse), blocks
