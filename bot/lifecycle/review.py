"""A person's review of a parked call: approve or deny. One review may not end the task (a
quorum counts reviews); the one that does ends it with a compare-and-set.

An approve may edit the call (`tool_input`: evaluated again, bot/lifecycle/learn.py) and ask to
allow calls like it from now on (`allow`: a learned rule, kept with the ending)."""

from __future__ import annotations

from typing import Any

from bot import access, errors
from bot.decisions import REASON_LIMIT, already_decided, invalid
from bot.domain import Ending, Principal, Task
from bot.errors import ApprovalError
from bot.learning import AllowSpec
from bot.lifecycle.learn import UNEDITED, edit_detail
from bot.lifecycle.quorum import Quorum


class Reviews(Quorum):
    """Approve and deny."""

    async def approve(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        key: str,
        *,
        via: str = "api",
        allow: AllowSpec | None = None,
        tool_input: Any = UNEDITED,
    ) -> Task:
        """Approve a parked call; with `tool_input`, the call as the person edited it; with
        `allow`, also learn a rule allowing calls like it (from the approved input)."""
        return await self._review(
            principal, workspace_id, run_id, key, "approve", "", via, allow, tool_input
        )

    async def deny(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        key: str,
        *,
        reason: str = "",
        via: str = "api",
    ) -> Task:
        return await self._review(principal, workspace_id, run_id, key, "deny", reason, via)

    async def _review(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        key: str,
        verdict: str,
        reason: str,
        via: str,
        allow: AllowSpec | None = None,
        tool_input: Any = UNEDITED,
    ) -> Task:
        access.check_workspace(principal, workspace_id)
        access.require_member(principal)
        reason = (reason or "").strip()[:REASON_LIMIT]
        now = self.clock.now()
        async with self.store.write() as tx:
            run = await self._run(tx, workspace_id, run_id)
            task = await self._task(tx, workspace_id, run_id, key)
            if task.kind != "tool_call":
                raise ApprovalError(
                    errors.CONFLICT, "this is a question: answer it with a resolution", 409
                )
            if not task.parked:
                raise already_decided(task)
            # Both checked before anything is written: a refusal leaves the task parked.
            approved_input = self._approved_input(run, task, tool_input)
            # The call's own input sent back undoes a quorum's edit (bot/lifecycle/quorum.py).
            as_proposed = tool_input is not UNEDITED and approved_input is None
            edit = (
                task.reviewed_input
                if approved_input is None and not as_proposed
                else approved_input
            )
            rules = self._rule_to_learn(run, task, allow, edit)
            # Counted (or refused: 403/409) by bot/lifecycle/quorum.py; under a quorum the
            # input approved is the one the count is for (an edit restarts it).
            counted, approved_input = await self._count_review(
                tx, run, task, principal, verdict, reason, via, now, approved_input, as_proposed
            )
            if counted is not None:  # an approval counted toward a quorum not yet met
                if rules is not None:
                    raise invalid("allow: only the approval that ends the decision learns")
                ended = counted
            elif verdict == "approve":
                ending = Ending("granted", now, principal.name, via, approved_input=approved_input)
                detail = edit_detail(task, approved_input)
                ended = await self._end(tx, run, task, ending, "approved", principal, detail)
                if rules is not None and allow is not None:
                    await self._learn(tx, run, ended, rules, allow.scope, principal, via)
            else:
                error = {
                    "code": errors.APPROVAL_DENIED,
                    "detail": reason or f"denied by {principal.name}",
                }
                ending = Ending("failed", now, principal.name, via, error=error)
                ended = await self._end(
                    tx, run, task, ending, "denied", principal, {"reason": reason}
                )
        self.after_commit(run, outbox=bool(self.channels))
        return ended
