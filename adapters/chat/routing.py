"""Where a decision goes: the `[[routes]]` of the configuration, decided once for every platform.

A route matches a decision when every key of its `when` matches (anchored globs with `|`
between alternatives, the rules' own semantics: bot/rules/globs.py): `workspace`, `tool` (the
resolved name), `risk` (the effect profile's) and `rule` (the `reason` of the rule that parked
it). Every matching route applies, not only the first: their targets are joined, in the order
of the configuration, each once. So a "high risk → on-call" route never hides a "deploy →
#deploys" one; an operator who wants the usual chat as well lists `default`. No route
matching: the workspace's usual chat on each platform (`place_for`), as without routes.

Targets are platform-neutral words (`slack:C…`, `telegram:-100…`, `member:NAME`, `default`);
each platform keeps those it can show (ChatNotifier.places) and maps members to a direct
message. This module only decides which words apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.config import RouteConfig
from bot.domain import Run, Task
from bot.rules.globs import Glob
from bot.rules.paths import encode_text

DEFAULT = "default"


@dataclass(frozen=True)
class Routed:
    """The targets of every route that matched a decision."""

    to: tuple[str, ...]
    escalate_to: tuple[str, ...]


class _Alternatives:
    def __init__(self, pattern: str) -> None:
        self._globs = tuple(Glob(encode_text(alt)) for alt in pattern.split("|"))

    def match(self, text: str | None) -> bool:
        if text is None:
            return False
        encoded = encode_text(text)
        return any(glob.match(encoded) for glob in self._globs)


@dataclass(frozen=True)
class _Route:
    conditions: tuple[tuple[str, _Alternatives], ...]
    to: tuple[str, ...]
    escalate_to: tuple[str, ...]


def _matched_reason(task: Task, run: Run) -> str | None:
    index = task.rule_index
    rules = run.approval_rules
    if index is None or not 0 <= index < len(rules):
        return None
    rule: Any = rules[index]
    reason = rule.get("reason") if isinstance(rule, dict) else None
    return reason if isinstance(reason, str) else None


def _facts(task: Task, run: Run) -> dict[str, str | None]:
    risk = (task.effect_profile or {}).get("risk")
    return {
        "workspace": task.workspace_id,
        "tool": task.tool,
        "risk": risk if isinstance(risk, str) else None,
        "rule": _matched_reason(task, run),
    }


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


class Router:
    def __init__(self, routes: Sequence[RouteConfig] = ()) -> None:
        self._routes = tuple(
            _Route(
                tuple(
                    (key, _Alternatives(pattern))
                    for key, pattern in route.when.model_dump().items()
                    if pattern is not None
                ),
                tuple(route.to),
                tuple(route.escalate_to),
            )
            for route in routes
        )

    def __bool__(self) -> bool:
        return bool(self._routes)

    def route(self, task: Task, run: Run) -> Routed | None:
        """The joined targets of every matching route; None when none matches (the
        workspace's usual chats then)."""
        if not self._routes:
            return None
        facts = _facts(task, run)
        matching = [
            r for r in self._routes if all(glob.match(facts[key]) for key, glob in r.conditions)
        ]
        if not matching:
            return None
        return Routed(
            _unique([t for r in matching for t in r.to]),
            _unique([t for r in matching for t in r.escalate_to]),
        )


@dataclass(frozen=True)
class Routing:
    """What the chat layer needs of the configuration to route: the routes, and how many
    reminders a decision gets (the last one escalates even when no earlier one went out)."""

    router: Router
    nudges: int

    @classmethod
    def of(cls, routes: Sequence[RouteConfig], nudge_before: Sequence[object]) -> Routing:
        return cls(Router(routes), len(nudge_before))

    def escalates(self, seq: int, earlier_nudges: Sequence[int]) -> bool:
        """Is nudge `seq` the moment to escalate? When an earlier reminder of the decision
        went out unanswered (it is still open), or when it is the last reminder there is."""
        return any(n < seq for n in earlier_nudges) or seq >= self.nudges - 1
