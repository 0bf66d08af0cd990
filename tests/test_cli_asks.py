"""`/asks` pages (limit, opaque cursor), the SDK and `approvalbot asks` following them, decisions
from the CLI recorded `via: "cli"`, the asks table and its hints, and runs that end: the SDK's
run context and the demo agent stop their runs."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner, Result

from adapters.http import client as sdk
from adapters.http.sync_client import SyncClient
from bot.cli import main
from bot.cli.demo import DEMO_PROFILE, demo_title, run_demo
from bot.service import CallSpec, RunSpec
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")

server, api = fixtures(backends=["sqlite", "postgres"])


def invoke(*args: str, env: dict[str, str]) -> Awaitable[Result]:
    """`approvalbot …` through click's runner in a worker thread (it runs its own loop)."""
    return asyncio.to_thread(CliRunner().invoke, main, list(args), env=env)


def member_env(api: Served, who: str = "alice", **more: str) -> dict[str, str]:
    env = {"APPROVALBOT_URL": api.url, "APPROVALBOT_TOKEN": api.token(who)}
    return env | {"APPROVALBOT_WORKSPACE": api.ws} | more


async def park(api: Served, count: int, title: str = "") -> str:
    """A run with `count` calls waiting on people, made through the core (fast)."""
    service = api.core.service
    agent = await api.core.admin.authenticate(api.token("agent"))
    assert agent is not None
    run = await service.declare_run(agent, api.ws, RunSpec(approval_mode="ask", title=title))
    for n in range(count):
        spec = CallSpec("bash", {"command": f"echo {n}"}, key=f"k{n:04d}")
        await service.append(agent, api.ws, run.id, spec)
    return run.id


async def page(api: Served, query: str) -> tuple[int, Any]:
    return await api.call("GET", f"/asks{query}", "alice")


# paging -----------------------------------------------------------------------------------------
async def test_asks_pages_see_each_decision_once_while_more_arrive(api: Served) -> None:
    run_id = await park(api, 250)
    seen: list[str] = []
    cursor = ""
    pages = 0
    while True:
        status, body = await page(api, f"?limit=100{cursor}")
        assert status == 200, body
        pages += 1
        seen += [a["key"] for a in body["asks"]]
        if body["next_cursor"] is None:
            break
        cursor = f"&cursor={body['next_cursor']}"
        # newer ones park between pages: they are newer than the cursor, so they shift nothing
        agent = await api.core.admin.authenticate(api.token("agent"))
        assert agent is not None
        spec = CallSpec("bash", {"command": "late"}, key=f"late{pages}")
        await api.core.service.append(agent, api.ws, run_id, spec)
    assert pages == 3
    assert len(seen) == len(set(seen)) == 250
    assert set(seen) == {f"k{n:04d}" for n in range(250)}


async def test_asks_default_and_maximum_limit(api: Served) -> None:
    await park(api, 120)
    status, body = await page(api, "")
    assert status == 200 and len(body["asks"]) == 100 and body["next_cursor"]
    status, body = await page(api, "?limit=500")
    assert status == 200 and len(body["asks"]) == 120 and body["next_cursor"] is None


@pytest.mark.parametrize("limit", ["0", "501", "-1", "ten", "1.5", "٣"])
async def test_a_bad_limit_is_a_400(api: Served, limit: str) -> None:
    status, body = await page(api, f"?limit={limit}")
    assert status == 400 and body["error"]["code"] == "invalid_limit", body


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not-base64!",
        _b64(b"{}"),
        _b64(b'["2026-01-01T00:00:00", "tsk_1"]'),  # no time zone
        _b64(b'["yesterday", "tsk_1"]'),
        _b64(b'["2026-01-01T00:00:00+00:00", "a b"]'),
        _b64(b"\xff\xfe"),
        "A" * 300,
    ],
)
async def test_a_bad_cursor_is_a_400(api: Served, cursor: str) -> None:
    status, body = await page(api, f"?cursor={cursor}")
    assert status == 400 and body["error"]["code"] == "invalid_cursor", body


async def test_the_sdk_and_the_cli_follow_the_cursor(
    api: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    await park(api, 230)
    async with sdk.Client(api.url, api.token("alice")) as client:
        workspace = client.workspace(api.ws)
        first = await workspace.asks_page(limit=100)
        assert len(first.asks) == 100 and first.next_cursor
        keys = [a.key async for a in workspace.each_ask(page=100)]
        assert len(keys) == len(set(keys)) == 230
        assert len(await workspace.asks()) == 230
        assert len(await workspace.decisions.list()) == 230

    def blocking() -> int:  # off the loop: the served app runs on this test's loop
        with SyncClient(api.url, api.token("alice")) as client:
            return len(client.workspace(api.ws).asks())

    assert await asyncio.to_thread(blocking) == 230
    # The CLI reads every page too: with pages of 100 it still lists all 230.
    monkeypatch.setattr(sdk, "ASKS_PAGE", 100)
    listed = await invoke("asks", "--json", env=member_env(api))
    assert listed.exit_code == 0, listed.output
    assert len({item["key"] for item in json.loads(listed.output)}) == 230


# via --------------------------------------------------------------------------------------------
async def test_decisions_from_the_cli_are_recorded_via_cli(api: Served) -> None:
    run_id = await park(api, 3)
    listed = await invoke("asks", "--json", env=member_env(api))
    ids = {item["key"]: item["id"] for item in json.loads(listed.output)}
    approved = await invoke("asks", "approve", ids["k0000"], env=member_env(api))
    denied = await invoke("asks", "deny", ids["k0001"], "--reason", "no", env=member_env(api))
    assert (approved.exit_code, denied.exit_code) == (0, 0), approved.output + denied.output
    # Other HTTP callers: no header, or a surface the API may not claim, are `api`.
    status, _ = await api.call(
        "POST", f"/runs/{run_id}/tasks/k0002/approve", "alice",
        headers={sdk.SURFACE_HEADER: "telegram"},
    )  # fmt: skip
    assert status == 200
    tasks = {t.key: t for t in await api.core.store.tasks(api.ws, run_id=run_id)}
    assert [tasks[k].via for k in ("k0000", "k0001", "k0002")] == ["cli", "cli", "api"]
    assert tasks["k0000"].resolved_by == "alice"


# the table and its hints ------------------------------------------------------------------------
async def test_the_table_is_one_line_per_decision_and_json_is_for_machines(api: Served) -> None:
    agent = await api.core.admin.authenticate(api.token("agent"))
    assert agent is not None
    service = api.core.service
    title = "a very long title for the release run " * 3
    run = await service.declare_run(agent, api.ws, RunSpec(approval_mode="ask", title=title))
    long_command = "make deploy \\\n  ENV=prod " + "VERBOSE=1 " * 40
    for key, tool, tool_input in (
        ("deploy", "bash", {"command": long_command}),
        ("edit", "Edit", {"file_path": "shop/__init__.py", "old_string": "a", "new_string": "b"}),
        ("region", "ask", {"prompt": "Which region?\nPick one.", "options": ["eu", "us"]}),
    ):
        await service.append(agent, api.ws, run.id, CallSpec(tool, tool_input, key=key))
    result = await invoke("asks", env=member_env(api, COLUMNS="120"))
    assert result.exit_code == 0, result.output
    lines = result.output.rstrip("\n").splitlines()
    assert all(len(line) <= 120 for line in lines), result.output
    machine = json.loads((await invoke("asks", "--json", env=member_env(api))).output)
    rows = {item["key"]: item for item in machine}
    assert rows["deploy"]["tool_input"] == {"command": long_command}  # whole, for machines
    for key, words in (
        ("deploy", "bash make deploy \\ ENV=prod VERBOSE=1"),
        ("edit", "Edit shop/__init__.py"),
        ("region", "Which region? Pick one."),
    ):
        row = [line for line in lines if line.startswith(rows[key]["id"] + " ")]
        assert len(row) == 1, result.output  # the whole id, at the start of its one line
        assert words in row[0]
    assert "{" not in result.output and '"command"' not in result.output


async def test_approve_on_a_question_says_how_to_answer_it(api: Served) -> None:
    agent = await api.core.admin.authenticate(api.token("agent"))
    assert agent is not None
    service = api.core.service
    run = await service.declare_run(agent, api.ws, RunSpec(approval_mode="ask"))
    question = {"prompt": "Region?", "options": ["eu", "us"]}
    await service.append(agent, api.ws, run.id, CallSpec("ask", question, key="region"))
    await service.append(agent, api.ws, run.id, CallSpec("ask", {"prompt": "Why?"}, key="why"))
    await service.append(agent, api.ws, run.id, CallSpec("bash", {"command": "ls"}, key="ls"))
    listed = json.loads((await invoke("asks", "--json", env=member_env(api))).output)
    ids = {item["key"]: item["id"] for item in listed}
    env = member_env(api)
    region = await invoke("asks", "approve", ids["region"], env=env)
    assert region.exit_code == 2
    assert f"use: approvalbot asks answer {ids['region']} OPTION  (one of: eu, us)" in region.output
    why = await invoke("asks", "deny", ids["why"][:4], env=env)
    assert f'use: approvalbot asks answer {ids["why"]} "TEXT"' in why.output
    assert f"approvalbot asks answer {ids['why']} --decline" in why.output
    call = await invoke("asks", "answer", ids["ls"], "yes", env=env)
    assert f"use: approvalbot asks approve {ids['ls']}" in call.output
    tasks = {t.key: t for t in await api.core.store.tasks(api.ws, run_id=run.id)}
    assert {t.state for t in tasks.values()} == {"awaiting_input", "needs_approval"}  # untouched
    answered = await invoke("asks", "answer", ids["region"], "eu", env=env)
    assert answered.exit_code == 0 and answered.output.startswith(f"answered {ids['region']}")


# runs end ---------------------------------------------------------------------------------------
async def test_the_sdk_run_context_stops_the_run_on_exit_and_on_error(api: Served) -> None:
    async with sdk.Client(api.url, api.token("agent")) as client:
        runs = client.workspace(api.ws).runs
        async with runs.declare(approval_mode="ask", title="normal") as run:
            assert (await run.get()).state == "running"
            receipt = await run.append("bash", {"command": "make deploy"})
            assert receipt.parked
        assert (await run.get()).state == "stopped"
        assert (await run.task(receipt.key)).state == "cancelled"  # nothing left waiting

        class Boom(Exception):
            pass

        with pytest.raises(Boom):
            async with runs.declare(approval_mode="ask", title="failing") as failing:
                raise Boom
        assert (await failing.get()).state == "stopped"

        plain = await runs.declare(approval_mode="ask")  # awaited, not a context: it runs on
        assert (await plain.get()).state == "running"
        async with plain:
            await plain.stop()  # stopped inside the block already: the exit's stop is a no-op
        assert (await plain.get()).state == "stopped"


async def test_the_sync_run_context_stops_the_run(api: Served) -> None:
    def agent() -> list[str]:
        states = []
        with SyncClient(api.url, api.token("agent")) as client:
            runs = client.workspace(api.ws).runs
            with runs.declare(approval_mode="ask") as run:
                states.append(run.get().state)
            states.append(run.get().state)
            with pytest.raises(KeyError), runs.declare(approval_mode="ask") as failing:
                raise KeyError("boom")
            states.append(failing.get().state)
        return states

    # off the loop: the served app runs on this test's loop
    assert await asyncio.to_thread(agent) == ["running", "stopped", "stopped"]


async def test_the_demo_stops_its_run_and_titles_each_apart(api: Served) -> None:
    said: list[str] = []
    async with sdk.Client(api.url, api.token("agent")) as client:
        # Nobody decides: the agent gives up after its timeout and its run ends.
        await run_demo(client, api.ws, api.url, DEMO_PROFILE, said.append, timeout=0.5)
    run_id = re.search(r"run (run_\S+) declared", "\n".join(said))
    assert run_id is not None
    async with api.core.store.read() as tx:
        run = await tx.get_run(run_id.group(1))
    assert run is not None and run.state == "stopped" and run.title.startswith("demo: ")
    assert f"demo agent: run {run.id} stopped" in said
    tasks = await api.core.store.tasks(api.ws, run_id=run.id)
    assert not [t for t in tasks if t.parked]
    assert demo_title(datetime(2026, 1, 1, 9, tzinfo=UTC)) != demo_title(
        datetime(2026, 1, 1, 9, 0, 1, tzinfo=UTC)
    )


async def test_the_table_masks_what_an_agent_wrote(api: Served) -> None:
    """Issue 21 (11): a secret in a run's title or a call's command never reaches the
    terminal's table (masked as on every other surface)."""
    agent = await api.core.admin.authenticate(api.token("agent"))
    assert agent is not None
    service = api.core.service
    token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
    key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    run = await service.declare_run(
        agent, api.ws, RunSpec(approval_mode="ask", title=f"release with {token}")
    )
    command = f"AWS_SECRET_ACCESS_KEY={key} aws s3 ls"
    await service.append(agent, api.ws, run.id, CallSpec("bash", {"command": command}, key="s3"))
    result = await invoke("asks", env=member_env(api, COLUMNS="200"))
    assert result.exit_code == 0, result.output
    assert token not in result.output and token[:12] not in result.output
    assert key not in result.output and key[:8] not in result.output
    assert "ghp_****" in result.output or "release with" in result.output
