"""Chat adapters' state (implements bot.ports.ChatState) on the SqlStore's database.

Writes go through `SqlStore.write()` so they take SQLite's single-writer lock like every other
write. Records two instances might both write (message refs, multi-select toggles, digest pages,
platform records) change by compare-and-swap on `version`: `UPDATE … WHERE version = :seen`, one
winner. Chat, message and user ids are the platform's, as text (Telegram's integers in decimal).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain import Task
from bot.ports import ChatCallback, ChatPrompt, DigestPage, Versioned
from store import convert as cv
from store.sql import SqlStore
from store.tx import CALLBACK, CHOICE, DIGEST, PROMPT, RECORD, REF, TASK

_PAGE_CHANGES = frozenset({"message_id", "task_ids", "is_open", "done", "shown", "lease_until"})


def _page(row: Any) -> DigestPage:
    return DigestPage(
        id=int(row["id"]),
        channel=row["channel"],
        chat_id=row["chat_id"],
        message_id=row["message_id"],
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

    def poll_lock(self, name: str) -> PgPollLock | None:
        """On PostgreSQL, the lock that elects one poller among instances; on SQLite (one
        instance) none is needed."""
        if not self.store.postgres:
            return None
        return PgPollLock(self.store.url, name, self.store.schema)

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
        async with self.store.write() as tx:
            await tx.conn.execute(
                self._insert_ignoring(CALLBACK, self._callback_rows(callbacks, at))
            )

    async def callback_task(
        self, channel: str, callback_id: str
    ) -> tuple[ChatCallback, Task] | None:
        """The platform's button and its task in one read (a press is on the hot path)."""
        if not callback_id or len(callback_id) > 32:
            return None
        stmt = (
            sa.select(
                TASK,
                CALLBACK.c.id.label("cb_id"),
                CALLBACK.c.channel.label("cb_channel"),
                CALLBACK.c.action.label("cb_action"),
                CALLBACK.c.option.label("cb_option"),
                CALLBACK.c.chat.label("cb_chat"),
            )
            .select_from(CALLBACK.join(TASK, TASK.c.id == CALLBACK.c.task_id))
            .where(CALLBACK.c.channel == channel, CALLBACK.c.id == callback_id)
        )
        row = await self._first(stmt)
        if row is None:
            return None
        callback = ChatCallback(
            row["cb_id"], row["cb_channel"], row["id"], row["cb_action"], row["cb_option"],
            row["cb_chat"],
        )  # fmt: skip
        return callback, cv.task(dict(row))

    # versioned records -------------------------------------------------------------------------
    async def _get(self, table: sa.Table, channel: str, task_id: str) -> Any:
        stmt = sa.select(table).where(table.c.channel == channel, table.c.task_id == task_id)
        return await self._first(stmt)

    def _callback_rows(
        self, callbacks: Sequence[ChatCallback], at: datetime
    ) -> list[dict[str, Any]]:
        return [
            {
                "id": c.id,
                "channel": c.channel,
                "task_id": c.task_id,
                "action": c.action,
                "option": c.option,
                "chat": c.chat,
                "created_at": cv.ts(at),
            }
            for c in callbacks
        ]

    async def _swap(
        self,
        table: sa.Table,
        column: str,
        channel: str,
        task_id: str,
        data: Any,
        version: int,
        callbacks: Sequence[ChatCallback] = (),
        at: datetime | None = None,
    ) -> bool:
        """Write `data` if the record is still at `version` (0: absent); True if we won.
        `callbacks` are saved in the same transaction (one write instead of two)."""
        async with self.store.write() as tx:
            if callbacks:
                rows = self._callback_rows(callbacks, at or datetime.now(UTC))
                await tx.conn.execute(self._insert_ignoring(CALLBACK, rows))
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
        return None if row is None else _versioned(row)

    async def get_refs(self, channel: str, task_ids: Sequence[str]) -> dict[str, Versioned]:
        """The delivery records of many tasks in one read (a thread parent's count)."""
        found: dict[str, Versioned] = {}
        async with self.engine.connect() as conn:
            for start in range(0, len(task_ids), 500):  # bound the statement's parameters
                chunk = task_ids[start : start + 500]
                stmt = sa.select(REF).where(REF.c.channel == channel, REF.c.task_id.in_(chunk))
                for row in (await conn.execute(stmt)).mappings():
                    found[row["task_id"]] = _versioned(row)
        return found

    async def swap_ref(
        self,
        channel: str,
        task_id: str,
        data: dict[str, Any],
        version: int,
        callbacks: Sequence[ChatCallback] = (),
        at: datetime | None = None,
    ) -> bool:
        return await self._swap(REF, "data", channel, task_id, data, version, callbacks, at)

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

    def _prompt_key(self, channel: str, chat_id: str, message_id: str) -> Any:
        return sa.and_(
            PROMPT.c.channel == channel,
            PROMPT.c.chat_id == chat_id,
            PROMPT.c.message_id == message_id,
        )

    async def prompt(self, channel: str, chat_id: str, message_id: str) -> ChatPrompt | None:
        row = await self._first(
            sa.select(PROMPT).where(self._prompt_key(channel, chat_id, message_id))
        )
        if row is None:
            return None
        return ChatPrompt(
            row["channel"],
            row["chat_id"],
            row["message_id"],
            row["task_id"],
            row["action"],
            row["user_id"],
        )

    async def drop_prompt(self, channel: str, chat_id: str, message_id: str) -> bool:
        """Delete the prompt; True for the one caller that removed it (a reply counts once)."""
        async with self.store.write() as tx:
            result = await tx.conn.execute(
                sa.delete(PROMPT).where(self._prompt_key(channel, chat_id, message_id))
            )
        return bool(result.rowcount == 1)

    # digests -----------------------------------------------------------------------------------
    async def _join(
        self,
        conn: AsyncConnection,
        channel: str,
        chat_id: str,
        task_id: str,
        page_size: int,
        now: float,
        fresh_for: float,
    ) -> DigestPage:
        # A page older than `fresh_for` seconds takes nothing more: its message has scrolled
        # out of view, so a later burst starts a page of its own at the bottom of the chat.
        await conn.execute(
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
        row = (await conn.execute(stmt)).mappings().first()
        if row is not None and task_id in (row["task_ids"] or []):
            return _page(row)
        if row is not None and len(row["task_ids"] or []) < page_size:
            await conn.execute(
                sa.update(DIGEST)
                .where(DIGEST.c.id == row["id"])
                .values(
                    task_ids=[*row["task_ids"], task_id],
                    version=DIGEST.c.version + 1,
                    updated_at=now,
                )
            )
        else:
            if row is not None:  # full: later decisions start the next page
                await conn.execute(
                    sa.update(DIGEST)
                    .where(DIGEST.c.id == row["id"])
                    .values(is_open=False, version=DIGEST.c.version + 1, updated_at=now)
                )
            await conn.execute(
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
        fresh = (await conn.execute(stmt)).mappings().first()
        assert fresh is not None
        return _page(fresh)

    async def join_digest(
        self,
        channel: str,
        chat_id: str,
        task_id: str,
        page_size: int,
        at: datetime,
        ref: Versioned,
        fresh_for: float = 600.0,
    ) -> DigestPage | None:
        """Add the task to a digest page and write `ref.data` with the page id under "digest" to
        its delivery ref, in one transaction; None (and nothing written) if the ref is no longer
        at `ref.version`. The platform's own fields (where it posted) are the caller's."""
        async with self.store.write() as tx:
            data = dict(ref.data)
            if ref.version == 0:
                row = {"channel": channel, "task_id": task_id, "data": data, "version": 1}
                result = await tx.conn.execute(self._insert_ignoring(REF, [row]))
            else:
                result = await tx.conn.execute(
                    sa.update(REF)
                    .where(
                        REF.c.channel == channel,
                        REF.c.task_id == task_id,
                        REF.c.version == ref.version,
                    )
                    .values(data=data, version=ref.version + 1)
                )
            if result.rowcount != 1:
                return None
            page = await self._join(
                tx.conn, channel, chat_id, task_id, page_size, cv.ts(at), fresh_for
            )
            await tx.conn.execute(
                sa.update(REF)
                .where(REF.c.channel == channel, REF.c.task_id == task_id)
                .values(data={**data, "digest": page.id})
            )
        return page

    async def tasks(self, task_ids: Sequence[str]) -> list[Task]:
        """Tasks by id in one query, in the order given (missing ones left out)."""
        if not task_ids:
            return []
        stmt = sa.select(TASK).where(TASK.c.id.in_(list(task_ids)))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        found = {r["id"]: cv.task(dict(r)) for r in rows}
        return [found[i] for i in task_ids if i in found]

    async def digest_pages(self, channel: str, chat_id: str | None = None) -> list[DigestPage]:
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

    # platform records --------------------------------------------------------------------------
    async def get_record(self, channel: str, key: str) -> Versioned | None:
        row = await self._first(
            sa.select(RECORD).where(RECORD.c.channel == channel, RECORD.c.key == key)
        )
        return None if row is None else _versioned(row)

    async def swap_record(self, channel: str, key: str, data: dict[str, Any], version: int) -> bool:
        """Write `data` if the record is still at `version` (0: absent); True if we won."""
        now = datetime.now(UTC).timestamp()
        async with self.store.write() as tx:
            if version == 0:
                row = {
                    "channel": channel,
                    "key": key,
                    "data": data,
                    "version": 1,
                    "updated_at": now,
                }
                result = await tx.conn.execute(self._insert_ignoring(RECORD, [row]))
            else:
                result = await tx.conn.execute(
                    sa.update(RECORD)
                    .where(
                        RECORD.c.channel == channel,
                        RECORD.c.key == key,
                        RECORD.c.version == version,
                    )
                    .values(data=data, version=version + 1, updated_at=now)
                )
        return bool(result.rowcount == 1)


class PgPollLock:
    """Which instance long-polls Telegram, among several sharing a PostgreSQL database.

    Telegram gives updates to one `getUpdates` caller per bot (a second one gets 409 and they
    steal updates from each other). The poller is whoever holds a session advisory lock on a
    dedicated connection: when it dies, its connection closes, the lock goes and another
    instance takes over at its next try. Every instance sends either way.
    """

    def __init__(self, url: str, name: str, schema: str | None = None) -> None:
        parsed = make_url(url)
        self._dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        seed = hashlib.sha256(f"approvalbot-poll:{schema or ''}:{name}".encode()).digest()
        self._key = int.from_bytes(seed[:8], "big", signed=True)
        self._schema = schema
        self._conn: Any = None
        self.held = False

    async def acquire(self) -> bool:
        """Try to become the poller (without waiting); True while we are it."""
        if self.held and await self.alive():
            return True
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn = await asyncpg.connect(self._dsn)
            self.held = bool(
                await self._conn.fetchval("SELECT pg_try_advisory_lock($1)", self._key)
            )
        except (OSError, asyncpg.PostgresError):
            await self.release()
        return self.held

    async def alive(self) -> bool:
        """Is the lock still ours (its connection still up)?"""
        if self._conn is None or self._conn.is_closed():
            self.held = False
            return False
        try:
            await self._conn.fetchval("SELECT 1")
        except (OSError, asyncpg.PostgresError):
            await self.release()
            return False
        return self.held

    async def release(self) -> None:
        self.held = False
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await conn.close()


def _versioned(row: Any) -> Versioned:
    """A record's row as the port hands it out: its data and the version to swap it from."""
    return Versioned(dict(row["data"] or {}), int(row["version"]))
