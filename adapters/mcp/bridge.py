"""What the MCP tools do, without MCP: one run per session, questions and approval requests put
through approvalbot with the Python SDK, and every ending worded for the model.

Every public method answers a `Reply` (text, and whether it is an error) and never raises for
the service's sake: an unreachable service, a refused token or a bad argument is a one-line
error reply, so the MCP server never falls over.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import aiohttp

from adapters.http import models as m
from adapters.http.client import ApiError, Client
from adapters.http.client import Run as ClientRun
from adapters.web.links import decision_url
from bot.durations import format_duration

log = logging.getLogger("approvalbot.mcp")

DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_WORKSPACE = "default"
DEFAULT_PROFILE = "mcp"
DEFAULT_WAIT = 600.0
APPROVAL_TOOL = "request_approval"  # the tool name approval requests park under (rules see it)
PROGRESS_EVERY = 15.0  # seconds between progress notifications while a person is awaited

# (progress so far in seconds, total seconds, message) -> sent as MCP progress, if asked for
Progress = Callable[[float, float, str], Awaitable[None]]


@dataclass(frozen=True)
class McpConfig:
    url: str = DEFAULT_URL
    token: str = ""
    workspace: str = DEFAULT_WORKSPACE
    profile: str = DEFAULT_PROFILE
    wait: float = DEFAULT_WAIT  # seconds a tool call waits for a person


@dataclass(frozen=True)
class Reply:
    text: str
    is_error: bool = False


class Failure(Exception):
    """A tool call that cannot be carried out; its message is the one-line error reply."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def run_title(client_name: str | None, client_version: str | None) -> str:
    """ "MCP · Claude Desktop 1.2", after the MCP client's `clientInfo`; "MCP" without one."""
    name = " ".join(part for part in (client_name, client_version) if part)
    return f"MCP · {name}" if name else "MCP"


async def _silent(_done: float, _total: float, _message: str) -> None:
    return None


@dataclass
class Bridge:
    """One MCP session's link to approvalbot. The run is declared at the first tool call, when
    the client's name is known, and reused for every later call of the session."""

    config: McpConfig
    client: Client | None = None
    run: ClientRun | None = None
    # Questions and requests still open after `wait`: asked again the same way, the call waits
    # on the same task instead of parking a second one.
    pending: dict[str, str] = field(default_factory=dict)
    _declaring: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
            self.client = None

    # the tools ---------------------------------------------------------------------------------
    async def ask_human(
        self,
        prompt: str,
        options: list[str] | None = None,
        multi: bool = False,
        *,
        client_name: str | None = None,
        client_version: str | None = None,
        progress: Progress = _silent,
    ) -> Reply:
        question: dict[str, Any] = {"prompt": prompt}
        if options:
            question["options"] = options
        if multi:
            question["multi"] = True
        return await self._guarded(
            lambda run: self._ask(run, question, progress), client_name, client_version
        )

    async def request_approval(
        self,
        action: str,
        details: dict[str, Any] | str | None = None,
        effect_profile: dict[str, Any] | None = None,
        *,
        client_name: str | None = None,
        client_version: str | None = None,
        progress: Progress = _silent,
    ) -> Reply:
        if isinstance(details, str):
            tool_input: dict[str, Any] = {"details": details}
        else:
            tool_input = dict(details or {})
        profile = {k: v for k, v in (effect_profile or {}).items() if v is not None}
        profile["summary"] = action
        return await self._guarded(
            lambda run: self._approve(run, tool_input, profile, progress),
            client_name,
            client_version,
        )

    # the work ----------------------------------------------------------------------------------
    async def _guarded(
        self,
        work: Callable[[ClientRun], Awaitable[str]],
        client_name: str | None,
        client_version: str | None,
    ) -> Reply:
        try:
            run = await self._run(client_name, client_version)
            return Reply(await work(run))
        except Failure as failure:
            return Reply(one_line(str(failure)), is_error=True)
        except ApiError as error:
            return Reply(self._api_error(error), is_error=True)
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            detail = one_line(str(error)) or type(error).__name__
            return Reply(f"approvalbot is unreachable at {self.config.url}: {detail}", True)
        except Exception as error:  # a bug here must not take the MCP server down
            log.exception("tool call failed")
            return Reply(
                f"approvalbot mcp failed: {type(error).__name__}: {one_line(str(error))}", True
            )

    def _api_error(self, error: ApiError) -> str:
        if error.status == 401:
            return "approvalbot refused the token (401 unauthorized): check APPROVALBOT_TOKEN"
        if error.status == 404 and self.run is None:
            return (
                f"approvalbot has no workspace {self.config.workspace!r} for this token (404): "
                "check APPROVALBOT_WORKSPACE"
            )
        return one_line(f"approvalbot refused the request ({error.code}): {error.detail}")

    async def _run(self, client_name: str | None, client_version: str | None) -> ClientRun:
        if self.run is not None:
            return self.run
        if not self.config.token:
            raise Failure(
                "approvalbot is not configured: set APPROVALBOT_TOKEN to an application token"
            )
        async with self._declaring:
            if self.run is None:
                if self.client is None:
                    self.client = Client(self.config.url, self.config.token)
                title = run_title(client_name, client_version)
                runs = self.client.workspace(self.config.workspace).runs
                self.run = await runs.declare(profile=self.config.profile, title=title)
                log.info(
                    "declared run %s (%s, profile %s)", self.run.id, title, self.config.profile
                )
            return self.run

    async def _park(
        self, run: ClientRun, tool: str, tool_input: Any, profile: dict[str, Any] | None
    ) -> m.TaskOut:
        """Append the task; asked again the same way after `wait` ran out, the same task (still
        open, or decided since: then that decision is the answer)."""
        fingerprint = json.dumps([tool, tool_input, profile], sort_keys=True, default=str)
        key = self.pending.get(fingerprint)
        if key is not None:
            task = await run.task(key)
            if not task.parked:
                del self.pending[fingerprint]  # answered now; the next such call is a new one
            return task
        task = await run.append(tool, tool_input, effect_profile=profile)
        if task.parked:
            self.pending[fingerprint] = task.key
        return task

    def _unpark(self, task: m.TaskOut) -> None:
        for fingerprint, key in list(self.pending.items()):
            if key == task.key:
                del self.pending[fingerprint]

    async def _settle(self, run: ClientRun, receipt: m.TaskOut, progress: Progress) -> m.TaskOut:
        """Wait up to `wait` seconds for a person; the task as it then stands (maybe parked)."""
        if not receipt.parked:
            return receipt
        loop = asyncio.get_running_loop()
        total = self.config.wait
        started = loop.time()
        link = decision_url(self.config.url, run.id, receipt.key)
        task = receipt
        while task.parked:
            waited = loop.time() - started
            left = total - waited
            if left <= 0:
                break
            await progress(waited, total, f"waiting for a person to decide: {link}")
            task = await run.wait(receipt.key, min(left, PROGRESS_EVERY))
        if not task.parked:
            self._unpark(task)
        return task

    async def _ask(self, run: ClientRun, question: dict[str, Any], progress: Progress) -> str:
        task = await self._settle(run, await self._park(run, "ask", question, None), progress)
        if task.parked:
            return (
                f"nobody answered within {self._waited()}: the question stays open, so ask_human "
                "again with the same prompt keeps waiting for it"
            )
        if task.state == "resolved":
            return answer_text((task.resolution or {}).get("content"))
        return ending(task, question=True)

    async def _approve(
        self,
        run: ClientRun,
        tool_input: dict[str, Any],
        profile: dict[str, Any],
        progress: Progress,
    ) -> str:
        receipt = await self._park(run, APPROVAL_TOOL, tool_input, profile)
        task = await self._settle(run, receipt, progress)
        if task.parked:
            return (
                f"nobody decided within {self._waited()}: do not go ahead. The request stays "
                "open, so request_approval again with the same action keeps waiting for it"
            )
        if task.state == "granted":
            if task.approved_input is not None:
                # The person changed the request before approving it: the model must act on
                # what was approved, not on what it asked for.
                edited = json.dumps(task.approved_input, ensure_ascii=False, sort_keys=True)
                return (
                    f"approved by {task.resolved_by} with changes: go ahead only with these "
                    f"details instead of yours: {edited}"
                )
            return f"approved by {task.resolved_by}" if task.resolved_by else "approved by rule"
        return ending(task, question=False)

    def _waited(self) -> str:
        return format_duration(timedelta(seconds=self.config.wait))


def answer_text(content: Any) -> str:
    """A person's answer for the model: text as it is, several options joined by ", "."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return ", ".join(str(item) for item in content)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)


def ending(task: m.TaskOut, *, question: bool) -> str:
    """How a question or request ended without an answer or a grant."""
    error = task.error or {}
    code, detail = str(error.get("code", "")), str(error.get("detail", ""))
    who = task.resolved_by
    if task.state == "timed_out":
        if question:
            return "nobody answered within the time allowed: the question expired"
        return "nobody decided within the time allowed: the request expired; do not go ahead"
    if task.state == "cancelled" and code == "withdrawn":
        return f"withdrawn: {detail or code}; do not go ahead"
    if task.state == "cancelled":
        return f"stopped: the approvalbot run was stopped ({detail or code}); do not go ahead"
    if code == "declined":
        return f"{who} declined to answer" if who else "the person declined to answer"
    if who:
        plain = f"denied by {who}"
        return plain if detail in ("", plain) else f"{plain}: {detail}"
    return f"denied: {detail or code}"
