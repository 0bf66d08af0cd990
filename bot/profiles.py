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

# Command lines the `claude-code` profile grants without a person: each command of a line is
# judged on its own (bot/rules/compound.py), so these only ever grant lines made wholly of
# commands that read. Chosen so that no granted line can write, delete, reach the network or
# run code: a redirection to a file, `| sh`, `find -exec`/`-delete`, `eval` never pass an allow,
# and the `ask` rules below take back the flags of these commands that write or run programs.
READ_ONLY_COMMANDS = (
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "find", "pwd", "which",
    "echo", "printf", "true", "false", "date", "whoami", "uname", "basename", "dirname",
    "realpath", "readlink", "stat", "cut", "tr", "nl", "diff", "cmp", "jq", "sort", "cd", "test",
    "sleep", "type",
    "git status", "git diff", "git log", "git show", "git blame", "git ls-files", "git grep",
    "git rev-parse", "git --no-pager diff", "git --no-pager log", "git --no-pager show",
)  # fmt: skip
READ_ONLY_EXACT = (
    "git branch", "git branch -a", "git branch -r", "git branch -v", "git branch -vv",
    "git branch -av", "git branch --all", "git branch --show-current", "git remote -v",
)  # fmt: skip
# Flags of the commands above that write a file or run another program.
WRITING_FLAGS = (
    "*--output*", "*--ext-diff*", "*--textconv*", "rg *--pre*", "sort *-o*",
    "*--compress-program*", "git grep *-O*", "git grep *--open-files-in-pager*",
    "date *-s*", "date *--set*",
)  # fmt: skip


def _shell_rules() -> list[dict[str, Any]]:
    reason = "reads only (a read-only command line)"
    line = {"tool": "bash", "path": "command"}
    rules: list[dict[str, Any]] = [
        {**line, "match": flag, "verdict": "ask", "reason": "this flag writes or runs a program"}
        for flag in WRITING_FLAGS
    ]
    for name in READ_ONLY_COMMANDS:
        for match in (name, f"{name} *"):
            rules.append({**line, "match": match, "verdict": "allow", "reason": reason})
    for match in READ_ONLY_EXACT:
        rules.append({**line, "match": match, "verdict": "allow", "reason": reason})
    return rules


BUILTIN: dict[str, Profile] = {
    # Reading and searching the working tree is granted, and so are read-only Bash lines;
    # everything else asks a person.
    "claude-code": Profile(
        "ask",
        [
            {
                "tool": "read|glob|grep|ls|todo_write",
                "verdict": "allow",
                "reason": "reads and searches are fine",
            },
            {"tool": "ask", "verdict": "allow", "reason": "questions go to a person"},
            *_shell_rules(),
        ],
        None,
        CLAUDE_CODE_ALIASES,
        # Bash lines are judged command by command: read-only lines pass, the rest asks.
        shell_commands=[{"tool": "bash", "path": "command"}],
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
