"""Chat adapters' state (implements bot.ports.ChatState) on the SqlStore's database.

Writes go through `SqlStore.write()` so they take SQLite's single-writer lock like every other
write. Records two instances might both write (message refs, multi-select toggles, digest pages)
change by compare-and-swap on `version`: `UPDATE … WHERE version = :seen`, one winner.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from bot.ports import ChatCallback, ChatPrompt, DigestPage, Versioned
from store import convert as cv
from store.sql import SqlStore
from store.tables import (
    ChatCallbackRow,
    ChatChoiceRow,
    ChatDigestRow,
    ChatPromptRow,
    DeliveryRefRow,
)

CALLBACK = ChatCallbackRow.__table__  # type: ignore[attr-defined]
PROMPT = ChatPromptRow.__table__  # type: ignore[attr-defined]
CHOICE = ChatChoiceRow.__table__  # type: ignore[attr-defined]
DIGEST = ChatDigestRow.__table__  # type: ignore[attr-defined]
REF = DeliveryRefRow.__table__  # type: ignore[attr-defined]

_PAGE_CHANGES = frozenset({"message_id", "task_ids", "is_open", "done", "shown", "lease_until"})


def _page(row: Any) -> DigestPage:
    return DigestPage(
        id=int(row["id"]),
        channel=row["channel"],
        chat_id=int(row["chat_id"]),
        message_id=None if row["message_id"] is None else int(row["message_id"]),
        task_ids=list(row["task_ids"] or []),
        is_open=bool(row["is_open"]),
        done=bool(row["done"]),
        shown=row["shown"],
        lease_until=float(row["lease_until"]),
        version=int(row["version"]),
    )


class ChatStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.engine = store.engine

    def _insert_ignoring(self, table: sa.Table, rows: list[dict[str, Any]]) -> Any:
        dialect = postgresql if self.store.postgres else sqlite
        return dialect.insert(table).values(rows).on_conflict_do_nothing()

    async def _first(self, stmt: Any) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(stmt)).mappings().first()

    # callbacks ---------------------------------------------------------------------------------
    async def save_callbacks(self, callbacks: Sequence[ChatCallback], at: datetime) -> None:
        if not callbacks:
            return
        rows = [
            {
                "id": c.id,
                "channel": c.channel,
                "task_id": c.task_id,
                "action": c.action,
                "option": c.option,
                "created_at": cv.ts(at),
            }
            for c in callbacks
        ]
        async with self.store.write() as tx:
            await tx.conn.execute(self._insert_ignoring(CALLBACK, rows))

    async def callback(self, callback_id: str) -> ChatCallback | None:
        if not callback_id or len(callback_id) > 32:
            return None
        row = await self._first(sa.select(CALLBACK).where(CALLBACK.c.id == callback_id))
        if row is None:
            return None
        return ChatCallback(row["id"], row["channel"], row["task_id"], row["action"], row["option"])

    # versioned records -------------------------------------------------------------------------
    async def _get(self, table: sa.Table, channel: str, task_id: str) -> Any:
        stmt = sa.select(table).where(table.c.channel == channel, table.c.task_id == task_id)
        return await self._first(stmt)

    async def _swap(
        self,
        table: sa.Table,
        column: str,
        channel: str,
        task_id: str,
        data: Any,
        version: int,
    ) -> bool:
        """Write `data` if the record is still at `version` (0: absent); True if we won."""
        async with self.store.write() as tx:
            if version == 0:
                row = {"channel": channel, "task_id": task_id, column: data, "version": 1}
                result = await tx.conn.execute(self._insert_ignoring(table, [row]))
            else:
                result = await tx.conn.execute(
                    sa.update(table)
                    .where(
                        table.c.channel == channel,
                        table.c.task_id == task_id,
                        table.c.version == version,
                    )
                    .values({column: data, "version": version + 1})
                )
        return bool(result.rowcount == 1)

    async def get_ref(self, channel: str, task_id: str) -> Versioned | None:
        row = await self._get(REF, channel, task_id)
        return None if row is None else Versioned(dict(row["data"] or {}), int(row["version"]))

    async def swap_ref(
        self, channel: str, task_id: str, data: dict[str, Any], version: int
    ) -> bool:
        return await self._swap(REF, "data", channel, task_id, data, version)

    async def refs(self, channel: str, task_ids: Sequence[str]) -> dict[str, Versioned]:
        if not task_ids:
            return {}
        stmt = sa.select(REF).where(REF.c.channel == channel, REF.c.task_id.in_(list(task_ids)))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return {r["task_id"]: Versioned(dict(r["data"] or {}), int(r["version"])) for r in rows}

    async def get_choice(self, channel: str, task_id: str) -> Versioned | None:
        row = await self._get(CHOICE, channel, task_id)
        return None if row is None else Versioned(dict(row["chosen"] or {}), int(row["version"]))

    async def swap_choice(
        self, channel: str, task_id: str, data: dict[str, Any], version: int
    ) -> bool:
        return await self._swap(CHOICE, "chosen", channel, task_id, data, version)

    # ForceReply prompts ------------------------------------------------------------------------
    async def add_prompt(self, prompt: ChatPrompt, at: datetime) -> None:
        row = {
            "channel": prompt.channel,
            "chat_id": prompt.chat_id,
            "message_id": prompt.message_id,
            "task_id": prompt.task_id,
            "action": prompt.action,
            "user_id": prompt.user_id,
            "created_at": cv.ts(at),
        }
        async with self.store.write() as tx:
            await tx.conn.execute(self._insert_ignoring(PROMPT, [row]))

    def _prompt_key(self, channel: str, chat_id: int, message_id: int) -> Any:
        return sa.and_(
            PROMPT.c.channel == channel,
            PROMPT.c.chat_id == chat_id,
            PROMPT.c.message_id == message_id,
        )

    async def prompt(self, channel: str, chat_id: int, message_id: int) -> ChatPrompt | None:
        row = await self._first(
            sa.select(PROMPT).where(self._prompt_key(channel, chat_id, message_id))
        )
        if row is None:
            return None
        return ChatPrompt(
            row["channel"],
            int(row["chat_id"]),
            int(row["message_id"]),
            row["task_id"],
            row["action"],
            int(row["user_id"]),
        )

    async def drop_prompt(self, channel: str, chat_id: int, message_id: int) -> bool:
        """Delete the prompt; True for the one caller that removed it (a reply counts once)."""
        async with self.store.write() as tx:
            result = await tx.conn.execute(
                sa.delete(PROMPT).where(self._prompt_key(channel, chat_id, message_id))
            )
        return bool(result.rowcount == 1)

    # digests -----------------------------------------------------------------------------------
    async def add_to_digest(
        self,
        channel: str,
        chat_id: int,
        task_id: str,
        page_size: int,
        at: datetime,
        fresh_for: float = 600.0,
    ) -> DigestPage:
        now = cv.ts(at)
        async with self.store.write() as tx:
            # A page older than `fresh_for` seconds takes nothing more: its message has scrolled
            # out of view, so a later burst starts a page of its own at the bottom of the chat.
            await tx.conn.execute(
                sa.update(DIGEST)
                .where(
                    DIGEST.c.channel == channel,
                    DIGEST.c.chat_id == chat_id,
                    DIGEST.c.done.is_(False),
                    DIGEST.c.is_open.is_(True),
                    DIGEST.c.created_at < now - fresh_for,
                )
                .values(is_open=False, version=DIGEST.c.version + 1, updated_at=now)
            )
            stmt = (
                sa.select(DIGEST)
                .where(
                    DIGEST.c.channel == channel,
                    DIGEST.c.chat_id == chat_id,
                    DIGEST.c.done.is_(False),
                    DIGEST.c.is_open.is_(True),
                )
                .order_by(DIGEST.c.id.desc())
                .limit(1)
            )
            if self.store.postgres:
                stmt = stmt.with_for_update()
            row = (await tx.conn.execute(stmt)).mappings().first()
            if row is not None and task_id in (row["task_ids"] or []):
                return _page(row)
            if row is not None and len(row["task_ids"] or []) < page_size:
                ids = [*row["task_ids"], task_id]
                await tx.conn.execute(
                    sa.update(DIGEST)
                    .where(DIGEST.c.id == row["id"])
                    .values(task_ids=ids, version=DIGEST.c.version + 1, updated_at=now)
                )
            else:
                if row is not None:  # full: later decisions start the next page
                    await tx.conn.execute(
                        sa.update(DIGEST)
                        .where(DIGEST.c.id == row["id"])
                        .values(is_open=False, version=DIGEST.c.version + 1, updated_at=now)
                    )
                await tx.conn.execute(
                    sa.insert(DIGEST).values(
                        channel=channel,
                        chat_id=chat_id,
                        message_id=None,
                        task_ids=[task_id],
                        is_open=True,
                        done=False,
                        shown="",
                        lease_until=0.0,
                        version=1,
                        created_at=now,
                        updated_at=now,
                    )
                )
            fresh = (await tx.conn.execute(stmt)).mappings().first()
        assert fresh is not None
        return _page(fresh)

    async def digest_pages(self, channel: str, chat_id: int | None = None) -> list[DigestPage]:
        stmt = sa.select(DIGEST).where(DIGEST.c.channel == channel, DIGEST.c.done.is_(False))
        if chat_id is not None:
            stmt = stmt.where(DIGEST.c.chat_id == chat_id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt.order_by(DIGEST.c.id))).mappings().all()
        return [_page(r) for r in rows]

    async def get_page(self, page_id: int) -> DigestPage | None:
        row = await self._first(sa.select(DIGEST).where(DIGEST.c.id == page_id))
        return None if row is None else _page(row)

    async def swap_page(self, page_id: int, version: int, **changes: Any) -> bool:
        unknown = set(changes) - _PAGE_CHANGES
        if unknown:
            raise ValueError(f"not a digest page field: {sorted(unknown)}")
        async with self.store.write() as tx:
            result = await tx.conn.execute(
                sa.update(DIGEST)
                .where(DIGEST.c.id == page_id, DIGEST.c.version == version)
                .values(**changes, version=version + 1)
            )
        return bool(result.rowcount == 1)
