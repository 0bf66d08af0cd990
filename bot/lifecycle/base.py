"""The service's state and the caches every part of the lifecycle reads through."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from bot import learning, quorum, tokens
from bot.clock import Clock
from bot.decisions import DecisionSettings, Profile, not_found
from bot.domain import Run, Task
from bot.events import EventHub
from bot.ports import Store, Tx
from bot.rules import Policy, Verdict, compile_policy, compound

CACHE_LIMIT = 10_000  # entries per cache: compiled policies, frozen runs, origin claims


class ServiceBase:
    """What the lifecycle's parts share: the store, the clock, the settings and the caches."""

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
        # Each run's learned rules, compiled, with the run's `rules_version` they were read at.
        self._learned: OrderedDict[str, tuple[int, Policy | None]] = OrderedDict()
        self._runs: OrderedDict[str, Run] = OrderedDict()
        # The origins each application may claim, by application id: fixed when the
        # application is registered (a new registration is a new id), so never stale.
        self._claims: OrderedDict[str, frozenset[str]] = OrderedDict()
        # Called after each commit that added timers or outbox items (scheduler, relay wake-ups).
        self.on_timers: Callable[[], None] = lambda: None
        self.on_outbox: Callable[[], None] = lambda: None

    def policy(self, run: Run) -> Policy:
        """The run's compiled rules; compiled once per run and kept (bounded). A run's rules
        were checked when it was declared (bounds added since never refuse it now)."""
        policy = self._policies.get(run.id)
        if policy is None:
            policy = compile_policy(run.approval_rules, run.aliases, bounded=False)
            self._policies[run.id] = policy
            if len(self._policies) > CACHE_LIMIT:
                self._policies.popitem(last=False)
        else:
            self._policies.move_to_end(run.id)
        return policy

    def learned_policy(self, run: Run) -> Policy | None:
        """The run's learned rules compiled (None without any); recompiled when they change."""
        cached = self._learned.get(run.id)
        if cached is not None and cached[0] == run.rules_version:
            self._learned.move_to_end(run.id)
            return cached[1]
        # Each was checked when it was learned; stored, they are never refused again.
        rules = [entry["rule"] for entry in run.learned_rules]
        policy = compile_policy(rules, run.aliases, bounded=False) if rules else None
        self._learned[run.id] = (run.rules_version, policy)
        if len(self._learned) > CACHE_LIMIT:
            self._learned.popitem(last=False)
        return policy

    def evaluate(
        self,
        run: Run,
        *,
        tool_name: str,
        tool_input: Any,
        origin: str,
        mode: str | None = None,
        member: bool = False,
        tool_names: frozenset[str] | None = None,
    ) -> Verdict:
        """The run's verdict on a call: its declared rules, then its learned ones (which never
        beat a deny: bot/learning.py), a shell line judged command by command."""
        return self.evaluate_line(
            run,
            tool_name=tool_name,
            tool_input=tool_input,
            origin=origin,
            mode=mode,
            member=member,
            tool_names=tool_names,
        ).verdict

    def evaluate_line(
        self,
        run: Run,
        *,
        tool_name: str,
        tool_input: Any,
        origin: str,
        mode: str | None = None,
        member: bool = False,
        tool_names: frozenset[str] | None = None,
    ) -> compound.LineVerdict:
        """`evaluate`, with how each command of a shell line was judged (for the card)."""
        policy = self.policy(run)
        learned = self.learned_policy(run)
        ids = [entry["id"] for entry in run.learned_rules] if learned is not None else []
        mode = mode or run.approval_mode

        def decide(call_input: Any) -> Verdict:
            verdict = policy.evaluate(
                tool_name=tool_name,
                tool_input=call_input,
                origin=origin,  # type: ignore[arg-type]
                mode=mode,  # type: ignore[arg-type]
                member=member,
                tool_names=tool_names,
            )
            if learned is None:
                return verdict
            applied = learning.apply(
                verdict, learned, ids, tool_name=tool_name, tool_input=call_input, origin=origin
            )
            if applied is not verdict and under_quorum():
                return verdict  # a learned rule never stands in for several approvers
            return applied

        quorum_found: list[bool] = []

        def under_quorum() -> bool:
            """Whether the call (as a whole) meets an approval requirement (issue 21, 5)."""
            if not quorum_found:
                found = quorum.matching(
                    run.approval_requirements, run.aliases, tool_name, tool_input
                )
                quorum_found.append(bool(found))
            return quorum_found[0]

        if not run.shell_commands:  # the seed's judgement: the whole text against each glob
            return compound.LineVerdict(decide(tool_input))
        shell = compound.compile_shell(run.shell_commands)
        return compound.judge(decide, tool_input, shell, mode=mode, origin=origin)

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
            elif state[2] != frozen.rules_version:  # it learned a rule: read it anew
                run = await tx.get_run(run_id)
                if run is not None:
                    self._remember(run)
            elif state[:2] == (frozen.state, frozen.held_task_key):
                run = frozen  # the common case: still running; no copy to make
            else:
                run = replace(frozen, state=state[0], held_task_key=state[1])
        if run is None or run.workspace_id != workspace_id:
            raise not_found("run")
        return run

    def _remember(self, run: Run) -> None:
        self._runs[run.id] = run
        if len(self._runs) > CACHE_LIMIT:
            self._runs.popitem(last=False)

    async def _task(self, tx: Tx, workspace_id: str, run_id: str, key: str) -> Task:
        task = await tx.get_task(run_id, key)
        if task is None or task.workspace_id != workspace_id:
            raise not_found("task")
        return task

    async def _addressee(self, tx: Tx, run: Run) -> str | None:
        if run.executor_id is None:
            return None
        executor = await tx.get_executor(run.executor_id)
        return None if executor is None or executor.revoked else executor.id

    def _token_for(self, task: Task) -> str | None:
        if task.resolution_token_hash is None:
            return None
        return tokens.resolution_token(self.secret, task.id)

    def after_commit(self, run: Run, *, timers: bool = False, outbox: bool = False) -> None:
        self.hub.notify_run(run.workspace_id, run.id)
        if timers:
            self.on_timers()
        if outbox:
            self.on_outbox()
