"""The built-in profiles (claude-code, mcp), replaced by configured ones of the same name; in a
profile with aliases a rule names a tool either way."""

from __future__ import annotations

from bot.config import Settings
from bot.core import Core
from bot.profiles import either_way
from bot.service import CallSpec, RunSpec
from store.sql import SqlStore


def test_either_way_adds_the_alias_target() -> None:
    rules = [{"tool": "Bash|Write", "verdict": "deny"}, {"tool": "bash", "verdict": "ask"}]
    assert either_way(rules, {"Bash": "bash", "Write": "write"}) == [
        {"tool": "Bash|Write|bash|write", "verdict": "deny"},
        {"tool": "bash", "verdict": "ask"},
    ]
    assert either_way(rules, {}) == rules


async def test_claude_code_profile_reads_granted_the_rest_parked(sqlite_store: SqlStore) -> None:
    settings = Settings(profiles={"mine": {  # type: ignore[arg-type]
        "aliases": {"Bash": "bash"},
        "approval_rules": [{"tool": "Bash", "path": "command", "match": "rm *", "verdict": "deny",
                            "reason": "no rm"}],
    }})  # fmt: skip
    core = await Core.build(sqlite_store, settings)
    await core.admin.create_workspace("w")
    agent = (await core.admin.add_application("w", "agent")).principal
    run = await core.service.declare_run(agent, "w", RunSpec(profile="claude-code"))
    outcomes = {}
    for tool, tool_input in (("Read", {"file_path": "a"}), ("Grep", {"pattern": "x"}),
                             ("Bash", {"command": "ls -la | head"}),
                             ("Bash ", {"command": "ls && rm -rf build"}),
                             ("mcp__gh__create_pr", {})):  # fmt: skip
        receipt = await core.service.append(agent, "w", run.id, CallSpec(tool.strip(), tool_input))
        outcomes[tool] = (receipt.task.tool, receipt.task.state)
    assert outcomes == {
        "Read": ("read", "granted"),
        "Grep": ("grep", "granted"),
        "Bash": ("bash", "granted"),  # a read-only line, judged command by command
        "Bash ": ("bash", "needs_approval"),  # `rm` chained after a granted `ls`
        "mcp__gh__create_pr": ("mcp__gh__create_pr", "needs_approval"),
    }
    mine = await core.service.declare_run(agent, "w", RunSpec(profile="mine"))
    receipt = await core.service.append(agent, "w", mine.id, CallSpec("Bash", {"command": "rm -r"}))
    assert receipt.task.state == "failed" and receipt.task.error["detail"] == "no rm"  # type: ignore[index]
    mcp = await core.service.declare_run(agent, "w", RunSpec(profile="mcp"))
    asked = await core.service.append(agent, "w", mcp.id, CallSpec("ask", {"prompt": "ok?"}))
    assert asked.task.state == "awaiting_input"
