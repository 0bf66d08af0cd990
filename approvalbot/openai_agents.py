"""The OpenAI Agents SDK: `function_tool(fn, needs_approval=needs_approval)`, then
`Runner.run(agent, await resolve_interruptions(result))` while `result.interruptions`.
Needs `pip install approvalbot[openai-agents]`; the code is `adapters/frameworks/openai_agents.py`.
"""

from adapters.frameworks.openai_agents import (
    ask_human,
    make_ask_human,
    needs_approval,
    resolve_interruptions,
)

__all__ = ["ask_human", "make_ask_human", "needs_approval", "resolve_interruptions"]
