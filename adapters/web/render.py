"""How a call reads on the page: a shell command as a code block, a file edit as a diff, a
question as its prompt and options, anything else as pretty JSON; secrets masked unless the
reader asks to see them. Pure functions; the templates escape whatever they print."""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from bot.domain import Event, Task
from bot.durations import format_duration
from bot.effects import known_keys
from bot.masking import mask_text, mask_value
from bot.rendering import command_rows, is_line_key, shows_commands, unseen_reasons

BlockKind = Literal["command", "diff", "code", "json", "text"]
_COMMAND_KEYS = ("command", "cmd", "script")
_PATH_KEYS = ("file_path", "path", "file", "filename", "notebook_path")
_CONTENT_KEYS = ("content", "new_source", "text")


@dataclass(frozen=True)
class Line:
    cls: str  # add, del, hunk, meta, ctx
    text: str
    old: int | None = None  # the line's number before the change (context and deletions)
    new: int | None = None  # and after it (context and additions)


@dataclass
class Block:
    kind: BlockKind
    title: str
    text: str = ""
    lines: list[Line] = field(default_factory=list)

    @property
    def line_count(self) -> int:
        return len(self.lines) if self.kind == "diff" else self.text.count("\n") + 1


@dataclass
class CallView:
    blocks: list[Block]
    rest: str = ""  # the remaining input keys as JSON, when there are any


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _scalar_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def command_text(value: Any) -> str | None:
    """A command as a person reads it: a string as it is, an argv list shell-quoted."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value:
        if all(isinstance(v, str) for v in value):
            return shlex.join(value)
        if all(isinstance(v, str | int | float | bool) or v is None for v in value):
            return " ".join(_scalar_text(v) for v in value)
    return None


def _path_of(tool_input: dict[str, Any]) -> str:
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def diff_lines(old: str, new: str, path: str) -> list[Line]:
    name = path or "file"
    diff = difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"a/{name}", f"b/{name}", lineterm="", n=3
    )
    return numbered([Line(_line_class(text), text) for text in diff])


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def numbered(lines: list[Line]) -> list[Line]:
    """Old and new line numbers for a unified diff's lines, counted from each hunk header."""
    out: list[Line] = []
    old_no = new_no = 0
    for line in lines:
        if line.cls == "hunk":
            found = _HUNK.match(line.text)
            if found:
                old_no, new_no = int(found.group(1)), int(found.group(2))
            out.append(line)
        elif line.cls == "add" and new_no:
            out.append(dataclasses.replace(line, new=new_no))
            new_no += 1
        elif line.cls == "del" and old_no:
            out.append(dataclasses.replace(line, old=old_no))
            old_no += 1
        elif line.cls == "ctx" and old_no and new_no:
            out.append(dataclasses.replace(line, old=old_no, new=new_no))
            old_no, new_no = old_no + 1, new_no + 1
        else:
            out.append(line)
    return out


def _line_class(text: str) -> str:
    if text.startswith(("+++", "---")):
        return "meta"
    if text.startswith("@@"):
        return "hunk"
    if text.startswith("+"):
        return "add"
    if text.startswith("-"):
        return "del"
    return "ctx"


def _edits(tool_input: dict[str, Any]) -> list[tuple[str, str]] | None:
    """Edit-shaped inputs: {old_string, new_string} or {edits: [{old_string, new_string}…]}."""
    if isinstance(tool_input.get("old_string"), str) and isinstance(
        tool_input.get("new_string"), str
    ):
        return [(tool_input["old_string"], tool_input["new_string"])]
    edits = tool_input.get("edits")
    if isinstance(edits, list) and edits:
        pairs = []
        for edit in edits:
            if not isinstance(edit, dict):
                return None
            old, new = edit.get("old_string"), edit.get("new_string")
            if not isinstance(old, str) or not isinstance(new, str):
                return None
            pairs.append((old, new))
        return pairs
    return None


def render_call(task: Task) -> CallView:
    """Blocks for the call's input; keys they show are left out of `rest`."""
    data = task.tool_input
    if not isinstance(data, dict):
        if isinstance(data, str):
            return CallView([Block("text", "input", data)])
        return CallView([Block("json", "input", _json(data))])
    used: set[str] = set()
    blocks: list[Block] = []
    for key in _COMMAND_KEYS:
        text = command_text(data.get(key))
        if text is not None:
            blocks.append(Block("command", key, text))
            used.add(key)
            break
    path = _path_of(data)
    edits = _edits(data)
    if edits is not None:
        lines: list[Line] = []
        for old, new in edits:
            lines.extend(diff_lines(old, new, path) or [Line("ctx", "(no change)")])
        blocks.append(Block("diff", f"edit of {path}" if path else "edit", lines=lines))
        used |= {"old_string", "new_string", "edits", "replace_all"}
        used |= {k for k in _PATH_KEYS if data.get(k) == path}
    else:
        for key in ("patch", "diff"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                lines = numbered([Line(_line_class(t), t) for t in value.splitlines()])
                blocks.append(Block("diff", key, lines=lines))
                used.add(key)
                break
        else:
            for key in _CONTENT_KEYS:
                value = data.get(key)
                if isinstance(value, str) and path:
                    blocks.append(Block("code", f"writes {path}", value))
                    used |= {key} | {k for k in _PATH_KEYS if data.get(k) == path}
                    break
    rest = {k: v for k, v in data.items() if k not in used}
    if not blocks:
        return CallView([Block("json", "input", _json(data))])
    return CallView(blocks, _json(rest) if rest else "")


# A clipped card's line keeps this many characters (its head and tail): a card is clipped by
# characters as well as lines, so a one-line command of a megabyte costs the inbox a line.
LINE_CHARS = 400


def cut_line(line: str, width: int = LINE_CHARS) -> str:
    """A long line's head and tail, saying how much was left out between them."""
    if len(line) <= width:
        return line
    head = width * 2 // 3
    tail = width - head
    return f"{line[:head]} … {len(line) - head - tail} more characters … {line[-tail:]}"


def clip(text: str, max_lines: int = 24) -> tuple[str, int]:
    """Head and tail of a long text, each line cut to its head and tail, and how many lines
    were left out."""
    lines = text.split("\n")
    hidden = 0
    if len(lines) > max_lines:
        head = max_lines * 2 // 3
        tail = max_lines - head
        hidden = len(lines) - head - tail
        lines = [*lines[:head], f"… {hidden} more lines …", *lines[-tail:]]
    elif len(text) <= LINE_CHARS:
        return text, 0
    return "\n".join(cut_line(line) for line in lines), hidden


def clip_lines(lines: list[Line], max_lines: int = 40) -> tuple[list[Line], int]:
    hidden = 0
    if len(lines) > max_lines:
        head = max_lines * 2 // 3
        tail = max_lines - head
        hidden = len(lines) - head - tail
        marker = Line("hunk", f"… {hidden} more lines …")
        lines = [*lines[:head], marker, *lines[-tail:]]
    return [
        line
        if len(line.text) <= LINE_CHARS
        else dataclasses.replace(line, text=cut_line(line.text))
        for line in lines
    ], hidden


@dataclass(frozen=True)
class CommandView:
    """One command of a judged shell line, as the page lists it."""

    text: str
    outcome: str  # granted | parked | failed
    why: str
    wrapper: bool  # a wrapper's own form (`timeout 5 rm x`), judged for denies only
    marked: bool  # the one that made the call park, or refused it

    @property
    def note(self) -> str:
        """What the marked one did, in words (the mark is never colour alone)."""
        if not self.marked:
            return ""
        return {"parked": "parks here", "failed": "refused here"}.get(self.outcome, "decided here")


@dataclass
class ProfileView:
    summary: str
    effects: list[str]
    targets: list[str]
    risk: str
    reversible: bool | None
    derived: bool
    other: list[tuple[str, str]]
    commands: list[CommandView] = field(default_factory=list)  # a compound line's, in order
    unseen: list[str] = field(default_factory=list)  # why parts cannot be seen through


def run_name(run: Any, fallback: str = "") -> str:
    """A run as the page names it: its title masked like every agent-written text (a title
    may carry a secret the agent put there), else `fallback` (its id, or the first call)."""
    title = getattr(run, "title", "") if run is not None else ""
    if title:
        return mask_text(str(title))
    return fallback or (getattr(run, "id", "") if run is not None else "")


def profile_view(profile: dict[str, Any] | None) -> ProfileView:
    """The frozen effect profile as badges: effects, risk, reversibility, targets, a shell
    line's commands (when there are several, or parts that cannot be seen through), the rest.
    Shown as given: the page masks the whole task first (`masked`) unless revealed."""
    profile = profile or {}
    effects = profile.get("effects")
    targets = profile.get("targets")
    risk = profile.get("risk")
    reversible = profile.get("reversible")
    other = [
        (str(k), _scalar_text(v))
        for k, v in profile.items()
        if k not in known_keys() and k != "derived" and not is_line_key(k, v)
    ]
    listed = shows_commands(profile)
    commands = [
        CommandView(r.text, r.outcome, r.why, r.wrapper, r.marked) for r in command_rows(profile)
    ]
    return ProfileView(
        summary=str(profile.get("summary") or ""),
        effects=[str(e) for e in effects] if isinstance(effects, list) else [],
        targets=[str(t) for t in targets] if isinstance(targets, list) else [],
        risk=risk if risk in ("low", "medium", "high") else "",
        reversible=reversible if isinstance(reversible, bool) else None,
        derived=bool(profile.get("derived")),
        other=other,
        commands=commands if listed else [],
        unseen=unseen_reasons(profile) if listed else [],
    )


def question(task: Task) -> tuple[str, list[str], bool]:
    """A question's prompt, options and whether several may be chosen."""
    data = task.tool_input if isinstance(task.tool_input, dict) else {}
    options = data.get("options")
    return (
        str(data.get("prompt") or ""),
        [str(o) for o in options] if isinstance(options, list) else [],
        bool(data.get("multi")),
    )


def remaining(deadline: datetime | None, now: datetime) -> str:
    if deadline is None:
        return ""
    if deadline <= now:
        return "expiring now"
    return "expires in " + format_duration(deadline - now)


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else ""


def ago(value: datetime | None, now: datetime) -> str:
    """How long ago, as people say it ("3 min ago"); the page shows `when` on hover."""
    if value is None:
        return ""
    if value >= now or (now - value).total_seconds() < 1:
        return "just now"
    # The largest unit alone ("2 h ago", not "2 h 14 min ago"): the title has the rest.
    return " ".join(format_duration(now - value).split(" ")[:2]) + " ago"


def title_of(task: Task, limit: int = 80) -> str:
    """The human summary of a call: a question's prompt, the profile's summary, the command,
    the file it edits, else the tool. One line, never the key (often a bare hash)."""
    if task.kind == "ask":
        text = question(task)[0] or "a question"
    else:
        data = task.tool_input if isinstance(task.tool_input, dict) else {}
        summary = str((task.effect_profile or {}).get("summary") or "")
        command = next(
            (c for c in (command_text(data.get(k)) for k in _COMMAND_KEYS) if c is not None), None
        )
        path = _path_of(data)
        derived = bool((task.effect_profile or {}).get("derived"))
        if summary and not derived:
            text = summary  # the agent's own words
        elif command is not None:
            text = command  # a derived summary only repeats it after the tool's name
        elif path:
            text = f"{task.tool} {path}"
        else:
            text = summary or task.tool
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def resolution_text(task: Task) -> str:
    content = (task.resolution or {}).get("content")
    if isinstance(content, list):
        return ", ".join(str(c) for c in content)
    return "" if content is None else str(content)


# masking ---------------------------------------------------------------------------------------
def masked(task: Task) -> Task:
    """The task as the page shows it by default: what looks like a secret in its input, effect
    profile, answer, error and reason masked as chat messages mask it (bot.masking). A copy;
    the decision itself is always made on the task as stored."""
    return dataclasses.replace(
        task,
        tool_input=mask_value(task.tool_input),
        effect_profile=mask_value(task.effect_profile),
        error=mask_value(task.error),
        resolution=mask_value(task.resolution),
        why=mask_text(task.why),
        approved_input=mask_value(task.approved_input),  # an edit can hold a secret too
        reviewed_input=mask_value(task.reviewed_input),
    )


_MASKED = (
    "tool_input", "effect_profile", "error", "resolution", "why", "approved_input",
    "reviewed_input",
)  # fmt: skip


def masks_something(task: Task) -> bool:
    """Whether masking changes anything the page shows of the task (so a Reveal is offered)."""
    shown = masked(task)
    return any(getattr(shown, part) != getattr(task, part) for part in _MASKED)


def masked_event(event: Event) -> Event:
    return dataclasses.replace(event, data=mask_value(event.data))
