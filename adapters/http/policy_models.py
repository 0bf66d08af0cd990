"""Wire models of approve always, edit before approve and the decision log (issue 15).

`allow.rule` and `tool_input` are any storable JSON here: the core validates a rule like a
declared list (naming problems `allow.rule.mtach: unknown key`) and evaluates an edited input
again with the run's rules.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from adapters.http.models import JsonValue, RequestModel, ResponseModel
from bot.domain import LogRecord, Task
from bot.learning import LearnedRule, Proposal


class AllowIn(RequestModel):
    """Approve & allow like this: learn a rule for this run, or for the run's profile."""

    scope: Literal["run", "profile"]
    rule: JsonValue = None  # the proposal when absent


class ApproveIn(RequestModel):
    """Approve a parked call; `tool_input` approves it as edited (evaluated again by the run's
    rules); `allow` also learns a rule (from the approved input)."""

    allow: AllowIn | None = None
    tool_input: JsonValue = None

    @property
    def edited(self) -> bool:
        return "tool_input" in self.model_fields_set


class PastCallOut(ResponseModel):
    run_id: str
    key: str
    tool: str
    summary: str
    state: str
    at: datetime


class ProposalOut(ResponseModel):
    rule: dict[str, Any]
    would_allow: list[PastCallOut]
    # Every rule proposed: a compound shell line gets one per command not already granted,
    # all learned by an approve that leaves the rule as proposed.
    rules: list[dict[str, Any]] = Field(default_factory=list)


class DecisionRef(ResponseModel):
    run_id: str
    key: str


class LearnedRuleOut(ResponseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str
    rule: dict[str, Any]
    scope: Literal["run", "profile"]
    profile: str | None
    run_id: str | None
    added_by: str
    from_: DecisionRef = Field(alias="from")
    at: datetime


class LearnedRulesOut(ResponseModel):
    rules: list[LearnedRuleOut]


class LogEntryOut(ResponseModel):
    """One entry of the decision log, as the page's export holds it."""

    id: int
    at: datetime
    action: str
    actor: str
    via: str
    run_id: str | None
    task_key: str | None
    detail: dict[str, Any]


class LogOut(ResponseModel):
    entries: list[LogEntryOut]
    next_after: int | None = None  # the next page's `?after=`; null on the last page


# conversions (server side) ---------------------------------------------------------------------
def past_call_out(task: Task) -> dict[str, Any]:
    return {
        "run_id": task.run_id,
        "key": task.key,
        "tool": task.tool,
        "summary": str(task.effect_profile.get("summary") or task.tool),
        "state": task.state,
        "at": task.created_at.isoformat(),
    }


def proposal_out(proposal: Proposal) -> dict[str, Any]:
    return {
        "rule": proposal.rule,
        "rules": list(proposal.rules or (proposal.rule,)),
        "would_allow": [past_call_out(t) for t in proposal.would_allow],
    }


def learned_rule_out(rule: LearnedRule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "rule": rule.rule,
        "scope": rule.scope,
        "profile": rule.profile,
        "run_id": rule.run_id,
        "added_by": rule.added_by,
        "from": {"run_id": rule.from_run_id, "key": rule.from_key},
        "at": rule.at.isoformat(),
    }


def log_entry_out(record: LogRecord) -> dict[str, Any]:
    entry = record.entry
    return {
        "id": record.id,
        "at": entry.at.isoformat(),
        "action": entry.action,
        "actor": entry.actor,
        "via": entry.via,
        "run_id": entry.run_id,
        "task_key": entry.task_key,
        "detail": entry.detail,
    }
