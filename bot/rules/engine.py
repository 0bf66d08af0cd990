"""The decision engine: a validated rule list compiled once into a `Policy` (SPEC 2.3-2.8).

Compiling does all the work that does not depend on the call:

- every `match` glob becomes a predicate (built when first needed), and the globs that share an
  `(origin, path)` become one `MultiGlob` (one RE2 search for a literal piece of each, then
  an exact check of the globs whose piece occurs: bot/rules/globs.py);
- every rule's `tool` alternatives go into one `MultiGlob` per origin.

Evaluating a call then only walks `tool_input` and runs prepared matchers. What depends on the
tool name alone is memoised per `(tool_name, origin)` in a bounded dict (a "plan": the rules whose
tool globs match the resolved name, grouped by path, so each path's text is extracted and encoded
once), and the `Verdict` for a given set of matching rules is memoised per plan too, so a repeat
decision allocates nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal

from bot.errors import (
    APPROVAL_DENIED,
    INVALID_REQUEST,
    TOOL_NOT_DECLARED,
    ApprovalError,
    ErrorValue,
)
from bot.rules.globs import MultiGlob, lazy_predicate, simple_predicate
from bot.rules.paths import Step, encode_text, leaf_text, path_steps, text_bytes_at
from bot.rules.validate import (
    ORIGINS,
    RuleSpec,
    check_aliases,
    check_rules,
    compact_json,
    specs_of,
)
from bot.rules.validate import RulesInvalid as RulesInvalid

Mode = Literal["bypass", "ask", "rules"]
Origin = Literal["model", "author", "kernel"]
Outcome = Literal["granted", "parked", "failed"]

MODES: tuple[Mode, ...] = ("bypass", "ask", "rules")
REASON_MAX_BYTES = 256
_HEX = frozenset("0123456789abcdef")

# Bounds on the memo tables (per policy). Past the bound a table is simply emptied: a flood of
# distinct tool names costs recomputation, never unbounded memory.
_PLAN_CACHE_MAX = 1024
_VERDICT_CACHE_MAX = 256
# Up to this many simple-shape `match` globs (`lit`, `lit*`, `*lit`, `*lit*`) for one tool on one
# path, plain string methods beat one RE2 set call (~0.5 µs); any other glob goes to the set.
_SMALL_GROUP = 3


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision on one call. `error` is set exactly when `outcome == "failed"`."""

    outcome: Outcome
    tool: str
    error: ErrorValue | None
    matched: tuple[int, ...]
    rule_index: int | None
    why: str
    by_member: bool = False

    def to_json(self) -> dict[str, Any]:
        """`{"tool", "outcome", "error", "matched"}` as the CLI prints it."""
        return {
            "tool": self.tool,
            "outcome": self.outcome,
            "error": None if self.error is None else self.error.to_json(),
            "matched": list(self.matched),
        }


def strip_runner_suffix(tool_name: str) -> str:
    """`bash__0123456789ab` -> `bash`: a `__` + exactly 12 lowercase hex digits suffix goes."""
    if (
        len(tool_name) > 14
        and tool_name[-14:-12] == "__"
        and all(c in _HEX for c in tool_name[-12:])
    ):
        return tool_name[:-14]
    return tool_name


def cut_reason(reason: str, limit: int = REASON_MAX_BYTES) -> str:
    """The first `limit` bytes of `reason` in UTF-8, never splitting a character."""
    raw = reason.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return reason
    return raw[:limit].decode("utf-8", "ignore")


def member_denial_detail(member: str, reason: str | None) -> str:
    """SPEC 2.8 for a person's deny: their reason, or `denied by MEMBER`."""
    return reason if reason else f"denied by {member}"


@dataclass(frozen=True, slots=True)
class _Rule:
    index: int
    verdict: str
    origin: str
    tool: str
    path: tuple[Step, ...] | None
    reason: str | None  # already cut to 256 bytes; None when absent or empty
    predicate: Callable[[bytes], bool] | None  # the `match` glob
    simple: bool  # the glob is a simple shape whose predicate costs about one string method


@dataclass(frozen=True, slots=True)
class _PathSet:
    """Every `match` glob of one origin on one path, as one multi-pattern matcher."""

    match_all: Callable[[bytes], list[int]]
    rule_of: tuple[int, ...]  # matcher-local index -> rule index


# What one plan checks on one path, as a plain tuple (unpacked in the hot loop):
# (key: the single key when the path is one object key, else None; steps: the whole path;
#  present: rules with this path and no `match`; predicates: (rule index, glob predicate) pairs;
#  match_all: the path's multi-pattern matcher or None; table: matcher-local index -> rule index,
#  or -1 for a glob of a rule about another tool)
_Group = tuple[
    str | None,
    tuple[Step, ...],
    tuple[int, ...],
    tuple[tuple[int, Callable[[bytes], bool]], ...],
    Callable[[bytes], list[int]] | None,
    tuple[int, ...],
]


@dataclass(slots=True)
class _Plan:
    tool: str
    origin: str
    collect: Callable[[object], tuple[int, ...]]  # tool_input -> matching rule indices
    undeclared: Verdict
    verdicts: dict[tuple[tuple[int, ...], str, bool], Verdict]


def _group_hits(group: _Group, tool_input: object) -> list[int]:
    """The rules of one path group that match (general path, any number of groups)."""
    single, steps, present, predicates, match_all, table = group
    if single is not None and type(tool_input) is dict:
        text = leaf_text(tool_input.get(single))
    else:
        text = text_bytes_at(tool_input, steps)
    if text is None:
        return []
    hits = list(present)
    hits.extend(index for index, check in predicates if check(text))
    if match_all is not None:
        hits.extend(r for r in map(table.__getitem__, match_all(text)) if r >= 0)
    return hits


def _collector(
    static: tuple[int, ...], groups: list[_Group]
) -> Callable[[object], tuple[int, ...]]:
    """A closure computing the matching rules of one plan from `tool_input`.

    The common shapes get a specialised closure: no path at all, or one path that is a single
    object key checked by one multi-pattern matcher (everything bound as closure cells, so a
    call that matches nothing costs one dict lookup, one encode and one matcher call).
    """
    if not groups:
        return lambda tool_input: static

    if len(groups) == 1:
        single, steps, present, predicates, match_all, table = groups[0]
        if single is not None and match_all is not None and not present and not predicates:
            key: str = single

            def collect_one(tool_input: object) -> tuple[int, ...]:
                if type(tool_input) is dict:
                    value = tool_input.get(key)
                    if type(value) is str:
                        try:
                            text = value.encode()
                        except UnicodeEncodeError:
                            text = value.encode("utf-8", "surrogatepass")
                    else:
                        leaf = leaf_text(value)
                        if leaf is None:
                            return static
                        text = leaf
                else:
                    walked = text_bytes_at(tool_input, steps)
                    if walked is None:
                        return static
                    text = walked
                hits: list[int] | None = None
                for found in match_all(text):
                    rule = table[found]
                    if rule >= 0:
                        if hits is None:
                            hits = [rule]
                        else:
                            hits.append(rule)
                if hits is None:
                    return static
                return tuple(sorted((*static, *hits)))

            return collect_one

    frozen = tuple(groups)

    def collect(tool_input: object) -> tuple[int, ...]:
        hits: list[int] = []
        for group in frozen:
            hits += _group_hits(group, tool_input)
        if not hits:
            return static
        return tuple(sorted((*static, *hits)))

    return collect


@dataclass(frozen=True, slots=True)
class _ToolSet:
    match_all: Callable[[bytes], list[int]]
    rule_of: tuple[int, ...]  # alternative index -> rule index


@dataclass(frozen=True)
class Policy:
    """A validated, compiled rule list plus alias map. Build it with `compile_policy`."""

    rules_json: list[dict[str, Any]]
    aliases: Mapping[str, str]
    _rules: tuple[_Rule, ...] = field(repr=False, compare=False)
    _tool_sets: Mapping[str, _ToolSet] = field(repr=False, compare=False)
    _path_sets: Mapping[tuple[str, str], _PathSet] = field(repr=False, compare=False)
    _plans: dict[str, dict[str, _Plan]] = field(repr=False, compare=False)

    def resolve_tool(self, tool_name: str) -> str:
        """Strip a runner suffix (`__` + 12 lowercase hex), then apply the alias map."""
        stripped = strip_runner_suffix(tool_name)
        return self.aliases.get(stripped, stripped)

    def evaluate(
        self,
        *,
        tool_name: str,
        tool_input: object,
        origin: Origin = "model",
        mode: Mode,
        member: bool = False,
        tool_names: frozenset[str] | None = None,
    ) -> Verdict:
        """Decide one call.

        `tool_names` (the effective declared tools) is checked first, for every origin: a
        resolved name outside it fails `tool_not_declared` before any rule is consulted.
        """
        plans = self._plans.get(origin)
        plan = None if plans is None else plans.get(tool_name)
        if plan is None:
            plan = self._plan(tool_name, origin)
        if tool_names is not None and plan.tool not in tool_names:
            if mode not in MODES:
                self._decide(plan, (), mode, False)  # raises the invalid-mode error
            return plan.undeclared
        matched = plan.collect(tool_input)
        member = member and origin == "author"
        key = (matched, mode, member)
        verdict = plan.verdicts.get(key)
        if verdict is None:
            verdict = self._decide(plan, matched, mode, member)
            if len(plan.verdicts) >= _VERDICT_CACHE_MAX:
                plan.verdicts.clear()
            plan.verdicts[key] = verdict
        return verdict

    # -- the slow paths: once per tool name, once per distinct set of matching rules ----------

    def _plan(self, tool_name: str, origin: str) -> _Plan:
        if origin not in ORIGINS:
            raise ApprovalError(
                INVALID_REQUEST,
                f"unknown origin {compact_json(origin)} (expected model, author or kernel)",
                422,
            )
        if not isinstance(tool_name, str):
            raise ApprovalError(INVALID_REQUEST, "tool_name must be a string", 422)
        tool = self.resolve_tool(tool_name)
        rules = self._rules
        tool_set = self._tool_sets.get(origin)
        chosen: set[int] = set()
        if tool_set is not None:
            chosen = {tool_set.rule_of[a] for a in tool_set.match_all(encode_text(tool))}
        static: list[int] = []
        by_path: dict[tuple[Step, ...], list[_Rule]] = {}
        for index in sorted(chosen):
            rule = rules[index]
            if rule.path is None:
                static.append(index)
            else:
                by_path.setdefault(rule.path, []).append(rule)
        groups: list[_Group] = []
        for steps, members in by_path.items():
            present = tuple(r.index for r in members if r.predicate is None)
            with_match = [r for r in members if r.predicate is not None]
            predicates: tuple[tuple[int, Callable[[bytes], bool]], ...] = ()
            match_all = None
            table: tuple[int, ...] = ()
            path_set = self._path_sets.get((origin, ".".join(s for s, _ in steps)))
            use_set = len(with_match) > _SMALL_GROUP or not all(r.simple for r in with_match)
            if use_set and path_set is not None:
                wanted = {r.index for r in with_match}
                match_all = path_set.match_all
                table = tuple(r if r in wanted else -1 for r in path_set.rule_of)
            else:
                predicates = tuple((r.index, r.predicate) for r in with_match if r.predicate)
            key = steps[0][0] if len(steps) == 1 else None
            groups.append((key, steps, present, predicates, match_all, table))
        undeclared = Verdict(
            outcome="failed",
            tool=tool,
            error=ErrorValue(TOOL_NOT_DECLARED, f"tool {tool} is not declared for this run"),
            matched=(),
            rule_index=None,
            why=f"{tool} is not among the tools declared for this run",
        )
        plan = _Plan(tool, origin, _collector(tuple(static), groups), undeclared, {})
        plans = self._plans.setdefault(origin, {})
        if len(plans) >= _PLAN_CACHE_MAX:
            plans.clear()
        plans[tool_name] = plan
        return plan

    def _decide(self, plan: _Plan, matched: tuple[int, ...], mode: str, member: bool) -> Verdict:
        if mode not in MODES:
            raise ApprovalError(
                INVALID_REQUEST,
                f"unknown approval_mode {compact_json(mode)} (expected bypass, ask or rules)",
                422,
            )
        tool, origin, rules = plan.tool, plan.origin, self._rules
        first: dict[str, int] = {}
        for index in matched:
            first.setdefault(rules[index].verdict, index)

        def verdict(
            outcome: Outcome,
            why: str,
            rule_index: int | None,
            error: ErrorValue | None = None,
            by_member: bool = False,
        ) -> Verdict:
            return Verdict(outcome, tool, error, matched, rule_index, why, by_member)

        if "deny" in first:
            index = first["deny"]
            reason = rules[index].reason
            detail = reason if reason is not None else f"approval rule {index} denies {tool}"
            why = f"denied by rule {index}" + (f": {reason}" if reason is not None else "")
            return verdict("failed", why, index, ErrorValue(APPROVAL_DENIED, detail))

        if origin != "model":  # author and kernel rows: pre-approved unless a rule opts them in
            if "ask" in first:
                index = first["ask"]
                if member:
                    return verdict(
                        "granted", "your own command: approved by you", index, None, True
                    )
                return verdict("parked", f"rule {index} (ask) matches {tool}", index)
            if "allow" in first:
                return verdict("granted", f"allowed by rule {first['allow']}", first["allow"])
            return verdict("granted", f"{origin} call pre-approved", None)

        if "ask" in first:
            index = first["ask"]
            if mode == "bypass":
                return verdict("granted", f"granted in bypass mode (rule {index} asks)", None)
            return verdict("parked", f"rule {index} (ask) matches {tool}", index)
        if "allow" in first:
            return verdict("granted", f"allowed by rule {first['allow']}", first["allow"])
        if mode == "bypass":
            return verdict("granted", "granted in bypass mode", None)
        if mode == "ask":
            return verdict("parked", f"no rule allows {tool} in ask mode", None)
        return verdict(
            "failed",
            f"no approval rule allows {tool} in rules mode",
            None,
            ErrorValue(APPROVAL_DENIED, f"no approval rule allows {tool}"),
        )


def _compile(specs: list[RuleSpec], aliases: dict[str, str], rules_json: list[Any]) -> Policy:
    rules: list[_Rule] = []
    tool_alts: dict[str, tuple[list[bytes], list[int]]] = {}
    path_globs: dict[tuple[str, str], tuple[list[bytes], list[int]]] = {}
    for spec in specs:
        pattern = None if spec.match is None else encode_text(spec.match)
        reason = cut_reason(spec.reason) if spec.reason else None
        rules.append(
            _Rule(
                index=spec.index,
                verdict=spec.verdict,
                origin=spec.origin,
                tool=spec.tool,
                path=None if spec.path is None else path_steps(spec.path),
                reason=reason,
                predicate=None if pattern is None else lazy_predicate(pattern),
                simple=pattern is not None and simple_predicate(pattern) is not None,
            )
        )
        alts, owners = tool_alts.setdefault(spec.origin, ([], []))
        for alt in spec.tool.split("|"):
            alts.append(encode_text(alt))
            owners.append(spec.index)
        if pattern is not None and spec.path is not None:
            globs, owners = path_globs.setdefault((spec.origin, spec.path), ([], []))
            globs.append(pattern)
            owners.append(spec.index)
    tool_sets = {
        origin: _ToolSet(MultiGlob(alts).match_all, tuple(owners))
        for origin, (alts, owners) in tool_alts.items()
    }
    path_sets = {
        key: _PathSet(MultiGlob(globs, backend="re2").match_all, tuple(owners))
        for key, (globs, owners) in path_globs.items()
    }
    return Policy(
        rules_json=rules_json,
        aliases=MappingProxyType(dict(aliases)),
        _rules=tuple(rules),
        _tool_sets=MappingProxyType(tool_sets),
        _path_sets=MappingProxyType(path_sets),
        _plans={},
    )


@lru_cache(maxsize=256)
def _compile_cached(text: str, alias_items: tuple[tuple[str, str], ...]) -> Policy:
    rules_json = json.loads(text)  # validated by `compile_policy` before it comes here
    return _compile(specs_of(rules_json), dict(alias_items), rules_json)


def compile_policy(
    rules: object, aliases: Mapping[str, str] | None = None, *, bounded: bool = True
) -> Policy:
    """Validate (raising `RulesInvalid` with every problem) and compile a declared rule list.

    Equal declarations share one compiled `Policy` (a bounded memo keyed on the compact JSON
    text), so a hundred runs on one profile compile it once and share its plan caches.
    `bounded=False` skips the cost bounds of a declaration (issue 21), for a list stored before
    them (a run's frozen rules): what was accepted once keeps working.
    """
    problems: list[str] = []
    specs = check_rules(rules, problems, bounded=bounded)
    alias_map = check_aliases(aliases, problems)
    if problems:
        raise RulesInvalid(problems)
    del specs  # recomputed (cheaply) inside the memo from the canonical text
    return _compile_cached(compact_json(rules), tuple(sorted(alias_map.items())))
