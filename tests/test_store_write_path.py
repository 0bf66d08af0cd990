"""The SQLite write path: group commit and the hot path's prepared statements.

Group commit must never trade safety for speed: each writer's work commits or fails on its own,
and `write()` returns only once what it wrote is visible to a new connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bot.domain import LogEntry, NewEvent, OutboxItem, Run, Task, Timer, Workspace
from bot.ports import DuplicateKey
from store.migrate import upgrade
from store.sql import EVENT, LOG, OUTBOX, TASK, TIMER, SqlStore

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
async def sqlite(tmp_path: Path) -> Any:
    store = SqlStore(f"sqlite+aiosqlite:///{tmp_path}/w.db")
    await upgrade(store.engine)
    yield store, tmp_path / "w.db"
    await store.close()


def commits_seen(db: Path) -> sqlite3.Connection:
    """A connection whose `PRAGMA data_version` moves once per commit made by others."""
    return sqlite3.connect(db)


def file_size(path: Path) -> int:
    return path.stat().st_size


async def wal_frames(db: Path) -> int:
    """Frames now in the WAL (a checkpoint's answer; -1 while the service's own runs)."""
    with sqlite3.connect(db) as conn:
        for _ in range(200):
            frames = int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
            if frames >= 0:
                return frames
            await asyncio.sleep(0.01)
    raise AssertionError("the WAL stayed busy")


def data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


async def add_workspace(store: SqlStore, name: str, fail: bool = False) -> None:
    async with store.write() as tx:
        await tx.insert_workspace(Workspace(name, name, AT))
        if fail:
            raise RuntimeError("the writer changed its mind")


async def test_concurrent_writers_share_one_commit(sqlite: Any) -> None:
    store, db = sqlite
    watcher = commits_seen(db)
    before = data_version(watcher)
    await asyncio.gather(*(add_workspace(store, f"w{i}") for i in range(20)))
    assert data_version(watcher) == before + 1  # twenty writers, one commit
    names = {row[0] for row in watcher.execute("SELECT id FROM workspace")}
    assert names == {f"w{i}" for i in range(20)}
    # one after another, each writer commits on its own (no waiting for company)
    await add_workspace(store, "alone")
    assert data_version(watcher) == before + 2
    watcher.close()


async def test_a_failing_writer_leaves_its_group_intact(sqlite: Any) -> None:
    store, db = sqlite
    await add_workspace(store, "taken")
    outcomes = await asyncio.gather(
        add_workspace(store, "a"),
        add_workspace(store, "broken", fail=True),
        add_workspace(store, "taken"),  # a duplicate key, refused on its own
        add_workspace(store, "b"),
        return_exceptions=True,
    )
    assert outcomes[0] is None and outcomes[3] is None
    assert isinstance(outcomes[1], RuntimeError)
    assert isinstance(outcomes[2], DuplicateKey)
    with sqlite3.connect(db) as conn:
        names = {row[0] for row in conn.execute("SELECT id FROM workspace")}
    assert names == {"taken", "a", "b"}


async def test_a_groups_events_and_log_are_written_at_its_commit(sqlite: Any) -> None:
    """Events and log entries wait for the group's commit: a writer that fails leaves none,
    and each run's events are numbered in the order their writers came."""
    store, db = sqlite

    async def note(run_id: str, name: str, fail: bool = False) -> None:
        async with store.write() as tx:
            await tx.add_events([NewEvent(run_id, name, {"n": name})], AT)
            entry = LogEntry("ws", name, "someone", "api", AT, run_id, None, {})
            await tx.add_log([entry])
            if fail:
                raise RuntimeError("the writer changed its mind")

    outcomes = await asyncio.gather(
        note("run_a", "a1"),
        note("run_b", "b1"),
        note("run_a", "broken", fail=True),
        note("run_a", "a2"),
        return_exceptions=True,
    )
    assert [type(o).__name__ for o in outcomes] == [
        "NoneType",
        "NoneType",
        "RuntimeError",
        "NoneType",
    ]
    assert [(e.seq, e.name) for e in await store.events_after("run_a", 0)] == [(1, "a1"), (2, "a2")]
    assert [(e.seq, e.name) for e in await store.events_after("run_b", 0)] == [(1, "b1")]
    await note("run_a", "a3")  # the next group numbers on
    assert [e.seq for e in await store.events_after("run_a", 2)] == [3]
    with sqlite3.connect(db) as conn:
        actions = [row[0] for row in conn.execute("SELECT action FROM decision_log ORDER BY id")]
    assert actions == ["a1", "b1", "a2", "a3"]


async def test_a_write_is_durable_when_it_returns(sqlite: Any) -> None:
    store, db = sqlite
    watcher = commits_seen(db)
    for i in range(5):
        await add_workspace(store, f"d{i}")
        # a fresh connection (another process, say) sees it at once
        seen = watcher.execute("SELECT count(*) FROM workspace WHERE id = ?", (f"d{i}",))
        assert seen.fetchone()[0] == 1
    watcher.close()


def _task(key: str, **changes: Any) -> Task:
    task = Task(
        id=f"task_{key}",
        run_id="run_1",
        workspace_id="ws",
        key=key,
        kind="tool_call",
        origin="model",
        tool_name="bash",
        tool="bash",
        tool_input={"command": "ls -la", "nested": [1, {"é": None}]},
        state="needs_approval",
        created_at=AT,
        deadline=AT + timedelta(hours=24),
        effect_profile={"reads": True},
        matched=[0, 2],
        why="rule 0 asks",
        request_hash="abc",
        appended_by="agent",
    )
    return replace(task, **changes)


async def _rows(store: SqlStore, table: sa.Table, order: Any) -> list[dict[str, Any]]:
    async with store.read() as tx:
        rows = await tx._all(sa.select(table).order_by(order))
    return [dict(row) for row in rows]


async def test_prepared_statements_write_what_sqlalchemy_writes(sqlite: Any) -> None:
    """Every table the hot path writes, written once through the prepared statements and once
    through SQLAlchemy's own insert: the rows read back the same, defaults included."""
    store, _db = sqlite
    run = Run(
        id="run_1", workspace_id="ws", application_id=None, state="running",
        approval_mode="ask", approval_rules=[], tool_names=None, aliases={}, created_at=AT,
    )  # fmt: skip
    async with store.write() as tx:
        await tx.insert_run(run)
        await tx.insert_task(_task("fast", error={"code": "x"}, resolution=None))
        await tx.add_events([NewEvent("run_1", "approval_required", {"key": "fast"})], AT)
        await tx.add_log([LogEntry("ws", "parked", "agent", "api", AT, "run_1", "fast", {})])
        await tx.add_timers([Timer("tm_fast", "task_fast", "run_1", "deadline", AT)])
        item = OutboxItem("out_fast", "chat", "posted", "task_fast", "run_1", "ws", "k:fast", AT)
        await tx.add_outbox([item])
    # the same through SQLAlchemy (the PostgreSQL path), for comparison
    async with store.write() as tx:
        tx.driver = None
        await tx.insert_task(_task("slow", error={"code": "x"}, resolution=None))
        await tx.add_events([NewEvent("run_1", "approval_required", {"key": "slow"})], AT)
        await tx.add_log([LogEntry("ws", "parked", "agent", "api", AT, "run_1", "slow", {})])
        await tx.add_timers([Timer("tm_slow", "task_slow", "run_1", "deadline", AT)])
        item = OutboxItem("out_slow", "chat", "posted", "task_slow", "run_1", "ws", "k:slow", AT)
        await tx.add_outbox([item])

    def same(rows: list[dict[str, Any]], *differ: str) -> None:
        fast, slow = rows
        for column in fast:
            if column not in differ:
                assert fast[column] == slow[column], column

    same(await _rows(store, TASK, TASK.c.key), "id", "key")
    same(await _rows(store, EVENT, EVENT.c.seq), "id", "seq", "data")
    same(await _rows(store, LOG, LOG.c.id), "id", "task_key")
    same(await _rows(store, TIMER, TIMER.c.id), "id", "task_id")
    same(await _rows(store, OUTBOX, OUTBOX.c.id), "id", "task_id", "idempotency_key")
    outbox = (await _rows(store, OUTBOX, OUTBOX.c.id))[0]
    assert (outbox["attempts"], outbox["lease_until"], outbox["last_error"]) == (0, 0.0, "")
    assert outbox["delivered_at"] is None
    # and the hot path's reads (prepared, in a write) give back what was written
    async with store.write() as tx:
        assert tx.driver is not None
        back = await tx.get_task("run_1", "fast")
        assert back is not None and back == _task("fast", error={"code": "x"})
        parked = [("fast", "needs_approval"), ("slow", "needs_approval")]
        assert await tx.parked_keys("run_1") == parked
        assert await tx.get_run_state("run_1") == ("running", None)
        assert await tx.get_run("run_1") == run


async def test_the_wal_is_checkpointed_off_the_loop(sqlite: Any) -> None:
    """SQLite's own checkpoint is off (it stalled the committing writer); ours keeps the WAL
    from growing without bound, and gives its space back once writes pause."""
    store, db = sqlite
    assert store.sqlite is not None
    store.sqlite.wal_limit_pages = store.sqlite.wal_busy_limit_pages = 200
    store.sqlite.idle_trim_seconds = 0.2
    wal = Path(f"{db}-wal")
    row = "x" * 8000  # a few pages per commit
    for i in range(800):
        async with store.write() as tx:
            await tx.set_meta(f"k{i}", row)
    # 800 commits of ~3 pages make a WAL of about 17 MB without checkpoints; with them it
    # starts over each time it passes the limit (the file keeps its largest size; a slow
    # checkpoint thread reports the size late)
    assert 1_000_000 < file_size(wal) < 8_000_000, file_size(wal)
    for _ in range(100):  # trimmed once no commit came for idle_trim_seconds
        await asyncio.sleep(0.05)
        if file_size(wal) == 0:
            break
    assert file_size(wal) == 0
    async with store.write() as tx:  # and writing goes on
        await tx.set_meta("after", "trim")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000  # others: default
        assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'k%'").fetchone()[0] == 800
        assert conn.execute("SELECT value FROM meta WHERE key = 'after'").fetchone()[0] == "trim"


async def test_a_failed_commit_fails_its_whole_group_and_the_next_write_works(
    sqlite: Any,
) -> None:
    """A COMMIT can fail (a deferred constraint, a full disk): every writer of the group hears
    of it, none of their work is kept, and the writer connection starts afresh."""
    store, db = sqlite
    with sqlite3.connect(db) as conn:  # a table whose constraint is checked only at COMMIT
        conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id)"
            " DEFERRABLE INITIALLY DEFERRED)"
        )

    async def orphan() -> None:
        async with store.write() as tx:
            await tx.conn.execute(sa.text("INSERT INTO child (parent) VALUES (42)"))

    outcomes = await asyncio.gather(
        add_workspace(store, "before"), orphan(), add_workspace(store, "after"),
        return_exceptions=True,
    )  # fmt: skip
    assert all(isinstance(o, sa.exc.IntegrityError | sqlite3.IntegrityError) for o in outcomes)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM workspace").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM child").fetchone()[0] == 0
    await add_workspace(store, "later")  # a fresh connection, a fresh group
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT id FROM workspace")] == ["later"]


async def test_a_busy_service_restarts_the_wal_later_within_a_bound(sqlite: Any) -> None:
    """Starting the WAL over makes every writer wait: while commits follow each other closely
    it waits for a quiet one, up to the busy limit; a quiet commit restarts it promptly."""
    store, db = sqlite
    assert store.sqlite is not None
    store.sqlite.wal_limit_pages, store.sqlite.wal_busy_limit_pages = 200, 2000
    store.sqlite.quiet_gap_seconds = 10.0  # busy: every commit follows another closely
    wal, row = Path(f"{db}-wal"), "x" * 8000  # ~3 pages a writer, ~30 a group of ten

    async def put(key: str) -> None:
        async with store.write() as tx:
            await tx.set_meta(key, row)

    for i in range(200):  # busy: groups of ten, back to back, 6,000 pages in all
        await asyncio.gather(*(put(f"b{i}.{j}") for j in range(10)))
    # past the quiet limit (0.8 MB), within the busy one (8 MB, plus up to a checkpoint
    # interval), far from the 25 MB it would reach if never started over
    assert 4_000_000 < file_size(wal) < 16_000_000, file_size(wal)
    store.sqlite.wal_busy_limit_pages = 1_000_000
    for i in range(50):  # busy again, with no bound to reach: 1,500 pages more
        await asyncio.gather(*(put(f"c{i}.{j}") for j in range(10)))
    assert await wal_frames(db) > 1000
    store.sqlite.quiet_gap_seconds = 0.005
    for i in range(40):  # quiet: a writer now and then
        await asyncio.sleep(0.01)
        await put(f"q{i}")
    assert await wal_frames(db) < 500  # started over since
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'b%'").fetchone()[0] == 2000
