"""The Slack adapter assembled: slack-bolt's AsyncApp and the shared chat layer (adapters/chat/)
on a `SlackPlatform` (platform.py).

Transport: HTTP mode serves events and interactivity at `POST /slack/events` on the service's
own aiohttp server (the signature is verified before anything is read: unsigned, wrongly signed
or older than five minutes is a 401 and changes nothing; a signed body that is not what Slack
sends is a 400; `url_verification` is answered), or Socket Mode with the
app-level token, for installs with no public address. Every request is acknowledged first (bolt
answers Slack as soon as `ack()` is called) and the work runs after it.

Bolt's listeners only translate: a button press becomes a `Press`, a modal's text or a reply
in a run's thread becomes text for `Presses.on_text`. The tokens and the signing secret never
reach a log line or an error message.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import ClientError, web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from adapters.chat.assembly import assemble
from adapters.chat.context import CoreLink
from adapters.chat.digests import DigestTuning
from adapters.chat.pacing import Budget, Limits
from adapters.chat.places import shown_in
from adapters.chat.port import MessageRef, Press
from adapters.chat.presses import COUNTED, NOT_APPROVER, question_options
from adapters.chat.records import Delivery
from adapters.chat.redact import redact_everywhere
from adapters.chat.routing import Routing
from adapters.slack.format import selected_options
from adapters.slack.platform import (
    ALLOW_VIEW,
    CHANNEL,
    MATCH_BLOCK,
    SCOPE_BLOCK,
    TEXT_BLOCK,
    TEXT_VIEW,
    SlackPlatform,
)
from bot.config import ConfigError, Settings
from bot.domain import Principal
from bot.ports import ChatState

if TYPE_CHECKING:
    from bot.core import Core

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
# Slack: about one message a second per channel ("short bursts allowed", by how much unsaid).
SLACK_LIMITS = Limits(per_interval=1.1, per_burst=1, window_count=60, window=60.0)
SEVERAL_WAITING = (
    "Several questions in this thread wait for a free-text answer: press *Answer* on the one "
    "you mean."
)


@dataclass(frozen=True)
class SlackTuning:
    """Knobs with production defaults; tests and the bench shorten the waits."""

    digests: DigestTuning = field(default_factory=DigestTuning)
    request_timeout: float = 10.0
    parent_refresh: float = 0.5  # a run's parent message is edited once changes settle


class SlackAdapter:
    def __init__(
        self,
        settings: Settings,
        chats: ChatState,
        *,
        limits: Limits | None = None,
        tuning: SlackTuning | None = None,
        shared_budget: bool = False,
    ) -> None:
        self.config = config = settings.slack
        self.chats = chats
        self.tuning = tuning or SlackTuning()
        bot_token = config.bot_token.get_secret_value()
        signing_secret = config.signing_secret.get_secret_value()
        app_token = config.app_token.get_secret_value()
        problems = []
        if not bot_token:
            problems.append("slack.bot_token: required when slack.enabled is true")
        if config.mode == "http" and not signing_secret:
            problems.append("slack.signing_secret: required in http mode")
        if config.mode == "socket" and not app_token.startswith("xapp-"):
            problems.append("slack.app_token: socket mode needs an app-level token (xapp-…)")
        if problems:
            raise ConfigError("\n".join(problems))
        redact_everywhere([bot_token, signing_secret, app_token])
        self.link = CoreLink(settings.server.base_url())
        self.client = AsyncWebClient(
            token=bot_token,
            base_url=config.api_base_url,
            timeout=self.tuning.request_timeout,  # type: ignore[arg-type]
        )
        self.budget = Budget(
            CHANNEL, limits or SLACK_LIMITS, shared=chats if shared_budget else None
        )
        self.platform = SlackPlatform(
            config, self.client, chats, self.link, self.budget, lambda: self.running,
            parent_refresh=self.tuning.parent_refresh,
        )  # fmt: skip
        # Slack sends the ticked options with Submit: no toggles kept.
        routing = Routing.of(settings.routes, settings.decisions.nudge_before)
        layer = assemble(self.platform, chats, self.link, self.budget, self.tuning.digests,
                         self._member_of, toggles=False, routing=routing)  # fmt: skip
        self.notifier, self.digests, self.presses = layer.notifier, layer.digests, layer.presses
        self.app = AsyncApp(
            client=self.client,
            signing_secret=signing_secret or None,
            request_verification_enabled=config.mode == "http",
            process_before_response=False,
        )
        self.app.action(re.compile(".*"))(self._on_action)
        self.app.view(TEXT_VIEW)(self._on_view)
        self.app.view(ALLOW_VIEW)(self._on_allow_view)
        self.app.event("message")(self._on_message)
        self._app_token = app_token
        self._verifier = SignatureVerifier(signing_secret) if signing_secret else None
        self._socket: AsyncSocketModeHandler | None = None
        self._started = False

    def bind(self, core: Core) -> None:
        self.link.bind(core)

    @property
    def running(self) -> bool:
        return self._started

    @property
    def retry_afters(self) -> int:
        return self.platform.retry_afters

    async def start(self) -> None:
        try:
            await self.client.auth_test()
        except SlackApiError as error:
            code = error.response.get("error")
            raise ConfigError(f"slack.bot_token: Slack refused the bot token ({code})") from None
        except (OSError, TimeoutError, ClientError) as error:  # the address, not the token
            raise ConfigError(
                f"slack.api_base_url: could not reach Slack's Web API ({type(error).__name__})"
            ) from None
        if self.config.mode == "socket":
            self._socket = AsyncSocketModeHandler(self.app, self._app_token)
            await self._socket.connect_async()  # type: ignore[no-untyped-call]
        self._started = True
        await self.digests.recover()

    async def stop(self) -> None:
        await self.digests.stop()
        await self.platform.stop()
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None
        self._started = False

    async def _member_of(self, user: str, workspace_id: str) -> Principal | None:
        return await self.link.member(workspace_id, slack_user_id=user)

    # HTTP mode ---------------------------------------------------------------------------------
    async def handle_events(self, request: web.Request) -> web.StreamResponse:
        """`POST /slack/events`: Slack's events and interactivity. The signature is checked
        before the body is parsed (bolt checks it again); a signed body that is not what Slack
        sends is a 400, never a 500."""
        if self.config.mode != "http" or self._verifier is None:
            return _error(404, "not_found", "Slack events are not received over HTTP here")
        try:
            body = (await request.read()).decode()
        except UnicodeDecodeError:
            return _error(400, "invalid_request", "the body is not UTF-8")
        headers = request.headers
        timestamp = headers.get("X-Slack-Request-Timestamp", "")
        # Slack's verifier reads the timestamp with int(): one that is absent, empty or not
        # a number is no signature at all, not a server error.
        if not (timestamp.isascii() and timestamp.isdigit()) or not self._verifier.is_valid(
            body, timestamp, headers.get("X-Slack-Signature", "")
        ):
            return _error(401, "unauthorized", "invalid or stale Slack signature")
        if not self._started:
            return _error(503, "not_ready", "the Slack adapter is not started")
        try:
            bolt_request = AsyncBoltRequest(body=body, query=request.query_string,
                                            headers=dict(headers))  # fmt: skip
            response = await self.app.async_dispatch(bolt_request)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            log.debug("slack: an unreadable request (%s)", type(error).__name__)
            return _error(400, "invalid_request", "not a request Slack sends")
        if response.status >= 500:  # bolt's own answer to a payload it could not read
            return _error(400, "invalid_request", "not a request Slack sends")
        return await to_aiohttp_response(response)

    # bolt's listeners: translate only ----------------------------------------------------------
    async def _on_action(self, ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        if action.get("type") == "checkboxes":
            return  # ticking answers nothing until Submit
        user, container, message = (
            _obj(body.get("user")),
            _obj(body.get("container")),
            _obj(body.get("message")),
        )
        chat = container.get("channel_id") or _obj(body.get("channel")).get("id")
        ts = container.get("message_ts") or message.get("ts")
        ref = MessageRef(str(chat), str(ts), message.get("thread_ts")) if chat and ts else None
        values = _obj(body.get("state")).get("values")
        press = Press(
            user=str(user.get("id", "")),
            user_name=str(user.get("name") or user.get("username") or ""),
            button=str(action.get("action_id", "")),
            message=ref,
            chosen=tuple(selected_options(values)) if isinstance(values, dict) else None,
            handle={"trigger_id": body.get("trigger_id")},
        )
        await self.presses.on_press(press)

    async def _on_view(self, ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
        state = _obj(_obj(_obj(view.get("state")).get("values")).get(TEXT_BLOCK))
        text = str(_obj(state.get(TEXT_BLOCK)).get("value") or "").strip()
        if not text:  # never a silent deny or an empty answer
            await ack(response_action="errors", errors={TEXT_BLOCK: "Write something first"})
            return
        found = await self.chats.callback_task(CHANNEL, str(view.get("private_metadata", "")))
        if found is None or found[0].channel != CHANNEL:
            await ack()
            return
        callback, task = found
        user = str(_obj(body.get("user")).get("id", ""))
        if callback.action == "edit":  # a refused edit is said in the modal, kept open
            notice = await self.presses.on_text(user, task, callback.action, text)
            if notice and not notice.startswith(COUNTED):
                await ack(response_action="errors", errors={TEXT_BLOCK: notice[:150]})
                return
            await ack()
            if notice:  # counted toward a quorum: the modal closes, the count is said
                await self._tell_about(task.id, user, notice)
            return
        await ack()
        notice = await self.presses.on_text(user, task, callback.action, text)
        if notice:
            await self._tell_about(task.id, user, notice)

    async def _tell_about(self, task_id: str, user: str, notice: str) -> None:
        """A private notice beside the decision's first message."""
        ref = await self.chats.get_ref(CHANNEL, task_id)
        refs = Delivery.of(ref.data if ref else {}).refs()
        if refs:
            await self.platform.tell(Press(user, "", "", refs[0]), notice)

    async def _on_allow_view(self, ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
        """ "Approve & allow like this" submitted: the scope, and the glob as the person left
        it. A refusal (a glob that does not match the call, no profile) keeps the modal open
        with the reason."""
        values = _obj(_obj(view.get("state")).get("values"))
        scope_state = _obj(_obj(values.get(SCOPE_BLOCK)).get(SCOPE_BLOCK))
        scope = str(_obj(scope_state.get("selected_option")).get("value") or "")
        match_state = _obj(_obj(values.get(MATCH_BLOCK)).get(MATCH_BLOCK))
        match = match_state.get("value") if MATCH_BLOCK in values else None
        if scope not in ("run", "profile"):
            await ack(response_action="errors", errors={SCOPE_BLOCK: "Choose where to allow it"})
            return
        if match is not None and not str(match).strip():
            await ack(response_action="errors", errors={MATCH_BLOCK: "Write a glob"})
            return
        found = await self.chats.callback_task(CHANNEL, str(view.get("private_metadata", "")))
        if found is None or found[0].channel != CHANNEL:
            await ack()
            return
        task = found[1]
        user = str(_obj(body.get("user")).get("id", ""))
        glob = None if match is None else str(match).strip()
        decided, notice = await self.presses.on_allow(user, task, scope, glob)
        if not decided and task.parked and notice != NOT_APPROVER:
            block = MATCH_BLOCK if MATCH_BLOCK in values else SCOPE_BLOCK
            await ack(response_action="errors", errors={block: notice[:150]})
            return
        await ack()
        await self._tell_about(task.id, user, notice)

    async def _on_message(self, event: dict[str, Any]) -> None:
        """A plain reply in a run's thread answers its one pending free-text question."""
        thread, ts = event.get("thread_ts"), event.get("ts")
        if event.get("subtype") not in (None, "thread_broadcast") or event.get("bot_id"):
            return  # an edit, a join, a bot (ourselves included)
        if not thread or thread == ts:
            return  # not a reply in a thread
        chat, user, text = event.get("channel"), event.get("user"), str(event.get("text") or "")
        if not chat or not user or not text.strip():
            return
        run_id = await self.platform.run_of_thread(str(chat), str(thread))
        if run_id is None:
            return  # a thread that is not a run's
        waiting = [
            t for t in await self.link.parked_tasks(run_id)
            if t.kind == "ask" and not question_options(t)
        ]  # fmt: skip
        # Only the questions shown in this channel: a route may show others elsewhere.
        waiting = await shown_in(self.chats, CHANNEL, waiting, str(chat))
        if not waiting:
            return  # people talking in the thread
        here = MessageRef(str(chat), str(ts), str(thread))
        press = Press(str(user), "", "", here)
        if await self._member_of(str(user), waiting[0].workspace_id) is None:
            await self.platform.tell(press, NOT_APPROVER)
            return
        if len(waiting) > 1:
            await self.client.chat_postMessage(
                channel=str(chat), thread_ts=str(thread), text=SEVERAL_WAITING
            )
            return
        notice = await self.presses.on_text(str(user), waiting[0], "answer_text", text.strip())
        await self.platform.tell(press, notice or "💬 Answered")


def _obj(value: Any) -> dict[str, Any]:
    """A part of Slack's payload that must be an object (anything else reads as empty)."""
    return value if isinstance(value, dict) else {}


def _error(status: int, code: str, detail: str) -> web.Response:
    return web.json_response({"error": {"code": code, "detail": detail}}, status=status)


def mount(app: web.Application, adapter: SlackAdapter) -> None:
    """Add `POST /slack/events` to the service's app (before it starts)."""
    app.router.add_post(EVENTS_PATH, adapter.handle_events)
