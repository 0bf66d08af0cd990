"""`shell_commands` over the API (issue 20), on SQLite and PostgreSQL: declared on a run and in
a profile, shown on the run, refused with a stable code, inherited, and judged on every call."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from bot.config import ProfileConfig, Settings
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
BASH = {"tool": "bash", "path": "command"}
SHELLY = ProfileConfig(
    approval_mode="ask",
    approval_rules=[
        {"tool": "bash", "path": "command", "match": "git push *", "verdict": "allow"},
        {"tool": "bash", "path": "command", "match": "ls*", "verdict": "allow"},
        {
            "tool": "bash",
            "path": "command",
            "match": "rm *",
            "verdict": "deny",
            "reason": "no deletes",
        },
    ],
    shell_commands=[BASH],
)
server, api = fixtures(Settings(profiles={"shelly": SHELLY}))


async def declare(api: Served, **body: Any) -> dict[str, Any]:
    status, run = await api.call("POST", "/runs", "agent", body)
    assert status == 201, run
    return dict(run)


async def call(api: Served, run_id: str, line: str, key: str) -> dict[str, Any]:
    body = {"key": key, "tool_name": "bash", "tool_input": {"command": line}}
    status, task = await api.call("POST", f"/runs/{run_id}/tasks", "agent", body)
    assert status == 201, task
    return dict(task)


async def test_a_run_declares_and_shows_its_shell_commands(api: Served) -> None:
    rules = SHELLY.approval_rules
    run = await declare(api, approval_rules=rules, shell_commands=[BASH])
    assert run["shell_commands"] == [BASH]
    status, again = await api.call("GET", f"/runs/{run['id']}")
    assert status == 200 and again["shell_commands"] == [BASH]
    plain = await declare(api, approval_rules=rules)
    assert plain["shell_commands"] == []

    chained = await call(api, run["id"], "git push origin main && rm -rf ~", "k1")
    assert chained["state"] == "failed"
    assert chained["error"] == {"code": "approval_denied", "detail": "no deletes"}
    parked = await call(api, run["id"], "ls -la && make deploy", "k2")
    assert parked["state"] == "needs_approval"
    rows = parked["effect_profile"]["commands"]
    assert [(r["text"], r.get("marked", False)) for r in rows] == [
        ("ls -la", False),
        ("make deploy", True),
    ]
    granted = await call(api, run["id"], "ls -la | ls", "k3")
    assert granted["state"] == "granted"
    # the seed's contract where the run did not opt in
    assert (await call(api, plain["id"], "git push x && rm -rf ~", "k1"))["state"] == "granted"


@pytest.mark.parametrize(
    ("shell", "problem"),
    [
        ([{"tool": "bash", "pth": "command"}], "shell_commands[0].pth: unknown key"),
        ([BASH, {"tool": "bash"}], "shell_commands[1].path: required"),
        ([{"tool": "a||b", "path": "command"}], "shell_commands[0].tool: empty glob"),
        ([BASH] * 17, "shell_commands: at most 16 entries"),
        ("bash:command", "shell_commands: Input should be a valid array"),
    ],
)
async def test_an_invalid_entry_is_422_invalid_request_naming_it(
    api: Served, shell: Any, problem: str
) -> None:
    status, body = await api.call("POST", "/runs", "agent", {"shell_commands": shell})
    assert status == 422, body
    error = body["error"]
    assert error["code"] == "invalid_request" and problem in error["detail"], body


async def test_a_run_adds_to_its_profiles_entries_and_never_drops_them(api: Served) -> None:
    run = await declare(api, profile="shelly")
    assert run["shell_commands"] == [BASH]
    emptied = await declare(api, profile="shelly", shell_commands=[])
    assert emptied["shell_commands"] == [BASH]
    script = {"tool": "run_script", "path": "script"}
    more = await declare(api, profile="shelly", shell_commands=[script, BASH])
    assert more["shell_commands"] == [BASH, script]
    # a continuation keeps its parent's
    child = await declare(api, parent_run=more["id"])
    assert child["shell_commands"] == [BASH, script]
    assert (await call(api, child["id"], "ls; rm -rf ~", "k1"))["state"] == "failed"


async def test_an_agent_cannot_supply_the_commands_a_card_lists(api: Served) -> None:
    run = await declare(api, profile="shelly")
    fake = {"commands": [{"text": "ls", "outcome": "granted", "why": "fine"}], "risk": "low"}
    body = {
        "key": "k1",
        "tool_name": "bash",
        "tool_input": {"command": "make deploy"},
        "effect_profile": fake,
    }
    status, task = await api.call("POST", f"/runs/{run['id']}/tasks", "agent", body)
    assert status == 201 and task["state"] == "needs_approval"
    assert task["effect_profile"] == {"risk": "low"}


async def test_a_profile_with_an_invalid_entry_is_refused_at_start() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(profiles={"bad": {"shell_commands": [{"tool": "bash", "pth": "x"}]}})  # type: ignore[dict-item]
    assert "shell_commands[0].pth: unknown key" in str(refused.value)
