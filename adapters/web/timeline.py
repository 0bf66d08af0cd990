"""A run as a person's record: what the agent asked, what the rules did and why, who decided
what and when, and how the run ended. Built from the decision log (the audit trail, in the
order it was written) and the run's tasks; pure functions, the templates escape what they print.
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from adapters.web import render
from bot.domain import LogEntry, LogRecord, Run, Task
from bot.durations import format_duration
from bot.masking import mask_text

# The log actions that end a run, or hold it for a person.
RUN_ENDINGS = ("run_stopped", "run_abandoned", "run_held", "run_retried")
HELD = ("run_held",)
# What the badge of a step says and how it is coloured (the inbox's outcome words).
TONES = {
    "approved": "approved",
    "granted": "approved",
    "answered": "approved",
    "denied": "denied",
    "refused": "denied",
    "declined": "denied",
    "expired": "expired",
    "cancelled": "expired",
    "withdrawn": "expired",
    "timed_out": "expired",
    "parked": "waiting",
    "asked": "waiting",
}


def tone_of(word: str) -> str:
    """The colour of an outcome word: approved, denied, expired, waiting, else info."""
    return TONES.get(word, "info")


@dataclass
class RuleRow:
    index: int
    tool: str
    condition: str  # "command matches git push *", or "" for any input
    verdict: str
    origin: str
    reason: str
    other: str  # keys the page does not know, as JSON


def rule_rows(rules: list[dict[str, Any]]) -> list[RuleRow]:
    """The run's rules as a table, numbered as the engine counts them (from 0)."""
    rows = []
    known = {"tool", "path", "match", "verdict", "origin", "reason"}
    for index, rule in enumerate(rules):
        path, match = rule.get("path"), rule.get("match")
        if path and match is not None:
            condition = f"{path} matches {match}"
        elif path:
            condition = f"{path} is present"
        else:
            condition = ""
        rest = {k: v for k, v in rule.items() if k not in known}
        rows.append(
            RuleRow(
                index=index,
                tool=str(rule.get("tool", "")),
                condition=condition,
                verdict=str(rule.get("verdict", "")),
                origin=str(rule.get("origin") or "model"),
                reason=str(rule.get("reason") or ""),
                other=json.dumps(rest, ensure_ascii=False) if rest else "",
            )
        )
    return rows


@dataclass
class RunEnding:
    """How a run stands or ended, in a sentence: "finished by the agent (demo-app)"."""

    word: str  # running, finished, stopped, abandoned, held
    text: str
    at: datetime | None = None
    via: str = ""


def ending_of(
    run: Run, record: LogRecord | None, agent: str | None, held: LogRecord | None = None
) -> RunEnding:
    """`record` is the run's latest entry among RUN_ENDINGS, `held` its latest `run_held`;
    `agent` the name of the application that declared it (a stop by that name is the agent
    finishing its work)."""
    entry = record.entry if record is not None else None
    if run.state == "held":
        text = "held: waiting for a person to retry or abandon"
        return RunEnding("held", text, entry.at if entry else None, "clock")
    if run.state == "running":
        return RunEnding("running", "running")
    if entry is None or entry.action not in ("run_stopped", "run_abandoned"):
        return RunEnding("stopped", "stopped")  # a record older than its log entry
    kind = entry.detail.get("principal_kind") if isinstance(entry.detail, dict) else None
    by_agent = kind == "application" or (
        kind is None and agent is not None and entry.actor == agent
    )
    if entry.action == "run_abandoned":
        after = " after it was held"
        if held is not None and held.entry.at <= entry.at:
            after += " for " + " ".join(format_duration(entry.at - held.entry.at).split()[:2])
        return RunEnding("abandoned", f"abandoned by {entry.actor}{after}", entry.at, entry.via)
    # What the stop said of the work, when it said anything: ": failed — ValueError". The
    # reason is free text from the API, shown to every member: masked like any detail.
    detail = entry.detail if isinstance(entry.detail, dict) else {}
    reason = detail.get("reason")
    said = (detail.get("outcome"), mask_text(reason) if isinstance(reason, str) else None)
    told = " — ".join(part for part in said if isinstance(part, str) and part)
    told = f": {told}" if told else ""
    if by_agent:
        return RunEnding("finished", f"finished by the agent ({entry.actor}){told}", entry.at)
    return RunEnding("stopped", f"stopped by {entry.actor}{told}", entry.at, entry.via)


@dataclass
class Step:
    """One line of the timeline."""

    at: datetime
    action: str
    badge: str  # the outcome word shown, coloured by `tone`
    tone: str  # approved, denied, expired, waiting, info
    who: str
    via: str
    text: str  # what happened, in words
    note: str = ""  # the why, the reason, the answer
    rule: int | None = None  # the rule that decided, when one did
    task: Task | None = None  # the call or question this step is about (as shown)
    call: render.CallView | None = None
    profile: render.ProfileView | None = None
    raw: str = ""  # the log entry as stored, for the <details>
    extra: dict[str, Any] = field(default_factory=dict)


def _who(entry: LogEntry, agent: str | None) -> str:
    if entry.via == "clock":
        return "the clock"
    if entry.via == "engine":
        return "the rules"
    if agent is not None and entry.actor == agent:
        return f"the agent ({agent})"
    return entry.actor


def _raw(entry: LogEntry) -> str:
    data = {"action": entry.action, "actor": entry.actor, "via": entry.via, "at": entry.at}
    data |= {"task_key": entry.task_key, "detail": entry.detail}
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def _clipped(view: render.CallView) -> render.CallView:
    """The call as the timeline shows it: long blocks cut in the middle (the decision's page
    has them whole)."""
    for block in view.blocks:
        if block.kind == "diff":
            block.lines, _ = render.clip_lines(block.lines)
        else:
            block.text, _ = render.clip(block.text)
    view.rest, _ = render.clip(view.rest, 12)
    return view


def _asked(entry: LogEntry, task: Task, agent: str | None, rules: list[dict[str, Any]]) -> Step:
    """The agent's call or question, with what the rules made of it."""
    title = render.title_of(task)
    asker = _who(entry, agent) if entry.via not in ("engine", "clock") else ""
    if entry.via == "engine":
        asker = f"the agent ({task.appended_by})" if task.appended_by else "the agent"
    what = "asked" if task.kind == "ask" else f"asked to run {task.tool}"
    if task.retry_of is not None:  # parked anew by a person's retry, not by the agent
        asker, what = "", f"asked again after {entry.actor} retried"
    step = Step(
        at=entry.at,
        action=entry.action,
        badge="",
        tone="info",
        who=asker,
        via=entry.via,
        text=f"{asker} {what}: {title}" if asker else f"{what}: {title}",
        note=task.why,
        rule=task.rule_index,
        task=task,
        call=_clipped(render.render_call(task)) if task.kind != "ask" else None,
        profile=render.profile_view(task.effect_profile),
        raw=_raw(entry),
    )
    index = task.rule_index
    if index is not None and 0 <= index < len(rules) and rules[index].get("reason"):
        step.extra["rule_reason"] = str(rules[index]["reason"])
    if task.kind == "ask":
        step.note = ""  # a question waits for a person whatever the rules say
    if asker.startswith("the agent"):
        step.via = ""  # an agent always comes through the API: saying so adds nothing
    if entry.action == "granted":
        by_rules = entry.via == "engine"
        step.badge, step.tone = "granted", "approved"
        step.extra["verdict"] = "granted by the rules" if by_rules else f"granted to {entry.actor}"
        step.extra["by_rules"] = by_rules
    elif entry.action == "refused":
        step.badge, step.tone = "refused", "denied"
        error = task.error or {}
        step.extra["verdict"] = "refused by the rules"
        if error.get("detail"):
            step.note = f"{task.why} — {error['detail']}" if task.why else str(error["detail"])
    else:
        step.badge, step.tone = entry.action, "waiting"  # parked, asked
        step.extra["verdict"] = (
            "waits for a person's answer" if task.kind == "ask" else "waits for a person"
        )
    return step


def _decided(entry: LogEntry, task: Task | None, agent: str | None) -> Step:
    word = {"approved": "approved", "reviewed": "approved (more approvals needed)"}.get(
        entry.action, entry.action
    )
    title = render.title_of(task) if task is not None else entry.task_key or ""
    who = _who(entry, agent)
    note = ""
    detail = entry.detail if isinstance(entry.detail, dict) else {}
    if entry.action in ("denied", "withdrawn"):
        note = str(detail.get("reason") or "")
    elif entry.action == "answered":
        content = detail.get("content")
        note = ", ".join(map(str, content)) if isinstance(content, list) else str(content or "")
    elif task is not None and task.error and entry.action in ("expired", "cancelled"):
        note = str(task.error.get("detail") or "")
    if entry.action == "expired":
        text = f"nobody decided in time: {title}"
    elif entry.action == "cancelled":
        text = f"cancelled: {title}"
    elif entry.action == "withdrawn":
        text = f"{who} withdrew: {title}"
    else:
        text = f"{who} {word}: {title}"
    badge = "approved" if entry.action == "reviewed" else entry.action
    return Step(
        at=entry.at,
        action=entry.action,
        badge=badge,
        tone=TONES.get(badge, "info"),
        who=who,
        via=entry.via,
        text=text,
        note=note,
        task=task,
        raw=_raw(entry),
    )


def _run_step(entry: LogEntry, run: Run, agent: str | None) -> Step:
    who = _who(entry, agent)
    kind = entry.detail.get("principal_kind") if isinstance(entry.detail, dict) else None
    by_agent = kind == "application" or (
        kind is None and agent is not None and entry.actor == agent
    )
    texts = {
        "run_declared": ("started", f"{who} started the run ({run.approval_mode} mode)"),
        "run_held": ("held", "the run is held: a decision it needed expired"),
        "run_retried": ("resumed", f"{who} retried: the expired decisions are asked again"),
        "run_abandoned": ("abandoned", f"{who} abandoned the run"),
        "run_stopped": (
            ("finished", f"{who} finished the run")
            if by_agent
            else ("stopped", f"{who} stopped the run")
        ),
    }
    badge, text = texts.get(entry.action, (entry.action, f"{who}: {entry.action}"))
    tone = {"held": "waiting", "abandoned": "expired", "stopped": "expired"}.get(badge, "info")
    via = "" if who.startswith("the agent") else entry.via
    return Step(entry.at, entry.action, badge, tone, who, via, text, raw=_raw(entry))


def build(run: Run, tasks: list[Task], records: list[LogRecord], agent: str | None) -> list[Step]:
    """The run's timeline, oldest first. `tasks` are as shown (masked unless revealed), and
    `records` the run's log (masked likewise)."""
    by_key = {t.key: t for t in tasks}
    steps: list[Step] = []
    for record in records:
        entry = record.entry
        task = by_key.get(entry.task_key or "")
        if entry.action in ("granted", "refused", "parked", "asked") and task is not None:
            steps.append(_asked(entry, task, agent, run.approval_rules))
        elif entry.action == "nudged":
            remaining = entry.detail.get("remaining") if isinstance(entry.detail, dict) else None
            title = render.title_of(task) if task is not None else entry.task_key or ""
            text = f"reminder sent: {title}"
            if isinstance(remaining, int):
                text += f" (expires in {format_duration(timedelta(seconds=remaining))})"
            steps.append(
                Step(
                    entry.at,
                    "nudged",
                    "reminder",
                    "info",
                    "the clock",
                    "clock",
                    text,
                    raw=_raw(entry),
                )
            )
        elif entry.action.startswith("run_"):
            steps.append(_run_step(entry, run, agent))
        else:
            steps.append(_decided(entry, task, agent))
    return _grouped(steps)


GROUP_FROM = 3  # this many rule grants in a row fold into one step


def _grouped(steps: list[Step]) -> list[Step]:
    """Calls the rules granted one after another fold into one step a person can open: what
    needs a person stands out, what the rules let through is still there."""
    out: list[Step] = []
    streak: list[Step] = []

    def flush() -> None:
        if len(streak) < GROUP_FROM:
            out.extend(streak)
        else:
            tools = collections.Counter(s.task.tool for s in streak if s.task is not None)
            counted = ", ".join(f"{tool} ×{n}" for tool, n in tools.most_common())
            out.append(
                Step(
                    at=streak[0].at,
                    action="grants",
                    badge="granted",
                    tone="approved",
                    who="the rules",
                    via="",
                    text=f"{len(streak)} calls granted by the rules ({counted})",
                    extra={"children": list(streak)},
                )
            )
        streak.clear()

    for step in steps:
        if step.action == "granted" and step.extra.get("by_rules"):
            streak.append(step)
            continue
        flush()
        out.append(step)
    flush()
    return out
