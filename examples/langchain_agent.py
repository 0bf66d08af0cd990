"""A LangChain agent whose tool calls cross approvalbot: one import, one argument.

Offline: a scripted chat model stands in for the LLM (no API key, no network but the service).
It asks a person which environment to deploy to (`ask_human`), then calls `deploy` with the
answer, which waits for a person to approve; a denial reaches the model with the reason.

    make run                              # the service, in another terminal
    export APPROVALBOT_URL=http://127.0.0.1:8787 APPROVALBOT_TOKEN=aba_…
    python examples/langchain_agent.py

Decide from the browser page, a chat, or `approvalbot asks`. With a real model, replace
`OfflineModel()` with e.g. `init_chat_model("openai:gpt-5")`; nothing else changes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from approvalbot.langchain import ApprovalMiddleware


class OfflineModel(BaseChatModel):
    """Ask where to deploy, deploy there, then report what happened."""

    @property
    def _llm_type(self) -> str:
        return "offline-script"

    def bind_tools(self, tools: Any, **_kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.next(messages))])

    def next(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if not isinstance(last, ToolMessage):
            question = {"prompt": "Which environment should I deploy to?",
                        "options": ["staging", "production"]}  # fmt: skip
            return call("ask_human", question, "call_ask")
        if last.name == "ask_human" and last.status != "error":
            return call("deploy", {"env": str(last.content)}, "call_deploy")
        return AIMessage(content=f"Finished: {last.content}")


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


@tool
def deploy(env: str) -> str:
    """Deploy the app to an environment."""
    return f"deployed to {env}"


async def main(
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    say: Callable[[str], None] = print,
) -> str:
    # The one argument: the middleware (keywords default to APPROVALBOT_URL/TOKEN/WORKSPACE).
    approval = ApprovalMiddleware(url=url, token=token, workspace=workspace)
    agent = create_agent(OfflineModel(), [deploy], middleware=[approval])
    config: Any = {"configurable": {"thread_id": "langchain-example"}}
    say("asking a person where to deploy (decide in approvalbot)…")
    request: Any = {"messages": [("user", "Deploy the app.")]}
    out = await agent.ainvoke(request, config)
    for message in out["messages"]:
        if isinstance(message, ToolMessage):
            say(f"{message.name}: {message.content}")
    final = str(out["messages"][-1].content)
    say(final)
    return final


if __name__ == "__main__":
    asyncio.run(main())
