"""The MCP server (`approvalbot mcp`): `ask_human` and `request_approval` for any MCP client.

`build_server(config)` makes the server (official MCP Python SDK), `serve_stdio(config)` runs it
on stdin/stdout. Each session declares one approvalbot run, at its first tool call, titled after
the MCP client ("MCP · Claude Desktop 1.2"), and puts every question and approval request through
it with the Python SDK (adapters/http/client.py).
"""

from adapters.mcp.bridge import Bridge, McpConfig, Reply, answer_text, ending, run_title
from adapters.mcp.server import build_server, configure_logging, serve_stdio

__all__ = [
    "Bridge",
    "McpConfig",
    "Reply",
    "answer_text",
    "build_server",
    "configure_logging",
    "ending",
    "run_title",
    "serve_stdio",
]
