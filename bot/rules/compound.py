"""Judging a shell line command by command (issue 20), for calls on a run's `shell_commands`.

A run (or profile) declares beside its rules which text is a shell line:
`shell_commands = [{"tool": "bash", "path": "command"}]` (the `tool`/`path` syntax of a rule).
When a call's resolved tool matches an entry and the text at its path is a string, the line is
read by bot/rules/shell.py and judged like this, every command as the same call with that
command's text at the path (declared and learned rules, the run's mode and origins):

1. a deny that matches the whole text or any one command refuses the call (the deny first in
   list order gives its reason);
2. what cannot be seen through (`eval`, `> file`, `| sh`, ...) is never granted by an allow: it
   parks in `ask` and `rules` mode (a model's call; bypass and pre-approved origins grant it);
3. in `rules` mode a command no rule allows refuses the call, naming the command;
4. a command that parks (or an ask rule on the whole line) parks the call;
5. the call is granted only when every command is granted on its own.

Without `shell_commands` nothing here runs: the seed's contract (the whole text against each
glob) is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from bot.errors import INVALID_REQUEST, TOOL_NOT_DECLARED, ApprovalError, ErrorValue
from bot.rules.engine import Verdict
from bot.rules.globs import predicate
from bot.rules.paths import Step, encode_text, path_steps
from bot.rules.shell import Command, read_line
from bot.rules.validate import (
    MAX_RULES_BYTES,
    compact_json,
    inner_qmark_problem,
    json_type,
    tool_glob_problems,
)

MAX_SHELL_ENTRIES = 16
SHELL_KEYS = ("tool", "path")
_SHOWN_TEXT = 200  # a command named in a reason is cut to this many characters
_WHY_COMMANDS = 5  # a granted line's reason names this many of its commands
PROFILE_COMMANDS = 50  # the effect profile lists this many (the marked one always)


class CommandVerdict(NamedTuple):
    """One command of a judged line: its text, how it alone was judged, and whether it is the
    one that decided (parked or refused) the call."""

    text: str
    outcome: str  # granted | parked | failed
    why: str
    needs_grant: bool = True
    marked: bool = False

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"text": self.text, "outcome": self.outcome, "why": self.why}
        if not self.needs_grant:
            body["wrapper"] = True
        if self.marked:
            body["marked"] = True
        return body


class LineVerdict:
    """The verdict on a call with a shell line, and how each of its commands was judged (the
    rows are built when asked for: most calls never are)."""

    __slots__ = ("_marked", "_pairs", "judged", "unseen", "verdict")

    def __init__(
        self,
        verdict: Verdict,
        pairs: Sequence[tuple[Command, Verdict]] = (),
        unseen: tuple[str, ...] = (),
        judged: bool = False,  # False: no shell path applied; `verdict` is the plain one
        marked: Command | None = None,
    ) -> None:
        self.verdict = verdict
        self._pairs = pairs
        self.unseen = unseen  # why parts of the line cannot be seen through
        self.judged = judged
        self._marked = marked

    @property
    def commands(self) -> tuple[CommandVerdict, ...]:
        marked = self._marked
        return tuple(
            CommandVerdict(c.text, v.outcome, v.why, c.needs_grant, c is marked)
            for c, v in self._pairs
        )

    def profile_part(self) -> dict[str, Any]:
        """What the frozen effect profile shows of the line: the commands, one per entry."""
        # A line of one command shows nothing the call itself does not.
        needing = sum(1 for c in self.commands if c.needs_grant)
        if not self.judged or (needing <= 1 and not self.unseen):
            return {}
        rows = list(self.commands)
        if len(rows) > PROFILE_COMMANDS:  # a long line: the first ones, and the marked one
            marked = [c for c in rows[PROFILE_COMMANDS - 1 :] if c.marked]
            rows = rows[: PROFILE_COMMANDS - len(marked)] + marked
        part: dict[str, Any] = {"commands": [c.to_json() for c in rows]}
        if len(rows) < len(self.commands):
            part["commands_not_shown"] = len(self.commands) - len(rows)
        if self.unseen:
            part["unseen"] = list(self.unseen)
        return part


# -- declaration ------------------------------------------------------------------------------


def check_shell_commands(value: object, at: str = "shell_commands") -> list[dict[str, str]]:
    """A declared `shell_commands` list, or `422 invalid_request` naming every problem
    (`shell_commands[0].pth: unknown key`)."""
    if value is None:
        return []
    problems: list[str] = []
    if not isinstance(value, list):
        raise ApprovalError(INVALID_REQUEST, f"{at}: must be an array, not {json_type(value)}", 422)
    if len(value) > MAX_SHELL_ENTRIES:
        problems.append(f"{at}: at most {MAX_SHELL_ENTRIES} entries, not {len(value)}")
    out: list[dict[str, str]] = []
    for index, entry in enumerate(value):
        where = f"{at}[{index}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be an object, not {json_type(entry)}")
            continue
        for key in entry:
            if key not in SHELL_KEYS:
                problems.append(f"{where}.{str(key)[:80]}: unknown key")
        for key in SHELL_KEYS:
            given = entry.get(key)
            if key not in entry:
                problems.append(f"{where}.{key}: required")
            elif not isinstance(given, str):
                problems.append(f"{where}.{key}: must be a string, not {json_type(given)}")
            elif not given:
                problems.append(f"{where}.{key}: must not be empty")
            elif "" in given.split("|" if key == "tool" else "."):
                kind = "glob" if key == "tool" else "segment"
                problems.append(f"{where}.{key}: empty {kind} in {compact_json(given)}")
            else:
                try:
                    given.encode()
                except UnicodeEncodeError:
                    problems.append(f"{where}.{key}: not valid Unicode (lone surrogate)")
                else:
                    if key == "tool":  # what one glob may cost, as in a rule (issue 21)
                        problems.extend(tool_glob_problems(given, f"{where}.tool"))
        if not problems:
            out.append({"tool": entry["tool"], "path": entry["path"]})
    if not problems:
        size = len(compact_json(out).encode())
        if size > MAX_RULES_BYTES:
            problems.append(f"{at}: {size} bytes exceeds the {MAX_RULES_BYTES}-byte bound")
        problem = inner_qmark_problem([g for e in out for g in e["tool"].split("|")], at)
        if problem is not None:
            problems.append(problem)
    if problems:
        raise ApprovalError(INVALID_REQUEST, "; ".join(problems), 422, {"problems": problems})
    return out


def merged(base: Sequence[dict[str, str]], extra: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """A profile's (or parent run's) entries with a run's added: never fewer, no repeats."""
    out = [dict(e) for e in base]
    for entry in extra:
        if entry not in out:
            out.append(dict(entry))
    if len(out) > MAX_SHELL_ENTRIES:
        raise ApprovalError(
            INVALID_REQUEST,
            f"shell_commands: at most {MAX_SHELL_ENTRIES} entries with its profile's",
            422,
        )
    return out


@dataclass(frozen=True)
class ShellPaths:
    """Compiled `shell_commands`: which paths of a resolved tool hold a shell line."""

    entries: tuple[tuple[Callable[[bytes], bool], tuple[Step, ...]], ...]
    _by_tool: dict[str, tuple[tuple[Step, ...], ...]] = field(default_factory=dict)

    def paths_for(self, tool: str) -> tuple[tuple[Step, ...], ...]:
        found = self._by_tool.get(tool)
        if found is None:
            name = encode_text(tool)
            found = tuple(dict.fromkeys(steps for matches, steps in self.entries if matches(name)))
            if len(self._by_tool) >= 1024:
                self._by_tool.clear()
            self._by_tool[tool] = found
        return found


@lru_cache(maxsize=256)
def _compiled(text: str) -> ShellPaths:
    entries: list[tuple[Callable[[bytes], bool], tuple[Step, ...]]] = []
    for entry in check_shell_commands(json.loads(text)):
        alternatives = [predicate(encode_text(alt)) for alt in entry["tool"].split("|")]
        entries.append((_any_of(alternatives), path_steps(entry["path"])))
    return ShellPaths(tuple(entries))


def _any_of(alternatives: list[Callable[[bytes], bool]]) -> Callable[[bytes], bool]:
    return lambda name: any(matches(name) for matches in alternatives)


def compile_shell(entries: Sequence[dict[str, str]] | None) -> ShellPaths | None:
    """The compiled entries (shared between runs that declare the same list); None for none."""
    if not entries:
        return None
    return _compiled(compact_json(list(entries)))


# -- judgement --------------------------------------------------------------------------------


def _string_at(value: object, steps: tuple[Step, ...]) -> str | None:
    for key, index in steps:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and index is not None and index < len(value):
            value = value[index]
        else:
            return None
    return value if isinstance(value, str) else None


def with_text(value: Any, steps: tuple[Step, ...], text: str) -> Any:
    """A copy of `value` with `text` at the path (only the containers on the path copied)."""
    if not steps:
        return text
    (key, index), rest = steps[0], steps[1:]
    if isinstance(value, dict):
        return {**value, key: with_text(value.get(key), rest, text)}
    assert isinstance(value, list) and index is not None
    copy = list(value)
    copy[index] = with_text(copy[index], rest, text)
    return copy


def shell_lines(shell: ShellPaths | None, tool: str, tool_input: Any) -> list[tuple[Any, str]]:
    """The shell lines of a call: (path steps, line) for every shell path holding a string."""
    if shell is None:
        return []
    out: list[tuple[Any, str]] = []
    for steps in shell.paths_for(tool):
        line = _string_at(tool_input, steps)
        if line is not None:
            out.append((steps, line))
    return out


def _denied(verdict: Verdict) -> bool:
    return verdict.outcome == "failed" and verdict.rule_index is not None


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_TEXT else text[: _SHOWN_TEXT - 1] + "…"


def judge(
    evaluate: Callable[[Any], Verdict],
    tool_input: Any,
    shell: ShellPaths | None,
    *,
    mode: str,
    origin: str,
) -> LineVerdict:
    """The verdict on a call (`evaluate` decides one `tool_input` by the run's declared and
    learned rules), seen through the shell lines at the run's shell paths."""
    whole = evaluate(tool_input)
    if shell is None or (whole.error is not None and whole.error.code == TOOL_NOT_DECLARED):
        return LineVerdict(whole)
    lines = shell_lines(shell, whole.tool, tool_input)
    if not lines:
        return LineVerdict(whole)
    judged: list[tuple[Command, Verdict]] = []
    unseen: list[str] = []
    for steps, line in lines:
        read = read_line(line)
        unseen.extend(why for why in read.opaque if why not in unseen)
        if len(steps) == 1 and type(tool_input) is dict:  # `command`: the usual shell path
            key = steps[0][0]
            for command in read.commands:
                judged.append((command, evaluate({**tool_input, key: command.text})))
        else:
            for command in read.commands:
                judged.append((command, evaluate(with_text(tool_input, steps, command.text))))
    return _combine(whole, judged, tuple(unseen), mode=mode, origin=origin)


def _combine(
    whole: Verdict,
    judged: list[tuple[Command, Verdict]],
    unseen: tuple[str, ...],
    *,
    mode: str,
    origin: str,
) -> LineVerdict:
    seen_rules = {i for _, v in judged for i in v.matched}
    if whole.rule_index is not None and whole.outcome != "granted":
        seen_rules.update(whole.matched)
    matched = tuple(sorted(seen_rules))
    tool = whole.tool

    def seen(
        outcome: str,
        why: str,
        rule_index: int | None,
        error: ErrorValue | None = None,
        marked: Command | None = None,
        by_member: bool = False,
    ) -> LineVerdict:
        verdict = Verdict(outcome, tool, error, matched, rule_index, why, by_member)  # type: ignore[arg-type]
        return LineVerdict(verdict, judged, unseen, True, marked)

    def same(
        verdict: Verdict, why: str | None = None, marked: Command | None = None
    ) -> LineVerdict:
        return seen(
            verdict.outcome,
            verdict.why if why is None else why,
            verdict.rule_index,
            verdict.error,
            marked,
            verdict.by_member,
        )

    if not judged and not unseen:
        return same(whole)  # nothing runs (comments, assignments): the whole text decides
    # 1. a deny on the whole text or any one command; the first in list order speaks
    denials = [(v.rule_index or 0, i, c, v) for i, (c, v) in enumerate(judged) if _denied(v)]
    if _denied(whole):
        denials.append((whole.rule_index or 0, -1, None, whole))  # type: ignore[arg-type]
    if denials:
        _, _, command, verdict = min(denials, key=lambda d: (d[0], d[1]))
        if command is None:
            return same(verdict)
        return same(verdict, f"{verdict.why} (in `{_shown(command.text)}`)", command)
    # 2. what cannot be seen through is for a person (never an allow's) in ask and rules mode
    if unseen and origin == "model" and mode != "bypass":
        return seen("parked", f"cannot be seen through: {'; '.join(unseen)}", None)
    # 3. rules mode: a command no rule allows refuses the call
    for command, verdict in judged:
        if command.needs_grant and verdict.outcome == "failed":
            detail = f"no approval rule allows {_shown(command.text)}"
            error = ErrorValue(verdict.error.code, detail) if verdict.error else None
            return seen("failed", f"{detail} in rules mode", None, error, command)
    # 4. a command that parks (a wrapper's form only by an ask rule), or an ask on the whole
    for command, verdict in judged:
        if verdict.outcome == "parked" and (command.needs_grant or verdict.rule_index is not None):
            return same(verdict, f"`{_shown(command.text)}` parks: {verdict.why}", command)
    if whole.outcome == "parked" and whole.rule_index is not None:
        return same(whole)
    # 5. every command granted on its own
    granted = [(c, v) for c, v in judged if c.needs_grant]
    if not granted:
        return same(whole)
    first = granted[0][1]
    if len(granted) == 1:
        return same(first)
    shown = [f"`{_shown(c.text)}` {v.why}" for c, v in granted[:_WHY_COMMANDS]]
    if len(granted) > _WHY_COMMANDS:
        shown.append(f"and {len(granted) - _WHY_COMMANDS} more")
    by_member = any(v.by_member for _, v in granted)
    why = "every command granted: " + "; ".join(shown)
    return seen("granted", why, first.rule_index, None, None, by_member)
