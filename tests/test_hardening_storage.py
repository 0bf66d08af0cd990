"""Issue 21 (13): storage faults. A full disk or a read-only database answers 503
`storage_unavailable` naming the cause (never a 500 `internal_error`), `/readyz` is 503 while it
lasts and 200 once a write succeeds again, the log says it in one plain line (no SQL, no
parameters, no traceback per request), and nothing accepted is lost: a refused write was not
acknowledged, and everything acknowledged before is there once the fault clears.

The faults are real ones, each on a store of the test's own (never a shared PostgreSQL schema):

- SQLite full: `PRAGMA max_page_count` on the service's connections (SQLITE_FULL, "database or
  disk is full"); and, as root, a really full disk: a small tmpfs filled to ENOSPC.
- SQLite read-only: as root, `chattr +i` on the database file and its WAL (root ignores file
  modes, not the immutable flag): the service's open file then fails to write (EPERM), a new
  one opens read-only.
- PostgreSQL read-only: a database of the test's own set `default_transaction_read_only = on`
  with its sessions ended, as maintenance or a failover to a standby does.
- PostgreSQL full: as root with the server on this machine, the database's tables in a
  tablespace on a small tmpfs, filled.
- PostgreSQL down: the service reaches the server through a TCP relay the test stops.

The CLI, the page and a press in Telegram show the same value (on SQLite with `PRAGMA
query_only`, which needs no root, and on a read-only PostgreSQL database).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import secrets
import shutil
import socket
import sqlite3
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
import sqlalchemy as sa

from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from bot.domain import Workspace
from bot.errors import StorageUnavailable
from store.faults import PLAIN
from store.migrate import upgrade
from store.sql import SqlStore
from tests.conftest import PG_SKIP, PG_URL, make_store, pg_dsn
from tests.http_harness import Served, Server, people, start_app
from tests.telegram_harness import WS, TgWorld

SECRET = "sk-live-0123456789abcdef0123456789ab"
# Text that needs room: more pages than a database keeps free (SQLite's freelist), and more
# than the WAL holds when a commit may reuse it.
ROOM = 768 * 1024  # within the 1 MiB body bound
LEAKS = ("Traceback", "[SQL", "[parameters", "INSERT", "UPDATE", "sqlite3", "asyncpg", SECRET)


def call_input(room: bool) -> dict[str, str]:
    padding = secrets.token_hex(ROOM // 2) if room else "x"
    return {"command": f"deploy --token {SECRET} {padding}"}


# The service --------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def serving(store: SqlStore) -> AsyncIterator[Served]:
    """The service on `store`, with its clock loop and outbox relay running (so they meet the
    fault too), and a workspace with alice and an agent."""
    settings = Settings()
    clock = FakeClock()
    core = await Core.build(store, settings, clock=clock)
    runner, url = await start_app(core, settings)
    server = Server(core, clock, store, url, aiohttp.ClientSession(), runner)
    api = await people(server)
    core.start()
    try:
        yield api
    finally:
        await core.stop()
        await server.session.close()
        await runner.cleanup()


async def readyz(api: Served) -> tuple[int, dict[str, Any]]:
    async with api.session.get(f"{api.url}/readyz") as response:
        return response.status, await response.json()


async def decision_log(api: Served, run_id: str) -> list[tuple[str, str]]:
    status, log = await api.call("GET", f"/log?run_id={run_id}", "alice")
    assert status == 200, log
    return [(e["task_key"], e["action"]) for e in log["entries"]]


async def refused(
    api: Served, method: str, tail: str, who: str, body: Any, cause: str
) -> dict[str, Any]:
    """The request is answered 503 storage_unavailable naming `cause`, plainly."""
    headers = {"Authorization": f"Bearer {api.token(who)}"}
    async with api.session.request(method, api.path(tail), json=body, headers=headers) as r:
        status, answer = r.status, await r.json()
        retry_after = r.headers.get("Retry-After")
    assert status == 503, answer
    error = answer["error"]
    assert (error["code"], error["cause"]) == ("storage_unavailable", cause), error
    assert PLAIN[cause] in error["detail"] and "nothing was saved" in error["detail"]
    for leak in (*LEAKS, "SQLITE", "OperationalError", "disk I/O"):
        assert leak not in error["detail"], leak
    assert retry_after is not None and int(retry_after) > 0
    return dict(error)


@dataclass
class Fault:
    cause: str
    start: Callable[[], Awaitable[None]]
    clear: Callable[[], Awaitable[None]]
    room: bool = False  # a write must need room for the fault to refuse it (a size limit)


async def the_scenario(
    api: Served, fault: Fault, caplog: pytest.LogCaptureFixture, *, store_answers: bool = True
) -> None:
    """Calls acknowledged; the fault; every write refused with 503 and the cause, /readyz 503,
    one plain line in the log; the fault cleared; /readyz 200, everything acknowledged is
    there, nothing refused is, and the service works again."""
    _, run = await api.call("POST", "/runs", "agent", {"approval_mode": "ask"})
    run_id = run["id"]
    tasks = f"/runs/{run_id}/tasks"
    for key in ("a1", "a2", "a3"):
        body = {"key": key, "tool_name": "bash", "tool_input": call_input(fault.room)}
        status, task = await api.call("POST", tasks, "agent", body)
        assert (status, task["state"]) == (201, "needs_approval"), task
    status, task = await api.call("POST", f"{tasks}/a1/approve", "alice")
    assert (status, task["state"]) == (200, "granted"), task
    status, ready = await readyz(api)
    assert (status, ready["ready"]) == (200, True), ready
    logged = await decision_log(api, run_id)
    assert logged[-1] == ("a1", "approved") and len(logged) == 5, logged

    caplog.clear()
    caplog.set_level(logging.INFO)
    await fault.start()
    cause = fault.cause
    body = {"key": "f1", "tool_name": "bash", "tool_input": call_input(fault.room)}
    await refused(api, "POST", tasks, "agent", body, cause)
    edit = {"tool_input": call_input(True)} if fault.room else {}
    await refused(api, "POST", f"{tasks}/a2/approve", "alice", edit, cause)
    body = {"key": "f2", "tool_name": "bash", "tool_input": call_input(fault.room)}
    await refused(api, "POST", tasks, "agent", body, cause)
    status, ready = await readyz(api)
    assert status == 503, ready
    assert ready["ready"] is False and ready["checks"]["writes"] is False, ready
    assert ready["storage"] == {"cause": cause}
    if store_answers:
        assert ready["checks"]["store"] is True
    api.core.scheduler.wake()  # the clock and the relay meet it too, and stay quiet
    api.core.relay.wake()
    await asyncio.sleep(0.3)

    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors, "nothing in the log"
    assert all(r.name == "store.faults" for r in errors), [r.getMessage() for r in errors]
    naming = [r for r in errors if f"cause {cause}" in r.getMessage()]
    assert len(naming) == 1, [r.getMessage() for r in errors]  # one line, not one a request
    line = naming[0].getMessage()
    assert line.startswith("storage unavailable: ") and PLAIN[cause] in line, line
    assert "\n" not in line
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        for leak in (*LEAKS, "internal_error", "unexpected"):
            assert leak not in record.getMessage(), (leak, record.getMessage())

    await fault.clear()
    for _ in range(100):  # /readyz tries a write at most once a second
        status, ready = await readyz(api)
        if status == 200:
            break
        await asyncio.sleep(0.1)
    assert (status, ready["checks"]["writes"]) == (200, True), ready
    assert "storage" not in ready
    assert any("storage available again" in r.getMessage() for r in caplog.records)

    # What was acknowledged is there; what was refused is not, not even in part.
    status, a1 = await api.call("GET", f"{tasks}/a1", "alice")
    assert (status, a1["state"], a1["resolved_by"]) == (200, "granted", "alice")
    for key in ("a2", "a3"):
        status, task = await api.call("GET", f"{tasks}/{key}", "alice")
        assert (status, task["state"], task["approved_input"]) == (200, "needs_approval", None)
        assert task["tool_input"]["command"].startswith(f"deploy --token {SECRET}")
    for key in ("f1", "f2"):
        assert (await api.call("GET", f"{tasks}/{key}", "alice"))[0] == 404
    assert await decision_log(api, run_id) == logged  # nothing logged meanwhile, nothing lost

    # And it works again.
    body = {"key": "f1", "tool_name": "bash", "tool_input": call_input(fault.room)}
    status, task = await api.call("POST", tasks, "agent", body)
    assert (status, task["state"]) == (201, "needs_approval"), task
    status, task = await api.call("POST", f"{tasks}/a2/approve", "alice", edit or None)
    assert (status, task["state"]) == (200, "granted"), task


# SQLite -------------------------------------------------------------------------------------
def _writer_connection(store: SqlStore) -> Any:
    assert store.sqlite is not None
    return store.sqlite._connection


def page_limit(store: SqlStore) -> Fault:
    """SQLITE_FULL: no page beyond those the file has, on every connection of the service."""
    assert store.sqlite is not None
    engine = store.sqlite.engine
    path = engine.url.database
    assert path is not None
    limit: list[int] = []

    def on_connect(dbapi: sqlite3.Connection, _record: Any) -> None:
        if limit:
            dbapi.execute(f"PRAGMA max_page_count = {limit[0]}")

    async def start() -> None:
        # The file's free pages filled too (an approval frees the pages of the input it
        # replaces), so that what the file holds is all it may.
        with contextlib.closing(sqlite3.connect(path, timeout=5, isolation_level=None)) as full:
            pages = int(full.execute("PRAGMA page_count").fetchone()[0])
            full.execute(f"PRAGMA max_page_count = {pages}")
            with contextlib.suppress(sqlite3.OperationalError):  # SQLITE_FULL
                for n in range(100_000):
                    full.execute(
                        "INSERT INTO meta (key, value) VALUES (?, ?)", (f"filler:{n}", "f" * 1000)
                    )
            free = int(full.execute("PRAGMA freelist_count").fetchone()[0])
            assert free * 4096 < ROOM // 8, free  # a page or two may stay, not a call's room
        limit.append(pages)
        sa.event.listen(engine, "connect", on_connect)
        engine.dispose()  # the pooled connections, opened before, are opened again with it
        conn = _writer_connection(store)
        if conn is not None:
            conn.exec_driver_sql(f"PRAGMA max_page_count = {pages}")

    async def clear() -> None:
        limit.clear()
        sa.event.remove(engine, "connect", on_connect)
        conn = _writer_connection(store)
        if conn is not None:
            conn.exec_driver_sql("PRAGMA max_page_count = 1073741823")

    return Fault("disk_full", start, clear, room=True)


def _chattr(flag: str, files: list[Path]) -> bool:
    done = subprocess.run(
        ["chattr", flag, *[str(f) for f in files if f.exists()]], capture_output=True, check=False
    )
    return done.returncode == 0


@contextlib.contextmanager
def immutable_files(db: Path) -> Iterator[Fault]:
    """A read-only database file, as root: `chattr +i` on it and its WAL. Not on its shared
    memory file (`-shm`): SQLite maps that into memory, and a write to a mapped page of an
    immutable file is a SIGBUS that ends the process (as it would on a file system forced
    read-only under a running service: no store can answer that one)."""
    files = [db, Path(f"{db}-wal")]
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("making a file read-only for root takes root and chattr (the immutable flag)")
    if not _chattr("-i", files):
        pytest.skip("this file system has no immutable flag")

    async def start() -> None:
        assert _chattr("+i", files)

    async def clear() -> None:
        assert _chattr("-i", files)

    try:
        yield Fault("read_only", start, clear)
    finally:
        _chattr("-i", files)


@contextlib.contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted on `folder` (root only), unmounted after."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a really full disk takes root (a small tmpfs)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs is not allowed here")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def fill(folder: Path) -> Path:
    """Fill the file system of `folder` to ENOSPC."""
    filler = folder / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


def truncate_wal(db: Path) -> None:
    """The WAL emptied (as the service does after 10 s without writes): a commit then needs new
    room on the disk, not the WAL's old space."""
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        for _ in range(50):
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return
    raise AssertionError("the WAL could not be emptied")


async def test_sqlite_full_database_is_503_and_nothing_accepted_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, _ = await make_store("sqlite", tmp_path)
    try:
        async with serving(store) as api:
            await the_scenario(api, page_limit(store), caplog)
    finally:
        await store.close()


async def test_sqlite_full_disk_is_503_and_nothing_accepted_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk", "8m") as disk:
        store, _ = await make_store("sqlite", disk)
        db = disk / "approvalbot.db"
        filler: list[Path] = []

        async def start() -> None:
            truncate_wal(db)
            filler.append(fill(disk))

        async def clear() -> None:
            filler.pop().unlink()

        try:
            async with serving(store) as api:
                await the_scenario(api, Fault("disk_full", start, clear), caplog)
        finally:
            await store.close()


async def test_sqlite_read_only_file_is_503_and_nothing_accepted_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, _ = await make_store("sqlite", tmp_path)
    try:
        with immutable_files(tmp_path / "approvalbot.db") as fault:
            async with serving(store) as api:
                await the_scenario(api, fault, caplog)
    finally:
        await store.close()


async def add_workspace(store: SqlStore, name: str, room: bool = False) -> None:
    async with store.write() as tx:
        await tx.insert_workspace(Workspace(name, name, datetime(2026, 1, 1, tzinfo=UTC)))
        if room:
            await tx.set_meta(f"big-{name}", secrets.token_hex(ROOM // 2))


async def test_a_full_disk_fails_every_writer_of_its_group_and_none_is_kept(
    tmp_path: Path,
) -> None:
    """SQLite rolls the whole transaction back when a statement finds the disk full: every
    writer of that commit group is refused (before: the others were acknowledged and their
    work lost, or half of it written outside any transaction), and a writer that comes after
    gets a group of its own."""
    store, _ = await make_store("sqlite", tmp_path)
    fault = page_limit(store)
    try:
        await add_workspace(store, "before")
        await fault.start()
        outcomes = await asyncio.gather(
            add_workspace(store, "small"),
            add_workspace(store, "large", room=True),
            add_workspace(store, "also-small"),
            return_exceptions=True,
        )
        small, large, later = outcomes
        # "small" shared its commit with "large", whose full disk rolled all of it back.
        for refusal in (small, large):
            assert isinstance(refusal, StorageUnavailable), outcomes
            assert (refusal.cause, refusal.status) == ("disk_full", 503)
        assert later is None  # it came after the failure: a group of its own, committed
        with sqlite3.connect(tmp_path / "approvalbot.db") as conn:
            kept = {row[0] for row in conn.execute("SELECT id FROM workspace")}
        assert kept == {"before", "also-small"}  # acknowledged is kept, refused is not
        await fault.clear()
        await add_workspace(store, "after", room=True)
        with sqlite3.connect(tmp_path / "approvalbot.db") as conn:
            assert "after" in {row[0] for row in conn.execute("SELECT id FROM workspace")}
    finally:
        await store.close()


# PostgreSQL ---------------------------------------------------------------------------------
def _require_pg() -> str:
    if not PG_URL:
        pytest.skip(PG_SKIP)
    return pg_dsn()


@contextlib.asynccontextmanager
async def own_database(
    tablespace: Path | None = None,
) -> AsyncIterator[tuple[asyncpg.Connection, str, str]]:
    """A database made for the test (dropped after): (an admin connection, its name, its
    URL). Faults are made on it only, never on the schemas other tests share. `tablespace`: a
    folder for its tables and indexes (a tablespace of the database's name, dropped after)."""
    dsn = _require_pg()
    admin = await asyncpg.connect(dsn)
    name = f"approvalbot_fault_{secrets.token_hex(4)}"
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        if tablespace is not None:
            owner = pwd.getpwnam("postgres")
            os.chown(tablespace, owner.pw_uid, owner.pw_gid)
            try:
                await admin.execute(f"CREATE TABLESPACE {name} LOCATION '{tablespace}'")
            except asyncpg.PostgresError:
                pytest.skip("the PostgreSQL server cannot use a folder of this machine")
            await admin.execute(f"ALTER DATABASE {name} SET default_tablespace = {name}")
        base, _, _ = dsn.rpartition("/")
        yield admin, name, f"{base}/{name}"
    finally:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name
        )
        await admin.execute(f"DROP DATABASE IF EXISTS {name}")
        if tablespace is not None:
            await admin.execute(f"DROP TABLESPACE IF EXISTS {name}")
        await admin.close()


async def end_sessions(admin: asyncpg.Connection, name: str) -> None:
    await admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = $1 AND pid <> pg_backend_pid()",
        name,
    )


async def test_postgres_read_only_is_503_and_nothing_accepted_is_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with own_database() as (admin, name, url):
        store = SqlStore(url)
        try:
            await upgrade(store.engine)

            async def start() -> None:
                await admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
                await end_sessions(admin, name)  # its sessions start over, read-only

            async def clear() -> None:
                # New sessions only: those the service opened meanwhile stay read-only, and
                # are replaced at the first write they refuse.
                await admin.execute(f"ALTER DATABASE {name} RESET default_transaction_read_only")

            async with serving(store) as api:
                await the_scenario(api, Fault("read_only", start, clear), caplog)
        finally:
            await store.close()


async def test_postgres_full_disk_is_503_and_nothing_accepted_is_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _require_pg()
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no local PostgreSQL server (its user is not on this machine)")
    # Not under pytest's own folders: the server's user cannot walk through them (mode 0700).
    mount_point = Path(tempfile.mkdtemp(prefix="approvalbot-pgdisk-"))
    try:
        with small_disk(mount_point, "8m") as disk:
            async with own_database(tablespace=disk) as (_admin, _name, url):
                store = SqlStore(url)
                filler: list[Path] = []

                async def start() -> None:
                    filler.append(fill(disk))

                async def clear() -> None:
                    filler.pop().unlink()

                try:
                    await upgrade(store.engine)
                    async with serving(store) as api:
                        fault = Fault("disk_full", start, clear, room=True)
                        await the_scenario(api, fault, caplog)
                finally:
                    await store.close()
    finally:
        os.rmdir(mount_point)


class Relay:
    """A TCP relay to the PostgreSQL server: stopping it is the server going away for the
    service (connections cut, new ones refused); starting it again on the same port, back."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self.server: asyncio.Server | None = None
        self.pipes: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.pipes):
            writer.transport.abort()
        self.pipes.clear()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.pipes |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.pipes -= {writer, up_writer}


async def test_postgres_unreachable_is_503_and_nothing_accepted_is_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with own_database() as (_admin, _name, url):
        target = sa.engine.make_url(url)
        relay = Relay(target.host or "127.0.0.1", target.port or 5432)
        await relay.start()
        store = SqlStore(str(target.set(host="127.0.0.1", port=relay.port)))
        try:
            await upgrade(store.engine)
            fault = Fault("unreachable", relay.stop, relay.start)
            async with serving(store) as api:
                await the_scenario(api, fault, caplog, store_answers=False)
        finally:
            await store.close()
            with contextlib.suppress(AssertionError):
                await relay.stop()


async def test_a_postgres_server_that_does_not_answer_is_storage_unavailable() -> None:
    """No server at all: writes and reads are 503 `unreachable`, `ping` says no; no PostgreSQL
    needed for this one."""
    with contextlib.closing(socket.socket()) as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]  # closed again below: nothing listens there
    store = SqlStore(f"postgresql://postgres@127.0.0.1:{port}/none")
    try:
        with pytest.raises(StorageUnavailable) as written:
            async with store.write():
                pass
        assert (written.value.cause, written.value.status) == ("unreachable", 503)
        with pytest.raises(StorageUnavailable):
            async with store.read():
                pass
        assert await store.ping() is False
        assert await store.writable() is False
    finally:
        await store.close()


# Every surface ------------------------------------------------------------------------------
def query_only(store: SqlStore) -> Fault:
    """SQLITE_READONLY ("attempt to write a readonly database") on every connection of the
    service: `PRAGMA query_only`, which needs neither root nor a PostgreSQL server."""
    assert store.sqlite is not None
    engine = store.sqlite.engine
    on: list[bool] = []

    def on_connect(dbapi: sqlite3.Connection, _record: Any) -> None:
        if on:
            dbapi.execute("PRAGMA query_only = 1")

    async def start() -> None:
        on.append(True)
        sa.event.listen(engine, "connect", on_connect)
        engine.dispose()
        conn = _writer_connection(store)
        if conn is not None:
            conn.exec_driver_sql("PRAGMA query_only = 1")

    async def clear() -> None:
        on.clear()
        sa.event.remove(engine, "connect", on_connect)
        engine.dispose()
        conn = _writer_connection(store)
        if conn is not None:
            conn.exec_driver_sql("PRAGMA query_only = 0")

    return Fault("read_only", start, clear)


@contextlib.asynccontextmanager
async def read_only_store(backend: str, tmp_path: Path) -> AsyncIterator[tuple[SqlStore, Fault]]:
    if backend == "sqlite":
        store, _ = await make_store("sqlite", tmp_path)
        try:
            yield store, query_only(store)
        finally:
            await store.close()
        return
    async with own_database() as (admin, name, url):
        store = SqlStore(url)

        async def start() -> None:
            await admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
            await end_sessions(admin, name)

        async def clear() -> None:
            await admin.execute(f"ALTER DATABASE {name} RESET default_transaction_read_only")

        try:
            await upgrade(store.engine)
            yield store, Fault("read_only", start, clear)
        finally:
            await store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_cli_and_the_page_show_the_same_code(
    backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same value on every surface: `approvalbot asks approve` prints the code and the
    detail (exit 1), the page's approve form comes back with them, and a sign-in (a write)
    is a 503 page saying so; nothing is logged as unexpected."""
    from click.testing import CliRunner

    from bot.cli import main
    from tests.web_helpers import browserless, get_text, post_form, sign_in

    async with read_only_store(backend, tmp_path) as (store, fault):
        async with serving(store) as api, browserless() as browser:
            _, run = await api.call("POST", "/runs", "agent", {"approval_mode": "ask"})
            tasks = f"/runs/{run['id']}/tasks"
            for key in ("k1", "k2"):
                body = {"key": key, "tool_name": "bash", "tool_input": call_input(False)}
                assert (await api.call("POST", tasks, "agent", body))[0] == 201
            await sign_in(browser, api.url, api.token("alice"))
            inbox = f"{api.url}/inbox"
            assert (await get_text(browser, inbox))[0] == 200
            caplog.set_level(logging.INFO)
            await fault.start()
            expected = f"storage_unavailable: {PLAIN['read_only']}"

            env = {"APPROVALBOT_URL": api.url, "APPROVALBOT_TOKEN": api.token("alice")}
            env["APPROVALBOT_WORKSPACE"] = api.ws
            args = ["asks", "approve", f"{run['id']}/k1"]
            result = await asyncio.to_thread(CliRunner().invoke, main, args, env=env)
            assert result.exit_code == 1 and expected in result.output, result.output

            approve = f"{api.url}/decisions/{run['id']}/k2/approve"
            form = {"next": "/inbox"}
            status, location = await post_form(browser, approve, form, page_url=inbox)
            assert (status, location) == (303, "/inbox")
            status, html = await get_text(browser, inbox)
            assert status == 200 and expected.replace("'", "&#39;") in html, html

            async with browserless() as stranger:
                async with stranger.get(f"{api.url}/login") as page:
                    await page.read()
                answer = await sign_in(stranger, api.url, api.token("bob"))
                assert answer.status == 503
            for record in caplog.records:
                assert "unexpected" not in record.getMessage(), record.getMessage()
                assert record.exc_info is None
            await fault.clear()
            for key in ("k1", "k2"):
                status, task = await api.call("GET", f"{tasks}/{key}", "alice")
                assert (status, task["state"]) == (200, "needs_approval")


async def test_a_press_in_telegram_is_answered_with_the_same_detail(tg: TgWorld) -> None:
    """A chat shows it too: the press is answered with the detail, nothing changes, and the
    same button works once the database takes writes again."""
    await tg.park("k1")
    await tg.flush()
    message = tg.message("make deploy k1")
    fault = query_only(tg.store)
    await fault.start()
    answer = await tg.press(message, "Approve")
    notice = answer.text or ""
    assert PLAIN["read_only"] in notice and "nothing was saved" in notice, notice
    await fault.clear()
    task = await tg.service.get_task(tg.alice, WS, tg.run_id, "k1")
    assert task.state == "needs_approval"
    answer = await tg.press(message, "Approve")
    assert answer.text == "✅ Approved"
