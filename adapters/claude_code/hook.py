"""The Claude Code `PreToolUse` hook: one tool call in (JSON on stdin), one decision out.

Each Claude session gets one approvalbot run (declared from a profile on its first call and
remembered on disk, see `state`); each tool call is appended to it as a `model` call keyed by
Claude's `tool_use_id`, with an effect profile derived from the tool. The receipt decides:

- granted -> `allow`; refused (a rule or a person) -> `deny` with the reason, which Claude reads;
  approved as a person edited it -> `allow` with `updatedInput` = the approved input;
- parked -> long-poll until a person decides, and answer with their decision; nobody decided
  within `--wait` -> the call is withdrawn (best effort, at most ~2 s: nobody is nudged for it
  or approves it any more) and the `--on-timeout` decision given (`ask`: Claude's own prompt,
  or `deny`); a person who decided just before the withdrawal is heard instead;
- `AskUserQuestion` -> one approvalbot question per question; the answers go back as `allow`
  with `updatedInput` = the input plus `answers`;
- the service unreachable or refusing us, or a malformed input -> the `--on-error` decision
  (a call it parked before failing is withdrawn first, best effort).

Never a silent allow: every path that is not a grant or an answer ends in `ask` or `deny`.
Standard library only (plus `bot.effects` and `bot.durations`, which are too).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from adapters.claude_code.state import SessionRuns, endpoint_dir, state_root
from adapters.claude_code.wire import Endpoint, Reply, Unreachable, segment
from bot.effects import derive

# The hook timeout `--print-settings` writes, and the default wait: a little under it, so the
# hook answers (with --on-timeout) before Claude Code gives up on it.
HOOK_TIMEOUT = 1800
DEFAULT_WAIT = 1770.0
POLL = 55.0  # seconds per long-poll request (the service holds at most 60)
COMMAND = "approvalbot hook claude-code"
DECISIONS = ("allow", "deny", "ask")
PARKED = ("needs_approval", "awaiting_input")
# When --wait runs out the hook withdraws what it parked, within this many seconds in all (it
# must not hold Claude up: the withdrawal only spares people a decision nobody waits for).
WITHDRAW_BUDGET = 2.0
WITHDRAW_REASON = "Claude Code stopped waiting"


class ServiceError(Exception):
    """The service cannot answer this call: unreachable, a refused token, a 5xx, a refusal
    that says nothing about the call. Leads to the --on-error decision."""


class Refused(Exception):
    """The service refuses the call for a reason about the call or its run (stopped, held)."""


# Plain classes, not dataclasses: creating a dataclass costs about a millisecond at import, and
# the hook's start-up is most of its cost.
class Options:
    __slots__ = ("on_error", "on_timeout", "profile", "token", "url", "wait", "workspace")

    def __init__(
        self,
        url: str,
        token: str,
        workspace: str = "default",
        profile: str = "claude-code",
        wait: float = DEFAULT_WAIT,
        on_timeout: str = "ask",
        on_error: str = "ask",
    ) -> None:
        self.url, self.token, self.workspace, self.profile = url, token, workspace, profile
        self.wait, self.on_timeout, self.on_error = wait, on_timeout, on_error


class Decision:
    __slots__ = ("decision", "problem", "reason", "updated_input")

    def __init__(
        self,
        decision: str,
        reason: str,
        updated_input: dict[str, Any] | None = None,
        problem: str | None = None,  # one line for stderr (errors only)
    ) -> None:
        self.decision, self.reason = decision, reason
        self.updated_input, self.problem = updated_input, problem

    def __repr__(self) -> str:
        return f"Decision({self.decision!r}, {self.reason!r})"

    def output(self) -> dict[str, Any]:
        specific: dict[str, Any] = {
            "hookEventName": "PreToolUse",
            "permissionDecision": self.decision,
            "permissionDecisionReason": self.reason,
        }
        if self.updated_input is not None:
            specific["updatedInput"] = self.updated_input
        return {"hookSpecificOutput": specific}


def on_error(choice: str, problem: str) -> Decision:
    tail = "asking here instead" if choice == "ask" else "denied (--on-error deny)"
    return Decision(choice, f"approvalbot could not check this call: {problem}; {tail}", None,
                    problem)  # fmt: skip


def settings_snippet(command: str = COMMAND, timeout: int = HOOK_TIMEOUT) -> dict[str, Any]:
    """What to paste into `.claude/settings.json` (or `~/.claude/settings.json`)."""
    hook = {"type": "command", "command": command, "timeout": timeout}
    return {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [hook]}]}}


# --------------------------------------------------------------------------------------------
# Reading the hook input
# --------------------------------------------------------------------------------------------
class Call:
    __slots__ = ("cwd", "session_id", "tool_input", "tool_name", "tool_use_id")

    def __init__(
        self,
        session_id: str,
        cwd: str,
        tool_name: str,
        tool_input: dict[str, Any],
        tool_use_id: str | None,
    ) -> None:
        self.session_id, self.cwd, self.tool_name = session_id, cwd, tool_name
        self.tool_input, self.tool_use_id = tool_input, tool_use_id


def parse_input(data: bytes) -> Call:
    """The hook JSON, or ValueError with a message a person can act on."""
    if not data.strip():
        raise ValueError("no hook JSON on stdin (Claude Code sends one PreToolUse object)")
    try:
        value = json.loads(data)
    except ValueError as error:
        raise ValueError(f"stdin is not JSON ({error})") from None
    if not isinstance(value, dict):
        raise ValueError("the hook JSON is not an object")
    tool_name = value.get("tool_name")
    if not isinstance(tool_name, str) or not tool_name:
        raise ValueError("the hook JSON has no tool_name (is this a PreToolUse hook?)")
    tool_input = value.get("tool_input")
    if tool_input is None:
        tool_input = {}
    if not isinstance(tool_input, dict):
        raise ValueError("the hook JSON's tool_input is not an object")
    session = value.get("session_id")
    use_id = value.get("tool_use_id")
    cwd = value.get("cwd")
    return Call(
        session_id=session if isinstance(session, str) and session else "no-session",
        cwd=cwd if isinstance(cwd, str) else "",
        tool_name=tool_name,
        tool_input=tool_input,
        tool_use_id=use_id if isinstance(use_id, str) and use_id else None,
    )


# --------------------------------------------------------------------------------------------
# Effect profiles: what the approver reads
# --------------------------------------------------------------------------------------------
_EDITS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
_READS = ("Read", "NotebookRead")


def _text(value: Any, limit: int = 1000) -> str:
    text = value.strip() if isinstance(value, str) else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def effect_profile(tool_name: str, tool_input: dict[str, Any], cwd: str) -> dict[str, Any]:
    """Summary, effects and targets (SPEC 3.3) of one Claude Code tool call; `cwd` is always a
    target. File edits need no diff here: the page renders `old_string`/`new_string`/`content`
    of the input as a diff."""
    path = _text(tool_input.get("file_path") or tool_input.get("notebook_path") or "", 500)
    profile: dict[str, Any]
    if tool_name == "Bash":
        command = _text(tool_input.get("command"))
        profile = {"summary": command or "Bash", "effects": ["executes"], "targets": []}
    elif tool_name in _EDITS:
        profile = {"summary": f"Edit {path}".strip(), "effects": ["writes"], "targets": [path]}
    elif tool_name in _READS:
        profile = {"summary": f"Read {path}".strip(), "effects": ["reads"], "targets": [path]}
    elif tool_name in ("Glob", "Grep", "LS"):
        where = _text(tool_input.get("path"), 500)
        pattern = _text(tool_input.get("pattern"), 200)
        summary = " ".join(p for p in (tool_name, pattern, f"in {where}" if where else "") if p)
        profile = {"summary": summary, "effects": ["reads"], "targets": [where]}
    elif tool_name == "WebFetch":
        url = _text(tool_input.get("url"), 2000)
        profile = {"summary": f"Fetch {url}".strip(), "effects": ["network"], "targets": [url]}
    elif tool_name == "WebSearch":
        query = _text(tool_input.get("query"), 300)
        profile = {"summary": f"Search the web: {query}", "effects": ["network"], "targets": []}
    elif tool_name == "Task":
        what = _text(tool_input.get("description"), 300)
        profile = {"summary": f"Start a subagent: {what}".rstrip(": "), "targets": []}
    else:
        profile = {k: v for k, v in derive(tool_name, tool_input).items() if k != "derived"}
        if tool_name.startswith("mcp__"):
            server, _, tool = tool_name[5:].partition("__")
            if profile.get("summary") == f"{tool_name} call":
                profile["summary"] = f"MCP {server}: {tool or tool_name}"
        profile["targets"] = list(profile.get("targets") or [])
    targets = [t for t in [*profile["targets"], cwd] if t]
    profile["targets"] = list(dict.fromkeys(targets))
    if not profile["targets"]:
        del profile["targets"]
    return profile


def _home_relative(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def run_title(call: Call) -> str:
    parts = ["Claude Code", call.session_id[:8]]
    if call.cwd:
        parts.append(_home_relative(call.cwd))
    return " · ".join(parts)[:500]


# --------------------------------------------------------------------------------------------
# Talking to the service
# --------------------------------------------------------------------------------------------
class Service:
    def __init__(self, options: Options, endpoint: Endpoint) -> None:
        self.options = options
        self.endpoint = endpoint
        self.base = f"/v1/workspaces/{segment(options.workspace)}"

    def send(self, method: str, tail: str, body: Any = None, timeout: float = 30.0) -> Reply:
        try:
            reply = self.endpoint.request(method, self.base + tail, body, timeout)
        except Unreachable as error:
            raise ServiceError(f"cannot reach {self.endpoint.url}: {error}") from None
        if reply.status == 401:
            raise ServiceError("the token was refused (401 unauthorized): check APPROVALBOT_TOKEN")
        if reply.status == 403:
            code, detail = reply.error
            raise ServiceError(f"the token may not do this (403 {code}): {detail}")
        if reply.status >= 500:
            code, detail = reply.error
            raise ServiceError(f"the service failed ({reply.status} {code}): {detail}".rstrip(": "))
        return reply

    def declare(self, call: Call) -> str:
        body = {"profile": self.options.profile, "title": run_title(call)}
        reply = self.send("POST", "/runs", body)
        if reply.status == 404:
            raise ServiceError(f"no workspace {self.options.workspace!r} for this token (404)")
        if reply.status != 201 or not isinstance(reply.body, dict) or "id" not in reply.body:
            code, detail = reply.error
            raise ServiceError(f"declaring a run was refused ({reply.status} {code}): {detail}")
        return str(reply.body["id"])

    def append(self, run_id: str, body: dict[str, Any]) -> Reply:
        return self.send("POST", f"/runs/{segment(run_id)}/tasks", body)

    def wait(self, run_id: str, key: str, seconds: float) -> dict[str, Any]:
        tail = f"/runs/{segment(run_id)}/tasks/{segment(key)}?wait={seconds:.3f}"
        reply = self.send("GET", tail, timeout=seconds + 30.0)
        if reply.status != 200 or not isinstance(reply.body, dict):
            code, detail = reply.error
            raise ServiceError(f"reading task {key} failed ({reply.status} {code}): {detail}")
        return reply.body

    def try_send(self, method: str, tail: str, body: Any, timeout: float) -> Reply | None:
        """`send` for a best effort: None instead of any error."""
        try:
            return self.send(method, tail, body, timeout)
        except ServiceError:
            return None


class Session:
    """The run of one Claude session: looked up, declared once, re-declared if forgotten."""

    def __init__(self, service: Service, runs: SessionRuns, call: Call) -> None:
        self.service = service
        self.runs = runs
        self.call = call
        self.run_id: str | None = None

    def _record(self) -> dict[str, Any]:
        return {
            "url": self.service.endpoint.url,
            "workspace": self.service.options.workspace,
            "profile": self.service.options.profile,
            "cwd": self.call.cwd,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def run(self, stale: str | None = None) -> str:
        if stale is None and self.run_id is None:
            self.run_id = self.runs.lookup(self.call.session_id)
        if self.run_id is None or stale is not None:
            self.run_id = self.runs.obtain(
                self.call.session_id, lambda: self.service.declare(self.call), self._record(),
                stale=stale,
            )  # fmt: skip
        return self.run_id

    def append(self, body: dict[str, Any]) -> dict[str, Any]:
        """The receipt; a run the service no longer knows (404) is replaced once."""
        run_id = self.run()
        reply = self.service.append(run_id, body)
        if reply.status == 404:
            run_id = self.run(stale=run_id)
            reply = self.service.append(run_id, body)
        if reply.status in (200, 201) and isinstance(reply.body, dict):
            return reply.body
        code, detail = reply.error
        if reply.status == 409 and code == "run_not_running":
            raise Refused(f"this session's run {run_id} is not running ({detail})")
        raise ServiceError(f"the call was refused ({reply.status} {code}): {detail}".rstrip(": "))


# --------------------------------------------------------------------------------------------
# Deciding
# --------------------------------------------------------------------------------------------
def _who(task: dict[str, Any]) -> str:
    who, via = task.get("resolved_by"), task.get("via")
    if who:
        return f"{who} via {via}" if via else str(who)
    return ""


def _timeout(options: Options, why: str) -> Decision:
    if options.on_timeout == "deny":
        return Decision("deny", f"approvalbot: {why}; denied (--on-timeout deny)")
    return Decision("ask", f"approvalbot: {why}; asking here instead")


class Clock:
    def __init__(self, seconds: float, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.deadline = now() + seconds

    def left(self) -> float:
        return self.deadline - self.now()


def settle(service: Service, task: dict[str, Any], clock: Clock) -> dict[str, Any] | None:
    """Long-poll a parked task until it leaves its parked state; None when time runs out."""
    run_id, key = str(task["run_id"]), str(task["key"])
    while task.get("state") in PARKED:
        left = clock.left()
        if left <= 0:
            return None
        task = service.wait(run_id, key, min(POLL, left))
    return task


def withdraw(service: Service, tasks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Nobody decided in time: withdraw each task (best effort, WITHDRAW_BUDGET seconds in all,
    errors ignored). A withdrawal that lost to a person's decision (`409 already_decided`) is
    read back: the first such task that has ended is returned, so its decision is the one
    given; None otherwise."""
    clock = Clock(WITHDRAW_BUDGET)
    lost: list[str] = []
    for task in tasks:
        left = clock.left()
        if left <= 0:
            break
        path = f"/runs/{segment(str(task['run_id']))}/tasks/{segment(str(task['key']))}"
        reply = service.try_send("POST", path + "/withdraw", {"reason": WITHDRAW_REASON}, left)
        if reply is not None and reply.status == 409 and reply.error[0] == "already_decided":
            lost.append(path)
    for path in lost:
        left = clock.left()
        if left <= 0:
            break
        reply = service.try_send("GET", path, None, left)
        if reply is not None and reply.status == 200 and isinstance(reply.body, dict):
            if reply.body.get("state") not in PARKED:
                return reply.body
    return None


def _ended(task: dict[str, Any], options: Options, what: str) -> Decision:
    """A call or question that did not end well: refused, declined, expired, cancelled."""
    state = task.get("state")
    found = task.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    code, detail = str(error.get("code") or ""), str(error.get("detail") or "").strip()
    who = _who(task)
    if state == "timed_out":
        return _timeout(options, f"nobody decided in time ({detail or code or 'expired'})")
    if state == "cancelled" and code == "withdrawn":
        return Decision("deny", f"approvalbot: {what or 'the call'} was withdrawn ({detail})")
    if state == "cancelled":
        return Decision("deny", f"approvalbot: the run was stopped ({detail or code})")
    if state == "failed" and code == "declined":
        name, via = task.get("resolved_by") or "the person", task.get("via")
        tail = f" (via {via})" if via else ""
        return Decision("deny", f"approvalbot: {name} declined to answer {what}{tail}".strip())
    if state == "failed" and code == "approval_denied" and task.get("resolved_by"):
        return Decision("deny", f"approvalbot: denied by {who}: {detail or 'no reason given'}")
    if state == "failed" and code == "approval_denied":
        return Decision("deny", f"approvalbot: denied by the approval rules: {detail}")
    if state == "failed":
        return Decision("deny", f"approvalbot: refused ({code}): {detail}".rstrip(": "))
    raise ServiceError(f"unexpected task state {state!r}")


def decide_call(session: Session, call: Call, options: Options, clock: Clock) -> Decision:
    body: dict[str, Any] = {
        "tool_name": call.tool_name,
        "tool_input": call.tool_input,
        "origin": "model",
        "effect_profile": effect_profile(call.tool_name, call.tool_input, call.cwd),
    }
    if call.tool_use_id:
        body["key"] = call.tool_use_id
    receipt = session.append(body)
    try:
        task = settle(session.service, receipt, clock)
    except (ServiceError, Refused):
        # The service failed mid-wait: the call goes to --on-error (Claude's own prompt by
        # default), so it is withdrawn too, unless a person decided meanwhile.
        task = withdraw(session.service, [receipt])
        if task is None:
            raise
    if task is None:
        task = withdraw(session.service, [receipt])
    if task is None:
        return _timeout(options, f"nobody decided within {options.wait:g} s")
    if task.get("state") == "granted":
        who = _who(task)
        edited = task.get("approved_input")
        if edited is not None:
            # The person approved a changed call: Claude runs that one (`updatedInput`).
            if not isinstance(edited, dict):
                return Decision("deny", f"approvalbot: {who} approved an input that is not an "
                                "object, which no Claude Code tool takes")  # fmt: skip
            return Decision("allow", f"approvalbot: approved by {who}, edited", edited)
        if task.get("resolved_by"):
            return Decision("allow", f"approvalbot: approved by {who}")
        return Decision("allow", "approvalbot: allowed by the run's approval rules")
    return _ended(task, options, "")


def _questions(tool_input: dict[str, Any]) -> list[tuple[str, list[str], bool]] | None:
    found = tool_input.get("questions")
    if not isinstance(found, list) or not found:
        return None
    out = []
    for item in found:
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            return None
        labels = []
        for option in item.get("options") or []:
            label = option.get("label") if isinstance(option, dict) else option
            if isinstance(label, str) and label and label not in labels:
                labels.append(label)
        out.append((item["question"], labels, bool(item.get("multiSelect"))))
    return out


def _answer_text(content: Any) -> str:
    if isinstance(content, list):
        return ", ".join(str(c) for c in content)
    if isinstance(content, str):
        return content
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def decide_questions(
    session: Session,
    call: Call,
    questions: list[tuple[str, list[str], bool]],
    options: Options,
    clock: Clock,
) -> Decision:
    """AskUserQuestion: every question is put to people at once, then the answers collected."""
    base = call.tool_use_id or f"ask-{time.time_ns():x}"
    receipts = []
    for index, (prompt, labels, multi) in enumerate(questions, 1):
        tool_input: dict[str, Any] = {"prompt": prompt, "multi": multi}
        if labels:
            tool_input["options"] = labels
        body = {"key": f"{base}-q{index}", "tool_name": "ask", "tool_input": tool_input,
                "origin": "model"}  # fmt: skip
        receipts.append(session.append(body))
    answers: dict[str, str] = {}
    people: list[str] = []
    for index, ((prompt, _labels, _multi), receipt) in enumerate(
        zip(questions, receipts, strict=True)
    ):
        # The answers so far are no use without this one: when it is not answered (in time,
        # at all, or the service fails), every question still open goes.
        later = [r for r in receipts[index + 1 :] if r.get("state") in PARKED]
        try:
            task = settle(session.service, receipt, clock)
        except (ServiceError, Refused):
            withdraw(session.service, [receipt, *later])
            raise
        if task is None:
            withdraw(session.service, [receipt, *later])
            return _timeout(options, f"nobody answered within {options.wait:g} s")
        if task.get("state") != "resolved":
            withdraw(session.service, later)
            return _ended(task, options, f"the question {prompt!r}")
        resolution = task.get("resolution")
        content = resolution.get("content") if isinstance(resolution, dict) else None
        answers[prompt] = _answer_text(content)
        who = _who(task)
        if who and who not in people:
            people.append(who)
    previous = call.tool_input.get("answers")
    merged = {**(previous if isinstance(previous, dict) else {}), **answers}
    reason = "approvalbot: answered by " + (", ".join(people) or "a person")
    return Decision("allow", reason, {**call.tool_input, "answers": merged})


def decide(call: Call, options: Options, runs: SessionRuns | None = None) -> Decision:
    """The decision for one hook call. ServiceError/Refused are turned into decisions here;
    anything else unexpected is the caller's to catch."""
    if not options.url:
        return on_error(options.on_error, "APPROVALBOT_URL is not set")
    if not options.token:
        return on_error(options.on_error, "APPROVALBOT_TOKEN is not set (an application token)")
    try:
        endpoint = Endpoint(options.url, options.token)
    except ValueError as error:
        return on_error(options.on_error, f"APPROVALBOT_URL: {error}")
    service = Service(options, endpoint)
    if runs is None:
        runs = SessionRuns(endpoint_dir(state_root(), endpoint.url, options.workspace))
    session = Session(service, runs, call)
    clock = Clock(options.wait)
    try:
        if call.tool_name == "AskUserQuestion":
            questions = _questions(call.tool_input)
            if questions is not None:
                return decide_questions(session, call, questions, options, clock)
        return decide_call(session, call, options, clock)
    except Refused as refused:
        return Decision("deny", f"approvalbot: {refused}")
    except ServiceError as error:
        return on_error(options.on_error, str(error))


def run_hook(data: bytes, options: Options) -> Decision:
    """stdin bytes -> the decision; never raises."""
    try:
        call = parse_input(data)
    except ValueError as error:
        return on_error(options.on_error, str(error))
    try:
        return decide(call, options)
    except OSError as error:  # the state directory, mostly
        return on_error(options.on_error, f"{type(error).__name__}: {error}")
    except Exception as error:
        return on_error(options.on_error, f"internal error ({type(error).__name__}: {error})")
