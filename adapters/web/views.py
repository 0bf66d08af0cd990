"""The pages people read: a decision's own page, runs, a run's page, history (the inbox: queue.py).

What looks like a secret in a call's input (and in answers, reasons and the feed) is masked by
default, as in chat; a decision's page and a run's page offer "Reveal" (`?reveal=1`, a plain
link, so it works without JavaScript) to show the signed-in member everything as stored. A
masked page does not carry what it masks hidden in its markup either (only a question's answer
buttons send their options as stored).
"""

from __future__ import annotations

import collections
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from adapters.web import render
from adapters.web.context import (
    error_html,
    member_of,
    page,
    path_values,
    query_value,
    require_member,
    state,
)
from bot.domain import Event, Principal, Run, Task
from bot.errors import ApprovalError
from bot.masking import mask_text, mask_value
from bot.service import ending_word

OUTCOMES = {
    "approved": ("granted",),
    "denied": ("failed",),
    "declined": ("failed",),
    "answered": ("resolved",),
    "expired": ("timed_out",),
    "cancelled": ("cancelled",),
}
ENDED_STATES = ("granted", "failed", "resolved", "timed_out", "cancelled")
SURFACES = ("web", "telegram", "slack", "api", "cli", "clock", "token")
FEED_LIMIT = 300


@dataclass
class Card:
    """One decision as the page shows it."""

    task: Task  # as shown: masked unless revealed
    run: Run | None
    call: render.CallView
    profile: render.ProfileView
    prompt: str
    options: list[str]  # as stored: what the answer buttons send
    labels: list[str]  # the options as shown
    multi: bool
    remaining: str
    hidden: int  # lines left out of the card (the decision page shows them)
    masked: bool = False  # masking hid something on the card

    @property
    def ident(self) -> str:
        return f"{self.task.run_id}/{self.task.key}"

    @property
    def outcome(self) -> str:
        return "" if self.task.parked else ending_word(self.task)


def make_card(
    task: Task, run: Run | None, request: web.Request, *, full: bool, reveal: bool = False
) -> Card:
    shown = task if reveal else render.masked(task)
    view = render.render_call(shown)
    hidden = 0
    if not full:
        for block in view.blocks:
            if block.kind == "diff":
                block.lines, more = render.clip_lines(block.lines)
            else:
                block.text, more = render.clip(block.text)
            hidden += more
        view.rest, more = render.clip(view.rest, 12)
        hidden += more
    prompt, _, multi = render.question(shown)
    _, options, _ = render.question(task)
    now = state(request).core.clock.now()
    return Card(
        task=shown,
        run=run,
        call=view,
        profile=render.profile_view(shown.effect_profile),
        prompt=prompt,
        options=options,
        labels=options if reveal else [mask_text(o) for o in options],
        multi=multi,
        remaining=render.remaining(task.deadline, now) if task.parked else "",
        hidden=hidden,
        masked=not reveal and render.masks_something(task),
    )


def _reveal(request: web.Request) -> bool:
    return request.query.get("reveal") == "1"


async def runs_by_id(request: web.Request, run_ids: set[str]) -> dict[str, Run]:
    found: dict[str, Run] = {}
    async with state(request).core.store.read() as tx:
        for run_id in run_ids:
            run = await tx.get_run(run_id)
            if run is not None:
                found[run_id] = run
    return found


def not_found(request: web.Request, what: str) -> web.Response:
    return web.Response(
        text=error_html(request, 404, "Not found", f"not_found: {what} not found"),
        status=404,
        content_type="text/html",
    )


async def index(request: web.Request) -> web.Response:
    raise web.HTTPSeeOther("/inbox" if member_of(request) else "/login")


async def decision(request: web.Request) -> web.Response:
    member = await require_member(request)
    run_id, key = path_values(request, "run_id", "key")
    reveal = _reveal(request)
    core = state(request).core
    try:
        task = await core.service.get_task(member, member.workspace_id, run_id, key)
        run = await core.service.get_run(member, member.workspace_id, run_id)
    except ApprovalError:
        return not_found(request, "decision")
    history = await core.store.log_entries(member.workspace_id, run_id=run_id, task_key=key)
    entries = [r.entry for r in history]
    masked_entries = [dataclasses.replace(e, detail=mask_value(e.detail)) for e in entries]
    card = make_card(task, run, request, full=True, reveal=reveal)
    rules = [
        (index, json.dumps(run.approval_rules[index], ensure_ascii=False), index == task.rule_index)
        for index in task.matched
        if 0 <= index < len(run.approval_rules)
    ]
    return page(
        request,
        "decision.html",
        {
            "c": card,
            "run": run,
            "answer": render.resolution_text(card.task),
            "raw_input": json.dumps(card.task.tool_input, indent=2, ensure_ascii=False),
            "rules": rules,
            "history": entries if reveal else masked_entries,
            "detail": _compact,
            "revealed": reveal,
            "masks_something": render.masks_something(task) or masked_entries != entries,
        },
    )


def _compact(value: Any) -> str:
    if not value:
        return ""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


async def runs(request: web.Request) -> web.Response:
    member = await require_member(request)
    core = state(request).core
    listed = await core.store.runs(member.workspace_id, limit=200)
    waiting = collections.Counter(
        t.run_id for t in await core.service.asks(member, member.workspace_id)
    )
    return page(request, "runs.html", {"runs": listed, "waiting": waiting})


async def _feed(request: web.Request, run_id: str) -> tuple[list[Event], int]:
    """The run's latest events (oldest first) and how many earlier ones were left out."""
    store = state(request).core.store
    kept: collections.deque[Event] = collections.deque(maxlen=FEED_LIMIT)
    seq, total = 0, 0
    while True:
        batch = await store.events_after(run_id, seq)
        kept.extend(batch)
        total += len(batch)
        if len(batch) < 500:
            break
        seq = batch[-1].seq
    return list(kept), total - len(kept)


async def run_page(request: web.Request) -> web.Response:
    member = await require_member(request)
    (run_id,) = path_values(request, "run_id")
    reveal = _reveal(request)
    core = state(request).core
    try:
        run = await core.service.get_run(member, member.workspace_id, run_id)
    except ApprovalError:
        return not_found(request, "run")
    tasks = await core.store.tasks(member.workspace_id, run_id=run_id, limit=500)
    events, earlier = await _feed(request, run_id)
    masked_tasks = [render.masked(t) for t in tasks]
    masked_events = [render.masked_event(e) for e in events]
    hides = masked_tasks != tasks or masked_events != events
    return page(
        request,
        "run.html",
        {
            "run": run,
            "rules_json": _rules_text(run.approval_rules),
            "tasks": tasks if reveal else masked_tasks,
            "events": events if reveal else masked_events,
            "earlier": earlier,
            "word": outcome_word,
            "detail": _compact,
            "revealed": reveal,
            "masks_something": hides,
        },
    )


def _rules_text(rules: list[dict[str, Any]]) -> str:
    """One rule a line, numbered by position as the engine counts them."""
    if not rules:
        return "[]"
    lines = [json.dumps(rule, ensure_ascii=False) for rule in rules]
    return "[\n" + ",\n".join(f"  {text}" for text in lines) + "\n]"


def outcome_word(task: Task) -> str:
    """A task's state as people read it; the rules' own verdicts read granted / refused."""
    if task.parked:
        return "waiting"
    if task.via == "engine":
        return "granted" if task.state == "granted" else "refused"
    return ending_word(task)


def history_filters(request: web.Request) -> dict[str, str]:
    """The filters asked for; one no record could match (a NUL…) is a 422 before any query."""
    filters = {k: query_value(request, k) for k in ("outcome", "who", "tool", "via")}
    if filters["outcome"] not in OUTCOMES:
        filters["outcome"] = ""
    return filters


async def ended_decisions(
    request: web.Request, member: Principal, filters: dict[str, str], limit: int = 200
) -> list[Task]:
    outcome = filters["outcome"]
    tasks = await state(request).core.store.tasks(
        member.workspace_id,
        states=OUTCOMES[outcome] if outcome else ENDED_STATES,
        tool=filters["tool"] or None,
        resolved_by=filters["who"] or None,
        via=filters["via"] or None,
        parked_only=True,
        limit=limit * 2 if outcome in ("denied", "declined") else limit,
    )
    if outcome:
        tasks = [t for t in tasks if ending_word(t) == outcome]
    tasks.sort(key=lambda t: t.decided_at or t.created_at, reverse=True)
    return tasks[:limit]


def _summary(task: Task) -> str:
    if task.kind == "ask":
        return render.question(task)[0] or "question"
    return render.profile_view(task.effect_profile).summary or task.tool


async def history(request: web.Request) -> web.Response:
    member = await require_member(request)
    filters = history_filters(request)
    tasks = await ended_decisions(request, member, filters)
    async with state(request).core.store.read() as tx:
        people = [m.name for m in await tx.list_members(member.workspace_id)]
    return page(
        request,
        "history.html",
        {
            "tasks": [render.masked(t) for t in tasks],  # each decision's page can reveal
            "filters": filters,
            "outcomes": list(OUTCOMES),
            "surfaces": SURFACES,
            "people": people,
            "word": ending_word,
            "summary": _summary,
            "answer": render.resolution_text,
        },
    )
