"""The Telegram adapter assembled: python-telegram-bot's Application, the notifier, the handlers,
digests and pacing, and what they share (the core's reads, rendering, button ids; the paced
Telegram calls themselves are in calls.py).

Built before the core (the core needs the notifier), bound to it after (`bind`), started after
the HTTP server (webhook mode needs the route). Long polling is the default; in webhook mode
our aiohttp app serves `POST /telegram/webhook` (webhook.py) and checks the secret token.
The bot token and the webhook secret never reach a log line or an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from aiohttp import web
from telegram import (
    CallbackQuery,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from adapters.telegram.calls import TelegramCalls
from adapters.telegram.digest import Digests
from adapters.telegram.format import callback_id, card_html, keyboard
from adapters.telegram.handlers import Handlers
from adapters.telegram.notifier import CHANNEL, TelegramNotifier
from adapters.telegram.pacing import Limits, Pacer, is_group
from adapters.web.links import decision_url, inbox_url
from bot.config import ConfigError, Settings
from bot.domain import Member, Principal, Run, Task
from bot.ports import ChatCallback, ChatState, Versioned
from bot.rendering import render_decision

if TYPE_CHECKING:
    from bot.core import Core
    from bot.service import ApprovalService

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
_UPDATES = ["message", "callback_query"]
ButtonId = tuple[str, str, int | None]  # task id, action, option


@dataclass(frozen=True)
class Tuning:
    """Knobs with production defaults; tests and the bench shorten the waits."""

    coalesce_after: int = 8  # messages to a group in the last minute before digests take over
    coalesce_after_private: int = 30  # the same for a person's private chat (1/s there)
    max_post_wait: float = 1.0  # a post that would wait longer for its slot joins the digest
    digest_page_size: int = 50
    digest_quiet: float = 1.0  # a digest page goes out once no decision joined for this long…
    digest_max_delay: float = 5.0  # …(looking at least this often while they keep coming)…
    digest_hold: float = 10.0  # …or when its first decision has waited this long
    digest_edit_interval: float = 5.0  # at most one edit per page in this many seconds
    request_timeout: float = 10.0
    poll_timeout: float = 10.0
    election_interval: float = 5.0  # several instances: how often a standby tries to poll
    verify_tls: bool = True  # off only for a local fake Bot API in tests


@dataclass(frozen=True)
class Rendered:
    text: str
    markup: InlineKeyboardMarkup | None
    callbacks: list[ChatCallback]  # button ids not saved yet


class _Redact(logging.Filter):
    """Keeps secrets out of log lines that pass through a handler (httpx logs request URLs,
    and the Bot API puts the token in the URL)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        if any(s in message for s in self.secrets):
            for secret in self.secrets:
                message = message.replace(secret, "<redacted>")
            record.msg, record.args = message, None
        return True


class TelegramAdapter(TelegramCalls):
    def __init__(
        self,
        settings: Settings,
        chats: ChatState,
        *,
        limits: Limits | None = None,
        tuning: Tuning | None = None,
    ) -> None:
        self.config = settings.telegram
        self.base_url = settings.server.base_url()
        self.chats = chats
        self.tuning = tuning or Tuning()
        self.pacer = Pacer(limits)
        self.core: Core | None = None
        self.retry_afters = 0  # 429s received (the bench reports them; the target is 0)
        token = self.config.token.get_secret_value()
        if not token:
            raise ConfigError("telegram.token: required when telegram.enabled is true")
        self._secrets = [token, self.config.webhook_secret.get_secret_value()]
        if self.config.mode == "webhook" and not _SECRET_RE.match(self._secrets[1]):
            raise ConfigError(
                "telegram.webhook_secret: webhook mode needs 1-256 characters of A-Z a-z 0-9 _ -"
            )
        # Before PTB is built: it logs the API URL (with the token) at DEBUG when it is.
        redact = _Redact(self._secrets)
        for handler in logging.getLogger().handlers:
            handler.addFilter(redact)
        logging.getLogger("httpx").setLevel(logging.WARNING)  # it logs every URL at INFO
        self.notifier = TelegramNotifier(self)
        self.digests = Digests(self)
        self.handlers = Handlers(self)
        self.application = self._build(token)
        self._started = False
        self._saved: set[str] = set()
        self._poll_lock = chats.poll_lock(f"telegram:{token.split(':', 1)[0]}")
        self._election: asyncio.Task[None] | None = None

    def _build(self, token: str) -> Application[Any, Any, Any, Any, Any, Any]:
        timeout = self.tuning.request_timeout
        extra: dict[str, Any] = {} if self.tuning.verify_tls else {"verify": False}

        def request(pool: int) -> HTTPXRequest:
            return HTTPXRequest(
                connection_pool_size=pool,
                read_timeout=timeout,
                write_timeout=timeout,
                connect_timeout=timeout,
                pool_timeout=timeout,
                httpx_kwargs=extra,
            )

        builder = (
            ApplicationBuilder()
            .token(token)
            .base_url(self.config.api_base_url)
            .request(request(64))
            .get_updates_request(request(2))
            .concurrent_updates(32)  # a press waiting for a slot must not hold up the others
        )
        if self.config.mode == "webhook":
            builder = builder.updater(None)
        app = builder.build()
        app.add_handler(CallbackQueryHandler(self.handlers.on_callback))
        app.add_handler(CommandHandler(["start", "whoami"], self.handlers.on_whoami))
        app.add_handler(
            MessageHandler(filters.TEXT & filters.REPLY & ~filters.COMMAND, self.handlers.on_reply)
        )
        app.add_error_handler(self._on_error)
        return app

    # lifecycle ---------------------------------------------------------------------------------
    def bind(self, core: Core) -> None:
        self.core = core

    @property
    def running(self) -> bool:
        """Started, and receiving updates: by webhook, by polling, or standing by while
        another instance polls (every instance sends)."""
        updater = self.application.updater
        standby = self._election is not None and not self._election.done()
        return self._started and (updater is None or updater.running or standby)

    async def start(self) -> None:
        try:
            await self.application.initialize()
        except InvalidToken:
            raise ConfigError("telegram.token: Telegram refused the bot token") from None
        await self.application.start()
        if self.config.mode == "webhook":
            await self.application.bot.set_webhook(
                self.base_url + WEBHOOK_PATH,
                secret_token=self._secrets[1],
                allowed_updates=_UPDATES,
            )
        elif self._poll_lock is None:
            await self._start_polling()
        else:
            self._election = asyncio.create_task(self._elect(), name="telegram-poll-election")
        self._started = True
        await self.digests.recover()

    async def _start_polling(self) -> None:
        assert self.application.updater is not None
        await self.application.updater.start_polling(
            poll_interval=0,
            timeout=timedelta(seconds=self.tuning.poll_timeout),
            allowed_updates=_UPDATES,
            error_callback=self._on_polling_error,
        )

    async def _elect(self) -> None:
        """Poll while we hold the lock; stand by (sending only) while another instance does."""
        lock, updater = self._poll_lock, self.application.updater
        assert lock is not None and updater is not None
        while True:
            try:
                if not updater.running:
                    if await lock.acquire():
                        log.info("telegram: this instance polls for updates")
                        await self._start_polling()
                elif not await lock.alive():
                    log.warning("telegram: lost the poller lock; standing by")
                    await updater.stop()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.warning("telegram poller election: %s", type(error).__name__)
            await asyncio.sleep(self.tuning.election_interval)

    async def stop(self) -> None:
        await self.digests.stop()
        if self._election is not None:
            self._election.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._election
            self._election = None
        if not self._started:
            return
        self._started = False
        updater = self.application.updater
        if updater is not None and updater.running:
            await updater.stop()
        if self._poll_lock is not None:
            await self._poll_lock.release()
        await self.application.stop()
        await self.application.shutdown()

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        error = context.error
        log.error(
            "telegram update failed: %s", type(error).__name__, exc_info=_safe_exc_info(error)
        )

    def _on_polling_error(self, error: TelegramError) -> None:
        log.warning("telegram polling: %s", type(error).__name__)

    async def handle_webhook(self, request: web.Request) -> web.StreamResponse:
        """`POST /telegram/webhook`: Telegram's call, authenticated by the secret token."""
        given = request.headers.get(SECRET_HEADER, "")
        secret = self._secrets[1] if self.config.mode == "webhook" else ""
        if not secret or not hmac.compare_digest(given.encode(), secret.encode()):
            return web.Response(status=403)
        try:
            data = await request.json()
        except ValueError:
            return web.Response(status=400)
        if not self._started or not isinstance(data, dict):
            return web.Response(status=503 if not self._started else 400)
        update = Update.de_json(data, self.application.bot)
        await self.application.process_update(update)
        return web.Response()

    # the core, read through ------------------------------------------------------------------
    @property
    def bound(self) -> Core:
        if self.core is None:
            raise RuntimeError("the Telegram adapter is not bound to a core yet")
        return self.core

    @property
    def service(self) -> ApprovalService:
        return self.bound.service

    def now(self) -> datetime:
        return self.bound.clock.now()

    def chat_for(self, workspace_id: str) -> int | None:
        return self.config.workspace_chats.get(workspace_id, self.config.chat_id)

    def inbox_url(self) -> str:
        return inbox_url(self.base_url)

    async def task(self, task_id: str) -> Task | None:
        async with self.bound.store.read() as tx:
            return await tx.get_task_by_id(task_id)

    async def run(self, run_id: str) -> Run | None:
        async with self.bound.store.read() as tx:
            return await tx.get_run(run_id)

    async def members(self, workspace_id: str) -> list[Member]:
        async with self.bound.store.read() as tx:
            return await tx.list_members(workspace_id)

    async def member(self, telegram_user_id: int, workspace_id: str) -> Principal | None:
        return await self.bound.admin.member_by_chat(
            telegram_user_id=telegram_user_id, workspace_id=workspace_id
        )

    def should_coalesce(self, chat_id: int) -> bool:
        """True when a new decision should join the chat's digest rather than be posted alone:
        a digest is filling, the chat had its share of messages this minute, or the next slot
        is too far away."""
        t = self.tuning
        limit = t.coalesce_after if is_group(chat_id) else t.coalesce_after_private
        return (
            self.digests.active(chat_id)
            or self.pacer.recent(chat_id) >= limit
            or self.pacer.estimate(chat_id) > t.max_post_wait
        )

    # callbacks and multi-select state -------------------------------------------------------
    def callbacks_for(
        self, keys: Sequence[ButtonId]
    ) -> tuple[dict[ButtonId, str], list[ChatCallback]]:
        """The buttons' ids, and those not known to be saved yet."""
        secret = self.service.secret
        ids = {key: callback_id(secret, *key) for key in keys}
        missing = [
            ChatCallback(ids[key], CHANNEL, key[0], key[1], key[2])
            for key in keys
            if ids[key] not in self._saved
        ]
        return ids, missing

    def remember(self, saved: Sequence[ChatCallback]) -> None:
        if len(self._saved) > 200_000:
            self._saved.clear()
        self._saved.update(c.id for c in saved)

    async def ensure_callbacks(self, keys: Sequence[ButtonId]) -> dict[ButtonId, str]:
        ids, missing = self.callbacks_for(keys)
        if missing:
            await self.chats.save_callbacks(missing, self.now())
            self.remember(missing)
        return ids

    async def chosen(self, task_id: str) -> set[int]:
        ref = await self.chats.get_choice(CHANNEL, task_id)
        return set(ref.data.get("chosen", [])) if ref else set()

    async def toggle(self, task_id: str, index: int) -> set[int]:
        for _ in range(50):
            ref = await self.chats.get_choice(CHANNEL, task_id) or Versioned({}, 0)
            chosen = set(ref.data.get("chosen", [])) ^ {index}
            if await self.chats.swap_choice(
                CHANNEL, task_id, {"chosen": sorted(chosen)}, ref.version
            ):
                return chosen
        raise RuntimeError("multi-select state kept changing under us")

    # decisions as messages -------------------------------------------------------------------
    async def prepare(self, task: Task, run: Run, chosen: frozenset[int] | None = None) -> Rendered:
        """The decision's message, and the button ids still to be saved (by the caller, in
        whatever transaction suits it)."""
        if chosen is None:
            chosen = frozenset(await self.chosen(task.id)) if task.kind == "ask" else frozenset()
        url = decision_url(self.base_url, run.id, task.key)
        card = render_decision(task, run, self.now(), url, chosen=chosen)
        keys = [(task.id, b.action, b.option) for row in card.buttons for b in row]
        ids, missing = self.callbacks_for(keys)
        by_button = {(action, option): value for (_, action, option), value in ids.items()}
        return Rendered(card_html(card), keyboard(card.buttons, by_button), missing)

    async def render(self, task: Task, run: Run) -> tuple[str, InlineKeyboardMarkup | None]:
        rendered = await self.prepare(task, run)
        if rendered.callbacks:
            await self.chats.save_callbacks(rendered.callbacks, self.now())
            self.remember(rendered.callbacks)
        return rendered.text, rendered.markup

    async def send_decision(
        self,
        chat_id: int,
        task: Task,
        run: Run,
        *,
        reply_to: int | None = None,
        max_wait: float | None = None,
    ) -> Message:
        text, markup = await self.render(task, run)
        return await self.send(chat_id, text, markup=markup, reply_to=reply_to, max_wait=max_wait)

    async def refresh_message(
        self, chat_id: int, message_id: int, task: Task, run: Run, *, max_wait: float | None
    ) -> bool:
        text, markup = await self.render(task, run)
        return await self.edit(chat_id, message_id, text, markup, max_wait=max_wait)

    async def refresh_pressed(self, message: Message, task: Task, max_wait: float = 5.0) -> None:
        """Bring a pressed message up to date: a decision's own message is re-rendered, a
        digest page refreshed by its worker. Best effort: the ending's own item follows."""
        ref = await self.chats.get_ref(CHANNEL, task.id)
        if ref is None or message.message_id not in ref.data.get("messages", []):
            self.digests.touch(message.chat_id)
            return
        run = await self.run(task.run_id)
        if run is None:
            return
        try:
            await self.refresh_message(
                message.chat_id, message.message_id, task, run, max_wait=max_wait
            )
        except Exception as error:  # best effort: the ending's own item edits it too
            log.info("could not refresh a pressed message (%s)", type(error).__name__)

    async def expand(self, query: CallbackQuery, task: Task) -> bool:
        """🔎 on a digest: post the decision as a message of its own, below the digest.
        False if it is out on its own already."""
        message = query.message
        run = await self.run(task.run_id)
        if not isinstance(message, Message) or run is None:
            return False
        ref = await self.chats.get_ref(CHANNEL, task.id)
        if ref is not None and ref.data.get("messages"):
            return False
        sent = await self.send_decision(
            message.chat_id, task, run, reply_to=message.message_id, max_wait=10.0
        )
        await self.notifier.add_message(task.id, message.chat_id, sent)
        return True


def _safe_exc_info(error: BaseException | None) -> Any:
    """Tracebacks of our own errors are useful; Telegram's errors carry nothing secret either,
    but network errors may quote a URL (with the token), so those are logged by name only."""
    if error is None or isinstance(error, NetworkError):
        return None
    return (type(error), error, error.__traceback__)
