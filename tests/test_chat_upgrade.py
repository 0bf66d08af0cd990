"""A database from before the chat layer's string ids (migration 0005), holding Telegram
deliveries, a ForceReply prompt and a digest page as the old code wrote them: after the
upgrade they still edit and decide."""

from __future__ import annotations

import json
from dataclasses import replace

import sqlalchemy as sa

from store.migrate import downgrade, upgrade
from store.sql import SqlStore
from tests.telegram_harness import FAST, GROUP, WS, build_world, close_world, fake_telegram


def _old_style(data: dict[str, object]) -> dict[str, object]:
    """A delivery record as the integer-id code wrote it."""
    old = dict(data)
    if "chat_id" in old:
        old["chat_id"] = int(str(old["chat_id"]))
    if "messages" in old:
        old["messages"] = [int(str(m)) for m in old["messages"]]  # type: ignore[attr-defined]
    old.pop("attempts", None)
    return old


async def test_telegram_rows_from_before_0005_still_edit_and_decide(sqlite_store: SqlStore) -> None:
    store = sqlite_store
    tuning = replace(FAST, digests=replace(FAST.digests, coalesce_after=2))
    async with fake_telegram() as fake:
        tg = await build_world(store, fake, tuning=tuning)
        await tg.ask("q1", prompt="Which branch?")
        await tg.flush()
        answer = await tg.press(tg.message("Which branch?"), "💬 Answer")
        prompt = await fake.wait_for(
            lambda: next((m for m in fake.sent if "reply to this" in m.text), None)
        )
        await tg.park("k1")
        await tg.flush()  # q1 and k1 alone (the minute's share); k2 and k3 on a digest page
        await tg.park("k2")
        await tg.park("k3")
        await tg.flush()
        page = await fake.wait_for(lambda: next((m for m in fake.sent if "📥" in m.text), None))

        async def page_recorded() -> bool:  # sent, and its message id kept (then we stop)
            return all(p.message_id for p in await tg.adapter.chats.digest_pages("telegram"))

        await fake.wait_for(page_recorded)
        assert answer is not None
        clock = tg.clock
        await close_world(tg)

        # back to 0004, with the records as the old code wrote them
        await downgrade(store.engine, "0004")
        async with store.engine.begin() as conn:
            rows = (
                await conn.execute(sa.text("SELECT channel, task_id, data FROM delivery_ref"))
            ).all()
            for channel, task_id, data in rows:
                value = json.loads(data) if isinstance(data, str) else data
                await conn.execute(
                    sa.text(
                        "UPDATE delivery_ref SET data = :d WHERE channel = :c AND task_id = :t"
                    ),
                    {"d": json.dumps(_old_style(value)), "c": channel, "t": task_id},
                )
            kinds = (await conn.execute(sa.text("SELECT typeof(chat_id) FROM chat_prompt"))).all()
            assert kinds == [("integer",)]
        await upgrade(store.engine)

        tg = await build_world(store, fake, clock=clock, create=False, tuning=tuning)
        try:
            await tg.service.approve(tg.alice, WS, tg.run_id, "k1", via="api")
            await tg.service.deny(tg.carol, WS, tg.run_id, "k2", via="api")
            await tg.flush()
            first = tg.message("make deploy k1")
            assert first.reply_markup is None and first.text.startswith("✅ Approved by alice")
            await fake.wait_for(lambda: "denied by carol" in fake.messages[page.key].text)
            await tg.reply(prompt, "release/1.4")
            task = await tg.settled("q1")
            assert task.resolution == {"content": "release/1.4"} or (
                task.resolution is not None and task.resolution["content"] == "release/1.4"
            )
            assert (task.resolved_by, task.via) == ("alice", "telegram")
            assert fake.messages_in(GROUP)  # and nothing was posted twice:
            assert len([m for m in fake.sent if "make deploy k1" in m.text]) == 1
        finally:
            await close_world(tg)
