"""Workspaces, members, applications, credentials and instance metadata (bot.ports.IdentityTx)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from bot.domain import Application, Member, Principal, Workspace
from store import convert as cv
from store.txbase import APPLICATION, CREDENTIAL, MEMBER, META, WEB_SESSION, WORKSPACE, TxBase

# A transaction-scoped advisory lock per workspace (two-key space, a class of its own): adding a
# member checks the others' names and chat ids, and two additions at once must not both pass.
_LOCK_MEMBERS = sa.text(
    "SELECT pg_advisory_xact_lock(hashtext('approvalbot-members'), hashtext(:workspace))"
)


class IdentityTx(TxBase):
    async def get_workspace(self, workspace_id: str) -> Workspace | None:
        row = await self._one(sa.select(WORKSPACE).where(WORKSPACE.c.id == workspace_id))
        return cv.workspace(row) if row else None

    async def insert_workspace(self, workspace: Workspace) -> None:
        values = {"id": workspace.id, "name": workspace.name}
        await self._insert(WORKSPACE, values | {"created_at": cv.ts(workspace.created_at)})

    async def list_workspaces(self) -> list[Workspace]:
        return [cv.workspace(r) for r in await self._all(sa.select(WORKSPACE))]

    async def insert_member(self, member: Member) -> None:
        await self._insert(
            MEMBER,
            {
                "id": member.id,
                "workspace_id": member.workspace_id,
                "name": member.name,
                "telegram_user_id": member.telegram_user_id,
                "slack_user_id": member.slack_user_id,
                "created_at": 0.0,
            },
        )

    async def get_member(self, member_id: str) -> Member | None:
        row = await self._one(sa.select(MEMBER).where(MEMBER.c.id == member_id))
        return cv.member(row) if row else None

    async def find_member(
        self,
        workspace_id: str,
        *,
        name: str | None = None,
        telegram_user_id: int | None = None,
        slack_user_id: str | None = None,
    ) -> Member | None:
        stmt = sa.select(MEMBER).where(MEMBER.c.workspace_id == workspace_id)
        if name is not None:
            stmt = stmt.where(MEMBER.c.name == name)
        if telegram_user_id is not None:
            stmt = stmt.where(MEMBER.c.telegram_user_id == telegram_user_id)
        if slack_user_id is not None:
            stmt = stmt.where(MEMBER.c.slack_user_id == slack_user_id)
        row = await self._one(stmt.limit(1))
        return cv.member(row) if row else None

    async def chat_members(
        self,
        workspace_id: str,
        *,
        telegram_user_id: int | None = None,
        slack_user_id: str | None = None,
    ) -> list[tuple[Member, bool]]:
        """The members of the workspace mapped to that chat identity, each with whether they
        hold a member token of the workspace that is not revoked (may decide now). Read at
        every press: nothing is remembered. No identity named: nobody."""
        if telegram_user_id is None and slack_user_id is None:
            return []
        live = (
            sa.select(CREDENTIAL.c.id)
            .where(
                CREDENTIAL.c.principal_id == MEMBER.c.id,
                CREDENTIAL.c.workspace_id == MEMBER.c.workspace_id,
                CREDENTIAL.c.kind == "member",
                CREDENTIAL.c.revoked_at.is_(None),
            )
            .exists()
        )
        stmt = sa.select(MEMBER, live.label("live")).where(MEMBER.c.workspace_id == workspace_id)
        if telegram_user_id is not None:
            stmt = stmt.where(MEMBER.c.telegram_user_id == telegram_user_id)
        if slack_user_id is not None:
            stmt = stmt.where(MEMBER.c.slack_user_id == slack_user_id)
        rows = await self._all(stmt.order_by(MEMBER.c.id).limit(20))
        return [(cv.member(row), bool(row["live"])) for row in rows]

    async def lock_members(self, workspace_id: str) -> None:
        """Hold the workspace's members still until this transaction ends (an addition's
        checks against the others, on PostgreSQL; SQLite's writers are one at a time)."""
        if self.postgres:
            await self.conn.execute(_LOCK_MEMBERS, {"workspace": workspace_id})

    async def list_members(self, workspace_id: str) -> list[Member]:
        stmt = sa.select(MEMBER).where(MEMBER.c.workspace_id == workspace_id)
        return [cv.member(r) for r in await self._all(stmt.order_by(MEMBER.c.name))]

    async def insert_application(self, app: Application) -> None:
        await self._insert(APPLICATION, cv.application_values(app))

    async def find_application(self, workspace_id: str, name: str) -> Application | None:
        row = await self._one(
            sa.select(APPLICATION).where(
                APPLICATION.c.workspace_id == workspace_id, APPLICATION.c.name == name
            )
        )
        return cv.application(row) if row else None

    async def get_application(self, application_id: str) -> Application | None:
        row = await self._one(sa.select(APPLICATION).where(APPLICATION.c.id == application_id))
        return cv.application(row) if row else None

    async def list_applications(self, workspace_id: str) -> list[Application]:
        stmt = sa.select(APPLICATION).where(APPLICATION.c.workspace_id == workspace_id)
        return [cv.application(r) for r in await self._all(stmt.order_by(APPLICATION.c.name))]

    async def insert_credential(
        self, *, credential_id: str, principal: Principal, token_hash: str, at: datetime
    ) -> None:
        await self._insert(
            CREDENTIAL,
            {
                "id": credential_id,
                "workspace_id": principal.workspace_id,
                "kind": principal.kind,
                "principal_id": principal.id,
                "principal_name": principal.name,
                "token_hash": token_hash,
                "created_at": cv.ts(at),
            },
        )

    async def principal_for_token(self, token_hash: str) -> Principal | None:
        row = await self._one(
            sa.select(CREDENTIAL).where(
                CREDENTIAL.c.token_hash == token_hash, CREDENTIAL.c.revoked_at.is_(None)
            )
        )
        if row is None:
            return None
        return Principal(
            kind=row["kind"],
            id=row["principal_id"],
            name=row["principal_name"],
            workspace_id=row["workspace_id"],
        )

    async def has_active_credential(self, principal_id: str) -> bool:
        stmt = (
            sa.select(CREDENTIAL.c.id)
            .where(CREDENTIAL.c.principal_id == principal_id, CREDENTIAL.c.revoked_at.is_(None))
            .limit(1)
        )
        return (await self.conn.execute(stmt)).first() is not None

    async def revoke_credentials(self, principal_id: str, at: datetime) -> int:
        result = await self.conn.execute(
            sa.update(CREDENTIAL)
            .where(CREDENTIAL.c.principal_id == principal_id, CREDENTIAL.c.revoked_at.is_(None))
            .values(revoked_at=cv.ts(at))
        )
        # Their web sessions end with their tokens (rotation included), in the same write.
        await self.conn.execute(
            sa.update(WEB_SESSION)
            .where(WEB_SESSION.c.member_id == principal_id, WEB_SESSION.c.revoked_at.is_(None))
            .values(revoked_at=cv.ts(at))
        )
        return int(result.rowcount)

    async def get_meta(self, key: str) -> str | None:
        row = await self._one(sa.select(META.c.value).where(META.c.key == key))
        return None if row is None else str(row["value"])

    async def set_meta(self, key: str, value: str) -> None:
        await self._insert(META, {"key": key, "value": value})
