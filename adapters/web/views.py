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

from adapters.http import ids
from adapters.web import learned_steps, render, timeline
from adapters.web.context import (
    error_html,
    member_of,
    page,
    path_values,
    query_value,
    require_member,
    state,
)
from bot.decisions import ENDING_QUERIES, EndingQuery, ending_word
from bot.domain import Event, LogRecord, Principal, Run, Task
from bot.errors import ApprovalError
from bot.masking import mask_text, mask_value

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
    shown = history if reveal else [_masked_record(r) for r in history]
    card = make_card(task, run, request, full=True, reveal=reveal)
    agent = await _agent_name(request, run)
    rules = [
        (row, row.index == task.rule_index)
        for row in timeline.rule_rows(run.approval_rules)
        if row.index in task.matched
    ]
    return page(
        request,
        "decision.html",
        {
            "c": card,
            "run": run,
            "title": render.title_of(card.task),
            "answer": render.resolution_text(card.task),
            "raw_input": json.dumps(card.task.tool_input, indent=2, ensure_ascii=False),
            "rules": rules,
            "steps": learned_steps.worded(timeline.build(run, [card.task], shown, agent)),
            "may_approve": await _may_approve(request, task),
            "revealed": reveal,
            "masks_something": render.masks_something(task) or shown != history,
            "ago": render.ago,
            "tone_of": timeline.tone_of,
        },
    )


async def _may_approve(request: web.Request, task: Task) -> list[str] | None:
    """Under a quorum, who may still approve this parked call (None: anyone, or it ended)."""
    if not task.parked or task.approvals_given is None:
        return None
    service = state(request).core.service
    return await service.may_still_approve(task.workspace_id, task.run_id, task.key)


def _masked_record(record: LogRecord) -> LogRecord:
    entry = dataclasses.replace(record.entry, detail=mask_value(record.entry.detail))
    return dataclasses.replace(record, entry=entry)


async def _agent_name(request: web.Request, run: Run) -> str | None:
    """The name of the application that declared the run: its entries read "the agent"."""
    if run.application_id is None:
        return None
    async with state(request).core.store.read() as tx:
        app = await tx.get_application(run.application_id)
    return app.name if app is not None else None


@dataclass
class RunRow:
    """One run on the runs list: what tells it apart, how it stands, what waits."""

    run: Run
    first: Task | None  # its first call or question (as shown: masked)
    ending: timeline.RunEnding
    waiting: int


async def runs(request: web.Request) -> web.Response:
    member = await require_member(request)
    store = state(request).core.store
    listed = await store.runs(member.workspace_id, limit=200)
    ids = [r.id for r in listed]
    waiting = {run_id: count for run_id, count, _ in await store.ask_counts(member.workspace_id)}
    endings = await store.run_endings(member.workspace_id, ids, timeline.RUN_ENDINGS)
    abandoned = [r for r in ids if r in endings and endings[r].entry.action == "run_abandoned"]
    helds = await store.run_endings(member.workspace_id, abandoned, timeline.HELD)
    firsts = await store.first_tasks(ids)
    async with store.read() as tx:
        apps = {a.id: a.name for a in await tx.list_applications(member.workspace_id)}
    rows = [
        RunRow(
            run=run,
            first=render.masked(firsts[run.id]) if run.id in firsts else None,
            ending=timeline.ending_of(
                run, endings.get(run.id), apps.get(run.application_id or ""), helds.get(run.id)
            ),
            waiting=waiting.get(run.id, 0),
        )
        for run in listed
    ]
    return page(
        request,
        "runs.html",
        {"rows": rows, "title_of": render.title_of, "ago": render.ago, "tone_of": timeline.tone_of},
    )


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


@dataclass
class LogPage:
    """One page of a run's log as the timeline shows it: at most FEED_LIMIT entries, oldest
    first, and where it sits in the whole log."""

    records: list[LogRecord]
    total: int  # entries in the run's whole log
    older: int  # entries older than this page
    before: int | None  # the cursor this page was asked for (None: the newest page)

    @property
    def first(self) -> int:
        """The page's first entry, counted from 1 at the oldest."""
        return self.older + 1 if self.records else self.older

    @property
    def last(self) -> int:
        return self.older + len(self.records)

    @property
    def older_cursor(self) -> int | None:
        """`?before=` for the page of older entries, when there are any."""
        return self.records[0].id if self.older and self.records else None


def _before(request: web.Request) -> int | None:
    """The run page's `?before=`: a log entry's id (the page shows the entries before it). One
    that is not a whole number the log could hold is a 400 before any query."""
    raw = request.query.get("before", "").strip()
    if not raw:
        return None
    before = ids.log_id(raw)
    if before is None or before < 1:
        message = "invalid_cursor: before: not a cursor from this run's page"
        raise web.HTTPBadRequest(
            text=error_html(request, 400, "Invalid request", message), content_type="text/html"
        )
    return before


async def _log(request: web.Request, member: Principal, run_id: str, before: int | None) -> LogPage:
    """At most FEED_LIMIT of the run's log entries before `before` (the newest without it), and
    counts to place them (the store reads them by keyset: store/sql.py `log_page`)."""
    store = state(request).core.store
    records, total, older = await store.log_page(
        member.workspace_id, run_id, before_id=before, limit=FEED_LIMIT
    )
    return LogPage(records, total, older, before)


async def _older_tasks(
    request: web.Request, member: Principal, tasks: list[Task], records: list[LogRecord]
) -> list[Task]:
    """The tasks the shown entries are about that `tasks` (the run's newest) miss: an older
    page's, so its steps read as the newest page's do. One read each, at most a page's."""
    known = {t.key for t in tasks}
    wanted = sorted({r.entry.task_key or "" for r in records} - known - {""})
    found: list[Task] = []
    if wanted and records:
        run_id = records[0].entry.run_id or ""
        async with state(request).core.store.read() as tx:
            for key in wanted:
                task = await tx.get_task(run_id, key)
                if task is not None and task.workspace_id == member.workspace_id:
                    found.append(task)
    return found


async def run_page(request: web.Request) -> web.Response:
    member = await require_member(request)
    (run_id,) = path_values(request, "run_id")
    reveal = _reveal(request)
    before = _before(request)
    core = state(request).core
    try:
        run = await core.service.get_run(member, member.workspace_id, run_id)
    except ApprovalError:
        return not_found(request, "run")
    tasks = await core.store.tasks(member.workspace_id, run_id=run_id, limit=500)
    log_page = await _log(request, member, run_id, before)
    records = log_page.records
    about = tasks + await _older_tasks(request, member, tasks, records)
    events, earlier = await _feed(request, run_id)
    masked_tasks = [render.masked(t) for t in tasks]
    masked_about = masked_tasks + [render.masked(t) for t in about[len(tasks) :]]
    masked_events = [render.masked_event(e) for e in events]
    masked_records = [_masked_record(r) for r in records]
    hides = masked_about != about or masked_events != events or masked_records != records
    agent = await _agent_name(request, run)
    endings = await core.store.run_endings(member.workspace_id, [run_id], timeline.RUN_ENDINGS)
    helds = await core.store.run_endings(member.workspace_id, [run_id], timeline.HELD)
    shown_tasks = tasks if reveal else masked_tasks
    return page(
        request,
        "run.html",
        {
            "run": run,
            "agent": agent,
            "ending": timeline.ending_of(run, endings.get(run_id), agent, helds.get(run_id)),
            "rules": timeline.rule_rows(run.approval_rules),
            "steps": learned_steps.worded(
                timeline.build(
                    run,
                    about if reveal else masked_about,
                    records if reveal else masked_records,
                    agent,
                )
            ),
            "log_page": log_page,
            "waiting": [t for t in shown_tasks if t.parked],
            "counts": collections.Counter(outcome_word(t) for t in tasks),
            "events": events if reveal else masked_events,
            "earlier": earlier,
            "detail": _compact,
            "title_of": render.title_of,
            "revealed": reveal,
            "masks_something": hides,
            "ago": render.ago,
            "tone_of": timeline.tone_of,
        },
    )


def _compact(value: Any) -> str:
    if not value:
        return ""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def outcome_word(task: Task) -> str:
    """A task's state as people read it; the rules' own verdicts read granted / refused."""
    if task.parked:
        return "waiting"
    if task.via == "engine":
        return "granted" if task.state == "granted" else "refused"
    return ending_word(task)


def history_filters(request: web.Request) -> dict[str, str]:
    """The filters asked for; one no record could match (a NUL…) is a 422 before any query."""
    filters = {k: query_value(request, k) for k in ("outcome", "who", "tool", "via", "q")}
    if filters["outcome"] not in ENDING_QUERIES:
        filters["outcome"] = ""
    filters["q"] = filters["q"].strip()[:200]
    return filters


async def ended_decisions(
    request: web.Request, member: Principal, filters: dict[str, str], limit: int = 200
) -> list[Task]:
    outcome = filters["outcome"]
    query = ENDING_QUERIES[outcome] if outcome else EndingQuery(ENDED_STATES)
    tasks = await state(request).core.store.tasks(
        member.workspace_id,
        states=query.states,
        tool=filters["tool"] or None,
        resolved_by=filters["who"] or None,
        via=filters["via"] or None,
        parked_only=True,
        limit=limit,
        search=filters.get("q") or None,
        error_codes=query.error_codes,
        not_error_codes=query.not_error_codes,
    )
    tasks.sort(key=lambda t: t.decided_at or t.created_at, reverse=True)
    return tasks[:limit]


def _note(task: Task) -> str:
    """What the ending said besides its word: a deny's reason, an answer, why it expired."""
    if task.resolution:
        return "answer: " + render.resolution_text(task)
    error = task.error or {}
    detail = str(error.get("detail") or "")
    if task.state == "failed" and detail.startswith("denied by "):
        return ""  # no reason given: the who column says it
    if ending_word(task) == "denied" and detail:
        return "reason: " + detail
    return detail


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
            "filtered": any(filters.values()),
            "outcomes": list(ENDING_QUERIES),
            "surfaces": SURFACES,
            "people": people,
            "word": ending_word,
            "title_of": render.title_of,
            "note": _note,
            "ago": render.ago,
            "tone_of": timeline.tone_of,
        },
    )
