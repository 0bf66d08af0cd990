"""The SQLite write path: group commit and the hot path's prepared statements.

Group commit must never trade safety for speed: each writer's work commits or fails on its own,
and `write()` returns only once what it wrote is visible to a new connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
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
from store.sqlite import CHECKPOINT_EVERY, SqliteWriter

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


def record_checkpoints(writer: SqliteWriter, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The service's checkpoints as they finish: (commits so far, mode, the WAL's size in pages
    as the checkpoint reports it, the thread it ran on). The commit count is that of the commit
    that started it: the test waits in `settle()` meanwhile."""
    assert CHECKPOINT_EVERY == 16  # the sequences the tests expect count in its units
    done: list[Any] = []
    checkpointer = writer._checkpointer
    assert checkpointer is not None
    run = checkpointer._run

    def recorded(mode: str) -> int:
        pages = run(mode)
        done.append((writer._commits, mode, pages, threading.current_thread().name))
        return pages

    monkeypatch.setattr(checkpointer, "_run", recorded)
    return done


def modes(done: list[Any]) -> list[tuple[int, str]]:
    return [(commits, mode) for commits, mode, _pages, _thread in done]


async def settle(writer: SqliteWriter) -> None:
    """Wait for the checkpoint the last commit started, if any: a RESTART runs under the write
    lock, a PASSIVE (`_copy_back`) after it. What the next commit decides then follows from what
    was written, not from how fast the checkpoint thread kept up. (Nothing else writes
    meanwhile, so a PASSIVE copies the whole WAL, and SQLite starts the WAL over at the next
    commit: it never holds more than the commits since the last checkpoint.)"""
    async with writer.lock:
        pass
    if writer._checkpointing is not None:
        await writer._checkpointing


async def put(store: SqlStore, key: str, writers: int = 1) -> None:
    """`writers` writers in one group commit, each adding a row of 8,000 bytes: at least two
    4 KiB pages of its own (about 2.3 in all, with the shared ones)."""

    async def one(name: str) -> None:
        async with store.write() as tx:
            await tx.set_meta(name, "x" * 8000)

    if writers == 1:
        await one(key)
    else:
        await asyncio.gather(*(one(f"{key}.{j}") for j in range(writers)))
    assert store.sqlite is not None
    await settle(store.sqlite)


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
        assert await tx.get_run_state("run_1") == ("running", None, 0)
        assert await tx.get_run("run_1") == run


async def test_the_wal_is_checkpointed_off_the_loop(
    sqlite: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own checkpoint is off (it stalled the committing writer); ours, on a thread of
    its own, keeps the WAL from growing without bound, starts it over once it passes the limit,
    and gives its space back once writes pause."""
    store, db = sqlite
    writer = store.sqlite
    assert writer is not None
    done = record_checkpoints(writer, monkeypatch)
    writer.wal_limit_pages = writer.wal_busy_limit_pages = 1000  # not reached at first
    writer.idle_trim_seconds = 0.2
    wal = Path(f"{db}-wal")
    for i in range(800):
        await put(store, f"k{i}")
    # a PASSIVE checkpoint every 16 commits, on the checkpointer's thread, none by the writer
    assert modes(done) == [(16 * n, "PASSIVE") for n in range(1, 51)]
    assert {thread for *_, thread in done} == {"sqlite-checkpoint_0"}
    # so the WAL holds at most 16 commits (~80 pages, plus the migration's: ~0.6 MB); 800
    # commits of at least 2 pages each would make it 6.5 MB or more without checkpoints
    assert file_size(wal) < 2_000_000, file_size(wal)
    assert writer._connection is not None  # the service's own connection: no autocheckpoint
    own = writer._connection.connection.dbapi_connection
    assert own is not None
    assert own.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0

    # past the limit (~80 pages found by the last PASSIVE; both limits alike, so busy or not):
    # the next commit starts it over, and a PASSIVE that finds it past the limit again (15
    # commits, 30 pages or more) has it trimmed once no commit came for idle_trim_seconds
    writer.wal_limit_pages = writer.wal_busy_limit_pages = 10
    for i in range(800, 816):
        await put(store, f"k{i}")
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    trimming = writer._trimming
    assert trimming is not None
    await trimming
    assert loop.time() - quiet_since > writer.idle_trim_seconds / 2  # not before the pause
    assert modes(done)[50:] == [(801, "RESTART"), (816, "PASSIVE"), (816, "TRUNCATE")]
    assert done[-2][2] > 10 and done[-1][2] == 0  # past the limit; then nothing left
    assert file_size(wal) == 0
    await put(store, "after")  # and writing goes on
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000  # others: default
        assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'k%'").fetchone()[0] == 816
        assert conn.execute("SELECT count(*) FROM meta WHERE key = 'after'").fetchone()[0] == 1


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


async def test_a_busy_service_restarts_the_wal_later_within_a_bound(
    sqlite: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starting the WAL over makes every writer wait: while commits follow each other closely
    it waits for a quiet one, up to the busy limit; a quiet commit restarts it promptly."""
    store, db = sqlite
    writer = store.sqlite
    assert writer is not None
    done = record_checkpoints(writer, monkeypatch)
    writer.wal_limit_pages, writer.wal_busy_limit_pages = 100, 1000
    writer.quiet_gap_seconds = 10.0  # busy: every commit follows another closely
    writer.idle_trim_seconds = 3600.0  # not trimmed meanwhile

    # A PASSIVE every 16 commits finds the WAL the 15 or 16 commits since it was started over
    # hold: at least 2 pages a writer.
    for i in range(48):  # groups of 5: 150 pages or more (~190), past the quiet limit only
        await put(store, f"b{i}", writers=5)
    assert modes(done) == [(16, "PASSIVE"), (32, "PASSIVE"), (48, "PASSIVE")]
    assert all(100 < pages <= 1000 for _c, _m, pages, _t in done), done  # yet not started over
    for i in range(48, 65):  # groups of 50: 1,500 pages or more, past the busy limit
        await put(store, f"b{i}", writers=50)
    assert modes(done)[3:] == [(64, "PASSIVE"), (65, "RESTART")]  # at the next commit, busy
    assert done[3][2] > 1000
    for i in range(65, 81):  # groups of 5 again: past the quiet limit by commit 80
        await put(store, f"c{i}", writers=5)
    assert modes(done)[5:] == [(80, "PASSIVE")]  # and commit 81, busy, left it
    assert 100 < done[5][2] <= 1000
    writer.quiet_gap_seconds = 0.05
    await asyncio.sleep(0.1)  # a quiet commit: the first in more than quiet_gap_seconds
    await put(store, "q")
    assert modes(done)[6:] == [(82, "RESTART")]  # started over at once
    with sqlite3.connect(db) as conn:
        count = "SELECT count(*) FROM meta WHERE key LIKE ?"
        assert conn.execute(count, ("b%",)).fetchone()[0] == 48 * 5 + 17 * 50
        assert conn.execute(count, ("c%",)).fetchone()[0] == 16 * 5
        assert conn.execute(count, ("q",)).fetchone()[0] == 1
