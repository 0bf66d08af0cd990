"""The admin and asks commands, run for real in subprocesses (independent ones side by side:
each pays the interpreter's start-up); refusal paths go through click's runner in-process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.admin import Admin
from bot.cli import main
from bot.clock import SystemClock
from store.sql import SqlStore
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
# The asks command only speaks HTTP; the store behind the server is covered by the API tests.
server, api = fixtures(backends=["sqlite"])

ENTRY = [sys.executable, "-c", "from bot.cli import main; main()"]
ROOT = str(Path(__file__).resolve().parents[1])


async def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *ENTRY, *args,
        env=os.environ | (env or {}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def in_process(*args: str, env: dict[str, str] | None = None) -> Awaitable[Result]:
    """The same command through click's runner, in a worker thread (it runs its own event
    loop): for the refusal paths, which need no fresh interpreter to be believed."""
    return asyncio.to_thread(CliRunner().invoke, main, list(args), env=env)


async def test_admin_commands(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/admin.db"
    env = {"APPROVALBOT_STORE__URL": url}
    code, out, _ = await cli("admin", "workspace", "create", "acme", "--json", env=env)
    assert (code, json.loads(out)) == (0, {"workspace": "acme"})
    (c1, alice, _), (c2, agent_text, err2) = await asyncio.gather(
        cli("admin", "member", "add", "--workspace", "acme", "--name", "alice",
            "--telegram-user-id", "42", "--slack-user-id", "U42", "--json", env=env),
        cli("admin", "app", "add", "--workspace", "acme", "--name", "agent", env=env),
    )  # fmt: skip
    assert (c1, c2) == (0, 0), err2
    issued = json.loads(alice)
    assert issued["member"] == "alice" and issued["token"].startswith("abm_")
    assert "application agent added to acme" in agent_text and "shown once" in err2
    agent_token = agent_text.split("token: ", 1)[1].strip()

    (c1, rotated, _), (c2, revoked, _) = await asyncio.gather(
        cli("admin", "token", "rotate", "--workspace", "acme", "--member", "alice", "--json",
            env=env),
        cli("admin", "token", "revoke", "--workspace", "acme", "--app", "agent", "--json",
            env=env),
    )  # fmt: skip
    assert (c1, c2) == (0, 0)
    new_token = json.loads(rotated)["token"]
    assert json.loads(revoked) == {"workspace": "acme", "application": "agent", "revoked": 1}

    for args, code, needle in (
        (("workspace", "create", "acme"), 1, "conflict: workspace acme exists"),
        (("workspace", "create", "Not Valid"), 1, "invalid_request"),
        (("member", "add", "--workspace", "nope", "--name", "x"), 1, "not_found"),
        (("token", "revoke", "--workspace", "acme"), 2, "--member NAME or --app NAME"),
        (("token", "rotate", "--workspace", "acme", "--member", "zed"), 1, "not_found"),
    ):
        result = await in_process("admin", *args, env=env)
        assert (result.exit_code, needle in result.output) == (code, True), result.output
    listed = await in_process("admin", "workspace", "list", "--json", env=env)
    assert json.loads(listed.output) == {"workspaces": ["acme"]}

    store = SqlStore(url)
    try:
        admin = Admin(store, SystemClock())
        assert await admin.authenticate(issued["token"]) is None
        assert await admin.authenticate(agent_token) is None
        alice_now = await admin.authenticate(new_token)
        assert alice_now is not None and alice_now.name == "alice"
        async with store.read() as tx:
            member = await tx.find_member("acme", name="alice")
        assert member is not None
        assert (member.telegram_user_id, member.slack_user_id) == (42, "U42")
        # tokens are stored hashed: no issued token appears in the database file
        raw = await asyncio.to_thread((tmp_path / "admin.db").read_bytes)
        assert new_token.encode() not in raw and agent_token.encode() not in raw
    finally:
        await store.close()


async def test_asks_lists_and_decides(api: Served) -> None:
    _, run = await api.call("POST", "/runs", body={"title": "release"})
    run_id = run["id"]
    for body in (
        {"key": "call", "tool_name": "bash", "tool_input": {"command": "make deploy"},
         "effect_profile": {"summary": "deploy prod", "effects": ["writes"], "risk": "high"}},
        {"key": "nope", "tool_name": "bash", "tool_input": {"command": "rm -rf /"}},
        {"key": "region", "tool_name": "ask",
         "tool_input": {"prompt": "Region?", "options": ["eu", "us"]}},
        {"key": "which", "tool_name": "ask",
         "tool_input": {"prompt": "Which?", "options": ["a", "b", "c"], "multi": True}},
        {"key": "why", "tool_name": "ask", "tool_input": {"prompt": "Why?"}},
    ):  # fmt: skip
        assert (await api.call("POST", f"/runs/{run_id}/tasks", body=body))[0] == 201
    env = {
        "APPROVALBOT_URL": api.url,
        "APPROVALBOT_TOKEN": api.token("alice"),
        "APPROVALBOT_WORKSPACE": api.ws,
        "COLUMNS": "200",
    }
    (code, listed, _), (table_code, table, _) = await asyncio.gather(
        cli("asks", "--json", env=env), cli("asks", env=env)
    )
    assert code == 0 and table_code == 0
    ids = {item["key"]: item["id"] for item in json.loads(listed)}
    assert set(ids) == {"call", "nope", "region", "which", "why"}
    assert all(len(short) == 6 for short in ids.values())
    for needle in (ids["call"], "approval", "question", "Region?", "eu, us", "deploy prod",
                   "risk=high", "release"):  # fmt: skip
        assert needle in table, needle

    results = await asyncio.gather(
        cli("asks", "approve", ids["call"], env=env),
        cli("asks", "deny", ids["nope"][:4], "--reason", "never on prod", env=env),
        cli("asks", "answer", ids["region"], "eu", env=env),
    )
    assert [r[0] for r in results] == [0] * 3, results
    assert results[0][1].startswith(f"approved {ids['call']}")
    assert results[1][1].startswith(f"denied {ids['nope']}")
    assert results[2][1].startswith(f"answered {ids['region']}")
    multi = await in_process("asks", "answer", ids["which"], "c", "a", env=env)
    declined = await in_process("asks", "--url", api.url, "answer", ids["why"], "--decline",
                                env=env)  # fmt: skip
    assert (multi.exit_code, declined.exit_code) == (0, 0), multi.output + declined.output
    assert declined.output.startswith("declined")
    tasks = {t.key: t for t in await api.core.store.tasks(api.ws, run_id=run_id)}
    assert (tasks["call"].state, tasks["call"].resolved_by, tasks["call"].via) == (
        "granted", "alice", "cli",
    )  # fmt: skip
    assert tasks["nope"].error == {"code": "approval_denied", "detail": "never on prod"}
    assert tasks["region"].resolution == {"content": "eu"}
    assert tasks["which"].resolution == {"content": ["a", "c"]}
    assert tasks["why"].error is not None and tasks["why"].error["code"] == "declined"

    for args, extra, code, needle in (
        ((), {}, 0, "nothing waits on people"),
        (("approve", ids["call"]), {}, 1, "decided already"),
        (("answer", "abc"), {}, 2, "an answer or --decline"),
        ((), {"APPROVALBOT_TOKEN": api.token("agent")}, 1, "member_credential_required"),
        ((), {"APPROVALBOT_TOKEN": ""}, 2, "a member token is needed"),
        ((), {"APPROVALBOT_URL": "http://127.0.0.1:9"}, 1, "cannot reach"),
    ):
        result = await in_process("asks", *args, env=env | extra)
        assert (result.exit_code, needle in result.output) == (code, True), result.output


async def test_login_link_signs_in_once(tmp_path: Path) -> None:
    from bot import logins

    url = f"sqlite+aiosqlite:///{tmp_path}/link.db"
    env = {"APPROVALBOT_STORE__URL": url, "APPROVALBOT_SERVER__PUBLIC_URL": "https://ab.example"}
    assert (await in_process("admin", "workspace", "create", "acme", env=env)).exit_code == 0
    made = await in_process(
        "admin", "member", "add", "--workspace", "acme", "--name", "ann", env=env
    )
    assert made.exit_code == 0
    code, out, _ = await cli(
        "admin", "login-link", "--workspace", "acme", "--member", "ann", "--json", env=env
    )
    link = json.loads(out)["link"]
    assert code == 0 and link.startswith("https://ab.example/login/abl_")
    store = SqlStore(url)
    try:
        token = link.rsplit("/", 1)[1]
        who = await logins.consume(store, SystemClock(), token)
        assert who is not None and who.name == "ann"
        assert await logins.consume(store, SystemClock(), token) is None  # single use
    finally:
        await store.close()
    refused = await in_process(
        "admin", "login-link", "--workspace", "acme", "--member", "zed", env=env
    )
    assert refused.exit_code == 1 and "not_found" in refused.output
