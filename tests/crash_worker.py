"""A service process with a mixed workload, for the crash test: it is SIGKILLed at random.

It journals (with fsync) every receipt it got back and every notification it delivered, so the
test can check after many crashes that nothing acknowledged was lost and nothing was shown twice.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path

from bot.config import Settings
from bot.core import Core
from bot.domain import OutboxItem, Principal, Run, Task
from bot.errors import ApprovalError
from bot.service import ApprovalService, CallSpec, RunSpec
from store.migrate import upgrade
from store.sql import SqlStore


def journal(path: Path, line: str) -> None:
    with path.open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


class JournalNotifier:
    """Delivers to a file; like a chat adapter it remembers what it sent and never repeats it."""

    name = "chat"

    def __init__(self, path: Path) -> None:
        self.path = path

    async def deliver(self, item: OutboxItem, task: Task, run: Run) -> None:
        sent = set(self.path.read_text().split()) if self.path.exists() else set()
        if item.idempotency_key not in sent:
            journal(self.path, item.idempotency_key)

    async def healthy(self) -> bool:
        return True


async def main(url: str, folder: Path, seed: int, drain: bool) -> None:
    settings = Settings.model_validate(
        {"decisions": {"park_ttl": "2s", "question_ttl": "2s", "nudge_before": ["1s"]}}
    )
    store = SqlStore(url)
    await upgrade(store.engine)
    core = await Core.build(store, settings, notifiers={"chat": JournalNotifier(folder / "sent")})
    # Leases of a killed life expire soon, so the last life need not wait a minute.
    core.relay.lease = 2.0
    admin = core.admin
    try:
        await admin.create_workspace("acme")
        await admin.add_member("acme", "alice")
        await admin.add_application("acme", "agent")
    except ApprovalError:
        pass  # made by an earlier life of this process
    alice = await admin.principal("acme", "member", "alice")
    agent = await admin.principal("acme", "application", "agent")
    core.start()
    print("ready", flush=True)  # the test kills us only once we are working
    s = core.service
    if drain:
        while await store.count_parked() or await store.outbox_backlog():  # noqa: ASYNC110
            await asyncio.sleep(0.2)  # polling the database is the point here
        await core.stop()
        await store.close()
        return
    # Several agents at once, so writes share commit groups (store/sqlite.py) when they die.
    await asyncio.gather(*(agent_lane(s, agent, alice, folder, seed, lane) for lane in range(4)))


async def agent_lane(
    s: ApprovalService, agent: Principal, alice: Principal, folder: Path, seed: int, lane: int
) -> None:
    rng = random.Random(seed * 10 + lane)
    run = await s.declare_run(agent, "acme", RunSpec(approval_mode="ask", approval_rules=[
        {"tool": "ls", "verdict": "allow"}, {"tool": "rm", "verdict": "deny"},
    ]))  # fmt: skip
    parked: list[str] = []
    for i in range(10_000):
        key = f"s{seed}-l{lane}-{i}"
        roll = rng.random()
        if roll < 0.5 or not parked:
            tool = rng.choice(["ls", "rm", "deploy", "deploy", "ask"])
            tool_input = {"prompt": "go?"} if tool == "ask" else {"n": i}
            try:
                receipt = await s.append(agent, "acme", run.id, CallSpec(tool, tool_input, key=key))
            except ApprovalError as error:
                assert error.code == "run_not_running", error  # an expired question held it
                return
            journal(folder / "acked", f"{run.id} {key} {receipt.task.state}")
            if receipt.task.parked:
                parked.append(key)
        else:
            target = parked.pop(rng.randrange(len(parked)))
            try:
                if rng.random() < 0.5:
                    await s.approve(alice, "acme", run.id, target)
                else:
                    await s.deny(alice, "acme", run.id, target)
            except ApprovalError:
                pass  # a question, or expired meanwhile
        await asyncio.sleep(rng.random() * 0.01)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "drain"))
