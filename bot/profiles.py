"""The profiles every service has without configuring them: `claude-code` (the Claude Code
hook's runs) and `mcp` (the MCP server's). A configured profile of the same name replaces one.

In a profile with aliases a rule may name a tool either way: `Bash` or `bash` both match
Claude's Bash tool (each alternative that is an alias's source also matches its target).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.decisions import Profile

# Claude Code's tool names -> the names rules use (`mcp__server__tool` stays as it is).
CLAUDE_CODE_ALIASES = {
    "Bash": "bash",
    "BashOutput": "bash_output",
    "KillShell": "kill_shell",
    "Write": "write",
    "Edit": "edit",
    "MultiEdit": "edit",
    "NotebookEdit": "edit",
    "Read": "read",
    "NotebookRead": "read",
    "Glob": "glob",
    "Grep": "grep",
    "LS": "ls",
    "WebFetch": "web_fetch",
    "WebSearch": "web_search",
    "Task": "task",
    "TodoWrite": "todo_write",
    "ExitPlanMode": "exit_plan_mode",
    "SlashCommand": "slash_command",
}

BUILTIN: dict[str, Profile] = {
    # Reading and searching the working tree is granted; everything else asks a person.
    "claude-code": Profile(
        "ask",
        [
            {
                "tool": "read|glob|grep|ls|todo_write",
                "verdict": "allow",
                "reason": "reads and searches are fine",
            },
            {"tool": "ask", "verdict": "allow", "reason": "questions go to a person"},
        ],
        None,
        CLAUDE_CODE_ALIASES,
    ),
    # An MCP client's questions go to a person; its approval requests park for one.
    "mcp": Profile("ask", [{"tool": "ask", "verdict": "allow"}], None, {}),
}


def either_way(rules: list[Any], aliases: Mapping[str, str]) -> list[Any]:
    """Rules whose tool alternatives naming an alias's source also name its target."""
    out: list[Any] = []
    for rule in rules:
        tool = rule.get("tool") if isinstance(rule, dict) else None
        if isinstance(tool, str) and aliases:
            names = tool.split("|")
            extra = [aliases[n] for n in names if n in aliases and aliases[n] not in names]
            if extra:
                rule = {**rule, "tool": "|".join([*names, *dict.fromkeys(extra)])}
        out.append(rule)
    return out


def with_builtins(configured: Mapping[str, Profile]) -> dict[str, Profile]:
    profiles = {**BUILTIN, **configured}
    return {
        name: Profile(
            p.approval_mode,
            either_way(list(p.approval_rules), p.aliases),
            p.tool_names,
            dict(p.aliases),
            list(p.approval_requirements),
            p.forbid_self_approval,
            list(p.shell_commands),
        )
        for name, p in profiles.items()
    }
