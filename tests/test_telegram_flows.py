"""Deciding from Telegram: the real python-telegram-bot against the fake Bot API server."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest
import sqlalchemy as sa

from store.sql import PER_TASK_CHAT, SqlStore
from tests.telegram_harness import ALICE, GROUP, STRANGER, TOKEN, WS, TgWorld, tg_world

pytestmark = pytest.mark.usefixtures("ptb_timedelta")


def buttons(message: object) -> list[str]:
    return [b["text"] for b in message.buttons]  # type: ignore[attr-defined]


async def test_member_approves_and_the_agent_is_released(store: SqlStore) -> None:
    async with tg_world(store) as tg:
        await tg.park("k1")
        await tg.flush()
        msg = tg.message("make deploy k1")
        assert buttons(msg) == [
            "✅ Approve", "❌ Deny", "📝 Deny with reason", "✏️ Edit & approve",
            "🔁 Approve & allow like this",
        ]  # fmt: skip
        assert "Approve bash?" in msg.text and "nightly" in msg.text and "agent" in msg.text
        assert "no rule allows bash in ask mode" in msg.text
        assert "expires in 1 d" in msg.text
        assert '<pre><code class="language-bash">make deploy k1</code></pre>' in msg.raw_text
        link = next(e for e in msg.entities if e["type"] == "text_link")
        assert link["url"] == f"https://approvals.example/decisions/{tg.run_id}/k1"

        waiter = asyncio.create_task(tg.service.wait_task(tg.agent, WS, tg.run_id, "k1", 10.0))
        await asyncio.sleep(0.05)
        answer = await tg.press(msg, "Approve")
        assert answer.text == "✅ Approved" and not answer.show_alert
        released = await asyncio.wait_for(waiter, 5)
        assert (released.state, released.resolved_by, released.via) == (
            "granted",
            "alice",
            "telegram",
        )
        await tg.flush()
        final = tg.fake.messages[msg.key]
        assert final.reply_markup is None
        assert final.text.startswith("✅ Approved by alice · via telegram")
        assert "make deploy k1" in final.text  # what was approved stays readable
        log = await tg.store.log_entries(WS, task_key="k1")
        assert [(r.entry.action, r.entry.actor, r.entry.via) for r in log][-1] == (
            "approved",
            "alice",
            "telegram",
        )


async def test_stranger_gets_a_private_refusal(tg: TgWorld) -> None:
    await tg.park("k1")
    await tg.flush()
    msg = tg.message("make deploy k1")
    for label in ("Approve", "Deny", "Deny with reason"):
        answer = await tg.press(msg, label, user=STRANGER, first_name="Mallory")
        assert (answer.text, answer.show_alert) == ("You are not an approver here", True)
    await tg.flush()
    assert (await tg.task("k1")).state == "needs_approval"
    assert tg.fake.edits == [] and len(tg.fake.sent) == 1  # no prompt, no change


async def test_deny_with_reason_through_force_reply(tg: TgWorld) -> None:
    await tg.park("k1")
    await tg.flush()
    msg = tg.message("make deploy k1")
    answer = await tg.press(msg, "Deny with reason")
    assert answer.text == "Reply to my message, please"
    prompt = tg.fake.sent[-1]
    assert prompt.reply_markup is not None and prompt.reply_markup["force_reply"] is True
    assert prompt.reply_to_message_id == msg.message_id
    assert any(e["type"] == "text_mention" for e in prompt.entities)  # selective: alice
    assert (await tg.task("k1")).parked  # nothing decided by the press itself

    await tg.reply(prompt, "not on a Friday")
    task = await tg.settled("k1")
    assert task.state == "failed" and task.resolved_by == "alice" and task.via == "telegram"
    assert task.error == {"code": "approval_denied", "detail": "not on a Friday"}
    await tg.flush()
    final = tg.fake.messages[msg.key]
    assert final.text.startswith("❌ Denied by alice") and "Reason: not on a Friday" in final.text
    assert final.reply_markup is None


async def test_stranger_reply_to_a_prompt_changes_nothing(tg: TgWorld) -> None:
    await tg.park("k1")
    await tg.flush()
    await tg.press(tg.message("make deploy k1"), "Deny with reason")
    prompt = tg.fake.sent[-1]
    await tg.reply(prompt, "because I say so", user=STRANGER)
    await tg.fake.wait_for(lambda: "not an approver" in tg.fake.sent[-1].text)
    assert (await tg.task("k1")).parked
    await tg.reply(prompt, "fine, alice's reason")  # the prompt still works for a member
    assert (await tg.settled("k1")).error == {
        "code": "approval_denied",
        "detail": "fine, alice's reason",
    }


async def test_free_text_answer(tg: TgWorld) -> None:
    await tg.ask("q1", prompt="Which <branch> & tag should I deploy?")
    await tg.flush()
    msg = tg.message("Which <branch> & tag")
    assert buttons(msg) == ["💬 Answer", "🚫 Decline"]
    await tg.press(msg, "Answer")
    prompt = tg.fake.sent[-1]
    assert "your answer" in prompt.text
    await tg.reply(prompt, "main, v1.2")
    task = await tg.settled("q1")
    assert task.state == "resolved" and task.resolution == {"content": "main, v1.2"}
    await tg.flush()
    final = tg.fake.messages[msg.key]
    assert final.text.startswith("💬 Answered by alice") and "Answer: main, v1.2" in final.text


async def test_option_buttons(tg: TgWorld) -> None:
    await tg.ask("q1", prompt="Where to?", options=["staging", "production"])
    await tg.flush()
    msg = tg.message("Where to?")
    assert buttons(msg) == ["staging", "production", "🚫 Decline"]
    answer = await tg.press(msg, "production")
    assert answer.text == "💬 Answered: production"
    task = await tg.settled("q1")
    assert task.resolution == {"content": "production"} and task.resolved_by == "alice"


async def test_multi_select_toggles_and_submit(tg: TgWorld) -> None:
    await tg.ask("q1", prompt="Which checks?", options=["lint", "types", "tests"], multi=True)
    await tg.flush()
    msg = tg.message("Which checks?")
    assert buttons(msg) == ["☐ lint", "☐ types", "☐ tests", "✔️ Submit", "🚫 Decline"]
    assert (await tg.press(msg, "Submit")).text == "Choose at least one option first"
    assert (await tg.press(msg, "lint")).text == "☑ lint"
    assert (await tg.press(tg.fake.messages[msg.key], "tests")).text == "☑ tests"
    assert (await tg.press(tg.fake.messages[msg.key], "lint")).text == "☐ lint"
    now = tg.fake.messages[msg.key]
    assert buttons(now) == ["☐ lint", "☐ types", "☑ tests", "✔️ Submit", "🚫 Decline"]
    # the toggles live in the store, not in the buttons: the callback data never changed
    assert now.callback_data == msg.callback_data
    assert (await tg.task("q1")).parked
    await tg.press(now, "Submit", user=ALICE)
    task = await tg.settled("q1")
    assert task.resolution == {"content": ["tests"]}


async def test_decline(tg: TgWorld) -> None:
    await tg.ask("q1", prompt="Anything to add?")
    await tg.flush()
    msg = tg.message("Anything to add?")
    assert (await tg.press(msg, "Decline")).text == "🚫 Declined"
    task = await tg.settled("q1")
    assert task.state == "failed" and task.error is not None
    assert task.error["code"] == "declined"
    await tg.flush()
    assert tg.fake.messages[msg.key].text.startswith("🚫 Declined by alice")


async def test_stale_press_after_expiry(tg: TgWorld) -> None:
    await tg.park("k1")
    await tg.flush()
    msg = tg.message("make deploy k1")
    await tg.clock.advance(timedelta(hours=24))
    await tg.core.scheduler.run_once()
    assert (await tg.task("k1")).state == "timed_out"
    await tg.clock.advance(timedelta(minutes=3))
    # the ending is not shown yet (the relay has not run): the button is still there to press
    answer = await tg.press(msg, "Approve")
    assert answer.text == "Already expired by the clock 3 min ago"
    await tg.fake.wait_for(lambda: tg.fake.messages[msg.key].reply_markup is None)
    assert tg.fake.messages[msg.key].text.startswith("⌛ Expired by the clock")
    await tg.flush()  # the ending's own item finds it shown already
    assert (await tg.task("k1")).state == "timed_out"
    assert len(tg.fake.edits) == 1


async def test_stale_press_names_who_decided(tg: TgWorld) -> None:
    await tg.park("k1")
    await tg.flush()
    msg = tg.message("make deploy k1")
    await tg.service.approve(tg.carol, WS, tg.run_id, "k1", via="web")
    await tg.clock.advance(timedelta(minutes=3))
    answer = await tg.press(msg, "Deny")
    assert answer.text == "Already approved by carol 3 min ago"
    assert (await tg.task("k1")).state == "granted"


async def test_ending_from_another_surface_edits_the_message(tg: TgWorld) -> None:
    await tg.park("k1")
    await tg.ask("q1", prompt="Proceed?", options=["yes", "no"])
    await tg.flush()
    msg, question = tg.message("make deploy k1"), tg.message("Proceed?")
    await tg.service.approve(tg.alice, WS, tg.run_id, "k1", via="api")
    await tg.service.stop(tg.agent, WS, tg.run_id)
    await tg.flush()
    approved, cancelled = tg.fake.messages[msg.key], tg.fake.messages[question.key]
    assert approved.text.startswith("✅ Approved by alice · via api")
    assert approved.reply_markup is None
    assert cancelled.text.startswith("⏹ Cancelled by agent") and cancelled.reply_markup is None
    await tg.flush()
    assert len(tg.fake.edits) == 2  # each shown once


async def test_unknown_or_tampered_callback_data(tg: TgWorld) -> None:
    # A key no random button id can hold by chance ("k1" did, once in a few hundred runs).
    key = "release-key-1"
    await tg.park(key)
    await tg.flush()
    msg = tg.message(f"make deploy {key}")
    real = msg.callback_data[0]
    tampered = real[:-1] + ("y" if real.endswith("x") else "x")  # one character changed
    for data in ("garbage", "A" * 16, tampered, f"approve:{key}"):
        answer = await tg.press(msg, data=data, force=True)
        assert answer.text == "This button is no longer valid."
    assert (await tg.task(key)).parked and tg.fake.edits == []
    for data in msg.callback_data:
        assert len(data.encode()) <= 64 and key not in data and tg.run_id not in data


async def test_whoami_tells_people_their_ids(tg: TgWorld) -> None:
    tg.fake.send_user_message(chat_id=GROUP, user_id=4242, text="/whoami")
    reply = await tg.fake.wait_for(
        lambda: next((m for m in tg.fake.sent if "4242" in m.text), None)
    )
    assert str(GROUP) in reply.text and "--telegram-user-id 4242" in reply.text


async def test_the_token_stays_out_of_logs(
    sqlite_store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with tg_world(sqlite_store, fake={"fault_rate": 0.5, "timeout_delay": 0.3}) as tg:
        logging.getLogger("httpx").setLevel(logging.DEBUG)  # even if someone turns it up
        await tg.park("k1")
        for _ in range(10):
            await tg.flush()
            await tg.clock.advance(timedelta(seconds=400))
        logging.getLogger("httpx").info("POST %s/sendMessage", tg.fake.base_url + TOKEN)
    assert caplog.records and TOKEN not in caplog.text
    assert "<redacted>" in caplog.text


async def test_chat_records_of_settled_decisions_are_purged(tg: TgWorld) -> None:
    """Button ids, message references and the rest go with the retention; a decision still
    waiting keeps its own, and an old button is answered as no longer valid."""
    await tg.park("old")
    await tg.park("waiting")
    await tg.flush()
    old, waiting = tg.message("make deploy old"), tg.message("make deploy waiting")
    approve_old = old.callback_data[0]
    await tg.press(old, "Approve")
    await tg.flush()
    old_task, waiting_task = await tg.task("old"), await tg.task("waiting")

    async def chat_rows(task_id: str) -> int:
        found = 0
        async with tg.store.read() as tx:
            for t in PER_TASK_CHAT:
                count = sa.select(sa.func.count()).select_from(t).where(t.c.task_id == task_id)
                found += (await tx.conn.execute(count)).scalar_one()
        return found

    assert await chat_rows(old_task.id) > 0 and await chat_rows(waiting_task.id) > 0
    await tg.store.purge(tg.clock.now() - timedelta(days=1))  # nothing is that old yet
    assert await chat_rows(old_task.id) > 0
    assert await tg.store.purge(tg.clock.now() + timedelta(seconds=1)) > 0
    assert await chat_rows(old_task.id) == 0
    assert await chat_rows(waiting_task.id) > 0
    answer = await tg.press(old, data=approve_old, force=True)
    assert answer.text == "This button is no longer valid."
    assert (await tg.press(waiting, "Approve")).text == "✅ Approved"
    assert (await tg.task("old")).resolved_by == "alice"  # the decision itself stays
