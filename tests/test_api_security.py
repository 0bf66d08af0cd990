"""Security refusals over HTTP: each is refused with its code and nothing in the store moves."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.http.routes import ROUTES
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")
server, api = fixtures()

DECIDING = ("/approve", "/deny", "/resolution")


async def scene(api: Served) -> dict[str, str]:
    """A run with a parked call (k1), a model question (q) and an author question (mine), and an
    executor; returns the path parameters to fill routes with."""
    _, run = await api.call("POST", "/runs", body={"approval_mode": "ask"})
    status, executor = await api.call("POST", "/executors", body={"name": "worker"})
    assert status == 201
    tasks = [
        {"key": "k1", "tool_name": "bash", "tool_input": {"command": "rm -rf build"}},
        {"key": "q", "tool_name": "ask", "tool_input": {"prompt": "Go?"}},
        {"key": "mine", "tool_name": "ask", "tool_input": {"prompt": "Mine?"}, "origin": "author"},
    ]
    params = {
        "ws": api.ws,
        "run": run["id"],
        "key": "k1",
        "executor": executor["id"],
        "rule": "lrn_0",
    }
    # The author question comes from an application registered to claim that origin.
    issued = await api.core.admin.add_application(api.ws, "script", may_claim="author")
    api.tokens["script"] = issued.token
    for body in tasks:
        who = "script" if body.get("origin") == "author" else "agent"
        status, task = await api.call("POST", f"/runs/{run['id']}/tasks", who, body)
        assert status == 201
        if "resolution_token" in task:
            params["token"] = task["resolution_token"]
    return params


async def snapshot(api: Served, run_id: str) -> Any:
    store = api.core.store
    tasks = await store.tasks(api.ws, run_id=run_id)
    async with store.read() as tx:
        run = await tx.get_run(run_id)
    assert run is not None
    return (
        sorted((t.key, t.state, t.resolved_by, t.via, t.addressee) for t in tasks),
        [(e.seq, e.name) for e in await store.events_after(run_id, 0)],
        len(await store.log_entries(api.ws)),
        run.state,
        await store.count_parked(),
    )


def fill(path: str, params: dict[str, str], ws: str | None = None) -> str:
    tail = path.format(**(params | ({"ws": ws} if ws else {})))
    return tail.split(f"/v1/workspaces/{ws or params['ws']}", 1)[1]


def body_for(path: str) -> Any:
    if path.endswith("/tasks"):
        return {"tool_name": "bash", "tool_input": {"command": "ls"}}
    if path.endswith("/resolution"):
        return {"content": "yes"}
    if path.endswith(("/claim", "/commit")):
        return {"run_id": "x", "task_key": "y"}
    if path.endswith("/executors"):
        return {"name": "intruder"}
    return {}


async def test_no_token_or_an_unknown_one_is_401(api: Served) -> None:
    params = await scene(api)
    before = await snapshot(api, params["run"])
    for route in ROUTES:
        for who in (None, "abm_not-a-token", "Basic xyz"):
            headers: dict[str, str] | None = {"Authorization": who} if who == "Basic xyz" else None
            status, body = await api.call(
                route.method,
                fill(route.path, params),
                None if who == "Basic xyz" else who,
                body_for(route.path) if route.method == "POST" else None,
                headers=headers,
            )
            assert (status, body["error"]["code"]) == (401, "unauthorized"), (route.path, who)
    assert await snapshot(api, params["run"]) == before


async def test_other_workspaces_are_404(api: Served) -> None:
    params = await scene(api)
    before = await snapshot(api, params["run"])
    for route in ROUTES:
        body = body_for(route.path) if route.method == "POST" else None
        # credentials of workspace beta on acme's paths, and acme's credentials on beta's paths
        for who, ws in (("carol", None), ("beta-agent", None), ("alice", api.beta),
                        ("agent", api.beta)):  # fmt: skip
            tail = fill(route.path, params, ws)
            status, answer = await api.call(route.method, tail, who, body, ws=ws)
            assert (status, answer["error"]["code"]) == (404, "not_found"), (route.path, who)
    # a member of beta naming acme's run on her own workspace's path
    for verb in DECIDING:
        status, _ = await api.call(
            "POST", f"/runs/{params['run']}/tasks/k1{verb}", "carol", {}, ws=api.beta
        )
        assert status == 404
    assert await snapshot(api, params["run"]) == before


async def test_an_application_cannot_decide(api: Served) -> None:
    params = await scene(api)
    run = params["run"]
    before = await snapshot(api, run)
    for tail, body in (
        ("/tasks/k1/approve", {}),
        ("/tasks/k1/deny", {"reason": "no"}),
        ("/tasks/q/resolution", {"content": "yes"}),
        ("/tasks/q/resolution", {"outcome": "failed"}),
        ("/retry", {}),
        ("/abandon", {}),
    ):
        status, answer = await api.call("POST", f"/runs/{run}{tail}", "agent", body)
        assert (status, answer["error"]["code"]) == (403, "member_credential_required"), tail
    status, answer = await api.call("GET", "/asks", "agent")
    assert status == 403
    assert await snapshot(api, run) == before


async def test_revoked_and_rotated_tokens(api: Served) -> None:
    params = await scene(api)
    run = params["run"]
    old = api.token("alice")
    assert await api.core.admin.revoke(api.ws, "member", "alice") == 1
    before = await snapshot(api, run)
    status, answer = await api.call("POST", f"/runs/{run}/tasks/k1/approve", old)
    assert (status, answer["error"]["code"]) == (401, "unauthorized")
    assert (await api.call("GET", "/asks", old))[0] == 401
    assert await snapshot(api, run) == before

    issued = await api.core.admin.rotate(api.ws, "application", "agent")
    assert (await api.call("GET", f"/runs/{run}", "agent"))[0] == 401
    assert (await api.call("GET", f"/runs/{run}", issued.token))[0] == 200


async def test_resolution_token_refusals(api: Served) -> None:
    params = await scene(api)
    run, token = params["run"], params["token"]
    before = await snapshot(api, run)
    wrong = token[:-4] + ("0000" if not token.endswith("0000") else "1111")
    for key, sent in (("mine", wrong), ("q", token), ("k1", token)):
        status, answer = await api.call(
            "POST", f"/runs/{run}/tasks/{key}/resolution", None,
            {"content": "yes", "resolution_token": sent},
        )  # fmt: skip
        assert (status, answer["error"]["code"]) == (403, "invalid_resolution_token"), key
    # the right token on another workspace's path fits nothing there: the same 403, so the
    # route tells no one without a credential which runs and keys exist
    status, answer = await api.call(
        "POST", f"/runs/{run}/tasks/mine/resolution", None,
        {"content": "yes", "resolution_token": token}, ws=api.beta,
    )  # fmt: skip
    assert (status, answer["error"]["code"]) == (403, "invalid_resolution_token")
    assert await snapshot(api, run) == before

    status, task = await api.call(
        "POST", f"/runs/{run}/tasks/mine/resolution", None,
        {"content": "first", "resolution_token": token},
    )  # fmt: skip
    assert (status, task["resolution"]) == (200, {"content": "first"})
    after = await snapshot(api, run)
    status, answer = await api.call(
        "POST", f"/runs/{run}/tasks/mine/resolution", None,
        {"content": "second", "resolution_token": token},
    )  # fmt: skip
    assert (status, answer["error"]["code"]) == (409, "already_decided")
    assert await snapshot(api, run) == after


async def test_executors_belong_to_their_application(api: Served) -> None:
    params = await scene(api)
    executor = params["executor"]
    before = await snapshot(api, params["run"])
    for who in ("other-agent", "alice"):
        for method, tail in (("GET", ""), ("GET", "/inbox"), ("DELETE", ""), ("GET", "/cable")):
            status, answer = await api.call(method, f"/executors/{executor}{tail}", who)
            assert (status, answer["error"]["code"]) == (404, "not_found"), (who, tail)
    status, answer = await api.call("POST", "/executors", "alice", {"name": "mine"})
    assert status == 403
    assert await snapshot(api, params["run"]) == before
