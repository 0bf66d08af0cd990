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
reads. One approvalbot run per agent run, its resumes included (they share the run's context),
also a `RunState` serialized (`to_json`/`to_string`) and restored in another process: the run's
approvalbot run id rides in the state itself (see `_carry`), so the restored run asks about its
parked calls in the run they were parked in, and a decision made meanwhile is found.

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
from agents.run_context import _ApprovalRecord
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
# The entry of the run's approvals ledger that carries its approvalbot run: the ledger is the one
# part of a `RunState` that is always serialized (whatever the run's context, tracing on or off)
# and restored as it was. No function tool can be named so (a colon), so the SDK never reads it.
_CARRIER = "approvalbot:run"


async def needs_approval(
    _context: RunContextWrapper[Any], _params: dict[str, Any], _call_id: str
) -> bool:
    """`function_tool(fn, needs_approval=needs_approval)`: every call of the tool is decided by
    approvalbot in `resolve_interruptions` (the rules grant or refuse without a person)."""
    return True


def session_of(context: RunContextWrapper[Any]) -> Hashable:
    """One key per agent run. The SDK gives a run no id, so the key rides on the run's context
    wrapper (`to_state` copies it into each resume) and on its `usage` object, the one thing a
    `ToolContext` shares with the run's wrapper (so `ask_human` finds the run's key). A wrapper
    restored from a serialized state has neither: its key is then the approvalbot run it carries."""
    found = getattr(context, _SESSION, None)
    if not isinstance(found, str):
        found = _by_usage.get(id(context.usage))
    if found is None:
        carried = carried_run(context)
        found = f"run:{carried[1]}" if carried else secrets.token_hex(8)
    if not isinstance(context, ToolContext):
        setattr(context, _SESSION, found)
    _remember(context, found)
    return ("openai-agents", found)


def carried_run(context: RunContextWrapper[Any]) -> tuple[str, str] | None:
    """(workspace, run id) of the approvalbot run the wrapper's ledger carries, if any."""
    ledger = getattr(context, "_approvals", None)
    record = ledger.get(_CARRIER) if isinstance(ledger, dict) else None
    carried = getattr(record, "rejection_messages", None)
    if not isinstance(carried, dict):
        return None
    workspace, run_id = carried.get("workspace"), carried.get("run")
    if isinstance(workspace, str) and isinstance(run_id, str) and run_id:
        return workspace, run_id
    return None


def _carry(context: RunContextWrapper[Any] | None, workspace: str, run_id: str | None) -> None:
    """Write the run's approvalbot run into its approvals ledger (shared with its tool contexts
    and copied into every state made from it): an entry with no call approved or rejected."""
    ledger = getattr(context, "_approvals", None)
    if run_id is None or not isinstance(ledger, dict):
        return
    ledger[_CARRIER] = _ApprovalRecord(
        approved=[], rejected=[], rejection_messages={"workspace": workspace, "run": run_id}
    )


async def _session(gate: Gate, context: RunContextWrapper[Any], title: str | None) -> Hashable:
    """The run's session on `gate`, continuing the approvalbot run its state carries (one a
    serialized state brought from another process), declared now if it has none and carried."""
    session = session_of(context)
    carried = carried_run(context)
    if carried is not None and carried[0] == gate.target.workspace:
        gate.adopt(session, carried[1])
    # Declared and carried before anything waits for a person: a state saved while a call is
    # parked (the process going down) brings the run along.
    _carry(context, gate.target.workspace, await gate.run_of(session, title))
    return session


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
    result: RunResult | RunResultStreaming | RunState[Any],
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
) -> RunState[Any]:
    """Decide every pending `ToolApprovalItem` of `result` through approvalbot and return the
    `RunState` to pass back to `Runner.run`. `result` may also be a `RunState` (one restored
    with `RunState.from_string`): it is decided in place and returned."""
    gate = _gate(url, token, workspace, profile, wait)
    if isinstance(result, RunState):
        state, interruptions = result, result.get_interruptions()
        context = state._context
        if context is None:
            return state
    else:
        interruptions, context = result.interruptions, result.context_wrapper
    items = [item for item in interruptions if isinstance(item, ToolApprovalItem)]
    title = _title(items[0]) if items else None
    session = await _session(gate, context, title)
    if not isinstance(result, RunState):
        state = result.to_state()
        if state._context is not None:  # the wrapper the resumed run goes on with
            session_of(state._context)
    for item in items:
        tool = item.tool_name or item.name or "tool"
        outcome = await gate.decide(
            session, tool, _arguments(item), call_id=item.call_id, title=_title(item)
        )
        decide_item(state, item, outcome)
    # A run the service no longer knew was replaced while deciding: the state carries the new one.
    _carry(state._context, gate.target.workspace, gate.run_id(session))
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
        session = await _session(gate, ctx, title)
        answer = await gate.ask(session, prompt, options, multi, call_id=call_id, title=title)
        return answer.text

    return function_tool(
        ask_human, name_override="ask_human", description_override=ASK_HUMAN_DESCRIPTION
    )


ask_human: FunctionTool = make_ask_human()
