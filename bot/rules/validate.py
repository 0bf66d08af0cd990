"""Validation of a declared `approval_rules` list and alias map (SPEC 2.1).

Every problem is reported, each as `approval_rules[3].mtach: unknown key`; an invalid list is
refused as a whole. Beyond SPEC 2.1, what a glob may cost is bounded (issue 21,
bot/rules/globs.py: its bytes and wildcards from its first `*` on, and in a list the pieces
between two `*` that hold a `?`): checked when a list is declared, never when a stored one is
compiled again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.errors import INVALID_RULES, ApprovalError
from bot.rules.globs import MAX_INNER_QMARK_BYTES, glob_problem, inner_qmark_bytes

MAX_RULES_BYTES = 65_536
RULE_KEYS = ("tool", "verdict", "path", "match", "reason", "origin")
VERDICTS = ("allow", "ask", "deny")
ORIGINS = ("model", "author", "kernel")


class RulesInvalid(ApprovalError):
    """A declared rule list (or alias map) was refused. `problems` lists every problem found."""

    problems: list[str]

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            INVALID_RULES, "; ".join(self.problems), 422, {"problems": list(self.problems)}
        )


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One validated rule, with the defaults filled in."""

    index: int
    tool: str
    verdict: str
    path: str | None
    match: str | None
    reason: str | None
    origin: str


def compact_json(value: object) -> str:
    """The compact JSON text the 64 KiB bound is measured on."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_type(value: object) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _show_key(key: object) -> str:
    if isinstance(key, str) and key and key.isprintable() and len(key) <= 80:
        return key
    if isinstance(key, str):
        return compact_json(key[:80] + ("…" if len(key) > 80 else ""))
    return repr(key)[:80]


def _is_unicode(text: str) -> bool:
    """False when the string holds a lone surrogate (not encodable as UTF-8)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _check_string(
    rule: Mapping[object, object], key: str, at: str, problems: list[str]
) -> str | None:
    """The value at `key` if it is a proper string; records a problem otherwise."""
    value = rule[key]
    if not isinstance(value, str):
        problems.append(f"{at}.{key}: must be a string, not {json_type(value)}")
        return None
    if not _is_unicode(value):
        problems.append(f"{at}.{key}: not valid Unicode (lone surrogate)")
        return None
    return value


def _shown_glob(glob: str) -> str:
    return compact_json(glob if len(glob) <= 40 else glob[:40] + "…")


def tool_glob_problems(tool: str, at: str) -> list[str]:
    """The cost bounds of each `|`-alternative of a `tool` (issue 21), named by the key `at`."""
    found: list[str] = []
    for alternative in tool.split("|"):
        problem = glob_problem(alternative.encode())
        if problem is not None:
            found.append(f"{at}: {problem}, in {_shown_glob(alternative)}")
    return found


def inner_qmark_problem(globs: Sequence[str], at: str) -> str | None:
    """The list-wide bound on the pieces between two `*` that hold a `?` (issue 21), or None."""
    total = sum(inner_qmark_bytes(glob.encode()) for glob in globs)
    if total <= MAX_INNER_QMARK_BYTES:
        return None
    return (
        f"{at}: {total} bytes of pieces between two * that hold a ? "
        f"(at most {MAX_INNER_QMARK_BYTES} in all the globs)"
    )


def _check_rule(
    index: int, rule: object, problems: list[str], bounded: bool, name: str
) -> RuleSpec | None:
    at = f"{name}[{index}]"
    if not isinstance(rule, dict):
        problems.append(f"{at}: must be an object, not {json_type(rule)}")
        return None
    before = len(problems)
    for key in rule:
        if key not in RULE_KEYS:
            problems.append(f"{at}.{_show_key(key)}: unknown key")

    tool: str | None = None
    if "tool" not in rule:
        problems.append(f"{at}.tool: required")
    else:
        tool = _check_string(rule, "tool", at, problems)
        if tool is not None:
            if not tool:
                problems.append(f"{at}.tool: must not be empty")
            elif "" in tool.split("|"):
                problems.append(f"{at}.tool: empty glob in {compact_json(tool)}")
            elif bounded:
                problems.extend(tool_glob_problems(tool, f"{at}.tool"))

    verdict: str | None = None
    if "verdict" not in rule:
        problems.append(f"{at}.verdict: required")
    else:
        verdict = _check_string(rule, "verdict", at, problems)
        if verdict is not None and verdict not in VERDICTS:
            problems.append(
                f"{at}.verdict: must be allow, ask or deny, not {compact_json(verdict)}"
            )

    path: str | None = None
    if "path" in rule:
        path = _check_string(rule, "path", at, problems)
        if path is not None:
            if not path:
                problems.append(f"{at}.path: must not be empty")
            elif "" in path.split("."):
                problems.append(f"{at}.path: empty segment in {compact_json(path)}")

    match: str | None = None
    if "match" in rule:
        match = _check_string(rule, "match", at, problems)
        if "path" not in rule:
            problems.append(f"{at}.match: only allowed together with path")
        elif match is not None and bounded:
            problem = glob_problem(match.encode())
            if problem is not None:
                problems.append(f"{at}.match: {problem}")

    reason: str | None = None
    if "reason" in rule:
        reason = _check_string(rule, "reason", at, problems)

    origin = "model"
    if "origin" in rule:
        given = _check_string(rule, "origin", at, problems)
        if given is not None and given not in ORIGINS:
            problems.append(
                f"{at}.origin: must be model, author or kernel, not {compact_json(given)}"
            )
        origin = given or origin

    if len(problems) != before or tool is None or verdict is None:
        return None
    return RuleSpec(index, tool, verdict, path, match, reason, origin)


def check_rules(
    rules: object, problems: list[str], *, bounded: bool = True, name: str = "approval_rules"
) -> list[RuleSpec]:
    """Validate a declared list, appending every problem found. Returns the rules (if valid).

    `bounded` (a declaration) also applies the cost bounds of issue 21; a list stored before
    them is compiled again with `bounded=False`. `name` is the list's, in the problems."""
    if not isinstance(rules, list):
        problems.append(f"{name}: must be an array, not {json_type(rules)}")
        return []
    try:
        size = len(compact_json(rules).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError, RecursionError):
        problems.append(f"{name}: not a JSON value")
    else:
        if size > MAX_RULES_BYTES:
            problems.append(f"{name}: {size} bytes exceeds the {MAX_RULES_BYTES}-byte bound")
    specs: list[RuleSpec] = []
    for index, rule in enumerate(rules):
        spec = _check_rule(index, rule, problems, bounded, name)
        if spec is not None:
            specs.append(spec)
    if bounded:
        globs = [alt for spec in specs for alt in spec.tool.split("|")]
        globs += [spec.match for spec in specs if spec.match is not None]
        problem = inner_qmark_problem(globs, name)
        if problem is not None:
            problems.append(problem)
    return specs


def specs_of(rules: list[dict[str, str]]) -> list[RuleSpec]:
    """The rules of a list that `check_rules` accepted, without checking them again."""
    return [
        RuleSpec(
            index,
            rule["tool"],
            rule["verdict"],
            rule.get("path"),
            rule.get("match"),
            rule.get("reason"),
            rule.get("origin", "model"),
        )
        for index, rule in enumerate(rules)
    ]


def check_aliases(aliases: object, problems: list[str]) -> dict[str, str]:
    """Validate an alias map (`{"shell": "bash"}`), appending every problem found."""
    if aliases is None:
        return {}
    if not isinstance(aliases, Mapping):
        problems.append(f"aliases: must be an object, not {json_type(aliases)}")
        return {}
    result: dict[str, str] = {}
    for key, value in aliases.items():
        at = f"aliases.{_show_key(key)}"
        if not isinstance(key, str) or not key:
            problems.append(f"{at}: an alias name must be a non-empty string")
        elif not _is_unicode(key):
            problems.append(f"{at}: not valid Unicode (lone surrogate)")
        elif not isinstance(value, str):
            problems.append(f"{at}: must be a string, not {json_type(value)}")
        elif not value:
            problems.append(f"{at}: must not be empty")
        elif not _is_unicode(value):
            problems.append(f"{at}: not valid Unicode (lone surrogate)")
        else:
            result[key] = value
    return result


def validate_rules(rules: object, aliases: object = None) -> list[RuleSpec]:
    """Validate rules and aliases together (with the cost bounds of a declaration); raise
    `RulesInvalid` naming every problem."""
    problems: list[str] = []
    specs = check_rules(rules, problems)
    check_aliases(aliases, problems)
    if problems:
        raise RulesInvalid(problems)
    return specs
