"""A Claude Agent SDK session whose tool calls cross approvalbot: one import, one argument
(`can_use_tool=can_use_tool(...)`).

Offline: `OfflineClaude`, a custom `Transport` speaking the SDK's control protocol, stands in
for the Claude Code CLI and the model (no CLI, no API key, no network but the service). As the
CLI would, it asks the SDK's `can_use_tool` about each tool call of a scripted turn: a Read
(granted by the built-in `claude-code` profile), an AskUserQuestion (answered by a person), and
a Bash deploy (waits for a person to approve; a denial comes back with the reason).

    make run                              # the service, in another terminal
    export APPROVALBOT_URL=http://127.0.0.1:8787 APPROVALBOT_TOKEN=aba_…
    python examples/claude_agent_sdk_agent.py

Decide from the browser page, a chat, or `approvalbot asks`. With the real CLI, drop
`transport=OfflineClaude()`; nothing else changes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    TextBlock,
    Transport,
)

from approvalbot.claude_agent_sdk import can_use_tool

QUESTION = {"question": "Which environment should I deploy to?", "header": "Target",
            "multiSelect": False,
            "options": [{"label": "staging", "description": "the test servers"},
                        {"label": "production", "description": "customers see it"}]}  # fmt: skip


class OfflineClaude(Transport):
    """The CLI's side of the SDK's stdio protocol, scripted: answers `initialize`, and on the
    user's prompt asks permission for three tool calls in turn, then ends the turn."""

    def __init__(self) -> None:
        self.outbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count(1)
        self.turn: asyncio.Task[None] | None = None
        self.ready = False

    async def connect(self) -> None:
        self.ready = True

    def is_ready(self) -> bool:
        return self.ready

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            if message.get("type") == "control_request":  # the SDK's initialize
                answer = {"subtype": "success", "request_id": message["request_id"],
                          "response": {"commands": [], "models": []}}  # fmt: skip
                await self.outbox.put({"type": "control_response", "response": answer})
            elif message.get("type") == "control_response":  # a can_use_tool decision
                response = message["response"]
                self.replies[response["request_id"]].set_result(response)
            elif message.get("type") == "user":
                self.turn = asyncio.create_task(self.play())

    async def permission(self, tool_name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        """Ask the SDK's can_use_tool, as the CLI does before running a tool."""
        request_id = f"cli_{next(self.ids)}"
        future = self.replies[request_id] = asyncio.get_running_loop().create_future()
        request = {"subtype": "can_use_tool", "tool_name": tool_name, "input": tool_input,
                   "tool_use_id": f"toolu_{request_id}"}  # fmt: skip
        await self.outbox.put(
            {"type": "control_request", "request_id": request_id, "request": request}
        )
        reply = await future
        del self.replies[request_id]
        decided: dict[str, Any] = reply.get("response") or {
            "behavior": "deny",
            "message": reply.get("error"),
        }
        return decided

    async def say(self, text: str) -> None:
        content = [{"type": "text", "text": text}]
        await self.outbox.put(
            {"type": "assistant", "message": {"model": "offline", "content": content}}
        )

    async def play(self) -> None:
        read = await self.permission("Read", {"file_path": "deploy.toml"})
        await self.say(f"Read deploy.toml: {outcome(read)}")
        asked = await self.permission("AskUserQuestion", {"questions": [QUESTION]})
        answers = (asked.get("updatedInput") or {}).get("answers") or {}
        target = answers.get(QUESTION["question"])
        await self.say(f"Asked where to deploy: {target or outcome(asked)}")
        if target:
            command = f"make deploy ENV={target}"
            ran = await self.permission("Bash", {"command": command})
            await self.say(f"Bash {command}: {outcome(ran)}")
        await self.outbox.put(
            {"type": "result", "subtype": "success", "duration_ms": 0, "duration_api_ms": 0,
             "is_error": False, "num_turns": 1, "session_id": "offline", "result": "done"}
        )  # fmt: skip

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self.outbox.get()) is not None:
            yield message

    async def end_input(self) -> None:
        return None

    async def close(self) -> None:
        if self.turn is not None:
            self.turn.cancel()
        self.ready = False
        await self.outbox.put(None)


def outcome(decision: dict[str, Any]) -> str:
    if decision.get("behavior") == "allow":
        return "allowed"
    return f"denied ({decision.get('message')})"


async def main(
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    say: Callable[[str], None] = print,
) -> list[str]:
    # The one argument: the callback (keywords default to APPROVALBOT_URL/TOKEN/WORKSPACE).
    options = ClaudeAgentOptions(can_use_tool=can_use_tool(url=url, token=token,
                                                           workspace=workspace))  # fmt: skip
    lines: list[str] = []
    async with ClaudeSDKClient(options=options, transport=OfflineClaude()) as client:
        await client.query("Deploy the app.")
        async for message in client.receive_response():
            if isinstance(message, AssistantMessage):
                for block in message.content:
                    if isinstance(block, TextBlock):
                        lines.append(block.text)
                        say(block.text)
            elif isinstance(message, ResultMessage):
                say(f"turn ended: {message.result}")
    return lines


if __name__ == "__main__":
    asyncio.run(main())
