"""The inbox: what waits for the signed-in member, and the fragment the page's script swaps in."""

from __future__ import annotations

from aiohttp import web

from adapters.web.context import fragment, member_of, page, require_member, state
from adapters.web.views import Card, make_card, runs_by_id
from bot.domain import Principal


async def inbox_cards(request: web.Request, member: Principal) -> list[Card]:
    service = state(request).core.service
    tasks = await service.asks(member, member.workspace_id)
    runs = await runs_by_id(request, {t.run_id for t in tasks})
    return [make_card(t, runs.get(t.run_id), request, full=False) for t in tasks]


async def inbox(request: web.Request) -> web.Response:
    member = await require_member(request)
    cards = await inbox_cards(request, member)
    return page(request, "inbox.html", {"cards": cards, "keys": [c.ident for c in cards]})


async def inbox_fragment(request: web.Request) -> web.Response:
    """The inbox list alone: what the page's script swaps in when the stream says so."""
    member = member_of(request)
    if member is None:
        raise web.HTTPUnauthorized(text="unauthorized: sign in again")
    cards = await inbox_cards(request, member)
    return fragment(request, "_inbox_list.html", {"cards": cards, "keys": [c.ident for c in cards]})
