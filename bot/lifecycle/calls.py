"""Appending a call: the checks, the engine's verdict, and the row it parks or settles as."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from bot import access, effects, errors, quorum, tokens
from bot.decisions import (
    FAILURE_POLICIES,
    KEY_PATTERN,
    MODES,
    ORIGINS,
    CallSpec,
    Receipt,
    check_question,
    invalid,
    log_entry,
    settled_event,
)
from bot.domain import ASK_TOOL, Ending, Principal, Run, Task, ordered_id
from bot.errors import ApprovalError
from bot.lifecycle.base import CACHE_LIMIT
from bot.lifecycle.writes import Recording
from bot.metrics import count_append
from bot.ports import DuplicateKey, Tx
from bot.rules import tighten


class Calls(Recording):
    """Appending calls and questions to a run."""

    async def append(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        spec: CallSpec,
        *,
        via: str = "api",
    ) -> Receipt:
        access.check_workspace(principal, workspace_id)
        self._check_call(spec)
        # Only a keyed call can be appended again, so only its body is fingerprinted.
        fingerprint = "" if spec.key is None else spec.fingerprint()
        now = self.clock.now()
        async with self.store.write() as tx:
            await self._check_origin(tx, principal, spec.origin)  # before anything is written
            run = await self._run(tx, workspace_id, run_id)
            if spec.key is not None:
                existing = await tx.get_task(run_id, spec.key)
                if existing is not None:
                    if existing.request_hash != fingerprint:
                        raise ApprovalError(
                            errors.CONFLICT, f"key {spec.key!r} was used with another body", 409
                        )
                    return Receipt(existing, self._token_for(existing), replayed=True)
            if run.state != "running":
                raise ApprovalError(errors.RUN_NOT_RUNNING, f"run is {run.state}", 409)
            mode, names = tighten(
                run.approval_mode,  # type: ignore[arg-type]
                frozenset(run.tool_names) if run.tool_names is not None else None,
                spec.approval_mode,  # type: ignore[arg-type]
                spec.tool_names,
            )
            judged = self.evaluate_line(
                run,
                tool_name=spec.tool_name,
                tool_input=spec.tool_input,
                origin=spec.origin,
                mode=mode,
                member=principal.is_member,
                tool_names=names,
            )
            verdict = judged.verdict
            first_approval = False
            if (
                verdict.outcome == "granted"
                and spec.origin != "model"
                and run.approval_requirements
                and quorum.matching(
                    run.approval_requirements, run.aliases, spec.tool_name, spec.tool_input
                )
            ):
                # An author or kernel row is pre-approved, but never past several approvers:
                # under a requirement it parks for its count (issue 21, 5).
                why = f"{verdict.why}; an approval requirement needs several approvers"
                verdict = replace(verdict, outcome="parked", why=why, by_member=False)
                # The member appending it is its first approval (not one the run forbids).
                first_approval = principal.is_member and principal.name not in (
                    quorum.self_excluded(run)
                )
            is_question = verdict.tool == ASK_TOOL
            if is_question and verdict.outcome != "failed":
                check_question(spec.tool_input)
            task_id = ordered_id("task")  # in time order: each insert lands at the index's end
            task = Task(
                id=task_id,
                run_id=run.id,
                workspace_id=workspace_id,
                key=spec.key or task_id.removeprefix("task_"),  # unique, and in time order
                kind="ask" if is_question else "tool_call",
                origin=spec.origin,
                tool_name=spec.tool_name,
                tool=verdict.tool,
                tool_input=spec.tool_input,
                state="granted",
                created_at=now,
                # How each command of a shell line was judged is the service's to say, never
                # the agent's: its own `commands`/`unseen` are dropped.
                effect_profile=effects.normalise(
                    effects.without_judgement(spec.effect_profile), verdict.tool, spec.tool_input
                )
                | judged.profile_part(),
                failure_policy=spec.failure_policy,  # type: ignore[arg-type]
                why=verdict.why,
                rule_index=verdict.rule_index,
                matched=list(verdict.matched),
                request_hash=fingerprint,
                appended_by=principal.name,
            )
            token: str | None = None
            if verdict.outcome == "failed":
                task.state = "failed"
                task.error = verdict.error.to_json() if verdict.error else None
                task.decided_at, task.via = now, "engine"
            elif is_question or verdict.outcome == "parked":
                # A question parks for a person whatever the verdict that let it through.
                task.state = "awaiting_input" if is_question else "needs_approval"
                ttl = self.settings.question_ttl if is_question else self.settings.park_ttl
                task.deadline = now + ttl
                task.addressee = await self._addressee(tx, run)
                quorum.at_park(run, task)  # how many approvals it needs, under a requirement
                if is_question and spec.origin == "author":
                    token = tokens.resolution_token(self.secret, task.id)
                    task.resolution_token_hash = tokens.token_hash(token)
            else:
                task.decided_at = now
                if verdict.by_member:
                    task.resolved_by, task.via = principal.name, via
                else:
                    task.via = "engine"
            try:
                await tx.insert_task(task)
            except DuplicateKey:
                raise ApprovalError(errors.CONFLICT, f"key {task.key!r} is taken", 409) from None
            if task.parked:
                await self._record_park(tx, run, task, principal, via)
                if first_approval:
                    task = await self._first_approval(tx, run, task, principal, via, now)
            else:
                await tx.add_events([settled_event(task)], now)
                action = {"granted": "granted", "failed": "refused"}[task.state]
                detail = {"why": task.why, "error": task.error, "matched": task.matched}
                await tx.add_log([log_entry(run, task, action, principal, task.via or via, detail)])
        count_append(task.state)
        self.after_commit(run, timers=task.parked, outbox=task.parked and bool(self.channels))
        return Receipt(task, token)

    async def _first_approval(
        self, tx: Tx, run: Run, task: Task, principal: Principal, via: str, now: datetime
    ) -> Task:
        """Count the appending member's approval of their own author row under a requirement
        (issue 21, 5): the task waits for the others, or ends granted if theirs completes it.
        A member no requirement counts (outside its groups) is simply not counted."""
        count_review = self._count_review  # type: ignore[attr-defined]  # bot/lifecycle/quorum.py
        try:
            counted, _ = await count_review(tx, run, task, principal, "approve", "", via, now, None)
        except ApprovalError as refused:
            if refused.code != quorum.NOT_AN_ELIGIBLE_APPROVER:
                raise
            return task
        if counted is not None:
            return counted  # type: ignore[no-any-return]
        ending = Ending("granted", now, principal.name, via)
        return await self._end(tx, run, task, ending, "approved", principal, None)

    def _check_call(self, spec: CallSpec) -> None:
        if spec.key is not None and not KEY_PATTERN.fullmatch(spec.key):
            raise invalid("key: 1-200 characters of letters, digits and . _ : ~ -")
        if not isinstance(spec.tool_name, str) or not spec.tool_name:
            raise invalid("tool_name: a non-empty string")
        if spec.origin not in ORIGINS:
            raise invalid("origin: must be model, author or kernel")
        if spec.failure_policy not in FAILURE_POLICIES:
            raise invalid("failure_policy: must be continue or hold")
        if spec.approval_mode is not None and spec.approval_mode not in MODES:
            raise invalid("approval_mode: must be bypass, ask or rules")
        # What the store cannot hold is the caller's 422, never the database's 500.
        problem = (
            effects.storable_problem(spec.tool_input, "tool_input")
            or effects.storable_problem(spec.tool_name, "tool_name")
            or effects.storable_problem(spec.tool_names, "tool_names")
        )
        if problem:
            raise invalid(problem)
        effects.check(spec.effect_profile)

    async def _check_origin(self, tx: Tx, principal: Principal, origin: str) -> None:
        """The right to claim an origin is the credential's (SPEC 2.7): people append author
        rows; an application claims author or kernel only if its registration says so."""
        if origin == "model":
            return
        claims: frozenset[str] = frozenset()
        if not principal.is_member:
            cached = self._claims.get(principal.id)
            if cached is None:
                app = await tx.get_application(principal.id)
                if app is not None and app.workspace_id == principal.workspace_id:
                    cached = self._claims[principal.id] = app.may_claim
                    if len(self._claims) > CACHE_LIMIT:
                        self._claims.popitem(last=False)
            claims = cached or frozenset()
        access.check_origin(principal, origin, claims)
