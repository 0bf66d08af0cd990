"""Approve always, edit before approve and the decision log over real HTTP (issue 15), on SQLite
and PostgreSQL: bodies, statuses and error codes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable

import pytest
from click.testing import CliRunner, Result

from bot.cli import main
from bot.config import ProfileConfig, Settings
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
# A shell path (issue 20): a `command` of `bash` is judged, and proposed for, command by command.
SHELL = [{"tool": "bash", "path": "command"}]
OPS = ProfileConfig(
    approval_mode="ask",
    shell_commands=SHELL,
    approval_rules=[
        {"tool": "bash", "verdict": "deny", "path": "command", "match": "rm *", "reason": "no"}
    ],
)
server, api = fixtures(Settings(profiles={"ops": OPS}))
PUSH = {"command": "git push origin main"}


async def parked(api: Served, key: str = "k1", tool_input: object = PUSH, **run: object) -> str:
    status, body = await api.call("POST", "/runs", "agent", run or {"profile": "ops"})
    assert status == 201, body
    run_id = str(body["id"])
    task = {"key": key, "tool_name": "bash", "tool_input": tool_input}
    status, body = await api.call("POST", f"/runs/{run_id}/tasks", "agent", task)
    assert (status, body["state"]) == (201, "needs_approval"), body
    return run_id


async def test_proposal(api: Served) -> None:
    old = await parked(api, "old", {"command": "git push origin dev"})
    run_id = await parked(api)
    status, body = await api.call("GET", f"/runs/{run_id}/tasks/k1/proposal", "alice")
    assert status == 200, body
    assert body["rule"] == {
        "tool": "bash",
        "verdict": "allow",
        "path": "command",
        "match": "git push *",
    }
    assert body["rules"] == [body["rule"]]
    [past] = body["would_allow"]
    assert set(past) == {"run_id", "key", "tool", "summary", "state", "at"}
    assert (past["run_id"], past["key"], past["state"]) == (old, "old", "needs_approval")
    assert past["summary"] == "bash: git push origin dev"
    status, body = await api.call("GET", f"/runs/{run_id}/tasks/k1/proposal", "agent")
    assert (status, body["error"]["code"]) == (403, "member_credential_required")
    status, body = await api.call("GET", f"/runs/{run_id}/tasks/nope/proposal", "alice")
    assert (status, body["error"]["code"]) == (404, "not_found")
    await api.call("POST", f"/runs/{run_id}/tasks/k1/approve", "alice", {})
    status, body = await api.call("GET", f"/runs/{run_id}/tasks/k1/proposal", "alice")
    assert (status, body["error"]["code"]) == (409, "already_decided")


async def test_approve_and_allow_then_list_and_remove(api: Served) -> None:
    run_id = await parked(api)
    approve = f"/runs/{run_id}/tasks/k1/approve"
    for body, status, code in (
        ({"allow": {"scope": "run", "rule": {"tool": "bash", "mtach": "x"}}}, 422, "invalid_rules"),
        ({"allow": {"scope": "run", "rule": {"tool": "write"}}}, 422, "rule_does_not_match"),
        ({"allow": {"scope": "run", "rule": {"tool": "bash", "verdict": "deny"}}}, 422,
         "invalid_rules"),
        ({"allow": {"scope": "forever"}}, 422, "invalid_request"),
        ({"allow": {"scope": "run", "extra": 1}}, 422, "invalid_request"),
        ({"tool_input": {"command": "rm -rf /"}}, 422, "approval_denied"),
    ):  # fmt: skip
        answer_status, answer = await api.call("POST", approve, "alice", body)
        assert (answer_status, answer["error"]["code"]) == (status, code), (body, answer)
    _, answer = await api.call("POST", approve, "alice", {"allow": {"scope": "run", "rule": {
        "tool": "bash", "mtach": "x"}}})  # fmt: skip
    assert "allow.rule.mtach: unknown key" in answer["error"]["detail"]
    status, task = await api.call("GET", f"/runs/{run_id}/tasks/k1", "agent")
    assert task["state"] == "needs_approval"  # every refusal left it parked

    status, task = await api.call("POST", approve, "alice", {"allow": {"scope": "profile"}})
    assert (status, task["state"], task["approved_input"]) == (200, "granted", None)
    later = await parked(api, "k9", {"command": "ls"})  # another command: still parks
    status, body = await api.call(
        "POST",
        f"/runs/{later}/tasks",
        "agent",
        {"key": "k2", "tool_name": "bash", "tool_input": {"command": "git push x y"}},
    )
    assert body["state"] == "granted"

    status, body = await api.call("GET", "/rules/learned", "bob")
    assert status == 200
    [rule] = body["rules"]
    assert set(rule) == {"id", "rule", "scope", "profile", "run_id", "added_by", "from", "at"}
    assert (rule["scope"], rule["profile"], rule["run_id"]) == ("profile", "ops", None)
    assert (rule["added_by"], rule["from"]) == ("alice", {"run_id": run_id, "key": "k1"})
    assert (await api.call("GET", "/rules/learned", "agent"))[0] == 403
    assert (await api.call("DELETE", f"/rules/learned/{rule['id']}", "agent"))[0] == 403
    assert (await api.call("DELETE", f"/rules/learned/{rule['id']}", "bob")) == (204, None)
    status, body = await api.call("DELETE", f"/rules/learned/{rule['id']}", "bob")
    assert (status, body["error"]["code"]) == (404, "not_found")
    assert (await api.call("DELETE", "/rules/learned/bad%00id", "bob"))[0] == 404
    assert (await api.call("GET", "/rules/learned", "bob"))[1] == {"rules": []}
    # Another workspace sees none of it.
    assert (await api.call("GET", "/rules/learned", "carol", ws=api.beta))[1] == {"rules": []}


async def test_a_compound_lines_rules_are_proposed_and_learned_together(api: Served) -> None:
    """On a shell path a line of two commands gets a rule for each (issue 20); off one, the
    exact text."""
    line = {"command": "git push origin main && npm publish"}
    run_id = await parked(api, tool_input=line, approval_mode="ask", shell_commands=SHELL)
    status, body = await api.call("GET", f"/runs/{run_id}/tasks/k1/proposal", "alice")
    assert status == 200, body
    push = {"tool": "bash", "verdict": "allow", "path": "command", "match": "git push *"}
    publish = {"tool": "bash", "verdict": "allow", "path": "command", "match": "npm publish"}
    assert (body["rule"], body["rules"]) == (push, [push, publish])
    approve = f"/runs/{run_id}/tasks/k1/approve"
    status, task = await api.call("POST", approve, "alice", {"allow": {"scope": "run"}})
    assert (status, task["state"]) == (200, "granted"), task
    _, listed = await api.call("GET", "/rules/learned", "bob")
    assert sorted(r["rule"]["match"] for r in listed["rules"]) == ["git push *", "npm publish"]
    assert {(r["run_id"], r["from"]["key"]) for r in listed["rules"]} == {(run_id, "k1")}
    for key, command, state in (
        ("k2", "git push origin dev && npm publish", "granted"),
        ("k3", "git push origin dev && rm -rf build", "needs_approval"),
    ):
        task = {"key": key, "tool_name": "bash", "tool_input": {"command": command}}
        status, body = await api.call("POST", f"/runs/{run_id}/tasks", "agent", task)
        assert (status, body["state"]) == (201, state), body

    plain = await parked(api, "k1", line, approval_mode="ask")
    _, body = await api.call("GET", f"/runs/{plain}/tasks/k1/proposal", "alice")
    exact = {"tool": "bash", "verdict": "allow", "path": "command", "match": line["command"]}
    assert (body["rule"], body["rules"]) == (exact, [exact])


async def test_no_profile_for_a_run_without_one(api: Served) -> None:
    run_id = await parked(api, approval_mode="ask")
    status, body = await api.call(
        "POST", f"/runs/{run_id}/tasks/k1/approve", "alice", {"allow": {"scope": "profile"}}
    )
    assert (status, body["error"]["code"]) == (422, "no_profile")


async def test_edit_before_approve(api: Served) -> None:
    run_id = await parked(api)
    edit = {"command": "git push origin feature"}
    status, task = await api.call(
        "POST", f"/runs/{run_id}/tasks/k1/approve", "alice", {"tool_input": edit}
    )
    assert status == 200, task
    assert (task["state"], task["tool_input"], task["approved_input"]) == ("granted", PUSH, edit)
    status, task = await api.call("GET", f"/runs/{run_id}/tasks/k1", "agent")
    assert task["approved_input"] == edit
    # An edit to null would read "not edited" and run the proposed input: refused.
    other = await parked(api)
    status, body = await api.call(
        "POST", f"/runs/{other}/tasks/k1/approve", "alice", {"tool_input": None}
    )
    assert (status, body["error"]["code"]) == (422, "invalid_request")
    assert (await api.call("GET", f"/runs/{other}/tasks/k1", "agent"))[1]["state"] == (
        "needs_approval"
    )


async def test_the_decision_log(api: Served) -> None:
    run_id = await parked(api)
    await api.call("POST", f"/runs/{run_id}/tasks/k1/approve", "alice", {"allow": {"scope": "run"}})
    other = await parked(api)
    status, body = await api.call("GET", f"/log?run_id={run_id}", "bob")
    assert status == 200, body
    entries = body["entries"]
    assert [e["action"] for e in entries] == ["run_declared", "parked", "approved", "learned_rule"]
    assert set(entries[0]) == {
        "id", "at", "action", "actor", "via", "run_id", "task_key", "detail",
    }  # fmt: skip
    assert body["next_after"] is None
    learned = entries[-1]
    assert (learned["actor"], learned["task_key"], learned["detail"]["scope"]) == (
        "alice",
        "k1",
        "run",
    )
    status, body = await api.call("GET", f"/log?after={entries[-1]['id']}", "bob")
    assert {e["run_id"] for e in body["entries"]} == {other}
    for bad in ("after=-1", "after=x", "after=2147483648", "after=9999999999", "run_id=a%20b"):
        status, body = await api.call("GET", f"/log?{bad}", "bob")
        assert (status, body["error"]["code"]) == (422, "invalid_request"), bad
    assert (await api.call("GET", "/log", "agent"))[0] == 403
    assert (await api.call("GET", "/log", "carol", ws=api.beta))[1]["entries"] == []


async def test_cli_rules_learned(api: Served) -> None:
    def invoke(*args: str) -> Awaitable[Result]:
        env = {"APPROVALBOT_URL": api.url, "APPROVALBOT_TOKEN": api.token("bob")}
        env["APPROVALBOT_WORKSPACE"] = api.ws
        return asyncio.to_thread(CliRunner().invoke, main, ["rules", "learned", *args], env=env)

    assert (await invoke()).output == "no learned rules\n"
    run_id = await parked(api)
    await api.call("POST", f"/runs/{run_id}/tasks/k1/approve", "alice", {"allow": {"scope": "run"}})
    listed = await invoke()
    assert listed.exit_code == 0, listed.output
    [line] = listed.output.splitlines()
    rule_id = line.split()[0]
    assert '"match": "git push *"' in line and f"run {run_id}" in line
    assert f"by alice from {run_id}/k1" in line
    [shown] = json.loads((await invoke("--json")).output)
    assert (shown["id"], shown["scope"]) == (rule_id, "run")
    removed = await invoke("--remove", rule_id)
    assert (removed.exit_code, removed.output) == (0, f"removed {rule_id}\n")
    again = await invoke("--remove", rule_id)
    assert again.exit_code == 1 and "not_found" in again.output
    assert (await invoke()).output == "no learned rules\n"


async def test_proposal_for_an_edit_or_a_persons_rule(api: Served) -> None:
    from urllib.parse import quote

    await parked(api, "old", {"command": "git fetch origin dev"})
    run_id = await parked(api)
    tail = f"/runs/{run_id}/tasks/k1/proposal"
    edit = quote(json.dumps({"command": "git fetch origin main"}))
    status, body = await api.call("GET", f"{tail}?tool_input={edit}", "alice")
    assert status == 200, body
    assert body["rule"]["match"] == "git fetch *"
    assert [p["key"] for p in body["would_allow"]] == ["old"]
    mine = quote(json.dumps({"tool": "bash", "path": "command", "match": "git *"}))
    status, body = await api.call("GET", f"{tail}?rule={mine}", "alice")
    assert (status, body["rule"]["verdict"]) == (200, "allow")
    assert [p["key"] for p in body["would_allow"]] == ["old"]
    for query, code in (
        ("rule=%7Bnope", "invalid_request"),
        (f"rule={quote(json.dumps({'tool': 'bash', 'mtach': 'x'}))}", "invalid_rules"),
        (f"rule={quote(json.dumps({'tool': 'write'}))}", "rule_does_not_match"),
        (f"tool_input={quote(json.dumps({'command': 'rm -rf /'}))}", "approval_denied"),
        ("tool_input=%22a%5Cu0000%22", "invalid_request"),
    ):
        status, body = await api.call("GET", f"{tail}?{query}", "alice")
        assert (status, body["error"]["code"]) == (422, code), (query, body)
    _, body = await api.call("GET", f"{tail}?rule={quote(json.dumps({'mtach': 1}))}", "alice")
    assert "rule.mtach: unknown key" in body["error"]["detail"]
