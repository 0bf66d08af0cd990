"""Crash safety: a real service process is SIGKILLed at random moments 20 times and restarted."""

from __future__ import annotations

import asyncio
import collections
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from store.sql import SqlStore

ROOT = Path(__file__).resolve().parent.parent


def spawn(url: str, folder: Path, seed: int, mode: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash_worker", url, str(folder), str(seed), mode],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def test_sigkill_twenty_times_loses_nothing(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/crash.db"
    rng = random.Random(7)
    for seed in range(20):
        proc = spawn(url, tmp_path, seed, "work")
        assert proc.stdout is not None
        ready = await asyncio.to_thread(proc.stdout.readline)
        assert ready == b"ready\n", proc.stderr.read().decode() if proc.stderr else ""
        await asyncio.sleep(rng.uniform(0.2, 0.9))
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # A last life lets the clock run out every park and the relay drain the outbox.
    drain = spawn(url, tmp_path, 99, "drain")
    _, stderr = drain.communicate(timeout=60)
    assert drain.returncode == 0, stderr.decode()

    acked = [line.split() for line in (tmp_path / "acked").read_text().splitlines()]
    assert len(acked) > 20  # work was done in most lives
    store = SqlStore(url)
    try:
        tasks = {t.key: t for t in await store.tasks("acme", limit=1_000_000)}
        # Nothing acknowledged was lost; what was acknowledged as ended stayed so.
        for _run, key, state in acked:
            assert key in tasks, key
            if state not in ("needs_approval", "awaiting_input"):
                assert tasks[key].state == state
        # Every overdue deadline fired.
        assert await store.count_parked() == 0
        # Nothing settled twice: one task_settled per task, one ending in the log.
        settled: collections.Counter[str] = collections.Counter()
        for run in await store.runs("acme"):
            for event in await store.events_after(run.id, 0, limit=1_000_000):
                if event.name == "task_settled":
                    settled[event.data["key"]] += 1
        assert settled and max(settled.values()) == 1
        assert set(settled) == set(tasks)
        endings = collections.Counter(
            r.entry.task_key
            for r in await store.log_entries("acme", limit=1_000_000)
            if r.entry.action in ("approved", "denied", "expired", "granted", "refused")
        )
        assert max(endings.values()) == 1
        # No notification shown twice, and every parked call was shown and its ending too.
        sent = (tmp_path / "sent").read_text().split()
        assert len(sent) == len(set(sent))
        posted = {k.split(":")[1] for k in sent if k.endswith(":posted")}
        ended = {k.split(":")[1] for k in sent if k.endswith(":ended")}
        parked_ids = {t.id for t in tasks.values() if t.deadline is not None}
        assert posted == parked_ids and ended == parked_ids
    finally:
        await store.close()
