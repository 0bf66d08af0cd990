"""Shared fixtures: a real store on SQLite and (when configured) on PostgreSQL, a fake clock."""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from bot.domain import OutboxItem, Principal, Run, Task
from store.migrate import head_revision, upgrade
from store.sql import SqlStore
from tests.telegram_harness import TgWorld, tg_world

if TYPE_CHECKING:
    from playwright.async_api import Browser

    from tests.web_helpers import Site

# Property tests: no example database (it would be written into the tree, .hypothesis/), no
# per-example deadline and no "too slow" health check (both fail on a loaded machine, not on a
# defect). Each test's own @settings still sets its number of examples.
settings.register_profile(
    "approvalbot", database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("approvalbot")
# Its cache of the source's constants goes outside the tree too.
set_hypothesis_home_dir(os.path.join(os.environ.get("TMPDIR", "/tmp"), "approvalbot-hypothesis"))

SUITE_KNOBS = ("APPROVALBOT_TEST_", "APPROVALBOT_BENCH_", "APPROVALBOT_CHROMIUM")


def _clear_the_callers_settings() -> None:
    """The suite must not depend on the caller's environment: a shell with
    APPROVALBOT_SERVER__PORT (or any other setting) exported would change what `Settings()`
    reads in every test, and the subprocesses tests start inherit it. Only the suite's own
    knobs are kept: APPROVALBOT_TEST_* (e.g. the PostgreSQL URL), APPROVALBOT_BENCH_* and
    APPROVALBOT_CHROMIUM (the browser tests' Chromium)."""
    for name in [n for n in os.environ if n.startswith("APPROVALBOT_")]:
        if not name.startswith(SUITE_KNOBS):
            del os.environ[name]


_clear_the_callers_settings()  # at import, before any test module or fixture reads settings


@pytest.fixture(autouse=True, scope="session")
def _no_cli_profile_of_the_caller(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`approvalbot asks` reads a CLI profile under $XDG_CONFIG_HOME: the caller's own must
    never answer for a test, so the suite's config home is an empty directory of its own."""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))


PG_URL = os.environ.get("APPROVALBOT_TEST_POSTGRES_URL")
PG_SKIP = "APPROVALBOT_TEST_POSTGRES_URL is not set: PostgreSQL tests skipped (CI sets it)"
# The files that take longest (`pytest --durations=0`), handed out first: two workers take a
# file each at a time (`make unit`, which keeps this order with --no-loadscope-reorder), and a
# long file handed out last kept one worker busy for half a minute after the other had finished.
LONGEST_FIRST = (
    "test_crash.py", "test_web_policy.py", "test_mcp.py", "test_slack_delivery.py",
    "test_chat_edit_allow.py", "test_web_queue.py", "test_telegram_delivery.py",
    "test_web_records.py", "test_fuzz_routes.py", "test_cli_admin.py",
)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: order kept


@pytest.fixture
def blackholed() -> Iterator[str]:
    """A loopback URL whose connections are never completed: a listener with backlog 0 whose
    accept queue is full, so the kernel drops further SYNs (no RST, unlike a closed port)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    check = socket.socket()
    check.setblocking(False)
    check.connect_ex(("127.0.0.1", port))
    fillers.append(check)
    try:
        time.sleep(0.2)  # a loopback handshake the kernel completes takes microseconds
        if _connected(check):
            pytest.skip("this kernel completes connections beyond a full accept queue")
        yield f"http://127.0.0.1:{port}"
    finally:
        for each in fillers:
            each.close()
        listener.close()


def _connected(sock: socket.socket) -> bool:
    try:
        sock.getpeername()
    except OSError:
        return False
    return True


def bytecode_env() -> dict[str, str]:
    """For a Python subprocess: keep its bytecode where `make test` keeps the suite's
    (PYTHONPYCACHEPREFIX, outside the tree), else write none, so nothing lands in the tree."""
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    return {"PYTHONPYCACHEPREFIX": prefix} if prefix else {"PYTHONDONTWRITEBYTECODE": "1"}


BACKENDS = ["sqlite", "postgres"]


def pg_dsn() -> str:
    assert PG_URL is not None
    return PG_URL.replace("postgresql+asyncpg://", "postgresql://")


_SQLITE_TEMPLATE: list[Path] = []  # this process's migrated SQLite file, made once


async def _sqlite_template() -> Path:
    """A SQLite file migrated to head by `upgrade`, once per test process: each test's store
    starts as a copy of it (migrating each one took most of a chat or page test's setup;
    migrations themselves are tested in test_migrations.py). On PostgreSQL the DDL itself is
    what costs, replayed or not, so each schema is migrated."""
    if not _SQLITE_TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="approvalbot-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        template = SqlStore(f"sqlite+aiosqlite:///{folder}/template.db")
        await upgrade(template.engine)
        await template.close()  # the last connection closed: the WAL is folded into the file
        _SQLITE_TEMPLATE.append(folder / "template.db")
    return _SQLITE_TEMPLATE[0]


async def make_store(backend: str, tmp_path: object) -> tuple[SqlStore, str | None]:
    """A migrated store; on PostgreSQL in a schema of its own so tests never see each other."""
    if backend == "sqlite":
        path = Path(str(tmp_path)) / "approvalbot.db"
        shutil.copyfile(await _sqlite_template(), path)
        return SqlStore(f"sqlite+aiosqlite:///{path}"), None
    if not PG_URL:
        pytest.skip(PG_SKIP)
    if _PG_SCHEMAS:  # one a finished test emptied
        schema = _PG_SCHEMAS.pop()
        return SqlStore(pg_dsn(), schema=schema), schema
    schema = f"t_{secrets.token_hex(6)}"
    conn = await asyncpg.connect(pg_dsn())
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
    finally:
        await conn.close()
    store = SqlStore(pg_dsn(), schema=schema)
    await upgrade(store.engine)
    return store, schema


# PostgreSQL schemas this process migrated and a finished test emptied, for the next test:
# emptying one (TRUNCATE) takes a third of the time migrating a new one does.
_PG_SCHEMAS: list[str] = []
_PG_DROP_AT_EXIT: list[object] = []  # registered once


async def drop_schema(schema: str | None) -> None:
    """A test is done with its schema: emptied for the next one when it is still at head (a
    test may have migrated it down and failed before coming back up), else dropped."""
    if schema is None:
        return
    conn = await asyncpg.connect(pg_dsn())
    try:
        version = await conn.fetchval(f"SELECT version_num FROM {schema}.alembic_version")
        if version == head_revision():
            tables = await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = $1"
                " AND tablename <> 'alembic_version'",
                schema,
            )
            names = ", ".join(f'{schema}."{row[0]}"' for row in tables)
            await conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
            if not _PG_DROP_AT_EXIT:
                _PG_DROP_AT_EXIT.append(atexit.register(_drop_pooled))
            _PG_SCHEMAS.append(schema)
            return
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
    except asyncpg.PostgresError:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()


def _drop_pooled() -> None:
    """At exit: the emptied schemas go (nothing else is left in the database)."""

    async def drop() -> None:
        conn = await asyncpg.connect(pg_dsn())
        try:
            for schema in _PG_SCHEMAS:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()

    if _PG_SCHEMAS:
        asyncio.run(drop())


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: object) -> AsyncIterator[SqlStore]:
    store, schema = await make_store(request.param, tmp_path)
    yield store
    await store.close()
    await drop_schema(schema)


@dataclass
class RecordingNotifier:
    """A real Notifier (the port) that keeps what it was given, like a chat would."""

    name: str = "rec"
    delivered: list[tuple[OutboxItem, Task]] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    fail_next: int = 0

    async def deliver(self, item: OutboxItem, task: Task, run: Run) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("chat unreachable")
        if item.idempotency_key in self.keys:
            return  # delivered before a crash: never show it twice
        self.keys.add(item.idempotency_key)
        self.delivered.append((item, task))

    async def healthy(self) -> bool:
        return True

    def kinds(self, task_key: str | None = None) -> list[str]:
        return [i.kind for i, t in self.delivered if task_key is None or t.key == task_key]


@dataclass
class World:
    core: Core
    clock: FakeClock
    notifier: RecordingNotifier
    alice: Principal
    bob: Principal
    agent: Principal
    tokens: dict[str, str]
    ws: str = "acme"


async def make_world(store: SqlStore, settings: Settings | None = None) -> World:
    clock = FakeClock()
    notifier = RecordingNotifier()
    core = await Core.build(store, settings or Settings(), clock=clock, notifiers={"rec": notifier})
    await core.admin.create_workspace("acme")
    alice = await core.admin.add_member("acme", "alice", telegram_user_id=1001)
    bob = await core.admin.add_member("acme", "bob")
    agent = await core.admin.add_application("acme", "agent")
    return World(
        core,
        clock,
        notifier,
        alice.principal,
        bob.principal,
        agent.principal,
        {"alice": alice.token, "bob": bob.token, "agent": agent.token},
    )


@pytest.fixture
async def world(store: SqlStore) -> World:
    return await make_world(store)


# Telegram adapter tests -------------------------------------------------------------------------
@pytest.fixture
def ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    """python-telegram-bot's RetryAfter.retry_after as a timedelta (its coming default)."""
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def sqlite_store(tmp_path: object) -> AsyncIterator[SqlStore]:
    store, _ = await make_store("sqlite", tmp_path)
    yield store
    await store.close()


@pytest.fixture
async def tg(sqlite_store: SqlStore, ptb_timedelta: None) -> AsyncIterator[TgWorld]:
    async with tg_world(sqlite_store) as world:
        yield world


# The Chromium tests' fixtures (tests/browser_helpers.py); imported late, as web_helpers
# imports this module.
@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    """One Chromium per test module."""
    from tests.browser_helpers import chromium

    async with chromium() as launched:
        yield launched


@pytest_asyncio.fixture(loop_scope="module")
async def served(tmp_path: Path) -> AsyncIterator[Site]:
    """The service on SQLite with alice and bob, serving the page and the API on loopback."""
    from tests.web_helpers import site

    store, _ = await make_store("sqlite", tmp_path)
    world = await make_world(store)
    async with site(world) as s:
        yield s
    await store.close()
