"""An OpenAI Agents SDK agent whose tool calls cross approvalbot: one import, one argument
(`needs_approval=needs_approval`), and the resume loop the SDK asks for anyway.

Offline: a scripted `Model` stands in for the LLM (no API key, no network but the service;
tracing off). It asks a person which environment to deploy to (`ask_human`), then calls
`deploy` with the answer, which waits for a person; a denial reaches the model with the reason.

    make run                              # the service, in another terminal
    export APPROVALBOT_URL=http://127.0.0.1:8787 APPROVALBOT_TOKEN=aba_…
    python examples/openai_agents_agent.py

Decide from the browser page, a chat, or `approvalbot asks`. With a real model, drop
`model=OfflineModel()` (and `tracing_disabled`); nothing else changes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
)

from approvalbot.openai_agents import make_ask_human, needs_approval, resolve_interruptions


class OfflineModel(Model):
    """Ask where to deploy, deploy there, then report what happened."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        items: list[dict[str, Any]] = [dict(i) for i in input] if isinstance(input, list) else []
        outputs = {
            str(item["call_id"]): str(item["output"])
            for item in items
            if item.get("type") == "function_call_output"
        }
        reply: ResponseOutputItem
        if "call_deploy" in outputs:
            reply = said(f"Finished: {outputs['call_deploy']}")
        elif "call_ask" in outputs:
            reply = call("deploy", {"env": outputs["call_ask"]}, "call_deploy")
        else:
            question = {"prompt": "Which environment should I deploy to?",
                        "options": ["staging", "production"]}  # fmt: skip
            reply = call("ask_human", question, "call_ask")
        return ModelResponse(output=[reply], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("this example runs without streaming")


def call(name: str, args: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments=json.dumps(args), call_id=call_id,
        id=f"fc_{call_id}", status="completed",
    )  # fmt: skip


def said(text: str) -> ResponseOutputMessage:
    content = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    return ResponseOutputMessage(
        id="msg_final", type="message", role="assistant", status="completed", content=content
    )


async def deploy(env: str) -> str:
    """Deploy the app to an environment."""
    return f"deployed to {env}"


async def main(
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    say: Callable[[str], None] = print,
) -> str:
    service: dict[str, Any] = {
        "url": url,
        "token": token,
        "workspace": workspace,
    }  # None: APPROVALBOT_* env
    agent = Agent(
        name="deployer",
        model=OfflineModel(),
        tools=[
            make_ask_human(**service),
            function_tool(deploy, needs_approval=needs_approval),  # the one argument
        ],
    )
    offline = RunConfig(tracing_disabled=True)
    say("asking a person where to deploy (decide in approvalbot)…")
    result = await Runner.run(agent, "Deploy the app.", run_config=offline)
    while result.interruptions:  # each pending call decided by approvalbot's rules or a person
        state = await resolve_interruptions(result, **service)
        result = await Runner.run(agent, state, run_config=offline)
    final = str(result.final_output)
    say(final)
    return final


if __name__ == "__main__":
    asyncio.run(main())
