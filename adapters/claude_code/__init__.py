"""Claude Code integration: the `PreToolUse` hook (`approvalbot hook claude-code`).

Everything here is standard library only: the hook runs once per tool call Claude makes, so it
must start fast (no aiohttp, SQLAlchemy, pydantic or chat libraries on its path).
"""
