"""A fake Slack Web API (and Socket Mode) server for tests, strict enough to reject what Slack
rejects.

Point the real client at it: ``AsyncWebClient(token=..., base_url=fake.base_url)``
(``"http://127.0.0.1:PORT/api/"``), or hand that client to slack-bolt's ``AsyncApp(client=...)``.
Calls arrive as ``POST /api/<method>`` (``conversations.replies`` as a GET, the way slack_sdk
sends it) with a JSON body, a form body or query parameters; all are accepted. The token comes
from ``Authorization: Bearer …`` or, for form and query requests only, a ``token`` parameter
(Slack ignores a token inside a JSON body: such a call answers ``not_authed``). Answers are HTTP
200 with ``{"ok": true, …}`` or ``{"ok": false, "error": "<code>"}``, as on Slack; rate limits
answer 429 with ``Retry-After: N`` and ``{"ok": false, "error": "ratelimited"}``.

Implemented methods: auth.test, chat.postMessage, chat.update, chat.postEphemeral, views.open,
conversations.replies, conversations.open, apps.connections.open. Any other method answers
``unknown_method``.

What it checks (error codes are Slack's):

* Tokens: none ``not_authed``; unknown ``invalid_auth``; the app-level token (``xapp-…``) on a
  bot method, or the bot token on ``apps.connections.open``, ``not_allowed_token_type``.
* Channels: a channel not registered with :meth:`FakeSlack.add_channel` ``channel_not_found``
  (``#name`` is looked up by name); one registered with ``bot_member=False`` ``not_in_channel``.
* chat.postMessage: no text, no blocks and no attachments ``no_text``; text over 40,000
  characters ``msg_too_long``; blocks that are not a JSON array ``invalid_blocks_format``; Block
  Kit violations ``invalid_blocks`` (below); malformed ``metadata`` (needs ``event_type`` and an
  object ``event_payload``) ``invalid_metadata_format``; a ``thread_ts`` naming no message of
  that channel ``thread_not_found`` (**stricter than Slack**, whose docs do not promise this
  error; a reply's ts is accepted and taken as its thread, as Slack does).
* chat.update: unknown ts ``message_not_found``; a message the bot did not post
  ``cant_update_message``; as on Slack, omitted ``blocks``/``metadata`` keep the old ones and
  ``blocks=[]`` removes them. Every version of a message is kept (:attr:`SlackMessage.versions`).
* chat.postEphemeral: a user unknown to the fake ``user_not_found``, one not among the channel's
  members ``user_not_in_channel``. Ephemeral messages are not in the channel's history.
* views.open: trigger ids come from the interaction payload builders (or
  :meth:`FakeSlack.issue_trigger_id`); unknown ``invalid_trigger_id``; older than
  ``trigger_ttl`` (3 s) ``expired_trigger_id``; used already ``exchanged_trigger_id``. The view
  is checked first (an invalid view does not use up the trigger): ``type`` must be ``modal``;
  ``title`` (required), ``submit`` and ``close`` plain_text of at most 24 characters; at most 100
  blocks; ``callback_id`` and ``external_id`` at most 255, ``private_metadata`` at most 3000
  characters; ``submit`` required when there is an input block. A violation answers
  ``invalid_arguments`` with Slack's ``response_metadata.messages``.
* conversations.open: ``users`` is one user id (several, a group DM, are not implemented:
  ``not_implemented``); none ``users_list_not_supplied``; a user unknown to the fake
  ``user_not_found``. It answers the same ``D…`` channel for a user every time, registered as a
  channel whose members are the bot and that user.
* conversations.replies: unknown thread ``thread_not_found``; the parent first, then the
  replies oldest first; ``metadata`` only with ``include_all_metadata``; ``limit`` and
  ``cursor`` paginate (``has_more``, ``response_metadata.next_cursor``; a bad cursor
  ``invalid_cursor``).

Block Kit (messages; views add ``input`` and allow 100 blocks). A violation answers
``invalid_blocks`` with ``response_metadata.messages = ["[ERROR] … [json-pointer:/blocks/…]"]``
and records a :class:`Rejection` whose ``detail`` names the limit. Checked: at most 50 blocks;
block types section, header, context, divider, actions, image, markdown, rich_text (loosely),
input (views only); ``block_id`` at most 255 and unique in the message; section ``text`` at most
3000, ``fields`` at most 10 of at most 2000 each, text or fields required; header plain_text at
most 150; context 1–10 elements; actions 1–25 elements; text objects ``plain_text``/``mrkdwn``
with non-empty text (``emoji`` only on plain_text); elements allowed only where Slack allows
them; ``action_id`` at most 255 and unique in the message; button text plain_text at most 75,
``value`` at most 2000, ``url`` at most 3000, ``style`` ``primary``/``danger``; checkboxes and
radio buttons 1–10 options; option text at most 75, value at most 150, description at most 75;
static selects at most 100 options; overflow 1–5 options; placeholders at most 150; confirm
dialogs (title 100, text 300, buttons 30). ``strict_limits=False`` turns off the *size* checks
(lengths and counts), including ``msg_too_long`` and the view sizes; structure is always
checked. Blocks are stored as sent except that, as on Slack, a block without ``block_id`` gets a
generated one.

Faults: :meth:`FakeSlack.fail_next` (``status=`` an HTTP 5xx with
``{"ok": false, "error": "internal_error"}``; ``error=`` an ``ok: false`` answer with that
code; ``retry_after=N`` a 429 ``ratelimited``; ``timeout=S`` the request is held S seconds,
never applied, then answered 504 ``request_timeout``; ``apply_then_timeout=True`` the call
takes effect, then its answer is held ``timeout`` (default ``hold_seconds``, 6) seconds: the
uncertain failure) and :meth:`FakeSlack.fail_rate` (random faults from a seeded RNG). Held
requests end at once on :meth:`FakeSlack.stop`. A ``method`` of ``None`` means any of
:data:`DEFAULT_FAULT_METHODS` (auth.test and apps.connections.open stay up). Injected faults are
listed in ``faults_injected`` and, like every refusal, in ``rejected``.

Rate limits (only with ``enforce_rate_limits=True``): chat.postMessage is limited per channel to
``rate_limit = (burst, per_seconds)`` messages in any sliding window (default ``(1, 1.0)``:
Slack's "one message per second per channel"); a refused call consumes nothing and answers 429
with ``Retry-After`` (whole seconds until a slot frees, at least 1).

Socket Mode: ``apps.connections.open`` (app token) answers
``url = "ws://127.0.0.1:PORT/socket?ticket=…"``; each ticket connects once. On connect the fake
sends ``{"type": "hello", …}``. :meth:`FakeSlack.socket_send` pushes an envelope (``events_api``,
``interactive``, ``slash_commands``) to the newest connection; acks (``{"envelope_id",
"payload"?}``) are recorded in ``socket_acks`` and awaited with :meth:`FakeSlack.wait_ack`.
Slack's redelivery of unacknowledged envelopes is not modelled. :meth:`FakeSlack.stop` closes the
connections, so close a reconnecting client first.

Interactions, built in Slack's formats: :meth:`FakeSlack.block_actions_payload` (a fresh
``trigger_id``, a ``response_url`` on the fake at ``/response/<id>``: its POSTs are recorded in
``response_posts`` and applied, ``replace_original``/``delete_original``/``in_channel``/
ephemeral; at most 5 uses), :meth:`FakeSlack.view_submission_payload`,
:meth:`FakeSlack.message_event` (an ``event_callback`` body; the user's message is also stored,
so it shows in conversations.replies) and :meth:`FakeSlack.url_verification_body`. Deliver them
over Socket Mode or with :meth:`FakeSlack.post_event`, which signs them with :func:`sign`
(``v0=HMAC-SHA256(secret, "v0:{ts}:{body}")``); block_actions and view_submission go
form-encoded as ``payload=<json>`` (``form=True``), events as JSON.

Records for assertions: ``messages`` (current state of every message, by ``(channel, ts)``),
``ephemeral_messages``, ``opened_views``, ``calls``, ``rejected``, ``faults_injected``,
``response_posts``, ``socket_sent``, ``socket_acks``, ``socket_received``; and the helpers
:meth:`messages_in`, :meth:`message`, :meth:`calls_to`, :meth:`rejections`,
:meth:`ephemerals`, :meth:`views_opened`, :meth:`wait_for`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import hashlib
import hmac
import json
import math
import random
import secrets
import string
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple
from urllib.parse import urlencode

from aiohttp import ClientSession, ClientTimeout, WSMsgType, web

__all__ = [
    "DEFAULT_FAULT_METHODS",
    "BlockKitError",
    "Call",
    "Ephemeral",
    "FakeSlack",
    "FaultKind",
    "MessageVersion",
    "OpenedView",
    "Rejection",
    "ResponsePost",
    "SlackMessage",
    "SocketAck",
    "check_blocks",
    "check_view",
    "sign",
]

FaultKind = Literal["500", "503", "error", "429", "timeout", "apply_then_timeout"]
EnvelopeType = Literal["events_api", "interactive", "slash_commands"]

DEFAULT_FAULT_METHODS: frozenset[str] = frozenset(
    {
        "chat.postMessage",
        "chat.update",
        "chat.postEphemeral",
        "views.open",
        "conversations.replies",
    }
)

# How long `wait_for` waits for something that should happen: generous, since a loaded
# machine is slow, and a wait that is met returns at once (it bounds failures, not passes).
PATIENCE = 20.0
MAX_MESSAGE_TEXT = 40_000
MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_BLOCK_ID = 255
MAX_ACTION_ID = 255
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_SECTION_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_URL = 3000
MAX_OPTIONS_CHECKBOXES = 10
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150
MAX_SELECT_OPTIONS = 100
MAX_OVERFLOW_OPTIONS = 5
MAX_PLACEHOLDER = 150
MAX_VIEW_TITLE = 24
MAX_CALLBACK_ID = 255
MAX_PRIVATE_METADATA = 3000
MAX_RESPONSE_URL_USES = 5

_SELECTS = frozenset(
    {
        f"{prefix}{kind}_select"
        for prefix in ("", "multi_")
        for kind in ("static", "external", "users", "conversations", "channels")
    }
)
_ELEMENTS_ALLOWED: dict[str, frozenset[str]] = {
    "section": frozenset(
        {"button", "checkboxes", "radio_buttons", "overflow", "datepicker", "timepicker", "image"}
        | _SELECTS
    ),
    "actions": frozenset(
        {
            "button",
            "checkboxes",
            "radio_buttons",
            "overflow",
            "datepicker",
            "timepicker",
            "datetimepicker",
        }
        | _SELECTS
    ),
    "input": frozenset(
        {
            "plain_text_input",
            "checkboxes",
            "radio_buttons",
            "datepicker",
            "timepicker",
            "datetimepicker",
            "email_text_input",
            "url_text_input",
            "number_input",
            "rich_text_input",
            "file_input",
        }
        | _SELECTS
    ),
}
_BLOCK_ID_CHARS = string.ascii_letters + string.digits
_UNSET: Any = object()


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass
class MessageVersion:
    """One version of a message: what it looked like after a post or an update."""

    text: str
    blocks: list[dict[str, Any]] | None
    metadata: dict[str, Any] | None
    via: str  # "chat.postMessage", "chat.update", "response_url", "user"
    at: float  # time.time() of the change


@dataclass
class SlackMessage:
    """A message in a channel, in its current version (``versions`` keeps every version)."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None = None  # the parent's ts for a reply; None for a top-level message
    metadata: dict[str, Any] | None = None
    reply_broadcast: bool = False
    user: str | None = None
    bot_id: str | None = None
    unfurl_links: bool | None = None
    unfurl_media: bool | None = None
    edited_ts: str | None = None
    versions: list[MessageVersion] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.channel, self.ts)

    @property
    def from_bot(self) -> bool:
        return self.bot_id is not None

    @property
    def is_reply(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts

    @property
    def edits(self) -> list[MessageVersion]:
        """The versions after the first (one per update), oldest first."""
        return self.versions[1:]

    @property
    def elements(self) -> list[dict[str, Any]]:
        """Every interactive element (actions elements, accessories, input elements)."""
        return [el for _, el in _iter_elements(self.blocks or [])]

    def element(self, action_id: str) -> dict[str, Any]:
        for el in self.elements:
            if el.get("action_id") == action_id:
                return el
        raise LookupError(f"no element with action_id {action_id!r} on message {self.key}")


@dataclass
class Ephemeral:
    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None
    message_ts: str
    via: str = "chat.postEphemeral"


@dataclass
class OpenedView:
    id: str
    trigger_id: str
    user_id: str | None
    view: dict[str, Any]  # as Slack answered it (with id, state, hash…)

    @property
    def callback_id(self) -> str:
        return str(self.view.get("callback_id", ""))


@dataclass
class ResponsePost:
    response_id: str
    body: Any
    status: int
    error: str | None = None


@dataclass
class SocketAck:
    envelope_id: str
    payload: dict[str, Any] | None
    raw: dict[str, Any]


class Call(NamedTuple):
    method: str
    params: dict[str, Any]
    token: str | None


class Rejection(NamedTuple):
    method: str
    params: dict[str, Any]
    status: int
    error: str
    detail: str


@dataclass
class _Channel:
    id: str
    name: str
    members: set[str]
    bot_member: bool


@dataclass
class _Trigger:
    user_id: str | None
    created: float
    used: bool = False


@dataclass
class _ResponseUrl:
    channel: str
    message_ts: str | None
    user_id: str
    thread_ts: str | None
    uses: int = 0


@dataclass
class _Fault:
    kind: str
    status: int = 500
    error: str = "internal_error"
    retry_after: int = 1
    hold: float | None = None


@dataclass
class _RandomFaults:
    rate: float
    kinds: tuple[str, ...]
    retry_after: int
    hold: float | None


class _ApiError(Exception):
    def __init__(
        self,
        error: str,
        detail: str = "",
        *,
        status: int = 200,
        messages: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(error)
        self.error = error
        self.detail = detail or error
        self.status = status
        self.messages = messages
        self.headers = headers


# --------------------------------------------------------------------------------------------
# Block Kit
# --------------------------------------------------------------------------------------------


class BlockKitError(ValueError):
    """A Block Kit violation: ``pointer`` is the JSON pointer Slack names, ``short`` Slack's
    wording, ``human`` which limit or rule was broken."""

    def __init__(self, pointer: str, short: str, human: str) -> None:
        super().__init__(f"{human} (at {pointer})")
        self.pointer = pointer
        self.short = short
        self.human = human

    @property
    def slack_message(self) -> str:
        return f"[ERROR] {self.short} [json-pointer:{self.pointer}]"


class _BlockChecker:
    def __init__(self, *, strict: bool, surface: Literal["message", "modal"]) -> None:
        self.strict = strict
        self.surface = surface
        self.block_ids: set[str] = set()
        self.action_ids: set[str] = set()

    # ---------------------------------------------------------------- generic helpers

    def _max_len(self, value: str, limit: int, pointer: str, what: str) -> None:
        if self.strict and len(value) > limit:
            raise BlockKitError(
                pointer,
                f"must be less than {limit + 1} characters",
                f"{what} is {len(value)} characters; the limit is {limit}",
            )

    def _max_items(self, items: list[Any], limit: int, pointer: str, what: str) -> None:
        if self.strict and len(items) > limit:
            raise BlockKitError(
                pointer,
                f"must contain no more than {limit} items",
                f"{len(items)} {what}; the limit is {limit}",
            )

    def _list(self, value: Any, pointer: str, what: str, *, min_items: int = 1) -> list[Any]:
        if not isinstance(value, list):
            raise BlockKitError(pointer, "must be an array", f"{what} must be an array")
        if len(value) < min_items:
            raise BlockKitError(
                pointer,
                f"must contain at least {min_items} items",
                f"{what} needs at least {min_items}",
            )
        return value

    def _string(
        self, obj: dict[str, Any], key: str, pointer: str, what: str, *, required: bool = False
    ) -> str | None:
        value = obj.get(key)
        if value is None:
            if required:
                raise BlockKitError(
                    pointer, f"missing required field: {key}", f"{what} is required"
                )
            return None
        if not isinstance(value, str):
            raise BlockKitError(f"{pointer}/{key}", "must be a string", f"{what} must be a string")
        return value

    def text(
        self,
        obj: Any,
        pointer: str,
        what: str,
        *,
        limit: int,
        plain_only: bool = False,
    ) -> None:
        if not isinstance(obj, dict):
            raise BlockKitError(pointer, "must be an object", f"{what} must be a text object")
        allowed = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
        kind = obj.get("type")
        if kind not in allowed:
            raise BlockKitError(
                f"{pointer}/type",
                f"must be one of: {', '.join(allowed)}",
                f"{what} has type {kind!r}; expected {' or '.join(allowed)}",
            )
        value = obj.get("text")
        if not isinstance(value, str):
            raise BlockKitError(pointer, "missing required field: text", f"{what} has no text")
        if not value:
            raise BlockKitError(
                f"{pointer}/text", "must be more than 0 characters", f"{what} is empty"
            )
        self._max_len(value, limit, f"{pointer}/text", what)
        if "emoji" in obj and kind != "plain_text":
            raise BlockKitError(
                f"{pointer}/emoji",
                "emoji is only allowed in plain_text",
                f"{what}: emoji on mrkdwn",
            )

    # ---------------------------------------------------------------- blocks

    def blocks(self, blocks: Any, pointer: str) -> None:
        blocks = self._list(blocks, pointer, "blocks", min_items=0)
        limit = MAX_MESSAGE_BLOCKS if self.surface == "message" else MAX_VIEW_BLOCKS
        where = "message" if self.surface == "message" else "view"
        self._max_items(blocks, limit, pointer, f"blocks in a {where}")
        for index, block in enumerate(blocks):
            self.block(block, f"{pointer}/{index}")

    def block(self, block: Any, pointer: str) -> None:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise BlockKitError(pointer, "missing required field: type", "a block needs a type")
        kind = block["type"]
        block_id = block.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or not block_id:
                raise BlockKitError(
                    f"{pointer}/block_id",
                    "must be more than 0 characters",
                    "block_id must be a non-empty string",
                )
            self._max_len(block_id, MAX_BLOCK_ID, f"{pointer}/block_id", "block_id")
            if block_id in self.block_ids:
                raise BlockKitError(
                    f"{pointer}/block_id",
                    "block_id must be unique",
                    f"duplicate block_id {block_id!r}",
                )
            self.block_ids.add(block_id)
        if kind == "input" and self.surface == "message":
            raise BlockKitError(
                f"{pointer}/type",
                "input blocks are not allowed in messages",
                "input blocks are only allowed in views",
            )
        check = {
            "section": self._section,
            "header": self._header,
            "context": self._context,
            "divider": self._divider,
            "actions": self._actions,
            "rich_text": self._rich_text,
            "image": self._image_block,
            "markdown": self._markdown,
            "input": self._input,
        }.get(kind)
        if check is None:
            raise BlockKitError(
                f"{pointer}/type", f"unsupported block type: {kind}", f"unknown block type {kind!r}"
            )
        check(block, pointer)

    def _section(self, block: dict[str, Any], pointer: str) -> None:
        text = block.get("text")
        fields = block.get("fields")
        if text is None and fields is None:
            raise BlockKitError(
                pointer,
                "must provide either text or fields",
                "a section needs text or fields",
            )
        if text is not None:
            self.text(text, f"{pointer}/text", "section text", limit=MAX_SECTION_TEXT)
        if fields is not None:
            items = self._list(fields, f"{pointer}/fields", "section fields")
            self._max_items(items, MAX_SECTION_FIELDS, f"{pointer}/fields", "section fields")
            for index, item in enumerate(items):
                self.text(
                    item,
                    f"{pointer}/fields/{index}",
                    "section field",
                    limit=MAX_SECTION_FIELD_TEXT,
                )
        if block.get("accessory") is not None:
            self.element(block["accessory"], f"{pointer}/accessory", "section")

    def _header(self, block: dict[str, Any], pointer: str) -> None:
        if block.get("text") is None:
            raise BlockKitError(pointer, "missing required field: text", "a header needs text")
        self.text(
            block["text"], f"{pointer}/text", "header text", limit=MAX_HEADER_TEXT, plain_only=True
        )

    def _context(self, block: dict[str, Any], pointer: str) -> None:
        items = self._list(block.get("elements"), f"{pointer}/elements", "context elements")
        self._max_items(items, MAX_CONTEXT_ELEMENTS, f"{pointer}/elements", "context elements")
        for index, item in enumerate(items):
            item_pointer = f"{pointer}/elements/{index}"
            if isinstance(item, dict) and item.get("type") == "image":
                self._image_element(item, item_pointer)
            else:
                self.text(item, item_pointer, "context text", limit=MAX_SECTION_TEXT)

    def _divider(self, block: dict[str, Any], pointer: str) -> None:
        return None

    def _actions(self, block: dict[str, Any], pointer: str) -> None:
        items = self._list(block.get("elements"), f"{pointer}/elements", "actions elements")
        self._max_items(items, MAX_ACTIONS_ELEMENTS, f"{pointer}/elements", "actions elements")
        for index, item in enumerate(items):
            self.element(item, f"{pointer}/elements/{index}", "actions")

    def _rich_text(self, block: dict[str, Any], pointer: str) -> None:
        self._list(block.get("elements"), f"{pointer}/elements", "rich_text elements", min_items=0)

    def _image_block(self, block: dict[str, Any], pointer: str) -> None:
        self._image_element(block, pointer)
        if block.get("title") is not None:
            self.text(
                block["title"], f"{pointer}/title", "image title", limit=2000, plain_only=True
            )

    def _markdown(self, block: dict[str, Any], pointer: str) -> None:
        text = self._string(block, "text", pointer, "markdown text", required=True) or ""
        if not text:
            raise BlockKitError(
                f"{pointer}/text", "must be more than 0 characters", "markdown text is empty"
            )
        self._max_len(text, 12_000, f"{pointer}/text", "markdown block text")

    def _input(self, block: dict[str, Any], pointer: str) -> None:
        if block.get("label") is None:
            raise BlockKitError(pointer, "missing required field: label", "an input needs a label")
        self.text(block["label"], f"{pointer}/label", "input label", limit=2000, plain_only=True)
        if block.get("hint") is not None:
            self.text(block["hint"], f"{pointer}/hint", "input hint", limit=2000, plain_only=True)
        if block.get("element") is None:
            raise BlockKitError(
                pointer, "missing required field: element", "an input needs an element"
            )
        self.element(block["element"], f"{pointer}/element", "input")

    # ---------------------------------------------------------------- elements

    def element(self, element: Any, pointer: str, place: str) -> None:
        if not isinstance(element, dict) or not isinstance(element.get("type"), str):
            raise BlockKitError(pointer, "missing required field: type", "an element needs a type")
        kind = element["type"]
        if kind not in _ELEMENTS_ALLOWED[place]:
            raise BlockKitError(
                f"{pointer}/type",
                f"element type {kind} is not allowed here",
                f"element {kind!r} is not allowed in a {place} block",
            )
        action_id = element.get("action_id")
        if action_id is not None:
            if not isinstance(action_id, str) or not action_id:
                raise BlockKitError(
                    f"{pointer}/action_id",
                    "must be more than 0 characters",
                    "action_id must be a non-empty string",
                )
            self._max_len(action_id, MAX_ACTION_ID, f"{pointer}/action_id", "action_id")
            if action_id in self.action_ids:
                raise BlockKitError(
                    f"{pointer}/action_id",
                    "action_id must be unique",
                    f"duplicate action_id {action_id!r}",
                )
            self.action_ids.add(action_id)
        if element.get("placeholder") is not None:
            self.text(
                element["placeholder"],
                f"{pointer}/placeholder",
                "placeholder",
                limit=MAX_PLACEHOLDER,
                plain_only=True,
            )
        if element.get("confirm") is not None:
            self._confirm(element["confirm"], f"{pointer}/confirm")
        if kind == "button":
            self._button(element, pointer)
        elif kind in ("checkboxes", "radio_buttons"):
            self._choice(element, pointer, kind)
        elif kind in ("static_select", "multi_static_select"):
            self._static_select(element, pointer)
        elif kind == "overflow":
            options = self._list(element.get("options"), f"{pointer}/options", "overflow options")
            self._max_items(options, MAX_OVERFLOW_OPTIONS, f"{pointer}/options", "overflow options")
            for index, option in enumerate(options):
                self._option(option, f"{pointer}/options/{index}", plain_only=True)
        elif kind == "image":
            self._image_element(element, pointer)

    def _button(self, element: dict[str, Any], pointer: str) -> None:
        if element.get("text") is None:
            raise BlockKitError(pointer, "missing required field: text", "a button needs text")
        self.text(
            element["text"],
            f"{pointer}/text",
            "button text",
            limit=MAX_BUTTON_TEXT,
            plain_only=True,
        )
        value = self._string(element, "value", pointer, "button value")
        if value is not None:
            self._max_len(value, MAX_BUTTON_VALUE, f"{pointer}/value", "button value")
        url = self._string(element, "url", pointer, "button url")
        if url is not None:
            self._max_len(url, MAX_URL, f"{pointer}/url", "button url")
        style = element.get("style")
        if style is not None and style not in ("primary", "danger"):
            raise BlockKitError(
                f"{pointer}/style",
                "must be one of: primary, danger",
                f"button style {style!r}; only 'primary' and 'danger' exist",
            )
        label = self._string(element, "accessibility_label", pointer, "accessibility_label")
        if label is not None:
            self._max_len(label, 75, f"{pointer}/accessibility_label", "accessibility_label")

    def _choice(self, element: dict[str, Any], pointer: str, kind: str) -> None:
        options = self._list(element.get("options"), f"{pointer}/options", f"{kind} options")
        self._max_items(options, MAX_OPTIONS_CHECKBOXES, f"{pointer}/options", f"{kind} options")
        for index, option in enumerate(options):
            self._option(option, f"{pointer}/options/{index}", plain_only=False)
        values = {o.get("value") for o in options}
        initial = element.get("initial_options" if kind == "checkboxes" else "initial_option")
        chosen = initial if isinstance(initial, list) else [initial] if initial else []
        for option in chosen:
            if not isinstance(option, dict) or option.get("value") not in values:
                raise BlockKitError(
                    f"{pointer}/initial_option{'s' if kind == 'checkboxes' else ''}",
                    "must match one of the options",
                    f"{kind}: an initial option is not among the options",
                )

    def _static_select(self, element: dict[str, Any], pointer: str) -> None:
        if element.get("option_groups") is not None:
            groups = self._list(
                element["option_groups"], f"{pointer}/option_groups", "option groups"
            )
            self._max_items(groups, MAX_SELECT_OPTIONS, f"{pointer}/option_groups", "option groups")
            for g_index, group in enumerate(groups):
                group_pointer = f"{pointer}/option_groups/{g_index}"
                if not isinstance(group, dict):
                    raise BlockKitError(group_pointer, "must be an object", "bad option group")
                self.text(
                    group.get("label"),
                    f"{group_pointer}/label",
                    "option group label",
                    limit=MAX_OPTION_TEXT,
                    plain_only=True,
                )
                options = self._list(
                    group.get("options"), f"{group_pointer}/options", "group options"
                )
                self._max_items(
                    options, MAX_SELECT_OPTIONS, f"{group_pointer}/options", "group options"
                )
                for index, option in enumerate(options):
                    self._option(option, f"{group_pointer}/options/{index}", plain_only=True)
            return
        options = self._list(element.get("options"), f"{pointer}/options", "select options")
        self._max_items(options, MAX_SELECT_OPTIONS, f"{pointer}/options", "select options")
        for index, option in enumerate(options):
            self._option(option, f"{pointer}/options/{index}", plain_only=True)

    def _option(self, option: Any, pointer: str, *, plain_only: bool) -> None:
        if not isinstance(option, dict):
            raise BlockKitError(pointer, "must be an object", "an option must be an object")
        self.text(
            option.get("text"),
            f"{pointer}/text",
            "option text",
            limit=MAX_OPTION_TEXT,
            plain_only=plain_only,
        )
        value = self._string(option, "value", pointer, "option value", required=True) or ""
        self._max_len(value, MAX_OPTION_VALUE, f"{pointer}/value", "option value")
        if option.get("description") is not None:
            self.text(
                option["description"],
                f"{pointer}/description",
                "option description",
                limit=MAX_OPTION_TEXT,
                plain_only=plain_only,
            )
        url = self._string(option, "url", pointer, "option url")
        if url is not None:
            self._max_len(url, MAX_URL, f"{pointer}/url", "option url")

    def _confirm(self, confirm: Any, pointer: str) -> None:
        if not isinstance(confirm, dict):
            raise BlockKitError(pointer, "must be an object", "confirm must be an object")
        for key, limit, plain in (
            ("title", 100, True),
            ("text", 300, False),
            ("confirm", 30, True),
            ("deny", 30, True),
        ):
            if confirm.get(key) is None:
                raise BlockKitError(
                    pointer, f"missing required field: {key}", f"confirm needs {key}"
                )
            self.text(
                confirm[key], f"{pointer}/{key}", f"confirm {key}", limit=limit, plain_only=plain
            )
        style = confirm.get("style")
        if style is not None and style not in ("primary", "danger"):
            raise BlockKitError(
                f"{pointer}/style", "must be one of: primary, danger", f"confirm style {style!r}"
            )

    def _image_element(self, element: dict[str, Any], pointer: str) -> None:
        url = self._string(element, "image_url", pointer, "image_url")
        if url is None and element.get("slack_file") is None:
            raise BlockKitError(
                pointer, "missing required field: image_url", "an image needs image_url"
            )
        if url is not None:
            self._max_len(url, MAX_URL, f"{pointer}/image_url", "image_url")
        alt = self._string(element, "alt_text", pointer, "alt_text", required=True) or ""
        self._max_len(alt, 2000, f"{pointer}/alt_text", "alt_text")


def check_blocks(
    blocks: Any,
    *,
    surface: Literal["message", "modal"] = "message",
    strict: bool = True,
    pointer: str = "/blocks",
) -> None:
    """Raise :class:`BlockKitError` unless ``blocks`` is valid Block Kit for ``surface``."""
    _BlockChecker(strict=strict, surface=surface).blocks(blocks, pointer)


def check_view(view: Any, *, strict: bool = True) -> None:
    """Raise :class:`BlockKitError` unless ``view`` is a valid modal for views.open."""
    if not isinstance(view, dict):
        raise BlockKitError("/view", "must be an object", "the view must be a JSON object")
    if view.get("type") != "modal":
        raise BlockKitError(
            "/view/type", "must be one of: modal", f"view type {view.get('type')!r}; expected modal"
        )
    checker = _BlockChecker(strict=strict, surface="modal")
    if view.get("title") is None:
        raise BlockKitError("/view", "missing required field: title", "a modal needs a title")
    for key in ("title", "submit", "close"):
        if view.get(key) is not None:
            checker.text(
                view[key], f"/view/{key}", f"view {key}", limit=MAX_VIEW_TITLE, plain_only=True
            )
    if view.get("blocks") is None:
        raise BlockKitError("/view", "missing required field: blocks", "a modal needs blocks")
    checker.blocks(view["blocks"], "/view/blocks")
    for key, limit in (
        ("callback_id", MAX_CALLBACK_ID),
        ("external_id", MAX_CALLBACK_ID),
        ("private_metadata", MAX_PRIVATE_METADATA),
    ):
        value = view.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise BlockKitError(f"/view/{key}", "must be a string", f"{key} must be a string")
        checker._max_len(value, limit, f"/view/{key}", key)
    has_input = any(isinstance(b, dict) and b.get("type") == "input" for b in view["blocks"])
    if has_input and view.get("submit") is None:
        raise BlockKitError(
            "/view",
            "missing required field: submit",
            "a modal with input blocks needs a submit button",
        )


def _iter_elements(blocks: list[dict[str, Any]]) -> Iterable[tuple[dict[str, Any], dict[str, Any]]]:
    """(block, element) for every interactive element of ``blocks``."""
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "actions":
            for element in block.get("elements") or []:
                if isinstance(element, dict):
                    yield block, element
        for key in ("accessory", "element"):
            element = block.get(key)
            if isinstance(element, dict):
                yield block, element


# --------------------------------------------------------------------------------------------
# Signing
# --------------------------------------------------------------------------------------------


def sign(signing_secret: str, body: bytes | str, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack sends with a request: ``X-Slack-Request-Timestamp`` and
    ``X-Slack-Signature`` (``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``)."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    ts = int(time.time()) if timestamp is None else int(timestamp)
    base = b"v0:" + str(ts).encode("ascii") + b":" + raw
    digest = hmac.new(signing_secret.encode("utf-8"), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={digest}"}


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


Predicate = Callable[[], Any] | Callable[[], Awaitable[Any]]
_Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class FakeSlack:
    """A Slack Web API + Socket Mode server on 127.0.0.1 (random free port). See the module
    docstring."""

    def __init__(
        self,
        bot_token: str = "xoxb-1-fake-bot-token",
        app_token: str = "xapp-1-A0FAKEAPP-1-fake-app-token",
        *,
        team_id: str = "T0FAKE",
        team_domain: str = "fake-workspace",
        bot_user_id: str = "UBOT",
        bot_id: str = "B0FAKEBOT",
        bot_name: str = "approvalbot",
        app_id: str = "A0FAKEAPP",
        verification_token: str = "fake-verification-token",
        strict_limits: bool = True,
        enforce_rate_limits: bool = False,
        rate_limit: tuple[int, float] = (1, 1.0),
        trigger_ttl: float = 3.0,
        hold_seconds: float = 6.0,
        fault_seed: int = 1234,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.team_id = team_id
        self.team_domain = team_domain
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.app_id = app_id
        self.verification_token = verification_token
        self.strict_limits = strict_limits
        self.enforce_rate_limits = enforce_rate_limits
        self.rate_limit = rate_limit
        self.trigger_ttl = trigger_ttl
        self.hold_seconds = hold_seconds

        # what happened
        self.channels: dict[str, _Channel] = {}
        self.users: dict[str, str] = {bot_user_id: bot_name}  # id -> name
        self.messages: dict[tuple[str, str], SlackMessage] = {}
        self.ephemeral_messages: list[Ephemeral] = []
        self.opened_views: list[OpenedView] = []
        self.calls: list[Call] = []
        self.rejected: list[Rejection] = []
        self.faults_injected: list[tuple[str, str]] = []
        self.response_posts: list[ResponsePost] = []
        self.socket_sent: list[dict[str, Any]] = []
        self.socket_acks: list[SocketAck] = []
        self.socket_received: list[Any] = []
        self.socket_connections = 0  # WebSocket connections accepted so far

        # state
        self._faults: list[tuple[str | None, _Fault]] = []
        self._random_faults: dict[str | None, _RandomFaults] = {}
        self._random = random.Random(fault_seed)
        self._ids = random.Random(fault_seed + 1)
        self._last_ts_us = 0
        self._triggers: dict[str, _Trigger] = {}
        self._response_urls: dict[str, _ResponseUrl] = {}
        self._tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._ack_events: dict[str, asyncio.Event] = {}
        self._rate_windows: dict[str, deque[float]] = {}

        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._client: ClientSession | None = None
        self.port = 0

    # ---------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """For ``AsyncWebClient(base_url=...)``."""
        return f"{self.url}/api/"

    async def start(self) -> None:
        self._closing = asyncio.Event()
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/socket", self._handle_socket)
        app.router.add_route("*", "/response/{id}", self._handle_response_url)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        self._closing.set()
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---------------------------------------------------------------- set-up helpers

    def add_user(self, user_id: str, name: str | None = None) -> None:
        self.users[user_id] = name or user_id.lower()

    def add_channel(
        self,
        channel_id: str,
        members: Iterable[str] = (),
        *,
        name: str | None = None,
        bot_member: bool = True,
    ) -> None:
        """Register a channel (unknown channels answer ``channel_not_found``). ``members`` are
        user ids (registered with :meth:`add_user` if new); the bot is a member unless
        ``bot_member=False`` (then posting answers ``not_in_channel``)."""
        member_set = set(members)
        for user in member_set:
            self.users.setdefault(user, user.lower())
        self.channels[channel_id] = _Channel(
            channel_id, name or channel_id.lower(), member_set, bot_member
        )

    def fail_next(
        self,
        method: str | None,
        *,
        status: int | None = None,
        error: str | None = None,
        retry_after: int | None = None,
        timeout: float | None = None,
        apply_then_timeout: bool = False,
        times: int = 1,
    ) -> None:
        """The next ``times`` calls of ``method`` (``None``: any of
        :data:`DEFAULT_FAULT_METHODS`) fail in one way: ``status`` (HTTP 5xx),
        ``error`` (``ok: false`` with that code), ``retry_after`` (429 ``ratelimited``),
        ``timeout`` (held that long, not applied, then 504), or ``apply_then_timeout`` (applied,
        then the answer held ``timeout`` or ``hold_seconds``). With nothing given: HTTP 500."""
        given = [x is not None for x in (status, error, retry_after)]
        if sum(given) + (timeout is not None and not apply_then_timeout) > 1 or (
            apply_then_timeout and any(given)
        ):
            raise ValueError("give one kind of fault")
        if apply_then_timeout:
            fault = _Fault("apply_then_timeout", hold=timeout)
        elif error is not None:
            fault = _Fault("error", status=200, error=error)
        elif retry_after is not None:
            fault = _Fault("429", status=429, retry_after=retry_after)
        elif timeout is not None:
            fault = _Fault("timeout", hold=timeout)
        else:
            fault = _Fault(str(status or 500), status=status or 500)
        for _ in range(times):
            self._faults.append((method, copy.copy(fault)))

    def fail_rate(
        self,
        method: str | None,
        rate: float,
        kinds: Iterable[FaultKind] = ("500", "429", "timeout"),
        seed: int | None = None,
        *,
        retry_after: int = 1,
        hold: float | None = None,
    ) -> None:
        """Fail a share ``rate`` (0–1) of the calls of ``method`` (``None``: any of
        :data:`DEFAULT_FAULT_METHODS`) at random with one of ``kinds``; ``seed`` reseeds the
        RNG. ``rate=0`` turns it off. Holds last ``hold`` (default ``hold_seconds``)."""
        if seed is not None:
            self._random.seed(seed)
        if rate <= 0:
            self._random_faults.pop(method, None)
            return
        self._random_faults[method] = _RandomFaults(rate, tuple(kinds), retry_after, hold)

    def issue_trigger_id(self, user_id: str | None = None) -> str:
        """A fresh trigger id, valid once for ``trigger_ttl`` seconds (as on Slack: 3 s)."""
        trigger_id = (
            f"{self._ids.randrange(10**12, 10**13)}.{self._ids.randrange(10**9, 10**10)}."
            f"{self._ids.getrandbits(128):032x}"
        )
        self._triggers[trigger_id] = _Trigger(user_id, time.monotonic())
        return trigger_id

    def add_user_message(
        self, channel: str, user_id: str, text: str, *, thread_ts: str | None = None
    ) -> SlackMessage:
        """A user writes in a channel (or a thread); the message is stored (the bot can't
        update it) and returned. See :meth:`message_event` for the event Slack would send."""
        ch = self._known_channel(channel)
        parent = None
        if thread_ts is not None:
            parent = self._thread_parent(ch.id, thread_ts)
            if parent is None:
                raise LookupError(f"no message {thread_ts} in {ch.id} to reply to")
        self.users.setdefault(user_id, user_id.lower())
        msg = SlackMessage(
            channel=ch.id,
            ts=self._next_ts(),
            text=text,
            blocks=[_rich_text_block(text, self._block_id(set()))],
            thread_ts=parent.ts if parent else None,
            user=user_id,
        )
        msg.versions.append(MessageVersion(text, msg.blocks, None, "user", time.time()))
        self.messages[msg.key] = msg
        return msg

    # ---------------------------------------------------------------- query helpers

    def messages_in(self, channel: str, thread_ts: str | None = None) -> list[SlackMessage]:
        """Every message now in ``channel`` (parents and replies, bot's and users'), oldest
        first; with ``thread_ts``: that thread, the parent first."""
        msgs = sorted(
            (m for m in self.messages.values() if m.channel == channel),
            key=lambda m: _ts_key(m.ts),
        )
        if thread_ts is None:
            return msgs
        return [m for m in msgs if m.ts == thread_ts or m.thread_ts == thread_ts]

    def message(self, channel: str, ts: str) -> SlackMessage:
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise LookupError(f"no message {ts} in channel {channel}")
        return msg

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        return [c.params for c in self.calls if c.method == method]

    def rejections(self, method: str | None = None, *, error: str | None = None) -> list[Rejection]:
        return [
            r
            for r in self.rejected
            if (method is None or r.method == method) and (error is None or r.error == error)
        ]

    def ephemerals(self, channel: str | None = None) -> list[Ephemeral]:
        return [e for e in self.ephemeral_messages if channel is None or e.channel == channel]

    def views_opened(self) -> list[OpenedView]:
        return list(self.opened_views)

    async def wait_for(
        self, predicate: Predicate, timeout: float = PATIENCE, interval: float = 0.01
    ) -> Any:
        """Poll ``predicate`` (sync or async) until it returns something truthy; return that."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if asyncio.iscoroutine(value) or isinstance(value, Awaitable):
                value = await value
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout} s")
            await asyncio.sleep(interval)

    # ---------------------------------------------------------------- interaction payloads

    def block_actions_payload(
        self,
        user_id: str,
        channel: str,
        message_ts: str,
        action_id: str,
        value: str | None = None,
        *,
        thread_ts: str | None = _UNSET,
        state: dict[str, Any] | None = None,
        block_id: str | None = None,
        action_type: str = "button",
        selected_options: list[Any] | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """What Slack sends when ``user_id`` uses the element ``action_id`` of a message: a
        ``block_actions`` payload with a fresh ``trigger_id`` and a ``response_url`` on the
        fake. Unless ``force``, the message must be stored and carry an element of
        ``action_type`` with that ``action_id``; a button's ``value`` defaults to the button's,
        and ``selected_options`` (option objects or values) must be among the element's."""
        self._known_channel(channel)
        msg = self.messages.get((channel, message_ts))
        element: dict[str, Any] | None = None
        found_block: dict[str, Any] | None = None
        if msg is None and not force:
            raise LookupError(f"no message {message_ts} in channel {channel}")
        if msg is not None:
            for block, el in _iter_elements(msg.blocks or []):
                if el.get("action_id") == action_id:
                    found_block, element = block, el
                    break
        if element is None and not force:
            raise LookupError(
                f"message {message_ts} has no element with action_id {action_id!r}: "
                f"{[e.get('action_id') for e in (msg.elements if msg else [])]}"
            )
        if element is not None and element.get("type") != action_type and not force:
            raise LookupError(
                f"element {action_id!r} is a {element.get('type')!r}, not a {action_type!r}"
            )
        if block_id is None:
            block_id = str((found_block or {}).get("block_id") or self._block_id(set()))
        action: dict[str, Any] = {
            "type": action_type,
            "action_id": action_id,
            "block_id": block_id,
            "action_ts": self._next_ts(),
        }
        if action_type == "button":
            button_text = (element or {}).get("text") or {"type": "plain_text", "text": "Button"}
            action["text"] = dict(button_text)
            button_value = value if value is not None else (element or {}).get("value")
            if button_value is not None:
                action["value"] = button_value
            if element is not None and element.get("style"):
                action["style"] = element["style"]
        else:
            options = self._pick_options(element, selected_options, value, force=force)
            if action_type in ("checkboxes", "multi_static_select"):
                action["selected_options"] = options
            else:
                action["selected_option"] = options[0] if options else None
        thread = msg.thread_ts if (thread_ts is _UNSET and msg is not None) else thread_ts
        if thread is _UNSET:
            thread = None
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        }
        if thread:
            container["thread_ts"] = thread
        response_id = secrets.token_hex(12)
        self._response_urls[response_id] = _ResponseUrl(channel, message_ts, user_id, thread)
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": self._user_json(user_id),
            "api_app_id": self.app_id,
            "token": self.verification_token,
            "container": container,
            "trigger_id": self.issue_trigger_id(user_id),
            "team": {"id": self.team_id, "domain": self.team_domain},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": self.channels[channel].name},
            "state": {"values": copy.deepcopy(state or {})},
            "response_url": f"{self.url}/response/{response_id}",
            "actions": [action],
        }
        if msg is not None:
            payload["message"] = self._message_json(msg, metadata=False)
        return payload

    def view_submission_payload(
        self,
        user_id: str,
        view_callback_id: str,
        private_metadata: str = "",
        values: dict[str, dict[str, Any]] | None = None,
        *,
        view_id: str | None = None,
    ) -> dict[str, Any]:
        """What Slack sends when ``user_id`` submits a modal. ``values`` is
        ``{block_id: {action_id: value}}``; a plain value becomes Slack's
        ``{"type": <the input element's type>, "value": value}``, a dict is used as given. If a
        view with this callback_id (or ``view_id``) was opened, its blocks are used and every
        block_id/action_id of ``values`` must be one of its inputs."""
        opened = next(
            (
                v
                for v in reversed(self.opened_views)
                if (v.id == view_id if view_id else v.callback_id == view_callback_id)
            ),
            None,
        )
        inputs: dict[tuple[str, str], str] = {}
        if opened is not None:
            for block, element in _iter_elements(opened.view.get("blocks") or []):
                if block.get("type") == "input":
                    key = (str(block.get("block_id")), str(element.get("action_id")))
                    inputs[key] = str(element.get("type"))
        state: dict[str, dict[str, Any]] = {}
        for block_id, actions in (values or {}).items():
            for action_id, leaf in actions.items():
                if opened is not None and (block_id, action_id) not in inputs:
                    raise LookupError(
                        f"view {opened.id} has no input {block_id}/{action_id}: {sorted(inputs)}"
                    )
                kind = inputs.get((block_id, action_id), "plain_text_input")
                state.setdefault(block_id, {})[action_id] = (
                    copy.deepcopy(leaf) if isinstance(leaf, dict) else {"type": kind, "value": leaf}
                )
        if opened is not None:
            view = copy.deepcopy(opened.view)
        else:
            new_id = self._new_view_id()
            view = {
                "id": new_id,
                "team_id": self.team_id,
                "type": "modal",
                "blocks": [],
                "title": {"type": "plain_text", "text": "Modal"},
                "close": None,
                "submit": {"type": "plain_text", "text": "Submit"},
                "clear_on_close": False,
                "notify_on_close": False,
                "external_id": "",
                "previous_view_id": None,
                "root_view_id": new_id,
                "app_id": self.app_id,
                "app_installed_team_id": self.team_id,
                "bot_id": self.bot_id,
                "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
            }
        view["callback_id"] = view_callback_id
        view["private_metadata"] = private_metadata
        view["state"] = {"values": state}
        return {
            "type": "view_submission",
            "team": {"id": self.team_id, "domain": self.team_domain},
            "user": self._user_json(user_id),
            "api_app_id": self.app_id,
            "token": self.verification_token,
            "trigger_id": self.issue_trigger_id(user_id),
            "view": view,
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }

    def message_event(
        self,
        user_id: str | None,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        bot_id: str | None = None,
        subtype: str | None = None,
        record: bool = True,
    ) -> dict[str, Any]:
        """The Events API body (``type: event_callback``) Slack sends when a message is posted
        in ``channel``. Unless ``record=False`` a user's message (no ``bot_id``) is stored
        first, so conversations.replies shows it; ``thread_ts`` makes it a thread reply."""
        ch = self._known_channel(channel)
        parent = self._thread_parent(ch.id, thread_ts) if thread_ts else None
        if thread_ts and parent is None:
            raise LookupError(f"no message {thread_ts} in {ch.id} to reply to")
        if record and bot_id is None and user_id is not None and subtype is None:
            stored = self.add_user_message(ch.id, user_id, text, thread_ts=thread_ts)
            ts, blocks = stored.ts, stored.blocks
        else:
            ts = self._next_ts()
            blocks = [_rich_text_block(text, self._block_id(set()))]
        event: dict[str, Any] = {
            "type": "message",
            "text": text,
            "ts": ts,
            "channel": ch.id,
            "event_ts": ts,
            "channel_type": _channel_type(ch.id),
            "team": self.team_id,
        }
        if user_id is not None:
            event["user"] = user_id
        if bot_id is not None:
            event["bot_id"] = bot_id
            event["app_id"] = self.app_id if bot_id == self.bot_id else "A0OTHERAPP"
        else:
            event["client_msg_id"] = str(uuid.UUID(int=self._ids.getrandbits(128), version=4))
            event["blocks"] = blocks
        if subtype is not None:
            event["subtype"] = subtype
        if parent is not None:
            event["thread_ts"] = parent.ts
            event["parent_user_id"] = parent.user
        return {
            "token": self.verification_token,
            "team_id": self.team_id,
            "context_team_id": self.team_id,
            "context_enterprise_id": None,
            "api_app_id": self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": "Ev" + "".join(self._ids.choices(_BLOCK_ID_CHARS.upper(), k=9)),
            "event_time": int(float(ts)),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": "4-" + secrets.token_urlsafe(24),
        }

    def url_verification_body(self, challenge: str) -> dict[str, Any]:
        return {
            "token": self.verification_token,
            "challenge": challenge,
            "type": "url_verification",
        }

    async def post_event(
        self,
        url: str,
        body: dict[str, Any] | bytes | str,
        signing_secret: str,
        *,
        form: bool = False,
        timestamp: int | None = None,
        signature: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 5.0,
    ) -> tuple[int, str]:
        """POST ``body`` to an app's request URL as Slack does, signed with ``signing_secret``
        (``timestamp`` defaults to now; ``signature`` replaces the computed one). A dict is sent
        as JSON, or with ``form=True`` form-encoded as ``payload=<json>`` (block_actions,
        view_submission); bytes/str are sent as they are. Returns (HTTP status, body text)."""
        if isinstance(body, dict):
            raw = (
                urlencode({"payload": json.dumps(body)}).encode("utf-8")
                if form
                else json.dumps(body).encode("utf-8")
            )
        else:
            raw = body.encode("utf-8") if isinstance(body, str) else body
        all_headers = {
            "Content-Type": "application/x-www-form-urlencoded" if form else "application/json",
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            **sign(signing_secret, raw, timestamp),
        }
        if signature is not None:
            all_headers["X-Slack-Signature"] = signature
        all_headers.update(headers or {})
        if self._client is None:
            self._client = ClientSession()
        async with self._client.post(
            url, data=raw, headers=all_headers, timeout=ClientTimeout(total=timeout)
        ) as response:
            return response.status, await response.text()

    # ---------------------------------------------------------------- Socket Mode helpers

    @property
    def socket_open(self) -> int:
        """How many Socket Mode connections are open now."""
        return sum(1 for ws in self._sockets if not ws.closed)

    async def wait_socket_connected(self, timeout: float = 5.0) -> None:
        await self.wait_for(lambda: self.socket_open > 0, timeout)

    async def socket_send(
        self,
        envelope_type: EnvelopeType,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool | None = None,
        retry_attempt: int = 0,
        retry_reason: str = "",
    ) -> str:
        """Push an envelope to the newest open Socket Mode connection; returns its
        envelope_id. ``accepts_response_payload`` defaults as on Slack: true for slash
        commands and for view_submission/block_suggestion interactions."""
        if envelope_type not in ("events_api", "interactive", "slash_commands"):
            raise ValueError(f"unknown envelope type {envelope_type!r}")
        sockets = [ws for ws in self._sockets if not ws.closed]
        if not sockets:
            raise RuntimeError("no Socket Mode connection is open")
        if accepts_response_payload is None:
            accepts_response_payload = envelope_type == "slash_commands" or (
                envelope_type == "interactive"
                and payload.get("type") in ("view_submission", "block_suggestion")
            )
        envelope_id = str(uuid.UUID(int=self._ids.getrandbits(128), version=4))
        envelope: dict[str, Any] = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": envelope_type,
            "accepts_response_payload": accepts_response_payload,
        }
        if envelope_type == "events_api":
            envelope["retry_attempt"] = retry_attempt
            envelope["retry_reason"] = retry_reason
        self._ack_events.setdefault(envelope_id, asyncio.Event())
        self.socket_sent.append(envelope)
        await sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def socket_disconnect(self, reason: str = "refresh_requested") -> None:
        """Send Slack's ``disconnect`` message to every open connection (clients reconnect)."""
        message = {
            "type": "disconnect",
            "reason": reason,
            "debug_info": {"host": "applink-fake-1"},
        }
        for ws in [w for w in self._sockets if not w.closed]:
            await ws.send_str(json.dumps(message))

    async def wait_ack(self, envelope_id: str, timeout: float = 5.0) -> SocketAck:
        """The client's ack of ``envelope_id`` (the first, if it acked more than once)."""
        event = self._ack_events.setdefault(envelope_id, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"no ack for envelope {envelope_id} within {timeout} s") from None
        return next(a for a in self.socket_acks if a.envelope_id == envelope_id)

    # ---------------------------------------------------------------- HTTP: Web API

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        try:
            params, form_token = await _read_params(request)
        except _ApiError as exc:
            return self._reject(method, {}, exc)
        token = _bearer(request) or form_token
        self.calls.append(Call(method, params, token))
        handler = self._methods().get(method)
        if handler is None:
            return self._reject(
                method, params, _ApiError("unknown_method", f"no Web API method {method!r}")
            )
        try:
            self._authorize(method, token)
        except _ApiError as exc:
            return self._reject(method, params, exc)

        fault = self._take_fault(method)
        if fault is not None:
            self.faults_injected.append((method, fault.kind))
            if fault.kind == "timeout":
                await self._hold(fault.hold)
                return self._reject(
                    method,
                    params,
                    _ApiError("request_timeout", "injected timeout (not applied)", status=504),
                )
            if fault.kind == "error":
                return self._reject(method, params, _ApiError(fault.error, "injected error"))
            if fault.kind == "429":
                return self._reject(method, params, _ratelimited(fault.retry_after, "injected"))
            if fault.kind != "apply_then_timeout":
                return self._reject(
                    method,
                    params,
                    _ApiError("internal_error", "injected HTTP error", status=fault.status),
                )
        try:
            result = await handler(params)
        except _ApiError as exc:
            if fault is not None:
                await self._hold(fault.hold)
            return self._reject(method, params, exc)
        if fault is not None:  # apply_then_timeout: it happened, the answer is late
            await self._hold(fault.hold)
        return web.json_response({"ok": True, **result})

    def _reject(self, method: str, params: dict[str, Any], exc: _ApiError) -> web.Response:
        self.rejected.append(Rejection(method, params, exc.status, exc.error, exc.detail))
        body: dict[str, Any] = {"ok": False, "error": exc.error}
        if exc.error == "unknown_method":
            body["req_method"] = method
        if exc.messages:
            body["response_metadata"] = {"messages": exc.messages}
        return web.json_response(body, status=exc.status, headers=exc.headers)

    async def _hold(self, seconds: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                self._closing.wait(), self.hold_seconds if seconds is None else seconds
            )

    def _take_fault(self, method: str) -> _Fault | None:
        for index, (target, fault) in enumerate(self._faults):
            if target == method or (target is None and method in DEFAULT_FAULT_METHODS):
                del self._faults[index]
                return fault
        config = self._random_faults.get(method)
        if config is None and method in DEFAULT_FAULT_METHODS:
            config = self._random_faults.get(None)
        if config is None or self._random.random() >= config.rate:
            return None
        kind = self._random.choice(config.kinds)
        if kind == "error":
            return _Fault("error", status=200, error="internal_error")
        if kind == "429":
            return _Fault("429", status=429, retry_after=config.retry_after)
        if kind in ("timeout", "apply_then_timeout"):
            return _Fault(kind, hold=config.hold)
        return _Fault(kind, status=int(kind))

    def _authorize(self, method: str, token: str | None) -> None:
        if not token:
            raise _ApiError("not_authed", "no token (Authorization header or form token)")
        if method == "apps.connections.open":
            if token == self.app_token:
                return
            if token == self.bot_token:
                raise _ApiError("not_allowed_token_type", "apps.connections.open needs xapp-")
            raise _ApiError("invalid_auth", "unknown token")
        if token == self.bot_token:
            return
        if token == self.app_token:
            raise _ApiError("not_allowed_token_type", f"{method} needs the bot token")
        raise _ApiError("invalid_auth", "unknown token")

    def _methods(self) -> dict[str, _Handler]:
        return {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._post_ephemeral,
            "views.open": self._views_open,
            "conversations.replies": self._conversations_replies,
            "conversations.open": self._conversations_open,
            "apps.connections.open": self._connections_open,
        }

    # ---------------------------------------------------------------- methods

    async def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{self.team_domain}.slack.com/",
            "team": "Fake Workspace",
            "user": self.bot_name,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    async def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        text = _str(params.get("text"))
        blocks = self._blocks_param(params)
        if (
            not text
            and not blocks
            and not _json_param(params, "attachments", "invalid_attachments")
        ):
            raise _ApiError("no_text", "no text, blocks or attachments")
        self._check_text(text)
        if blocks is not None:
            self._check_blocks(blocks)
        metadata = self._metadata_param(params)
        thread_ts: str | None = None
        if params.get("thread_ts") not in (None, ""):
            parent = self._thread_parent(channel.id, _str(params.get("thread_ts")))
            if parent is None:
                raise _ApiError(
                    "thread_not_found", f"thread_ts {params.get('thread_ts')} not in {channel.id}"
                )
            thread_ts = parent.ts
        self._rate_limit(channel.id)
        stored_blocks = _with_block_ids(blocks, self._block_id) if blocks is not None else None
        msg = SlackMessage(
            channel=channel.id,
            ts=self._next_ts(),
            text=text,
            blocks=stored_blocks,
            thread_ts=thread_ts,
            metadata=metadata,
            reply_broadcast=thread_ts is not None and _bool(params.get("reply_broadcast")),
            user=self.bot_user_id,
            bot_id=self.bot_id,
            unfurl_links=_opt_bool(params.get("unfurl_links")),
            unfurl_media=_opt_bool(params.get("unfurl_media")),
        )
        msg.versions.append(
            MessageVersion(
                text, copy.deepcopy(stored_blocks), metadata, "chat.postMessage", time.time()
            )
        )
        self.messages[msg.key] = msg
        return {"channel": channel.id, "ts": msg.ts, "message": self._message_json(msg)}

    async def _chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        ts = _str(params.get("ts"))
        msg = self.messages.get((channel.id, ts))
        if msg is None:
            raise _ApiError("message_not_found", f"no message {ts!r} in {channel.id}")
        if not msg.from_bot or msg.bot_id != self.bot_id:
            raise _ApiError("cant_update_message", f"message {ts} was not posted by the bot")
        has_text = params.get("text") is not None
        blocks = self._blocks_param(params)
        attachments = _json_param(params, "attachments", "invalid_attachments")
        if not has_text and blocks is None and attachments is None:
            raise _ApiError("no_text", "nothing to update")
        text = _str(params.get("text")) if has_text else msg.text
        self._check_text(text)
        if blocks is not None:
            self._check_blocks(blocks)
        metadata = self._metadata_param(params) if params.get("metadata") else msg.metadata
        if blocks is not None:
            msg.blocks = _with_block_ids(blocks, self._block_id) if blocks else None
        msg.text = text
        msg.metadata = metadata
        msg.edited_ts = self._next_ts()
        msg.versions.append(
            MessageVersion(text, copy.deepcopy(msg.blocks), metadata, "chat.update", time.time())
        )
        return {
            "channel": channel.id,
            "ts": msg.ts,
            "text": msg.text,
            "message": self._message_json(msg),
        }

    async def _post_ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        user = _str(params.get("user"))
        if user not in self.users:
            raise _ApiError("user_not_found", f"unknown user {user!r}")
        if user not in channel.members:
            raise _ApiError("user_not_in_channel", f"{user} is not a member of {channel.id}")
        text = _str(params.get("text"))
        blocks = self._blocks_param(params)
        if (
            not text
            and not blocks
            and not _json_param(params, "attachments", "invalid_attachments")
        ):
            raise _ApiError("no_text", "no text, blocks or attachments")
        self._check_text(text)
        if blocks is not None:
            self._check_blocks(blocks)
        thread_ts: str | None = None
        if params.get("thread_ts") not in (None, ""):
            parent = self._thread_parent(channel.id, _str(params.get("thread_ts")))
            if parent is None:
                raise _ApiError("thread_not_found", f"thread_ts not in {channel.id}")
            thread_ts = parent.ts
        ts = self._next_ts()
        self.ephemeral_messages.append(
            Ephemeral(channel.id, user, text, copy.deepcopy(blocks), thread_ts, ts)
        )
        return {"message_ts": ts}

    async def _views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        view = _json_param(params, "view", "invalid_arguments")
        if view is None:
            raise _ApiError(
                "invalid_arguments",
                "no view",
                messages=["[ERROR] missing required field: view"],
            )
        try:
            check_view(view, strict=self.strict_limits)
        except BlockKitError as exc:
            raise _ApiError("invalid_arguments", str(exc), messages=[exc.slack_message]) from None
        trigger_id = _str(params.get("trigger_id") or params.get("interactivity_pointer"))
        if not trigger_id:
            raise _ApiError(
                "invalid_arguments",
                "no trigger_id",
                messages=["[ERROR] missing required field: trigger_id"],
            )
        trigger = self._triggers.get(trigger_id)
        if trigger is None:
            raise _ApiError("invalid_trigger_id", f"trigger_id {trigger_id!r} was never issued")
        if trigger.used:
            raise _ApiError("exchanged_trigger_id", "trigger_id was used already")
        age = time.monotonic() - trigger.created
        if age > self.trigger_ttl:
            raise _ApiError("expired_trigger_id", f"trigger_id is {age:.1f} s old")
        trigger.used = True
        view_id = self._new_view_id()
        answer = {
            "id": view_id,
            "team_id": self.team_id,
            "type": view["type"],
            "blocks": _with_block_ids(view.get("blocks") or [], self._block_id),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
            "title": view["title"],
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "close": view.get("close"),
            "submit": view.get("submit"),
            "previous_view_id": None,
            "root_view_id": view_id,
            "app_id": self.app_id,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }
        self.opened_views.append(OpenedView(view_id, trigger_id, trigger.user_id, answer))
        return {"view": copy.deepcopy(answer)}

    async def _conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params, member_required=False)
        ts = _str(params.get("ts"))
        parent = self._thread_parent(channel.id, ts) if ts else None
        if parent is None:
            raise _ApiError("thread_not_found", f"no thread {ts!r} in {channel.id}")
        thread = self.messages_in(channel.id, parent.ts)
        start = 0
        cursor = _str(params.get("cursor"))
        if cursor:
            try:
                decoded = base64.b64decode(cursor.encode("ascii"), validate=True).decode("ascii")
                prefix, next_ts = decoded.split(":", 1)
                if prefix != "next_ts":
                    raise ValueError(cursor)
                start = next(i for i, m in enumerate(thread) if m.ts == next_ts)
            except (ValueError, StopIteration, UnicodeDecodeError):
                raise _ApiError("invalid_cursor", f"bad cursor {cursor!r}") from None
        limit = _int(params.get("limit"), 1000)
        limit = 1000 if limit <= 0 else min(limit, 1000)
        page = thread[start : start + limit]
        with_metadata = _bool(params.get("include_all_metadata"))
        body: dict[str, Any] = {
            "messages": [self._message_json(m, metadata=with_metadata) for m in page],
            "has_more": start + limit < len(thread),
        }
        if body["has_more"]:
            next_ts = thread[start + limit].ts
            body["response_metadata"] = {
                "next_cursor": base64.b64encode(f"next_ts:{next_ts}".encode()).decode("ascii")
            }
        return body

    async def _conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        users = [u.strip() for u in _str(params.get("users")).split(",") if u.strip()]
        if not users:
            raise _ApiError("users_list_not_supplied", "conversations.open needs users")
        if len(users) > 1:
            raise _ApiError("not_implemented", "the fake opens one-person DMs only")
        user = users[0]
        if user not in self.users:
            raise _ApiError("user_not_found", f"no user {user!r}")
        channel_id = "D" + user[1:]
        if channel_id not in self.channels:
            self.channels[channel_id] = _Channel(channel_id, channel_id.lower(), {user}, True)
        return {"channel": {"id": channel_id, "is_im": True, "user": user}}

    def direct_channel(self, user: str) -> str:
        """The DM channel conversations.open answers for `user`."""
        return "D" + user[1:]

    async def _connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        return {"url": f"ws://127.0.0.1:{self.port}/socket?ticket={ticket}&app_id={self.app_id}"}

    # ---------------------------------------------------------------- checks

    def _channel(self, params: dict[str, Any], *, member_required: bool = True) -> _Channel:
        raw = _str(params.get("channel")).strip()
        if raw.startswith("#"):
            found = next((c for c in self.channels.values() if c.name == raw[1:]), None)
        else:
            found = self.channels.get(raw)
        if found is None:
            raise _ApiError("channel_not_found", f"channel {raw!r} is not registered")
        if member_required and not found.bot_member:
            raise _ApiError("not_in_channel", f"the bot is not in {found.id}")
        return found

    def _known_channel(self, channel: str) -> _Channel:
        found = self.channels.get(channel)
        if found is None:
            raise LookupError(f"channel {channel} not registered (add_channel)")
        return found

    def _thread_parent(self, channel: str, ts: str) -> SlackMessage | None:
        msg = self.messages.get((channel, ts))
        if msg is None:
            return None
        if msg.is_reply and msg.thread_ts is not None:
            return self.messages.get((channel, msg.thread_ts))
        return msg

    def _blocks_param(self, params: dict[str, Any]) -> list[dict[str, Any]] | None:
        blocks = _json_param(params, "blocks", "invalid_blocks_format")
        if blocks is None:
            return None
        if not isinstance(blocks, list):
            raise _ApiError("invalid_blocks_format", "blocks must be a JSON array")
        return blocks

    def _check_blocks(self, blocks: list[dict[str, Any]]) -> None:
        try:
            check_blocks(blocks, surface="message", strict=self.strict_limits)
        except BlockKitError as exc:
            raise _ApiError("invalid_blocks", str(exc), messages=[exc.slack_message]) from None

    def _check_text(self, text: str) -> None:
        if self.strict_limits and len(text) > MAX_MESSAGE_TEXT:
            raise _ApiError(
                "msg_too_long",
                f"text is {len(text)} characters; the limit is {MAX_MESSAGE_TEXT}",
            )

    def _metadata_param(self, params: dict[str, Any]) -> dict[str, Any] | None:
        metadata = _json_param(params, "metadata", "invalid_metadata_format")
        if metadata is None:
            return None
        if (
            not isinstance(metadata, dict)
            or not isinstance(metadata.get("event_type"), str)
            or not metadata["event_type"]
            or not isinstance(metadata.get("event_payload"), dict)
        ):
            raise _ApiError(
                "invalid_metadata_format",
                "metadata needs a string event_type and an object event_payload",
            )
        return copy.deepcopy(metadata)

    def _rate_limit(self, channel: str) -> None:
        if not self.enforce_rate_limits:
            return
        burst, per_seconds = self.rate_limit
        now = time.monotonic()
        window = self._rate_windows.setdefault(channel, deque())
        while window and now - window[0] >= per_seconds:
            window.popleft()
        if len(window) >= burst:
            retry_after = max(1, math.ceil(window[0] + per_seconds - now))
            raise _ratelimited(retry_after, f"over {burst} message(s) per {per_seconds} s")
        window.append(now)

    # ---------------------------------------------------------------- internals

    def _next_ts(self) -> str:
        us = max(int(time.time() * 1_000_000), self._last_ts_us + 1)
        self._last_ts_us = us
        return f"{us // 1_000_000}.{us % 1_000_000:06d}"

    def _block_id(self, taken: set[str]) -> str:
        while True:
            candidate = "".join(self._ids.choices(_BLOCK_ID_CHARS, k=5))
            if candidate not in taken:
                return candidate

    def _new_view_id(self) -> str:
        return "V" + "".join(self._ids.choices(string.ascii_uppercase + string.digits, k=10))

    def _user_json(self, user_id: str) -> dict[str, Any]:
        name = self.users.get(user_id, user_id.lower())
        return {"id": user_id, "username": name, "name": name, "team_id": self.team_id}

    def _message_json(self, msg: SlackMessage, *, metadata: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "message", "ts": msg.ts, "text": msg.text}
        if msg.user is not None:
            data["user"] = msg.user
        if msg.bot_id is not None:
            data["bot_id"] = msg.bot_id
            data["app_id"] = self.app_id
        data["team"] = self.team_id
        if msg.blocks:
            data["blocks"] = copy.deepcopy(msg.blocks)
        if msg.edited_ts is not None:
            data["edited"] = {"user": msg.user, "ts": msg.edited_ts}
        if msg.is_reply:
            data["thread_ts"] = msg.thread_ts
            parent = self.messages.get((msg.channel, msg.thread_ts or ""))
            if parent is not None and parent.user is not None:
                data["parent_user_id"] = parent.user
            if msg.reply_broadcast:
                data["subtype"] = "thread_broadcast"
        else:
            replies = [m for m in self.messages_in(msg.channel, msg.ts) if m.is_reply]
            if replies:
                reply_users = sorted({m.user for m in replies if m.user})
                data.update(
                    {
                        "thread_ts": msg.ts,
                        "reply_count": len(replies),
                        "reply_users_count": len(reply_users),
                        "latest_reply": replies[-1].ts,
                        "reply_users": reply_users,
                        "is_locked": False,
                        "subscribed": False,
                    }
                )
        if metadata and msg.metadata is not None:
            data["metadata"] = copy.deepcopy(msg.metadata)
        return data

    def _pick_options(
        self,
        element: dict[str, Any] | None,
        selected: list[Any] | None,
        value: str | None,
        *,
        force: bool,
    ) -> list[dict[str, Any]]:
        wanted: list[Any] = list(selected) if selected is not None else []
        if not wanted and value is not None:
            wanted = [value]
        available: list[dict[str, Any]] = []
        if element is not None:
            available = list(element.get("options") or [])
            for group in element.get("option_groups") or []:
                available.extend(group.get("options") or [])
        chosen: list[dict[str, Any]] = []
        for item in wanted:
            wanted_value = item.get("value") if isinstance(item, dict) else item
            option = next((o for o in available if o.get("value") == wanted_value), None)
            if option is None:
                if not force:
                    raise LookupError(
                        f"no option {wanted_value!r} in {[o.get('value') for o in available]}"
                    )
                option = (
                    item
                    if isinstance(item, dict)
                    else {"text": {"type": "plain_text", "text": str(item)}, "value": item}
                )
            chosen.append(copy.deepcopy(option))
        return chosen

    # ---------------------------------------------------------------- HTTP: Socket Mode

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid or used ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.socket_connections += 1
        try:
            await ws.send_str(
                json.dumps(
                    {
                        "type": "hello",
                        "num_connections": self.socket_open,
                        "debug_info": {
                            "host": "applink-fake-1",
                            "build_number": 1,
                            "approximate_connection_time": 18060,
                        },
                        "connection_info": {"app_id": self.app_id},
                    }
                )
            )
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    data = json.loads(message.data)
                except ValueError:
                    self.socket_received.append(message.data)
                    continue
                self.socket_received.append(data)
                if isinstance(data, dict) and isinstance(data.get("envelope_id"), str):
                    envelope_id = data["envelope_id"]
                    payload = data.get("payload")
                    self.socket_acks.append(
                        SocketAck(envelope_id, payload if isinstance(payload, dict) else None, data)
                    )
                    self._ack_events.setdefault(envelope_id, asyncio.Event()).set()
        finally:
            with contextlib.suppress(ValueError):
                self._sockets.remove(ws)
        return ws

    # ---------------------------------------------------------------- HTTP: response_url

    async def _handle_response_url(self, request: web.Request) -> web.StreamResponse:
        response_id = request.match_info["id"]
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw.strip() else {}
        except ValueError:
            body = raw.decode("utf-8", "replace")

        def answer(status: int, error: str | None = None) -> web.Response:
            self.response_posts.append(ResponsePost(response_id, body, status, error))
            if error is None:
                return web.json_response({"ok": True})
            return web.json_response({"ok": False, "error": error}, status=status)

        target = self._response_urls.get(response_id)
        if request.method != "POST":
            return answer(405, "method_not_allowed")
        if target is None:
            return answer(404, "expired_url")
        target.uses += 1
        if target.uses > MAX_RESPONSE_URL_USES:
            return answer(404, "used_url")
        if not isinstance(body, dict):
            return answer(400, "invalid_payload")
        blocks = body.get("blocks")
        if blocks is not None:
            try:
                check_blocks(blocks, strict=self.strict_limits)
            except BlockKitError:
                return answer(400, "invalid_blocks")
        text = _str(body.get("text"))
        msg = self.messages.get((target.channel, target.message_ts or ""))
        if _bool(body.get("delete_original")):
            if msg is None:
                return answer(404, "message_not_found")
            del self.messages[msg.key]
            return answer(200)
        if _bool(body.get("replace_original")):
            if msg is None:
                return answer(404, "message_not_found")
            if blocks is not None:
                msg.blocks = _with_block_ids(blocks, self._block_id) if blocks else None
            if body.get("text") is not None:
                msg.text = text
            msg.edited_ts = self._next_ts()
            msg.versions.append(
                MessageVersion(
                    msg.text, copy.deepcopy(msg.blocks), msg.metadata, "response_url", time.time()
                )
            )
            return answer(200)
        if not text and not blocks:
            return answer(400, "no_text")
        thread_ts = _str(body.get("thread_ts")) or target.thread_ts
        if body.get("response_type") == "in_channel":
            stored = _with_block_ids(blocks, self._block_id) if blocks else None
            new = SlackMessage(
                channel=target.channel,
                ts=self._next_ts(),
                text=text,
                blocks=stored,
                thread_ts=thread_ts or None,
                user=self.bot_user_id,
                bot_id=self.bot_id,
            )
            new.versions.append(
                MessageVersion(text, copy.deepcopy(stored), None, "response_url", time.time())
            )
            self.messages[new.key] = new
            return answer(200)
        self.ephemeral_messages.append(
            Ephemeral(
                target.channel,
                target.user_id,
                text,
                copy.deepcopy(blocks),
                thread_ts or None,
                self._next_ts(),
                via="response_url",
            )
        )
        return answer(200)


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------


async def _read_params(request: web.Request) -> tuple[dict[str, Any], str | None]:
    """The call's parameters (query string and body) and the token given as a parameter (only
    honoured from the query string or a form body, as on Slack)."""
    params: dict[str, Any] = dict(request.query)
    token = params.pop("token", None)
    if request.method not in ("POST", "PUT") or not request.body_exists:
        return params, token
    content_type = request.content_type
    if content_type == "application/json":
        raw = await request.read()
        if not raw.strip():
            return params, token
        try:
            body = json.loads(raw)
        except ValueError:
            raise _ApiError("invalid_json", "the JSON body does not parse") from None
        if not isinstance(body, dict):
            raise _ApiError("invalid_json", "the JSON body must be an object")
        body.pop("token", None)  # Slack ignores a token in a JSON body
        params.update(body)
    elif content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        for key, value in form.items():
            if key == "token":
                token = str(value)
            else:
                params[key] = value if isinstance(value, str) else getattr(value, "filename", "")
    elif "Content-Type" not in request.headers:
        raise _ApiError("missing_post_type", "a body without a Content-Type")
    else:
        raise _ApiError("invalid_post_type", f"Content-Type {content_type!r}")
    return params, token


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


def _ratelimited(retry_after: int, detail: str) -> _ApiError:
    return _ApiError(
        "ratelimited",
        f"{detail}: retry after {retry_after} s",
        status=429,
        headers={"Retry-After": str(retry_after)},
    )


def _json_param(params: dict[str, Any], name: str, error: str) -> Any:
    """A parameter that may arrive JSON-encoded (form) or as JSON (JSON body)."""
    value = params.get(name)
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except ValueError:
            raise _ApiError(error, f"{name} is not valid JSON") from None
    return value


def _with_block_ids(
    blocks: list[dict[str, Any]], make_id: Callable[[set[str]], str]
) -> list[dict[str, Any]]:
    """A copy of ``blocks`` in which every block has a block_id (Slack generates missing ones)."""
    result = copy.deepcopy(blocks)
    taken = {b["block_id"] for b in result if isinstance(b, dict) and b.get("block_id")}
    for block in result:
        if isinstance(block, dict) and not block.get("block_id"):
            block["block_id"] = make_id(taken)
            taken.add(block["block_id"])
    return result


def _rich_text_block(text: str, block_id: str) -> dict[str, Any]:
    return {
        "type": "rich_text",
        "block_id": block_id,
        "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}],
    }


def _channel_type(channel_id: str) -> str:
    return {"D": "im", "G": "group"}.get(channel_id[:1], "channel")


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, micros = ts.partition(".")
    return (int(seconds or 0), int(micros or 0))


def _str(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _int(value: Any, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1", "yes")


def _opt_bool(value: Any) -> bool | None:
    return None if value is None else _bool(value)
