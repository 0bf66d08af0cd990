"""An agent loop on the approvalbot SDK: every tool call crosses the approval stage before it runs.

    approvalbot admin workspace create acme
    approvalbot admin app add --workspace acme --name demo-agent        # prints an app token
    export APPROVALBOT_URL=http://127.0.0.1:8787 APPROVALBOT_WORKSPACE=acme
    APPROVALBOT_TOKEN=<app token> python examples/agent_loop.py

The rules let reads through, refuse force pushes outright and park everything else for a person
(decide with `approvalbot asks`, the browser page, a chat, or `examples/simple_loop.py RUN_ID`).
A person may approve a call edited (`approvalbot asks approve ID --input JSON`): the agent then
runs the input they approved, never its own. The run is stopped when the loop ends, however it
ends. The "tools" here only print what they would do.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.http.client import (
    ApprovalDenied,
    ApprovalExpired,
    Client,
    Run,
    RunStopped,
    input_to_run,
)

RULES: list[dict[str, Any]] = [
    {"tool": "read_file|list_dir", "verdict": "allow"},
    {"tool": "bash", "path": "command", "match": "*git push*--force*", "verdict": "deny",
     "reason": "force push rewrites history others may hold; a person can run it"},
]  # fmt: skip

TOOLS: dict[str, Callable[..., str]] = {
    "read_file": lambda path: f"(contents of {path})",
    "list_dir": lambda path: f"(listing of {path})",
    "bash": lambda command: f"(ran: {command})",
}

PLAN: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
    ("list_dir", {"path": "."}, None),
    ("read_file", {"path": "README.md"}, None),
    ("bash", {"command": "make test"}, {"summary": "run the test suite", "effects": ["executes"],
                                        "risk": "low", "reversible": True}),
    ("bash", {"command": "git push --force origin main"}, None),
    ("bash", {"command": "make deploy ENV=prod"}, {"summary": "deploy to production",
                                                   "effects": ["executes", "network"],
                                                   "targets": ["prod"], "risk": "high"}),
]  # fmt: skip


async def step(run: Run, tool: str, tool_input: dict[str, Any], profile: Any) -> str:
    """One tool call: wait for the approval stage, then run it (or read why not)."""
    try:
        task = await run.call(tool, tool_input, effect_profile=profile)
    except ApprovalDenied as refused:
        return f"refused: {refused.detail}"  # the model reads this and tries something else
    except ApprovalExpired:
        return "nobody approved it in time"
    # A person may have edited the call: what runs is what they approved (`approved_input`).
    result = TOOLS[tool](**input_to_run(task))
    return result if task.approved_input is None else f"{result} (edited by {task.resolved_by})"


async def main(url: str, token: str, workspace: str, say: Callable[[str], None] = print) -> Any:
    async with (
        Client(url, token) as client,
        client.workspace(workspace).runs.declare(
            approval_mode="ask", approval_rules=RULES, title="example agent loop"
        ) as run,  # stopped when the block ends, normally or by an exception
    ):
        say(f"run {run.id} declared; decide with: python examples/simple_loop.py {run.id}")
        try:
            for tool, tool_input, profile in PLAN:
                say(f"{tool} {tool_input} -> {await step(run, tool, tool_input, profile)}")
            region = await run.ask("Which region should the release go to?", ["eu", "us"])
            say(f"people chose {region}")
            return region
        except RunStopped:
            say("a person stopped the run")
            return None


if __name__ == "__main__":
    asyncio.run(
        main(
            os.environ.get("APPROVALBOT_URL", "http://127.0.0.1:8787"),
            os.environ["APPROVALBOT_TOKEN"],
            os.environ.get("APPROVALBOT_WORKSPACE", "acme"),
        )
    )
