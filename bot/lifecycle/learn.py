"""Approve always and edit before approve: the parts of an approval beyond the ending itself, and
the workspace's learned rules (proposal, list, removal) and decision log.

The pure rules of learning are bot/learning.py's; this is where they meet the store. An edited
input is evaluated again by the run's rules before anything is written: a deny still binds (the
approve is `422 approval_denied` and the task stays parked); an edit a rule would park is
approved by the person's own decision.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot import access, effects, errors, learning
from bot.decisions import already_decided, invalid, log_entry, not_found
from bot.domain import LogEntry, LogRecord, Principal, Run, Task, ordered_id
from bot.errors import ApprovalError
from bot.learning import AllowSpec, LearnedRule, Proposal
from bot.lifecycle.writes import Recording
from bot.ports import Tx


class _Unedited:
    """The `tool_input` of an approve that does not edit the call (None is a JSON value)."""

    def __repr__(self) -> str:
        return "UNEDITED"


UNEDITED: Any = _Unedited()
LOG_PAGE = 1000  # entries per page of the decision log over the API


def edit_detail(task: Task, approved_input: Any) -> dict[str, Any] | None:
    """What the ending's log entry adds when the person approved another input than proposed."""
    if approved_input is None:
        return None
    return {"tool_input": task.tool_input, "approved_input": approved_input}


class Learning(Recording):
    """Edits, learned rules, the proposal and the decision log."""

    def _approved_input(self, run: Run, task: Task, tool_input: Any) -> Any:
        """The input the person approves when it differs from the proposed one (else None),
        after the run's rules have looked at it again."""
        if tool_input is UNEDITED or tool_input == task.tool_input:
            return None
        if tool_input is None:  # `approved_input: null` reads "not edited": never run null
            raise invalid("tool_input: an edited input must not be null")
        problem = effects.storable_problem(tool_input, "tool_input")
        if problem:
            raise invalid(problem)
        verdict = self.evaluate(
            run, tool_name=task.tool_name, tool_input=tool_input, origin=task.origin
        )
        if verdict.outcome == "failed":
            detail = verdict.error.detail if verdict.error else verdict.why
            raise ApprovalError(
                errors.APPROVAL_DENIED, f"the edited input is refused: {detail}", 422
            )
        return tool_input

    def proposed_rules(self, run: Run, task: Task, tool_input: Any) -> list[dict[str, Any]]:
        """The rules "Approve & allow like this" proposes: on a shell path one per command the
        run does not already grant."""

        def granted(call_input: Any) -> bool:
            verdict = self.evaluate(
                run, tool_name=task.tool_name, tool_input=call_input, origin=task.origin
            )
            return verdict.outcome == "granted"

        return learning.propose_all(task.tool, tool_input, task.origin, run.shell_commands, granted)

    def _rule_to_learn(
        self, run: Run, task: Task, allow: AllowSpec | None, approved_input: Any
    ) -> list[dict[str, Any]] | None:
        """The checked rules an approve asks to learn (the person's one, or every proposed
        one), from the approved input (the edited one when there is one); None without
        `allow`."""
        if allow is None:
            return None
        learning.check_scope(allow, run.profile)
        tool_input = task.tool_input if approved_input is None else approved_input
        rules = (
            [allow.rule] if allow.rule is not None else self.proposed_rules(run, task, tool_input)
        )
        if allow.scope == "profile" and run.profile in self.profiles:
            learning.check_profile_shell(
                rules, task.tool, run.shell_commands, self.profiles[run.profile].shell_commands
            )
        return [
            learning.check_rule(
                rule,
                tool_name=task.tool_name,
                tool_input=tool_input,
                origin=task.origin,
                aliases=dict(run.aliases),
                shell_commands=run.shell_commands,
            )
            for rule in rules
        ]

    async def _learn(
        self,
        tx: Tx,
        run: Run,
        task: Task,
        rules: list[dict[str, Any]],
        scope: str,
        principal: Principal,
        via: str,
    ) -> list[LearnedRule]:
        """Keep the rules: in the workspace's list, on this run (they apply here from the next
        call, whatever the scope), and in the log naming the decision they came from."""
        at = self.clock.now()
        kept: list[dict[str, Any]] = []
        if scope == "profile":
            found = await tx.learned_rules(run.workspace_id, profile=run.profile)
            kept = [{"id": r.id, "rule": r.rule} for r in found]
        grown = list(run.learned_rules)
        added: list[LearnedRule] = []
        for rule in rules:
            learned = LearnedRule(
                id=ordered_id("lrn"),  # sorts by time: the list is oldest first
                workspace_id=run.workspace_id,
                rule=rule,
                scope=scope,
                profile=run.profile if scope == "profile" else None,
                run_id=run.id if scope == "run" else None,
                added_by=principal.name,
                from_run_id=run.id,
                from_key=task.key,
                at=at,
            )
            if scope == "profile":
                # The runs declared from the profile get all of its rules: keep them declarable.
                kept = learning.with_rule(kept, learned.id, rule)
            grown = learning.with_rule(grown, learned.id, rule)
            await tx.insert_learned_rule(learned)
            detail = {
                "rule_id": learned.id,
                "rule": rule,
                "scope": scope,
                "profile": learned.profile,
                "from": {"run_id": run.id, "key": task.key},
            }
            await tx.add_log([log_entry(run, task, "learned_rule", principal, via, detail, at)])
            added.append(learned)
        await tx.set_learned_rules(run.id, grown)
        self._runs.pop(run.id, None)  # its frozen copy is stale now
        return added

    async def proposal(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        key: str,
        *,
        tool_input: Any = UNEDITED,
        rule: Any = None,
    ) -> Proposal:
        """The rule "Approve & allow like this" would learn for a parked call (or `rule`, the
        person's edit of it, checked), and the workspace's past calls of the last 30 days it
        would have allowed. With `tool_input`, for the call as the person would edit it."""
        access.check_workspace(principal, workspace_id)
        access.require_member(principal)
        now = self.clock.now()
        async with self.store.read() as tx:
            run = await self._run(tx, workspace_id, run_id, lock=False)
            task = await self._task(tx, workspace_id, run_id, key)
            if task.kind != "tool_call":
                raise ApprovalError(errors.CONFLICT, "a question has no rule to learn", 409)
            if not task.parked:
                raise already_decided(task)
            since = now - timedelta(days=learning.REPLAY_DAYS)
            calls = await tx.recent_calls(workspace_id, since, learning.REPLAY_SCAN)
        approved = self._approved_input(run, task, tool_input)
        if approved is None and tool_input is UNEDITED:
            # Under a quorum a plain Approve approves the edit being counted: propose from it,
            # so the rule shown is the rule that would be learned.
            approved = task.reviewed_input
        call_input = task.tool_input if approved is None else approved
        if rule is None:
            rules = self.proposed_rules(run, task, call_input)
        else:
            rules = [
                learning.check_rule(
                    rule,
                    tool_name=task.tool_name,
                    tool_input=call_input,
                    origin=task.origin,
                    aliases=dict(run.aliases),
                    at="rule",
                    shell_commands=run.shell_commands,
                )
            ]
        past = [call for call in calls if call.id != task.id]
        would_allow = learning.replayed(rules, past, shell_commands=run.shell_commands)
        return Proposal(rules[0], would_allow, tuple(rules))

    async def learned_rules(self, principal: Principal, workspace_id: str) -> list[LearnedRule]:
        """Every rule learned in the workspace (both scopes), oldest first."""
        access.check_workspace(principal, workspace_id)
        access.require_member(principal)
        async with self.store.read() as tx:
            return await tx.learned_rules(workspace_id)

    async def remove_learned_rule(
        self, principal: Principal, workspace_id: str, rule_id: str, *, via: str = "api"
    ) -> LearnedRule:
        """Remove a learned rule: runs declared afterwards go without it, and so does the run
        of a run-scoped one from its next call. Other runs keep theirs (frozen)."""
        access.check_workspace(principal, workspace_id)
        access.require_member(principal)
        async with self.store.write() as tx:
            found = await tx.get_learned_rule(rule_id)
            if found is None or found.workspace_id != workspace_id:
                raise not_found("learned rule")
            run: Run | None = None
            if found.run_id is not None:
                run = await self._run(tx, workspace_id, found.run_id)  # its lock first
                kept = [e for e in run.learned_rules if e.get("id") != rule_id]
                await tx.set_learned_rules(run.id, kept)
            if not await tx.delete_learned_rule(rule_id):
                raise not_found("learned rule")
            detail = {"rule_id": found.id, "rule": found.rule, "scope": found.scope}
            entry = LogEntry(
                workspace_id, "learned_rule_removed", principal.name, via, self.clock.now(),
                run_id=found.run_id, detail=detail | {"profile": found.profile},
            )  # fmt: skip
            await tx.add_log([entry])
        if run is not None:
            self._runs.pop(run.id, None)
        return found

    async def decision_log(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        run_id: str | None = None,
        after: int = 0,
        limit: int = LOG_PAGE,
    ) -> list[LogRecord]:
        """The decision log (the audit trail, as the page exports it), oldest first, after the
        entry numbered `after`."""
        access.check_workspace(principal, workspace_id)
        access.require_member(principal)
        if after < 0 or not 1 <= limit <= LOG_PAGE:
            raise invalid(f"after: an entry id >= 0; limit: 1-{LOG_PAGE}")
        return await self.store.log_entries(
            workspace_id, after_id=after, limit=limit, run_id=run_id
        )
