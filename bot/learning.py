"""Rules learned from people's decisions ("approve always"), pure: no I/O.

A person approving a parked call may ask to allow calls like it from now on. The service proposes
the narrowest rule that would have allowed this call (`propose`), checks the person's version of
it like any declared rule (`check_rule`), and from then on consults the learned rules of a run
after its declared rules (`apply`):

    declared deny  >  learned allow  >  declared ask  >  declared allow

A learned rule can never beat a deny (a deny is never overturned, SPEC 2.5), but it does beat the
declared `ask` that parked the call it was learned from — otherwise learning would change
nothing — and it grants what a `rules`-mode run would refuse for want of an allow rule.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from bot import errors
from bot.domain import Task
from bot.errors import ApprovalError
from bot.rules import Policy, RulesInvalid, Verdict, compile_policy, compound, text_at
from bot.rules.paths import path_steps
from bot.rules.shell import read_line
from bot.rules.validate import MAX_RULES_BYTES, check_rules, compact_json

# Refusals of this feature (candidates for bot.errors).
RULE_DOES_NOT_MATCH = "rule_does_not_match"
NO_PROFILE = "no_profile"

SCOPES = ("run", "profile")
# The replay (`would_allow`): how far back, how many it lists, and how many past calls it reads.
REPLAY_DAYS = 30
REPLAY_LIMIT = 50
REPLAY_SCAN = 5000

# The first two words of a command and the whitespace after them.
_TWO_WORDS = re.compile(r"\s*\S+\s+\S+(\s)")


@dataclass(frozen=True)
class AllowSpec:
    """What a person asks for with "Approve & allow like this": the scope, and the rule (the
    proposal when None)."""

    scope: str
    rule: Any = None


@dataclass(frozen=True, slots=True)
class LearnedRule:
    """A learned rule as the store keeps it. `run_id` is set for scope `run` (the run it
    belongs to), `profile` for scope `profile`; `from_run_id`/`from_key` name the decision."""

    id: str
    workspace_id: str
    rule: dict[str, Any]
    scope: str
    profile: str | None
    run_id: str | None
    added_by: str
    from_run_id: str
    from_key: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Proposal:
    """The rules proposed for a decision (`rule` the first; a compound shell line gets one per
    command not already granted) and the past calls the first would have allowed."""

    rule: dict[str, Any]
    would_allow: list[Task]
    rules: tuple[dict[str, Any], ...] = ()


def literal(text: str) -> str:
    """The narrowest glob matching `text` itself: a `*` or `?` of the call's own text becomes
    `?` (one byte), so the agent's wildcards never widen the rule."""
    return text.replace("*", "?")


def _command_glob(text: str) -> str:
    """One command of a shell line: `git push origin main` -> `git push *`; a command of one or
    two words stays as it is (the narrowest rule that allows it). The rule is judged per
    command on a shell path, so nothing chained after it rides on the `*`."""
    found = _TWO_WORDS.match(text)
    return literal(text) if found is None else literal(text[: found.end()]) + "*"


def _folder_glob(path: str) -> str:
    """`src/app/x.py` -> `src/app/*`; a bare file name stays as it is (its wildcards `?`)."""
    folder = posixpath.dirname(path)
    if not folder:
        return literal(path)
    return literal(folder.rstrip("/")) + "/*"


def propose(
    tool: str,
    tool_input: Any,
    origin: str = "model",
    shell_commands: Sequence[dict[str, str]] = (),
) -> dict[str, Any]:
    """The narrowest rule that would allow this call, generalised one step: the tool plus the
    folder of a `path`/`file_path`; on a shell path the first two words of its (first) command;
    any other `command` exactly as it is (a longer line never rides on it); else the tool."""
    return propose_all(tool, tool_input, origin, shell_commands)[0]


def propose_all(
    tool: str,
    tool_input: Any,
    origin: str = "model",
    shell_commands: Sequence[dict[str, str]] = (),
    granted: Callable[[Any], bool] | None = None,
) -> list[dict[str, Any]]:
    """`propose`, with one rule per command of a compound shell line that the run does not
    already grant (`granted`: the run's judgement of the call with one command's text at its
    path); never an empty list."""
    # `|` separates alternatives in a rule's `tool`, `*` and `?` are wildcards: each of them in
    # the tool's own name is `?` (one byte, the narrowest glob that still matches it).
    rule: dict[str, Any] = {"tool": literal(tool.replace("|", "?")) or "?", "verdict": "allow"}
    if origin != "model":
        rule["origin"] = origin
    lines = compound.shell_lines(compound.compile_shell(shell_commands), tool, tool_input)
    if lines:
        rules: list[dict[str, Any]] = []
        for steps, line in lines:
            path = ".".join(key for key, _ in steps)
            for command in read_line(line).commands:
                if not command.needs_grant:
                    continue
                if granted is not None and granted(
                    compound.with_text(tool_input, steps, command.text)
                ):
                    continue
                proposed = rule | {"path": path, "match": _command_glob(command.text)}
                if proposed not in rules:
                    rules.append(proposed)
        if rules:
            return rules
    if isinstance(tool_input, dict):
        for key in ("path", "file_path"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return [rule | {"path": key, "match": _folder_glob(value)}]
        text = text_at(tool_input, "command")
        if text:
            return [rule | {"path": "command", "match": literal(text)}]
    return [rule]


def _renamed(problems: Iterable[str], at: str) -> list[str]:
    return [
        p.replace("approval_rules[0]", at, 1).replace("approval_rules", at, 1) for p in problems
    ]


def check_rule(
    rule: Any,
    *,
    tool_name: str,
    tool_input: Any,
    origin: str,
    aliases: dict[str, str],
    at: str = "allow.rule",
    shell_commands: Sequence[dict[str, str]] = (),
) -> dict[str, Any]:
    """The person's rule, validated like a declared list (problems named `allow.rule.mtach`),
    its verdict `allow` (filled in when left out); it must match the call it is learned from,
    or on a shell path one of the call's commands (else `422 rule_does_not_match`)."""
    if isinstance(rule, dict) and "verdict" not in rule:
        rule = {**rule, "verdict": "allow"}
    problems: list[str] = []
    check_rules([rule], problems)
    if not problems and rule["verdict"] != "allow":
        problems.append(f"{at}.verdict: a learned rule allows: allow or left out")
    if problems:
        raise RulesInvalid(_renamed(problems, at))
    policy = compile_policy([rule], aliases)

    def grants(call_input: Any) -> bool:
        verdict = policy.evaluate(
            tool_name=tool_name,
            tool_input=call_input,
            origin=origin,  # type: ignore[arg-type]
            mode="rules",
        )
        return verdict.outcome == "granted"

    tool = policy.resolve_tool(tool_name)
    shell = compound.compile_shell(shell_commands)
    inputs = [tool_input] + [
        compound.with_text(tool_input, steps, command.text)
        for steps, line in compound.shell_lines(shell, tool, tool_input)
        for command in read_line(line).commands
    ]
    if not any(grants(call_input) for call_input in inputs):
        raise ApprovalError(
            RULE_DOES_NOT_MATCH,
            f"{at} {compact_json(rule)} does not match the call it would be learned from",
            422,
        )
    return dict(rule)


def check_profile_shell(
    rules: Sequence[Any],
    tool: str,
    run_shell: Sequence[dict[str, str]],
    profile_shell: Sequence[dict[str, str]],
) -> None:
    """A rule learned for a profile must mean there what it means in the run it comes from: on
    a path the run judges command by command and the profile does not, a later run of the
    profile would match its glob against whole lines (`git push *` against
    `git push x && rm -rf ~`). Such a rule is learned for the run only."""
    run_paths = compound.compile_shell(run_shell)
    profile_paths = compound.compile_shell(profile_shell)
    ours = set() if run_paths is None else set(run_paths.paths_for(tool))
    theirs = set() if profile_paths is None else set(profile_paths.paths_for(tool))
    for rule in rules:
        path = rule.get("path") if isinstance(rule, dict) else None
        if not isinstance(path, str):
            continue
        steps = path_steps(path)
        if steps in ours and steps not in theirs:
            raise ApprovalError(
                errors.INVALID_REQUEST,
                f"allow.scope: this run reads {tool} {path} as a shell line, command by "
                "command, and its profile does not: learn with scope run",
                422,
            )


def check_scope(spec: AllowSpec, profile: str | None) -> None:
    if spec.scope not in SCOPES:
        raise ApprovalError(errors.INVALID_REQUEST, "allow.scope: must be run or profile", 422)
    if spec.scope == "profile" and profile is None:
        raise ApprovalError(
            NO_PROFILE,
            "allow.scope: this run was not declared from a profile; learn with scope run",
            422,
        )


def with_rule(learned: Sequence[dict[str, Any]], rule_id: str, rule: dict[str, Any]) -> list[Any]:
    """A run's learned list with one more, refused whole if it outgrows a declared list."""
    grown = [*learned, {"id": rule_id, "rule": rule}]
    size = len(compact_json([e["rule"] for e in grown]).encode())
    if size > MAX_RULES_BYTES:
        raise ApprovalError(
            errors.INVALID_RULES,
            f"learned rules: {size} bytes exceeds the {MAX_RULES_BYTES}-byte bound of a rule list",
            422,
        )
    return grown


def _learnable(verdict: Verdict) -> bool:
    """Whether a learned allow may change this verdict: a park, or a `rules`-mode refusal for
    want of an allow rule. Never a deny (it names its rule), never an undeclared tool."""
    if verdict.outcome == "parked":
        return True
    error = verdict.error
    return (
        verdict.outcome == "failed"
        and verdict.rule_index is None
        and error is not None
        and error.code == errors.APPROVAL_DENIED
    )


def apply(
    verdict: Verdict,
    learned: Policy | None,
    ids: Sequence[str],
    *,
    tool_name: str,
    tool_input: Any,
    origin: str,
) -> Verdict:
    """The declared verdict, or `granted` by the first learned rule that matches when the
    declared rules neither deny the call nor leave its tool undeclared."""
    if learned is None or not _learnable(verdict):
        return verdict
    hit = learned.evaluate(
        tool_name=tool_name,
        tool_input=tool_input,
        origin=origin,  # type: ignore[arg-type]
        mode="rules",
    )
    if hit.outcome != "granted" or hit.rule_index is None:
        return verdict
    rule_id = ids[hit.rule_index]
    return replace(verdict, outcome="granted", error=None, why=f"allowed by learned rule {rule_id}")


def replayed(
    rule: dict[str, Any] | Sequence[dict[str, Any]],
    calls: Iterable[Task],
    limit: int = REPLAY_LIMIT,
    shell_commands: Sequence[dict[str, str]] = (),
) -> list[Task]:
    """The past calls the rule (or the rules, learned together) would have allowed, from what
    they recorded: every call it matches except those a deny rule refused or whose tool was not
    declared (a learned rule allows neither). Calls a person denied are listed: the rule would
    have let them through. On a shell path a call is judged as a new one would be: command by
    command, so a compound line needs every one of its commands allowed by the rules."""
    policy = compile_policy([rule] if isinstance(rule, dict) else list(rule))
    shell = compound.compile_shell(shell_commands)
    found: list[Task] = []
    for task in calls:
        if task.kind != "tool_call" or _refused_by_rules(task):
            continue

        def decide(call_input: Any, task: Task = task) -> Verdict:
            return policy.evaluate(
                tool_name=task.tool,  # already resolved by its run's aliases
                tool_input=call_input,  # the call as the agent made it
                origin=task.origin,  # type: ignore[arg-type]
                mode="rules",
            )

        judged = compound.judge(decide, task.tool_input, shell, mode="rules", origin=task.origin)
        if judged.verdict.outcome == "granted":
            found.append(task)
            if len(found) >= limit:
                break
    return found


def _refused_by_rules(task: Task) -> bool:
    if task.state != "failed" or task.via != "engine":
        return False
    code = (task.error or {}).get("code")
    return code == errors.TOOL_NOT_DECLARED or (
        code == errors.APPROVAL_DENIED and task.rule_index is not None
    )
