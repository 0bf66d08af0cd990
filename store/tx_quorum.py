"""Several approvers (bot.ports.QuorumTx): groups of members, the review rows of a quorum and a
task's count so far. Every write here runs under the run's lock taken by the review (or, for
groups, under the workspace's group lock: `lock_groups`), so a count is read and written by one
writer at a time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.domain import Principal, Run
from store import convert as cv
from store.tables import GroupMemberRow, MemberGroupRow
from store.txbase import MEMBER, REVIEW, RUN, TASK, TxBase

MEMBER_GROUP = MemberGroupRow.__table__  # type: ignore[attr-defined]
GROUP_MEMBER = GroupMemberRow.__table__  # type: ignore[attr-defined]

# A review row whose approval an edit made void (the count restarted on the edited input);
# its member may approve again, which renews the row.
SUPERSEDED = "superseded"

# A transaction-scoped advisory lock per workspace, in the two-key space (apart from the
# single-key locks of the migrations and the Telegram poller): the class names what it guards.
_GROUPS_KEY = "hashtext('approvalbot-groups'), hashtext(:workspace)"
_LOCK_GROUPS = {
    False: sa.text(f"SELECT pg_advisory_xact_lock({_GROUPS_KEY})"),
    True: sa.text(f"SELECT pg_advisory_xact_lock_shared({_GROUPS_KEY})"),
}


class QuorumTx(TxBase):
    async def lock_groups(self, workspace_id: str, *, shared: bool = False) -> None:
        """Hold the workspace's groups still until this transaction ends: exclusive for a change
        to them (and the check that the running runs can spare it), shared for a declaration
        that checks the groups its requirements name. Call it before reading the groups. On
        PostgreSQL two removals would otherwise each count the members as they were before the
        other; SQLite's writers are one at a time already (BEGIN IMMEDIATE), so there it does
        nothing."""
        if self.postgres:
            await self.conn.execute(_LOCK_GROUPS[shared], {"workspace": workspace_id})

    async def insert_group(self, group_id: str, workspace_id: str, name: str, at: datetime) -> None:
        await self._insert(
            MEMBER_GROUP,
            {"id": group_id, "workspace_id": workspace_id, "name": name, "created_at": cv.ts(at)},
        )

    async def group_id(self, workspace_id: str, name: str) -> str | None:
        row = await self._one(
            sa.select(MEMBER_GROUP.c.id).where(
                MEMBER_GROUP.c.workspace_id == workspace_id, MEMBER_GROUP.c.name == name
            )
        )
        return row["id"] if row else None

    async def add_group_member(self, group_id: str, member_id: str) -> bool:
        """False when the member is in the group already (checked first: a failed insert
        would abort a PostgreSQL transaction)."""
        found = await self._one(
            sa.select(GROUP_MEMBER.c.member_id).where(
                GROUP_MEMBER.c.group_id == group_id, GROUP_MEMBER.c.member_id == member_id
            )
        )
        if found:
            return False
        await self._insert(GROUP_MEMBER, {"group_id": group_id, "member_id": member_id})
        return True

    async def remove_group_member(self, group_id: str, member_id: str) -> bool:
        result = await self.conn.execute(
            sa.delete(GROUP_MEMBER).where(
                GROUP_MEMBER.c.group_id == group_id, GROUP_MEMBER.c.member_id == member_id
            )
        )
        return bool(result.rowcount)

    async def delete_group(self, group_id: str) -> None:
        await self.conn.execute(sa.delete(GROUP_MEMBER).where(GROUP_MEMBER.c.group_id == group_id))
        await self.conn.execute(sa.delete(MEMBER_GROUP).where(MEMBER_GROUP.c.id == group_id))

    async def groups(self, workspace_id: str) -> dict[str, list[str]]:
        """Every group of the workspace by name, with its members' names (both sorted)."""
        names = await self._all(
            sa.select(MEMBER_GROUP.c.name)
            .where(MEMBER_GROUP.c.workspace_id == workspace_id)
            .order_by(MEMBER_GROUP.c.name)
        )
        out: dict[str, list[str]] = {row["name"]: [] for row in names}
        rows = await self._all(
            sa.select(MEMBER_GROUP.c.name.label("group"), MEMBER.c.name.label("member"))
            .select_from(
                MEMBER_GROUP.join(GROUP_MEMBER, GROUP_MEMBER.c.group_id == MEMBER_GROUP.c.id).join(
                    MEMBER, MEMBER.c.id == GROUP_MEMBER.c.member_id
                )
            )
            .where(MEMBER_GROUP.c.workspace_id == workspace_id)
            .order_by(MEMBER.c.name)
        )
        for row in rows:
            out[row["group"]].append(row["member"])
        return out

    async def live_runs(self, workspace_id: str) -> list[Run]:
        """The workspace's running and held runs that have approval requirements, by id."""
        rows = await self._all(
            sa.select(RUN)
            .where(RUN.c.workspace_id == workspace_id, RUN.c.state.in_(("running", "held")))
            .order_by(RUN.c.id)
        )
        runs = [cv.run(row) for row in rows]
        return [run for run in runs if run.approval_requirements]

    async def member_names(self, workspace_id: str) -> list[str]:
        rows = await self._all(
            sa.select(MEMBER.c.name)
            .where(MEMBER.c.workspace_id == workspace_id)
            .order_by(MEMBER.c.name)
        )
        return [row["name"] for row in rows]

    async def groups_of_members(
        self, workspace_id: str, names: Sequence[str]
    ) -> dict[str, set[str]]:
        """The groups each named member is in (every name given has an entry)."""
        out: dict[str, set[str]] = {name: set() for name in names}
        if not names:
            return out
        rows = await self._all(
            sa.select(MEMBER.c.name.label("member"), MEMBER_GROUP.c.name.label("group"))
            .select_from(
                MEMBER.join(GROUP_MEMBER, GROUP_MEMBER.c.member_id == MEMBER.c.id).join(
                    MEMBER_GROUP, MEMBER_GROUP.c.id == GROUP_MEMBER.c.group_id
                )
            )
            .where(MEMBER.c.workspace_id == workspace_id, MEMBER.c.name.in_(list(names)))
        )
        for row in rows:
            out[row["member"]].add(row["group"])
        return out

    async def put_review(
        self,
        *,
        task_id: str,
        member: Principal,
        verdict: str,
        reason: str,
        via: str,
        at: datetime,
    ) -> bool:
        """Record a person's review; False when they reviewed this task already (a review an
        edit superseded is renewed instead)."""
        row = await self._one(
            sa.select(REVIEW.c.id, REVIEW.c.verdict).where(
                REVIEW.c.task_id == task_id, REVIEW.c.member_id == member.id
            )
        )
        values: dict[str, Any] = {
            "member_name": member.name,
            "verdict": verdict,
            "reason": reason,
            "via": via,
            "created_at": cv.ts(at),
        }
        if row is None:
            await self._insert(REVIEW, values | {"task_id": task_id, "member_id": member.id})
            return True
        if row["verdict"] != SUPERSEDED:
            return False
        await self.conn.execute(sa.update(REVIEW).where(REVIEW.c.id == row["id"]).values(values))
        return True

    async def supersede_approvals(self, task_id: str, keep_member_id: str) -> None:
        """An edit restarts the count: every other approval of the task no longer counts."""
        await self.conn.execute(
            sa.update(REVIEW)
            .where(
                REVIEW.c.task_id == task_id,
                REVIEW.c.verdict == "approve",
                REVIEW.c.member_id != keep_member_id,
            )
            .values(verdict=SUPERSEDED)
        )

    async def set_approvals(
        self,
        task_id: str,
        *,
        approvals_given: list[dict[str, Any]],
        reviewed_input: Any,
        required_approvals: int,
    ) -> None:
        await self.conn.execute(
            sa.update(TASK)
            .where(TASK.c.id == task_id)
            .values(
                approvals_given=approvals_given,
                reviewed_input=reviewed_input,
                required_approvals=required_approvals,
            )
        )
