"""`approvalbot mcp`: an MCP server on stdio with `ask_human` and `request_approval`.

An MCP client (Claude Desktop, Claude Code, Cursor, VS Code, …) starts it as a subprocess; it
talks to the running approvalbot service over HTTP with an application token, configured like
the hook: APPROVALBOT_URL, APPROVALBOT_TOKEN, APPROVALBOT_WORKSPACE.
"""

from __future__ import annotations

import asyncio

import click

from bot.cli.common import fail
from bot.durations import parse_duration


@click.command(name="mcp")
@click.option(
    "--url",
    envvar="APPROVALBOT_URL",
    default="http://127.0.0.1:8787",
    show_default=True,
    help="The service (env APPROVALBOT_URL).",
)
@click.option(
    "--token",
    envvar="APPROVALBOT_TOKEN",
    default=None,
    show_envvar=False,
    help="An application token, aba_… (env APPROVALBOT_TOKEN; prefer the env var).",
)
@click.option(
    "--workspace",
    envvar="APPROVALBOT_WORKSPACE",
    default="default",
    show_default=True,
    help="The workspace (env APPROVALBOT_WORKSPACE).",
)
@click.option(
    "--profile",
    default="mcp",
    show_default=True,
    help="The profile the session's run is declared with (its rules decide first).",
)
@click.option(
    "--wait",
    "wait",
    default="600",
    metavar="SECONDS",
    show_default=True,
    help="How long a tool call waits for a person before it answers that nobody "
    "answered (or decided); the question or request stays open. Also 10m, 1h.",
)
def mcp(url: str, token: str | None, workspace: str, profile: str, wait: str) -> None:
    """Serve MCP on stdin/stdout: `ask_human` and `request_approval` tools for any MCP client.

    One approvalbot run per session, declared at the first tool call and titled after the
    client ("MCP · Claude Desktop 1.2"). Questions go to people as questions; approval requests
    park as the call `request_approval` under the profile's rules. Logs go to stderr.
    """
    try:
        seconds = parse_duration(wait).total_seconds()
    except ValueError as error:
        fail(f"--wait: {error}")
    from adapters.mcp import McpConfig, configure_logging, serve_stdio

    configure_logging()
    config = McpConfig(
        url=url.rstrip("/"), token=token or "", workspace=workspace, profile=profile, wait=seconds
    )
    try:
        asyncio.run(serve_stdio(config))
    except KeyboardInterrupt:
        pass
