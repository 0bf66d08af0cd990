"""The two examples run against each other on a real server: the agent loop calls and asks, the
simple loop (driven by a scripted person) follows the feed and decides, editing one call; the
agent runs the edited input and its run context stops the run at the end."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_agent_loop_and_simple_loop(api: Served) -> None:
    agent_loop, simple_loop = load("agent_loop"), load("simple_loop")
    said: list[str] = []
    shown: list[str] = []
    declared = asyncio.Event()

    def say(line: str) -> None:
        said.append(line)
        if line.startswith("run "):
            declared.set()

    async def person(text: str) -> str:
        shown.append(text)
        if "answer>" in text:
            return "eu"
        if "reason" in text:
            return "not today"
        if text.startswith("  not JSON"):
            return '{"command": "make test-quick"}'
        if "edited input" in text:
            return "{command: make test-quick}"  # a typo first: asked again
        if "make test" in text:
            return "e"  # approve it edited
        return "n" if "deploy" in text else "y"

    agent = asyncio.create_task(agent_loop.main(api.url, api.token("agent"), api.ws, say))
    await asyncio.wait_for(declared.wait(), 5)
    run_id = said[0].split()[1]
    deciding = asyncio.create_task(
        simple_loop.main(api.url, api.token("alice"), api.ws, run_id, person)
    )
    try:
        assert await asyncio.wait_for(agent, 10) == "eu"
    finally:
        deciding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await deciding
    # The person edited `make test`: the agent ran what they approved, not its own input.
    assert any(
        "'make test'" in line and "(ran: make test-quick) (edited by alice)" in line
        for line in said
    ), said
    assert not any("(ran: make test)" in line for line in said)
    assert any("--force" in line and "refused: force push" in line for line in said)
    assert any("make deploy" in line and "refused: not today" in line for line in said)
    assert any("deploy to production (risk high)" in text for text in shown)
    assert any("Which region" in text and "options: eu, us" in text for text in shown)
    tasks = await api.core.store.tasks(api.ws, run_id=run_id)
    assert {t.resolved_by for t in tasks if t.via == "api"} == {"alice"}
    [edited] = [t for t in tasks if t.approved_input is not None]
    assert (edited.tool_input, edited.approved_input) == (
        {"command": "make test"},
        {"command": "make test-quick"},
    )
    # The agent loop's run context stopped its run when the loop ended.
    async with api.core.store.read() as tx:
        run = await tx.get_run(run_id)
    assert run is not None and run.state == "stopped"
