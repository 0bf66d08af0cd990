"""Several approvers (issue 15, section 3): which requirements a call meets, who may review it,
and whether its approvals so far are enough. Pure: the store-side steps are
bot/lifecycle/quorum.py's.

A run (or a profile) declares, beside its rules, `approval_requirements`:
`[{"tool": "deploy|bash", "path"?, "match"?, "approvals": 2, "groups"?: ["leads"]}]`. `tool`,
`path` and `match` read exactly as in a rule (anchored globs on the resolved tool name, SPEC 2),
so they are compiled by the rule engine itself. A parked call must meet **every** requirement
that matches it: each needs `approvals` distinct people, and with `groups`, people of one of
those groups (one person counts toward every requirement they qualify for).

`forbid_self_approval: true` with `on_behalf_of: "alice"` (the person the run acts for) keeps
alice from approving the run's calls; she may still deny them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot import errors
from bot.domain import Run, Task
from bot.errors import ApprovalError
from bot.rules import Policy, compile_policy
from bot.rules.validate import RulesInvalid, check_rules, compact_json, json_type

# The codes of this feature's refusals (409 / 403; the declaration's are 422).
ALREADY_REVIEWED = "already_reviewed"
SELF_APPROVAL_FORBIDDEN = "self_approval_forbidden"
NOT_AN_ELIGIBLE_APPROVER = "not_an_eligible_approver"
UNKNOWN_GROUP = "unknown_group"
UNKNOWN_MEMBER = "unknown_member"

REQUIREMENT_KEYS = ("tool", "path", "match", "approvals", "groups")
MAX_APPROVALS = 50  # more distinct people than any team asks for one call
MAX_REQUIREMENTS = 100
GROUP_NAME_LIMIT = 64
_ITEM = re.compile(r"approval_requirements\[(\d+)\]")  # a problem of one requirement


def _at(index: int) -> str:
    return f"approval_requirements[{index}]"


def check_requirements(value: object) -> list[dict[str, Any]]:
    """The declared list, normalised (groups de-duplicated, in order); every problem is
    reported at once as `approval_requirements[1].mtach: unknown key` (`422 invalid_rules`)."""
    problems: list[str] = []
    if not isinstance(value, list):
        raise RulesInvalid([f"approval_requirements: must be an array, not {json_type(value)}"])
    if len(value) > MAX_REQUIREMENTS:
        raise RulesInvalid([f"approval_requirements: at most {MAX_REQUIREMENTS} requirements"])
    # tool/path/match are a rule's: the engine's validation checks them (with what one glob may
    # cost, and the list's size and `?` bounds: issue 21) and names them like ours. Nothing is
    # compiled here: the requirements are compiled together when a call first needs them.
    selectors = [
        {k: item[k] for k in ("tool", "path", "match") if k in item} | {"verdict": "ask"}
        if isinstance(item, dict)
        else item
        for item in value
    ]
    found: list[str] = []
    check_rules(selectors, found, name="approval_requirements")
    of_item: dict[int, list[str]] = {}
    of_list: list[str] = []
    for problem in found:
        named = _ITEM.match(problem)
        if named is None:
            of_list.append(problem)
        else:
            of_item.setdefault(int(named.group(1)), []).append(problem)
    out: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        at = _at(index)
        if not isinstance(item, dict):
            problems.extend(of_item.get(index, ()))  # must be an object
            continue
        before = len(problems)
        for key in item:
            if key not in REQUIREMENT_KEYS:
                shown = key if isinstance(key, str) and key.isprintable() else compact_json(key)
                problems.append(f"{at}.{str(shown)[:80]}: unknown key")
        approvals = item.get("approvals")
        if "approvals" not in item:
            problems.append(f"{at}.approvals: required")
        elif (
            isinstance(approvals, bool)
            or not isinstance(approvals, int)
            or not 1 <= approvals <= MAX_APPROVALS
        ):
            problems.append(f"{at}.approvals: a whole number from 1 to {MAX_APPROVALS}")
        groups = item.get("groups")
        if "groups" in item:
            if not isinstance(groups, list) or not groups:
                problems.append(f"{at}.groups: a non-empty array of group names")
            elif not all(isinstance(g, str) and group_name_ok(g) for g in groups):
                problems.append(f"{at}.groups: each a group name (1-{GROUP_NAME_LIMIT} chars)")
        problems.extend(of_item.get(index, ()))
        if len(problems) == before:
            normal: dict[str, Any] = {k: item[k] for k in ("tool", "path", "match") if k in item}
            normal["approvals"] = approvals
            if groups is not None:
                normal["groups"] = list(dict.fromkeys(groups))
            out.append(normal)
    problems.extend(of_list)
    if problems:
        raise RulesInvalid(problems)
    return out


def group_name_ok(name: str) -> bool:
    return 0 < len(name) <= GROUP_NAME_LIMIT and name.isprintable() and name.strip() == name


def _selector(requirement: Mapping[str, Any]) -> tuple[Any, ...]:
    groups = requirement.get("groups")
    return (
        requirement.get("tool"),
        requirement.get("path"),
        requirement.get("match"),
        None if groups is None else tuple(sorted(groups)),
    )


def tighten(
    base: Sequence[Mapping[str, Any]],
    base_forbid: bool,
    extra: Sequence[Mapping[str, Any]] | None,
    forbid: bool | None,
) -> tuple[list[dict[str, Any]], bool]:
    """A run's requirements over its profile's (or parent run's): it may add requirements, ask
    more approvals of one the base has (same tool, path, match and groups), and turn
    `forbid_self_approval` on; fewer approvals or turning it off is `422 approval_widening`."""
    if base_forbid and forbid is False:
        raise ApprovalError(
            errors.APPROVAL_WIDENING,
            "forbid_self_approval: the profile forbids self-approval; a run cannot allow it",
            422,
        )
    merged = [dict(r) for r in base]
    # Only the base's count binds: two of the run's own with one selector keep the larger.
    based = {_selector(r): int(r["approvals"]) for r in base}
    for index, requirement in enumerate(extra or ()):
        have = based.get(_selector(requirement))
        if have is not None and requirement["approvals"] < have:
            raise ApprovalError(
                errors.APPROVAL_WIDENING,
                f"{_at(index)}.approvals: fewer than the {have} the profile asks for",
                422,
            )
        same = [i for i, r in enumerate(merged) if _selector(r) == _selector(requirement)]
        if not same:
            merged.append(dict(requirement))
        elif requirement["approvals"] >= merged[same[0]]["approvals"]:
            merged[same[0]] = dict(requirement)
    return merged, bool(base_forbid or forbid)


def group_names(requirements: Sequence[Mapping[str, Any]]) -> set[str]:
    """Every group the requirements name (each must exist when the run is declared)."""
    return {g for r in requirements for g in r.get("groups") or ()}


def _policy(requirements: Sequence[Mapping[str, Any]], aliases: Mapping[str, str]) -> Policy:
    # Each requirement as an `ask` rule: the engine reports every rule that matches a call.
    # No origin: a requirement covers a parked call whatever its origin (evaluated as `model`).
    # Stored requirements were checked when they were declared: never refused again here.
    rules = [{k: r[k] for k in ("tool", "path", "match") if k in r} for r in requirements]
    return compile_policy([rule | {"verdict": "ask"} for rule in rules], aliases, bounded=False)


def compiled(requirements: Sequence[Mapping[str, Any]], aliases: Mapping[str, str]) -> None:
    """Compile the requirements into the shared memo, before a call needs them (a declaration
    does it off the event loop)."""
    if requirements:
        _policy(requirements, aliases)


def matching(
    requirements: Sequence[Mapping[str, Any]],
    aliases: Mapping[str, str],
    tool_name: str,
    tool_input: Any,
) -> list[Mapping[str, Any]]:
    """The requirements a call must meet (those whose tool, path and match it matches)."""
    if not requirements:
        return []
    verdict = _policy(requirements, aliases).evaluate(
        tool_name=tool_name, tool_input=tool_input, origin="model", mode="rules"
    )
    return [requirements[i] for i in verdict.matched]


def matching_edit(
    requirements: Sequence[Mapping[str, Any]],
    aliases: Mapping[str, str],
    tool_name: str,
    proposed: Any,
    edited: Any,
) -> list[Mapping[str, Any]]:
    """The requirements an edited call must meet: those of the call as proposed and those of
    the edit. An edit never loosens a quorum: one person rewording `git push …` so that no
    requirement matches it any more (a leading space) must not approve it alone."""
    found = matching(requirements, aliases, tool_name, proposed)
    if edited is None:
        return found
    more = matching(requirements, aliases, tool_name, edited)
    return [*found, *(r for r in more if all(r is not f for f in found))]


def required(found: Sequence[Mapping[str, Any]]) -> int:
    """How many approvals the task asks for at least (the largest matching requirement's)."""
    return max((int(r["approvals"]) for r in found), default=1)


def qualifies(requirement: Mapping[str, Any], groups: Collection[str]) -> bool:
    wanted = requirement.get("groups")
    return wanted is None or any(g in groups for g in wanted)


def eligible(found: Sequence[Mapping[str, Any]], groups: Collection[str]) -> bool:
    """Whether a person of these groups may review a call with these requirements: they must
    count toward at least one of them (none: everyone may)."""
    return not found or any(qualifies(r, groups) for r in found)


def is_met(
    found: Sequence[Mapping[str, Any]],
    given: Sequence[str],
    groups_of: Mapping[str, Collection[str]],
) -> bool:
    """Whether the distinct approvers `given` meet every requirement in `found`."""
    people = list(dict.fromkeys(given))
    if not found:
        return len(people) >= 1
    return all(
        sum(qualifies(r, groups_of.get(name, ())) for name in people) >= int(r["approvals"])
        for r in found
    )


def may_still_approve(
    found: Sequence[Mapping[str, Any]],
    given: Sequence[str],
    groups_of: Mapping[str, Collection[str]],
    members: Sequence[str],
    excluded: Collection[str] = (),
) -> list[str]:
    """The members (of `members`, in its order) whose approval would still count toward a
    requirement not yet met: not those who approved, not `excluded` (the person the run acts
    for, under forbid_self_approval). `groups_of` must cover `members` and `given`."""
    open_ones = [
        r
        for r in found
        if sum(qualifies(r, groups_of.get(n, ())) for n in dict.fromkeys(given))
        < int(r["approvals"])
    ]
    return [
        name
        for name in members
        if name not in given
        and name not in excluded
        and any(qualifies(r, groups_of.get(name, ())) for r in open_ones)
    ]


def at_park(run: Run, task: Task) -> None:
    """Set the count a call parking for a person needs, when a requirement matches it."""
    if task.kind != "tool_call" or not run.approval_requirements:
        return
    found = matching(run.approval_requirements, run.aliases, task.tool_name, task.tool_input)
    if found:
        task.required_approvals = required(found)
        task.approvals_given = []


@dataclass(frozen=True, slots=True)
class Approvals:
    """A quorum task's count: `{"required": 2, "given": [{"by": "alice", "at": "…"}]}`."""

    required: int
    given: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {"required": self.required, "given": [dict(g) for g in self.given]}

    @property
    def names(self) -> list[str]:
        return [str(g["by"]) for g in self.given]


@dataclass(frozen=True, slots=True)
class GroupInUse:
    """What a change to a group would do to the running runs whose requirements name it: the
    runs left with fewer eligible approvers than a requirement asks for, and the worst case."""

    group: str
    run_ids: tuple[str, ...]
    needs: int
    would_have: int

    @property
    def detail(self) -> str:
        """`leads is required by 2 running runs (needs 2 approvers, would have 1)`."""
        runs = "run" if len(self.run_ids) == 1 else "runs"
        people = "approver" if self.needs == 1 else "approvers"
        return (
            f"{self.group} is required by {len(self.run_ids)} running {runs} "
            f"(needs {self.needs} {people}, would have {self.would_have})"
        )

    def affected(self, limit: int = 20) -> str:
        """The detail with the runs it names (at most `limit` of them)."""
        shown = ", ".join(self.run_ids[:limit])
        more = len(self.run_ids) - limit
        return f"{self.detail}: {shown}" + (f" and {more} more" if more > 0 else "")


def self_excluded(run: Run) -> frozenset[str]:
    """The people who may not approve the run's calls when it forbids self-approval: the one
    it acts for and the member who declared it (requesters both)."""
    if not run.forbid_self_approval:
        return frozenset()
    return frozenset(name for name in (run.on_behalf_of, run.declared_by) if name)


def _approvers(
    requirement: Mapping[str, Any],
    members: Mapping[str, Collection[str]],
    excluded: Collection[str],
) -> int:
    """How many people may approve toward `requirement` (the members of any of its groups)."""
    people = {m for g in requirement.get("groups") or () for m in members.get(g, ())}
    return len(people - set(excluded))


def group_in_use(
    group: str,
    runs: Sequence[Run],
    before: Mapping[str, Collection[str]],
    after: Mapping[str, Collection[str]],
) -> GroupInUse | None:
    """Whether changing the groups from `before` to `after` (members by group name) leaves one
    of the running `runs` short: a requirement naming `group` whose eligible approvers (the
    members of any of its groups, less `self_excluded`) drop below its `approvals`. A
    requirement already short before keeps whatever it had: only a change that takes approvers
    away is refused."""
    short: dict[str, None] = {}  # run ids, in order
    worst: tuple[int, int, int] | None = None  # (shortfall, needs, would have)
    for run in runs:
        excluded = self_excluded(run)
        for requirement in run.approval_requirements:
            if group not in (requirement.get("groups") or ()):
                continue
            needs = int(requirement["approvals"])
            had = _approvers(requirement, before, excluded)
            left = _approvers(requirement, after, excluded)
            if left >= had or left >= needs:
                continue
            short[run.id] = None
            if worst is None or needs - left > worst[0]:
                worst = (needs - left, needs, left)
    if worst is None:
        return None
    return GroupInUse(group, tuple(short), worst[1], worst[2])


def approvals_of(required_approvals: int, given: Any) -> Approvals | None:
    """The task's approvals as its columns keep them (`approvals_given` is None when no
    requirement applies to it)."""
    if given is None:
        return None
    return Approvals(required_approvals, tuple({"by": g["by"], "at": g["at"]} for g in given))
