"""Answering a question, or declining it, by a person or by the client holding its token."""

from __future__ import annotations

from typing import Any

from bot import access, errors, tokens
from bot.decisions import already_decided, check_answer, invalid
from bot.domain import Ending, Principal, Task
from bot.errors import ApprovalError
from bot.lifecycle.writes import Recording


class Questions(Recording):
    """Resolving questions."""

    async def resolve(
        self,
        principal: Principal | None,
        workspace_id: str,
        run_id: str,
        key: str,
        *,
        content: Any = None,
        outcome: str | None = None,
        resolution_token: str | None = None,
        via: str = "api",
    ) -> Task:
        """Answer a question (or decline it with `outcome="failed"`)."""
        if principal is not None and resolution_token is None:
            access.check_workspace(principal, workspace_id)
            access.require_member(principal)
        if outcome not in (None, "resolved", "failed"):
            raise invalid("outcome: must be failed (to decline) or left out")
        now = self.clock.now()
        async with self.store.write() as tx:
            run = await self._run(tx, workspace_id, run_id)
            task = await self._task(tx, workspace_id, run_id, key)
            if resolution_token is not None:
                stored = task.resolution_token_hash
                if stored is None or not tokens.same(stored, tokens.token_hash(resolution_token)):
                    raise ApprovalError(
                        errors.INVALID_RESOLUTION_TOKEN, "the resolution token does not fit", 403
                    )
            if task.kind != "ask":
                raise ApprovalError(errors.CONFLICT, "this is a tool call: approve or deny it", 409)
            if not task.parked:
                raise already_decided(task)
            who = principal.name if principal is not None and resolution_token is None else None
            actor = principal if resolution_token is None else None
            if resolution_token is not None:
                via = "token"
                who = task.appended_by
            if outcome == "failed":
                error = {"code": errors.DECLINED, "detail": f"declined by {who or 'the client'}"}
                ending = Ending("failed", now, who, via, error=error)
                ended = await self._end(tx, run, task, ending, "declined", actor)
            else:
                answer = check_answer(task, content)
                ending = Ending("resolved", now, who, via, resolution={"content": answer})
                ended = await self._end(
                    tx, run, task, ending, "answered", actor, {"content": answer}
                )
        self.after_commit(run, outbox=bool(self.channels))
        return ended
