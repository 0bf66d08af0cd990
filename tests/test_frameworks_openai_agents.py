"""`approvalbot.openai_agents` end to end: an OpenAI Agents SDK agent on a stub `Model` (the
SDK's own interface, scripted tool calls) whose tools use `needs_approval`, its interruptions
resolved through a real approvalbot server, a person (alice) deciding over the API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import (
    Agent,
    ModelResponse,
    RunConfig,
    Runner,
    RunState,
    Usage,
    function_tool,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.result import RunResult
from agents.tool import Tool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from adapters.frameworks.gate import close_gates
from adapters.http import client as sdk
from approvalbot.openai_agents import (
    ask_human,
    make_ask_human,
    needs_approval,
    resolve_interruptions,
)
from tests.frameworks_harness import (
    NO_DROPS,
    Person,
    alice,
    closed_port,
    framework_fixtures,
    keywords,
    load_example,
    needs_editing,
    next_decision,
    with_person,
)
from tests.http_harness import Served

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = framework_fixtures()
__all__ = ["alice"]
OFFLINE = RunConfig(tracing_disabled=True)


def call(name: str, args: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments=json.dumps(args), call_id=call_id,
        id=f"fc_{call_id}", status="completed",
    )  # fmt: skip


def said(text: str) -> ResponseOutputMessage:
    content = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    return ResponseOutputMessage(
        id="msg_1", type="message", role="assistant", status="completed", content=content
    )


class ScriptedModel(Model):
    """A stub `Model`: each turn answers the next output of its script, and keeps the tool
    outputs it was sent (what the model read)."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.outputs: dict[str, str] = {}

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
        for item in input if isinstance(input, list) else []:
            entry: dict[str, Any] = dict(item)
            if entry.get("type") == "function_call_output":
                self.outputs[str(entry["call_id"])] = str(entry["output"])
        output = self.turns.pop(0) if self.turns else [said("done")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the tests run without streaming")


class Tools:
    def __init__(self) -> None:
        self.ran: list[str] = []
        ran = self.ran

        async def lookup(name: str) -> str:
            """Look a name up."""
            ran.append(f"lookup {name}")
            return f"{name} is 42"

        async def drop_table(table: str) -> str:
            """Drop a table."""
            ran.append(f"drop {table}")
            return f"dropped {table}"

        async def deploy(env: str) -> str:
            """Deploy to an environment."""
            ran.append(f"deploy {env}")
            return f"deployed {env}"

        self.all: list[Tool] = [
            function_tool(fn, needs_approval=needs_approval) for fn in (lookup, drop_table, deploy)
        ]


async def run_to_end(agent: Agent[Any], api: Served, **more: Any) -> RunResult:
    """The loop a user writes: run, and while interrupted resolve through approvalbot."""
    result = await Runner.run(agent, "go", run_config=OFFLINE)
    while result.interruptions:
        state = await resolve_interruptions(result, **(keywords(api) | more))
        result = await Runner.run(agent, state, run_config=OFFLINE)
    return result


async def test_granted_runs_and_refused_returns_the_reason(api: Served) -> None:
    tools = Tools()
    model = ScriptedModel(
        [call("lookup", {"name": "x"}, "c1"), call("drop_table", {"table": "users"}, "c2")]
    )
    result = await run_to_end(Agent(name="ops", model=model, tools=tools.all), api)
    assert result.final_output == "done"
    assert tools.ran == ["lookup x"]
    assert model.outputs == {
        "c1": "x is 42",
        "c2": f"drop_table was not run: denied by the approval rules: {NO_DROPS}",
    }


async def test_parked_call_waits_and_runs_after_approval(api: Served, alice: sdk.Workspace) -> None:
    tools = Tools()
    model = ScriptedModel([call("deploy", {"env": "prod"}, "c1")])
    person = Person(alice)
    agent = Agent(name="ops", model=model, tools=tools.all)
    result = await with_person(run_to_end(agent, api), person.approve)
    assert tools.ran == ["deploy prod"] and model.outputs == {"c1": "deployed prod"}
    assert (person.seen[0].tool, person.seen[0].tool_input) == ("deploy", {"env": "prod"})
    status, run = await api.call("GET", f"/runs/{person.seen[0].run_id}")
    assert (status, run["title"]) == (200, "OpenAI Agents · ops")
    assert result.final_output == "done"


async def test_denied_call_carries_the_reason(api: Served, alice: sdk.Workspace) -> None:
    tools = Tools()
    model = ScriptedModel([call("deploy", {"env": "prod"}, "c1")])
    person = Person(alice)
    agent = Agent(name="ops", model=model, tools=tools.all)
    await with_person(run_to_end(agent, api), lambda: person.deny("not on a Friday"))
    assert tools.ran == []
    assert model.outputs == {"c1": "deploy was not run: denied by alice: not on a Friday"}


async def test_one_run_per_agent_run_resumes_included(api: Served, alice: sdk.Workspace) -> None:
    tools = Tools()
    model = ScriptedModel(
        [call("deploy", {"env": "eu"}, "c1")], [call("deploy", {"env": "us"}, "c2")]
    )
    person = Person(alice)
    agent = Agent(name="ops", model=model, tools=tools.all)
    await with_person(run_to_end(agent, api), person.approve, person.approve)
    assert tools.ran == ["deploy eu", "deploy us"]
    assert person.seen[0].run_id == person.seen[1].run_id
    # another agent run is another approvalbot run
    again = ScriptedModel([call("deploy", {"env": "ap"}, "c1")])
    other = Agent(name="ops", model=again, tools=tools.all)
    await with_person(run_to_end(other, api), person.approve)
    assert person.seen[2].run_id != person.seen[0].run_id


async def test_ask_human_is_answered(api: Served, alice: sdk.Workspace) -> None:
    asking = make_ask_human(**keywords(api))
    assert asking.name == "ask_human" and set(asking.params_json_schema["properties"]) == {
        "prompt", "options", "multi",
    }  # fmt: skip
    tools = Tools()
    model = ScriptedModel(
        [call("ask_human", {"prompt": "Which region?", "options": ["eu", "us"]}, "q1")],
        [call("deploy", {"env": "eu"}, "c1")],
    )
    person = Person(alice)
    agent = Agent(name="ops", model=model, tools=[asking, *tools.all])
    await with_person(run_to_end(agent, api), lambda: person.answer("eu"), person.approve)
    assert model.outputs == {"q1": "eu", "c1": "deployed eu"}
    asked = person.seen[0]
    assert (asked.prompt, asked.options) == ("Which region?", ["eu", "us"])
    # the question and the later call are one approvalbot run
    assert person.seen[0].run_id == person.seen[1].run_id


async def test_ask_human_from_the_environment(
    api: Served, alice: sdk.Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (("URL", api.url), ("TOKEN", api.token("agent")), ("WORKSPACE", api.ws)):
        monkeypatch.setenv(f"APPROVALBOT_{name}", value)
    close_gates()
    model = ScriptedModel([call("ask_human", {"prompt": "Pick", "options": ["a", "b"],
                                              "multi": True}, "q1")])  # fmt: skip
    person = Person(alice)
    agent = Agent(name="ops", model=model, tools=[ask_human])
    await with_person(Runner.run(agent, "go", run_config=OFFLINE),
                      lambda: person.answer(["b", "a"]))  # fmt: skip
    assert model.outputs == {"q1": "a, b"} and person.seen[0].multi
    close_gates()


async def test_unreachable_service_or_bad_token_runs_nothing(api: Served) -> None:
    tools = Tools()
    model = ScriptedModel([call("lookup", {"name": "x"}, "c1")])
    agent = Agent(name="ops", model=model, tools=tools.all)
    result = await run_to_end(agent, api, url=closed_port())
    assert result.final_output == "done"
    assert model.outputs["c1"].startswith("lookup was not run: approvalbot is unreachable at")
    model = ScriptedModel([call("lookup", {"name": "x"}, "c1")])
    agent = Agent(name="ops", model=model, tools=tools.all)
    await run_to_end(agent, api, token="aba_not_a_token")
    assert model.outputs["c1"] == (
        "lookup was not run: approvalbot refused the token (401 unauthorized): "
        "check APPROVALBOT_TOKEN"
    )
    assert tools.ran == []


async def test_the_example_runs_against_the_service(api: Served, alice: sdk.Workspace) -> None:
    example = load_example("openai_agents_agent")
    said: list[str] = []
    person = Person(alice)
    final = await with_person(
        example.main(api.url, api.token("agent"), api.ws, said.append),
        lambda: person.answer("production"),
        lambda: person.deny("production is frozen today"),
    )
    assert final == "Finished: deploy was not run: denied by alice: production is frozen today"
    assert (person.seen[1].tool, person.seen[1].tool_input) == ("deploy", {"env": "production"})
    assert person.seen[0].run_id == person.seen[1].run_id


@needs_editing
async def test_an_edited_input_goes_back_to_the_model(api: Served, alice: sdk.Workspace) -> None:
    """The SDK cannot change an approved call's arguments: the call is not run, and the model
    reads the arguments the person approved."""
    tools = Tools()
    model = ScriptedModel([call("deploy", {"env": "prod"}, "c1")])
    person = Person(alice)
    agent = Agent(name="ops", model=model, tools=tools.all)
    await with_person(run_to_end(agent, api), lambda: person.approve_edited({"env": "staging"}))
    assert tools.ran == []
    assert model.outputs["c1"] == (
        "deploy was not run as asked: approved by alice, with an edited input. Call deploy "
        'again with exactly these arguments: {"env": "staging"}'
    )


async def test_a_state_restored_elsewhere_finds_its_parked_call(
    api: Served, alice: sdk.Workspace
) -> None:
    """Park, save the state and go down; alice approves meanwhile; another process restores the
    state and resumes: the same approvalbot run and task, her approval honoured, no new park."""
    model = ScriptedModel([call("deploy", {"env": "prod"}, "c1")])
    result = await Runner.run(Agent(name="ops", model=model, tools=Tools().all), "go",
                              run_config=OFFLINE)  # fmt: skip
    waiting = asyncio.ensure_future(resolve_interruptions(result, **keywords(api)))
    parked = await next_decision(alice)
    saved = result.to_state().to_string()  # the state the process saved while the call waited
    waiting.cancel()  # the agent process goes down ...
    await asyncio.gather(waiting, return_exceptions=True)
    close_gates()  # ... and with it every gate and its map of runs
    await parked.approve()  # alice approves while nobody waits

    tools = Tools()  # the new process: its own agent, tools and bridge
    agent = Agent(name="ops", model=ScriptedModel(), tools=tools.all)
    state = await RunState.from_string(agent, saved)
    result = await Runner.run(agent, state, run_config=OFFLINE)
    while result.interruptions:  # (a new park instead would end, not run, after 20 s)
        state = await resolve_interruptions(result, **keywords(api), wait=20)
        result = await Runner.run(agent, state, run_config=OFFLINE)
    assert tools.ran == ["deploy prod"] and result.final_output == "done"
    assert await alice.decisions.list() == []  # no new park
    status, task = await api.call("GET", f"/runs/{parked.run_id}/tasks/{parked.key}")
    assert (status, task["state"], task["resolved_by"]) == (200, "granted", "alice")
    assert {entry.run_id for entry in await alice.log()} == {parked.run_id}  # one run


async def test_a_resume_saved_before_asking_stays_in_the_run(
    api: Served, alice: sdk.Workspace
) -> None:
    """A state saved at a later interruption, before asking approvalbot about it, still carries
    the run (from the first call on); a restored `RunState` may be decided directly."""
    model = ScriptedModel(
        [call("deploy", {"env": "eu"}, "c1")], [call("deploy", {"env": "us"}, "c2")]
    )
    person = Person(alice)
    agent = Agent(name="ops", model=model, tools=Tools().all)
    result = await Runner.run(agent, "go", run_config=OFFLINE)
    state = await with_person(resolve_interruptions(result, **keywords(api)), person.approve)
    result = await Runner.run(agent, state, run_config=OFFLINE)  # interrupted again, at c2
    saved = result.to_state().to_json()
    close_gates()

    tools = Tools()
    agent = Agent(name="ops", model=ScriptedModel(), tools=tools.all)
    restored = await RunState.from_json(agent, saved)
    decided = resolve_interruptions(restored, **keywords(api))
    state = await with_person(decided, person.approve)
    assert state is restored
    result = await Runner.run(agent, state, run_config=OFFLINE)
    assert tools.ran == ["deploy us"] and not result.interruptions
    assert person.seen[0].run_id == person.seen[1].run_id
