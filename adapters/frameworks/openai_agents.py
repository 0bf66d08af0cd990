"""The OpenAI Agents SDK bridge: `needs_approval` gates a function tool, `resolve_interruptions`
decides every pending approval through approvalbot, `ask_human` is a function tool.

    deploy_tool = function_tool(deploy, needs_approval=needs_approval)
    result = await Runner.run(agent, "ship it")
    while result.interruptions:
        result = await Runner.run(agent, await resolve_interruptions(result))

The SDK hands `needs_approval` the arguments and the call id but not the tool's name, so it
cannot ask the run's rules itself: it routes every call of the tool to an interruption, and
`resolve_interruptions` (which has each `ToolApprovalItem`'s name) puts it through approvalbot.
A call the rules grant or refuse is decided at once (the run resumes without a person); a parked
one waits for a person. A refusal is `RunState.reject` with the detail as the message the model
reads. One approvalbot run per agent run, its resumes included (they share the run's context).

The SDK cannot change an approved call's arguments, so when a person approves an edited input
the call is rejected with a message giving the model that input to call the tool with.
"""

from __future__ import annotations

import json
import secrets
import weakref
from collections.abc import Hashable
from typing import Any

from agents import FunctionTool, RunContextWrapper, RunState, function_tool
from agents.items import ToolApprovalItem
from agents.result import RunResult, RunResultStreaming
from agents.tool_context import ToolContext

from adapters.frameworks.gate import Gate, Outcome, find_target, gate_for

TITLE = "OpenAI Agents"
ASK_HUMAN_DESCRIPTION = (
    "Ask a person a question and wait for the answer. Use it when you need information or a "
    "choice only a person can give, not for things you can find out yourself. Give `options` "
    'to offer choices; with `multi` true the person may pick several, returned joined by ", ".'
)

_SESSION = "_approvalbot_session"  # the attribute on a run's context wrapper
_by_usage: dict[int, str] = {}  # id of a live run's Usage -> its session


async def needs_approval(
    _context: RunContextWrapper[Any], _params: dict[str, Any], _call_id: str
) -> bool:
    """`function_tool(fn, needs_approval=needs_approval)`: every call of the tool is decided by
    approvalbot in `resolve_interruptions` (the rules grant or refuse without a person)."""
    return True


def session_of(context: RunContextWrapper[Any]) -> Hashable:
    """One key per agent run. The SDK gives a run no id, so the key rides on the run's context
    wrapper (`to_state` copies it into each resume) and on its `usage` object, the one thing a
    `ToolContext` shares with the run's wrapper (so `ask_human` finds the run's key)."""
    found = getattr(context, _SESSION, None)
    if not isinstance(found, str):
        found = _by_usage.get(id(context.usage))
    if found is None:
        found = secrets.token_hex(8)
    if not isinstance(context, ToolContext):
        setattr(context, _SESSION, found)
    _remember(context, found)
    return ("openai-agents", found)


def _remember(context: RunContextWrapper[Any], session: str) -> None:
    key = id(context.usage)
    if key not in _by_usage:
        _by_usage[key] = session
        weakref.finalize(context.usage, _by_usage.pop, key, None)


def _gate(
    url: str | None,
    token: str | None,
    workspace: str | None,
    profile: str | None,
    wait: float | None,
) -> Gate:
    target = find_target(url=url, token=token, workspace=workspace, profile=profile, wait=wait)
    return gate_for(target, TITLE)


def _arguments(item: ToolApprovalItem) -> Any:
    try:
        parsed = json.loads(item.arguments or "{}")
    except ValueError:
        return {"arguments": item.arguments}
    return parsed


def _title(item: ToolApprovalItem) -> str:
    name = getattr(item.agent, "name", "")
    return f"{TITLE} · {name}" if name else TITLE


def decide_item(state: RunState[Any], item: ToolApprovalItem, outcome: Outcome) -> None:
    """Approve or reject one pending call on the state, as approvalbot decided it."""
    if outcome.allowed and not outcome.edited:
        state.approve(item)
        return
    if outcome.allowed:
        edited = json.dumps(outcome.tool_input, ensure_ascii=False, sort_keys=True)
        message = (
            f"{item.tool_name} was not run as asked: {outcome.message}. Call {item.tool_name} "
            f"again with exactly these arguments: {edited}"
        )
        state.reject(item, rejection_message=message)
        return
    state.reject(item, rejection_message=outcome.message)


async def resolve_interruptions(
    result: RunResult | RunResultStreaming,
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
) -> RunState[Any]:
    """Decide every pending `ToolApprovalItem` of `result` through approvalbot and return the
    `RunState` to pass back to `Runner.run`."""
    gate = _gate(url, token, workspace, profile, wait)
    session = session_of(result.context_wrapper)
    state = result.to_state()
    if state._context is not None:  # the wrapper the resumed run goes on with
        session_of(state._context)
    for item in result.interruptions:
        if not isinstance(item, ToolApprovalItem):
            continue
        tool = item.tool_name or item.name or "tool"
        outcome = await gate.decide(
            session, tool, _arguments(item), call_id=item.call_id, title=_title(item)
        )
        decide_item(state, item, outcome)
    return state


def make_ask_human(
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
) -> FunctionTool:
    """An `ask_human` function tool for a service other than the environment's (pass the same
    keywords as to `resolve_interruptions`, and questions share the run's approvalbot run)."""

    async def ask_human(
        ctx: RunContextWrapper[Any],
        prompt: str,
        options: list[str] | None = None,
        multi: bool = False,
    ) -> str:
        """Ask a person a question and wait for the answer.

        Args:
            prompt: The question, as the person will read it.
            options: Choices to offer; without them the person answers freely.
            multi: With options, whether the person may pick several.
        """
        gate = _gate(url, token, workspace, profile, wait)
        call_id = ctx.tool_call_id if isinstance(ctx, ToolContext) else None
        name = getattr(getattr(ctx, "agent", None), "name", "")
        title = f"{TITLE} · {name}" if name else TITLE
        answer = await gate.ask(
            session_of(ctx), prompt, options, multi, call_id=call_id, title=title
        )
        return answer.text

    return function_tool(
        ask_human, name_override="ask_human", description_override=ASK_HUMAN_DESCRIPTION
    )


ask_human: FunctionTool = make_ask_human()
