"""What the framework bridges' tests share: a real approvalbot server whose profile `fw-rules`
grants `lookup`, refuses `drop_table` and asks a person about everything else; a person (alice)
who decides over the API; a closed port for "the service is unreachable"."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio

from adapters.frameworks.gate import close_gates
from adapters.http import client as sdk
from adapters.http.models import TaskOut
from bot.config import ProfileConfig, Settings
from tests.http_harness import Served, fixtures

RULES = "fw-rules"
NO_DROPS = "no dropping tables in this workspace"
FW_RULES = ProfileConfig(
    approval_mode="ask",
    approval_rules=[
        {"tool": "ask", "verdict": "allow"},
        {"tool": "lookup|Read", "verdict": "allow", "reason": "reads are fine"},
        {"tool": "drop_table", "verdict": "deny", "reason": NO_DROPS},
        {"tool": "Bash", "path": "command", "match": "rm -rf*", "verdict": "deny",
         "reason": "no recursive deletes"},
    ],
)  # fmt: skip


# Editing before approving is newer than the bridges: where the service cannot yet, skip.
needs_editing = pytest.mark.skipif(
    "approved_input" not in TaskOut.model_fields, reason="the service has no approved_input yet"
)


def framework_fixtures() -> tuple[Any, Any]:
    """`server, api = framework_fixtures()`: the bridges talk HTTP only, so one backend."""
    return fixtures(Settings(profiles={RULES: FW_RULES}), backends=["sqlite"])


def keywords(api: Served, token: str = "agent", profile: str | None = RULES) -> dict[str, Any]:
    """The bridge keywords for the test's workspace."""
    return {
        "url": api.url,
        "token": api.tokens.get(token, token),
        "workspace": api.ws,
        "profile": profile,
    }


def closed_port() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest_asyncio.fixture(loop_scope="module")
async def alice(api: Served) -> AsyncIterator[sdk.Workspace]:
    async with sdk.Client(api.url, api.token("alice")) as client:
        yield client.workspace(api.ws)
    close_gates()


async def next_decision(alice: sdk.Workspace) -> sdk.Decision:
    """Wait until something rests on alice; the oldest of it."""
    for _ in range(500):
        found = await alice.decisions.list()
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError("nothing to decide")


class Person:
    """alice deciding what rests on her, one decision after another, as the agent waits."""

    def __init__(self, alice: sdk.Workspace) -> None:
        self.alice = alice
        self.seen: list[sdk.Decision] = []

    async def approve(self) -> sdk.Decision:
        decision = await next_decision(self.alice)
        self.seen.append(decision)
        await decision.approve()
        return decision

    async def deny(self, reason: str) -> sdk.Decision:
        decision = await next_decision(self.alice)
        self.seen.append(decision)
        await decision.deny(reason)
        return decision

    async def approve_edited(self, tool_input: Any) -> sdk.Decision:
        """Approve with an edited input (`POST …/approve {"tool_input": …}`)."""
        decision = await next_decision(self.alice)
        self.seen.append(decision)
        path = f"{self.alice.base}/runs/{decision.run_id}/tasks/{decision.key}/approve"
        await self.alice.client.request("POST", path, {"tool_input": tool_input})
        return decision

    async def answer(self, content: Any) -> sdk.Decision:
        decision = await next_decision(self.alice)
        self.seen.append(decision)
        assert decision.is_question
        await decision.answer(content)
        return decision


async def with_person(agent_side: Awaitable[Any], *steps: Callable[[], Awaitable[Any]]) -> Any:
    """The agent runs while a person takes `steps` in turn; the agent's result."""
    waiting = asyncio.ensure_future(agent_side)
    for step in steps:
        await asyncio.wait_for(step(), 15)
    return await asyncio.wait_for(waiting, 15)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """An example as a module (not run): its `main(url, token, workspace, say)`."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
