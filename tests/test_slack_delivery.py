"""Slack's own behaviour: signed requests, threads, modals, replies in threads, faults, 429s,
Socket Mode, two instances."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from adapters.chat.pacing import Limits
from store.sql import SqlStore
from tests.slack_harness import (
    ALICE,
    BOT_TOKEN,
    CAROL,
    CHANNEL,
    FAST,
    SIGNING_SECRET,
    STRANGER,
    WS,
    build_world,
    close_world,
    fake_slack,
    settings_for,
    slack_world,
)

pytestmark = pytest.mark.timeout(60)


def parents(sl: Any) -> list[Any]:
    return [m for m in sl.fake.messages_in(CHANNEL) if m.from_bot and not m.thread_ts]


def replies(sl: Any, parent: Any) -> list[Any]:
    return [m for m in sl.fake.messages_in(CHANNEL, parent.ts) if m.ts != parent.ts]


async def test_requests_must_be_signed_recently(sqlite_store: SqlStore) -> None:
    async with slack_world(sqlite_store) as sl:
        await sl.park("k1")
        await sl.flush()
        decision = sl.message("make deploy k1")
        element = sl.button(decision, "Approve")
        payload = sl.fake.block_actions_payload(ALICE, CHANNEL, decision.ts, element["action_id"])
        stale = int(time.time()) - 6 * 60
        for kwargs in (
            {"signature": "v0=" + "0" * 64},
            {"timestamp": stale},
            {"headers": {"X-Slack-Signature": ""}},
        ):
            status, _ = await sl.fake.post_event(
                sl.events_url, payload, SIGNING_SECRET, form=True, **kwargs
            )
            assert status == 401, kwargs
        status, _ = await sl.fake.post_event(sl.events_url, payload, "another-secret", form=True)
        assert status == 401
        assert (await sl.task("k1")).parked and not sl.fake.ephemeral_messages
        challenge = sl.fake.url_verification_body(
            "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
        )
        status, text = await sl.fake.post_event(sl.events_url, challenge, SIGNING_SECRET)
        assert status == 200 and "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in text
        status, _ = await sl.fake.post_event(sl.events_url, b"\xff\xfe", SIGNING_SECRET)
        assert status in (400, 401)


async def test_one_thread_per_run_and_the_parent_keeps_count(sqlite_store: SqlStore) -> None:
    async with slack_world(sqlite_store) as sl:
        for key in ("k1", "k2", "k3"):
            await sl.park(key)
        await sl.flush()
        [parent] = parents(sl)
        decisions = replies(sl, parent)
        assert [m.reply_broadcast for m in decisions] == [True, False, False]
        await sl.fake.wait_for(lambda: "3 waiting" in sl.fake.message(CHANNEL, parent.ts).text)
        await sl.service.approve(sl.alice, WS, sl.run_id, "k1", via="api")
        await sl.service.deny(sl.carol, WS, sl.run_id, "k2", reason="not now", via="web")
        await sl.flush()
        await sl.fake.wait_for(lambda: "1 waiting" in sl.fake.message(CHANNEL, parent.ts).text)
        denied = sl.fake.message(CHANNEL, decisions[1].ts)
        assert "Denied by carol" in denied.text and denied.elements == []
        assert "not now" in json.dumps(denied.blocks)

        other = await sl.service.declare_run(sl.agent, WS, _spec("weekly"))
        await sl.park("o1", run_id=other.id)
        await sl.flush()
        assert len(parents(sl)) == 2  # another run, another thread
        await sl.service.stop(sl.agent, WS, other.id)
        await sl.flush()
        [stopped] = replies(sl, parents(sl)[1])
        assert "Cancelled" in sl.fake.message(CHANNEL, stopped.ts).text


def _spec(title: str) -> Any:
    from bot.service import RunSpec

    return RunSpec(approval_mode="ask", title=title)


async def test_two_instances_create_one_thread_and_share_the_budget(store: SqlStore) -> None:
    """Two instances on one database (on PostgreSQL each with its own connections): one
    parent per run however they race, and together they stay within the channel's rate (the
    fake answers 429 beyond one message per 0.1 s). The budget books one per 0.5 s: the
    margin absorbs a loaded machine's delay between a booked slot and its send, while two
    instances that do not share the budget still collide (their first slots coincide)."""
    limits = Limits(per_interval=0.5, per_burst=1, window_count=10_000)
    other = SqlStore(store.url, schema=store.schema) if store.postgres else store
    async with fake_slack(enforce_rate_limits=True, rate_limit=(1, 0.1)) as fake:
        first = await build_world(store, fake, limits=limits, shared_budget=True)
        second = await build_world(
            other, fake, create=False, limits=limits, shared_budget=True, clock=first.clock
        )
        try:
            first.core.relay.batch = second.core.relay.batch = 1  # both deliver, side by side
            for i in range(8):
                await first.park(f"k{i}")
            for _ in range(20):
                await asyncio.gather(first.flush(), second.flush())
                if await first.store.outbox_backlog() == 0:
                    break
                await first.clock.advance(timedelta(seconds=5))  # past the backoff (NotYet)
            [parent] = parents(first)
            assert len(replies(first, parent)) == 8
            assert fake.rejections(error="ratelimited") == []
            assert first.adapter.retry_afters == second.adapter.retry_afters == 0
        finally:
            await close_world(second)
            await close_world(first)
            if other is not store:
                await other.close()


async def test_deny_with_reason_needs_a_reason(sqlite_store: SqlStore) -> None:
    async with slack_world(sqlite_store) as sl:
        await sl.park("k1")
        await sl.flush()
        decision = sl.message("make deploy k1")
        await sl.press(decision, "Deny with reason", notice=False)
        [view] = await sl.fake.wait_for(lambda: sl.fake.views_opened())
        metadata = view.view["private_metadata"]
        empty = sl.fake.view_submission_payload(ALICE, "approvalbot_text", metadata,
                                                {"text": {"text": "   "}})  # fmt: skip
        status, body = await sl.post(empty)
        assert status == 200 and json.loads(body)["response_action"] == "errors"
        assert (await sl.task("k1")).parked  # never a silent deny
        reason = {"text": {"text": "use staging first"}}
        given = sl.fake.view_submission_payload(ALICE, "approvalbot_text", metadata, reason)
        status, body = await sl.post(given)
        assert status == 200 and "errors" not in body
        task = await sl.settled("k1")
        assert task.state == "failed" and task.error == {
            "code": "approval_denied", "detail": "use staging first"
        }  # fmt: skip
        assert (task.resolved_by, task.via) == ("alice", "slack")


async def test_a_reply_in_the_thread_answers_its_one_open_question(
    sqlite_store: SqlStore,
) -> None:
    async with slack_world(sqlite_store) as sl:
        await sl.ask("q1", prompt="Which branch?")
        await sl.park("k1")
        await sl.flush()
        [parent] = parents(sl)
        # a reply outside the thread, the bot's own, and a stranger's answer nothing
        for event in (
            sl.fake.message_event(ALICE, CHANNEL, "main"),
            sl.fake.message_event(None, CHANNEL, "main", thread_ts=parent.ts, bot_id="B0FAKEBOT"),
        ):
            assert (await sl.fake.post_event(sl.events_url, event, SIGNING_SECRET))[0] == 200
        before = len(sl.fake.ephemeral_messages)
        event = sl.fake.message_event(STRANGER, CHANNEL, "evil", thread_ts=parent.ts)
        assert (await sl.fake.post_event(sl.events_url, event, SIGNING_SECRET))[0] == 200
        refusal = await sl.next_ephemeral(before, STRANGER)
        assert refusal is not None and refusal.text == "You are not an approver here"
        await asyncio.sleep(0.1)
        assert (await sl.task("q1")).parked

        event = sl.fake.message_event(CAROL, CHANNEL, "release/1.4", thread_ts=parent.ts)
        assert (await sl.fake.post_event(sl.events_url, event, SIGNING_SECRET))[0] == 200
        task = await sl.settled("q1")
        assert task.resolution == {"content": "release/1.4"} or task.resolution["content"] == (
            "release/1.4"
        )
        assert (task.resolved_by, task.via) == ("carol", "slack")
        assert (await sl.task("k1")).parked  # an approval is not answered by a reply

        await sl.ask("q2", prompt="Why?")
        await sl.ask("q3", prompt="When?")
        await sl.flush()
        event = sl.fake.message_event(ALICE, CHANNEL, "today", thread_ts=parent.ts)
        assert (await sl.fake.post_event(sl.events_url, event, SIGNING_SECRET))[0] == 200
        await sl.fake.wait_for(
            lambda: any("Several questions" in m.text for m in replies(sl, parent))
        )
        assert (await sl.task("q2")).parked and (await sl.task("q3")).parked


async def test_checkboxes_answer_nothing_until_submit(sqlite_store: SqlStore) -> None:
    async with slack_world(sqlite_store) as sl:
        await sl.ask("q1", prompt="Which checks?", options=["unit", "lint", "e2e"], multi=True)
        await sl.flush()
        question = sl.message("Which checks?")
        [boxes] = [e for e in question.elements if e["type"] == "checkboxes"]
        tick = sl.fake.block_actions_payload(
            ALICE, CHANNEL, question.ts, boxes["action_id"], action_type="checkboxes",
            selected_options=["0", "2"],
        )  # fmt: skip
        assert (await sl.post(tick))[0] == 200
        await asyncio.sleep(0.2)
        assert (await sl.task("q1")).parked
        state = {"choices": {boxes["action_id"]: {
            "type": "checkboxes",
            "selected_options": [o for o in boxes["options"] if o["value"] in ("0", "2")],
        }}}  # fmt: skip
        answer = await sl.press(question, "Submit", state=state)
        assert answer is not None and answer.text.endswith("unit, e2e")
        task = await sl.settled("q1")
        assert task.resolution is not None and task.resolution["content"] == ["unit", "e2e"]


async def test_the_press_is_acknowledged_before_the_work(sqlite_store: SqlStore) -> None:
    """Slack wants a 200 within 3 s: the answer comes before the (here very slow) work."""
    async with slack_world(sqlite_store) as sl:
        await sl.park("k1")
        await sl.flush()
        decision = sl.message("make deploy k1")
        sl.fake.fail_next("chat.postEphemeral", timeout=2.5)
        element = sl.button(decision, "Approve")
        payload = sl.fake.block_actions_payload(ALICE, CHANNEL, decision.ts, element["action_id"])
        status, _ = await sl.post(payload)
        assert status == 200 and not sl.fake.ephemeral_messages  # acked; still working
        assert (await sl.settled("k1")).state == "granted"


async def test_nudges_mention_the_approvers_in_the_thread_once(sqlite_store: SqlStore) -> None:
    async with slack_world(sqlite_store) as sl:
        await sl.park("k1")
        await sl.flush()
        await sl.clock.advance(timedelta(hours=23, minutes=1))
        await sl.core.scheduler.run_once()
        await sl.flush()
        [parent] = parents(sl)
        nudges = [m for m in replies(sl, parent) if m.text.startswith("⏰")]
        assert [n.text for n in nudges] == [f"⏰ *bash* expires in 59 min — <@{ALICE}> <@{CAROL}>"]
        await sl.core.scheduler.run_once()
        await sl.flush()
        assert len([m for m in replies(sl, parent) if m.text.startswith("⏰")]) == 1


async def test_faults_every_decision_once_every_ending_shown(sqlite_store: SqlStore) -> None:
    """With a fifth of the Web API calls failing, timing out, or applied and then timing out,
    every decision is shown exactly once and every ending is shown. (One message each here;
    digests under faults: the Telegram burst test.)"""
    digests = replace(FAST.digests, coalesce_after=1000, max_post_wait=1000.0)
    tuning = replace(FAST, request_timeout=0.5, digests=digests)
    relaxed = Limits(per_interval=0.001, per_burst=1000, window_count=100_000)
    async with slack_world(sqlite_store, tuning=tuning, limits=relaxed) as sl:
        sl.fake.hold_seconds = 1.0
        sl.fake.fail_rate(
            None, 0.2, kinds=("500", "timeout", "apply_then_timeout", "429"), seed=11,
            retry_after=1,
        )  # fmt: skip
        keys = [f"k{i}" for i in range(8)]
        for key in keys:
            await sl.park(key)

        async def drive(done: Any) -> None:
            for _ in range(80):
                await sl.core.relay.run_once()
                if done():
                    return
                await sl.clock.advance(timedelta(seconds=400))  # past any backoff
            states = {k: [len(m.elements) for m in shown(k)] for k in keys}
            raise AssertionError(f"the relay did not get everything through: {states}")

        def shown(key: str) -> list[Any]:
            return [
                m for m in sl.fake.messages.values()
                if m.metadata is not None and f"make deploy {key}" in json.dumps(m.blocks)
            ]  # fmt: skip

        await drive(lambda: all(shown(k) for k in keys))
        for key in keys[:4]:
            await sl.service.approve(sl.alice, WS, sl.run_id, key, via="api")
        await sl.service.stop(sl.agent, WS, sl.run_id)

        def ended() -> bool:
            return all(shown(k) and not shown(k)[0].elements for k in keys)

        await drive(ended)
        assert sl.fake.faults_injected
        for key in keys:
            assert len(shown(key)) == 1, key
        assert len(parents(sl)) == 1
        assert await sl.store.outbox_backlog() == 0


async def test_an_uncertain_post_is_found_not_repeated(sqlite_store: SqlStore) -> None:
    """A post that timed out after Slack applied it is looked for, not posted again (nor
    moved to a digest page, though the channel had its share of posts meanwhile)."""
    digests = replace(FAST.digests, coalesce_after=2)
    tuning = replace(FAST, request_timeout=0.5, digests=digests)
    async with slack_world(sqlite_store, tuning=tuning) as sl:
        sl.fake.hold_seconds = 1.0
        await sl.park("k0")
        await sl.flush()  # the run's thread exists
        await sl.park("k1")
        sl.fake.fail_next("chat.postMessage", apply_then_timeout=True)
        await sl.flush()
        assert len([m for m in sl.fake.messages.values() if "deploy k1" in m.text]) == 1
        await sl.clock.advance(timedelta(seconds=30))
        await sl.flush()
        assert sl.fake.calls_to("conversations.replies")  # looked before posting again
        assert len([m for m in sl.fake.messages.values() if "deploy k1" in m.text]) == 1
        assert not await sl.adapter.chats.digest_pages("slack")
        assert await sl.store.outbox_backlog() == 0


async def test_a_429_is_waited_out(sqlite_store: SqlStore) -> None:
    async with slack_world(sqlite_store) as sl:
        await sl.park("k1")
        sl.fake.fail_next("chat.postMessage", retry_after=1)
        started = time.monotonic()
        await sl.flush()
        assert time.monotonic() - started >= 0.9  # Retry-After honoured, then posted
        assert len(parents(sl)) == 1 and sl.adapter.retry_afters == 1
        assert await sl.store.outbox_backlog() == 0


async def test_a_restart_posts_nothing_again(sqlite_store: SqlStore) -> None:
    async with fake_slack() as fake:
        first = await build_world(sqlite_store, fake)
        await first.park("k1")
        await first.flush()
        posts = len(fake.calls_to("chat.postMessage"))
        await close_world(first)
        again = await build_world(sqlite_store, fake, create=False)
        try:
            await again.park("k2")
            await again.flush()
            assert len(fake.calls_to("chat.postMessage")) == posts + 1  # k2 only, same thread
            assert len(parents(again)) == 1
        finally:
            await close_world(again)


async def test_socket_mode(sqlite_store: SqlStore) -> None:
    async with fake_slack() as fake:
        settings = settings_for(fake, mode="socket", app_token=fake.app_token, signing_secret="")
        sl = await build_world(sqlite_store, fake, settings=settings)
        try:
            await fake.wait_socket_connected()
            await sl.park("k1")
            await sl.flush()
            decision = sl.message("make deploy k1")
            element = sl.button(decision, "Approve")
            payload = fake.block_actions_payload(ALICE, CHANNEL, decision.ts, element["action_id"])
            envelope = await fake.socket_send("interactive", payload)
            await fake.wait_ack(envelope)
            task = await sl.settled("k1")
            assert (task.state, task.via) == ("granted", "slack")
            status, _ = await fake.post_event(sl.events_url, payload, SIGNING_SECRET, form=True)
            assert status == 404  # no HTTP events in socket mode
        finally:
            await close_world(sl)


async def test_secrets_never_reach_the_log(
    sqlite_store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with slack_world(sqlite_store) as sl:
        await sl.park("k1")
        sl.fake.fail_next("chat.postMessage", status=500)
        await sl.flush()
        await sl.clock.advance(timedelta(seconds=30))
        await sl.flush()
        await sl.press(sl.message("make deploy k1"), "Approve")
        await sl.settled("k1")
    text = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert BOT_TOKEN not in text and SIGNING_SECRET not in text


async def test_a_burst_becomes_digest_pages_with_working_buttons(sqlite_store: SqlStore) -> None:
    digests = replace(FAST.digests, coalesce_after=2)
    async with slack_world(sqlite_store, tuning=replace(FAST, digests=digests)) as sl:
        for key in ("k1", "k2", "k3", "k4"):
            await sl.park(key)
        await sl.flush()
        [parent] = parents(sl)
        assert len(replies(sl, parent)) == 2  # the minute's share; the rest on a page

        def page() -> Any:
            return next((m for m in sl.fake.messages_in(CHANNEL) if "📥" in m.text), None)

        digest = await sl.fake.wait_for(page)
        assert digest.text.startswith("📥 2 decisions waiting") and not digest.thread_ts
        labels = [(e.get("text") or {}).get("text") for e in digest.elements]
        assert labels == ["Approve", "Deny", "Show"] * 2
        answer = await sl.press(digest, "Show")
        assert answer is not None and answer.text == "Posted below"
        shown = await sl.fake.wait_for(lambda: len(replies(sl, parent)) == 3)
        assert shown  # k3 in full, in the run's thread
        answer = await sl.press(digest, "Approve")
        assert answer is not None and answer.text == "✅ Approved"
        assert (await sl.settled("k3")).state == "granted"
        await sl.flush()
        await sl.fake.wait_for(lambda: "1 settled" in sl.fake.message(CHANNEL, digest.ts).text)


async def test_hostile_bodies_get_a_4xx_never_a_500(sqlite_store: SqlStore) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    bodies: list[tuple[str, dict[str, str] | None]] = [
        ("payload=notjson", form),
        ('payload={"type":"block_actions","actions":[{}],"user":"x"}', form),
        ('payload={"type":"view_submission","view":"x"}', form),
        ('{"type":"event_callback","event":"x"}', None),
        ("[]", None),
    ]
    async with slack_world(sqlite_store) as sl:
        for body, headers in bodies:
            status, _ = await sl.fake.post_event(
                sl.events_url, body, SIGNING_SECRET, headers=headers
            )
            assert 400 <= status < 500, (body, status)
            status, _ = await sl.fake.post_event(
                sl.events_url, body, SIGNING_SECRET, headers=headers, signature="v0=00"
            )
            assert status == 401, body
        status, _ = await sl.fake.post_event(sl.events_url, b"\xff\xfe", SIGNING_SECRET)
        assert status == 400
