"""SQLite, driven from the event loop: connections, group commit, checkpoints.

SQLite statements on a local file take microseconds, so the store runs them on a plain
`sqlite3` connection straight from the loop rather than on aiosqlite's worker thread. SQLite has
one writer at a time: writes start with BEGIN IMMEDIATE (a read never has to upgrade its lock
mid-transaction), a writer in another process is waited for asynchronously, and the writers of
one event-loop turn share a transaction and its COMMIT (group commit). The WAL is copied back
into the database on a worker thread rather than by a committing writer.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy import event as sa_event
from sqlalchemy.pool import QueuePool

from bot import jsontext
from bot.errors import StorageUnavailable
from store.checkpoint import Checkpointer
from store.faults import StorageHealth, fault_of, storage_unavailable
from store.prepared import Prepared
from store.tx import SqlTx

# Group commits between two PASSIVE checkpoints. More often, the RESTART that bounds the WAL
# has less left to copy while writers wait: measured at full load, every 16 commits gave a p99
# of 9.1-10.3 ms in 7 runs of 8, every 64 gave 10.3-12.9 ms, for 2-3% more checkpoint CPU.
CHECKPOINT_EVERY = 16
log = logging.getLogger(__name__)


def setup_connections(engine: Engine, busy_ms: int, autocheckpoint: bool = True) -> None:
    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN out of the driver's hands so we can say BEGIN IMMEDIATE ourselves.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        if not autocheckpoint:
            # No journal_size_limit either: SQLite would truncate the WAL in the first commit
            # after a full checkpoint, stalling the loop for 50-60 ms (SqliteWriter trims it
            # once writes pause instead).
            cursor.execute("PRAGMA wal_autocheckpoint=0")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa_event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        if mode != "BY_HAND":  # the writer connection (SqliteWriter.begin)
            conn.exec_driver_sql(f"BEGIN {mode}")


class InlineConnection:
    """A blocking SQLite connection used straight from the event loop.

    SQLite statements on a local file take microseconds; a hop to aiosqlite's worker thread and
    back costs more than the statement itself, several times per statement. Writers wait for
    the file lock asynchronously (see SqliteWriter.begin), so the loop never blocks on it.
    """

    def __init__(self, conn: Connection) -> None:
        self.sync = conn

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        return self.sync.execute(statement, parameters)


class _CommitGroup:
    """One SQLite write transaction shared by the writers of one event-loop turn."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.driver: sqlite3.Connection = conn.connection.dbapi_connection  # type: ignore[assignment]
        self.tx = SqlTx(InlineConnection(conn), False, self.driver)
        # Rows changed on the connection before the group: a commit that changed none proves
        # nothing about a storage fault (it wrote nothing to the disk).
        self.changes_before = self.driver.total_changes
        # One future per writer rather than one shared and shielded: a writer cancelled while
        # it waits cancels only its own, and its wake-up is one loop turn sooner.
        self.waiters: list[asyncio.Future[None]] = []
        self.committing: asyncio.Task[None] | None = None  # held so it cannot be collected
        # The events and log entries of the writers that succeeded (SqlTx.held), written at
        # the commit: one statement for all of a kind, outside the writers' savepoints, which
        # would otherwise copy the pages they change: about 3 µs less per granted call.
        self.held: list[tuple[Prepared, list[dict[str, Any]]]] = []
        # Why the group's transaction is gone, if it is: a writer's failure made SQLite roll
        # all of it back (SQLITE_FULL does, mid-statement). Every writer of the group then
        # fails, and none joins it any more.
        self.broken: BaseException | None = None
        # A writer of the group met a storage fault: the connection is replaced after it (one
        # opened while the file was read-only stays read-only).
        self.faulted = False

    def write_held(self) -> None:
        """In the writers' order, so each run's events are numbered in the order they came."""
        by_statement: dict[Prepared, list[dict[str, Any]]] = {}
        for statement, rows in self.held:
            by_statement.setdefault(statement, []).extend(rows)
        for statement, rows in by_statement.items():
            statement.run(self.driver, rows)

    def settle(self, error: BaseException | None = None) -> None:
        for waiter in self.waiters:
            if waiter.done():  # its writer was cancelled
                continue
            if error is None:
                waiter.set_result(None)
            elif isinstance(error, StorageUnavailable):  # one each: each writer raises its own
                waiter.set_exception(storage_unavailable(error.cause))
            else:
                waiter.set_exception(error)


class _GroupWrite:
    """`SqliteWriter.write()` (group commit): a writer joins the open group, or opens
    one, inside a savepoint of its own. It returns only once its group has committed, so
    nothing is acknowledged before it is durable; a writer that fails rolls back to its
    savepoint and leaves the others' work standing — unless SQLite rolled back the whole
    transaction (a full disk can), which fails every writer of the group. A storage fault (a
    full disk, a read-only file) is raised as `StorageUnavailable` (store/faults.py). (A class
    rather than a generator-based context manager: every write comes through here.)"""

    __slots__ = ("group", "writer")

    def __init__(self, writer: SqliteWriter) -> None:
        self.writer = writer
        self.group: _CommitGroup | None = None

    async def __aenter__(self) -> SqlTx:
        writer = self.writer
        await writer.lock.acquire()
        while writer.group is not None and writer.group.broken is not None:
            # Its transaction is gone: wait for it to end, then open a group of our own.
            ending = writer.group.committing
            writer.lock.release()
            assert ending is not None
            await asyncio.wait([ending])
            await writer.lock.acquire()
        try:
            group = writer.group
            if group is None:
                group = writer.group = _CommitGroup(await writer.begin())
                group.committing = asyncio.get_running_loop().create_task(writer.commit(group))
            group.driver.execute("SAVEPOINT w")
            group.tx.held = []
        except BaseException as error:
            try:
                fault = writer.fault(error) if isinstance(error, Exception) else None
                if fault is not None:
                    if writer.group is not None:
                        writer.group.faulted = True  # its commit replaces the connection
                    else:
                        writer.drop_connection()  # no group uses it
            finally:
                writer.lock.release()
            if fault is not None:
                raise fault from None
            raise
        self.group = group
        return group.tx

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _tb: object
    ) -> None:
        group = self.group
        assert group is not None
        held, group.tx.held = group.tx.held, None
        writer = self.writer
        try:
            if kind is None:
                if held:
                    group.held.extend(held)
                group.driver.execute("RELEASE w")
            else:
                # Why the group fails if this writer's failure took its transaction along.
                reason = error if isinstance(error, Exception) else RuntimeError("rolled back")
                try:
                    group.driver.execute("ROLLBACK TO w")
                    group.driver.execute("RELEASE w")
                except sqlite3.Error:  # no savepoint to go back to: the transaction is gone
                    group.broken = group.broken or reason
                if not group.driver.in_transaction:  # SQLite rolled all of it back
                    group.broken = group.broken or reason
        finally:
            writer.lock.release()
        if kind is not None:
            fault = writer.fault(error) if isinstance(error, Exception) else None
            if fault is not None:
                group.faulted = True
                raise fault from None
            return
        waiter = asyncio.get_running_loop().create_future()
        group.waiters.append(waiter)
        await waiter


class SqliteWriter:
    """This process's writes to one SQLite file, and its reads."""

    # WAL pages (4 KiB, so 256 MB) past which the WAL is started over: a RESTART checkpoint
    # while our writers wait (4-17 ms here, mostly the database file's fsync). While the
    # service is busy (commits less than `quiet_gap_seconds` apart: under load, groups commit
    # every millisecond or two) that pause would hold up every request in flight, so it waits
    # for a quieter commit, up to `wal_busy_limit_pages` (1 GiB, PostgreSQL's default
    # max_wal_size; about 10 s of full load here). Measured with bench/api_bench.py, 50
    # clients, ~100 MB of WAL a second, five runs each: restarting every 2-3 s gave a p99 of
    # 8.7-11 ms, not restarting during the run 8.2-9.2 ms.
    wal_limit_pages = 64000
    wal_busy_limit_pages = 256000
    quiet_gap_seconds = 0.005
    # Seconds without a commit before a WAL that passed the limit is truncated, giving its
    # disk space back. Truncating takes tens of milliseconds (50-90 for 256 MB here), too long
    # while writers wait; until then the file is written over from its start, which costs
    # less than growing it.
    idle_trim_seconds = 10.0

    def __init__(self, url: str, health: StorageHealth | None = None) -> None:
        self.health = health or StorageHealth()
        # Short busy timeout: a writer in another process is waited for asynchronously.
        self.engine: Engine = create_engine(
            url.replace("+aiosqlite", ""), poolclass=QueuePool, json_serializer=jsontext.dumps
        )
        # SQLite's own checkpoints, done by a committing writer, would stall the loop for
        # milliseconds about once in a hundred commits; ours run on a worker thread.
        setup_connections(self.engine, 20, autocheckpoint=False)
        self.lock = asyncio.Lock()
        self.group: _CommitGroup | None = None
        self._connection: Connection | None = None
        self._commits = 0
        self._wal_pages = 0  # as the last PASSIVE checkpoint found it
        self._last_commit = 0.0  # loop time
        self._checkpointing: asyncio.Future[None] | None = None
        self._trimming: asyncio.Future[None] | None = None
        path = self.engine.url.database  # none for an in-memory database: nothing to copy
        self.path = path if path and path != ":memory:" else None
        self._checkpointer = Checkpointer(path) if path else None

    def write(self) -> AbstractAsyncContextManager[SqlTx]:
        return _GroupWrite(self)

    def fault(self, error: Exception) -> StorageUnavailable | None:
        """The storage fault `error` is (recorded and logged by `health`), or None."""
        fault = fault_of(error, postgres=False, path=self.path)
        return None if fault is None else self.health.refused(fault)

    def drop_connection(self) -> None:
        """Start afresh: the next group gets a new connection (rolling back what is left)."""
        self._connection, dropped = None, self._connection
        if dropped is not None:
            dropped.close()

    @contextmanager
    def read(self) -> Iterator[SqlTx]:
        with self.engine.connect() as conn:
            yield SqlTx(InlineConnection(conn), False)

    async def begin(self) -> Connection:
        """BEGIN IMMEDIATE on the one connection this process writes with. Its transactions
        are driven on SQLite's own connection: through SQLAlchemy (a pool checkout, events, a
        reset on return) a group's BEGIN and COMMIT cost more than several of its statements.
        SQLAlchemy sees one transaction that never ends, so it never begins one of its own."""
        if self._connection is None:
            if self.health.fault is not None:
                # The pooled connections may have been opened while the file was read-only,
                # and would stay so: the writer's (and the readers') are opened anew.
                self.engine.dispose()
            self._connection = self.engine.connect()
            self._connection.execution_options(sqlite_begin="BY_HAND").begin()
        driver = self._connection.connection.dbapi_connection
        assert driver is not None
        delay = 0.002
        for _ in range(3000):
            try:
                driver.execute("BEGIN IMMEDIATE")
                return self._connection
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) and "busy" not in str(error):
                    raise
            await asyncio.sleep(delay)
            delay = min(0.05, delay * 2)
        raise TimeoutError("the SQLite database stayed locked by another process")

    async def commit(self, group: _CommitGroup) -> None:
        """Scheduled when a group opens; it queues for the write lock behind the writers that
        are already due to run, so every one of them joins the group first."""
        async with self.lock:
            self.group = None
            # Committing on a thread was measured slower: the thread then waits for the GIL
            # (up to the 5 ms switch interval) while every writer of the group waits for it.
            failed = group.broken
            if failed is None:
                try:
                    group.write_held()
                    group.driver.commit()
                except Exception as error:
                    failed = error
            if failed is not None:  # every writer of the group hears of it
                fault = self.fault(failed) if isinstance(failed, Exception) else None
                group.settle(fault or failed)
                self.drop_connection()
                return  # nothing was written: no checkpoint is due for it
            group.settle()
            if self.health.fault is not None and group.driver.total_changes != group.changes_before:
                self.health.wrote()  # rows were written: the fault is over
            if group.faulted:
                self.drop_connection()
            self._commits += 1
            now = asyncio.get_running_loop().time()
            busy, self._last_commit = now - self._last_commit < self.quiet_gap_seconds, now
            pages = self._wal_pages
            if pages > self.wal_limit_pages and (not busy or pages > self.wal_busy_limit_pages):
                # Still holding the write lock: no writer of ours can start meanwhile, so the
                # checkpoint gets SQLite's writer lock at once. The loop itself runs on.
                self._wal_pages = 0
                await self._checkpoint("RESTART")
            elif self._commits % CHECKPOINT_EVERY == 0 and self._checkpointing is None:
                self._checkpointing = asyncio.ensure_future(self._copy_back())

    async def _copy_back(self) -> None:
        """A PASSIVE checkpoint, every CHECKPOINT_EVERY commits: it copies what it can without
        blocking anyone. Under steady writes it never catches up, and the WAL starts over only
        once all of it is copied; so the size it reports decides when a commit runs a RESTART
        (see `commit`) and when the file is trimmed."""
        try:
            pages = await self._checkpoint("PASSIVE")
        finally:
            self._checkpointing = None
        if pages < 0:
            return
        self._wal_pages = pages
        if pages > self.wal_limit_pages and self._trimming is None:
            # The file keeps its size when the WAL starts over: trimmed once idle.
            self._trimming = asyncio.ensure_future(self._trim_when_idle())

    async def _checkpoint(self, mode: str) -> int:
        """Copy the WAL back into the database on the checkpointer's thread; the WAL's size in
        pages, or -1 when the checkpoint failed (logged: it is tried again later)."""
        if self._checkpointer is None:
            return 0  # an in-memory database
        try:
            return await self._checkpointer.run(mode)
        except Exception as error:
            log.warning("WAL checkpoint (%s) failed: %s", mode, type(error).__name__)
            return -1

    async def _trim_when_idle(self) -> None:
        try:
            left = -1
            while left != 0:  # a reader or a checkpoint in its way: again after the next pause
                seen = -1
                while seen != self._commits:
                    seen = self._commits
                    await asyncio.sleep(self.idle_trim_seconds)
                async with self.lock:  # none of our writers meanwhile
                    left = await self._checkpoint("TRUNCATE")
            self._wal_pages = 0
        finally:
            self._trimming = None

    async def close(self) -> None:
        if self._trimming is not None:
            self._trimming.cancel()
            await asyncio.wait([self._trimming])
        if self._checkpointing is not None:
            await asyncio.wait([self._checkpointing])  # its failure is logged, not raised here
        if self._checkpointer is not None:
            await self._checkpointer.close()
        if self._connection is not None:
            self._connection.close()
        self.engine.dispose()
