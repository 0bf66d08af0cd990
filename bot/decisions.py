"""The values of the decision lifecycle: what is asked for, what comes back, and the checks
and words every surface shares (how an ending reads, what `already_decided` says)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot import errors
from bot.domain import LogEntry, NewEvent, OutboxItem, Principal, Run, Task
from bot.errors import ApprovalError
from bot.ports import Tx
from bot.rules import compound, tighten

KEY_PATTERN = re.compile(r"^[A-Za-z0-9._:~-]{1,200}$")
ORIGINS = ("model", "author", "kernel")
MODES = ("bypass", "ask", "rules")
FAILURE_POLICIES = ("continue", "hold")
REASON_LIMIT = 1000


@dataclass(frozen=True)
class DecisionSettings:
    park_ttl: timedelta = timedelta(hours=24)
    question_ttl: timedelta = timedelta(hours=24)
    nudge_before: tuple[timedelta, ...] = (timedelta(hours=1), timedelta(minutes=10))


@dataclass(frozen=True)
class Profile:
    approval_mode: str = "ask"
    approval_rules: list[Any] = field(default_factory=list)
    tool_names: list[str] | None = None
    aliases: dict[str, str] = field(default_factory=dict)
    approval_requirements: list[Any] = field(default_factory=list)  # bot/quorum.py
    forbid_self_approval: bool = False
    shell_commands: list[dict[str, str]] = field(default_factory=list)  # rules/compound.py


@dataclass(frozen=True)
class RunSpec:
    approval_mode: str | None = None
    approval_rules: list[Any] | None = None
    tool_names: list[str] | None = None
    aliases: dict[str, str] | None = None
    profile: str | None = None
    title: str = ""
    executor_id: str | None = None
    parent_run: str | None = None
    approval_requirements: list[Any] | None = None  # bot/quorum.py: only tightening a base's
    forbid_self_approval: bool | None = None
    on_behalf_of: str | None = None
    shell_commands: list[Any] | None = None  # bot/rules/compound.py: only adding to a base's


@dataclass(frozen=True)
class CallSpec:
    tool_name: str
    tool_input: Any
    key: str | None = None
    origin: str = "model"
    effect_profile: dict[str, Any] | None = None
    failure_policy: str = "continue"
    tool_names: list[str] | None = None
    approval_mode: str | None = None

    def fingerprint(self) -> str:
        body = {k: v for k, v in self.__dict__.items() if k != "key"}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Writes:
    """Events, log entries and notifications collected to be written in one go."""

    events: list[NewEvent] = field(default_factory=list)
    log: list[LogEntry] = field(default_factory=list)
    outbox: list[OutboxItem] = field(default_factory=list)

    async def flush(self, tx: Tx, at: datetime) -> None:
        if self.events:
            await tx.add_events(self.events, at)
        await tx.add_log(self.log)
        await tx.add_outbox(self.outbox)


@dataclass(frozen=True)
class Receipt:
    task: Task
    resolution_token: str | None = None
    replayed: bool = False


_ENDING_WORDS = {
    "granted": "approved",
    "resolved": "answered",
    "timed_out": "expired",
    "cancelled": "cancelled",
}


def ending_word(task: Task) -> str:
    """How people read an ended task: approved, denied, answered, declined, expired…"""
    code = (task.error or {}).get("code")
    if task.state == "failed":
        return {"declined": "declined", "tool_not_declared": "refused"}.get(code or "", "denied")
    if task.state == "cancelled" and code == errors.WITHDRAWN:  # the agent stopped waiting
        return "withdrawn"
    return _ENDING_WORDS.get(task.state, task.state)


@dataclass(frozen=True)
class EndingQuery:
    """The tasks an ending word names, as a store query asks for them (`Store.tasks`)."""

    states: tuple[str, ...]
    error_codes: tuple[str, ...] | None = None
    not_error_codes: tuple[str, ...] | None = None


# `ending_word` read backwards: the words a person filters history by (the words that share a
# state are told apart by the ending's error code).
ENDING_QUERIES = {
    "approved": EndingQuery(("granted",)),
    "denied": EndingQuery(("failed",), not_error_codes=(errors.DECLINED, errors.TOOL_NOT_DECLARED)),
    "declined": EndingQuery(("failed",), error_codes=(errors.DECLINED,)),
    "answered": EndingQuery(("resolved",)),
    "expired": EndingQuery(("timed_out",)),
    "cancelled": EndingQuery(("cancelled",), not_error_codes=(errors.WITHDRAWN,)),
    "withdrawn": EndingQuery(("cancelled",), error_codes=(errors.WITHDRAWN,)),
}


def already_decided(task: Task) -> ApprovalError:
    who = task.resolved_by or {"clock": "the clock", "engine": "the rules"}.get(task.via or "", "")
    when = task.decided_at.isoformat() if task.decided_at else ""
    detail = f"already {ending_word(task)}" + (f" by {who}" if who else "") + f" at {when}"
    return ApprovalError(
        errors.ALREADY_DECIDED,
        detail,
        409,
        extra={
            "state": task.state,
            "outcome": ending_word(task),
            "resolved_by": task.resolved_by,
            "via": task.via,
            "decided_at": when or None,
        },
    )


def not_found(what: str) -> ApprovalError:
    return ApprovalError(errors.NOT_FOUND, f"{what} not found", 404)


def invalid(detail: str) -> ApprovalError:
    return ApprovalError(errors.INVALID_REQUEST, detail, 422)


def check_question(tool_input: Any) -> None:
    if not isinstance(tool_input, dict):
        raise invalid("tool_input: a question needs an object {prompt, options?, multi?}")
    unknown = sorted(set(tool_input) - {"prompt", "options", "multi"})
    if unknown:
        raise invalid(f"tool_input.{unknown[0]}: unknown key for a question")
    prompt = tool_input.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise invalid("tool_input.prompt: a question needs a non-empty prompt")
    options = tool_input.get("options")
    if options is not None:
        if not isinstance(options, list) or not options:
            raise invalid("tool_input.options: a non-empty list of strings")
        if not all(isinstance(o, str) and o for o in options) or len(set(options)) != len(options):
            raise invalid("tool_input.options: distinct non-empty strings")
    multi = tool_input.get("multi", False)
    if not isinstance(multi, bool):
        raise invalid("tool_input.multi: must be true or false")
    if multi and options is None:
        raise invalid("tool_input.multi: a multi question needs options")


def check_answer(task: Task, content: Any) -> Any:
    """The answer as stored: free text, one of the options, or for `multi` a list of them."""
    question = task.tool_input if isinstance(task.tool_input, dict) else {}
    options = question.get("options")
    if question.get("multi"):
        if not isinstance(content, list) or not content:
            raise ApprovalError(errors.INVALID_OPTION, "choose at least one option (a list)", 422)
        chosen = [c for c in options or [] if c in content]
        unknown = [c for c in content if not isinstance(c, str) or c not in (options or [])]
        if unknown:
            raise ApprovalError(errors.INVALID_OPTION, f"not an option: {unknown[0]!r}", 422)
        return chosen
    if not isinstance(content, str) or not content.strip():
        raise ApprovalError(errors.INVALID_OPTION, "the answer must be a non-empty string", 422)
    if options is not None and content not in options:
        raise ApprovalError(errors.INVALID_OPTION, f"not an option: {content!r}", 422)
    return content


def narrow(spec: RunSpec, base: Profile | None) -> Profile:
    """Explicit fields over a profile (or parent run) may only tighten it."""
    shell = compound.check_shell_commands(spec.shell_commands)
    if base is None:
        return Profile(
            spec.approval_mode or "ask",
            list(spec.approval_rules or []),
            spec.tool_names,
            dict(spec.aliases or {}),
            shell_commands=shell,
        )
    mode, names = tighten(
        base.approval_mode,  # type: ignore[arg-type]
        frozenset(base.tool_names) if base.tool_names is not None else None,
        spec.approval_mode,  # type: ignore[arg-type]
        spec.tool_names,
    )
    extra = list(spec.approval_rules or [])
    for index, rule in enumerate(extra):
        if isinstance(rule, dict) and rule.get("verdict") == "allow":
            raise ApprovalError(
                errors.APPROVAL_WIDENING,
                f"approval_rules[{index}]: an allow rule would widen the base policy",
                422,
            )
    aliases = dict(base.aliases)
    for alias, target in (spec.aliases or {}).items():
        if aliases.get(alias, target) != target:
            raise ApprovalError(
                errors.APPROVAL_WIDENING, f"aliases.{alias}: conflicts with the base", 422
            )
        aliases[alias] = target
    tool_names = sorted(names) if names is not None else None
    rules = list(base.approval_rules) + extra
    shell = compound.merged(base.shell_commands, shell)  # a run adds shell paths, never drops
    return Profile(mode, rules, tool_names, aliases, shell_commands=shell)


def attention_event(run_id: str, parked: list[tuple[str, str]]) -> NewEvent:
    if any(state == "needs_approval" for _, state in parked):
        reason = "approval_required"
    elif parked:
        reason = "awaiting_human"
    else:
        reason = "cleared"
    keys = [key for key, _ in parked]
    return NewEvent(run_id, "attention_required", {"reason": reason, "blocked_task_keys": keys})


def work_available(task: Task) -> NewEvent:
    data = {
        "executor_id": task.addressee,
        "run_id": task.run_id,
        "key": task.key,
        "kind": "ask" if task.kind == "ask" else "approval",
    }
    return NewEvent(task.run_id, "work_available", data, executor_id=task.addressee)


def settled_event(task: Task) -> NewEvent:
    data = {
        "key": task.key,
        "state": task.state,
        "error": task.error,
        "resolved_by": task.resolved_by,
        "via": task.via,
        "resolution": task.resolution,
    }
    if task.approved_input is not None:  # approved as a person edited it: run that one
        data["approved_input"] = task.approved_input
    return NewEvent(task.run_id, "task_settled", data)


def log_entry(
    run: Run,
    task: Task | None,
    action: str,
    principal: Principal | None,
    via: str,
    detail: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> LogEntry:
    return LogEntry(
        workspace_id=run.workspace_id,
        action=action,
        actor=principal.name if principal else via,
        via=via,
        at=at or (task.decided_at or task.created_at if task else run.created_at),
        run_id=run.id,
        task_key=task.key if task else None,
        detail=detail or {},
    )
