"""The neutral rendering model: what people see about a decision, before any chat format.

Telegram, Slack and the web page each turn a `Card` into their own markup; what a decision
shows (tool, run, the call itself, effect profile, why it parked, the deadline, the buttons,
the outcome) is decided once, here. Everything taken from the call is already masked
(bot/masking.py); surfaces escape it for their format and fit it to their size limits.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from bot import errors
from bot.domain import Run, Task
from bot.durations import format_duration
from bot.effects import known_keys
from bot.masking import mask_text, mask_value, shorten, utf16_len
from bot.service import ending_word  # the core's wording: one source for every surface

Action = Literal[
    "approve", "deny", "deny_reason", "option", "toggle", "submit", "answer_text", "decline",
    "expand", "allow", "allow_run", "allow_profile", "edit",
]  # fmt: skip
"""What a button does. `option`/`toggle` carry the option's index; `expand` posts a decision
listed in a digest as a message of its own; `allow` shows the rule "Approve & allow like this"
would learn, `allow_run`/`allow_profile` approve and learn it in that scope; `edit` asks for
the call as the person would approve it."""

ACTIONS: tuple[Action, ...] = (
    "approve", "deny", "deny_reason", "option", "toggle", "submit", "answer_text", "decline",
    "expand", "allow", "allow_run", "allow_profile", "edit",
)  # fmt: skip

_SHELL_KEYS = ("command", "cmd", "script")
_MAX_OPTIONS = 40  # more would crowd out everything else (Telegram allows 100 buttons)
_DIFF_LINES = 60


@dataclass(frozen=True)
class Button:
    label: str
    action: Action
    option: int | None = None


@dataclass(frozen=True)
class Field:
    label: str
    value: str


@dataclass(frozen=True)
class CodeBlock:
    text: str
    language: str = ""  # "bash", "diff", "json" or "" (plain)


@dataclass(frozen=True)
class Outcome:
    """How a decision ended, for people."""

    state: str
    word: str  # approved, denied, answered, declined, expired, cancelled, withdrawn
    icon: str
    who: str | None
    via: str | None
    at: datetime | None
    detail: str = ""  # the deny reason, the answer, why it was cancelled (masked)

    @property
    def headline(self) -> str:
        """The outcome without its time (e.g. "✅ Approved by alice"): true whenever read."""
        text = f"{self.icon} {self.word.capitalize()}"
        return text + (f" by {self.who}" if self.who else "")

    def ago(self, now: datetime) -> str:
        """E.g. "approved by alice 3 min ago", for a short notice read right now."""
        text = self.word + (f" by {self.who}" if self.who else "")
        if self.at is None:
            return text
        return f"{text} {format_duration(now - self.at)} ago"


@dataclass(frozen=True)
class Card:
    kind: Literal["approval", "question"]
    icon: str
    title: str
    context: tuple[Field, ...]  # run, agent
    text: str  # a question's prompt; empty for approvals
    code: CodeBlock | None
    summary: str
    badges: tuple[str, ...]
    fields: tuple[Field, ...]  # targets, other profile keys, why
    deadline: str  # "expires in 23 h 59 min"; empty once ended
    buttons: tuple[tuple[Button, ...], ...]
    outcome: Outcome | None
    link: str | None
    options: tuple[str, ...] = field(default=())
    progress: str = ""  # under a quorum: "1 of 2 approvals · alice ✓"


# --------------------------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------------------------

_ICONS = {
    "approved": "✅",
    "denied": "❌",
    "answered": "💬",
    "declined": "🚫",
    "expired": "⌛",
    "cancelled": "⏹",
    "withdrawn": "↩",
    "refused": "⛔",
}


def render_ending(task: Task, now: datetime | None = None) -> Outcome | None:
    """The outcome of an ended task; None while it still waits on a person."""
    del now  # the outcome is stated absolutely; `Outcome.ago` phrases it relative to a time
    if task.parked:
        return None
    word = ending_word(task)
    who = task.resolved_by or {"clock": "the clock", "engine": "the rules"}.get(task.via or "")
    detail = ""
    if task.state == "failed" and word == "denied":
        reason = (task.error or {}).get("detail", "")
        detail = "" if reason == f"denied by {task.resolved_by}" else reason
    elif task.state == "resolved":
        content = (task.resolution or {}).get("content")
        detail = ", ".join(map(str, content)) if isinstance(content, list) else str(content or "")
    elif task.state == "cancelled" and (task.error or {}).get("code") == errors.WITHDRAWN:
        # "↩ Withdrawn by demo-app", the reason below: the call was given up, not stopped.
        said = (task.error or {}).get("detail", "")
        detail = said.removeprefix(f"withdrawn by {task.resolved_by}").removeprefix(": ")
    elif task.state == "cancelled":
        detail = (task.error or {}).get("detail", "")
    return Outcome(
        state=task.state,
        word=word,
        icon=_ICONS.get(word, "•"),
        who=mask_text(who) if who else None,
        via=task.via,
        at=task.decided_at,
        detail=mask_text(detail),
    )


# --------------------------------------------------------------------------------------------
# The call itself
# --------------------------------------------------------------------------------------------


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def _diff(path: str, old: str, new: str) -> str:
    lines = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", n=2, lineterm=""
        )
    )
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"… {len(lines) - _DIFF_LINES} more diff lines"]
    return "\n".join(lines)


def _file_edit(tool_input: dict[str, Any]) -> CodeBlock | None:
    """File edits as paths and a short diff (Edit, MultiEdit, Write and look-alikes)."""
    path = tool_input.get("file_path") or tool_input.get("path")
    if not isinstance(path, str):
        return None
    old, new = tool_input.get("old_string"), tool_input.get("new_string")
    if isinstance(old, str) and isinstance(new, str):
        return CodeBlock(_diff(path, old, new), "diff")
    edits = tool_input.get("edits")
    if isinstance(edits, list) and all(isinstance(e, dict) for e in edits):
        parts = [
            _diff(path, str(e.get("old_string", "")), str(e.get("new_string", ""))) for e in edits
        ]
        return CodeBlock("\n".join(parts), "diff")
    content = tool_input.get("content")
    if isinstance(content, str):
        return CodeBlock(_diff(path, "", content), "diff")
    for key in ("patch", "diff"):
        if isinstance(tool_input.get(key), str):
            return CodeBlock(f"{path}\n{tool_input[key]}", "diff")
    return None


def _edit_text(value: Any, key: str | None) -> str:
    if key is not None and isinstance(value, dict) and isinstance(value.get(key), str):
        return str(value[key])
    return _pretty(value)


def render_edit(proposed: Any, approved: Any) -> CodeBlock:
    """What a person changed before approving, as a diff from the proposed call to the approved
    one (the commands alone when both are commands, else their JSON); masked."""
    old, new = mask_value(proposed), mask_value(approved)
    key = next(
        (
            k for k in _SHELL_KEYS
            if isinstance(old, dict) and isinstance(new, dict)
            and isinstance(old.get(k), str) and isinstance(new.get(k), str)
        ),
        None,
    )  # fmt: skip
    if key is not None and {k: v for k, v in old.items() if k != key} != {
        k: v for k, v in new.items() if k != key
    }:
        key = None  # more than the command changed: show the whole input
    lines = difflib.unified_diff(
        _edit_text(old, key).splitlines(), _edit_text(new, key).splitlines(),
        "proposed", "approved", n=2, lineterm="",
    )  # fmt: skip
    text = "\n".join(list(lines)[: _DIFF_LINES + 2])
    return CodeBlock(text, "diff")


def render_call(tool_input: Any) -> tuple[CodeBlock | None, tuple[Field, ...]]:
    """A shell command as a code block, file edits as a diff, other inputs as pretty JSON.
    Returns the block and the input's remaining small fields (a command's description)."""
    masked = mask_value(tool_input)
    if isinstance(masked, str):
        return CodeBlock(masked), ()
    if not isinstance(masked, dict):
        return CodeBlock(_pretty(masked), "json"), ()
    for key in _SHELL_KEYS:
        value = masked.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = " ".join(value)
        if isinstance(value, str) and value.strip():
            rest = {k: v for k, v in masked.items() if k != key}
            extra: list[Field] = []
            if isinstance(rest.get("description"), str):
                extra.append(Field("Description", rest.pop("description")))
            for k, v in rest.items():
                text = v if isinstance(v, str) else json.dumps(v, default=str)
                extra.append(Field(mask_text(str(k)), text))
            return CodeBlock(value, "bash"), tuple(extra)
    edit = _file_edit(masked)
    if edit is not None:
        return edit, ()
    return (CodeBlock(_pretty(masked), "json") if masked else None), ()


# --------------------------------------------------------------------------------------------
# A shell line's commands (issue 20): the frozen profile's `commands` and `unseen`
# --------------------------------------------------------------------------------------------

COMMAND_KEYS = ("commands", "unseen")
"""Profile keys a judged shell line adds (bot/rules/compound.py `LineVerdict.profile_part`):
shown as the Commands lines, never among the generic other keys."""
MARK = "▶ "  # the command that made the call park, or refused it
UNSEEN = "⚠ cannot be seen through: "
_COMMAND_WIDTH = 200  # a command's line is cut to this many characters
_COMMAND_LINES = 30  # the most lines the card's Commands field holds
_ENDS = {"parked": " ← parks", "failed": " ← refused"}


@dataclass(frozen=True)
class CommandRow:
    """One command of a judged shell line, as the frozen profile holds it (not masked)."""

    text: str
    outcome: str  # granted | parked | failed
    why: str
    wrapper: bool  # a wrapper's own form (`timeout 5 rm x`), judged for denies only
    marked: bool  # the one that made the call park, or refused it


def command_rows(profile: Mapping[str, Any] | None) -> list[CommandRow]:
    """The profile's `commands`, in the order the line runs them; entries of another shape
    (a profile an agent wrote by hand) are left out."""
    raw = (profile or {}).get("commands")
    if not isinstance(raw, list):
        return []
    return [
        CommandRow(
            text=item["text"],
            outcome=str(item.get("outcome", "")),
            why=str(item.get("why", "")),
            wrapper=item.get("wrapper") is True,
            marked=item.get("marked") is True,
        )
        for item in raw
        if isinstance(item, dict) and isinstance(item.get("text"), str)
    ]


def unseen_reasons(profile: Mapping[str, Any] | None) -> list[str]:
    """Why parts of the line cannot be seen through ("writes to out.txt", "pipes into sh")."""
    raw = (profile or {}).get("unseen")
    return [r for r in raw if isinstance(r, str)] if isinstance(raw, list) else []


def is_line_key(key: object, value: object) -> bool:
    """Whether a profile entry is a judged line's (`commands` or `unseen`, as lists), shown as
    the Commands lines rather than among the other keys."""
    return key in COMMAND_KEYS and isinstance(value, list)


def cut_line(line: str, width: int) -> str:
    """A line cut to `width` like `shorten`, keeping its indent (the Commands lines align)."""
    body = line.lstrip(" ")
    return line[: len(line) - len(body)] + shorten(body, width)


def shows_commands(profile: Mapping[str, Any] | None) -> bool:
    """Whether the commands are worth a list of their own: two or more that need a grant, or
    a part that cannot be seen through (a single plain command only repeats the call)."""
    rows = command_rows(profile)
    return sum(1 for r in rows if not r.wrapper) >= 2 or bool(unseen_reasons(profile))


def command_line(row: CommandRow, width: int = _COMMAND_WIDTH) -> str:
    """A command in one line, masked and cut: "▶ rm -rf ~ ← parks" for the marked one,
    "  ✓ git status" for one granted on its own, "  · make" otherwise."""
    text = shorten(mask_text(row.text), width)
    if row.marked:
        return MARK + text + _ENDS.get(row.outcome, "")
    return ("  ✓ " if row.outcome == "granted" else "  · ") + text


def fit_lines(
    lines: Sequence[str], budget: int, size: Callable[[str], int] = utf16_len, sep: int = 1
) -> list[str]:
    """`lines` within `budget` (each counted by `size`, plus `sep` for its line break), in
    order: the marked line and the unseen reasons kept first, the others from the top while
    they fit, each gap said as "  … N more" (counted too)."""

    def note(n: int) -> str:
        return f"  … {n} more"

    def cost(line: str) -> int:
        return size(line) + sep

    if sum(map(cost, lines)) <= budget:
        return list(lines)
    must = [i for i, line in enumerate(lines) if line.startswith((MARK, UNSEEN))]
    # a gap note may come before each kept line that must stay, and one at the end
    spare = budget - (len(must) + 1) * cost(note(len(lines)))
    kept: set[int] = set()
    used = 0
    for i in must:
        if used + cost(lines[i]) <= spare:
            kept.add(i)
            used += cost(lines[i])
    chosen = set(must)
    for i, line in enumerate(lines):
        if i in chosen:
            continue
        if used + cost(line) > spare:
            break
        kept.add(i)
        used += cost(line)
    out: list[str] = []
    gap = 0
    for i, line in enumerate(lines):
        if i in kept:
            if gap:
                out.append(note(gap))
            out.append(line)
            gap = 0
        else:
            gap += 1
    if gap:
        out.append(note(gap))
    return out


def command_lines(profile: Mapping[str, Any] | None, limit: int = _COMMAND_LINES) -> list[str]:
    """The commands of a judged shell line, one line each (masked, cut), then a line per part
    that cannot be seen through; at most `limit` lines, the marked one always among them. A
    wrapper's own form (judged for denies only) is left out unless it is the marked one."""
    lines = [command_line(r) for r in command_rows(profile) if r.marked or not r.wrapper]
    lines += [UNSEEN + shorten(mask_text(r), _COMMAND_WIDTH) for r in unseen_reasons(profile)]
    return fit_lines(lines, limit, lambda _line: 1, sep=0)


def _commands_field(profile: Mapping[str, Any]) -> Field | None:
    if not shows_commands(profile):
        return None
    lines = command_lines(profile)
    return Field("Commands", "\n".join(lines)) if lines else None


# --------------------------------------------------------------------------------------------
# The card
# --------------------------------------------------------------------------------------------


def _profile(profile: dict[str, Any]) -> tuple[str, tuple[str, ...], list[Field]]:
    masked = mask_value(profile)
    summary = masked.get("summary") if isinstance(masked.get("summary"), str) else ""
    badges: list[str] = []
    effects = masked.get("effects")
    if isinstance(effects, list):
        badges.extend(str(e) for e in effects)
    risk = masked.get("risk")
    if isinstance(risk, str):
        badges.append(f"risk: {risk}")
    if masked.get("reversible") is False:
        badges.append("irreversible")
    elif masked.get("reversible") is True:
        badges.append("reversible")
    fields: list[Field] = []
    targets = masked.get("targets")
    if isinstance(targets, list) and targets:
        shown = [shorten(str(t), 200) for t in targets[:10]]
        more = f" (+{len(targets) - 10} more)" if len(targets) > 10 else ""
        fields.append(Field("Targets", ", ".join(shown) + more))
    for key, value in masked.items():
        if key in known_keys() or key == "derived" or is_line_key(key, value):
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        fields.append(Field(mask_text(str(key)), shorten(text, 300)))
    commands = _commands_field(masked)
    if commands is not None:
        fields.append(commands)
    return shorten(summary, 300), tuple(badges), fields


def _why(task: Task, run: Run) -> str:
    why = task.why
    index = task.rule_index
    if index is not None and 0 <= index < len(run.approval_rules):
        rule = run.approval_rules[index]
        reason = rule.get("reason") if isinstance(rule, dict) else None
        if isinstance(reason, str) and reason and reason not in why:
            why = f"{why} — {reason}"
    return mask_text(why)


def approvals_line(task: Task) -> str:
    """A quorum's count as people read it, "1 of 2 approvals · alice ✓"; "" when no
    requirement applies to the call."""
    given = task.approvals_given
    if given is None:
        return ""
    names = [mask_text(str(g.get("by", ""))) for g in given if isinstance(g, dict)]
    line = f"{len(names)} of {task.required_approvals} approvals"
    return line + (" · " + " ".join(f"{n} ✓" for n in names) if names else "")


def _question_buttons(
    task: Task, options: tuple[str, ...], chosen: frozenset[int]
) -> tuple[tuple[Button, ...], ...]:
    """The question's buttons; `options` are already masked (a label is cut after masking, so
    that a cut never leaves a secret's head the masker no longer recognises)."""
    question = task.tool_input if isinstance(task.tool_input, dict) else {}
    rows: list[tuple[Button, ...]] = []
    if options and question.get("multi"):
        for i, label in enumerate(options):
            mark = "☑" if i in chosen else "☐"
            rows.append((Button(f"{mark} {shorten(label, 60)}", "toggle", i),))
        rows.append((Button("✔️ Submit", "submit"), Button("🚫 Decline", "decline")))
    elif options:
        rows.extend((Button(shorten(label, 60), "option", i),) for i, label in enumerate(options))
        rows.append((Button("🚫 Decline", "decline"),))
    else:
        rows.append((Button("💬 Answer", "answer_text"), Button("🚫 Decline", "decline")))
    return tuple(rows)


def render_decision(
    task: Task,
    run: Run,
    now: datetime,
    full_view_url: str | None,
    *,
    chosen: frozenset[int] = frozenset(),
) -> Card:
    """What a decision shows: waiting (with buttons and the deadline) or ended (with its
    outcome, no buttons). `chosen` is the toggle state of a multi-select question."""
    outcome = render_ending(task, now)
    context = [Field("Run", shorten(mask_text(run.title), 120) or mask_text(run.id))]
    if run.title:
        context.append(Field("Run id", mask_text(run.id)))
    if task.appended_by:
        context.append(Field("Agent", mask_text(task.appended_by)))
    summary, badges, fields = _profile(task.effect_profile or {})
    deadline = ""
    if outcome is None and task.deadline is not None:
        deadline = f"expires in {format_duration(task.deadline - now)}"
    options: tuple[str, ...] = ()
    if task.kind == "ask":
        question = task.tool_input if isinstance(task.tool_input, dict) else {}
        raw_options = question.get("options")
        if isinstance(raw_options, list):
            options = tuple(mask_text(str(o)) for o in raw_options[:_MAX_OPTIONS])
        buttons = () if outcome is not None else _question_buttons(task, options, chosen)
        multi = " (choose one or more)" if question.get("multi") else ""
        return Card(
            kind="question",
            icon="❓",
            title=f"Question{multi}",
            context=tuple(context),
            text=mask_text(str(question.get("prompt", ""))),
            code=None,
            summary="",
            badges=(),
            fields=(),
            deadline=deadline,
            buttons=buttons,
            outcome=outcome,
            link=full_view_url,
            options=options,
        )
    code, extra = render_call(task.tool_input)
    fields = [*extra, *fields, Field("Why", _why(task, run))]
    if task.approved_input is not None:  # approved as a person edited it: what changed
        code = render_edit(task.tool_input, task.approved_input)
        who = f" by {mask_text(task.resolved_by)}" if task.resolved_by else ""
        fields.insert(0, Field("Edited", f"approved as edited{who} (diff: proposed → approved)"))
    elif outcome is None and task.reviewed_input is not None:
        # Under a quorum the approvals so far are for someone's edit, and Approve approves
        # it as edited: the next approver must see what they approve.
        code = render_edit(task.tool_input, task.reviewed_input)
        given = task.approvals_given or []
        editor = given[0].get("by") if given and isinstance(given[0], dict) else None
        who = f" by {mask_text(str(editor))}" if editor else ""
        fields.insert(
            0,
            Field(
                "Edited", f"edited{who}: Approve approves it as edited (diff: proposed → edited)"
            ),
        )
    buttons = (
        ()
        if outcome is not None
        else (
            (Button("✅ Approve", "approve"), Button("❌ Deny", "deny")),
            (Button("📝 Deny with reason", "deny_reason"), Button("✏️ Edit & approve", "edit")),
            (Button("🔁 Approve & allow like this", "allow"),),
        )
    )
    return Card(
        kind="approval",
        icon="🛂",
        title=f"Approve {mask_text(task.tool)}?" if outcome is None else mask_text(task.tool),
        context=tuple(context),
        text="",
        code=code,
        summary=summary,
        badges=badges,
        fields=tuple(fields),
        deadline=deadline,
        buttons=buttons,
        outcome=outcome,
        link=full_view_url,
        progress=approvals_line(task),
    )


def digest_line(task: Task) -> str:
    """A decision in one short line, for a digest listing many (masked, not escaped)."""
    if task.kind == "ask":
        question = task.tool_input if isinstance(task.tool_input, dict) else {}
        return "question: " + mask_text(str(question.get("prompt", "")))
    summary = (task.effect_profile or {}).get("summary")
    if isinstance(summary, str) and summary:
        return mask_text(summary)
    return mask_text(task.tool)
