"""The decision log (the audit trail) as CSV or JSON: every entry, oldest first, streamed in
pages so a long log never sits in memory.

Everything that can fail fails before the response starts: the filter is checked (422) and the
first page read before the head is sent, so a bad request or an unreachable database is an
error page, not a download cut short after `200 OK`. The export is the audit trail: unmasked.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator

from aiohttp import web

from adapters.web.context import query_value, require_member, start_stream, state
from bot.domain import LogRecord, Principal

PAGE = 1000
COLUMNS = ("id", "at", "action", "actor", "via", "run_id", "task_key", "detail")


class _Log:
    """The log's pages for one export: `open()` reads the first before anything is sent."""

    def __init__(self, request: web.Request, member: Principal) -> None:
        self.store = state(request).core.store
        self.workspace_id = member.workspace_id
        self.run_id = query_value(request, "run") or None
        self.first: list[LogRecord] = []

    async def _page(self, after: int) -> list[LogRecord]:
        return await self.store.log_entries(
            self.workspace_id, after_id=after, limit=PAGE, run_id=self.run_id
        )

    async def open(self) -> _Log:
        self.first = await self._page(0)
        return self

    async def records(self) -> AsyncIterator[LogRecord]:
        batch = self.first
        while True:
            for record in batch:
                yield record
            if len(batch) < PAGE:
                return
            batch = await self._page(batch[-1].id)


def _row(record: LogRecord) -> dict[str, object]:
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


async def _start(request: web.Request, content_type: str, name: str) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": content_type,
            "Content-Disposition": f'attachment; filename="{name}"',
            "Cache-Control": "no-store",
        }
    )
    await start_stream(request, response)
    return response


async def export_csv(request: web.Request) -> web.StreamResponse:
    member = await require_member(request)
    log = await _Log(request, member).open()
    response = await _start(request, "text/csv; charset=utf-8", "decision-log.csv")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    async for record in log.records():
        row = _row(record)
        row["detail"] = json.dumps(row["detail"], ensure_ascii=False, sort_keys=True)
        writer.writerow([_cell(row[c]) for c in COLUMNS])
        if buffer.tell() > 64_000:
            await response.write(buffer.getvalue().encode())
            buffer.seek(0)
            buffer.truncate()
    await response.write(buffer.getvalue().encode())
    await response.write_eof()
    return response


def _cell(value: object) -> str:
    """Text for a spreadsheet: a leading = + - @ would run as a formula, so it is quoted."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


async def export_json(request: web.Request) -> web.StreamResponse:
    member = await require_member(request)
    log = await _Log(request, member).open()
    response = await _start(request, "application/json; charset=utf-8", "decision-log.json")
    await response.write(b"[")
    first = True
    async for record in log.records():
        text = json.dumps(_row(record), ensure_ascii=False, sort_keys=True)
        await response.write((text if first else ",\n" + text).encode())
        first = False
    await response.write(b"]\n")
    await response.write_eof()
    return response
