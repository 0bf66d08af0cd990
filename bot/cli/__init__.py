"""The `approvalbot` command: the entry point that wires the core, the store and the surfaces.

Subcommands are imported when used, so `approvalbot rules check` does not pay for aiohttp,
SQLAlchemy and the chat libraries it never touches.
"""

from __future__ import annotations

import importlib

import click

# name -> (module, attribute, one-line help shown by --help without importing the module)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": ("bot.cli.serve", "serve", "Start the service: API, web page, chat adapters, clock."),
    "rules": ("bot.cli.rules", "rules", "Validate approval rules and try them on calls."),
    "admin": ("bot.cli.admin", "admin", "Workspaces, members, applications and their tokens."),
    "asks": ("bot.cli.asks", "asks", "List and decide what rests on people, from the terminal."),
    "login": ("bot.cli.login", "login", "Check a member token and save it for `approvalbot asks`."),
    "db": ("bot.cli.db", "db", "Database maintenance (migrations)."),
    "demo": ("bot.cli.demo", "demo", "Run a simulated agent against the running service."),
    "hook": ("bot.cli.hook", "hook", "Agent hooks: `hook claude-code` (Claude Code PreToolUse)."),
    "mcp": ("bot.cli.mcp", "mcp", "An MCP server (stdio) with ask_human and request_approval."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _help = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in sorted(COMMANDS)])


@click.group(
    name="approvalbot",
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)
def main() -> None:
    """approvalbot: the approval stage for AI agents."""
