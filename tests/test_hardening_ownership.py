"""Issue 21 (12): an application stops only its own runs (as it withdraws only their calls), and
a rule learned for "this run" reaches a continuation only when the same application declares
it; the profile's learned rules reach every run of the profile. SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from bot.config import ProfileConfig, Settings
from bot.errors import ApprovalError
from bot.service import AllowSpec, CallSpec, RunSpec
from store.sql import SqlStore
from tests.conftest import make_world

OPS = ProfileConfig(approval_mode="ask", shell_commands=[{"tool": "bash", "path": "command"}])


async def test_an_application_stops_only_its_own_runs(store: SqlStore) -> None:
    world = await make_world(store)
    other = (await world.core.admin.add_application(world.ws, "other-agent")).principal
    service = world.core.service
    run = await service.declare_run(world.agent, world.ws, RunSpec())
    await service.append(
        world.agent, world.ws, run.id, CallSpec("bash", {"command": "make"}, key="k1")
    )
    with pytest.raises(ApprovalError) as refused:
        await service.stop(other, world.ws, run.id)
    assert (refused.value.code, refused.value.status) == ("member_credential_required", 403)
    assert "stopping" in refused.value.detail
    assert (await service.get_run(world.alice, world.ws, run.id)).state == "running"
    assert (await service.stop(world.agent, world.ws, run.id)).state == "stopped"
    second = await service.declare_run(world.agent, world.ws, RunSpec())
    assert (await service.stop(world.alice, world.ws, second.id)).state == "stopped"


async def test_run_scoped_learned_rules_reach_continuations_of_the_same_application(
    store: SqlStore,
) -> None:
    world = await make_world(store, Settings(profiles={"ops": OPS}))
    other = (await world.core.admin.add_application(world.ws, "other-agent")).principal
    service = world.core.service
    run = await service.declare_run(world.agent, world.ws, RunSpec(profile="ops"))
    for key, line, scope in (("k1", "git push origin main", "run"), ("k2", "npm test", "profile")):
        await service.append(
            world.agent, world.ws, run.id, CallSpec("bash", {"command": line}, key=key)
        )
        await service.approve(world.alice, world.ws, run.id, key, allow=AllowSpec(scope))
    learned = {r.scope: r.id for r in await service.learned_rules(world.alice, world.ws)}

    def ids(found: list[dict[str, object]]) -> set[object]:
        return {entry["id"] for entry in found}

    mine = await service.declare_run(world.agent, world.ws, RunSpec(parent_run=run.id))
    assert ids(mine.learned_rules) == {learned["run"], learned["profile"]}
    theirs = await service.declare_run(other, world.ws, RunSpec(parent_run=run.id))
    assert ids(theirs.learned_rules) == {learned["profile"]}
    call = CallSpec("bash", {"command": "git push origin dev"}, key="k9")
    assert (await service.append(other, world.ws, theirs.id, call)).task.state == "needs_approval"
    assert (await service.append(world.agent, world.ws, mine.id, call)).task.state == "granted"
