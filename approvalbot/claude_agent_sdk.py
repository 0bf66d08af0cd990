"""The Claude Agent SDK: `ClaudeAgentOptions(can_use_tool=can_use_tool)` (or
`can_use_tool(profile=…)` for a callback with keywords and a run of its own).
Needs `pip install approvalbot[claude-agent-sdk]`; the code is
`adapters/frameworks/claude_agent_sdk.py`."""

from adapters.frameworks.claude_agent_sdk import can_use_tool

__all__ = ["can_use_tool"]
