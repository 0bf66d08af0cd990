"""A core wired to the real Slack adapter (slack-bolt, slack_sdk) and the fake Slack Web API,
served by a real aiohttp server whose `POST /slack/events` the fake's signed requests reach.

`SlackWorld` drives it deterministically, like the Telegram harness: the outbox relay and the
clock run only when a test says so (`flush`, `core.scheduler.run_once`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from adapters.chat.digests import DigestTuning
from adapters.chat.pacing import Limits
from adapters.http.app import build_app
from adapters.slack import SlackAdapter, SlackTuning, mount
from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from bot.domain import Principal, Task
from bot.service import CallSpec, RunSpec
from store.chat import ChatStore
from store.sql import SqlStore
from tests.fakes.slack_api import Ephemeral, FakeSlack, SlackMessage

BOT_TOKEN = "xoxb-1-fake-bot-token"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0APPROVE"
ALICE = "U0ALICE"
CAROL = "U0CAROL"
STRANGER = "U0STRANGE"
ONCALL = "C0ONCALL"  # a second channel, for routes
WS = "acme"
PUBLIC_URL = "https://approvals.example"

# The requests' timeout is the production one (see telegram_harness.FAST); fault tests set
# their own.
FAST = SlackTuning(
    request_timeout=10.0,
    parent_refresh=0.05,
    digests=DigestTuning(quiet=0.05, max_delay=0.3, hold=0.5, edit_interval=0.2),
)


# The fake enforces no rate unless a test asks it to: pace lightly so tests take no longer
# than they must (the real budget, one message a second per channel, is tested on its own).
QUICK = Limits(per_interval=0.01, per_burst=20, window_count=100_000)


def settings_for(
    fake: FakeSlack,
    *,
    routes: list[Any] | None = None,
    decisions: dict[str, Any] | None = None,
    **slack: Any,
) -> Settings:
    config: dict[str, Any] = {
        "enabled": True,
        "bot_token": BOT_TOKEN,
        "signing_secret": SIGNING_SECRET,
        "api_base_url": fake.base_url,
        "channel": CHANNEL,
        **slack,
    }
    return Settings(
        slack=config,
        server={"public_url": PUBLIC_URL},
        routes=routes or [],
        decisions=decisions or {},
    )


@dataclass
class SlackWorld:
    fake: FakeSlack
    store: SqlStore
    core: Core
    clock: FakeClock
    adapter: SlackAdapter
    runner: web.AppRunner
    url: str
    alice: Principal
    carol: Principal
    agent: Principal
    run_id: str = ""
    seen_ephemerals: int = field(default=0)

    @property
    def service(self) -> Any:
        return self.core.service

    @property
    def events_url(self) -> str:
        return self.url + "/slack/events"

    async def flush(self, rounds: int = 50) -> None:
        for _ in range(rounds):
            if not await self.core.relay.run_once():
                return

    async def park(self, key: str, tool: str = "bash", tool_input: Any = None,
                   run_id: str | None = None, **kw: Any) -> Task:  # fmt: skip
        spec = CallSpec(tool, tool_input or {"command": f"make deploy {key}"}, key=key, **kw)
        receipt = await self.service.append(self.agent, WS, run_id or self.run_id, spec)
        assert receipt.task.parked, receipt.task
        return receipt.task  # type: ignore[no-any-return]

    async def ask(self, key: str, **question: Any) -> Task:
        return await self.park(key, "ask", question)

    async def task(self, key: str, run_id: str | None = None) -> Task:
        return await self.service.get_task(self.agent, WS, run_id or self.run_id, key)  # type: ignore[no-any-return]

    def message(self, needle: str) -> SlackMessage:
        """The decision (as it is now) whose text or blocks contain `needle`."""
        found = [m for m in self.all_messages() if needle in json.dumps(m.blocks) + m.text]
        found = [m for m in found if m.metadata is not None]
        assert len(found) == 1, (needle, [m.text[:80] for m in found])
        return found[0]

    def all_messages(self) -> list[SlackMessage]:
        return list(self.fake.messages.values())

    def button(self, message: SlackMessage, text: str) -> dict[str, Any]:
        for element in message.elements:
            if (element.get("text") or {}).get("text") == text:
                return element
        raise LookupError(f"no button {text!r}: {[e.get('text') for e in message.elements]}")

    async def post(self, payload: dict[str, Any]) -> tuple[int, str]:
        return await self.fake.post_event(self.events_url, payload, SIGNING_SECRET, form=True)

    async def press(self, message: SlackMessage, text: str, *, user: str = ALICE,
                    state: dict[str, Any] | None = None,
                    notice: bool = True) -> Ephemeral | None:  # fmt: skip
        """Press the button labelled `text` as `user`; the ephemeral answer they got (with
        `notice`: a modal opens instead for some buttons)."""
        element = self.button(message, text)
        payload = self.fake.block_actions_payload(
            user, message.channel, message.ts, element["action_id"], state=state
        )
        before = len(self.fake.ephemeral_messages)
        status, _ = await self.post(payload)
        assert status == 200
        return await self.next_ephemeral(before, user) if notice else None

    async def next_ephemeral(
        self, before: int, user: str, timeout: float = 3.0
    ) -> Ephemeral | None:
        def found() -> Ephemeral | None:
            return next((e for e in self.fake.ephemeral_messages[before:] if e.user == user), None)

        try:
            return await self.fake.wait_for(found, timeout=timeout)  # type: ignore[no-any-return]
        except TimeoutError:
            return None

    async def settled(self, key: str, timeout: float = 20.0) -> Task:
        async def done() -> Task | None:
            task = await self.task(key)
            return None if task.parked else task

        task: Task = await self.fake.wait_for(done, timeout=timeout)
        return task


async def build_world(
    store: SqlStore, fake: FakeSlack, *, clock: FakeClock | None = None,
    settings: Settings | None = None, tuning: SlackTuning = FAST, create: bool = True,
    **adapter_kw: Any,
) -> SlackWorld:  # fmt: skip
    clock = clock or FakeClock()
    settings = settings or settings_for(fake)
    adapter_kw.setdefault("limits", QUICK)
    adapter = SlackAdapter(settings, ChatStore(store), tuning=tuning, **adapter_kw)
    core = await Core.build(store, settings, clock=clock, notifiers={"slack": adapter.notifier})
    adapter.bind(core)
    if create:
        await core.admin.create_workspace(WS)
        alice = (await core.admin.add_member(WS, "alice", slack_user_id=ALICE)).principal
        carol = (await core.admin.add_member(WS, "carol", slack_user_id=CAROL)).principal
        agent = (await core.admin.add_application(WS, "agent")).principal
        run = await core.service.declare_run(
            agent, WS, RunSpec(approval_mode="ask", title="nightly")
        )
        run_id = run.id
    else:
        alice = await core.admin.member_by_chat(slack_user_id=ALICE, workspace_id=WS)  # type: ignore[assignment]
        carol = await core.admin.member_by_chat(slack_user_id=CAROL, workspace_id=WS)  # type: ignore[assignment]
        agent = await core.admin.principal(WS, "application", "agent")
        run_id = (await store.runs(WS))[0].id
    app = build_app(core, settings)
    mount(app, adapter)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    await adapter.start()
    return SlackWorld(fake, store, core, clock, adapter, runner, f"http://127.0.0.1:{port}",
                      alice, carol, agent, run_id)  # fmt: skip


async def close_world(world: SlackWorld) -> None:
    await world.core.stop()
    await world.adapter.stop()
    await world.runner.cleanup()


def new_fake(**kwargs: Any) -> FakeSlack:
    fake = FakeSlack(BOT_TOKEN, **kwargs)
    for user, name in ((ALICE, "alice"), (CAROL, "carol"), (STRANGER, "mallory")):
        fake.add_user(user, name)
    fake.add_channel(CHANNEL, [ALICE, CAROL, STRANGER], name="approvals")
    fake.add_channel(ONCALL, [ALICE, CAROL], name="oncall")
    return fake


@contextlib.asynccontextmanager
async def fake_slack(**kwargs: Any) -> AsyncIterator[FakeSlack]:
    fake = new_fake(**kwargs)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@contextlib.asynccontextmanager
async def slack_world(store: SqlStore, **kwargs: Any) -> AsyncIterator[SlackWorld]:
    fake_kwargs = kwargs.pop("fake", {})
    async with fake_slack(**fake_kwargs) as fake:
        world = await build_world(store, fake, **kwargs)
        try:
            yield world
        finally:
            await close_world(world)
