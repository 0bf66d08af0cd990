"""A core wired to the real Telegram adapter (python-telegram-bot) and the fake Bot API server.

`TgWorld` drives it deterministically: the outbox relay and the clock run only when a test
says so (`flush`, `core.scheduler.run_once`), while PTB long-polls the fake for real.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from adapters.telegram import DigestTuning, Limits, TelegramAdapter, Tuning
from bot.clock import FakeClock
from bot.config import Settings
from bot.core import Core
from bot.domain import Principal, Task
from bot.service import CallSpec, RunSpec
from store.chat import ChatStore
from store.sql import SqlStore
from tests.fakes.telegram_api import CallbackAnswer, FakeTelegram, SentMessage

TOKEN = "123456:TEST-token_abc"
GROUP = -100200300
ALICE = 1001
CAROL = 1003
STRANGER = 666
ONCALL = -100999888  # a second group, for routes
WS = "acme"
PUBLIC_URL = "https://approvals.example"

# The requests' timeout is the production one: on a loaded machine a 1 s timeout dropped a
# best-effort notice (a reply's refusal) before it reached the fake. Fault tests set their own.
FAST = Tuning(
    request_timeout=10.0,
    poll_timeout=0.5,
    verify_tls=False,  # plain http to 127.0.0.1: skipping CA loading saves ~0.1 s per client
    digests=DigestTuning(quiet=0.05, max_delay=0.3, hold=0.5, edit_interval=0.2),
)


def settings_for(fake: FakeTelegram, *, mode: str = "polling", public_url: str = PUBLIC_URL,
                 routes: list[Any] | None = None, decisions: dict[str, Any] | None = None,
                 **telegram: Any) -> Settings:  # fmt: skip
    config: dict[str, Any] = {
        "enabled": True,
        "token": TOKEN,
        "api_base_url": fake.base_url,
        "chat_id": GROUP,
        "mode": mode,
        **telegram,
    }
    return Settings(
        telegram=config,
        server={"public_url": public_url},
        routes=routes or [],
        decisions=decisions or {},
    )


@dataclass
class TgWorld:
    fake: FakeTelegram
    store: SqlStore
    core: Core
    clock: FakeClock
    adapter: TelegramAdapter
    alice: Principal
    carol: Principal
    agent: Principal
    run_id: str = ""
    answers_seen: int = field(default=0)

    @property
    def service(self) -> Any:
        return self.core.service

    async def flush(self, rounds: int = 50) -> None:
        """Deliver every outbox item due now."""
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

    async def task(self, key: str) -> Task:
        return await self.service.get_task(self.agent, WS, self.run_id, key)  # type: ignore[no-any-return]

    def message(self, needle: str) -> SentMessage:
        """The bot's message (as it is now) whose text contains `needle`."""
        found = [m for m in self.fake.messages_in(GROUP) if needle in m.text]
        assert len(found) == 1, (needle, [m.text[:80] for m in found])
        return found[0]

    async def press(self, message: SentMessage, button: str | None = None, *,
                    user: int = ALICE, data: str | None = None, force: bool = False,
                    first_name: str = "Alice") -> CallbackAnswer:  # fmt: skip
        update_id = self.fake.press_button(
            chat_id=message.chat_id,
            message_id=message.message_id,
            user_id=user,
            data=data,
            text=button,
            force=force,
            first_name=first_name,
        )
        query_id = str(update_id)

        def answered() -> CallbackAnswer | None:
            return next(
                (a for a in self.fake.callback_answers if a.callback_query_id == query_id), None
            )

        answer: CallbackAnswer = await self.fake.wait_for(answered)
        return answer

    async def reply(self, prompt: SentMessage, text: str, user: int = ALICE) -> None:
        before = len(self.fake.calls)
        self.fake.send_user_message(
            chat_id=prompt.chat_id, user_id=user, text=text, reply_to_message_id=prompt.message_id
        )
        await asyncio.sleep(0)
        await self.fake.wait_for(lambda: len(self.fake.calls) > before)  # the poll picked it up

    async def settled(self, key: str, timeout: float = 20.0) -> Task:
        async def done() -> Task | None:
            task = await self.task(key)
            return None if task.parked else task

        task: Task = await self.fake.wait_for(done, timeout=timeout)
        return task


async def build_world(
    store: SqlStore,
    fake: FakeTelegram,
    *,
    clock: FakeClock | None = None,
    settings: Settings | None = None,
    tuning: Tuning = FAST,
    limits: Limits | None = None,
    create: bool = True,
) -> TgWorld:
    clock = clock or FakeClock()
    settings = settings or settings_for(fake)
    adapter = TelegramAdapter(settings, ChatStore(store), tuning=tuning, limits=limits)
    core = await Core.build(store, settings, clock=clock, notifiers={"telegram": adapter.notifier})
    adapter.bind(core)
    if create:
        await core.admin.create_workspace(WS)
        alice = (await core.admin.add_member(WS, "alice", telegram_user_id=ALICE)).principal
        carol = (await core.admin.add_member(WS, "carol", telegram_user_id=CAROL)).principal
        agent = (await core.admin.add_application(WS, "agent")).principal
        run = await core.service.declare_run(
            agent, WS, RunSpec(approval_mode="ask", title="nightly")
        )
        run_id = run.id
    else:
        alice = await core.admin.member_by_chat(telegram_user_id=ALICE, workspace_id=WS)  # type: ignore[assignment]
        carol = await core.admin.member_by_chat(telegram_user_id=CAROL, workspace_id=WS)  # type: ignore[assignment]
        agent = await core.admin.principal(WS, "application", "agent")
        run_id = (await store.runs(WS))[0].id
    await adapter.start()
    return TgWorld(fake, store, core, clock, adapter, alice, carol, agent, run_id)


async def close_world(world: TgWorld) -> None:
    await world.core.stop()
    await world.adapter.stop()


@contextlib.asynccontextmanager
async def fake_telegram(**kwargs: Any) -> AsyncIterator[FakeTelegram]:
    fake = FakeTelegram(TOKEN, **kwargs)
    fake.add_chat(GROUP, "supergroup", "Approvers")
    fake.add_chat(ONCALL, "supergroup", "On call")
    fake.add_chat(ALICE, "private", first_name="Alice")  # people's chats with the bot
    fake.add_chat(CAROL, "private", first_name="Carol")
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@contextlib.asynccontextmanager
async def tg_world(store: SqlStore, **kwargs: Any) -> AsyncIterator[TgWorld]:
    fake_kwargs = kwargs.pop("fake", {})
    async with fake_telegram(**fake_kwargs) as fake:
        world = await build_world(store, fake, **kwargs)
        try:
            yield world
        finally:
            await close_world(world)
