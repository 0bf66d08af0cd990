"""Getting decisions to Telegram: nudges, webhook mode, size limits, secrets, faults, bursts."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp import web

from adapters.telegram import DigestTuning, Limits, mount
from bot.domain import OutboxItem
from bot.masking import utf16_len
from bot.service import CallSpec, RunSpec
from store.sql import SqlStore
from tests.conftest import drop_schema, make_store
from tests.fakes.telegram_api import FakeTelegram
from tests.telegram_harness import (
    ALICE,
    FAST,
    GROUP,
    WS,
    TgWorld,
    build_world,
    close_world,
    fake_telegram,
    settings_for,
    tg_world,
)

pytestmark = pytest.mark.usefixtures("ptb_timedelta")

APPROVAL_BUTTONS = [
    "✅ Approve", "❌ Deny", "📝 Deny with reason", "✏️ Edit & approve",
    "🔁 Approve & allow like this",
]  # fmt: skip


def mentions(text: str, key: str) -> bool:
    return re.search(rf"make deploy {key}\b", text) is not None


def nudges(fake: FakeTelegram) -> list[str]:
    return [m.text for m in fake.sent if m.text.startswith("⏰")]


async def test_nudges_reply_once_across_restarts(sqlite_store: SqlStore) -> None:
    async with fake_telegram() as fake:
        tg = await build_world(sqlite_store, fake)
        task = await tg.park("k1")
        await tg.flush()
        original = tg.message("make deploy k1")
        await tg.clock.advance(timedelta(hours=23))
        await tg.core.scheduler.run_once()
        await tg.flush()
        (nudge,) = [m for m in fake.sent if m.text.startswith("⏰")]
        assert nudge.text == "⏰ bash expires in 1 h — alice carol"
        assert nudge.reply_to_message_id == original.message_id
        mentioned = {e["user"]["id"] for e in nudge.entities if e["type"] == "text_mention"}
        assert mentioned == {ALICE, 1003}
        clock = tg.clock
        await close_world(tg)

        # a second life over the same store: nothing fires twice, a redelivery sends nothing
        tg = await build_world(sqlite_store, fake, clock=clock, create=False)
        await tg.core.scheduler.run_once()
        await tg.flush()
        item = OutboxItem(
            "out_again", "telegram", "nudge", task.id, task.run_id, WS,
            f"telegram:{task.id}:nudge:0", clock.now(), payload={"remaining": 3600, "seq": 0},
        )  # fmt: skip
        await tg.adapter.notifier.deliver(item, task, await tg.adapter.link.run(task.run_id))  # type: ignore[arg-type]
        assert len(nudges(fake)) == 1

        await clock.advance(timedelta(minutes=50))
        await tg.core.scheduler.run_once()
        await tg.flush()
        assert nudges(fake)[1:] == ["⏰ bash expires in 10 min — alice carol"]
        await tg.service.approve(tg.alice, WS, tg.run_id, "k1", via="api")
        await clock.advance(timedelta(minutes=5))
        await tg.core.scheduler.run_once()
        await tg.flush()
        assert len(nudges(fake)) == 2  # ended: no more nudges
        assert fake.messages[original.key].text.startswith("✅ Approved by alice")
        await close_world(tg)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_webhook_mode_checks_the_secret(sqlite_store: SqlStore) -> None:
    port = free_port()
    async with fake_telegram() as fake:
        settings = settings_for(
            fake, mode="webhook", webhook_secret="s3cr3t_-X", public_url=f"http://127.0.0.1:{port}"
        )
        app = web.Application()
        tg: TgWorld | None = None
        runner = web.AppRunner(app)
        try:
            tg = await build_world(sqlite_store, fake, settings=settings, create=True)
            mount(app, tg.adapter)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            assert fake.webhook_url == f"http://127.0.0.1:{port}/telegram/webhook"
            assert fake.webhook_secret == "s3cr3t_-X"
            await tg.park("k1")
            await tg.flush()
            msg = tg.message("make deploy k1")
            forged = {
                "callback_query": {
                    "id": "999",
                    "chat_instance": "1",
                    "from": {"id": ALICE, "is_bot": False, "first_name": "Alice"},
                    "data": msg.callback_data[0],
                    "message": {
                        "message_id": msg.message_id,
                        "date": 1,
                        "chat": {"id": GROUP, "type": "supergroup"},
                        "text": msg.text,
                    },
                }
            }
            assert await fake.post_to_webhook(forged, secret="wrong") == 403
            assert await fake.post_to_webhook(forged, secret=None) == 403
            assert (await tg.task("k1")).parked
            answer = await tg.press(msg, "Approve")  # Telegram delivers it with the secret
            assert answer.text == "✅ Approved"
            assert (await tg.task("k1")).resolved_by == "alice"
            # the delivery is recorded once the webhook's answer is back, after the press's
            await fake.wait_for(lambda: fake.webhook_deliveries)
            assert fake.webhook_deliveries[-1][1] == 200
        finally:
            if tg is not None:
                await close_world(tg)
            await runner.cleanup()


async def test_long_input_is_cut_head_and_tail_with_the_full_view_link(tg: TgWorld) -> None:
    command = "echo START && " + "x" * 30_000 + " && echo THE-END"
    await tg.park("k1", tool_input={"command": command})
    await tg.ask("q1", prompt="Q-BEGIN " + "why? " * 2000 + " Q-FINISH")
    await tg.park("k2", tool="deploy", tool_input={"items": [{"n": i} for i in range(3000)]})
    await tg.flush()
    assert tg.fake.rejected == []
    for needle in ("echo START", "Q-BEGIN", "deploy"):
        msg = tg.message(needle)
        assert utf16_len(msg.text) <= 4096
        assert "characters cut (see the full view)" in msg.text
        links = [e["url"] for e in msg.entities if e["type"] == "text_link"]
        assert links and links[0].startswith(f"https://approvals.example/decisions/{tg.run_id}/")
    assert "THE-END" in tg.message("echo START").text
    assert "Q-FINISH" in tg.message("Q-BEGIN").text


async def test_secrets_are_masked(tg: TgWorld) -> None:
    secrets = [
        "abcdefghijklmnop1234",
        "hunter2",
        "tok_9876543210",
        "sk-proj-ABCDEFGHIJKLMNOPQRST123456",
        "pa55w0rd!",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abcdefghij",
    ]
    command = (
        "curl -H 'Authorization: Bearer abcdefghijklmnop1234' "
        "'https://bob:hunter2@db.example/x?token=tok_9876543210' && "
        "OPENAI_API_KEY=sk-proj-ABCDEFGHIJKLMNOPQRST123456 ./run --key AKIAIOSFODNN7EXAMPLE"
    )
    await tg.park(
        "k1",
        tool_input={
            "command": command,
            "env": {"DB_PASSWORD": "pa55w0rd!", "GH": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
        },
        effect_profile={"summary": "post to xoxb-1234567890-abcdefghij", "effects": ["network"]},
    )
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    await tg.park("k2", tool="Write", tool_input={"file_path": "/etc/key.pem", "content": pem})
    await tg.flush()
    texts = [m.raw_text for m in tg.fake.sent]
    assert len(texts) == 2
    for secret in secrets:
        assert not any(secret in text for text in texts), secret
    assert "Bearer ****" in texts[0] and "bob:****@" in texts[0]
    assert "/etc/key.pem" in texts[1] and "+-----BEGIN PRIVATE KEY-----\n+****\n" in texts[1]


async def test_faults_every_decision_once_every_ending_shown(sqlite_store: SqlStore) -> None:
    fake_kwargs = {"fault_rate": 0.2, "timeout_delay": 0.6, "fault_seed": 7}
    # One message per decision here (digests under faults: the burst test); pacing relaxed
    # since this fake does not enforce limits.
    relaxed = replace(FAST.digests, max_post_wait=1000.0, coalesce_after=1000)
    tuning = replace(FAST, request_timeout=0.3, digests=relaxed)
    limits = Limits(per_interval=0.01, per_burst=100, window_count=10_000)
    async with tg_world(sqlite_store, fake=fake_kwargs, tuning=tuning, limits=limits) as tg:
        keys = [f"k{i}" for i in range(12)]
        for key in keys:
            await tg.park(key)
        await tg.ask("q1", prompt="Proceed?", options=["yes", "no"])

        async def drive(done: object) -> None:
            for _ in range(60):
                await tg.core.relay.run_once()
                if done():  # type: ignore[operator]
                    return
                await tg.clock.advance(timedelta(seconds=400))  # past any backoff
            raise AssertionError("the relay did not get everything through")

        def posted() -> bool:
            return all(any(mentions(m.text, k) for m in tg.fake.sent) for k in keys)

        await drive(posted)
        for key in keys[:4]:
            await tg.service.approve(tg.alice, WS, tg.run_id, key, via="api")
        for key in keys[4:8]:
            await tg.service.deny(tg.carol, WS, tg.run_id, key, reason="no", via="web")
        await tg.service.stop(tg.agent, WS, tg.run_id)  # cancels the rest and the question

        def shown() -> bool:
            final = tg.fake.messages_in(GROUP)
            return len(final) == 13 and all(m.reply_markup is None for m in final)

        await drive(shown)
        assert tg.fake.faults_injected, "the fake injected no fault"
        for key in keys:
            assert len([m for m in tg.fake.sent if mentions(m.text, key)]) == 1, key
        final = {m.text.split("\n")[0].split(" by ")[0] for m in tg.fake.messages_in(GROUP)}
        assert final == {"✅ Approved", "❌ Denied", "⏹ Cancelled"}
        assert await tg.store.outbox_backlog() == 0


async def test_burst_is_coalesced_under_the_limits(sqlite_store: SqlStore) -> None:
    # Telegram's group limit (20/min) for real; the per-chat rate (1/s) five times faster on
    # both sides and the post wait shortened alike, so the test takes seconds, not a minute.
    limits = Limits(per_interval=0.25)  # a margin over the fake's 0.2 s for a loaded CI
    digests = DigestTuning(coalesce_after=5, max_post_wait=0.5, quiet=0.3, max_delay=1.0, hold=2.0)
    tuning = replace(FAST, digests=replace(digests, edit_interval=0.2))
    async with tg_world(
        sqlite_store, fake={"enforce_rate_limits": True}, limits=limits, tuning=tuning
    ) as tg:
        tg.fake.per_chat_per_second = 5.0
        keys = [f"k{i}" for i in range(200)]
        for key in keys:  # the agent's burst; then the relay wakes up to 200 notifications
            await tg.park(key)
        tg.core.start()

        def listed() -> set[str]:
            return {
                line.split(": make deploy ")[-1].split(" ")[0]
                for m in tg.fake.messages_in(GROUP)
                for line in m.text.splitlines()
            }

        await tg.fake.wait_for(lambda: set(keys) <= listed(), timeout=20)
        # about 5 on their own, then pages of up to 50 (a page also leaves when the burst
        # pauses, so a slow machine may cut one short)
        assert len(tg.fake.sent) <= 12, [m.text.split("\n")[0] for m in tg.fake.sent]
        digests = [m for m in tg.fake.messages_in(GROUP) if m.text.startswith("📥")]
        assert 4 <= len(digests) <= 7 and all(len(m.buttons) <= 24 for m in digests)
        waiting = int(digests[0].text.split()[1])

        # the digest's buttons decide too, and the page catches up
        answer = await tg.press(digests[0], digests[0].buttons[0]["text"])
        assert answer.text == "✅ Approved"
        decided = [k for k in keys if not (await tg.task(k)).parked]
        assert len(decided) == 1
        await tg.fake.wait_for(
            lambda: tg.fake.messages[digests[0].key].text.startswith(
                f"📥 {waiting - 1} decisions waiting · 1 settled"
            ),
            timeout=10,
        )
        assert tg.fake.rejections(429) == [] and tg.adapter.retry_afters == 0


async def test_serve_starts_the_adapter_and_readyz_reports_it(tmp_path: Path) -> None:
    from aiohttp import ClientSession

    from bot.cli.serve import serve_forever
    from bot.config import Settings

    port = free_port()
    async with fake_telegram() as fake:
        settings = Settings(
            store={"url": f"sqlite+aiosqlite:///{tmp_path}/serve.db"},  # type: ignore[arg-type]
            server={"port": port},  # type: ignore[arg-type]
            telegram={  # type: ignore[arg-type]
                "enabled": True,
                "token": "123456:TEST-token_abc",
                "api_base_url": fake.base_url,
                "chat_id": GROUP,
            },
        )
        ready = asyncio.Event()
        serving = asyncio.create_task(serve_forever(settings, ready))
        try:
            await asyncio.wait_for(ready.wait(), 20)
            async with (
                ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/readyz") as response,
            ):
                body = await response.json()
            assert body["checks"]["telegram"] is True, body
            await fake.wait_for(lambda: fake.calls_to("getUpdates"))
            async with (
                ClientSession() as http,
                http.post(f"http://127.0.0.1:{port}/telegram/webhook", json={}) as response,
            ):
                assert response.status == 403  # polling mode: the webhook route refuses all
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving


async def test_one_poller_among_instances_on_postgres(tmp_path: Path) -> None:
    store, schema = await make_store("postgres", tmp_path)  # skips without PostgreSQL
    tuning = replace(FAST, election_interval=0.1)
    try:
        async with fake_telegram() as fake:
            first = await build_world(store, fake, tuning=tuning)
            second = await build_world(store, fake, tuning=tuning, clock=first.clock, create=False)
            instances = [first, second]

            def pollers() -> list[TgWorld]:
                return [w for w in instances if w.adapter.application.updater.running]  # type: ignore[union-attr]

            await fake.wait_for(lambda: len(pollers()) == 1)
            await asyncio.sleep(0.3)  # a few more election rounds: still one
            assert len(pollers()) == 1 and all(w.adapter.running for w in instances)
            await first.park("k1")
            await first.flush()
            answer = await first.press(first.message("make deploy k1"), "Approve")
            assert answer.text == "✅ Approved"

            assert not [r for r in fake.rejected if r.method == "getUpdates"]  # no 409 fights

            poller = pollers()[0]
            await close_world(poller)  # the poller goes away: the other takes over
            instances.remove(poller)
            survivor = instances[0]
            await fake.wait_for(lambda: pollers() == [survivor], timeout=20)
            await survivor.park("k2")
            await survivor.flush()
            answer = await survivor.press(survivor.message("make deploy k2"), "Deny")
            assert answer.text == "❌ Denied"
            await close_world(survivor)
    finally:
        await store.close()
        await drop_schema(schema)


async def test_digest_expand_and_endings(sqlite_store: SqlStore) -> None:
    tuning = replace(FAST, digests=replace(FAST.digests, coalesce_after=2))
    limits = Limits(per_interval=0.05, per_burst=10)
    async with tg_world(sqlite_store, tuning=tuning, limits=limits) as tg:
        for key in ("k1", "k2", "k3", "k4"):
            await tg.park(key)
        await tg.flush()
        assert len(tg.fake.sent) == 2  # the chat is busy: the rest wait for a digest
        page = await tg.fake.wait_for(
            lambda: next((m for m in tg.fake.sent if m.text.startswith("📥")), None)
        )
        assert page.text.startswith("📥 2 decisions waiting")
        assert (
            "1. ⏳ bash: make deploy k3" in page.text and "2. ⏳ bash: make deploy k4" in page.text
        )
        assert [b["text"] for b in page.buttons] == ["✅ 1", "❌ 1", "🔎 1", "✅ 2", "❌ 2", "🔎 2"]

        assert (await tg.press(page, "🔎 1")).text == "Posted below"
        (expanded,) = [
            m for m in tg.fake.messages_in(GROUP) if m.text.startswith("🛂") and "k3" in m.text
        ]
        assert expanded.reply_to_message_id == page.message_id
        assert (await tg.press(page, "🔎 1")).text == "It has a message of its own already"
        assert (await tg.press(expanded, "Approve")).text == "✅ Approved"
        await tg.flush()
        assert tg.fake.messages[expanded.key].reply_markup is None
        await tg.fake.wait_for(lambda: "1. ✅" in tg.fake.messages[page.key].text)
        assert [b["text"] for b in tg.fake.messages[page.key].buttons] == ["✅ 2", "❌ 2", "🔎 2"]

        await tg.service.deny(tg.carol, WS, tg.run_id, "k4", via="api")
        await tg.flush()
        await tg.fake.wait_for(
            lambda: tg.fake.messages[page.key].text.startswith("📥 All 2 decisions settled")
        )
        final = tg.fake.messages[page.key]
        assert (
            final.reply_markup is None
            and "2. ❌ bash: make deploy k4 — denied by carol" in final.text
        )

        async def done() -> bool:  # the page is finished in the store too
            return not await tg.adapter.chats.digest_pages("telegram")

        await tg.fake.wait_for(done)


async def test_per_workspace_chats(sqlite_store: SqlStore) -> None:
    other = -100999
    async with fake_telegram() as fake:
        fake.add_chat(other, "group", "Acme approvers")
        settings = settings_for(fake, chat_id=None, workspace_chats={WS: other})
        tg = await build_world(sqlite_store, fake, settings=settings)
        try:
            await tg.park("k1")
            await tg.core.admin.create_workspace("beta")
            beta = (await tg.core.admin.add_application("beta", "agent")).principal
            run = await tg.service.declare_run(beta, "beta", RunSpec(approval_mode="ask"))
            await tg.service.append(beta, "beta", run.id, CallSpec("bash", {"command": "b1"}))
            await tg.flush()
            assert [m.chat_id for m in fake.sent] == [other]  # beta has no chat: not shown
            await tg.service.stop(beta, "beta", run.id)
            await tg.service.approve(tg.alice, WS, tg.run_id, "k1", via="api")
            await tg.flush()
            assert fake.messages[(other, 1)].text.startswith("✅ Approved by alice")
            assert await tg.store.outbox_backlog() == 0
        finally:
            await close_world(tg)


async def test_low_load_decisions_are_whole_messages(sqlite_store: SqlStore) -> None:
    """A few decisions within seconds each get their own full message with every button (real
    pacing: the fourth waits for its slot rather than joining a digest)."""
    async with tg_world(sqlite_store, fake={"enforce_rate_limits": True}) as tg:
        for key in ("k1", "k2", "k3"):
            await tg.park(key)
        await tg.ask("q1", prompt="Which branch?", options=["main", "release"])
        await tg.flush()
        assert not [m for m in tg.fake.sent if m.text.startswith("📥")]
        for key in ("k1", "k2", "k3"):
            labels = [b["text"] for b in tg.message(f"make deploy {key}").buttons]
            assert labels == APPROVAL_BUTTONS, key
        labels = [b["text"] for b in tg.message("Which branch?").buttons]
        assert labels[:2] == ["main", "release"] and "🚫 Decline" in labels
        assert tg.fake.rejections(429) == []


async def test_a_digest_page_with_one_decision_posts_it_whole(sqlite_store: SqlStore) -> None:
    tuning = replace(FAST, digests=replace(FAST.digests, coalesce_after=1))
    async with tg_world(sqlite_store, tuning=tuning) as tg:
        await tg.park("k1")
        await tg.park("k2")
        await tg.flush()  # k1 takes the minute's share; k2 joins a page, alone on it
        second = await tg.fake.wait_for(
            lambda: next((m for m in tg.fake.sent if "make deploy k2" in m.text), None)
        )
        assert second.text.startswith("🛂") and len(second.buttons) == 5
        assert not [m for m in tg.fake.sent if m.text.startswith("📥")]

        async def pages_done() -> bool:
            return not await tg.adapter.chats.digest_pages("telegram")

        await tg.fake.wait_for(pages_done)
        answer = await tg.press(second, "Approve")
        assert answer.text == "✅ Approved"
        await tg.flush()
        assert tg.fake.messages[second.key].reply_markup is None  # its ending edits it
