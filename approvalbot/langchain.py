"""LangChain 1.x / LangGraph: `create_agent(model, tools, middleware=[ApprovalMiddleware()])`;
for graphs paused by LangChain's `HumanInTheLoopMiddleware`, `resolve_hitl` (`resolve_hitl_sync`).
Needs `pip install approvalbot[langchain]`; the code is `adapters/frameworks/langchain.py`."""

from adapters.frameworks.langchain import (
    ApprovalMiddleware,
    ask_human,
    resolve_hitl,
    resolve_hitl_sync,
)

__all__ = ["ApprovalMiddleware", "ask_human", "resolve_hitl", "resolve_hitl_sync"]
