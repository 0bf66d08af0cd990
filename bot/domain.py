"""The records the core works with. Storage maps them to tables; surfaces map them to the wire."""

from __future__ import annotations

import random
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

TaskState = Literal[
    "granted", "failed", "needs_approval", "awaiting_input", "resolved", "timed_out", "cancelled"
]
RunState = Literal["running", "held", "stopped"]
TaskKind = Literal["tool_call", "ask"]
Via = Literal["telegram", "slack", "web", "api", "cli", "clock", "engine", "token"]
FailurePolicy = Literal["continue", "hold"]
PrincipalKind = Literal["member", "application"]

PARKED_STATES: tuple[TaskState, ...] = ("needs_approval", "awaiting_input")
ASK_TOOL = "ask"
# The origins beyond `model` an application may be registered to claim (SPEC 2.7).
CLAIMABLE_ORIGINS = ("author", "kernel")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def ordered_id(prefix: str) -> str:
    """An id that sorts by creation time (outbox items are delivered in this order; tasks land
    at the end of their indexes). Unique, not secret: the low bits only break ties within a
    nanosecond, so they come from the fast generator rather than the operating system's."""
    return f"{prefix}_{time.time_ns():x}{random.getrandbits(24):06x}"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a person (member) or an agent runtime (application)."""

    kind: PrincipalKind
    id: str
    name: str
    workspace_id: str

    @property
    def is_member(self) -> bool:
        return self.kind == "member"


@dataclass(slots=True)
class Workspace:
    id: str
    name: str
    created_at: datetime


@dataclass(slots=True)
class Member:
    id: str
    workspace_id: str
    name: str
    telegram_user_id: int | None = None
    slack_user_id: str | None = None


@dataclass(slots=True)
class Application:
    id: str
    workspace_id: str
    name: str
    # The origins beyond `model` its appends may claim (`admin app add --may-claim`): a
    # property of the registration, fixed when it is made.
    may_claim: frozenset[str] = frozenset()


@dataclass(slots=True)
class Executor:
    id: str
    workspace_id: str
    application_id: str
    name: str
    revoked: bool = False


@dataclass(slots=True)
class Run:
    id: str
    workspace_id: str
    application_id: str | None
    state: RunState
    approval_mode: str
    approval_rules: list[dict[str, Any]]
    tool_names: list[str] | None
    aliases: dict[str, str]
    created_at: datetime
    title: str = ""
    profile: str | None = None
    executor_id: str | None = None
    parent_run: str | None = None
    held_task_key: str | None = None
    # Allow rules learned from people's decisions (`{"id", "rule"}`, bot/learning.py): those of
    # its profile when it was declared, and those learned in it since. `rules_version` counts
    # their changes, so every instance's frozen copy of the run notices one.
    learned_rules: list[dict[str, Any]] = field(default_factory=list)
    rules_version: int = 0
    # Several approvers (bot/quorum.py): what its parked calls need besides one person's yes,
    # and the member it acts for (who, under forbid_self_approval, cannot approve its calls).
    approval_requirements: list[dict[str, Any]] = field(default_factory=list)
    forbid_self_approval: bool = False
    on_behalf_of: str | None = None
    # Which text of its calls is a shell line, judged command by command (bot/rules/compound.py):
    # `{"tool", "path"}` entries, its profile's (or parent's) and its own.
    shell_commands: list[dict[str, str]] = field(default_factory=list)
    # The member who declared it (None: an application did): a requester of its calls too.
    declared_by: str | None = None


@dataclass(slots=True)
class Task:
    id: str
    run_id: str
    workspace_id: str
    key: str
    kind: TaskKind
    origin: str
    tool_name: str
    tool: str
    tool_input: Any
    state: TaskState
    created_at: datetime
    effect_profile: dict[str, Any] = field(default_factory=dict)
    error: dict[str, str] | None = None
    deadline: datetime | None = None
    failure_policy: FailurePolicy = "continue"
    addressee: str | None = None
    resolved_by: str | None = None
    via: str | None = None
    resolution: dict[str, Any] | None = None
    decided_at: datetime | None = None
    why: str = ""
    rule_index: int | None = None
    matched: list[int] = field(default_factory=list)
    request_hash: str = ""
    appended_by: str | None = None
    resolution_token_hash: str | None = None
    required_approvals: int = 1
    retry_of: str | None = None
    # The input a person approved when they edited it before approving (None: not edited).
    approved_input: Any = None
    # Under a quorum: the approvals counted so far (`[{"by", "at"}]`; None when no requirement
    # applies), and the input they approve when a person edited it (None: the call's own).
    approvals_given: list[dict[str, Any]] | None = None
    reviewed_input: Any = None

    @property
    def parked(self) -> bool:
        return self.state in PARKED_STATES


@dataclass(frozen=True, slots=True)
class Ending:
    """How a parked task ended: the values written by the compare-and-set."""

    state: TaskState
    at: datetime
    resolved_by: str | None
    via: str
    error: dict[str, str] | None = None
    resolution: dict[str, Any] | None = None
    approved_input: Any = None


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    run_id: str
    seq: int
    name: str
    data: dict[str, Any]
    at: datetime


@dataclass(frozen=True, slots=True)
class NewEvent:
    run_id: str
    name: str
    data: dict[str, Any]
    executor_id: str | None = None


@dataclass(frozen=True, slots=True)
class LogEntry:
    workspace_id: str
    action: str
    actor: str
    via: str
    at: datetime
    run_id: str | None = None
    task_key: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LogRecord:
    id: int
    entry: LogEntry


TimerKind = Literal["deadline", "nudge"]


@dataclass(frozen=True, slots=True)
class Timer:
    id: str
    task_id: str
    run_id: str
    kind: TimerKind
    due_at: datetime
    seq: int = 0  # which nudge (0, 1, …), so each is sent once


# `reviewed`: an approval counted toward a quorum that did not end the task (bot/quorum.py).
OutboxKind = Literal["posted", "nudge", "ended", "reviewed"]


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """A notification for people, written with the state change, delivered after commit."""

    id: str
    channel: str
    kind: OutboxKind
    task_id: str
    run_id: str
    workspace_id: str
    idempotency_key: str
    created_at: datetime
    attempts: int = 0
    payload: dict[str, Any] = field(default_factory=dict)
