"""The LangChain 1.x / LangGraph bridge: `ApprovalMiddleware` puts each tool call of an agent
made with `create_agent` through approvalbot before the tool runs, and `ask_human` is a tool
that asks a person.

    agent = create_agent(model, tools, middleware=[ApprovalMiddleware()])

One approvalbot run per `thread_id` (`config={"configurable": {"thread_id": …}}`; without one,
one run for the middleware). A call granted by the run's rules runs at once; one the rules
refuse comes back at once as the tool's `ToolMessage` (status "error") with the rule's reason;
a parked call waits for a person, then runs (with the person's edited input, if they edited
it) or comes back as a `ToolMessage` carrying their reason. The service unreachable or a bad
token: the tool does not run and the `ToolMessage` says why. Both `invoke` and `ainvoke`.

For graphs that checkpoint and pause with LangChain's own `HumanInTheLoopMiddleware`,
`resolve_hitl(result["__interrupt__"], config)` decides the pending interrupts through
approvalbot and returns the `Command` to resume with (approve, edit, or reject with the detail).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ToolCallRequest
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command, Interrupt

from adapters.frameworks.gate import Answer, Gate, Outcome, find_target, gate_for

TITLE = "LangChain"
ASK_HUMAN = "ask_human"
ASK_HUMAN_DESCRIPTION = (
    "Ask a person a question and wait for the answer. Use it when you need information or a "
    "choice only a person can give, not for things you can find out yourself. Give `options` "
    'to offer choices; with `multi` true the person may pick several, returned joined by ", ".'
)

ToolResult = ToolMessage | Command[Any]


def thread_of(runtime: Any) -> Hashable:
    """The LangGraph `thread_id` of the call (None without one: one run for them all)."""
    config = getattr(runtime, "config", None) or {}
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


def run_title(thread: Hashable) -> str:
    return TITLE if thread is None else f"{TITLE} · thread {thread}"


def _env_gate() -> Gate:
    return gate_for(find_target(), TITLE)


def ask_human_sync(
    prompt: str, runtime: ToolRuntime, options: list[str] | None = None, multi: bool = False
) -> str:
    """Ask a person; used without the middleware, the tool finds the service in the
    environment (`APPROVALBOT_URL`, `APPROVALBOT_TOKEN`, `APPROVALBOT_WORKSPACE`)."""
    thread = thread_of(runtime)
    answer = _env_gate().ask_sync(
        thread, prompt, options, multi, call_id=runtime.tool_call_id, title=run_title(thread)
    )
    return answer.text


async def ask_human_async(
    prompt: str, runtime: ToolRuntime, options: list[str] | None = None, multi: bool = False
) -> str:
    thread = thread_of(runtime)
    answer = await _env_gate().ask(
        thread, prompt, options, multi, call_id=runtime.tool_call_id, title=run_title(thread)
    )
    return answer.text


ask_human: BaseTool = StructuredTool.from_function(
    func=ask_human_sync,
    coroutine=ask_human_async,
    name=ASK_HUMAN,
    description=ASK_HUMAN_DESCRIPTION,
)


class ApprovalMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Every tool call (or those named in `tools_gated`) through approvalbot first; adds
    `ask_human` to the agent's tools and answers it through the same run."""

    def __init__(
        self,
        *,
        url: str | None = None,
        token: str | None = None,
        workspace: str | None = None,
        profile: str | None = None,
        wait: float | None = None,
        tools_gated: Iterable[str] | None = None,
    ) -> None:
        super().__init__()
        target = find_target(url=url, token=token, workspace=workspace, profile=profile, wait=wait)
        self.gate = gate_for(target, TITLE)
        self.gated = None if tools_gated is None else frozenset(tools_gated)
        self.tools = [ask_human]

    def run_id(self, thread_id: str | None = None) -> str | None:
        """The approvalbot run of a thread, once its first call declared it."""
        return self.gate.run_id(thread_id)

    def _gates(self, name: str) -> bool:
        return self.gated is None or name in self.gated

    # the sync path (`invoke`, `stream`) -------------------------------------------------------
    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        call = request.tool_call
        thread = thread_of(request.runtime)
        if call["name"] == ASK_HUMAN:
            prompt, options, multi = question_args(call["args"])
            answer = self.gate.ask_sync(
                thread, prompt, options, multi, call_id=call.get("id"), title=run_title(thread)
            )
            return answer_message(request, answer)
        if not self._gates(call["name"]):
            return handler(request)
        outcome = self.gate.decide_sync(
            thread, call["name"], call["args"], call_id=call.get("id"), title=run_title(thread)
        )
        return handler(granted(request, outcome)) if outcome.allowed else refused(request, outcome)

    # the async path (`ainvoke`, `astream`) ----------------------------------------------------
    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        call = request.tool_call
        thread = thread_of(request.runtime)
        if call["name"] == ASK_HUMAN:
            prompt, options, multi = question_args(call["args"])
            answer = await self.gate.ask(
                thread, prompt, options, multi, call_id=call.get("id"), title=run_title(thread)
            )
            return answer_message(request, answer)
        if not self._gates(call["name"]):
            return await handler(request)
        outcome = await self.gate.decide(
            thread, call["name"], call["args"], call_id=call.get("id"), title=run_title(thread)
        )
        if not outcome.allowed:
            return refused(request, outcome)
        return await handler(granted(request, outcome))


def question_args(args: dict[str, Any]) -> tuple[str, list[str] | None, bool]:
    options = args.get("options")
    return (
        str(args.get("prompt", "")),
        [str(o) for o in options] if isinstance(options, list) else None,
        bool(args.get("multi", False)),
    )


def granted(request: ToolCallRequest, outcome: Outcome) -> ToolCallRequest:
    """The request to run: with the person's edited input when they edited it."""
    if not outcome.edited or not isinstance(outcome.tool_input, dict):
        return request
    return request.override(tool_call={**request.tool_call, "args": outcome.tool_input})


def refused(request: ToolCallRequest, outcome: Outcome) -> ToolMessage:
    """The tool's result when it did not run: the model reads why."""
    call = request.tool_call
    return ToolMessage(
        content=outcome.message, name=call["name"], tool_call_id=call.get("id"), status="error"
    )


def answer_message(request: ToolCallRequest, answer: Answer) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(
        content=answer.text,
        name=call["name"],
        tool_call_id=call.get("id"),
        status="success" if answer.ok else "error",
    )


# LangChain's HumanInTheLoopMiddleware, decided by approvalbot ----------------------------------
HitlCall = tuple[str, str, dict[str, Any], str, list[str]]  # interrupt id, name, args, key, allowed


def hitl_calls(interrupts: Sequence[Interrupt]) -> list[HitlCall]:
    """The tool calls the pending interrupts ask about: one `HITLRequest` (batched mode) asks
    about several, a `ToolApprovalRequest` (per-call mode) about one."""
    calls: list[HitlCall] = []
    for pending in interrupts:
        value = pending.value
        if not isinstance(value, dict):
            continue
        if value.get("type") == "tool_approval":
            key = str(value.get("tool_call_id") or pending.id)
            calls.append((pending.id, value["name"], value["args"], key, ["approve", "reject"]))
            continue
        reviews = value.get("review_configs") or []
        for index, action in enumerate(value.get("action_requests") or []):
            allowed = reviews[index].get("allowed_decisions", []) if index < len(reviews) else []
            key = f"{pending.id}-{index}"
            calls.append((pending.id, action["name"], action["args"], key, list(allowed)))
    return calls


def hitl_decision(name: str, outcome: Outcome, allowed: list[str]) -> dict[str, Any]:
    """approvalbot's ending as the middleware's decision type."""
    if outcome.allowed and not outcome.edited:
        return {"type": "approve"}
    if outcome.allowed and "edit" in allowed:
        return {"type": "edit", "edited_action": {"name": name, "args": outcome.tool_input}}
    if outcome.allowed:  # edited, but this tool takes no edits: tell the model the approved input
        edited = json.dumps(outcome.tool_input, ensure_ascii=False, sort_keys=True, default=str)
        return hitl_refusal(
            f"{name} was not run as asked: {outcome.message}. Call {name} again with exactly "
            f"these arguments: {edited}",
            allowed,
        )
    return hitl_refusal(outcome.message, allowed)


def hitl_refusal(message: str, allowed: list[str]) -> dict[str, Any]:
    """A call not to run, in a decision type the tool's config allows: `reject`, else `respond`
    (the model reads the message either way). A tool that allows neither cannot be refused:
    `reject` then, which the middleware refuses loudly rather than running the call."""
    if "reject" not in allowed and "respond" in allowed:
        return {"type": "respond", "message": message}
    return {"type": "reject", "message": message}


def hitl_resume(
    interrupts: Sequence[Interrupt], decided: list[tuple[HitlCall, dict[str, Any]]]
) -> Command[Any]:
    resume: dict[str, Any] = {}
    for (interrupt_id, *_rest), decision in decided:
        batched = any(
            p.id == interrupt_id and isinstance(p.value, dict) and "action_requests" in p.value
            for p in interrupts
        )
        if batched:
            resume.setdefault(interrupt_id, {"decisions": []})["decisions"].append(decision)
        else:
            resume[interrupt_id] = decision
    return Command(resume=resume)


def _hitl_gate(keywords: dict[str, Any]) -> Gate:
    return gate_for(find_target(**keywords), TITLE)


async def resolve_hitl(
    interrupts: Sequence[Interrupt],
    config: Any = None,
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
) -> Command[Any]:
    """Decide `HumanInTheLoopMiddleware`'s pending interrupts through approvalbot (the thread's
    run: `config` is the one the graph was invoked with) and return the `Command` to resume
    the graph with."""
    gate = _hitl_gate(dict(url=url, token=token, workspace=workspace, profile=profile, wait=wait))
    thread = thread_of(_Config(config))
    decided = []
    for call in hitl_calls(interrupts):
        _id, name, args, key, allowed = call
        outcome = await gate.decide(thread, name, args, call_id=key, title=run_title(thread))
        decided.append((call, hitl_decision(name, outcome, allowed)))
    return hitl_resume(interrupts, decided)


def resolve_hitl_sync(
    interrupts: Sequence[Interrupt],
    config: Any = None,
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
) -> Command[Any]:
    """`resolve_hitl` for the sync path (`invoke`): blocks until every call is decided."""
    gate = _hitl_gate(dict(url=url, token=token, workspace=workspace, profile=profile, wait=wait))
    thread = thread_of(_Config(config))
    decided = []
    for call in hitl_calls(interrupts):
        _id, name, args, key, allowed = call
        outcome = gate.decide_sync(thread, name, args, call_id=key, title=run_title(thread))
        decided.append((call, hitl_decision(name, outcome, allowed)))
    return hitl_resume(interrupts, decided)


class _Config:
    """A graph's config where `thread_of` looks for a runtime's."""

    def __init__(self, config: Any) -> None:
        self.config = config
