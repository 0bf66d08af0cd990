"""LangChain 1.x / LangGraph: `create_agent(model, tools, middleware=[ApprovalMiddleware()])`.
Needs `pip install approvalbot[langchain]`; the code is `adapters/frameworks/langchain.py`."""

from adapters.frameworks.langchain import ApprovalMiddleware, ask_human

__all__ = ["ApprovalMiddleware", "ask_human"]
