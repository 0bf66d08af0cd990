"""The inbox: what waits for the signed-in member, grouped by run, and the fragment the page's
script swaps in.

It stays small whatever waits: a page holds at most `GROUPS_PER_PAGE` runs, each with its
newest `CARDS_PER_GROUP` cards and a "show N more" link to the run's own queue
(`/inbox?run=<id>`, `CARDS_PER_RUN_PAGE` cards a page, older ones by a keyset cursor). Counts
come from one grouped query (`ask_counts`), so the header's and each group's are the real
totals, not the length of what is shown.

With JavaScript, "show N more" opens in place instead: the script fetches the run's next cards
(`/web/inbox?cards=1&run=<id>&before=<cursor>`, `run_cards`) and inserts them into the group;
its live refreshes then ask for those groups as opened (`open=<n>~<run id>`), so a swap keeps
them open.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from adapters.web import render
from adapters.web.context import (
    error_html,
    fragment,
    member_of,
    page,
    query_value,
    require_member,
    state,
)
from adapters.web.views import Card, make_card, runs_by_id
from bot.domain import Principal, Run, Task
from bot.durations import format_duration
from bot.service import ApprovalService

CARDS_PER_GROUP = 3
GROUPS_PER_PAGE = 10
CARDS_PER_RUN_PAGE = 25
MAX_OPEN = 200  # the most cards a group opened in place keeps across live refreshes
# The live feed names the newest decisions only: with every run's count that is enough to see
# any change (a new park is the newest; an ended one lowers its run's count), at any size.
NEWEST_KEYS = 20


def ago(value: datetime | None, now: datetime) -> str:
    """How long ago, as people say it ("just now", "4 min ago"); the page's script keeps it
    current, and the absolute time is in the element's title."""
    if value is None:
        return ""
    seconds = int((now - value).total_seconds())
    if seconds < 10:
        return "just now"
    # The largest unit alone ("2 h ago", not "2 h 14 min ago"): the title has the rest.
    return " ".join(format_duration(timedelta(seconds=seconds)).split(" ")[:2]) + " ago"


@dataclass
class Group:
    """One run's waiting decisions as the inbox shows them."""

    run_id: str
    run: Run | None
    waiting: int  # the real total, not only what is shown
    newest: datetime
    cards: list[Card]
    sender: str | None = None  # when every shown card came from the same sender
    older: str = ""  # a run's own queue: the links to its next page and back to its first
    newer: str = ""
    more_cards: str = ""  # where the script fetches the cards after these (opened in place)

    @property
    def title(self) -> str:
        return render.run_name(self.run, self.run_id)

    @property
    def more(self) -> int:
        return max(0, self.waiting - len(self.cards))


@dataclass
class Inbox:
    groups: list[Group]
    total: int
    runs: int
    page: int = 1
    pages: int = 1
    run_id: str | None = None  # the inbox of one run (`?run=`)
    version: str = ""
    here: str = "/inbox"  # where a decision made on this page comes back to
    keys: list[str] = field(default_factory=list)


def version_of(counts: list[tuple[str, int, datetime]], newest_keys: list[str]) -> str:
    """A short digest of what rests on people: it changes whenever anything does."""
    data = json.dumps([[(r, n) for r, n, _ in counts], newest_keys], separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()[:16]


async def inbox_version(service: ApprovalService, member: Principal) -> tuple[str, int, list[str]]:
    """(version, total, the newest keys): what the live feed compares, two small queries."""
    counts = await service.ask_counts(member, member.workspace_id)
    newest = await service.asks(member, member.workspace_id, limit=NEWEST_KEYS)
    keys = [f"{t.run_id}/{t.key}" for t in newest]
    return version_of(counts, _marks(newest)), sum(n for _, n, _ in counts), keys


def _marks(tasks: list[Task]) -> list[str]:
    """What the version digests of each newest decision: its id, and how many approvals it
    has under a quorum (a counted approval changes no count, but its card must show it)."""
    return [f"{t.run_id}/{t.key}#{len(t.approvals_given or ())}" for t in tasks]


def _bad(request: web.Request, message: str) -> web.HTTPUnprocessableEntity:
    return web.HTTPUnprocessableEntity(
        text=error_html(request, 422, "Invalid request", f"invalid_request: {message}"),
        content_type="text/html",
    )


def _page_number(request: web.Request) -> int:
    raw = query_value(request, "page") or "1"
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 1_000_000:
        raise _bad(request, "page: a whole number from 1")
    return int(raw)


def cursor_of(created_at: datetime, task_id: str) -> str:
    return f"{created_at.isoformat()}~{task_id}"


def _cursor(request: web.Request) -> tuple[datetime, str] | None:
    raw = query_value(request, "before")
    if not raw:
        return None
    at, sep, task_id = raw.partition("~")
    at = at.replace(" ", "+")  # a "+00:00" that reached us unencoded reads as a space
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        moment = None
    if not sep or not task_id or moment is None or moment.tzinfo is None:
        raise _bad(request, "before: a cursor from an inbox link")
    return moment, task_id


def _opened(request: web.Request) -> dict[str, int]:
    """The groups the script opened in place (`open=<n>~<run id>`): how many cards each shows.
    Only the script's hint of what it shows, so one it could not have sent is left out."""
    opened: dict[str, int] = {}
    for raw in request.query.getall("open", [])[:GROUPS_PER_PAGE]:
        count, sep, run_id = raw.partition("~")
        if sep and run_id and count.isascii() and count.isdigit() and len(count) < 5:
            opened[run_id] = max(CARDS_PER_GROUP, min(int(count), MAX_OPEN))
    return opened


def cards_path(run_id: str, last: Task, page_number: int, sender: str | None) -> str:
    """The fragment of the run's cards after `last`, for a group opened in place; the cards
    come back to `page_number` after a decision, and name their sender unless it is the
    group's."""
    query = {"cards": "1", "run": run_id, "before": cursor_of(last.created_at, last.id)}
    if page_number > 1:
        query["page"] = str(page_number)
    if sender:
        query["sender"] = sender
    return "/web/inbox?" + urlencode(query)


def _sender(cards: list[Card]) -> str | None:
    senders = {c.task.appended_by or "an agent" for c in cards}
    return senders.pop() if len(senders) == 1 else None


async def build_inbox(request: web.Request, member: Principal) -> Inbox:
    service = state(request).core.service
    ws = member.workspace_id
    counts = await service.ask_counts(member, ws)
    newest = await service.asks(member, ws, limit=NEWEST_KEYS)
    version = version_of(counts, _marks(newest))
    total = sum(n for _, n, _ in counts)
    run_id = query_value(request, "run") or None
    if run_id is not None:
        return await _one_run(request, member, counts, run_id, total, version)
    pages = max(1, math.ceil(len(counts) / GROUPS_PER_PAGE))
    number = min(_page_number(request), pages)
    shown = counts[(number - 1) * GROUPS_PER_PAGE : number * GROUPS_PER_PAGE]
    runs = await runs_by_id(request, {r for r, _, _ in shown})
    opened = _opened(request)
    groups = []
    for rid, waiting, at in shown:
        limit = opened.get(rid, CARDS_PER_GROUP)
        tasks = await service.asks(member, ws, run_id=rid, limit=limit)
        cards = [make_card(t, runs.get(rid), request, full=False) for t in tasks]
        group = Group(rid, runs.get(rid), waiting, at, cards, _sender(cards))
        if tasks and group.more:
            group.more_cards = cards_path(rid, tasks[-1], number, group.sender)
        groups.append(group)
    here = "/inbox" if number == 1 else f"/inbox?page={number}"
    return Inbox(groups, total, len(counts), number, pages, None, version, here, _keys(groups))


async def _run_page(
    request: web.Request,
    member: Principal,
    run_id: str,
    waiting: int,
    before: tuple[datetime, str] | None,
) -> tuple[Group, list[Task], bool]:
    """One page of a run's cards (CARDS_PER_RUN_PAGE after `before`) as its group, the tasks
    shown, and whether more wait after them."""
    core = state(request).core
    tasks = await core.service.asks(
        member, member.workspace_id, run_id=run_id, limit=CARDS_PER_RUN_PAGE + 1, before=before
    )
    runs = await runs_by_id(request, {run_id})
    shown = tasks[:CARDS_PER_RUN_PAGE]
    cards = [make_card(t, runs.get(run_id), request, full=False) for t in shown]
    at = shown[0].created_at if shown else core.clock.now()
    group = Group(run_id, runs.get(run_id), waiting, at, cards, _sender(cards))
    return group, shown, len(tasks) > CARDS_PER_RUN_PAGE


async def _one_run(
    request: web.Request,
    member: Principal,
    counts: list[tuple[str, int, datetime]],
    run_id: str,
    total: int,
    version: str,
) -> Inbox:
    before = _cursor(request)
    query: dict[str, str] = {"run": run_id}
    if before is not None:
        query["before"] = cursor_of(*before)
    here = "/inbox?" + urlencode(query)
    waiting = next((n for r, n, _ in counts if r == run_id), 0)
    group, shown, more = await _run_page(request, member, run_id, waiting, before)
    if not shown:
        return Inbox([], total, len(counts), run_id=run_id, version=version, here=here)
    if more:
        last = shown[-1]
        group.older = "/inbox?" + urlencode(
            {"run": run_id, "before": cursor_of(last.created_at, last.id)}
        )
    if before is not None:
        group.newer = "/inbox?" + urlencode({"run": run_id})
    return Inbox([group], total, len(counts), run_id=run_id, version=version, here=here,
                 keys=_keys([group]))  # fmt: skip


def _keys(groups: list[Group]) -> list[str]:
    return [c.ident for g in groups for c in g.cards]


def _context(inbox: Inbox) -> dict[str, Any]:
    return {"inbox": inbox, "inbox_total": inbox.total, "keys": inbox.keys}


async def inbox(request: web.Request) -> web.Response:
    member = await require_member(request)
    return page(request, "inbox.html", _context(await build_inbox(request, member)))


async def inbox_fragment(request: web.Request) -> web.Response:
    """The inbox list alone (for the same query as the page): what the page's script swaps in
    when the stream says something changed. With `cards=1`, one run's next cards instead
    (`run_cards`)."""
    member = member_of(request)
    if member is None:
        raise web.HTTPUnauthorized(text="unauthorized: sign in again")
    if request.query.get("cards") == "1":
        return await run_cards(request, member)
    return fragment(request, "_inbox_list.html", _context(await build_inbox(request, member)))


async def run_cards(request: web.Request, member: Principal) -> web.Response:
    """A run's cards after a cursor (`CARDS_PER_RUN_PAGE` at most), to insert into its group
    on the inbox: "show N more" opened in place. Carries the run's real count and, when more
    wait, where the next cards are."""
    run_id = query_value(request, "run")
    if not run_id:
        raise _bad(request, "run: the run whose cards to show")
    before = _cursor(request)
    number = _page_number(request)
    sender = query_value(request, "sender") or None
    counts = await state(request).core.service.ask_counts(member, member.workspace_id)
    waiting = next((n for r, n, _ in counts if r == run_id), 0)
    group, shown, more = await _run_page(request, member, run_id, waiting, before)
    group.sender = sender  # as the inbox's group showed it, whatever these cards say
    if more:
        group.more_cards = cards_path(run_id, shown[-1], number, sender)
    here = "/inbox" if number == 1 else f"/inbox?page={number}"
    return fragment(request, "_inbox_list.html", {"more_cards": group, "here": here})
