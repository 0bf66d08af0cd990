"""The Python SDK: an async client for the HTTP API, on aiohttp, with the server's own wire models.

For people::

    async with Client(url, token) as client:
        async for decision in client.workspace("acme").runs.run(run_id).decisions:
            await (decision.answer(content="Now") if decision.is_question else decision.approve())

For agents::

    async with client.workspace("acme").runs.declare(approval_mode="ask") as run:
        receipt = await run.call("bash", {"command": "make deploy"})  # waits for a person
        answer = await run.ask("Which region?", options=["eu", "us"])
    # the run is stopped here, whether the block ended normally or with an exception

`await runs.declare(…)` without `async with` gives the run alone; end it with `await run.stop()`.

`run.call` returns the granted task or raises `ApprovalDenied`, `ApprovalExpired`, `RunStopped`
(typed, with `code`, `detail` and the task). A person may have edited the call before approving
it: run `task.approved_input` when it is not None (`input_to_run(task)` picks it). A blocking
twin lives in `adapters.http.sync_client`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload
from urllib.parse import quote

import aiohttp

from adapters.http import models as m
from adapters.http import policy_models as pm
from adapters.http.sdk_errors import (
    ApiError,
    ApprovalbotError,
    ApprovalDenied,
    ApprovalExpired,
    CallRefused,
    CallWithdrawn,
    EditedInputUnfit,
    QuestionDeclined,
    RunStopped,
    error_from,
    settled,
)
from adapters.http.sdk_inputs import (
    UNEDITED,
    Scope,
    approve_body,
    call_input,
    edited_call,
    input_to_run,
)
from adapters.http.sse_client import follow, parse_sse

# Re-exported: agent and person code imports every SDK name from here (or from `approvalbot`).
__all__ = [
    "UNEDITED", "ApiError", "ApprovalDenied", "ApprovalExpired", "ApprovalbotError", "CallRefused",
    "CallWithdrawn", "Client", "Decision", "Decisions", "DeclaredRun", "EditedInputUnfit",
    "QuestionDeclined", "Run", "RunStopped", "Runs", "Scope", "Workspace", "approve_body",
    "call_input", "edited_call", "error_from", "follow", "input_to_run", "parse_sse",
    "require_approval", "settled",
]  # fmt: skip

if TYPE_CHECKING:
    from adapters.http.sync_client import SyncRun

P = ParamSpec("P")
R = TypeVar("R")

_LONG_POLL = 55.0  # below the server's cap, so one request never outlives its own timeout
SURFACE_HEADER = "X-Approvalbot-Surface"  # adapters.http.api records decisions `via` it
ASKS_PAGE = 500  # decisions per `/asks` request when reading them all (the server's maximum)


# the client ------------------------------------------------------------------------------------
CONNECT_TIMEOUT = 5.0  # seconds to connect before a service counts as unreachable


class Client:
    """One connection pool to one approvalbot service. `token` is an application token (agents)
    or a member token (people)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        session: aiohttp.ClientSession | None = None,
        retries: int = 3,
        surface: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        """`surface` names the program deciding through this client, recorded with each decision
        (`via`): the service accepts `cli` (what `approvalbot asks` sends); anything else is
        recorded as `api`, the default. `connect_timeout` bounds connecting, in seconds (aiohttp
        waits 30 by default): a service that does not answer the connection in time is
        unreachable at once (`aiohttp.ConnectionTimeoutError`); reads, long polls and feeds keep
        their own bounds."""
        self.url = url.rstrip("/")
        self.token = token
        self.retries = retries
        self.surface = surface
        self.connect_timeout = connect_timeout
        self._session = session
        self._own_session = session is None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    def timeout(self, base: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientTimeout:
        """`base` (by default the session's) with connecting bounded by `connect_timeout`; its
        total and read bounds as they are (None stays None)."""
        if base is None:
            base = self.session.timeout
        # Only the socket's connect: aiohttp's `connect` also counts the wait for a free
        # connection of the pool, which a client with 100 long-polls open must not give up on.
        return aiohttp.ClientTimeout(
            total=base.total,
            sock_read=base.sock_read,
            connect=base.connect,
            sock_connect=self.connect_timeout,
            ceil_threshold=base.ceil_threshold,
        )

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.surface:
            headers[SURFACE_HEADER] = self.surface
        return headers | (extra or {})

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, str] | None = None,
        idempotent: bool | None = None,
    ) -> Any:
        """One JSON request; an error answer raises `ApiError`. Idempotent requests (every GET,
        and appends carrying a key) are retried on connection failures, but not after a
        connect timeout: the service did not answer for `connect_timeout` seconds, and asking
        again would only multiply the wait before the caller hears it is unreachable."""
        retry = method == "GET" if idempotent is None else idempotent
        data = None if body is None else json.dumps(body).encode()
        headers = self.headers({"Content-Type": "application/json"} if data else None)
        timeout = self.timeout()
        for attempt in range(self.retries + 1 if retry else 1):
            try:
                async with self.session.request(
                    method,
                    self.url + path,
                    data=data,
                    headers=headers,
                    params=query,
                    timeout=timeout,
                ) as response:
                    text = await response.text()
                    if response.status >= 400:
                        raise error_from(response.status, text)
                    return json.loads(text) if text else None
            except (TimeoutError, aiohttp.ClientConnectionError) as error:
                gave_up = isinstance(error, aiohttp.ConnectionTimeoutError)
                if attempt >= self.retries or not retry or gave_up:
                    raise
                await asyncio.sleep(min(2.0, 0.1 * 2**attempt))
        raise AssertionError("unreachable")

    def workspace(self, workspace_id: str) -> Workspace:
        return Workspace(self, workspace_id)

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()


class Workspace:
    def __init__(self, client: Client, workspace_id: str) -> None:
        self.client = client
        self.id = workspace_id
        self.base = f"/v1/workspaces/{workspace_id}"
        self.runs = Runs(self)

    async def asks(self, run_id: str | None = None) -> list[m.AskOut]:
        """Every decision now resting on a person (member credential), newest first: all the
        pages, following the cursor."""
        return [ask async for ask in self.each_ask(run_id)]

    async def each_ask(
        self, run_id: str | None = None, page: int | None = None
    ) -> AsyncIterator[m.AskOut]:
        """The decisions resting on people one page (`page` at a time) after the other. Keyset
        paging: one parked meanwhile is newer than the cursor, so it is not met (ask again),
        and none is met twice."""
        cursor: str | None = None
        while True:
            found = await self.asks_page(run_id, limit=page or ASKS_PAGE, cursor=cursor)
            for ask in found.asks:
                yield ask
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    async def asks_page(
        self, run_id: str | None = None, *, limit: int | None = None, cursor: str | None = None
    ) -> m.AsksOut:
        """One page of `GET /asks`: `limit` items (the server's default 100, at most 500) after
        `cursor` (the previous page's `next_cursor`)."""
        fields = {
            "run_id": run_id,
            "limit": None if limit is None else str(limit),
            "cursor": cursor,
        }
        query = {k: v for k, v in fields.items() if v}
        body = await self.client.request("GET", self.base + "/asks", query=query or None)
        return m.AsksOut.model_validate(body)

    @property
    def decisions(self) -> Decisions:
        """Workspace-wide: one `Decision` per task resting on a person."""
        return Decisions(self, None)

    async def register_executor(self, name: str) -> m.ExecutorOut:
        body = await self.client.request("POST", self.base + "/executors", {"name": name})
        return m.ExecutorOut.model_validate(body)

    # approve always and the decision log (member credential) ---------------------------------
    async def learned_rules(self) -> list[pm.LearnedRuleOut]:
        """The rules learned from decisions ("Approve & allow like this"), run-scoped ones too."""
        body = await self.client.request("GET", self.base + "/rules/learned")
        return pm.LearnedRulesOut.model_validate(body).rules

    async def remove_learned_rule(self, rule_id: str) -> None:
        """Remove a learned rule: runs declared afterwards (and the run of a run-scoped rule) no
        longer have it. An unknown id is `ApiError` 404 `not_found`."""
        await self.client.request("DELETE", f"{self.base}/rules/learned/{quote(rule_id, safe='')}")

    async def log_page(self, run_id: str | None = None, *, after: int = 0) -> pm.LogOut:
        """One page of the decision log (oldest first): the entries after entry `after`."""
        fields = {"run_id": run_id, "after": str(after) if after else None}
        query = {k: v for k, v in fields.items() if v}
        body = await self.client.request("GET", self.base + "/log", query=query or None)
        return pm.LogOut.model_validate(body)

    async def log(self, run_id: str | None = None, *, after: int = 0) -> list[pm.LogEntryOut]:
        """The decision log after entry `after` (0: from the start), oldest first, every page
        (following `next_after`); `run_id` keeps one run's entries."""
        entries: list[pm.LogEntryOut] = []
        while True:
            found = await self.log_page(run_id, after=after)
            entries += found.entries
            if found.next_after is None:
                return entries
            after = found.next_after


class Runs:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def run(self, run_id: str) -> Run:
        return Run(self.workspace, run_id)

    def declare(
        self,
        *,
        approval_mode: str | None = None,
        approval_rules: list[dict[str, Any]] | None = None,
        tool_names: list[str] | None = None,
        aliases: dict[str, str] | None = None,
        profile: str | None = None,
        title: str = "",
        executor_id: str | None = None,
        parent_run: str | None = None,
        shell_commands: list[dict[str, str]] | None = None,
    ) -> DeclaredRun:
        """Declare a run: `await` it for the run, or `async with` it to have the run stopped
        when the block ends (normally or by an exception)."""
        fields = {
            "approval_mode": approval_mode,
            "approval_rules": approval_rules,
            "tool_names": tool_names,
            "aliases": aliases,
            "profile": profile,
            "title": title or None,
            "executor_id": executor_id,
            "parent_run": parent_run,
            "shell_commands": shell_commands,
        }
        body = {k: v for k, v in fields.items() if v is not None}
        return DeclaredRun(self._declare(body))

    async def _declare(self, body: dict[str, Any]) -> Run:
        answer = await self.workspace.client.request("POST", self.workspace.base + "/runs", body)
        run = Run(self.workspace, str(answer["id"]))
        run.declared = m.RunOut.model_validate(answer)
        return run


class DeclaredRun:
    """What `runs.declare(…)` gives: awaitable (the run) and an async context manager (the run,
    stopped on exit)."""

    def __init__(self, pending: Coroutine[Any, Any, Run]) -> None:
        self.pending = pending
        self._run: Run | None = None

    def __await__(self) -> Generator[Any, None, Run]:
        return self.pending.__await__()

    async def __aenter__(self) -> Run:
        self._run = await self.pending
        return self._run

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        assert self._run is not None
        await self._run.__aexit__(kind, error, trace)


class Run:
    """A run, for agents (declare, call, ask) and people (its decisions)."""

    def __init__(self, workspace: Workspace, run_id: str) -> None:
        self.workspace = workspace
        self.client = workspace.client
        self.id = run_id
        self.base = f"{workspace.base}/runs/{run_id}"
        self.declared: m.RunOut | None = None

    async def get(self) -> m.RunOut:
        return m.RunOut.model_validate(await self.client.request("GET", self.base))

    async def _verb(self, verb: str, body: dict[str, str] | None = None) -> m.RunOut:
        answer = await self.client.request("POST", f"{self.base}/{verb}", body)
        return m.RunOut.model_validate(answer)

    async def stop(self, outcome: str | None = None, reason: str | None = None) -> m.RunOut:
        """Stop the run, saying how its work went if you like: `outcome` `succeeded` or
        `failed`, and a short `reason` (at most 500 characters) for the log and the page.
        Stopping a stopped run is a no-op that keeps the first stop's outcome."""
        fields = {"outcome": outcome, "reason": reason}
        return await self._verb("stop", {k: v for k, v in fields.items() if v is not None} or None)

    async def retry(self) -> m.RunOut:
        return await self._verb("retry")

    async def abandon(self) -> m.RunOut:
        return await self._verb("abandon")

    async def __aenter__(self) -> Run:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """The run ends with the block: stopped (parked calls cancelled; stopping a run that is
        stopped already is a no-op), `succeeded` after a normal exit. After an exception the
        stop is attempted as `failed`, its reason the exception's type name (never its message,
        which may hold secrets), and the exception goes on; a failure to stop never hides it."""
        if error is None:
            await self._stop_saying("succeeded")
            return
        try:
            await asyncio.shield(self._stop_saying("failed", type(error).__name__))
        except (ApprovalbotError, TimeoutError, aiohttp.ClientError, asyncio.CancelledError):
            pass

    async def _stop_saying(self, outcome: str, reason: str | None = None) -> m.RunOut:
        """Stop with the outcome; a service from before stops took one (it refuses the body
        with 422 invalid_request) is stopped without it rather than left running."""
        try:
            return await self.stop(outcome, reason)
        except ApiError as refused:
            if refused.code != "invalid_request":
                raise
            return await self.stop()

    # agents ------------------------------------------------------------------------------------
    async def append(self, tool_name: str, tool_input: Any, **fields: Any) -> m.TaskOut:
        """Append a call and return the receipt at once (it may be parked). A key is made here
        when none is given, so a retry after a lost answer is the same append, not a second."""
        body = {"tool_name": tool_name, "tool_input": tool_input} | {
            k: v for k, v in fields.items() if v is not None
        }
        body.setdefault("key", secrets.token_hex(8))
        answer = await self.client.request("POST", self.base + "/tasks", body, idempotent=True)
        return m.TaskOut.model_validate(answer)

    async def task(self, key: str, *, wait: float = 0) -> m.TaskOut:
        query = {"wait": f"{wait:g}"} if wait > 0 else None
        answer = await self.client.request("GET", f"{self.base}/tasks/{key}", query=query)
        return m.TaskOut.model_validate(answer)

    async def wait(self, key: str, timeout: float | None = None) -> m.TaskOut:
        """Long-poll until the task leaves its waiting state (or `timeout` seconds pass)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        pause = 0.2
        while True:
            left = _LONG_POLL if deadline is None else min(_LONG_POLL, deadline - loop.time())
            try:
                task = await self.task(key, wait=max(left, 0.0))
            except (TimeoutError, aiohttp.ClientConnectionError):
                # The service restarts or the network blips: a park may last hours, so keep
                # asking (the request's own retries are spent by now) until the deadline.
                if deadline is not None and loop.time() >= deadline:
                    raise
                await asyncio.sleep(pause)
                pause = min(5.0, pause * 2)
                continue
            pause = 0.2
            if not task.parked or (deadline is not None and loop.time() >= deadline):
                return task

    async def call(
        self,
        tool: str,
        tool_input: Any = None,
        *,
        key: str | None = None,
        effect_profile: dict[str, Any] | None = None,
        origin: str | None = None,
        failure_policy: str | None = None,
        timeout: float | None = None,
    ) -> m.TaskOut:
        """Put a call through approval and wait for the outcome: the granted task, or a typed
        refusal (`ApprovalDenied`, `ApprovalExpired`, `RunStopped`). A person may approve the
        call edited: run `task.approved_input` when it is not None, never the input you
        proposed (`input_to_run(task)` gives the one to run)."""
        receipt = await self.append(
            tool,
            {} if tool_input is None else tool_input,
            key=key,
            effect_profile=effect_profile,
            origin=origin,
            failure_policy=failure_policy,
        )
        task = await self.wait(receipt.key, timeout) if receipt.parked else receipt
        if task.parked:
            raise TimeoutError(f"task {task.key} is still {task.state} after {timeout}s")
        return settled(task)

    async def ask(
        self,
        prompt: str,
        options: list[str] | None = None,
        *,
        multi: bool = False,
        key: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Ask people and return the answer: text, one option, or (multi) a list of options."""
        question: dict[str, Any] = {"prompt": prompt}
        if options is not None:
            question["options"] = options
        if multi:
            question["multi"] = True
        task = await self.call("ask", question, key=key, timeout=timeout)
        return (task.resolution or {}).get("content")

    def require_approval(
        self, *, tool: str | None = None, effect_profile: dict[str, Any] | None = None
    ) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Coroutine[Any, Any, R]]]:
        """Decorate an async function: each call is put through approval first (its bound
        arguments are the tool input) and runs only when granted."""

        def decorate(func: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
            name = tool or func.__name__

            @functools.wraps(func)
            async def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
                proposed = call_input(func, args, kwargs)
                task = await self.call(name, proposed, effect_profile=effect_profile)
                if task.approved_input is None:
                    return await func(*args, **kwargs)
                edited_args, edited_kwargs = edited_call(func, task.approved_input)
                return await func(*edited_args, **edited_kwargs)

            return guarded

        return decorate

    async def withdraw(self, key: str, reason: str | None = None) -> m.TaskOut:
        """Stop waiting for a parked call or question: it ends `cancelled` with error
        `withdrawn` and people see it withdrawn (no one approves it any more). A short `reason`
        (at most 500 characters) goes with it. Already ended: `ApiError` 409 `already_decided`."""
        body = {"reason": reason} if reason is not None else None
        answer = await self.client.request("POST", f"{self.base}/tasks/{key}/withdraw", body)
        return m.TaskOut.model_validate(answer)

    # people ------------------------------------------------------------------------------------
    @property
    def decisions(self) -> Decisions:
        """One `Decision` per task of this run resting on a person."""
        return Decisions(self.workspace, self.id)

    async def approve(
        self,
        key: str,
        *,
        tool_input: Any = UNEDITED,
        allow: Scope | None = None,
        rule: dict[str, Any] | None = None,
    ) -> m.TaskOut:
        """Approve a parked call: `tool_input` approves it as edited (the run's rules evaluate
        it again: a deny is `ApiError` 422 `approval_denied` and the call stays parked);
        `allow="run"|"profile"` also learns an allow rule, the proposal unless `rule` is given.
        Under a quorum an approval that is not the last answers the task still parked, with
        `approvals` counting it."""
        body = approve_body(tool_input, allow, rule)
        answer = await self.client.request("POST", f"{self.base}/tasks/{key}/approve", body)
        return m.TaskOut.model_validate(answer)

    async def proposal(self, key: str) -> pm.ProposalOut:
        """The rule "Approve & allow like this" would learn from this parked call, and the past
        calls of the workspace it would have allowed (`would_allow`)."""
        answer = await self.client.request("GET", f"{self.base}/tasks/{key}/proposal")
        return pm.ProposalOut.model_validate(answer)

    async def deny(self, key: str, reason: str = "") -> m.TaskOut:
        body = {"reason": reason} if reason else None
        answer = await self.client.request("POST", f"{self.base}/tasks/{key}/deny", body)
        return m.TaskOut.model_validate(answer)

    async def resolve(
        self,
        key: str,
        content: Any = None,
        *,
        outcome: str | None = None,
        resolution_token: str | None = None,
    ) -> m.TaskOut:
        fields = {"content": content, "outcome": outcome, "resolution_token": resolution_token}
        body = {k: v for k, v in fields.items() if v is not None}
        answer = await self.client.request("POST", f"{self.base}/tasks/{key}/resolution", body)
        return m.TaskOut.model_validate(answer)

    # the feed ----------------------------------------------------------------------------------
    def events(self, last_event_id: int = 0) -> AsyncIterator[m.FeedEvent]:
        """The run's lifecycle feed; reconnects after a drop, resuming from the last event id."""
        return follow(self.client, self.base + "/events", last_event_id)


class Decision:
    """One task resting on a person, with what they need to decide it and the verb that ends it."""

    def __init__(self, run: Run, ask: m.AskOut) -> None:
        self.run = run
        self.task = ask

    def __getattr__(self, name: str) -> Any:
        # key, run_id, tool, tool_name, tool_input, effect_profile, deadline, why, prompt, …
        return getattr(self.task, name)

    @property
    def is_question(self) -> bool:
        return self.task.kind == "ask"

    async def approve(
        self,
        *,
        tool_input: Any = UNEDITED,
        allow: Scope | None = None,
        rule: dict[str, Any] | None = None,
    ) -> m.TaskOut:
        """Approve, edited with `tool_input`, learning a rule with `allow`: see `Run.approve`."""
        return await self.run.approve(self.task.key, tool_input=tool_input, allow=allow, rule=rule)

    async def proposal(self) -> pm.ProposalOut:
        """The rule `approve(allow=…)` would learn, and the past calls it would have allowed."""
        return await self.run.proposal(self.task.key)

    async def deny(self, reason: str = "") -> m.TaskOut:
        return await self.run.deny(self.task.key, reason)

    async def answer(self, content: Any) -> m.TaskOut:
        return await self.run.resolve(self.task.key, content)

    async def decline(self) -> m.TaskOut:
        return await self.run.resolve(self.task.key, outcome="failed")

    def __repr__(self) -> str:
        what = self.task.prompt if self.is_question else self.task.tool
        return f"<Decision {self.task.run_id}/{self.task.key} {self.task.kind}: {what}>"


class Decisions:
    """`async for decision in run.decisions` — a snapshot of what rests on people now."""

    def __init__(self, workspace: Workspace, run_id: str | None) -> None:
        self.workspace = workspace
        self.run_id = run_id

    async def list(self) -> list[Decision]:
        asks = await self.workspace.asks(self.run_id)
        return [Decision(self.workspace.runs.run(a.run_id), a) for a in asks]

    async def __aiter__(self) -> AsyncIterator[Decision]:
        for decision in await self.list():
            yield decision


@overload
def require_approval(
    run: Run, *, tool: str | None = None, effect_profile: dict[str, Any] | None = None
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Coroutine[Any, Any, R]]]: ...
@overload
def require_approval(
    run: SyncRun, *, tool: str | None = None, effect_profile: dict[str, Any] | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def require_approval(
    run: Run | SyncRun, *, tool: str | None = None, effect_profile: dict[str, Any] | None = None
) -> Any:
    """`@require_approval(run)`: the decorated function runs only after approval; with an async
    `Run` decorate `async def` functions, with a `SyncRun` plain ones."""
    return run.require_approval(tool=tool, effect_profile=effect_profile)
