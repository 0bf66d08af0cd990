"""The Telegram adapter assembled: python-telegram-bot's Application (polling, its election
among instances, or the webhook) and the shared chat layer (adapters/chat/) on a
`TelegramPlatform` (platform.py).

Built before the core (the core needs the notifier), bound to it after (`bind`), started after
the HTTP server (webhook mode needs the route). Long polling is the default; in webhook mode
our aiohttp app serves `POST /telegram/webhook` (webhook.py) and checks the secret token.
The bot token and the webhook secret never reach a log line or an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from telegram import (
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

from adapters.chat.assembly import assemble
from adapters.chat.context import CoreLink
from adapters.chat.digests import DigestTuning
from adapters.chat.pacing import Budget, Limits
from adapters.chat.redact import redact_everywhere
from adapters.chat.routing import Routing
from adapters.telegram.calls import TelegramCalls
from adapters.telegram.handlers import Handlers
from adapters.telegram.platform import CHANNEL, TelegramPlatform, is_group
from bot.config import ConfigError, Settings
from bot.domain import Principal
from bot.ports import ChatState

if TYPE_CHECKING:
    from bot.core import Core

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
_UPDATES = ["message", "callback_query"]


@dataclass(frozen=True)
class Tuning:
    """Knobs with production defaults; tests and the bench shorten the waits."""

    digests: DigestTuning = field(default_factory=DigestTuning)
    request_timeout: float = 10.0
    poll_timeout: float = 10.0
    election_interval: float = 5.0  # several instances: how often a standby tries to poll
    verify_tls: bool = True  # off only for a local fake Bot API in tests


class TelegramAdapter:
    """The Telegram adapter assembled: python-telegram-bot's Application and the shared chat
    layer's parts (notifier, presses, digests) on a `TelegramPlatform`."""

    def __init__(
        self,
        settings: Settings,
        chats: ChatState,
        *,
        limits: Limits | None = None,
        tuning: Tuning | None = None,
        shared_budget: bool = False,
    ) -> None:
        self.config = settings.telegram
        self.chats = chats
        self.tuning = tuning or Tuning()
        self.link = CoreLink(settings.server.base_url())
        token = self.config.token.get_secret_value()
        if not token:
            raise ConfigError("telegram.token: required when telegram.enabled is true")
        self._secrets = [token, self.config.webhook_secret.get_secret_value()]
        if self.config.mode == "webhook" and not _SECRET_RE.match(self._secrets[1]):
            raise ConfigError(
                "telegram.webhook_secret: webhook mode needs 1-256 characters of A-Z a-z 0-9 _ -"
            )
        # Before PTB is built: it logs the API URL (with the token) at DEBUG when it is.
        redact_everywhere(self._secrets)
        logging.getLogger("httpx").setLevel(logging.WARNING)  # it logs every URL at INFO
        # Several instances on one database share the bot's budget (one bucket per chat).
        self.budget = Budget(
            CHANNEL, limits, shared=chats if shared_budget else None, windowed=is_group
        )
        self.calls = TelegramCalls(lambda: self.application.bot, self.budget)
        self.platform = TelegramPlatform(
            self.config, self.calls, chats, self.link, lambda: self.running
        )
        routing = Routing.of(settings.routes, settings.decisions.nudge_before)
        layer = assemble(self.platform, chats, self.link, self.budget, self.tuning.digests,
                         self._member_of, toggles=True, routing=routing,
                         globs=self.platform.globs)  # fmt: skip
        self.notifier, self.digests, self.presses = layer.notifier, layer.digests, layer.presses
        self.handlers = Handlers(self.presses, chats, self.calls, self.platform)
        self.application = self._build(token)
        self._started = False
        self._poll_lock = chats.poll_lock(f"telegram:{token.split(':', 1)[0]}")
        self._election: asyncio.Task[None] | None = None

    @property
    def retry_afters(self) -> int:
        return self.calls.retry_afters

    async def _member_of(self, user: str, workspace_id: str) -> Principal | None:
        try:
            user_id = int(user)
        except ValueError:
            return None
        return await self.link.member(workspace_id, telegram_user_id=user_id)

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
        self.link.bind(core)

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
                self.link.base_url + WEBHOOK_PATH,
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
        """`POST /telegram/webhook`: Telegram's call, authenticated by the secret token.

        Anything but the secret, byte for byte, is a 403 (the secret is ASCII by configuration,
        so a header that is not cannot match, and is never encoded). With the secret, an update
        we cannot read is ignored with a 200 and a debug line: Telegram re-sends whatever does
        not get a 2xx, so refusing a malformed update would only bring it back."""
        given = request.headers.get(SECRET_HEADER, "")
        secret = self._secrets[1] if self.config.mode == "webhook" else ""
        if not secret or not given.isascii():
            return web.Response(status=403)
        if not hmac.compare_digest(given.encode("ascii"), secret.encode("ascii")):
            return web.Response(status=403)
        if not self._started:
            return web.Response(status=503)
        try:
            raw = await request.read()
        except RequestPayloadError:  # the body broke off on the way
            return web.Response(status=400)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, nested too deep
            log.debug("telegram webhook: malformed update ignored (%s)", type(error).__name__)
            return web.Response()
        update_id = data.get("update_id") if isinstance(data, dict) else None
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            log.debug("telegram webhook: malformed update ignored (no update_id)")
            return web.Response()
        try:
            update = Update.de_json(data, self.application.bot)
        except Exception as error:  # PTB builds its objects with **kwargs: TypeError and more
            log.debug("telegram webhook: malformed update ignored (%s)", type(error).__name__)
            return web.Response()
        try:
            await self.application.process_update(update)
        except Exception as error:  # handler errors go to _on_error; this is PTB's own
            log.debug("telegram webhook: malformed update ignored (%s)", type(error).__name__)
        return web.Response()


def _safe_exc_info(error: BaseException | None) -> Any:
    """Tracebacks of our own errors are useful; Telegram's errors carry nothing secret either,
    but network errors may quote a URL (with the token), so those are logged by name only."""
    if error is None or isinstance(error, NetworkError):
        return None
    return (type(error), error, error.__traceback__)
