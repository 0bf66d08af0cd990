"""The browser page's sessions (implements bot.ports.WebSessions) on the SqlStore's database.

A signed-in cookie names a `web_session` row; every request reads it (one read by primary key,
joined to the member and checked against the person's credentials on their indexed column), so
a session ends at once, in every instance, when:

- the person signs out (`revoke`: the row's `revoked_at`);
- the person's tokens are rotated or revoked (`revoke_for_member`), and even when whoever did it
  never called that (the admin CLI in another process): a session is live only while the person
  holds a token that is not revoked and no token of theirs was revoked since the session began
  (at the same instant counts as since: when in doubt, the session ends).

Writes go through `SqlStore.write()`, so on SQLite they take the single-writer lock like every
other write; on PostgreSQL the engine's search_path names the schema, as for every table.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from bot.domain import Principal
from bot.ports import WebSession
from store import convert as cv
from store.sql import SqlStore
from store.tx import CREDENTIAL, MEMBER, WEB_SESSION

MAX_ID = 64  # the column's length: a longer id names no session


def _usable(text: str, limit: int) -> bool:
    """Text a query may carry on both databases: no NUL, no lone surrogate, within `limit`."""
    return bool(text) and len(text) <= limit and text.isascii() and "\x00" not in text


class SqlSessions:
    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def create(self, session: WebSession) -> None:
        member = session.member
        if not member.is_member or not _usable(session.id, MAX_ID):
            raise ValueError("a web session is a person's, named by a short ASCII id")
        now = cv.ts(session.created_at)
        async with self.store.write() as tx:
            # The person's sessions that ended a while ago are not read again: drop them here
            # (by the indexed member_id) rather than let the table grow by one row a sign-in.
            await tx.conn.execute(
                sa.delete(WEB_SESSION).where(
                    WEB_SESSION.c.member_id == member.id, WEB_SESSION.c.expires_at < now
                )
            )
            await tx.conn.execute(
                sa.insert(WEB_SESSION).values(
                    id=session.id,
                    member_id=member.id,
                    workspace_id=member.workspace_id,
                    created_at=now,
                    expires_at=cv.ts(session.expires_at),
                    revoked_at=None,
                )
            )

    async def get(self, session_id: str, now: datetime) -> WebSession | None:
        if not _usable(session_id, MAX_ID):
            return None
        s = WEB_SESSION
        active = CREDENTIAL.alias("active")
        revoked = CREDENTIAL.alias("revoked")
        holds_a_token = (
            sa.select(active.c.id)
            .where(active.c.principal_id == s.c.member_id, active.c.revoked_at.is_(None))
            .exists()
        )
        revoked_since = (
            sa.select(revoked.c.id)
            .where(revoked.c.principal_id == s.c.member_id, revoked.c.revoked_at >= s.c.created_at)
            .exists()
        )
        stmt = (
            sa.select(
                s.c.id,
                s.c.member_id,
                s.c.workspace_id,
                s.c.created_at,
                s.c.expires_at,
                MEMBER.c.name,
            )
            .select_from(
                s.join(
                    MEMBER,
                    sa.and_(
                        MEMBER.c.id == s.c.member_id, MEMBER.c.workspace_id == s.c.workspace_id
                    ),
                )
            )
            .where(
                s.c.id == session_id,
                s.c.revoked_at.is_(None),
                s.c.expires_at > cv.ts(now),
                holds_a_token,
                ~revoked_since,
            )
        )
        async with self.store.read() as tx:
            row = (await tx.conn.execute(stmt)).mappings().first()
        if row is None:
            return None
        return WebSession(
            id=row["id"],
            member=Principal("member", row["member_id"], row["name"], row["workspace_id"]),
            created_at=cv.dt(row["created_at"]),
            expires_at=cv.dt(row["expires_at"]),
        )

    async def revoke(self, session_id: str, at: datetime) -> bool:
        if not _usable(session_id, MAX_ID):
            return False
        return await self._revoke(WEB_SESSION.c.id == session_id, at) > 0

    async def revoke_for_member(self, member_id: str, at: datetime) -> int:
        if not _usable(member_id, 40):
            return 0
        return await self._revoke(WEB_SESSION.c.member_id == member_id, at)

    async def _revoke(self, which: sa.ColumnElement[bool], at: datetime) -> int:
        async with self.store.write() as tx:
            result = await tx.conn.execute(
                sa.update(WEB_SESSION)
                .where(which, WEB_SESSION.c.revoked_at.is_(None))
                .values(revoked_at=cv.ts(at))
            )
        return int(result.rowcount)
