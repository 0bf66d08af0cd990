"""Both chats at once (issue 21, item 2): every button works on the platform and in the place
that show it.

A button carries only an opaque id, derived from the service's secret and looked up in the
store (adapters/chat/buttons.py). The id used to name the task, the action and the option
only, and the store kept one row per id: with Telegram and Slack both on, whichever platform
saved it first owned it and the other platform's presses were "no longer valid". Ids now name
the platform and the place too (a routed copy's buttons are its own), the store keys them by
platform and id, and migration 0011 keeps the ids of messages posted before it working on
both platforms.

Every test here runs one core with both adapters (the real libraries against the strict fakes
of tests/fakes/), and presses on both platforms.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from aiohttp import web

from adapters.chat.digests import DigestTuning
from adapters.chat.offers import EDIT_GLOB
from adapters.chat.presses import EXPIRED_BUTTON
from adapters.http.app import build_app
from adapters.slack import SlackAdapter, mount
from adapters.telegram import TelegramAdapter
from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from bot.domain import Principal
from bot.ports import ChatCallback
from bot.service import CallSpec, RunSpec
from store.chat import ChatStore
from store.migrate import downgrade, upgrade
from store.sql import SqlStore
from tests import slack_harness as sh
from tests import telegram_harness as th
from tests.chat_drivers import (
    PLATFORMS,
    RELAXED,
    WS,
    ChatDriver,
    Handle,
    Shown,
    SlackDriver,
    TelegramDriver,
)
from tests.conftest import make_world
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.usefixtures("ptb_timedelta")

AT = datetime(2026, 11, 30, tzinfo=UTC)
HIGH = {"summary": "deploy to production", "risk": "high"}
# High-risk calls go to a second group/channel on each platform and to alice's direct messages.
ROUTES: list[dict[str, Any]] = [
    {"when": {"risk": "high"}, "to": [f"telegram:{th.ONCALL}", f"slack:{sh.ONCALL}",
                                      "member:alice"]},
]  # fmt: skip
SHELL = [{"tool": "bash", "path": "command"}]  # `git push origin main` proposes `git push *`


# both adapters on one core -------------------------------------------------------------------
@dataclass
class Both:
    telegram: TelegramDriver
    slack: SlackDriver
    runner: web.AppRunner

    def on(self, platform: str) -> ChatDriver:
        return self.telegram if platform == "telegram" else self.slack

    @property
    def core(self) -> Core:
        return self.telegram.core

    @property
    def store(self) -> SqlStore:
        return self.telegram.store

    @property
    def agent(self) -> Principal:
        return self.telegram.agent

    async def flush(self) -> None:
        await self.telegram.flush()  # one relay: it delivers to both platforms


def _settings(tg_fake: FakeTelegram, sl_fake: FakeSlack, routes: list[Any] | None) -> Settings:
    return Settings(
        telegram={
            "enabled": True, "token": th.TOKEN, "api_base_url": tg_fake.base_url,
            "chat_id": th.GROUP, "mode": "polling",
        },
        slack={
            "enabled": True, "bot_token": sh.BOT_TOKEN, "signing_secret": sh.SIGNING_SECRET,
            "api_base_url": sl_fake.base_url, "channel": sh.CHANNEL,
        },
        server={"public_url": th.PUBLIC_URL},
        routes=routes or [],
    )  # fmt: skip


async def _build(
    store: SqlStore, tg_fake: FakeTelegram, sl_fake: FakeSlack, *, clock: FakeClock | None = None,
    create: bool = True, routes: list[Any] | None = None, coalesce_after: int | None = None,
) -> Both:  # fmt: skip
    clock = clock or FakeClock()
    settings = _settings(tg_fake, sl_fake, routes)
    tg_tuning, sl_tuning = th.FAST, sh.FAST
    if coalesce_after is not None:
        # A page waits for a second without a new decision: however slowly the relay hands
        # them over, the burst lands on one page (a page of one is posted in full instead).
        digests = DigestTuning(coalesce_after=coalesce_after, quiet=1.0, max_delay=3.0,
                               hold=3.0, edit_interval=0.2)  # fmt: skip
        tg_tuning = replace(tg_tuning, digests=digests)
        sl_tuning = replace(sl_tuning, digests=digests)
    tg = TelegramAdapter(settings, ChatStore(store), tuning=tg_tuning, limits=RELAXED)
    sl = SlackAdapter(settings, ChatStore(store), tuning=sl_tuning, limits=RELAXED)
    notifiers = {"telegram": tg.notifier, "slack": sl.notifier}
    core = await Core.build(store, settings, clock=clock, notifiers=notifiers)
    tg.bind(core)
    sl.bind(core)
    admin = core.admin
    if create:
        await admin.create_workspace(WS)
        alice = await admin.add_member(
            WS, "alice", telegram_user_id=th.ALICE, slack_user_id=sh.ALICE
        )
        carol = await admin.add_member(
            WS, "carol", telegram_user_id=th.CAROL, slack_user_id=sh.CAROL
        )
        agent = (await admin.add_application(WS, "agent")).principal
        spec = RunSpec(approval_mode="ask", title="nightly")
        run_id = (await core.service.declare_run(agent, WS, spec)).id
        members = alice.principal, carol.principal
    else:
        found = [
            await admin.member_by_chat(telegram_user_id=user, workspace_id=WS)
            for user in (th.ALICE, th.CAROL)
        ]
        assert found[0] is not None and found[1] is not None
        members = found[0], found[1]
        agent = await admin.principal(WS, "application", "agent")
        run_id = (await store.runs(WS))[0].id
    app = build_app(core, settings)
    mount(app, sl)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    await tg.start()
    await sl.start()
    tg_world = th.TgWorld(tg_fake, store, core, clock, tg, *members, agent, run_id)
    sl_world = sh.SlackWorld(
        sl_fake, store, core, clock, sl, runner, f"http://127.0.0.1:{port}", *members, agent,
        run_id,
    )  # fmt: skip
    return Both(TelegramDriver(store, tg_fake, tg_world), SlackDriver(store, sl_fake, sl_world),
                runner)  # fmt: skip


async def _close(both: Both) -> None:
    await both.core.stop()
    await both.telegram.world.adapter.stop()
    await both.slack.world.adapter.stop()
    await both.runner.cleanup()


@contextlib.asynccontextmanager
async def _fakes() -> AsyncIterator[tuple[FakeTelegram, FakeSlack]]:
    async with th.fake_telegram() as tg_fake, sh.fake_slack() as sl_fake:
        yield tg_fake, sl_fake


@contextlib.asynccontextmanager
async def both_chats(store: SqlStore, **kw: Any) -> AsyncIterator[Both]:
    async with _fakes() as (tg_fake, sl_fake):
        both = await _build(store, tg_fake, sl_fake, **kw)
        try:
            yield both
        finally:
            await _close(both)


@pytest.fixture
async def both(store: SqlStore) -> AsyncIterator[Both]:
    async with both_chats(store) as chats:
        yield chats


async def _ended(chat: ChatDriver, message: Handle) -> Shown:
    def done() -> Shown | None:
        shown = chat.shown(message)
        return None if shown.has_buttons else shown

    shown: Shown = await chat.eventually(done)
    return shown


async def _ended_everywhere(both: Both, needle: str, headline: str) -> None:
    """The decision's message on each platform shows its ending."""
    await both.flush()
    for platform in PLATFORMS:
        chat = both.on(platform)
        shown = await _ended(chat, chat.decision(needle))
        assert headline in shown.text, (platform, shown.text)


# every decision kind, pressed on each platform -----------------------------------------------
async def test_approve_and_deny_from_either_chat(both: Both) -> None:
    keys = {"telegram": ("k1", "k2"), "slack": ("k3", "k4")}
    for pair in keys.values():
        for key in pair:
            await both.telegram.park(key)
    await both.flush()
    for platform, (approved, denied) in keys.items():
        chat = both.on(platform)
        assert chat.shown(chat.decision(f"make deploy {approved}")).has_buttons
        notice = await chat.press(chat.decision(f"make deploy {approved}"), "approve")
        assert notice == "✅ Approved", (platform, notice)
        notice = await chat.press(chat.decision(f"make deploy {denied}"), "deny", user="carol")
        assert notice == "❌ Denied", (platform, notice)
        task = await chat.settled(approved)
        assert (task.state, task.resolved_by, task.via) == ("granted", "alice", platform)
        task = await chat.settled(denied)
        assert (task.state, task.resolved_by, task.via) == ("failed", "carol", platform)
    for approved, denied in keys.values():
        await _ended_everywhere(both, f"make deploy {approved}", "Approved by alice")
        await _ended_everywhere(both, f"make deploy {denied}", "Denied by carol")


async def test_deny_with_reason_and_edit_and_approve_from_either_chat(both: Both) -> None:
    for key in ("k1", "k2", "k3", "k4"):
        await both.telegram.park(key)
    await both.flush()
    for platform, (denied, edited) in {"telegram": ("k1", "k2"), "slack": ("k3", "k4")}.items():
        chat = both.on(platform)
        await chat.give_text(chat.decision(f"make deploy {denied}"), "deny_reason", "not today")
        task = await chat.settled(denied)
        assert task.error == {"code": "approval_denied", "detail": "not today"}
        assert (task.resolved_by, task.via) == ("alice", platform)
        refused = await chat.edit(chat.decision(f"make deploy {edited}"), edited, "make test")
        assert refused is None, (platform, refused)
        task = await chat.settled(edited)
        assert (task.state, task.resolved_by, task.via) == ("granted", "alice", platform)
        assert task.approved_input == {"command": "make test"}
    await _ended_everywhere(both, "make deploy k1", "Denied by alice")
    await _ended_everywhere(both, "make deploy k3", "Denied by alice")


async def test_questions_from_either_chat(both: Both) -> None:
    for platform in PLATFORMS:
        await both.telegram.ask(f"one-{platform}", prompt=f"Where to, {platform}?",
                                options=["staging", "production"])  # fmt: skip
        await both.telegram.ask(f"many-{platform}", prompt=f"Which checks, {platform}?",
                                options=["lint", "types", "tests"], multi=True)  # fmt: skip
        await both.telegram.ask(f"free-{platform}", prompt=f"Which branch, {platform}?")
        await both.telegram.ask(f"no-{platform}", prompt=f"Anything to add, {platform}?")
    await both.flush()
    for platform in PLATFORMS:
        chat = both.on(platform)
        one = chat.decision(f"Where to, {platform}?")
        assert await chat.press(one, "option:production") == "💬 Answered: production"
        task = await chat.settled(f"one-{platform}")
        assert (task.resolution, task.via) == ({"content": "production"}, platform)

        many = chat.decision(f"Which checks, {platform}?")
        await chat.tick(many, ["lint", "tests"], user="carol")
        assert await chat.press(many, "submit", user="carol") == "💬 Answered: lint, tests"
        task = await chat.settled(f"many-{platform}")
        assert (task.resolution, task.resolved_by) == ({"content": ["lint", "tests"]}, "carol")

        await chat.give_text(chat.decision(f"Which branch, {platform}?"), "answer_text", "main")
        task = await chat.settled(f"free-{platform}")
        assert (task.resolution, task.via) == ({"content": "main"}, platform)

        assert await chat.press(chat.decision(f"Anything to add, {platform}?"), "decline") == (
            "🚫 Declined"
        )
        task = await chat.settled(f"no-{platform}")
        assert task.error is not None and task.error["code"] == "declined"
    await _ended_everywhere(both, "Where to, slack?", "Answered by alice")
    await _ended_everywhere(both, "Which checks, telegram?", "Answered by carol")


async def test_approve_and_allow_like_this_from_either_chat(both: Both) -> None:
    service = both.core.service
    shell = (await service.declare_run(both.agent, WS, RunSpec(shell_commands=SHELL))).id
    profiled = (await service.declare_run(both.agent, WS, RunSpec(profile="mcp"))).id
    for platform in PLATFORMS:
        command = {"command": f"git push origin {platform}-1"}
        await both.telegram.park(f"run-{platform}", run_id=shell, tool_input=command)
        command = {"command": f"git push origin {platform}-2"}
        await both.telegram.park(f"profile-{platform}", run_id=profiled, tool_input=command)
    await both.flush()
    for platform in PLATFORMS:
        chat = both.on(platform)
        offered = await chat.offer(chat.decision(f"git push origin {platform}-1"))
        assert "bash · command matches git push *" in offered.text
        assert [s.removeprefix("✅ ") for s in offered.scopes] == ["This run"]
        # the glob changed first (Telegram: "✏️ Edit glob" and a reply; Slack: in the modal)
        notice = await chat.choose(offered, "run", match=f"git push origin {platform}-*")
        assert notice == "✅ Approved · calls like it are allowed from now on (this run)"
        offered = await chat.offer(chat.decision(f"git push origin {platform}-2"))
        assert [s.removeprefix("✅ ") for s in offered.scopes] == ["This run", "Profile mcp"]
        notice = await chat.choose(offered, "profile")
        assert notice == "✅ Approved · calls like it are allowed from now on (its profile)"
        for run_id, key in ((shell, f"run-{platform}"), (profiled, f"profile-{platform}")):
            task = await service.get_task(both.agent, WS, run_id, key)
            assert (task.state, task.resolved_by, task.via) == ("granted", "alice", platform)
    async with both.store.read() as tx:
        learned = sorted((r.scope, r.rule["match"]) for r in await tx.learned_rules(WS))
    assert learned == [
        ("profile", "git push origin slack-2"), ("profile", "git push origin telegram-2"),
        ("run", "git push origin slack-*"), ("run", "git push origin telegram-*"),
    ]  # fmt: skip


async def test_an_edit_glob_button_is_telegrams_own(both: Both) -> None:
    """Telegram's "✏️ Edit glob" (Slack changes the glob in its modal): the offer's buttons,
    and those of the offer shown again with the glob, are Telegram's."""
    spec = RunSpec(title="pushes", shell_commands=SHELL)
    run_id = (await both.core.service.declare_run(both.agent, WS, spec)).id
    await both.telegram.park("k1", run_id=run_id, tool_input={"command": "git push origin x"})
    await both.flush()
    chat = both.telegram
    offered = await chat.offer(chat.decision("git push origin x"))
    assert EDIT_GLOB in [b["text"] for b in offered.handle.buttons]
    refused, _ = await chat.edit_glob(offered, "git push origin *")
    assert refused is None
    chats = chat.world.adapter.chats
    for data in chat.fake.messages[offered.handle.key].callback_data:  # the offer, edited
        found = await chats.callback_task("telegram", data)
        assert found is not None and found[0].chat == str(th.GROUP)
        assert await chats.callback_task("slack", data) is None
    notice = await chat.choose(offered, "run")
    assert notice == "✅ Approved · calls like it are allowed from now on (this run)"
    async with both.store.read() as tx:
        [rule] = await tx.learned_rules(WS)
    assert rule.rule["match"] == "git push origin *"


def _tg_rows(text: str) -> list[tuple[str, str]]:
    """A Telegram digest page's waiting lines: (number, task key)."""
    return re.findall(r"^(\d+)\. ⏳ bash: make deploy (k\d+)$", text, re.MULTILINE)


def _sl_rows(blocks: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """A Slack digest page's lines with buttons: task key -> {label: action id}."""
    rows: dict[str, dict[str, str]] = {}
    for block, actions in itertools.pairwise(blocks):
        found = re.search(r"make deploy (k\d+)", json.dumps(block))
        if str(block.get("block_id", "")).startswith("item-") and found:
            rows[found[1]] = {e["text"]["text"]: e["action_id"] for e in actions["elements"]}
    return rows


async def test_digest_buttons_from_either_chat(store: SqlStore) -> None:
    """Approve, Deny and Show (🔎) on a digest page, on each platform (each platform makes its
    own pages: which decisions they list depends on when each one was posted)."""
    async with both_chats(store, coalesce_after=2) as both:
        for key in ("k1", "k2", "k3", "k4", "k5", "k6"):
            await both.telegram.park(key)
        await both.flush()
        tg, sl = both.telegram, both.slack
        tg_page = await tg.fake.wait_for(
            lambda: next((m for m in tg.fake.sent if m.text.startswith("📥")), None)
        )
        sl_page = await sl.fake.wait_for(
            lambda: next((m for m in sl.fake.messages_in(sh.CHANNEL) if "📥" in m.text), None)
        )
        tg_rows, sl_rows = _tg_rows(tg_page.text), _sl_rows(sl_page.blocks or [])
        assert len(tg_rows) >= 2 and len(sl_rows) >= 2, (tg_page.text, sl_rows)
        (tg_number, tg_key), (sl_key, sl_ids) = tg_rows[0], next(iter(sl_rows.items()))

        async def slack_press(action_id: str, user: str) -> str | None:
            payload = sl.fake.block_actions_payload(user, sl_page.channel, sl_page.ts, action_id)
            before = len(sl.fake.ephemeral_messages)
            assert (await sl.world.post(payload))[0] == 200
            told = await sl.world.next_ephemeral(before, user)
            return None if told is None else told.text

        # 🔎 / Show: the decision posted in full
        assert (await tg.world.press(tg_page, f"🔎 {tg_number}")).text == "Posted below"
        assert await slack_press(sl_ids["Show"], sh.ALICE) == "Posted below"
        assert [m for m in tg.fake.messages_in(th.GROUP)
                if m.reply_to_message_id == tg_page.message_id and tg_key in m.text]  # fmt: skip
        in_full = [
            m
            for m in sl.fake.messages_in(sh.CHANNEL)
            if m.metadata is not None and f"make deploy {sl_key}" in json.dumps(m.blocks)
        ]
        assert len(in_full) == 1  # fmt: skip
        # approve on Telegram's page, deny another one on Slack's
        assert (await tg.world.press(tg_page, f"✅ {tg_number}")).text == "✅ Approved"
        denied = next(key for key in sl_rows if key != tg_key)
        assert await slack_press(sl_rows[denied]["Deny"], sh.CAROL) == "❌ Denied"
        approved, refused = await tg.task(tg_key), await tg.task(denied)
        assert (approved.state, approved.resolved_by, approved.via) == (
            "granted", "alice", "telegram"
        )  # fmt: skip
        assert (refused.state, refused.resolved_by, refused.via) == ("failed", "carol", "slack")


# per place: a routed copy's buttons are its own ----------------------------------------------
async def test_routed_copies_decide_in_every_place_on_both_platforms(store: SqlStore) -> None:
    async with both_chats(store, routes=ROUTES) as both:
        places = [(p, w) for p in PLATFORMS for w in ("oncall", "dm:alice")]
        keys = [f"k{i}" for i in range(len(places))]
        for key in keys:
            await both.telegram.park(key, effect_profile=HIGH)
        await both.flush()
        for key, (platform, where) in zip(keys, places, strict=True):
            chat = both.on(platform)
            notice = await chat.press(chat.decision_in(where, f"make deploy {key}"), "approve")
            assert notice == "✅ Approved", (platform, where, notice)
            task = await chat.settled(key)
            assert (task.state, task.via) == ("granted", platform)
        await both.flush()
        for key in keys:
            for platform in PLATFORMS:
                chat = both.on(platform)
                for where in ("oncall", "dm:alice"):
                    shown = await _ended(chat, chat.decision_in(where, f"make deploy {key}"))
                    assert "Approved by alice" in shown.text


def _tg_ids(both: Both, handle: Handle) -> list[str]:
    return list(both.telegram.fake.messages[handle.key].callback_data)


def _sl_ids(both: Both, handle: Handle) -> list[str]:
    message = both.slack.fake.message(*handle.key)
    return [str(e["action_id"]) for e in message.elements if e.get("type") == "button"]


async def test_a_button_is_valid_only_on_its_platform_and_in_its_place(store: SqlStore) -> None:
    async with both_chats(store, routes=ROUTES) as both:
        await both.telegram.park("k1", effect_profile=HIGH)
        await both.flush()
        tg, sl = both.telegram, both.slack
        tg_oncall, tg_direct = tg.decision_in("oncall", "k1"), tg.decision_in("dm:alice", "k1")
        sl_oncall, sl_direct = sl.decision_in("oncall", "k1"), sl.decision_in("dm:alice", "k1")
        ids = [_tg_ids(both, tg_oncall), _tg_ids(both, tg_direct), _sl_ids(both, sl_oncall),
               _sl_ids(both, sl_direct)]  # fmt: skip
        every = [i for each in ids for i in each]
        assert len(set(every)) == len(every)  # no two places, no two platforms share an id

        # Pressed where it is not shown (a forged or copied id), a button is unknown there.
        approve_oncall = tg.fake.messages[tg_oncall.key].button("Approve")["callback_data"]
        direct = tg.fake.messages[tg_direct.key]
        answer = await tg.world.press(direct, data=approve_oncall, force=True)
        assert answer.text == EXPIRED_BUTTON
        message = sl.fake.message(*sl_direct.key)
        [sl_approve] = [e for e in sl.fake.message(*sl_oncall.key).elements
                        if (e.get("text") or {}).get("text") == "Approve"]  # fmt: skip
        for where, action_id in (
            (message, sl_approve["action_id"]),  # Slack's, from another place
            (message, approve_oncall),  # Telegram's, on Slack
        ):
            payload = sl.fake.block_actions_payload(
                sh.ALICE, where.channel, where.ts, action_id, force=True
            )
            before = len(sl.fake.ephemeral_messages)
            status, _ = await sl.world.post(payload)
            assert status == 200
            told = await sl.world.next_ephemeral(before, sh.ALICE)
            assert told is not None and told.text == EXPIRED_BUTTON
        sl_ids = _sl_ids(both, sl_direct)
        answer = await tg.world.press(direct, data=sl_ids[0], force=True)  # Slack's, on Telegram
        assert answer.text == EXPIRED_BUTTON
        assert (await tg.task("k1")).parked  # nothing was decided
        assert await tg.press(tg_direct, "approve") == "✅ Approved"  # its own buttons work


# buttons posted before the upgrade -------------------------------------------------------------
def _old_id(secret: str, task_id: str, action: str, option: int | None) -> str:
    """A button's id as the code before 0011 derived it (task, action and option only)."""
    digest = hmac.new(secret.encode(), f"{task_id}|{action}|{option}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).decode()[:16]


async def test_ids_saved_before_0011_still_work_on_both_platforms(store: SqlStore) -> None:
    """A database at 0010 holding the buttons as the old code saved them: one row per id, its
    platform whichever saved it first. After the upgrade the messages posted then (which carry
    those ids on both platforms) still decide, pressed on either platform."""
    async with _fakes() as (tg_fake, sl_fake):
        both = await _build(store, tg_fake, sl_fake)
        clock = both.core.clock
        secret = both.core.service.secret
        await both.telegram.park("k1")
        await both.telegram.park("k2")
        await both.telegram.ask("q1", prompt="Where to?", options=["staging", "production"])
        await both.flush()
        tasks = {k: await both.telegram.task(k) for k in ("k1", "k2", "q1")}
        handles = {
            (p, k): both.on(p).decision(n)
            for p in PLATFORMS
            for k, n in (("k1", "make deploy k1"), ("k2", "make deploy k2"), ("q1", "Where to?"))
        }
        await _close(both)

        await downgrade(store.engine, "0010")
        buttons = [("k1", "approve", None), ("k2", "deny", None), ("q1", "option", 1)]
        owners = {"k1": "slack", "k2": "telegram", "q1": "slack"}  # who saved it first
        async with store.engine.begin() as conn:
            await conn.execute(sa.text("DELETE FROM chat_callback"))
            for key, action, option in buttons:
                await conn.execute(
                    sa.text(
                        "INSERT INTO chat_callback (id, channel, task_id, action, option,"
                        " created_at) VALUES (:id, :channel, :task, :action, :option, 0)"
                    ),
                    {"id": _old_id(secret, tasks[key].id, action, option),
                     "channel": owners[key], "task": tasks[key].id, "action": action,
                     "option": option},
                )  # fmt: skip
        await upgrade(store.engine)

        both = await _build(store, tg_fake, sl_fake, clock=clock, create=False)
        try:
            tg, sl = both.telegram, both.slack
            # Pressed on the platform that did not own the row (the old code's dead buttons):
            old = {key: _old_id(secret, tasks[key].id, a, o) for key, a, o in buttons}
            answer = await tg.world.press(
                tg_fake.messages[handles["telegram", "k1"].key], data=old["k1"], force=True
            )
            assert answer.text == "✅ Approved"
            message = sl_fake.message(*handles["slack", "k2"].key)
            payload = sl_fake.block_actions_payload(
                sh.CAROL, message.channel, message.ts, old["k2"], force=True
            )
            before = len(sl_fake.ephemeral_messages)
            assert (await sl.world.post(payload))[0] == 200
            told = await sl.world.next_ephemeral(before, sh.CAROL)
            assert told is not None and told.text == "❌ Denied"
            # and on the platform that owned it
            message = sl_fake.message(*handles["slack", "q1"].key)
            payload = sl_fake.block_actions_payload(
                sh.ALICE, message.channel, message.ts, old["q1"], force=True
            )
            before = len(sl_fake.ephemeral_messages)
            assert (await sl.world.post(payload))[0] == 200
            told = await sl.world.next_ephemeral(before, sh.ALICE)
            assert told is not None and told.text == "💬 Answered: production"
            k1, k2, q1 = [await tg.settled(k) for k in ("k1", "k2", "q1")]
            assert (k1.state, k1.resolved_by, k1.via) == ("granted", "alice", "telegram")
            assert (k2.state, k2.resolved_by, k2.via) == ("failed", "carol", "slack")
            assert (q1.resolution, q1.via) == ({"content": "production"}, "slack")
            await _ended_everywhere(both, "make deploy k1", "Approved by alice")
        finally:
            await _close(both)


async def test_0011_keys_buttons_by_platform_and_comes_back_down(store: SqlStore) -> None:
    """After 0011 one id may be saved once per platform, each with its own meaning and place;
    back at 0010 one row per id is left."""
    world = await make_world(store)
    run = await world.core.service.declare_run(world.agent, world.ws, RunSpec(approval_mode="ask"))
    spec = CallSpec("bash", {"command": "make deploy"}, key="k1")
    task = (await world.core.service.append(world.agent, world.ws, run.id, spec)).task
    chats = ChatStore(store)
    same = [
        ChatCallback("cb1", "telegram", task.id, "approve", None, "-100200300"),
        ChatCallback("cb1", "slack", task.id, "deny", None, "C0APPROVE"),
    ]
    await chats.save_callbacks(same, AT)
    await chats.save_callbacks(same, AT)  # saved again (a retry): kept as they are
    for callback in same:
        found = await chats.callback_task(callback.channel, "cb1")
        assert found is not None and found[0] == callback and found[1].id == task.id
    assert await chats.callback_task("web", "cb1") is None
    await downgrade(store.engine, "0010")
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.text("SELECT id, task_id FROM chat_callback"))).all()
    assert [tuple(r) for r in rows] == [("cb1", task.id)]
    await upgrade(store.engine)
