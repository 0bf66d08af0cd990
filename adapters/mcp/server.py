"""The MCP server: two tools, `ask_human` and `request_approval`, over stdio.

Built with the official MCP Python SDK (`mcp.server.mcpserver.MCPServer`). Each tool call goes
to a `Bridge` (adapters/mcp/bridge.py), which talks to approvalbot over HTTP; the tool answers
text, and an error (service unreachable, token refused, bad argument) is a result with
`isError` and one line saying why. Logs go to stderr: stdout carries MCP messages only.
"""

from __future__ import annotations

import logging
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from adapters.mcp.bridge import Bridge, McpConfig, Reply, log

INSTRUCTIONS = (
    "approvalbot puts questions and approval requests to the people responsible for this "
    "agent (in a browser, Telegram or Slack) and waits for them. Use ask_human when you need "
    "information or a choice only a person can give; use request_approval before an action "
    "with side effects a person should sign off on, and act only on an answer starting with "
    '"approved".'
)

ASK_HUMAN = (
    "Ask a person a question and wait for the answer. Use it when you need information or a "
    "choice only a person can give (a preference, a missing fact, a decision between options), "
    "not for things you can find out yourself. Give `options` to offer choices; with "
    '`multi: true` the person may pick several, returned joined by ", " (e.g. "lint, unit '
    'tests"). Returns the answer as text. Other endings, also as text: "<name> declined to '
    'answer", or "nobody answered within <time>" (asking again with the same prompt keeps '
    "waiting for the same question)."
)

REQUEST_APPROVAL = (
    "Ask a person to approve an action before you take it, and wait for the decision. Use it "
    "before any action with side effects the person should sign off on (deploying, deleting, "
    "spending money, sending messages, changing shared systems): describe the action in "
    "`action` in one plain sentence, put the specifics (commands, files, amounts, recipients) "
    'in `details`. Returns text: "approved by <name>" (go ahead), "denied by <name>: '
    '<reason>" or "denied: <reason>" (a rule refused it; do not go ahead, consider the reason), '
    'or "nobody decided within <time>" (do not go ahead; requesting again with the same action '
    "keeps waiting for the same request)."
)

EFFECT_PROFILE = (
    "Optional, what the approver reads besides the action: effects (list of kinds, e.g. "
    '["writes", "network", "external"]), targets (list of what is affected, e.g. ["prod-eu-1"]), '
    'risk ("low", "medium" or "high"), reversible (true or false).'
)


def _version() -> str:
    try:
        return version("approvalbot")
    except PackageNotFoundError:
        return ""


def _client(ctx: Context[Any, Any]) -> tuple[str | None, str | None]:
    """The MCP client's `clientInfo` (name, version), when it gave one."""
    try:
        params = ctx.session.client_params
    except ValueError:  # no request context (called directly, outside MCP)
        return None, None
    if params is None:
        return None, None
    info = params.client_info
    return info.name, info.version


def _progress(ctx: Context[Any, Any]) -> Any:
    async def report(done: float, total: float, message: str) -> None:
        try:
            await ctx.report_progress(done, total, message)
        except Exception:  # progress is a courtesy: never let it fail the call
            log.debug("progress notification failed", exc_info=True)

    return report


def _result(reply: Reply) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=reply.text)], is_error=reply.is_error
    )


def build_server(config: McpConfig, bridge: Bridge | None = None) -> MCPServer[Any]:
    """The MCP server with its two tools, wired to one `Bridge` (one approvalbot run)."""
    link = bridge or Bridge(config)
    server: MCPServer[Any] = MCPServer(
        "approvalbot",
        title="approvalbot",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
    )

    @server.tool(
        name="ask_human",
        title="Ask a person",
        description=ASK_HUMAN,
        annotations=ToolAnnotations(title="Ask a person", read_only_hint=True),
    )
    async def ask_human(
        prompt: Annotated[str, Field(description="The question, as the person will read it.")],
        ctx: Context[Any, Any],
        options: Annotated[
            list[str] | None,
            Field(description="Choices to offer; without them the person answers freely."),
        ] = None,
        multi: Annotated[
            bool, Field(description='With options: the person may pick several (joined by ", ").')
        ] = False,
    ) -> CallToolResult:
        name, client_version = _client(ctx)
        reply = await link.ask_human(
            prompt,
            options,
            multi,
            client_name=name,
            client_version=client_version,
            progress=_progress(ctx),
        )
        return _result(reply)

    @server.tool(
        name="request_approval",
        title="Request approval",
        description=REQUEST_APPROVAL,
        annotations=ToolAnnotations(title="Request approval", read_only_hint=True),
    )
    async def request_approval(
        action: Annotated[
            str,
            Field(description="The action you want to take, in one sentence the person reads."),
        ],
        ctx: Context[Any, Any],
        details: Annotated[
            dict[str, Any] | str | None,
            Field(description="The specifics: an object (command, files, amounts, …) or text."),
        ] = None,
        effect_profile: Annotated[
            dict[str, Any] | None,
            Field(description=EFFECT_PROFILE),
        ] = None,
    ) -> CallToolResult:
        name, client_version = _client(ctx)
        reply = await link.request_approval(
            action,
            details,
            effect_profile,
            client_name=name,
            client_version=client_version,
            progress=_progress(ctx),
        )
        return _result(reply)

    return server


def configure_logging() -> None:
    """Logs on stderr (stdout is the MCP channel); the SDK's own at warnings and above."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="approvalbot mcp: %(levelname)s %(message)s",
    )
    log.setLevel(logging.INFO)


async def serve_stdio(config: McpConfig) -> None:
    """Serve MCP on stdin/stdout until the client closes the stream."""
    bridge = Bridge(config)
    server = build_server(config, bridge)
    if not config.token:
        log.warning("APPROVALBOT_TOKEN is not set: every tool call will answer an error")
    try:
        await server.run_stdio_async()
    finally:
        await bridge.close()
