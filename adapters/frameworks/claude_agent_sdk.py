"""The Claude Agent SDK bridge: a `can_use_tool` callback that puts each tool call Claude makes
through approvalbot, and answers `AskUserQuestion` by asking people.

    options = ClaudeAgentOptions(can_use_tool=can_use_tool)             # the environment
    options = ClaudeAgentOptions(can_use_tool=can_use_tool(profile="careful"))  # keywords

`can_use_tool` has the SDK's `CanUseTool` signature; called with keywords only, it is a factory
returning such a callback of its own. Each callback is one approvalbot run (declared at its first
call), so give each session its own (`can_use_tool()` per `ClaudeAgentOptions`); the bare
`can_use_tool` is one run per process. The default profile is `claude-code` (built in: Claude's
tool names aliased to the names rules use, reads granted, the rest asks a person).

Granted -> `PermissionResultAllow` (with `updated_input` when the person edited the input);
refused, denied, expired, or the service unreachable / the token refused ->
`PermissionResultDeny(message=<why>, interrupt=False)`: Claude reads why and carries on.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable
from typing import Any, overload

from claude_agent_sdk import (
    CanUseTool,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from adapters.claude_code.hook import effect_profile
from adapters.frameworks.gate import Gate, find_target, gate_for

TITLE = "Claude Agent SDK"
DEFAULT_PROFILE = "claude-code"
ASK_USER_QUESTION = "AskUserQuestion"


def questions_of(tool_input: dict[str, Any]) -> list[tuple[str, list[str], bool]] | None:
    """AskUserQuestion's questions as (question, option labels, multiSelect); None if the input
    is not that shape (then it is gated like any other call)."""
    found = tool_input.get("questions")
    if not isinstance(found, list) or not found:
        return None
    out = []
    for item in found:
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            return None
        labels: list[str] = []
        for option in item.get("options") or []:
            label = option.get("label") if isinstance(option, dict) else option
            if isinstance(label, str) and label and label not in labels:
                labels.append(label)
        out.append((item["question"], labels, bool(item.get("multiSelect"))))
    return out


class ApprovalCallback:
    """A `CanUseTool` callback bound to one approvalbot run."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.session = ("claude-agent-sdk", secrets.token_hex(8))

    @property
    def run_id(self) -> str | None:
        return self.gate.run_id(self.session)

    async def __call__(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        if tool_name == ASK_USER_QUESTION:
            questions = questions_of(tool_input)
            if questions is not None:
                return await self._answer(tool_input, questions, context)
        outcome = await self.gate.decide(
            self.session,
            tool_name,
            tool_input,
            call_id=context.tool_use_id,
            effect_profile=effect_profile(tool_name, tool_input, ""),
        )
        if not outcome.allowed:
            return PermissionResultDeny(message=outcome.message, interrupt=False)
        if outcome.edited and isinstance(outcome.tool_input, dict):
            return PermissionResultAllow(updated_input=outcome.tool_input)
        return PermissionResultAllow()

    async def _answer(
        self,
        tool_input: dict[str, Any],
        questions: list[tuple[str, list[str], bool]],
        context: ToolPermissionContext,
    ) -> PermissionResult:
        """Each question to people in turn; the answers go back as the input plus `answers`
        (`{"<question>": "<label>"}`, a multi-select's labels joined by ", ")."""
        answers: dict[str, str] = {}
        base = context.tool_use_id
        for index, (prompt, labels, multi) in enumerate(questions, 1):
            call_id = f"{base}-q{index}" if base else None
            answer = await self.gate.ask(
                self.session, prompt, labels or None, multi, call_id=call_id
            )
            if not answer.ok:
                return PermissionResultDeny(message=answer.text, interrupt=False)
            answers[prompt] = answer.text
        previous = tool_input.get("answers")
        merged = {**(previous if isinstance(previous, dict) else {}), **answers}
        return PermissionResultAllow(updated_input={**tool_input, "answers": merged})


def make_can_use_tool(
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
) -> ApprovalCallback:
    target = find_target(
        url=url,
        token=token,
        workspace=workspace,
        profile=profile,
        wait=wait,
        default_profile=DEFAULT_PROFILE,
    )
    return ApprovalCallback(gate_for(target, TITLE))


_default: ApprovalCallback | None = None


@overload
def can_use_tool(
    tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext, /
) -> Awaitable[PermissionResult]: ...
@overload
def can_use_tool(
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
) -> CanUseTool: ...
def can_use_tool(
    tool_name: str | None = None,
    tool_input: dict[str, Any] | None = None,
    context: ToolPermissionContext | None = None,
    /,
    *,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    profile: str | None = None,
    wait: float | None = None,
) -> Awaitable[PermissionResult] | CanUseTool:
    """The SDK's `CanUseTool` (service from the environment, one run per process), or, called
    with keywords only, a factory returning a callback with a run of its own."""
    if tool_name is None:
        return make_can_use_tool(
            url=url, token=token, workspace=workspace, profile=profile, wait=wait
        )
    global _default
    if _default is None:
        _default = make_can_use_tool()
    return _default(tool_name, tool_input or {}, context or ToolPermissionContext())
