"""What the three framework bridges share: finding the service, one approvalbot run per framework
session, putting a call or a question through it, and wording every ending for the model.

Nothing here raises for the service's sake. A call ends as an `Outcome` (allowed, with the input
to run, or not, with the text the model reads) and a question as an `Answer`; the service
unreachable, a refused token or a stopped run all end "not allowed", so no tool ever runs
without a grant and no agent run ends on an exception of ours.

The async SDK client lives on a private event loop in a daemon thread (as in
`adapters.http.sync_client`): the frameworks call from plain threads (LangChain's `invoke`) and
from their own event loops (`ainvoke`, the Agents SDK, the Claude Agent SDK), and one aiohttp
session cannot serve several loops. Both paths share the one client and the one map of runs.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import hashlib
import json
import logging
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from adapters.http import models as m
from adapters.http.client import ApiError, Client, Run

log = logging.getLogger("approvalbot.frameworks")
T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_WORKSPACE = "default"
# Sessions whose run a gate remembers: a server making a LangChain thread or an Agents SDK run
# per request would otherwise grow the map for ever; one idle that long declares a new run.
MAX_SESSIONS = 10_000
ASK_TOOL = "ask"  # the tool name questions go under (SPEC: a task of kind `ask`)
_KEY = re.compile(r"^[A-Za-z0-9._:~-]{1,150}$")


@dataclass(frozen=True)
class Target:
    """Where the service is and how this bridge's runs are declared."""

    url: str = DEFAULT_URL
    token: str = field(default="", repr=False)  # a secret: never in a repr, a log or a traceback
    workspace: str = DEFAULT_WORKSPACE
    profile: str | None = None
    wait: float | None = None  # seconds a call waits for a person; None: until it is decided


def find_target(
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
    default_profile: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Target:
    """Keywords first, then `APPROVALBOT_URL`, `APPROVALBOT_TOKEN`, `APPROVALBOT_WORKSPACE`."""
    env = os.environ if environ is None else environ
    return Target(
        url=(url or env.get("APPROVALBOT_URL") or DEFAULT_URL).rstrip("/"),
        token=token if token is not None else env.get("APPROVALBOT_TOKEN", ""),
        workspace=workspace or env.get("APPROVALBOT_WORKSPACE") or DEFAULT_WORKSPACE,
        profile=profile if profile is not None else default_profile,
        wait=wait,
    )


@dataclass(frozen=True)
class Outcome:
    """How one gated call ended: run it (with `tool_input`, the person's edit if they made
    one) or do not (and `message` is what the model reads instead of the tool's result)."""

    allowed: bool
    message: str
    tool_input: Any = None
    edited: bool = False


@dataclass(frozen=True)
class Answer:
    """How one question ended: `ok` with the answer's `content`; `text` is for the model."""

    ok: bool
    text: str
    content: Any = None


class Failure(Exception):
    """A call that cannot be put through approvalbot; the message says why, in one line."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def shown_url(url: str) -> str:
    """The service's URL as the model may read it: without a `user:password@` part."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def answer_text(content: Any) -> str:
    """A person's answer for the model: text as it is, several options joined by ", "."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return ", ".join(str(item) for item in content)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def refusal(task: m.TaskOut) -> str:
    """Why a call or question ended without a grant or an answer, carrying the detail."""
    error = task.error or {}
    code, detail = str(error.get("code") or ""), str(error.get("detail") or "").strip()
    who = task.resolved_by
    if task.state == "timed_out":
        return f"nobody decided within the time allowed ({detail or code or 'expired'})"
    if task.state == "cancelled" and code == "withdrawn":
        return f"the call was withdrawn ({detail})"
    if task.state == "cancelled":
        return f"the approvalbot run was stopped ({detail or code})"
    if code == "declined":
        return f"{who or 'the person'} declined to answer"
    if who:
        plain = f"denied by {who}"
        return plain if detail in ("", plain) else f"{plain}: {detail}"
    return f"denied by the approval rules: {detail or code}"


def task_key(call_id: str | None, tool: str, tool_input: Any) -> str | None:
    """The task's idempotency key: the framework's call id with a fingerprint of the call, so
    asking again about the same call (a resume, a retry) finds the same task, while a model
    that reuses ids across turns still gets a new task for a new call."""
    if not call_id:
        return None
    blob = json.dumps([tool, tool_input], sort_keys=True, default=str).encode()
    digest = hashlib.sha256(blob).hexdigest()[:12]
    base = call_id if _KEY.match(call_id) else hashlib.sha256(call_id.encode()).hexdigest()[:32]
    return f"{base}-{digest}"


def approved_input(task: m.TaskOut) -> Any:
    """The input the person approved, if they edited it; None otherwise (or on a service that
    does not know editing yet)."""
    return getattr(task, "approved_input", None)


class _Closed(Exception):
    """The loop is stopping: it takes no new work."""


class _Loop:
    """The private event loop the client lives on."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="approvalbot-bridge", daemon=True
        )
        self._closing = False
        self._scheduling = threading.Lock()
        self.thread.start()

    def _schedule(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Work for the loop, unless it is stopping: work scheduled once `stop` began would
        never run, and its caller would wait for ever."""
        with self._scheduling:
            if self._closing:
                coro.close()
                raise _Closed
            return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def submit(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        return asyncio.wrap_future(self._schedule(coro))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._schedule(coro).result()

    def on_own_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def stop(self, last: Coroutine[Any, Any, None]) -> None:
        """End every call still waiting (their callers read "not run"), run `last` (closing the
        client), then stop the loop and its thread."""
        with self._scheduling:  # what was scheduled before is cancelled below; nothing after
            already, self._closing = self._closing, True
        if already:
            last.close()
            return
        if self.on_own_thread():  # blocking here would wait on ourselves: finish in the background
            caller = asyncio.current_task(self.loop)
            self.loop.create_task(self._wind_down(last, caller)).add_done_callback(
                lambda _done: self.loop.stop()
            )
            return
        try:
            asyncio.run_coroutine_threadsafe(self._wind_down(last), self.loop).result(timeout=10)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            log.warning("approvalbot bridge: its loop did not wind down; stopping it anyway")
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
            if not self.thread.is_alive():
                self.loop.close()

    async def _wind_down(
        self, last: Coroutine[Any, Any, None], caller: asyncio.Task[Any] | None = None
    ) -> None:
        spared = {asyncio.current_task(), caller}
        pending = [task for task in asyncio.all_tasks() if task not in spared]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await last


class Gate:
    """One bridge's link to approvalbot: one run per framework session (a LangChain thread, an
    Agents SDK run, a Claude Agent SDK session), declared at its first call."""

    def __init__(self, target: Target, title: str) -> None:
        self.target = target
        self.title = title
        self._loop: _Loop | None = None
        self._client: Client | None = None
        self._runs: OrderedDict[Hashable, Run] = OrderedDict()  # oldest used first
        # Sessions to continue in a run declared before, maybe by another process (a framework
        # state restored elsewhere): taken up at the session's next call instead of declaring.
        self._adopted: dict[Hashable, str] = {}
        self._declaring: asyncio.Lock | None = None
        self._started = threading.Lock()
        _every_gate.add(self)  # closed at exit, even one a bridge kept after `close_gates`

    # entry points: `decide`/`ask` from any event loop, `decide_sync`/`ask_sync` from threads --
    async def decide(
        self,
        session: Hashable,
        tool: str,
        tool_input: Any,
        *,
        call_id: str | None = None,
        effect_profile: dict[str, Any] | None = None,
        title: str | None = None,
    ) -> Outcome:
        work = self._decide(session, tool, tool_input, call_id, effect_profile, title)
        return await self._on_loop(work, lambda why: Outcome(False, f"{tool} was not run: {why}"))

    def decide_sync(
        self,
        session: Hashable,
        tool: str,
        tool_input: Any,
        *,
        call_id: str | None = None,
        effect_profile: dict[str, Any] | None = None,
        title: str | None = None,
    ) -> Outcome:
        work = self._decide(session, tool, tool_input, call_id, effect_profile, title)
        return self._on_thread(work, lambda why: Outcome(False, f"{tool} was not run: {why}"))

    async def ask(
        self,
        session: Hashable,
        prompt: str,
        options: list[str] | None = None,
        multi: bool = False,
        *,
        call_id: str | None = None,
        title: str | None = None,
    ) -> Answer:
        work = self._ask(session, prompt, options, multi, call_id, title)
        return await self._on_loop(work, _unasked)

    def ask_sync(
        self,
        session: Hashable,
        prompt: str,
        options: list[str] | None = None,
        multi: bool = False,
        *,
        call_id: str | None = None,
        title: str | None = None,
    ) -> Answer:
        work = self._ask(session, prompt, options, multi, call_id, title)
        return self._on_thread(work, _unasked)

    def run_id(self, session: Hashable) -> str | None:
        """The approvalbot run of a session, once declared."""
        run = self._runs.get(session)
        return run.id if run else None

    def forget(self, session: Hashable) -> None:
        """Drop a finished session's run from the map (the run itself stays in approvalbot)."""
        self._runs.pop(session, None)
        self._adopted.pop(session, None)

    def adopt(self, session: Hashable, run_id: str) -> None:
        """Continue `session` in the approvalbot run `run_id` (declared before, by this process
        or another) instead of declaring one at its next call; a session already in a run
        keeps it. A run the service no longer knows is replaced by a new one, as always."""
        if session not in self._runs:
            while len(self._adopted) >= MAX_SESSIONS:  # adopted and never used: the oldest go
                self._adopted.pop(next(iter(self._adopted)))
            self._adopted[session] = run_id

    async def run_of(self, session: Hashable, title: str | None = None) -> str | None:
        """The session's approvalbot run id, declaring the run now if it has none; None when
        it cannot be had (the call that follows then says why, worded for the model)."""
        return await self._on_loop(self._run_id(session, title), lambda _why: None)

    def close(self) -> None:
        """Stop the loop and close the client's connections; calls still waiting end "not run".
        The gate stays usable: the next call starts a new loop (and session), the runs kept."""
        with self._started:
            loop, self._loop = self._loop, None
            self._declaring = None  # a lock belongs to the loop it was first used on
        if loop is None:
            return
        client = self._client
        loop.stop(client.close() if client is not None else asyncio.sleep(0))

    # the work, on the private loop ------------------------------------------------------------
    def _loop_started(self) -> _Loop:
        with self._started:
            if self._loop is None:
                self._loop = _Loop()
            return self._loop

    async def _on_loop(self, work: Coroutine[Any, Any, T], ended: Callable[[str], T]) -> T:
        """`work` on the private loop, awaited from the caller's loop (which may be it)."""
        try:
            future = self._loop_started().submit(work)
        except _Closed:
            return ended(CLOSED)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if future.cancelled() and caller is not None and not caller.cancelling():
                return ended(CLOSED)  # `close` ended the call, not the framework
            future.cancel()  # the framework gave up on the call: stop waiting for a person
            raise

    def _on_thread(self, work: Coroutine[Any, Any, T], ended: Callable[[str], T]) -> T:
        """`work` on the private loop, the calling thread blocked until it ends; `ended(why)`
        when it cannot end."""
        loop = self._loop_started()
        if loop.on_own_thread():  # a sync call from inside the bridge's loop would never return
            work.close()
            return ended("a sync entry point was called on the bridge's own event loop")
        try:
            return loop.run(work)
        except (concurrent.futures.CancelledError, _Closed):
            return ended(CLOSED)

    async def _decide(
        self,
        session: Hashable,
        tool: str,
        tool_input: Any,
        call_id: str | None,
        effect_profile: dict[str, Any] | None,
        title: str | None,
    ) -> Outcome:
        try:
            task = await self._settle(session, title, tool, tool_input, call_id, effect_profile)
        except Failure as failure:
            return Outcome(False, f"{tool} was not run: {failure}")
        if task is None:
            return Outcome(False, f"{tool} was not run: nobody decided within {self._waited()}")
        if task.state != "granted":
            return Outcome(False, f"{tool} was not run: {refusal(task)}")
        edited = approved_input(task)
        who = f"approved by {task.resolved_by}" if task.resolved_by else "allowed by rule"
        if edited is not None and edited != tool_input:
            if not isinstance(edited, dict):
                # Every framework's tool takes an object of arguments: an edit to anything else
                # cannot be run, and running the proposed input instead was not approved.
                shown = json.dumps(edited, ensure_ascii=False, default=str)
                return Outcome(
                    False,
                    f"{tool} was not run: {who} with an edited input that is not a set of "
                    f"arguments ({shown})",
                )
            return Outcome(True, f"{who}, with an edited input", edited, edited=True)
        return Outcome(True, who, tool_input)

    async def _ask(
        self,
        session: Hashable,
        prompt: str,
        options: list[str] | None,
        multi: bool,
        call_id: str | None,
        title: str | None,
    ) -> Answer:
        question: dict[str, Any] = {"prompt": prompt}
        if options:
            question["options"] = list(options)
        if multi:
            question["multi"] = True
        try:
            task = await self._settle(session, title, ASK_TOOL, question, call_id, None)
        except Failure as failure:
            return Answer(False, f"the question was not asked: {failure}")
        if task is None:
            return Answer(False, f"nobody answered within {self._waited()}")
        if task.state != "resolved":
            return Answer(False, f"no answer: {refusal(task)}")
        content = (task.resolution or {}).get("content")
        return Answer(True, answer_text(content), content)

    async def _settle(
        self,
        session: Hashable,
        title: str | None,
        tool: str,
        tool_input: Any,
        call_id: str | None,
        effect_profile: dict[str, Any] | None,
    ) -> m.TaskOut | None:
        """Append the call and wait for its ending; None if `wait` ran out first. Every failure
        to reach a decision is a `Failure` worded for the model."""
        try:
            run = await self._run(session, title)
            key = task_key(call_id, tool, tool_input)
            try:
                receipt = await run.append(
                    tool, tool_input, key=key, origin="model", effect_profile=effect_profile
                )
            except ApiError as error:
                if error.status != 404 or not error.detail.startswith("run"):
                    raise
                # The service no longer knows the run (a reset database): a new one, once.
                self._runs.pop(session, None)
                run = await self._run(session, title)
                receipt = await run.append(
                    tool, tool_input, key=key, origin="model", effect_profile=effect_profile
                )
            task = await run.wait(receipt.key, self.target.wait) if receipt.parked else receipt
        except ApiError as error:
            raise Failure(self._api_error(error)) from error
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            detail = one_line(str(error)) or type(error).__name__
            where = shown_url(self.target.url)
            raise Failure(f"approvalbot is unreachable at {where}: {detail}") from error
        except Failure:
            raise
        # Anything else (an answer we cannot read, a URL aiohttp refuses) still never raises. The
        # log has the type only: an exception's text may carry its URL, credentials too.
        except Exception as error:
            log.warning("approvalbot call failed: %s", type(error).__name__)
            raise Failure(f"approvalbot could not be asked ({type(error).__name__})") from error
        return None if task.parked else task

    async def _run_id(self, session: Hashable, title: str | None) -> str | None:
        try:
            return (await self._run(session, title)).id
        except Exception as error:  # reported by the call that follows, never raised here
            log.info("approvalbot run not declared yet: %s", type(error).__name__)
            return None

    async def _run(self, session: Hashable, title: str | None) -> Run:
        found = self._runs.get(session)
        if found is not None:
            self._runs.move_to_end(session)
            return found
        if not self.target.token:
            raise Failure(
                "approvalbot is not configured: set APPROVALBOT_TOKEN to an application token"
            )
        if self._declaring is None:
            self._declaring = asyncio.Lock()
        async with self._declaring:
            found = self._runs.get(session)
            if found is None:
                if self._client is None:
                    self._client = Client(self.target.url, self.target.token)
                runs = self._client.workspace(self.target.workspace).runs
                adopted = self._adopted.pop(session, None)
                if adopted is not None:
                    found = runs.run(adopted)
                else:
                    found = await runs.declare(
                        profile=self.target.profile, title=title or self.title
                    )
                    log.info("declared run %s (%s)", found.id, title or self.title)
                self._runs[session] = found
                while len(self._runs) > MAX_SESSIONS:  # a long-lived process: forget the oldest
                    self._runs.popitem(last=False)
            return found

    def _api_error(self, error: ApiError) -> str:
        if error.status == 401:
            return "approvalbot refused the token (401 unauthorized): check APPROVALBOT_TOKEN"
        if error.status == 404 and "workspace" in error.detail:
            return (
                f"approvalbot has no workspace {self.target.workspace!r} for this token (404): "
                "check APPROVALBOT_WORKSPACE"
            )
        return one_line(f"approvalbot refused the request ({error.code}): {error.detail}")

    def _waited(self) -> str:
        return f"{self.target.wait:g} s"


CLOSED = "the approvalbot bridge was closed while the call waited"


def _unasked(why: str) -> Answer:
    return Answer(False, f"the question was not asked: {why}")


_gates: dict[tuple[Target, str], Gate] = {}
_every_gate: weakref.WeakSet[Gate] = weakref.WeakSet()
_gates_lock = threading.Lock()


def gate_for(target: Target, title: str) -> Gate:
    """The one gate for a target and bridge: the same keywords (or environment) give the same
    gate, so a bridge's pieces (a tool and its approval helper) share one run per session."""
    with _gates_lock:
        found = _gates.get((target, title))
        if found is None:
            found = _gates[(target, title)] = Gate(target, title)
        return found


def close_gates() -> None:
    """Close every gate (their clients and loops); the next call opens a new one. For a
    process that is done with its agents, and for tests."""
    with _gates_lock:
        found = list(_gates.values())
        _gates.clear()
    for gate in found:
        gate.close()


def _close_at_exit() -> None:
    for gate in list(_every_gate):
        gate.close()


# A process that ends without `close_gates` still closes its connections (no "Unclosed client
# session" at exit); atexit runs after the non-daemon threads, while the loop thread still runs.
atexit.register(_close_at_exit)
