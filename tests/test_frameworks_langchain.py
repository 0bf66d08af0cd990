"""`approvalbot.langchain` end to end: a LangChain 1.x agent (`create_agent`, a fake chat model
that emits tool calls) with `ApprovalMiddleware` against a real approvalbot server, a person
(alice) deciding over the API. Both `invoke` (in a thread) and `ainvoke`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from adapters.frameworks.gate import close_gates
from adapters.http import client as sdk
from approvalbot.langchain import ApprovalMiddleware, ask_human, resolve_hitl, resolve_hitl_sync
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


class ScriptedChatModel(GenericFakeChatModel):
    """The fake chat model of langchain_core, answering its script in turn; tools are bound
    by ignoring them (the script already names the calls)."""

    def bind_tools(self, tools: Any, **_kwargs: Any) -> Any:
        return self


def calls(*tool_calls: tuple[str, dict[str, Any]]) -> Iterator[AIMessage]:
    """A model that makes these tool calls in one turn, then says "done"."""
    made = [{"name": n, "args": a, "id": f"call_{i}"} for i, (n, a) in enumerate(tool_calls)]
    return iter([AIMessage(content="", tool_calls=made), AIMessage(content="done")])


class Tools:
    """The agent's tools; `ran` records what actually ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        ran = self.ran

        @tool
        def lookup(name: str) -> str:
            """Look a name up."""
            ran.append(("lookup", {"name": name}))
            return f"{name} is 42"

        @tool
        def drop_table(table: str) -> str:
            """Drop a table."""
            ran.append(("drop_table", {"table": table}))
            return f"dropped {table}"

        @tool
        def deploy(env: str) -> str:
            """Deploy to an environment."""
            ran.append(("deploy", {"env": env}))
            return f"deployed {env}"

        self.all: list[BaseTool] = [lookup, drop_table, deploy]


def agent(script: Iterator[AIMessage], tools: Tools, middleware: ApprovalMiddleware) -> Any:
    return create_agent(ScriptedChatModel(messages=script), tools.all, middleware=[middleware])


def tool_messages(out: dict[str, Any]) -> dict[str, ToolMessage]:
    messages: list[BaseMessage] = out["messages"]
    assert isinstance(messages[-1], AIMessage) and messages[-1].content == "done"
    return {str(m.name): m for m in messages if isinstance(m, ToolMessage)}


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


async def test_granted_and_refused_calls_never_pause(api: Served) -> None:
    tools = Tools()
    middleware = ApprovalMiddleware(**keywords(api))
    graph = agent(calls(("lookup", {"name": "x"}), ("drop_table", {"table": "users"})), tools,
                  middleware)  # fmt: skip
    out = await asyncio.to_thread(graph.invoke, {"messages": [("user", "go")]}, thread("t1"))
    got = tool_messages(out)
    assert got["lookup"].content == "x is 42" and got["lookup"].status == "success"
    assert got["drop_table"].status == "error"
    assert got["drop_table"].content == (
        f"drop_table was not run: denied by the approval rules: {NO_DROPS}"
    )
    assert tools.ran == [("lookup", {"name": "x"})]
    run_id = middleware.run_id("t1")
    assert run_id is not None
    tasks = await api.core.store.tasks(api.ws, run_id=run_id)
    assert sorted((t.tool_name, t.state) for t in tasks) == [
        ("drop_table", "failed"), ("lookup", "granted"),
    ]  # fmt: skip
    status, run = await api.call("GET", f"/runs/{run_id}")
    assert (status, run["title"]) == (200, "LangChain · thread t1")


async def test_parked_call_waits_and_runs_after_approval_ainvoke(
    api: Served, alice: sdk.Workspace
) -> None:
    tools = Tools()
    graph = agent(calls(("deploy", {"env": "prod"})), tools, ApprovalMiddleware(**keywords(api)))
    person = Person(alice)
    out = await with_person(
        graph.ainvoke({"messages": [("user", "ship")]}, thread("a1")), person.approve
    )
    assert tool_messages(out)["deploy"].content == "deployed prod"
    assert tools.ran == [("deploy", {"env": "prod"})]
    assert (person.seen[0].tool, person.seen[0].tool_input) == ("deploy", {"env": "prod"})


async def test_denied_call_carries_the_reason_invoke(api: Served, alice: sdk.Workspace) -> None:
    tools = Tools()
    graph = agent(calls(("deploy", {"env": "prod"})), tools, ApprovalMiddleware(**keywords(api)))
    person = Person(alice)
    invoked = asyncio.to_thread(graph.invoke, {"messages": [("user", "ship")]}, thread("s1"))
    out = await with_person(invoked, lambda: person.deny("not on a Friday"))
    refused = tool_messages(out)["deploy"]
    assert refused.content == "deploy was not run: denied by alice: not on a Friday"
    assert refused.status == "error"
    assert tools.ran == []


async def test_parked_call_runs_after_approval_invoke_and_denied_ainvoke(
    api: Served, alice: sdk.Workspace
) -> None:
    tools = Tools()
    middleware = ApprovalMiddleware(**keywords(api))
    person = Person(alice)
    graph = agent(calls(("deploy", {"env": "eu"})), tools, middleware)
    invoked = asyncio.to_thread(graph.invoke, {"messages": [("user", "ship")]}, thread("s2"))
    assert tool_messages(await with_person(invoked, person.approve))["deploy"].content == (
        "deployed eu"
    )
    graph = agent(calls(("deploy", {"env": "us"})), tools, middleware)
    out = await with_person(
        graph.ainvoke({"messages": [("user", "ship")]}, thread("a2")),
        lambda: person.deny("us is frozen"),
    )
    denied = tool_messages(out)["deploy"].content
    assert denied == "deploy was not run: denied by alice: us is frozen"
    assert tools.ran == [("deploy", {"env": "eu"})]


async def test_ask_human_is_answered_on_both_paths(api: Served, alice: sdk.Workspace) -> None:
    middleware = ApprovalMiddleware(**keywords(api))
    assert [t.name for t in middleware.tools] == ["ask_human"]
    assert set(ask_human.args) == {"prompt", "options", "multi"}
    tools = Tools()
    person = Person(alice)
    question = {"prompt": "Which region?", "options": ["eu", "us"]}
    graph = agent(calls(("ask_human", question)), tools, middleware)
    out = await with_person(
        graph.ainvoke({"messages": [("user", "ask")]}, thread("q1")), lambda: person.answer("eu")
    )
    assert tool_messages(out)["ask_human"].content == "eu"
    asked = person.seen[0]
    assert (asked.prompt, asked.options, asked.multi) == ("Which region?", ["eu", "us"], False)
    several = {"prompt": "Which checks?", "options": ["lint", "unit", "e2e"], "multi": True}
    graph = agent(calls(("ask_human", several)), tools, middleware)
    invoked = asyncio.to_thread(graph.invoke, {"messages": [("user", "ask")]}, thread("q1"))
    out = await with_person(invoked, lambda: person.answer(["unit", "lint"]))
    assert tool_messages(out)["ask_human"].content == "lint, unit"
    assert person.seen[1].multi
    # both questions went into the thread's one run
    assert {d.run_id for d in person.seen} == {middleware.run_id("q1")}


async def test_one_run_per_thread(api: Served) -> None:
    middleware = ApprovalMiddleware(**keywords(api))
    tools = Tools()
    # a replay of the same call (same id, same input: a graph resumed from a checkpoint) is
    # the same task, so a person is never asked twice about one call
    for name, looked_up in (("t1", "a"), ("t1", "b"), ("t1", "b"), ("t2", "a")):
        graph = agent(calls(("lookup", {"name": looked_up})), tools, middleware)
        await graph.ainvoke({"messages": [("user", "go")]}, thread(name))
    first, second = middleware.run_id("t1"), middleware.run_id("t2")
    assert first and second and first != second
    assert len(await api.core.store.tasks(api.ws, run_id=first)) == 2
    assert len(await api.core.store.tasks(api.ws, run_id=second)) == 1


async def test_unreachable_service_or_bad_token_runs_nothing(api: Served) -> None:
    tools = Tools()
    down = ApprovalMiddleware(**(keywords(api) | {"url": closed_port()}))
    graph = agent(calls(("lookup", {"name": "x"}), ("ask_human", {"prompt": "?"})), tools, down)
    got = tool_messages(await graph.ainvoke({"messages": [("user", "go")]}, thread("d1")))
    assert got["lookup"].status == "error"
    assert str(got["lookup"].content).startswith("lookup was not run: approvalbot is unreachable")
    assert str(got["ask_human"].content).startswith("the question was not asked: approvalbot is")
    bad = ApprovalMiddleware(**keywords(api, token="aba_not_a_token"))
    graph = agent(calls(("lookup", {"name": "x"})), tools, bad)
    out = await asyncio.to_thread(graph.invoke, {"messages": [("user", "go")]}, thread("d2"))
    assert tool_messages(out)["lookup"].content == (
        "lookup was not run: approvalbot refused the token (401 unauthorized): "
        "check APPROVALBOT_TOKEN"
    )
    unset = ApprovalMiddleware(**(keywords(api) | {"token": ""}))
    graph = agent(calls(("lookup", {"name": "x"})), tools, unset)
    out = await graph.ainvoke({"messages": [("user", "go")]}, thread("d3"))
    assert "set APPROVALBOT_TOKEN" in str(tool_messages(out)["lookup"].content)
    assert tools.ran == []


async def test_the_environment_finds_the_service(
    api: Served, alice: sdk.Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without keywords the middleware and the standalone `ask_human` tool read
    APPROVALBOT_URL/TOKEN/WORKSPACE; the tool works without the middleware too."""
    for name, value in (("URL", api.url), ("TOKEN", api.token("agent")), ("WORKSPACE", api.ws)):
        monkeypatch.setenv(f"APPROVALBOT_{name}", value)
    close_gates()
    tools = Tools()
    graph = create_agent(
        ScriptedChatModel(messages=calls(("ask_human", {"prompt": "Name?"}))), [ask_human]
    )
    person = Person(alice)
    out = await with_person(
        graph.ainvoke({"messages": [("user", "ask")]}, thread("e1")), lambda: person.answer("Ada")
    )
    assert tool_messages(out)["ask_human"].content == "Ada"
    graph = agent(calls(("deploy", {"env": "dev"})), tools, ApprovalMiddleware())
    out = await with_person(graph.ainvoke({"messages": [("user", "go")]}, thread("e2")),
                            lambda: person.deny("no"))  # fmt: skip
    assert tool_messages(out)["deploy"].content == "deploy was not run: denied by alice: no"
    close_gates()


async def test_the_example_runs_against_the_service(api: Served, alice: sdk.Workspace) -> None:
    example = load_example("langchain_agent")
    said: list[str] = []
    person = Person(alice)
    final = await with_person(
        example.main(api.url, api.token("agent"), api.ws, said.append),
        lambda: person.answer("staging"),
        person.approve,
    )
    assert final == "Finished: deployed to staging"
    assert "ask_human: staging" in said
    assert (person.seen[1].tool, person.seen[1].tool_input) == ("deploy", {"env": "staging"})


@pytest.mark.parametrize("mode", ["batched", "per_call"])
async def test_hitl_interrupts_of_a_checkpointed_graph_are_resolved(
    api: Served, alice: sdk.Workspace, mode: Any
) -> None:
    """LangChain's own HumanInTheLoopMiddleware pauses a checkpointed graph; `resolve_hitl`
    decides its interrupts through approvalbot and the graph resumes with the decisions."""
    tools = Tools()
    gated: dict[str, Any] = {"lookup": True, "drop_table": True, "deploy": True}
    script = calls(
        ("lookup", {"name": "x"}), ("drop_table", {"table": "users"}), ("deploy", {"env": "prod"})
    )
    hitl = HumanInTheLoopMiddleware(interrupt_on=gated, interrupt_mode=mode)
    saver = InMemorySaver()
    graph = create_agent(
        ScriptedChatModel(messages=script), tools.all, middleware=[hitl], checkpointer=saver
    )
    config = thread(f"hitl-{mode}")
    paused = await graph.ainvoke({"messages": [("user", "go")]}, config)
    assert paused["__interrupt__"] and tools.ran == []
    person = Person(alice)
    if mode == "batched":  # the async path
        resolving: Any = resolve_hitl(paused["__interrupt__"], config, **keywords(api))
    else:  # the sync path, in a thread as `invoke` runs
        resolving = asyncio.to_thread(
            resolve_hitl_sync, paused["__interrupt__"], config, **keywords(api)
        )
    resume = await with_person(resolving, person.approve)
    out = await graph.ainvoke(resume, config)
    got = tool_messages(out)
    assert got["lookup"].content == "x is 42" and got["deploy"].content == "deployed prod"
    assert f"drop_table was not run: denied by the approval rules: {NO_DROPS}" in str(
        got["drop_table"].content
    )
    assert sorted(tools.ran) == [("deploy", {"env": "prod"}), ("lookup", {"name": "x"})]
    assert person.seen[0].tool == "deploy"
    status, run = await api.call("GET", f"/runs/{person.seen[0].run_id}")
    assert (status, run["title"]) == (200, f"LangChain · thread hitl-{mode}")


async def test_a_hitl_tool_that_takes_no_reject_is_refused_with_respond(api: Served) -> None:
    """A tool configured `allowed_decisions=["approve", "respond"]`: the rules' refusal goes
    back as a `respond` (a `reject` would make the middleware raise and end the agent run)."""
    tools = Tools()
    gated: dict[str, Any] = {"drop_table": {"allowed_decisions": ["approve", "respond"]}}
    hitl = HumanInTheLoopMiddleware(interrupt_on=gated)
    graph = create_agent(
        ScriptedChatModel(messages=calls(("drop_table", {"table": "users"}))),
        tools.all,
        middleware=[hitl],
        checkpointer=InMemorySaver(),
    )
    config = thread("hitl-respond")
    paused = await graph.ainvoke({"messages": [("user", "go")]}, config)
    resume = await resolve_hitl(paused["__interrupt__"], config, **keywords(api))
    out = await graph.ainvoke(resume, config)
    assert tool_messages(out)["drop_table"].content == (
        f"drop_table was not run: denied by the approval rules: {NO_DROPS}"
    )
    assert tools.ran == []


@needs_editing
async def test_an_edited_input_is_what_runs(api: Served, alice: sdk.Workspace) -> None:
    tools = Tools()
    graph = agent(calls(("deploy", {"env": "prod"})), tools, ApprovalMiddleware(**keywords(api)))
    person = Person(alice)
    out = await with_person(
        graph.ainvoke({"messages": [("user", "ship")]}, thread("ed1")),
        lambda: person.approve_edited({"env": "staging"}),
    )
    assert tool_messages(out)["deploy"].content == "deployed staging"
    assert tools.ran == [("deploy", {"env": "staging"})]


@needs_editing
async def test_an_edit_that_is_not_arguments_runs_nothing(
    api: Served, alice: sdk.Workspace
) -> None:
    """The person approves the call edited to a bare string: the tool cannot take that, and the
    proposed input was not what they approved, so nothing runs and the model reads why."""
    tools = Tools()
    graph = agent(calls(("deploy", {"env": "prod"})), tools, ApprovalMiddleware(**keywords(api)))
    person = Person(alice)
    out = await with_person(
        asyncio.to_thread(graph.invoke, {"messages": [("user", "ship")]}, thread("ed2")),
        lambda: person.approve_edited("staging"),
    )
    refused = tool_messages(out)["deploy"]
    assert refused.status == "error"
    assert refused.content == (
        "deploy was not run: approved by alice with an edited input that is not a set of "
        'arguments ("staging")'
    )
    assert tools.ran == []


async def test_a_stopped_run_runs_nothing_and_says_so(api: Served, alice: sdk.Workspace) -> None:
    """A person stops the thread's run while a call waits: that call, and every later one of
    the thread, comes back as a ToolMessage saying why; nothing runs, the agent finishes."""
    tools = Tools()
    middleware = ApprovalMiddleware(**keywords(api))

    async def stop_the_run() -> None:
        decision = await next_decision(alice)
        await alice.runs.run(decision.run_id).stop()

    graph = agent(calls(("deploy", {"env": "prod"})), tools, middleware)
    out = await with_person(graph.ainvoke({"messages": [("user", "ship")]}, thread("st1")),
                            stop_the_run)  # fmt: skip
    stopped = tool_messages(out)["deploy"]
    assert stopped.status == "error"
    assert str(stopped.content).startswith("deploy was not run: the approvalbot run was stopped")
    graph = agent(calls(("lookup", {"name": "x"})), tools, middleware)
    out = await asyncio.to_thread(graph.invoke, {"messages": [("user", "go")]}, thread("st1"))
    later = tool_messages(out)["lookup"]
    assert later.status == "error" and str(later.content).startswith("lookup was not run:")
    assert "stopped" in str(later.content)
    assert tools.ran == []
