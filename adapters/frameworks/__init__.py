"""Bridges for the agent frameworks (LangChain/LangGraph, the OpenAI Agents SDK, the Claude Agent
SDK), imported by users as `approvalbot.langchain`, `approvalbot.openai_agents` and
`approvalbot.claude_agent_sdk`. Each only translates between its framework's types and the
Python SDK; what they share (finding the service, one run per session, the wording of a
refusal) is `gate.py`. Each module imports its framework, so import only the one you use.
"""
