"""`approvalbot hook claude-code`: Claude Code's `PreToolUse` hook command.

Runs on every tool call Claude makes, so it imports nothing but click and the standard library
(`adapters.claude_code`): no aiohttp, SQLAlchemy, pydantic or chat libraries.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys

import click

from adapters.claude_code import hook as claude
from bot.durations import parse_duration


def _seconds(ctx: click.Context, param: click.Parameter, value: object) -> float:
    """`--wait`: seconds, or a duration as people write them ("90s", "30m", "1h")."""
    if isinstance(value, float):
        return value
    try:
        return parse_duration(value).total_seconds()
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@click.group(name="hook")
def hook() -> None:
    """Agent hooks that send each tool call to approvalbot before it runs."""


@hook.command(
    name="claude-code",
    epilog=(
        "Set up: export APPROVALBOT_URL (e.g. http://127.0.0.1:8787), APPROVALBOT_TOKEN (an "
        "application token, `approvalbot admin app add`) and APPROVALBOT_WORKSPACE (default "
        "`default`) where Claude Code runs, then paste the output of `approvalbot hook "
        "claude-code --print-settings` into .claude/settings.json."
    ),
)
@click.option(
    "--profile",
    default="claude-code",
    show_default=True,
    help="The profile each Claude session's run is declared from.",
)
@click.option(
    "--wait",
    "wait",
    metavar="SECONDS",
    type=str,
    callback=_seconds,
    default=f"{claude.DEFAULT_WAIT:g}",
    show_default=True,
    help=(
        f"How long to wait for a person (seconds, or 30m, 1h…). The default is a little under "
        f"the hook timeout --print-settings writes ({claude.HOOK_TIMEOUT} s), so the hook "
        "answers before Claude Code gives up on it."
    ),
)
@click.option(
    "--on-timeout",
    type=click.Choice(["ask", "deny"]),
    default="ask",
    show_default=True,
    help="Nobody decided within --wait: `ask` falls back to Claude's own prompt; `deny`.",
)
@click.option(
    "--on-error",
    type=click.Choice(["ask", "deny"]),
    default="ask",
    show_default=True,
    help="The service unreachable, a bad token, a 5xx, or a malformed hook input.",
)
@click.option(
    "--print-settings",
    is_flag=True,
    help="Print the settings.json snippet (a PreToolUse command hook with its timeout) and exit.",
)
def claude_code(
    profile: str, wait: float, on_timeout: str, on_error: str, print_settings: bool
) -> None:
    """Claude Code's PreToolUse hook: reads the hook JSON on stdin, sends the call to
    approvalbot (one run per Claude session), waits for a person if it parks, and prints
    Claude's decision JSON (allow, deny with the reason, or ask). Never a silent allow:
    timeouts and errors answer --on-timeout / --on-error.

    Granted calls answer at once. Parked calls wait up to --wait (default
    1770 s, just under the 1800 s hook timeout printed by --print-settings).
    """
    if print_settings:
        command = claude.COMMAND
        extra = [("--profile", profile, "claude-code"), ("--on-timeout", on_timeout, "ask"),
                 ("--on-error", on_error, "ask")]  # fmt: skip
        for flag, value, default in extra:
            if value != default:
                command += f" {flag} {shlex.quote(value)}"
        timeout = claude.HOOK_TIMEOUT
        if wait != claude.DEFAULT_WAIT:
            command += f" --wait {wait:g}"
            timeout = max(1, math.ceil(wait) + 30)
        click.echo(json.dumps(claude.settings_snippet(command, timeout), indent=2))
        return
    choice = on_error
    try:
        options = claude.Options(
            url=os.environ.get("APPROVALBOT_URL", ""),
            token=os.environ.get("APPROVALBOT_TOKEN", ""),
            workspace=os.environ.get("APPROVALBOT_WORKSPACE") or "default",
            profile=profile,
            wait=wait,
            on_timeout=on_timeout,
            on_error=on_error,
        )
        data = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
        decision = claude.run_hook(data, options)
    except BaseException as error:
        problem = f"{type(error).__name__}: {error}".rstrip(": ")
        decision = claude.on_error(choice, f"internal error ({problem})")
    if decision.problem:
        click.echo(f"approvalbot hook: {decision.problem}", err=True)
    click.echo(json.dumps(decision.output(), ensure_ascii=False))
