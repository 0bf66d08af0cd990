"""An agent that stopped waiting says so: its parked call or question is withdrawn.

Without it a park handed back to the agent's own prompt (the Claude Code hook's `--wait` ran
out) stays open for up to a day: people keep being nudged for it and may approve a call that
never runs on that approval. A withdrawal ends the task `cancelled` (error `withdrawn`) with the
same compare-and-set as every other ending, so a withdrawal racing a review ends it once: the
loser gets `409 already_decided`."""

from __future__ import annotations

from bot import access, errors
from bot.decisions import already_decided
from bot.domain import Ending, Principal, Task
from bot.lifecycle.runs import stop_detail
from bot.lifecycle.writes import Recording


class Withdrawals(Recording):
    """Withdrawing a parked call or question."""

    async def withdraw(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        key: str,
        *,
        reason: str = "",
        via: str = "api",
    ) -> Task:
        """End a parked call or question `cancelled` with error `withdrawn`; `reason`
        (stripped, at most 500 characters) goes to the error's detail and the log."""
        access.check_workspace(principal, workspace_id)
        reason = stop_detail(None, reason or "").get("reason", "")
        now = self.clock.now()
        async with self.store.write() as tx:
            run = await self._run(tx, workspace_id, run_id)
            access.require_member_or_declarer(principal, run)
            task = await self._task(tx, workspace_id, run_id, key)
            if not task.parked:
                raise already_decided(task)
            detail = f"withdrawn by {principal.name}" + (f": {reason}" if reason else "")
            error = {"code": errors.WITHDRAWN, "detail": detail}
            ending = Ending("cancelled", now, principal.name, via, error=error)
            said = {"reason": reason, "principal_kind": principal.kind}
            ended = await self._end(tx, run, task, ending, "withdrawn", principal, said)
        self.after_commit(run, outbox=bool(self.channels))
        return ended
