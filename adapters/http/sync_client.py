"""A blocking twin of the SDK for plain Python code: the async client runs on a private event loop
in a daemon thread, and every method here waits for its result. Same behaviour, same models,
same typed refusals as `adapters.http.client`::

    client = SyncClient(url, token)
    with client.workspace("acme").runs.declare(approval_mode="ask") as run:  # stopped on exit

        @require_approval(run)
        def deploy(env: str) -> None: ...

    for decision in client.workspace("acme").decisions():
        decision.approve()  # or approve(tool_input={…}) as edited, approve(allow="run") always
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from adapters.http import client as c
from adapters.http import models as m
from adapters.http import policy_models as pm

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class _Loop:
    """An event loop on its own thread; `run` blocks the caller until the coroutine is done.

    `stop` cancels what still runs there first (another thread's long poll), so no caller is
    left waiting on a loop that no longer turns; work sent after that is refused at once."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stopping = False

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.stopping:
            coro.close()
            raise RuntimeError("this SyncClient is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self, last: Coroutine[Any, Any, Any] | None = None) -> None:
        """Cancel what runs, run `last` (the client's close), then stop and close the loop."""
        if self.stopping:
            if last is not None:
                last.close()
            return
        self.stopping = True

        async def wind_down() -> None:
            current = asyncio.current_task()
            pending = [t for t in asyncio.all_tasks() if t is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if last is not None:
                await last

        try:
            asyncio.run_coroutine_threadsafe(wind_down(), self.loop).result(timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
            if not self.thread.is_alive():
                self.loop.close()


class SyncClient:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        surface: str | None = None,
        connect_timeout: float = c.CONNECT_TIMEOUT,
    ) -> None:
        self._loop = _Loop()
        self.client = c.Client(url, token, surface=surface, connect_timeout=connect_timeout)

    def workspace(self, workspace_id: str) -> SyncWorkspace:
        return SyncWorkspace(self._loop, self.client.workspace(workspace_id))

    def close(self) -> None:
        """Close the session and the loop. A call another thread still waits on ends with
        `CancelledError`; closing twice is harmless."""
        self._loop.stop(self.client.close())

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class SyncWorkspace:
    def __init__(self, loop: _Loop, workspace: c.Workspace) -> None:
        self._loop = loop
        self.workspace = workspace
        self.id = workspace.id
        self.runs = SyncRuns(loop, workspace.runs)

    def asks(self, run_id: str | None = None) -> list[m.AskOut]:
        """Every decision resting on a person: all the pages, following the cursor."""
        return self._loop.run(self.workspace.asks(run_id))

    def asks_page(
        self, run_id: str | None = None, *, limit: int | None = None, cursor: str | None = None
    ) -> m.AsksOut:
        return self._loop.run(self.workspace.asks_page(run_id, limit=limit, cursor=cursor))

    def decisions(self) -> list[SyncDecision]:
        found = self._loop.run(self.workspace.decisions.list())
        return [SyncDecision(self._loop, d) for d in found]

    def register_executor(self, name: str) -> m.ExecutorOut:
        return self._loop.run(self.workspace.register_executor(name))

    def learned_rules(self) -> list[pm.LearnedRuleOut]:
        return self._loop.run(self.workspace.learned_rules())

    def remove_learned_rule(self, rule_id: str) -> None:
        self._loop.run(self.workspace.remove_learned_rule(rule_id))

    def log_page(self, run_id: str | None = None, *, after: int = 0) -> pm.LogOut:
        return self._loop.run(self.workspace.log_page(run_id, after=after))

    def log(self, run_id: str | None = None, *, after: int = 0) -> list[pm.LogEntryOut]:
        """The decision log after entry `after`, oldest first, every page."""
        return self._loop.run(self.workspace.log(run_id, after=after))


class SyncRuns:
    def __init__(self, loop: _Loop, runs: c.Runs) -> None:
        self._loop = loop
        self._runs = runs

    def run(self, run_id: str) -> SyncRun:
        return SyncRun(self._loop, self._runs.run(run_id))

    def declare(self, **fields: Any) -> SyncRun:
        """The declared run; `with runs.declare(…) as run:` stops it when the block ends."""
        return SyncRun(self._loop, self._loop.run(self._runs.declare(**fields).pending))


class SyncRun:
    def __init__(self, loop: _Loop, run: c.Run) -> None:
        self._loop = loop
        self.run = run
        self.id = run.id

    def get(self) -> m.RunOut:
        return self._loop.run(self.run.get())

    def stop(self, outcome: str | None = None, reason: str | None = None) -> m.RunOut:
        """As `Run.stop`: `outcome` succeeded or failed, a short `reason`, both optional."""
        return self._loop.run(self.run.stop(outcome, reason))

    def retry(self) -> m.RunOut:
        return self._loop.run(self.run.retry())

    def abandon(self) -> m.RunOut:
        return self._loop.run(self.run.abandon())

    def __enter__(self) -> SyncRun:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """Stopped with the block, like the async run (an exception goes on unhidden)."""
        self._loop.run(self.run.__aexit__(kind, error, trace))

    def append(self, tool_name: str, tool_input: Any, **fields: Any) -> m.TaskOut:
        return self._loop.run(self.run.append(tool_name, tool_input, **fields))

    def task(self, key: str, *, wait: float = 0) -> m.TaskOut:
        return self._loop.run(self.run.task(key, wait=wait))

    def call(self, tool: str, tool_input: Any = None, **options: Any) -> m.TaskOut:
        return self._loop.run(self.run.call(tool, tool_input, **options))

    def ask(self, prompt: str, options: list[str] | None = None, **more: Any) -> Any:
        return self._loop.run(self.run.ask(prompt, options, **more))

    def withdraw(self, key: str, reason: str | None = None) -> m.TaskOut:
        """As `Run.withdraw`: stop waiting for a parked call or question."""
        return self._loop.run(self.run.withdraw(key, reason))

    def decisions(self) -> list[SyncDecision]:
        found = self._loop.run(self.run.decisions.list())
        return [SyncDecision(self._loop, d) for d in found]

    def approve(
        self,
        key: str,
        *,
        tool_input: Any = c.UNEDITED,
        allow: c.Scope | None = None,
        rule: dict[str, Any] | None = None,
    ) -> m.TaskOut:
        """As `Run.approve`: edited with `tool_input`, learning a rule with `allow`."""
        return self._loop.run(self.run.approve(key, tool_input=tool_input, allow=allow, rule=rule))

    def proposal(self, key: str) -> pm.ProposalOut:
        return self._loop.run(self.run.proposal(key))

    def deny(self, key: str, reason: str = "") -> m.TaskOut:
        return self._loop.run(self.run.deny(key, reason))

    def resolve(self, key: str, content: Any = None, **options: Any) -> m.TaskOut:
        return self._loop.run(self.run.resolve(key, content, **options))

    def events(self, last_event_id: int = 0) -> Iterator[m.FeedEvent]:
        """Blocks for each next event; reconnects like the async feed."""
        feed = self.run.events(last_event_id)
        while True:
            yield self._loop.run(anext(feed))  # type: ignore[arg-type]

    def require_approval(
        self, *, tool: str | None = None, effect_profile: dict[str, Any] | None = None
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Decorate a plain function: each call is put through approval first."""

        def decorate(func: Callable[P, R]) -> Callable[P, R]:
            name = tool or func.__name__

            @functools.wraps(func)
            def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
                tool_input = c.call_input(func, args, kwargs)
                task = self.call(name, tool_input, effect_profile=effect_profile)
                if task.approved_input is None:
                    return func(*args, **kwargs)
                edited_args, edited_kwargs = c.edited_call(func, task.approved_input)
                return func(*edited_args, **edited_kwargs)

            return guarded

        return decorate


class SyncDecision:
    def __init__(self, loop: _Loop, decision: c.Decision) -> None:
        self._loop = loop
        self.decision = decision
        self.task = decision.task
        self.is_question = decision.is_question

    def __getattr__(self, name: str) -> Any:
        return getattr(self.task, name)

    def approve(
        self,
        *,
        tool_input: Any = c.UNEDITED,
        allow: c.Scope | None = None,
        rule: dict[str, Any] | None = None,
    ) -> m.TaskOut:
        return self._loop.run(self.decision.approve(tool_input=tool_input, allow=allow, rule=rule))

    def proposal(self) -> pm.ProposalOut:
        return self._loop.run(self.decision.proposal())

    def deny(self, reason: str = "") -> m.TaskOut:
        return self._loop.run(self.decision.deny(reason))

    def answer(self, content: Any) -> m.TaskOut:
        return self._loop.run(self.decision.answer(content))

    def decline(self) -> m.TaskOut:
        return self._loop.run(self.decision.decline())
