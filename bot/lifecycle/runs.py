"""Runs: declaring one (its rules frozen from then on), stopping, abandoning and retrying it."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Container
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot import access, effects, errors, quorum
from bot.decisions import MODES, Profile, RunSpec, invalid, log_entry, narrow, not_found
from bot.domain import Ending, NewEvent, Principal, Run, Task, new_id, ordered_id
from bot.errors import ApprovalError
from bot.lifecycle.quorum import Quorum
from bot.rules import Policy, compile_policy, compound
from bot.rules.validate import compact_json

KEY_LIMIT = 200  # a task key's length (KEY_PATTERN; the column holds no more on PostgreSQL)
OUTCOMES = ("succeeded", "failed")  # what the one who stops a run may say of its work
REASON_LIMIT = 500  # characters of a stop's reason


# Declarations compile on one thread of their own, one at a time: the event loop never waits
# for a compile, and however many arrive at once, one thread at most competes with it for the
# interpreter (a compile is tens of milliseconds of Python at worst: docs/performance.md).
_COMPILER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="approvalbot-compile")


def _compile_declaration(
    rules: list[Any], aliases: dict[str, str], shell_commands: list[dict[str, str]]
) -> Policy:
    policy = compile_policy(rules, aliases)
    compound.compile_shell(shell_commands)  # the shared memo's, for the run's first call
    return policy


def _declared_key(declared: Profile) -> str:
    return compact_json([declared.approval_rules, sorted(declared.aliases.items())])


def stop_detail(outcome: str | None, reason: str | None) -> dict[str, str]:
    """What a stop says of the run's work, checked: `{}`, or its outcome and (stripped) reason.
    A blank reason is no reason."""
    detail: dict[str, str] = {}
    if outcome is not None:
        if outcome not in OUTCOMES:
            raise invalid("outcome: must be succeeded or failed")
        detail["outcome"] = outcome
    if reason is not None:
        reason = reason.strip()
        if len(reason) > REASON_LIMIT:
            raise invalid(f"reason: at most {REASON_LIMIT} characters")
        problem = effects.storable_problem(reason, "reason")
        if problem:
            raise invalid(problem)
        if reason:
            detail["reason"] = reason
    return detail


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


class Runs(Quorum):
    """Declaring runs and ending them."""

    def _base(self, spec: RunSpec, parent: Run | None) -> Profile | None:
        if parent is not None:
            return Profile(
                parent.approval_mode,
                parent.approval_rules,
                parent.tool_names,
                parent.aliases,
                shell_commands=parent.shell_commands,
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
        for name in (
            "title",
            "approval_rules",
            "tool_names",
            "aliases",
            "profile",
            "shell_commands",
        ):
            problem = effects.storable_problem(getattr(spec, name), name)
            if problem:
                raise invalid(problem)
        extra, prepared = await self._prepare(workspace_id, spec)
        async with self.store.write() as tx:
            parent = None
            if spec.parent_run is not None:
                parent = await self._run(tx, workspace_id, spec.parent_run)
            declared = narrow(spec, self._base(spec, parent))
            policy = prepared.get(_declared_key(declared))
            if policy is None:  # never expected: a parent's declaration is frozen
                policy = compile_policy(declared.approval_rules, declared.aliases)
            requirements, forbid_self, on_behalf_of = await self._declared_quorum(
                tx, workspace_id, spec, parent, extra
            )
            # Learned rules are frozen with the rest: a continuation keeps its parent's, a run
            # from a profile gets the profile's as they are now.
            learned: list[dict[str, Any]] = []
            if parent is not None:
                learned = list(parent.learned_rules)
                same_agent = not principal.is_member and principal.id == parent.application_id
                if learned and not same_agent:
                    # A rule a person learned for "this run" was given to that agent's run: a
                    # continuation by anyone else keeps only the profile's (issue 21, 12).
                    kept = await tx.learned_rules(workspace_id)
                    scoped = {r.id for r in kept if r.scope == "run"}
                    learned = [e for e in learned if e.get("id") not in scoped]
            elif spec.profile is not None:
                found = await tx.learned_rules(workspace_id, profile=spec.profile)
                learned = [{"id": rule.id, "rule": rule.rule} for rule in found]
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
                learned_rules=learned,
                approval_requirements=requirements,
                forbid_self_approval=forbid_self,
                on_behalf_of=on_behalf_of,
                shell_commands=declared.shell_commands,
                declared_by=principal.name if principal.is_member else None,
            )
            await tx.insert_run(run)
            await tx.add_log([log_entry(run, None, "run_declared", principal, "api")])
        self._policies[run.id] = policy
        self._remember(replace(run))
        return run

    async def _prepare(
        self, workspace_id: str, spec: RunSpec
    ) -> tuple[list[dict[str, Any]] | None, dict[str, Policy]]:
        """Whatever the declaration compiles, compiled before the store's write lock is taken
        and off the event loop (issue 21): a large rule list costs tens of milliseconds to
        compile, and nothing else, not even `/healthz`, should wait for it. Returns the run's
        own requirements, checked, and its policy keyed by what it was compiled from. Refusals
        are the ones the declaration makes under the lock, in the same order."""
        parent = None
        if spec.parent_run is not None:  # frozen: what is read here is what the lock reads
            async with self.store.read() as tx:
                parent = await self._run(tx, workspace_id, spec.parent_run, lock=False)
        declared = narrow(spec, self._base(spec, parent))
        loop = asyncio.get_running_loop()
        policy = await loop.run_in_executor(
            _COMPILER,
            _compile_declaration,
            declared.approval_rules,
            declared.aliases,
            declared.shell_commands,
        )
        extra = None
        if spec.approval_requirements is not None:
            extra = quorum.check_requirements(spec.approval_requirements)
        requirements = self._requirements(spec, parent, extra)[0]
        if requirements:  # compiled when a call parks; warmed here, off the loop
            await loop.run_in_executor(
                _COMPILER, quorum.compiled, requirements, dict(policy.aliases)
            )
        return extra, {_declared_key(declared): policy}

    async def stop(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        *,
        via: str = "api",
        outcome: str | None = None,
        reason: str | None = None,
    ) -> Run:
        """Stop the run: every parked call and question is cancelled. `outcome` (succeeded or
        failed) and `reason` say how its work went; they go to the log entry. Stopping twice is
        a no-op: the first stop's outcome stays."""
        access.check_workspace(principal, workspace_id)
        said = stop_detail(outcome, reason)
        return await self._halt(
            principal, workspace_id, run_id, ("running", "held"), "stopped", via, said
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
        said: dict[str, str] | None = None,
    ) -> Run:
        now = self.clock.now()
        async with self.store.write() as tx:
            run = await self._run(tx, workspace_id, run_id)
            # Another agent's run is not an application's to stop (as its calls are not to
            # withdraw); people may stop any run of their workspace.
            access.require_member_or_declarer(principal, run, "stopping")
            if run.state == "stopped" and action == "stopped":
                return run
            if not await tx.set_run_state(run_id, from_states, "stopped"):
                raise ApprovalError(errors.RUN_NOT_HELD, f"run is {run.state}, not held", 409)
            for task in await tx.parked_tasks(run_id):
                error = {"code": errors.RUN_STOPPED, "detail": f"run {action} by {principal.name}"}
                ending = Ending("cancelled", now, principal.name, via, error=error)
                await self._end(tx, run, task, ending, "cancelled", principal)
            # The kind tells a member from an application that shares its name.
            detail = {"principal_kind": principal.kind} | (said or {})
            data = {"by": principal.name, "via": via, "action": action} | detail
            await tx.add_events([NewEvent(run.id, "run_stopped", data)], now)
            entry = log_entry(run, None, f"run_{action}", principal, via, detail, at=now)
            await tx.add_log([entry])
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
                task = self._again(old, now, retry_key(old.key, len(taken), taken), run)
                taken.add(task.key)
                task.addressee = await self._addressee(tx, run)
                await tx.insert_task(task)
                await self._record_park(tx, run, task, principal, via)
            await tx.add_events([NewEvent(run.id, "run_resumed", {"by": principal.name})], now)
            await tx.add_log([log_entry(run, None, "run_retried", principal, via, at=now)])
        self.after_commit(run, timers=True, outbox=bool(self.channels))
        return run

    def _again(self, old: Task, now: datetime, key: str, run: Run | None = None) -> Task:
        ttl = self.settings.question_ttl if old.kind == "ask" else self.settings.park_ttl
        task = Task(
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
        if run is not None:
            quorum.at_park(run, task)  # asked anew: the count starts again
        return task
