"""The decision lifecycle: what happens to a call after the engine has spoken.

Every state change happens in one store transaction together with its events, its decision-log
entries, its outbox notifications and its timers; every ending is a compare-and-set on the task
state, so the first ending wins and every later attempt gets `already_decided`.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot import access, effects, errors, tokens
from bot.clock import Clock
from bot.decisions import (
    FAILURE_POLICIES,
    KEY_PATTERN,
    MODES,
    ORIGINS,
    REASON_LIMIT,
    CallSpec,
    DecisionSettings,
    Profile,
    Receipt,
    RunSpec,
    Writes,
    already_decided,
    attention_event,
    check_answer,
    check_question,
    ending_word,
    invalid,
    log_entry,
    narrow,
    not_found,
    settled_event,
    work_available,
)
from bot.domain import (
    ASK_TOOL,
    PARKED_STATES,
    Ending,
    Event,
    Executor,
    LogEntry,
    NewEvent,
    OutboxItem,
    Principal,
    Run,
    Task,
    Timer,
    new_id,
    ordered_id,
)
from bot.errors import ApprovalError
from bot.events import EventHub
from bot.metrics import DECISION_LATENCY, DECISIONS, count_append
from bot.ports import DuplicateKey, Store, Tx
from bot.rules import Policy, compile_policy, tighten

# Surfaces import these from here too.
__all__ = [
    "ApprovalService",
    "CallSpec",
    "DecisionSettings",
    "Profile",
    "Receipt",
    "RunSpec",
    "already_decided",
    "check_answer",
    "ending_word",
]


KEY_LIMIT = 200  # a task key's length (KEY_PATTERN; the column holds no more on PostgreSQL)


def retry_key(key: str, serial: int, taken: Container[str]) -> str:
    """The key of the call asked anew after `key` expired: `<key>~retry<N>`, N the first free
    serial from `serial`. It always fits KEY_LIMIT (a base too long is cut and tagged with a
    short hash of the whole, so cut keys stay distinct) and never meets a key in `taken`."""
    base = key.split("~retry")[0] or key
    while True:
        suffix = f"~retry{serial}"
        candidate = base + suffix
        if len(candidate) > KEY_LIMIT:
            tag = hashlib.sha256(base.encode()).hexdigest()[:10]
            candidate = f"{base[: KEY_LIMIT - len(suffix) - len(tag) - 1]}-{tag}{suffix}"
        if candidate not in taken:
            return candidate
        serial += 1


class ApprovalService:
    """The core every surface calls: the HTTP API, the chat adapters, the web page, the CLI."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        settings: DecisionSettings | None = None,
        profiles: Mapping[str, Profile] | None = None,
        channels: Sequence[str] = (),
        hub: EventHub | None = None,
        secret: str = "",
    ) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings or DecisionSettings()
        self.profiles = dict(profiles or {})
        self.channels = tuple(channels)
        self.hub = hub or EventHub()
        self.secret = secret
        self._policies: OrderedDict[str, Policy] = OrderedDict()
        self._runs: OrderedDict[str, Run] = OrderedDict()
        # The origins each application may claim, by application id: fixed when the
        # application is registered (a new registration is a new id), so never stale.
        self._claims: OrderedDict[str, frozenset[str]] = OrderedDict()
        # Called after each commit that added timers or outbox items (scheduler, relay wake-ups).
        self.on_timers: Callable[[], None] = lambda: None
        self.on_outbox: Callable[[], None] = lambda: None

    # reading ---------------------------------------------------------------------------------
    def policy(self, run: Run) -> Policy:
        """The run's compiled rules; compiled once per run and kept (bounded)."""
        policy = self._policies.get(run.id)
        if policy is None:
            policy = compile_policy(run.approval_rules, run.aliases)
            self._policies[run.id] = policy
            if len(self._policies) > 10_000:
                self._policies.popitem(last=False)
        else:
            self._policies.move_to_end(run.id)
        return policy

    async def _run(self, tx: Tx, workspace_id: str, run_id: str, *, lock: bool = True) -> Run:
        """The run, its declaration from memory when seen before (it is frozen at creation),
        its state always from the store."""
        frozen = self._runs.get(run_id)
        if frozen is None:
            run = await tx.get_run(run_id, for_update=lock)
            if run is not None:
                self._remember(run)
        else:
            state = await tx.get_run_state(run_id, for_update=lock)
            if state is None:
                run = None
            elif state == (frozen.state, frozen.held_task_key):
                run = frozen  # the common case: still running; no copy to make
            else:
                run = replace(frozen, state=state[0], held_task_key=state[1])
        if run is None or run.workspace_id != workspace_id:
            raise not_found("run")
        return run

    def _remember(self, run: Run) -> None:
        self._runs[run.id] = run
        if len(self._runs) > 10_000:
            self._runs.popitem(last=False)

    async def _task(self, tx: Tx, workspace_id: str, run_id: str, key: str) -> Task:
        task = await tx.get_task(run_id, key)
        if task is None or task.workspace_id != workspace_id:
            raise not_found("task")
        return task

    async def get_run(self, principal: Principal, workspace_id: str, run_id: str) -> Run:
        access.check_workspace(principal, workspace_id)
        async with self.store.read() as tx:
            return await self._run(tx, workspace_id, run_id, lock=False)

    async def get_task(
        self, principal: Principal, workspace_id: str, run_id: str, key: str
    ) -> Task:
        access.check_workspace(principal, workspace_id)
        async with self.store.read() as tx:
            return await self._task(tx, workspace_id, run_id, key)

    async def wait_task(
        self, principal: Principal, workspace_id: str, run_id: str, key: str, timeout: float
    ) -> Task:
        """Return as soon as the task leaves its waiting state, or after `timeout` seconds."""
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            gate = self.hub.gate(f"run:{run_id}")
            task = await self.get_task(principal, workspace_id, run_id, key)
            remaining = deadline - loop.time()
            if not task.parked or remaining <= 0:
                return task
            # The short cap covers writers in other processes that share a SQLite file.
            await self.hub.wait(gate, min(remaining, 1.0))

    async def asks(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        run_id: str | None = None,
        limit: int | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[Task]:
        """Every decision now resting on a person (an author ask with a token rests on its
        client instead), newest first; `limit`/`before` page through them (keyset)."""
        access.check_workspace(principal, workspace_id)
        return await self.store.asks(workspace_id, run_id=run_id, limit=limit, before=before)

    async def ask_counts(
        self, principal: Principal, workspace_id: str
    ) -> list[tuple[str, int, datetime]]:
        """How many decisions wait in each run: (run_id, waiting, newest), newest run first."""
        access.check_workspace(principal, workspace_id)
        return await self.store.ask_counts(workspace_id)

    async def events_after(self, run_id: str, seq: int) -> list[Event]:
        return await self.store.events_after(run_id, seq)

    # runs ------------------------------------------------------------------------------------
    def _base(self, spec: RunSpec, parent: Run | None) -> Profile | None:
        if parent is not None:
            return Profile(
                parent.approval_mode, parent.approval_rules, parent.tool_names, parent.aliases
            )
        if spec.profile is None:
            return None
        profile = self.profiles.get(spec.profile)
        if profile is None:
            raise ApprovalError(errors.UNKNOWN_PROFILE, f"no profile named {spec.profile!r}", 422)
        return profile

    async def declare_run(self, principal: Principal, workspace_id: str, spec: RunSpec) -> Run:
        access.check_workspace(principal, workspace_id)
        if spec.approval_mode is not None and spec.approval_mode not in MODES:
            raise invalid("approval_mode: must be bypass, ask or rules")
        for name in ("title", "approval_rules", "tool_names", "aliases", "profile"):
            problem = effects.storable_problem(getattr(spec, name), name)
            if problem:
                raise invalid(problem)
        async with self.store.write() as tx:
            parent = None
            if spec.parent_run is not None:
                parent = await self._run(tx, workspace_id, spec.parent_run)
            declared = narrow(spec, self._base(spec, parent))
            policy = compile_policy(declared.approval_rules, declared.aliases)
            if spec.executor_id is not None:
                executor = await tx.get_executor(spec.executor_id)
                if (
                    executor is None
                    or executor.workspace_id != workspace_id
                    or executor.revoked
                    # An application names only its own executors (another's is not found,
                    # as on GET /executors/E); a person may name any of the workspace's.
                    or (not principal.is_member and executor.application_id != principal.id)
                ):
                    raise not_found("executor")
            run = Run(
                id=new_id("run"),
                workspace_id=workspace_id,
                application_id=principal.id if not principal.is_member else None,
                state="running",
                approval_mode=declared.approval_mode,
                approval_rules=policy.rules_json,
                tool_names=declared.tool_names,
                aliases=dict(policy.aliases),
                created_at=self.clock.now(),
                title=spec.title,
                profile=spec.profile,
                executor_id=spec.executor_id,
                parent_run=spec.parent_run,
            )
            await tx.insert_run(run)
            await tx.add_log([log_entry(run, None, "run_declared", principal, "api")])
        self._policies[run.id] = policy
        self._remember(replace(run))
        return run

    # appending -------------------------------------------------------------------------------
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
            verdict = self.policy(run).evaluate(
                tool_name=spec.tool_name,
                tool_input=spec.tool_input,
                origin=spec.origin,  # type: ignore[arg-type]
                mode=mode,
                member=principal.is_member,
                tool_names=names,
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
                effect_profile=effects.normalise(
                    spec.effect_profile, verdict.tool, spec.tool_input
                ),
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
            else:
                await tx.add_events([settled_event(task)], now)
                action = {"granted": "granted", "failed": "refused"}[task.state]
                detail = {"why": task.why, "error": task.error, "matched": task.matched}
                await tx.add_log([log_entry(run, task, action, principal, task.via or via, detail)])
        count_append(task.state)
        self.after_commit(run, timers=task.parked, outbox=task.parked and bool(self.channels))
        return Receipt(task, token)

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
                    if len(self._claims) > 10_000:
                        self._claims.popitem(last=False)
            claims = cached or frozenset()
        access.check_origin(principal, origin, claims)

    async def _addressee(self, tx: Tx, run: Run) -> str | None:
        if run.executor_id is None:
            return None
        executor = await tx.get_executor(run.executor_id)
        return None if executor is None or executor.revoked else executor.id

    def _token_for(self, task: Task) -> str | None:
        if task.resolution_token_hash is None:
            return None
        return tokens.resolution_token(self.secret, task.id)

    async def _record_park(
        self, tx: Tx, run: Run, task: Task, principal: Principal | None, via: str
    ) -> None:
        """Everything a park writes besides the row: events, log, timers, notifications."""
        assert task.deadline is not None
        now = task.created_at
        if task.kind == "ask":
            question = task.tool_input
            first = NewEvent(
                run.id,
                "awaiting_human",
                {
                    "key": task.key,
                    "prompt": question.get("prompt"),
                    "options": question.get("options"),
                    "multi": bool(question.get("multi")),
                    "deadline": task.deadline.isoformat(),
                },
            )
        else:
            first = NewEvent(
                run.id,
                "approval_required",
                {
                    "key": task.key,
                    "tool": task.tool,
                    "why": task.why,
                    "deadline": task.deadline.isoformat(),
                },
            )
        events = [first, await self._attention(tx, run.id)]
        if task.addressee:
            events.append(work_available(task))
        await tx.add_events(events, now)
        action = "asked" if task.kind == "ask" else "parked"
        detail = {"why": task.why, "deadline": task.deadline.isoformat(), "matched": task.matched}
        await tx.add_log([log_entry(run, task, action, principal, via, detail)])
        await tx.add_timers(self._timers(task))
        if task.resolution_token_hash is None:
            await tx.add_outbox(self.outbox_items(task, "posted", now))

    async def _attention(self, tx: Tx, run_id: str) -> NewEvent:
        """`attention_required` naming every task of the run now resting on a person."""
        return attention_event(run_id, await tx.parked_keys(run_id))

    def _timers(self, task: Task) -> list[Timer]:
        assert task.deadline is not None
        timers = [Timer(f"{task.id}:deadline", task.id, task.run_id, "deadline", task.deadline)]
        for seq, before in enumerate(sorted(self.settings.nudge_before, reverse=True)):
            due = task.deadline - before
            if due > task.created_at:
                timers.append(
                    Timer(f"{task.id}:nudge:{seq}", task.id, task.run_id, "nudge", due, seq)
                )
        return timers

    def outbox_items(
        self, task: Task, kind: str, at: datetime, suffix: str = "", payload: Any = None
    ) -> list[OutboxItem]:
        return [
            OutboxItem(
                id=ordered_id("out"),
                channel=channel,
                kind=kind,  # type: ignore[arg-type]
                task_id=task.id,
                run_id=task.run_id,
                workspace_id=task.workspace_id,
                idempotency_key=f"{channel}:{task.id}:{kind}{suffix}",
                created_at=at,
                payload=payload or {},
            )
            for channel in self.channels
        ]

    def after_commit(self, run: Run, *, timers: bool = False, outbox: bool = False) -> None:
        self.hub.notify_run(run.workspace_id, run.id)
        if timers:
            self.on_timers()
        if outbox:
            self.on_outbox()

    # endings ---------------------------------------------------------------------------------
    async def _end(
        self,
        tx: Tx,
        run: Run,
        task: Task,
        ending: Ending,
        action: str,
        principal: Principal | None,
        detail: dict[str, Any] | None = None,
        batch: Writes | None = None,
    ) -> Task:
        """Compare-and-set the ending and write what goes with it; the loser gets
        `already_decided` naming the winner. With `batch`, the writes are collected for the
        caller to flush once (the clock ends many tasks per transaction)."""
        ended = await tx.end_task(task.id, PARKED_STATES, ending)
        if ended is None:
            current = await tx.get_task_by_id(task.id)
            raise already_decided(current or task)
        # Its timers are left to fire into nothing: touching timer rows here would lock them
        # in the opposite order to the clock loop (timer, then run).
        writes = batch or Writes()
        self.record_ending(run, ended, ending, action, principal, detail, writes)
        if batch is None:
            writes.events.append(await self._attention(tx, run.id))
            await writes.flush(tx, ending.at)
        return ended

    def record_ending(
        self,
        run: Run,
        ended: Task,
        ending: Ending,
        action: str,
        principal: Principal | None,
        detail: dict[str, Any] | None,
        writes: Writes,
    ) -> None:
        writes.events.append(settled_event(ended))
        writes.log.append(log_entry(run, ended, action, principal, ending.via, detail, ending.at))
        if ended.resolution_token_hash is None:
            writes.outbox.extend(self.outbox_items(ended, "ended", ending.at))
        DECISIONS.labels(outcome=ended.state, via=ending.via).inc()
        DECISION_LATENCY.observe((ending.at - ended.created_at).total_seconds())

    async def approve(
        self, principal: Principal, workspace_id: str, run_id: str, key: str, *, via: str = "api"
    ) -> Task:
        return await self._review(principal, workspace_id, run_id, key, "approve", "", via)

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
            try:
                count = await tx.add_review(
                    task_id=task.id,
                    member=principal,
                    verdict=verdict,
                    reason=reason,
                    via=via,
                    at=now,
                )
            except DuplicateKey:
                raise already_decided(await tx.get_task_by_id(task.id) or task) from None
            if verdict == "approve":
                if count < task.required_approvals:
                    await tx.add_log([log_entry(run, task, "reviewed", principal, via, at=now)])
                    return task
                ending = Ending("granted", now, principal.name, via)
                ended = await self._end(tx, run, task, ending, "approved", principal)
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

    async def stop(
        self, principal: Principal, workspace_id: str, run_id: str, *, via: str = "api"
    ) -> Run:
        """Stop the run: every parked call and question is cancelled. Stopping twice is a no-op."""
        access.check_workspace(principal, workspace_id)
        return await self._halt(
            principal, workspace_id, run_id, ("running", "held"), "stopped", via
        )

    async def abandon(
        self, principal: Principal, workspace_id: str, run_id: str, *, via: str = "api"
    ) -> Run:
        access.check_workspace(principal, workspace_id)
        access.require_member(principal)
        return await self._halt(principal, workspace_id, run_id, ("held",), "abandoned", via)

    async def _halt(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        from_states: tuple[str, ...],
        action: str,
        via: str,
    ) -> Run:
        now = self.clock.now()
        async with self.store.write() as tx:
            run = await self._run(tx, workspace_id, run_id)
            if run.state == "stopped" and action == "stopped":
                return run
            if not await tx.set_run_state(run_id, from_states, "stopped"):
                raise ApprovalError(errors.RUN_NOT_HELD, f"run is {run.state}, not held", 409)
            for task in await tx.parked_tasks(run_id):
                error = {"code": errors.RUN_STOPPED, "detail": f"run {action} by {principal.name}"}
                ending = Ending("cancelled", now, principal.name, via, error=error)
                await self._end(tx, run, task, ending, "cancelled", principal)
            data = {"by": principal.name, "via": via, "action": action}
            await tx.add_events([NewEvent(run.id, "run_stopped", data)], now)
            await tx.add_log([log_entry(run, None, f"run_{action}", principal, via, at=now)])
            run = replace(run, state="stopped")  # never change the remembered declaration
        self.after_commit(run, outbox=bool(self.channels))
        return run

    async def retry(
        self, principal: Principal, workspace_id: str, run_id: str, *, via: str = "api"
    ) -> Run:
        """A person takes a held run up again: each expired decision that held it is asked anew."""
        access.check_workspace(principal, workspace_id)
        access.require_member(principal)
        now = self.clock.now()
        async with self.store.write() as tx:
            run = await self._run(tx, workspace_id, run_id)
            if not await tx.set_run_state(run_id, ("held",), "running"):
                raise ApprovalError(errors.RUN_NOT_HELD, f"run is {run.state}, not held", 409)
            run = replace(run, state="running", held_task_key=None)
            tasks = await tx.tasks_of_run(run_id)
            retried = {t.retry_of for t in tasks if t.retry_of}
            # Every key of the run, the new ones too: under the run's lock nothing else adds
            # one, so a key picked here is free when it is inserted.
            taken = {t.key for t in tasks}
            for old in tasks:
                holds = old.kind == "ask" or old.failure_policy == "hold"
                if old.state != "timed_out" or not holds or old.id in retried:
                    continue
                task = self._again(old, now, retry_key(old.key, len(taken), taken))
                taken.add(task.key)
                task.addressee = await self._addressee(tx, run)
                await tx.insert_task(task)
                await self._record_park(tx, run, task, principal, via)
            await tx.add_events([NewEvent(run.id, "run_resumed", {"by": principal.name})], now)
            await tx.add_log([log_entry(run, None, "run_retried", principal, via, at=now)])
        self.after_commit(run, timers=True, outbox=bool(self.channels))
        return run

    def _again(self, old: Task, now: datetime, key: str) -> Task:
        ttl = self.settings.question_ttl if old.kind == "ask" else self.settings.park_ttl
        return Task(
            id=ordered_id("task"),
            run_id=old.run_id,
            workspace_id=old.workspace_id,
            key=key,
            kind=old.kind,
            origin=old.origin,
            tool_name=old.tool_name,
            tool=old.tool,
            tool_input=old.tool_input,
            state=(old.kind == "ask" and "awaiting_input") or "needs_approval",
            created_at=now,
            effect_profile=old.effect_profile,
            deadline=now + ttl,
            failure_policy=old.failure_policy,
            why=f"asked again after {old.key} expired",
            rule_index=old.rule_index,
            matched=old.matched,
            request_hash=old.request_hash,
            appended_by=old.appended_by,
            retry_of=old.id,
        )

    # executors -------------------------------------------------------------------------------
    async def register_executor(
        self, principal: Principal, workspace_id: str, name: str
    ) -> Executor:
        access.check_workspace(principal, workspace_id)
        access.require_application(principal, "executors belong to an application credential")
        if not name or len(name) > 200:
            raise invalid("name: 1-200 characters")
        executor = Executor(new_id("exe"), workspace_id, principal.id, name)
        async with self.store.write() as tx:
            await tx.insert_executor(executor)
        return executor

    async def executor(self, principal: Principal, workspace_id: str, executor_id: str) -> Executor:
        access.check_workspace(principal, workspace_id)
        async with self.store.read() as tx:
            executor = await tx.get_executor(executor_id)
        if executor is None or executor.workspace_id != workspace_id:
            raise not_found("executor")
        if principal.is_member or executor.application_id != principal.id:
            raise not_found("executor")
        return executor

    async def revoke_executor(
        self, principal: Principal, workspace_id: str, executor_id: str
    ) -> int:
        """Revoke: its parked rows lose their addressee but stay decidable by people."""
        executor = await self.executor(principal, workspace_id, executor_id)
        now = self.clock.now()
        async with self.store.write() as tx:
            await tx.revoke_executor(executor.id)
            cleared = await tx.clear_addressee(executor.id)
            entry = LogEntry(
                workspace_id, "executor_revoked", principal.name, "api", now,
                detail={"executor_id": executor.id, "cleared": [t.key for t in cleared]},
            )  # fmt: skip
            await tx.add_log([entry])
        return len(cleared)
