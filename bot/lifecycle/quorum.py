"""Several approvers, where they meet the store: a run's requirements checked when it is
declared, the count a parked call needs, each review counted (or refused) before the approve
that completes the count ends the task, and who may still approve (for the chat surfaces).

The pure rules are bot/quorum.py's. Every review runs under its run's lock (the `_run` read
of bot/lifecycle/review.py), so a count is read and written by one writer at a time and the
ending is the usual compare-and-set: one deny among many approvals ends it exactly once.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from bot import access, errors, quorum
from bot.decisions import RunSpec, log_entry
from bot.domain import Principal, Run, Task, ordered_id
from bot.errors import ApprovalError
from bot.lifecycle.learn import Learning
from bot.ports import Tx
from bot.quorum import Approvals


class Quorum(Learning):
    """Approval requirements, groups and the count of reviews."""

    def _requirements(
        self, spec: RunSpec, parent: Run | None, extra: list[dict[str, Any]] | None
    ) -> tuple[list[dict[str, Any]], bool, str | None]:
        """The run's requirements and forbid_self_approval: its own (`extra`, checked by
        `quorum.check_requirements`) over its parent's or profile's, only tighter; and the
        person its parent acts for. Pure: the declaration works it out once before the store's
        write lock (to compile the requirements off the event loop) and again under it."""
        behalf: str | None = None
        if parent is not None:
            base, forbid = parent.approval_requirements, parent.forbid_self_approval
            behalf = parent.on_behalf_of
        elif spec.profile is not None and spec.profile in self.profiles:
            profile = self.profiles[spec.profile]
            base, forbid = profile.approval_requirements, profile.forbid_self_approval
        else:
            base, forbid = [], False
        if spec.forbid_self_approval is not None and not isinstance(
            spec.forbid_self_approval, bool
        ):
            raise ApprovalError(
                errors.INVALID_REQUEST, "forbid_self_approval: must be true or false", 422
            )
        requirements, forbid = quorum.tighten(base, forbid, extra, spec.forbid_self_approval)
        return requirements, forbid, behalf

    async def _declared_quorum(
        self,
        tx: Tx,
        workspace_id: str,
        spec: RunSpec,
        parent: Run | None,
        extra: list[dict[str, Any]] | None,
    ) -> tuple[list[dict[str, Any]], bool, str | None]:
        """The run's (approval_requirements, forbid_self_approval, on_behalf_of): its own
        (`extra`, already checked) over its parent's or profile's, only tighter; the groups and
        the person they name exist."""
        requirements, forbid, behalf = self._requirements(spec, parent, extra)
        on_behalf_of = spec.on_behalf_of
        if behalf is not None and on_behalf_of not in (None, behalf):
            raise ApprovalError(
                errors.APPROVAL_WIDENING,
                f"on_behalf_of: a continuation acts for {behalf!r}, as its parent run does",
                422,
            )
        on_behalf_of = on_behalf_of if on_behalf_of is not None else behalf
        names = quorum.group_names(requirements)
        if names:
            # Held to the commit: a removal of one of these groups waits for this declaration,
            # or was made before the groups are read here (bot/admin.py, group_in_use).
            await tx.lock_groups(workspace_id, shared=True)
            known = await tx.groups(workspace_id)
            missing = sorted(names - set(known))
            if missing:
                raise ApprovalError(
                    quorum.UNKNOWN_GROUP,
                    f"approval_requirements: no group named {missing[0]!r} in {workspace_id}",
                    422,
                )
        if on_behalf_of is not None:
            if not isinstance(on_behalf_of, str) or not on_behalf_of:
                raise ApprovalError(errors.INVALID_REQUEST, "on_behalf_of: a member's name", 422)
            if await tx.find_member(workspace_id, name=on_behalf_of) is None:
                raise ApprovalError(
                    quorum.UNKNOWN_MEMBER,
                    f"on_behalf_of: no member named {on_behalf_of!r} in {workspace_id}",
                    422,
                )
        return requirements, forbid, on_behalf_of

    async def _count_review(
        self,
        tx: Tx,
        run: Run,
        task: Task,
        principal: Principal,
        verdict: str,
        reason: str,
        via: str,
        now: datetime,
        approved_input: Any,
        as_proposed: bool = False,
    ) -> tuple[Task | None, Any]:
        """Record one person's review of a parked call. Returns the task, still parked, with
        its new count when an approval was counted without completing the quorum; else None
        and the input the ending approves (None: the call's own).

        Refusals are raised before anything is written: self-approval (403), a member no
        requirement counts (403, either verdict: the groups name who reviews such a call),
        the same member again (409). An edit under a quorum restarts the count on the edited
        input: the other approvals are superseded and the editor's counts first. `as_proposed`
        (the person sent the call's own input while the count is for an edit) restarts it on
        the proposed input likewise: their approval never counts for an edit they undid."""
        if verdict == "approve" and principal.name in quorum.self_excluded(run):
            why = "acts for" if run.on_behalf_of == principal.name else "was declared by"
            raise ApprovalError(
                quorum.SELF_APPROVAL_FORBIDDEN,
                f"this run {why} {principal.name}: someone else must approve its calls",
                403,
            )
        current = task.reviewed_input  # the edited input the count is for (None: the call's)
        if approved_input is not None:
            edited = approved_input != current
            reviewed = approved_input if edited else current
        else:
            edited = as_proposed and current is not None
            reviewed = None if as_proposed else current
        found = quorum.matching_edit(
            run.approval_requirements, run.aliases, task.tool_name, task.tool_input, reviewed
        )
        under = bool(found) or task.approvals_given is not None
        if found and any("groups" in r for r in found):
            mine = (await tx.groups_of_members(run.workspace_id, [principal.name]))[principal.name]
            if not quorum.eligible(found, mine):
                wanted = sorted({g for r in found for g in r.get("groups") or ()})
                raise ApprovalError(
                    quorum.NOT_AN_ELIGIBLE_APPROVER,
                    f"{principal.name} is in none of the groups that review this call: "
                    + ", ".join(wanted),
                    403,
                )
        written = await tx.put_review(
            task_id=task.id, member=principal, verdict=verdict, reason=reason, via=via, at=now
        )
        if not written:
            raise ApprovalError(
                quorum.ALREADY_REVIEWED,
                f"{principal.name} already reviewed this decision; it waits for someone else",
                409,
            )
        if verdict != "approve" or not under:
            return None, approved_input
        mark = {"by": principal.name, "at": now.isoformat()}
        if edited:
            await tx.supersede_approvals(task.id, principal.id)
            given = [mark]
        else:
            given = [*(task.approvals_given or []), mark]
        names = [g["by"] for g in given]
        groups_of: dict[str, set[str]] = {}
        if any("groups" in r for r in found):
            groups_of = await tx.groups_of_members(run.workspace_id, names)
        required = quorum.required(found)
        await tx.set_approvals(
            task.id, approvals_given=given, reviewed_input=reviewed, required_approvals=required
        )
        if quorum.is_met(found, names, groups_of):
            return None, reviewed
        counted = replace(
            task, approvals_given=given, reviewed_input=reviewed, required_approvals=required
        )
        detail: dict[str, Any] = {"approvals": len(given), "required": required}
        if edited:
            proposed = task.tool_input if reviewed is None else reviewed
            detail |= {"tool_input": task.tool_input, "approved_input": proposed}
            if task.approvals_given:  # earlier approvals were for another input
                detail["count_restarted"] = True
        await tx.add_log([log_entry(run, counted, "reviewed", principal, via, detail, at=now)])
        # Chat surfaces show the count ("1 of 2 approvals · alice ✓") from this notification.
        suffix = f":{ordered_id('rev')}"
        payload = {"approvals": len(given), "required": required, "by": principal.name}
        await tx.add_outbox(self.outbox_items(counted, "reviewed", now, suffix, payload))
        return counted, None

    @staticmethod
    def approvals(task: Task) -> Approvals | None:
        """The task's count (`required`, `given`), or None when no requirement applies."""
        return quorum.approvals_of(task.required_approvals, task.approvals_given)

    async def may_still_approve(self, workspace_id: str, run_id: str, key: str) -> list[str] | None:
        """The members whose approval would still count toward this parked call's quorum, by
        name (not those who approved, not the person the run acts for under
        forbid_self_approval); None when no requirement applies (any member may decide).
        For the chat surfaces' counts and nudges; an ended task has nobody left ([])."""
        async with self.store.read() as tx:
            run = await self._run(tx, workspace_id, run_id, lock=False)
            task = await self._task(tx, workspace_id, run_id, key)
            if task.approvals_given is None:
                return None
            if not task.parked:
                return []
            found = quorum.matching_edit(
                run.approval_requirements,
                run.aliases,
                task.tool_name,
                task.tool_input,
                task.reviewed_input,
            )
            members = await tx.member_names(workspace_id)
            groups_of = await tx.groups_of_members(workspace_id, members)
        given = [g["by"] for g in task.approvals_given]
        excluded = quorum.self_excluded(run)
        return quorum.may_still_approve(found, given, groups_of, members, excluded)

    async def groups(self, principal: Principal, workspace_id: str) -> dict[str, list[str]]:
        """The workspace's groups with their members (members only)."""
        access.check_workspace(principal, workspace_id)
        access.require_member(principal)
        async with self.store.read() as tx:
            return await tx.groups(workspace_id)
