"""The migrations build exactly the schema the tables declare, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

import store.tables  # noqa: F401  (registers the tables)
from bot.domain import NewEvent
from bot.ports import ChatPrompt, Versioned
from store.chat import ChatStore
from store.migrate import downgrade, head_revision, is_current, upgrade
from store.sql import SqlStore

AT = datetime(2026, 11, 30, tzinfo=UTC)


def _diff(connection: Any) -> list[Any]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, SQLModel.metadata))


async def test_migrated_schema_matches_the_tables(store: SqlStore) -> None:
    assert await is_current(store.engine) and head_revision() == "0012"
    async with store.engine.connect() as conn:
        assert await conn.run_sync(_diff) == []


async def test_0004_carries_event_sequences_over(store: SqlStore) -> None:
    """A database with runs and events from before 0004 goes on numbering where it stopped,
    and comes back down to 0003 with the numbers restored."""
    await downgrade(store.engine, "0003")
    async with store.engine.begin() as conn:
        for run_id, seq in (("run_a", 7), ("run_b", 0)):
            await conn.execute(
                sa.text(
                    "INSERT INTO run (id, workspace_id, state, approval_mode, approval_rules,"
                    " aliases, title, event_seq, created_at) VALUES (:id, 'ws', 'running',"
                    " 'ask', '[]', '{}', '', :seq, 0)"
                ),
                {"id": run_id, "seq": seq},
            )
            for number in range(1, seq + 1):
                await conn.execute(
                    sa.text(
                        "INSERT INTO event (run_id, seq, name, data, created_at)"
                        " VALUES (:run, :seq, 'note', '{}', 0)"
                    ),
                    {"run": run_id, "seq": number},
                )
    await upgrade(store.engine)
    async with store.write() as tx:
        await tx.add_events([NewEvent("run_a", "note", {}), NewEvent("run_b", "note", {})], AT)
    assert [e.seq for e in await store.events_after("run_a", 7)] == [8]
    assert [e.seq for e in await store.events_after("run_b", 0)] == [1]
    await downgrade(store.engine, "0003")
    async with store.engine.connect() as conn:
        rows = await conn.execute(sa.text("SELECT id, event_seq FROM run ORDER BY id"))
        assert [tuple(r) for r in rows] == [("run_a", 8), ("run_b", 1)]
    await upgrade(store.engine)


async def test_0005_keeps_telegram_rows_under_their_ids_as_text(store: SqlStore) -> None:
    """Telegram rows written before 0005, with integer ids, are found again under the same ids
    as text; and a database comes back down to 0004 with its integers."""
    await downgrade(store.engine, "0004")
    ref = '{"chat_id": -100200300, "messages": [17], "ended": false}'
    async with store.engine.begin() as conn:
        for statement in (
            "INSERT INTO delivery_ref (channel, task_id, data, version)"
            f" VALUES ('telegram', 'tsk_1', '{ref}', 1)",
            "INSERT INTO chat_prompt (channel, chat_id, message_id, task_id, action, user_id,"
            " created_at) VALUES ('telegram', -100200300, 42, 'tsk_1', 'deny_reason', 7, 0)",
            "INSERT INTO chat_digest (channel, chat_id, message_id, task_ids, is_open, done,"
            " shown, lease_until, version, created_at, updated_at) VALUES ('telegram',"
            " -100200300, 99, '[\"tsk_1\"]', false, false, '', 0, 3, 0, 0)",
            "INSERT INTO chat_callback (id, channel, task_id, action, option, created_at)"
            " VALUES ('cb1', 'telegram', 'tsk_1', 'approve', NULL, 0)",
        ):
            await conn.execute(sa.text(statement))
    await upgrade(store.engine)
    chats = ChatStore(store)
    prompt = await chats.prompt("telegram", "-100200300", "42")
    assert prompt is not None
    assert (prompt.chat_id, prompt.message_id, prompt.user_id) == ("-100200300", "42", "7")
    assert prompt.task_id == "tsk_1" and prompt.action == "deny_reason"
    [page] = await chats.digest_pages("telegram", "-100200300")
    assert (page.chat_id, page.message_id, page.task_ids, page.version) == (
        "-100200300",
        "99",
        ["tsk_1"],
        3,
    )
    assert await chats.get_ref("telegram", "tsk_1") == Versioned(
        {"chat_id": -100200300, "messages": [17], "ended": False}, 1
    )
    assert await chats.drop_prompt("telegram", "-100200300", "42")
    await chats.add_prompt(ChatPrompt("telegram", "-100200300", "43", "tsk_1", "answer", "7"), AT)
    assert await chats.swap_record("telegram", "budget", {"left": 1}, 0)
    await downgrade(store.engine, "0004")
    async with store.engine.connect() as conn:
        prompts = await conn.execute(
            sa.text("SELECT chat_id, message_id, user_id FROM chat_prompt")
        )
        assert [tuple(r) for r in prompts] == [(-100200300, 43, 7)]
        pages = await conn.execute(sa.text("SELECT chat_id, message_id FROM chat_digest"))
        assert [tuple(r) for r in pages] == [(-100200300, 99)]
    await upgrade(store.engine)
    assert await chats.prompt("telegram", "-100200300", "43") is not None
    assert await chats.get_record("telegram", "budget") is None  # chat_record went with 0004


async def test_chat_records_change_by_compare_and_swap(store: SqlStore) -> None:
    chats = ChatStore(store)
    assert await chats.get_record("slack", "thread:run_1") is None
    assert await chats.swap_record("slack", "thread:run_1", {"ts": "1700000000.000100"}, 0)
    assert not await chats.swap_record("slack", "thread:run_1", {"ts": "other"}, 0)
    found = await chats.get_record("slack", "thread:run_1")
    assert found == Versioned({"ts": "1700000000.000100"}, 1)
    assert await chats.swap_record("slack", "thread:run_1", {"ts": "x"}, 1)
    assert not await chats.swap_record("slack", "thread:run_1", {"ts": "y"}, 1)
    assert await chats.get_record("slack", "thread:run_1") == Versioned({"ts": "x"}, 2)
    assert await chats.get_record("telegram", "thread:run_1") is None
