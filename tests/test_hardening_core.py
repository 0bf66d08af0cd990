"""Hardening of the core, on SQLite and PostgreSQL: retries that always fit and never collide,
what the store cannot hold refused by name, origins earned by the credential, executors named
only by their own application, and the one place that checks access (bot/access.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bot import access
from bot.admin import Admin
from bot.cli import main
from bot.decisions import KEY_PATTERN
from bot.domain import Principal
from bot.errors import ApprovalError
from bot.service import CallSpec, RunSpec, retry_key
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()


async def declare(api: Served, who: str = "agent", **body: object) -> str:
    status, run = await api.call("POST", "/runs", who, body or {"approval_mode": "ask"})
    assert status == 201, run
    return str(run["id"])


async def append(api: Served, run: str, body: dict[str, Any], who: str = "agent") -> Any:
    status, task = await api.call("POST", f"/runs/{run}/tasks", who, body)
    assert status == 201, task
    return task


async def principal(api: Served, name: str, kind: str = "application") -> Principal:
    return await api.core.admin.principal(api.ws, kind, name)


async def keys_of(api: Served, run: str) -> list[str]:
    return sorted(t.key for t in await api.core.store.tasks(api.ws, run_id=run))


async def expire(api: Served) -> None:
    await api.clock.advance(timedelta(hours=25))
    await api.core.scheduler.run_once()


async def held_by_question(api: Served, key: str, extra: Sequence[str] = ()) -> str:
    """A run held by the expired question `key`, with the agent's own calls `extra` too."""
    run = await declare(api)
    await append(api, run, {"key": key, "tool_name": "ask", "tool_input": {"prompt": "there?"}})
    for other in extra:
        await append(api, run, {"key": other, "tool_name": "bash", "tool_input": {"n": other}})
    await expire(api)
    status, held = await api.call("GET", f"/runs/{run}")
    assert (status, held["state"], held["held_task_key"]) == (200, "held", key)
    return run


async def retry(api: Served, run: str) -> dict[str, Any]:
    status, body = await api.call("POST", f"/runs/{run}/retry", "alice")
    assert status == 200, body
    assert body["state"] == "running"
    return dict(body)


async def asked_again(api: Served, run: str) -> list[str]:
    status, asks = await api.call("GET", f"/asks?run_id={run}", "alice")
    assert status == 200
    return [a["key"] for a in asks["asks"]]


# 2. a held run can always be retried --------------------------------------------------------
@pytest.mark.parametrize("length", [190, 194, 195, 199, 200])
async def test_retry_of_a_question_keyed_near_the_limit(api: Served, length: int) -> None:
    """PostgreSQL refused `<key>~retryN` beyond 200 characters (a 500, the run stayed held);
    SQLite stored a key no route could name. The retry key is cut and tagged to fit."""
    key = ("q" * length)[:length]
    run = await held_by_question(api, key)
    await retry(api, run)
    [again] = await asked_again(api, run)
    assert len(again) <= 200 and KEY_PATTERN.match(again) and again != key
    status, task = await api.call("GET", f"/runs/{run}/tasks/{again}")
    assert (status, task["state"]) == (200, "awaiting_input")
    # … and again: the key of a retry of a retry fits too, and is new
    await expire(api)
    await retry(api, run)
    [third] = await asked_again(api, run)
    assert len(third) <= 200 and KEY_PATTERN.match(third) and third not in (key, again)


async def test_long_keys_cut_alike_stay_distinct(api: Served) -> None:
    """Two questions whose keys share their first 190 characters get distinct retry keys."""
    stem = "x" * 195
    run = await declare(api)
    for key in (stem + "aaaaa", stem + "bbbbb"):
        await append(api, run, {"key": key, "tool_name": "ask", "tool_input": {"prompt": key}})
    await expire(api)
    await retry(api, run)
    again = await asked_again(api, run)
    assert len(again) == len(set(again)) == 2
    assert all(len(k) <= 200 and KEY_PATTERN.match(k) for k in again)


async def test_retry_never_takes_a_key_the_agent_used(api: Served) -> None:
    """The agent had used `q~retry2` itself: the retry hit the unique key (a 500)."""
    run = await held_by_question(api, "q", ["q~retry2"])
    before = await keys_of(api, run)
    await retry(api, run)
    [again] = await asked_again(api, run)
    assert again not in before and again.startswith("q~retry")
    assert await keys_of(api, run) == sorted([*before, again])
    status, task = await api.call("GET", f"/runs/{run}/tasks/q~retry2")
    assert (status, task["tool_name"]) == (200, "bash")  # the agent's own call, untouched


async def test_retry_skips_every_taken_serial(api: Served) -> None:
    run = await held_by_question(api, "q", [f"q~retry{n}" for n in range(2, 8)])
    await retry(api, run)
    [again] = await asked_again(api, run)
    assert again == "q~retry8"


async def test_retry_key_always_fits_and_is_free() -> None:
    assert retry_key("q", 3, set()) == "q~retry3"
    assert retry_key("q~retry3", 5, {"q~retry5", "q~retry6"}) == "q~retry7"
    for length in range(180, 201):
        key = "k" * length
        for serial in (1, 9, 10, 99, 100, 12345):
            new = retry_key(key, serial, {key})
            assert len(new) <= 200 and KEY_PATTERN.match(new) and new != key
            assert len(retry_key(new, serial + 1, {key, new})) <= 200
    taken = {retry_key("k" * 200, 4, set())}
    assert retry_key("k" * 200, 4, taken) not in taken


# 5. what the store cannot hold is a 422 naming the field --------------------------------------
NUL_PROFILES = [
    ({"summary": "deploy", "a\x00b": 1}, "effect_profile.a\\u0000b"),
    ({"summary": "deploy", "owner": "a\x00b"}, "effect_profile.owner"),
    ({"summary": "deploy", "extra": {"deep": ["ok", "a\x00"]}}, "effect_profile.extra.deep[1]"),
    ({"summary": "deploy", "extra": {"k\x00": "v"}}, "effect_profile.extra.k\\u0000"),
]


@pytest.mark.parametrize(("profile", "field"), NUL_PROFILES)
async def test_nul_in_an_effect_profile_is_refused_by_the_core(
    api: Served, profile: dict[str, Any], field: str
) -> None:
    run = await declare(api)
    agent = await principal(api, "agent")
    spec = CallSpec("bash", {"command": "ls"}, key="k", effect_profile=profile)
    with pytest.raises(ApprovalError) as caught:
        await api.core.service.append(agent, api.ws, run, spec)
    assert (caught.value.code, caught.value.status) == ("invalid_request", 422)
    assert caught.value.detail.startswith(f"{field}:") and "\x00" not in caught.value.detail
    assert await keys_of(api, run) == []


@pytest.mark.parametrize(("profile", "field"), NUL_PROFILES)
async def test_nul_in_an_extra_effect_profile_key_is_a_422_over_http(
    api: Served, profile: dict[str, Any], field: str
) -> None:
    """Was a 500 on both stores. (Needs the HTTP layer to hand the profile to the core rather
    than fail on it: adapters/http/models.py `TaskIn.effect_profile_json`.)"""
    run = await declare(api)
    body = {"key": "k", "tool_name": "bash", "tool_input": {}, "effect_profile": profile}
    status, error = await api.call("POST", f"/runs/{run}/tasks", body=body)
    assert (status, error["error"]["code"]) == (422, "invalid_request"), error
    assert field.replace("\\u0000", "") in error["error"]["detail"].replace("\\u0000", "")
    assert await keys_of(api, run) == []


@pytest.mark.parametrize(
    ("tool_input", "field"),
    [
        ({"command": "ls\x00"}, "tool_input.command"),
        ({"c\x00": 1}, "tool_input.c\\u0000"),
        ([{"edits": ["x", {"text": "\x00"}]}], "tool_input[0].edits[1].text"),
        ("\x00", "tool_input"),
    ],
)
async def test_nul_in_tool_input_is_refused_by_the_core(
    api: Served, tool_input: Any, field: str
) -> None:
    run = await declare(api)
    agent = await principal(api, "agent")
    with pytest.raises(ApprovalError) as caught:
        await api.core.service.append(agent, api.ws, run, CallSpec("bash", tool_input, key="k"))
    assert caught.value.code == "invalid_request"
    assert caught.value.detail.startswith(f"{field}:")
    assert await keys_of(api, run) == []
    # over HTTP it is the same 422 (the wire model refuses it first)
    body = {"key": "k", "tool_name": "bash", "tool_input": tool_input}
    status, error = await api.call("POST", f"/runs/{run}/tasks", body=body)
    assert (status, error["error"]["code"]) == (422, "invalid_request")


async def test_text_that_merely_spells_a_nul_escape_is_kept(api: Served) -> None:
    run = await declare(api)
    text = "printf '\\u0000'"  # a backslash, then u0000: no NUL in it
    task = await append(
        api,
        run,
        {"tool_name": "bash", "tool_input": {"command": text}, "effect_profile": {"note": text}},
    )
    assert task["tool_input"] == {"command": text} and task["effect_profile"]["note"] == text


async def test_nul_in_a_run_declaration_is_refused_by_the_core(api: Served) -> None:
    agent = await principal(api, "agent")
    for spec, field in (
        (RunSpec(title="nightly\x00"), "title"),
        (RunSpec(aliases={"sh\x00": "bash"}), "aliases.sh\\u0000"),
        (RunSpec(approval_rules=[{"tool": "b\x00", "verdict": "ask"}]), "approval_rules[0].tool"),
    ):
        with pytest.raises(ApprovalError) as caught:
            await api.core.service.declare_run(agent, api.ws, spec)
        assert caught.value.code == "invalid_request"
        assert caught.value.detail.startswith(f"{field}:")


# 10. origins are earned ------------------------------------------------------------------------
async def register(api: Served, name: str, may_claim: str) -> str:
    api.tokens[name] = (
        await api.core.admin.add_application(api.ws, name, may_claim=may_claim)
    ).token
    return name


def call(origin: str, key: str) -> dict[str, Any]:
    return {"key": key, "tool_name": "bash", "tool_input": {"command": "ls"}, "origin": origin}


async def test_an_application_claims_an_origin_only_if_registered_to(api: Served) -> None:
    run = await declare(api)
    for origin in ("author", "kernel"):  # the plain agent: nothing written
        status, body = await api.call("POST", f"/runs/{run}/tasks", "agent", call(origin, origin))
        assert (status, body["error"]["code"]) == (403, "origin_not_allowed"), body
        assert f"--may-claim {origin}" in body["error"]["detail"]
    assert await keys_of(api, run) == []
    async with api.core.store.read() as tx:
        assert [t.key for t in await tx.tasks_of_run(run)] == []
    assert [e.name for e in await api.core.service.events_after(run, 0)] == []
    log = await api.core.store.log_entries(api.ws, run_id=run)
    assert [r.entry.action for r in log] == ["run_declared"]

    await register(api, "cli", "author")
    await register(api, "kernel", "author,kernel")
    status, author = await api.call("POST", f"/runs/{run}/tasks", "cli", call("author", "a"))
    assert (status, author["state"], author["origin"]) == (201, "granted", "author")
    status, body = await api.call("POST", f"/runs/{run}/tasks", "cli", call("kernel", "k"))
    assert (status, body["error"]["code"]) == (403, "origin_not_allowed")
    for origin in ("author", "kernel"):
        status, task = await api.call(
            "POST", f"/runs/{run}/tasks", "kernel", call(origin, f"{origin}2")
        )
        assert (status, task["state"], task["origin"]) == (201, "granted", origin)
    # the plain agent is still refused (a refusal is not remembered as a right, nor the reverse)
    status, body = await api.call("POST", f"/runs/{run}/tasks", "agent", call("author", "x"))
    assert (status, body["error"]["code"]) == (403, "origin_not_allowed")
    status, model = await api.call("POST", f"/runs/{run}/tasks", "agent", call("model", "m"))
    assert (status, model["state"]) == (201, "needs_approval")
    assert await keys_of(api, run) == ["a", "author2", "kernel2", "m"]


async def test_people_append_author_rows_only(api: Served) -> None:
    run = await declare(api)
    status, mine = await api.call("POST", f"/runs/{run}/tasks", "alice", call("author", "a"))
    assert (status, mine["state"], mine["origin"]) == (201, "granted", "author")
    status, body = await api.call("POST", f"/runs/{run}/tasks", "alice", call("kernel", "k"))
    assert (status, body["error"]["code"]) == (403, "origin_not_allowed")
    assert await keys_of(api, run) == ["a"]


async def test_a_claim_refused_is_refused_before_a_replay(api: Served) -> None:
    """A keyed author row written by an entitled application is not the plain agent's to
    replay under that origin either."""
    run = await declare(api)
    await register(api, "cli", "author")
    status, _ = await api.call("POST", f"/runs/{run}/tasks", "cli", call("author", "a"))
    assert status == 201
    status, body = await api.call("POST", f"/runs/{run}/tasks", "agent", call("author", "a"))
    assert (status, body["error"]["code"]) == (403, "origin_not_allowed")


async def test_registrations_are_stored_and_listed(api: Served) -> None:
    admin = api.core.admin
    await register(api, "both", " kernel , author ")
    listed = {a.name: a.may_claim for a in await admin.applications(api.ws)}
    assert listed == {
        "agent": frozenset(),
        "other-agent": frozenset(),
        "both": frozenset({"author", "kernel"}),
    }
    for bad in ("model", "author,root", "*"):
        with pytest.raises(ApprovalError) as caught:
            await admin.add_application(api.ws, f"bad-{len(bad)}", may_claim=bad)
        assert caught.value.code == "invalid_request" and "may_claim" in caught.value.detail
    assert {a.name for a in await admin.applications(api.ws)} == set(listed)


def invoke(*args: str, env: dict[str, str]) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


async def test_admin_app_add_may_claim_and_app_list(tmp_path: Path) -> None:
    env = {"APPROVALBOT_STORE__URL": f"sqlite+aiosqlite:///{tmp_path}/admin.db"}

    def run(*args: str) -> Result:
        return invoke("admin", *args, env=env)

    def steps() -> list[Result]:
        return [
            run("workspace", "create", "acme"),
            run("app", "add", "--workspace", "acme", "--name", "ci",
                "--may-claim", "kernel,author", "--json"),
            run("app", "add", "--workspace", "acme", "--name", "agent"),
            run("app", "add", "--workspace", "acme", "--name", "x", "--may-claim", "model"),
            run("app", "add", "--workspace", "acme", "--name", "y", "--may-claim", "author;kernel"),
            run("app", "list", "--workspace", "acme", "--json"),
            run("app", "list", "--workspace", "acme"),
            run("app", "list", "--workspace", "nope"),
        ]  # fmt: skip

    created, ci, agent, model, typo, listed, text, nope = await asyncio.to_thread(steps)
    assert created.exit_code == 0, created.output
    assert ci.exit_code == 0, ci.output
    issued = json.loads(ci.stdout)
    assert issued["may_claim"] == ["author", "kernel"] and issued["token"].startswith("aba_")
    assert agent.exit_code == 0 and "may claim" not in agent.stdout
    for refused in (model, typo):
        assert refused.exit_code == 2 and "--may-claim" in refused.output
    assert json.loads(listed.stdout) == {
        "workspace": "acme",
        "applications": [
            {"name": "agent", "id": json.loads(listed.stdout)["applications"][0]["id"],
             "may_claim": []},
            {"name": "ci", "id": issued["id"], "may_claim": ["author", "kernel"]},
        ],
    }  # fmt: skip
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[0].startswith("agent\t") and lines[0].endswith("may_claim=-")
    assert lines[1] == f"ci\t{issued['id']}\tmay_claim=author,kernel"
    assert nope.exit_code == 1 and "not_found" in nope.output


# 11a. a run names only its own application's executor -----------------------------------------
async def test_a_run_names_only_its_own_applications_executor(api: Served) -> None:
    status, theirs = await api.call("POST", "/executors", "other-agent", {"name": "theirs"})
    assert status == 201
    status, mine = await api.call("POST", "/executors", "agent", {"name": "mine"})
    assert status == 201
    before = len(await api.core.store.runs(api.ws))
    body = {"approval_mode": "ask", "executor_id": theirs["id"]}
    status, refused = await api.call("POST", "/runs", "agent", body)
    assert (status, refused["error"]["code"]) == (404, "not_found"), refused
    assert "executor" in refused["error"]["detail"]
    assert len(await api.core.store.runs(api.ws)) == before  # nothing written
    # its own executor, yes; a person may name any executor of the workspace
    await declare(api, "agent", approval_mode="ask", executor_id=mine["id"])
    await declare(api, "alice", approval_mode="ask", executor_id=theirs["id"])
    # and another workspace's executor stays unknown to everyone
    status, stranger = await api.call("POST", "/executors", "beta-agent", {"name": "x"}, ws="beta")
    assert status == 201
    body = {"executor_id": stranger["id"]}
    assert (await api.call("POST", "/runs", "alice", body))[0] == 404


# the one place that checks access ------------------------------------------------------------
async def test_access_checks() -> None:
    person = Principal("member", "mem_1", "alice", "acme")
    agent = Principal("application", "app_1", "agent", "acme")
    access.check_workspace(person, "acme")
    with pytest.raises(ApprovalError) as caught:
        access.check_workspace(agent, "beta")
    assert (caught.value.code, caught.value.status) == ("not_found", 404)
    access.require_member(person)
    with pytest.raises(ApprovalError) as caught:
        access.require_member(agent)
    assert (caught.value.code, caught.value.status) == ("member_credential_required", 403)
    access.require_application(agent)
    with pytest.raises(ApprovalError) as caught:
        access.require_application(person)
    assert (caught.value.code, caught.value.status) == ("application_credential_required", 403)
    for who, origin, claims, allowed in (
        (person, "model", (), True),
        (person, "author", (), True),
        (person, "kernel", ("kernel",), False),  # people append author rows only
        (agent, "model", (), True),
        (agent, "author", (), False),
        (agent, "kernel", ("author",), False),
        (agent, "kernel", ("author", "kernel"), True),
    ):
        if allowed:
            access.check_origin(who, origin, claims)
        else:
            with pytest.raises(ApprovalError) as caught:
                access.check_origin(who, origin, claims)
            assert (caught.value.code, caught.value.status) == ("origin_not_allowed", 403)


async def test_admin_refuses_unknown_claims_before_the_store() -> None:
    admin = Admin(store=None, clock=None)  # type: ignore[arg-type]
    with pytest.raises(ApprovalError) as caught:
        await admin.add_application("acme", "x", may_claim=["model"])
    assert caught.value.code == "invalid_request"


async def test_a_bare_number_as_tool_input_reads_back_on_every_path(api: Served) -> None:
    """SQLite gives JSON columns NUMERIC affinity: a bare number came back as a number, not as
    JSON text, and the hot path's reader failed (a replayed append or an approval: 500)."""
    run = await declare(api)
    body = {"key": "n", "tool_name": "calc", "tool_input": 5}
    for _ in range(2):  # the first append, then its replay
        status, task = await api.call("POST", f"/runs/{run}/tasks", "agent", body)
        assert status in (200, 201) and task["tool_input"] == 5, task
    status, task = await api.call("POST", f"/runs/{run}/tasks/n/approve", "alice", {})
    assert status == 200 and task["state"] == "granted" and task["tool_input"] == 5


async def test_a_key_with_a_trailing_newline_is_refused(api: Served) -> None:
    run = await declare(api)
    body = {"key": "k\n", "tool_name": "bash", "tool_input": {}}
    status, answer = await api.call("POST", f"/runs/{run}/tasks", "agent", body)
    assert status == 422, answer
