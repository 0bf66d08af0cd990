"""Mapping between table rows and the core's records."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, cast

from bot.domain import (
    Application,
    Event,
    Executor,
    LogEntry,
    LogRecord,
    Member,
    OutboxItem,
    Run,
    Task,
    Timer,
    Workspace,
)
from bot.learning import LearnedRule


def ts(value: datetime) -> float:
    return value.timestamp()


def dt(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def opt_dt(value: float | None) -> datetime | None:
    return None if value is None else dt(value)


def opt_ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def workspace(row: Mapping[str, Any]) -> Workspace:
    return Workspace(id=row["id"], name=row["name"], created_at=dt(row["created_at"]))


def member(row: Mapping[str, Any]) -> Member:
    return Member(
        id=row["id"],
        workspace_id=row["workspace_id"],
        name=row["name"],
        telegram_user_id=row["telegram_user_id"],
        slack_user_id=row["slack_user_id"],
    )


def claims_text(claims: frozenset[str]) -> str:
    """The `application.may_claim` column: origins in a fixed order, comma-separated."""
    return ",".join(sorted(claims))


def claims(text: str | None) -> frozenset[str]:
    return frozenset(part for part in (text or "").split(",") if part)


def application(row: Mapping[str, Any]) -> Application:
    return Application(
        id=row["id"],
        workspace_id=row["workspace_id"],
        name=row["name"],
        may_claim=claims(row["may_claim"]),
    )


def application_values(app: Application) -> dict[str, Any]:
    return {
        "id": app.id,
        "workspace_id": app.workspace_id,
        "name": app.name,
        "may_claim": claims_text(app.may_claim),
        "created_at": 0.0,
    }


def executor(row: Mapping[str, Any]) -> Executor:
    return Executor(
        id=row["id"],
        workspace_id=row["workspace_id"],
        application_id=row["application_id"],
        name=row["name"],
        revoked=row["revoked_at"] is not None,
    )


def run_values(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "workspace_id": run.workspace_id,
        "application_id": run.application_id,
        "state": run.state,
        "approval_mode": run.approval_mode,
        "approval_rules": run.approval_rules,
        "tool_names": run.tool_names,
        "aliases": run.aliases,
        "title": run.title,
        "profile": run.profile,
        "executor_id": run.executor_id,
        "parent_run": run.parent_run,
        "held_task_key": run.held_task_key,
        "learned_rules": run.learned_rules,
        "rules_version": run.rules_version,
        "approval_requirements": run.approval_requirements or None,
        "forbid_self_approval": run.forbid_self_approval,
        "on_behalf_of": run.on_behalf_of,
        "shell_commands": run.shell_commands or None,
        "declared_by": run.declared_by,
        "created_at": ts(run.created_at),
    }


def run(row: Mapping[str, Any]) -> Run:
    return Run(
        id=row["id"],
        workspace_id=row["workspace_id"],
        application_id=row["application_id"],
        state=row["state"],
        approval_mode=row["approval_mode"],
        approval_rules=row["approval_rules"],
        tool_names=row["tool_names"],
        aliases=row["aliases"] or {},
        created_at=dt(row["created_at"]),
        title=row["title"],
        profile=row["profile"],
        executor_id=row["executor_id"],
        parent_run=row["parent_run"],
        held_task_key=row["held_task_key"],
        learned_rules=row["learned_rules"] or [],
        rules_version=row["rules_version"],
        approval_requirements=row["approval_requirements"] or [],
        forbid_self_approval=bool(row["forbid_self_approval"]),
        on_behalf_of=row["on_behalf_of"],
        shell_commands=row["shell_commands"] or [],
        declared_by=row["declared_by"],
    )


_TASK_PLAIN = (
    "id", "run_id", "workspace_id", "key", "kind", "origin", "tool_name", "tool", "tool_input",
    "state", "error", "failure_policy", "addressee", "resolved_by", "via", "resolution", "why",
    "rule_index", "request_hash", "appended_by", "resolution_token_hash", "required_approvals",
    "retry_of", "approved_input", "approvals_given", "reviewed_input",
)  # fmt: skip


_TASK_PLAIN_OF = attrgetter(*_TASK_PLAIN)


def task_values(task: Task) -> dict[str, Any]:
    values = dict(zip(_TASK_PLAIN, _TASK_PLAIN_OF(task), strict=True))
    values["effect_profile"] = task.effect_profile
    values["matched"] = list(task.matched)
    values["deadline"] = opt_ts(task.deadline)
    values["decided_at"] = opt_ts(task.decided_at)
    values["created_at"] = ts(task.created_at)
    return values


def task(row: Mapping[str, Any]) -> Task:
    values = {name: row[name] for name in _TASK_PLAIN}
    return Task(
        **values,
        effect_profile=row["effect_profile"] or {},
        matched=list(row["matched"] or []),
        deadline=opt_dt(row["deadline"]),
        decided_at=opt_dt(row["decided_at"]),
        created_at=dt(row["created_at"]),
    )


def event(row: Mapping[str, Any]) -> Event:
    return Event(
        id=row["id"],
        run_id=row["run_id"],
        seq=row["seq"],
        name=row["name"],
        data=row["data"],
        at=dt(row["created_at"]),
    )


def log_record(row: Mapping[str, Any]) -> LogRecord:
    return LogRecord(
        id=row["id"],
        entry=LogEntry(
            workspace_id=row["workspace_id"],
            action=row["action"],
            actor=row["actor"],
            via=row["via"],
            at=dt(row["at"]),
            run_id=row["run_id"],
            task_key=row["task_key"],
            detail=row["detail"] or {},
        ),
    )


def timer(row: Mapping[str, Any]) -> Timer:
    return Timer(
        id=row["id"],
        task_id=row["task_id"],
        run_id=row["run_id"],
        kind=cast(Any, row["kind"]),
        due_at=dt(row["due_at"]),
        seq=row["seq"],
    )


def outbox(row: Mapping[str, Any]) -> OutboxItem:
    return OutboxItem(
        id=row["id"],
        channel=row["channel"],
        kind=cast(Any, row["kind"]),
        task_id=row["task_id"],
        run_id=row["run_id"],
        workspace_id=row["workspace_id"],
        idempotency_key=row["idempotency_key"],
        created_at=dt(row["created_at"]),
        attempts=row["attempts"],
        payload=row["payload"] or {},
    )


def learned_rule_values(rule: LearnedRule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "workspace_id": rule.workspace_id,
        "scope": rule.scope,
        "profile": rule.profile,
        "run_id": rule.run_id,
        "rule": rule.rule,
        "added_by": rule.added_by,
        "from_run_id": rule.from_run_id,
        "from_key": rule.from_key,
        "created_at": ts(rule.at),
    }


def learned_rule(row: Mapping[str, Any]) -> LearnedRule:
    return LearnedRule(
        id=row["id"],
        workspace_id=row["workspace_id"],
        rule=row["rule"],
        scope=row["scope"],
        profile=row["profile"],
        run_id=row["run_id"],
        added_by=row["added_by"],
        from_run_id=row["from_run_id"],
        from_key=row["from_key"],
        at=dt(row["created_at"]),
    )
