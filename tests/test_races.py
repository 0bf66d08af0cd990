"""Exactly-once endings under races: two service instances share one database."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from bot.domain import Principal
from bot.errors import ApprovalError
from bot.service import CallSpec, RunSpec
from store.sql import SqlStore
from tests.conftest import RecordingNotifier, World

WS = "acme"


async def second_instance(store: SqlStore, clock: FakeClock) -> tuple[Core, SqlStore]:
    twin = SqlStore(store.url, schema=store.schema)
    core = await Core.build(twin, Settings(), clock=clock, notifiers={"rec": RecordingNotifier()})
    return core, twin


async def test_fifty_concurrent_endings_one_winner(world: World, store: SqlStore) -> None:
    other, twin = await second_instance(store, world.clock)
    try:
        members: list[Principal] = [world.alice, world.bob]
        for i in range(8):
            members.append((await world.core.admin.add_member(WS, f"m{i}")).principal)
        for round_ in range(3):
            run = await world.core.service.declare_run(
                world.agent, WS, RunSpec(approval_mode="ask")
            )
            await world.core.service.append(
                world.agent, WS, run.id, CallSpec("deploy", {"env": "prod"}, key="k")
            )
            if round_ == 2:
                await world.clock.advance(timedelta(hours=25))  # expiry competes too
            attempts = []
            rng = random.Random(round_)
            for i in range(50):
                core = (world.core, other)[i % 2]
                member = members[i % len(members)]
                kind = rng.choice(["approve", "deny", "approve", "deny", "stop", "expire"])
                if kind == "approve":
                    attempts.append(core.service.approve(member, WS, run.id, "k"))
                elif kind == "deny":
                    attempts.append(core.service.deny(member, WS, run.id, "k", reason=f"r{i}"))
                elif kind == "stop":
                    attempts.append(core.service.stop(member, WS, run.id))
                else:
                    attempts.append(core.scheduler.fire_due())
            results = await asyncio.gather(*attempts, return_exceptions=True)
            decided = [r for r in results if isinstance(r, ApprovalError)]
            assert all(e.code == "already_decided" for e in decided), decided
            others = [r for r in results if isinstance(r, BaseException) and r not in decided]
            assert others == []
            task = await world.core.service.get_task(world.alice, WS, run.id, "k")
            assert task.state in ("granted", "failed", "cancelled", "timed_out")
            feed = await world.core.service.events_after(run.id, 0)
            settled = [e for e in feed if e.name == "task_settled"]
            assert len(settled) == 1 and settled[0].data["state"] == task.state
            log = await world.core.store.log_entries(WS, run_id=run.id, task_key="k")
            endings = [r for r in log if r.entry.action != "parked"]
            assert len(endings) == 1
            # Every loser that got already_decided was told the same winner.
            for error in decided:
                assert error.extra["state"] == task.state
                assert error.extra["resolved_by"] == task.resolved_by
            winners = [r for r in results if not isinstance(r, BaseException)]
            review_wins = [r for r in winners if getattr(r, "key", None) == "k"]
            assert len(review_wins) <= 1
    finally:
        await twin.close()
