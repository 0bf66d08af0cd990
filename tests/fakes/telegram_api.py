"""A fake Telegram Bot API server for tests, strict enough to reject what Telegram rejects.

Point python-telegram-bot at it with ``base_url=fake.base_url``
(``"http://127.0.0.1:PORT/bot"``); requests then arrive as ``POST /bot<TOKEN>/<method>``,
form-encoded (non-string values JSON-dumped) or as a JSON body. Both are accepted, and so are
query-string parameters, as on Telegram.

Implemented methods: getMe, deleteWebhook, setWebhook, getWebhookInfo, getUpdates, sendMessage,
editMessageText, editMessageReplyMarkup, answerCallbackQuery, deleteMessage. Any other method
answers 404 ``Not Found``, as Telegram does.

What it checks, with Telegram's own error texts (400 unless noted):

* ``chat not found`` for a chat not registered with :meth:`FakeTelegram.add_chat`.
* HTML parse mode is parsed the way TDLib's ``parse_html`` does (``td/telegram/MessageEntity.cpp``):
  only Telegram's tags (b, strong, i, em, u, ins, s, strike, del, span class="tg-spoiler",
  tg-spoiler, a href, code, pre, pre>code class="language-x", blockquote [expandable], tg-emoji,
  tg-time); an unknown tag, an unclosed or mismatched tag or a bare ``<`` fails with
  ``can't parse entities: …`` and TDLib's detail (``Unsupported start tag "x" at byte offset N``,
  ``Unmatched end tag at byte offset N, expected "</b>", found "</i>"``, ``Can't find end tag
  corresponding to start tag "b"``…). Entities ``&lt; &gt; &amp; &quot;`` and numeric ones are
  decoded. **Stricter than Telegram:** real Telegram keeps a ``&`` that starts no entity as a
  literal character; here, with ``strict_html_ampersand=True`` (the default), it fails with
  ``can't parse entities: Unsupported HTML entity …``, so an unescaped ``&`` (the sign of a
  missing ``html.escape``) is caught. Pass ``strict_html_ampersand=False`` for Telegram's
  lenient behaviour. Markdown parse modes are accepted without parsing (length counted raw).
* Text length is checked **after entity parsing and trimming** (Telegram strips leading and
  trailing whitespace), so ``&lt;`` counts as one character and tags count as nothing. The unit
  is ``text_length_unit``: ``"utf16"`` (default; UTF-16 code units, the unit Telegram uses for
  entity offsets, so an emoji outside the BMP counts 2: the conservative reading) or ``"chars"``
  (Unicode code points, the "4096 UTF-8 characters" of the MTProto docs). Over 4096:
  ``message is too long`` on send, ``MESSAGE_TOO_LONG`` on edit. Empty: ``message text is empty``.
* Inline keyboards: a button without an action or with empty ``callback_data`` fails with
  ``can't parse InlineKeyboardButton: Text buttons are not allowed in the inline keyboard``;
  without ``text``: ``can't parse InlineKeyboardButton: Can't find field "text"``; empty or blank
  text: ``BUTTON_TEXT_INVALID``; ``callback_data`` over 64 bytes of UTF-8: ``BUTTON_DATA_INVALID``;
  more than 100 buttons: ``reply markup is too long``.
* Edits: unknown message ``message to edit not found``; a message the bot did not send or one
  sent with a reply keyboard / ForceReply ``message can't be edited``; nothing changed
  ``message is not modified: specified new message content and reply markup are exactly the
  same as a current content and reply markup of the message``. As on Telegram, an
  editMessageText without ``reply_markup`` removes the inline keyboard.
* answerCallbackQuery: an unknown, already answered or expired (``callback_query_ttl`` seconds,
  default 15) query fails with ``query is too old and response timeout expired or query ID is
  invalid``; a text over 200 characters with ``MESSAGE_TOO_LONG`` (the query stays open).
* setWebhook: ``secret token contains unallowed characters`` (1–256 of ``A-Za-z0-9_-``); an
  https URL is required except on loopback hosts (so tests can use http://127.0.0.1).
  getUpdates while a webhook is set: 409 ``Conflict: can't use getUpdates method while webhook is
  active; use deleteWebhook to delete the webhook first``; a second concurrent getUpdates ends the
  first with 409 ``Conflict: terminated by other getUpdates request…``.
* Wrong token: 401 ``Unauthorized``.

``strict_limits=False`` turns off the *size* limits (text length, callback_data bytes, answer
length, button count); syntax, chats and edit rules are always checked.

Rate limits (only with ``enforce_rate_limits=True``): counted are sendMessage and, by default,
editMessageText/editMessageReplyMarkup (``rate_limit_edits``); answerCallbackQuery,
deleteMessage, getUpdates and the rest are never counted. Three limits, each answering 429
``Too Many Requests: retry after N`` with ``parameters.retry_after = N`` (N = whole seconds until
a slot frees, at least 1); a refused call consumes nothing:

* per chat: a token bucket of ``per_chat_burst`` (default 3) refilled at ``per_chat_per_second``
  (default 1/s): Telegram tolerates short bursts but about 1 message/s on average;
* per group/supergroup/channel: ``per_group_per_minute`` (default 20) in any sliding 60 s;
* overall: ``global_per_second`` (default 30) in any sliding 1 s.

Faults: :meth:`FakeTelegram.fail_next` and ``fault_rate`` (seeded by ``fault_seed``). Kinds:
``"500"`` (JSON 500 Internal Server Error), ``"502"`` (an nginx-style HTML 502), ``"429"``
(``retry_after``), ``"timeout"`` (the request is held ``timeout_delay`` seconds, default 6, and
never applied, so the client's read timeout fires; a client that waits longer gets a 502) and
``"timeout_after_apply"`` (the call takes effect, then the response is held: the message *was*
sent but the client sees a timeout, as happens on real networks). Held requests end at once on
:meth:`FakeTelegram.stop`, so keep the client's read timeout below ``timeout_delay`` and tests
stay fast. Unless ``methods`` is given, faults hit only :data:`DEFAULT_FAULT_METHODS` (the bot's
message calls), not getMe/getUpdates/deleteWebhook, so startup and polling stay up. Injected
faults are listed in ``faults_injected`` (and the refusals in ``rejected``).

Records for assertions: ``sent`` (a snapshot of every accepted sendMessage), ``messages`` (the
current state of every message, after edits; deleted ones removed), ``edits``, ``deleted``,
``callback_answers``, ``calls`` (every request, as ``(method, params)``), ``rejected``
(``(method, params, status, description)``), ``user_messages``, ``webhook_deliveries``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import math
import random
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple
from urllib.parse import urlsplit

from aiohttp import ClientSession, ClientTimeout, web

__all__ = [
    "DEFAULT_FAULT_METHODS",
    "Call",
    "CallbackAnswer",
    "EditRecord",
    "EntityParseError",
    "FakeTelegram",
    "FaultKind",
    "Rejection",
    "SentMessage",
    "parse_html",
]

FaultKind = Literal["500", "502", "429", "timeout", "timeout_after_apply"]

DEFAULT_FAULT_METHODS: frozenset[str] = frozenset(
    {
        "sendMessage",
        "editMessageText",
        "editMessageReplyMarkup",
        "answerCallbackQuery",
        "deleteMessage",
    }
)

# How long `wait_for` waits for something that should happen: generous, since a loaded
# machine is slow, and a wait that is met returns at once (it bounds failures, not passes).
PATIENCE = 20.0
MAX_TEXT_LENGTH = 4096
MAX_CALLBACK_DATA_BYTES = 64
MAX_CALLBACK_ANSWER_LENGTH = 200
MAX_INLINE_BUTTONS = 100
SECRET_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")

NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are"
    " exactly the same as a current content and reply markup of the message"
)
QUERY_TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid"
TEXT_BUTTONS = (
    "Bad Request: can't parse InlineKeyboardButton: Text buttons are not allowed in the inline"
    " keyboard"
)
_RATE_LIMITED_SENDS = frozenset({"sendMessage"})
_RATE_LIMITED_EDITS = frozenset({"editMessageText", "editMessageReplyMarkup"})
_UPDATE_TYPES_DEFAULT_OFF = frozenset({"chat_member", "message_reaction", "message_reaction_count"})
_UNSET: Any = object()


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass
class SentMessage:
    """A message in a chat. ``text`` is what people see (and what Telegram returns) after
    entity parsing; ``raw_text`` is exactly what was sent (the HTML, for parse_mode HTML)."""

    message_id: int
    chat_id: int
    text: str
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    reply_to_message_id: int | None
    date: int
    raw_text: str = ""
    entities: list[dict[str, Any]] = field(default_factory=list)
    edit_date: int | None = None
    from_bot: bool = True
    from_user: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[int, int]:
        return (self.chat_id, self.message_id)

    @property
    def inline_keyboard(self) -> list[list[dict[str, Any]]]:
        if not self.reply_markup:
            return []
        rows = self.reply_markup.get("inline_keyboard")
        return rows if isinstance(rows, list) else []

    @property
    def buttons(self) -> list[dict[str, Any]]:
        """Every inline button, row after row."""
        return [b for row in self.inline_keyboard for b in row]

    @property
    def callback_data(self) -> list[str]:
        return [b["callback_data"] for b in self.buttons if "callback_data" in b]

    def button(self, text: str) -> dict[str, Any]:
        """The inline button whose text equals or contains ``text``."""
        for b in self.buttons:
            if b.get("text") == text:
                return b
        for b in self.buttons:
            if text in str(b.get("text", "")):
                return b
        raise LookupError(f"no button {text!r} on message {self.key}: {self.buttons}")


@dataclass
class EditRecord:
    method: str
    chat_id: int
    message_id: int
    text: str | None  # visible text after the edit (None for a markup-only edit)
    raw_text: str | None
    parse_mode: str | None
    reply_markup: dict[str, Any] | None
    date: int


@dataclass
class CallbackAnswer:
    callback_query_id: str
    text: str | None
    show_alert: bool
    url: str | None = None
    cache_time: int | None = None


class Call(NamedTuple):
    method: str
    params: dict[str, Any]


class Rejection(NamedTuple):
    method: str
    params: dict[str, Any]
    status: int
    description: str


@dataclass
class _Fault:
    kind: str
    retry_after: int
    methods: frozenset[str] | None


@dataclass
class _CallbackQuery:
    id: str
    chat_id: int
    message_id: int
    user_id: int
    created: float
    answered: bool = False


class _ApiError(Exception):
    def __init__(
        self, status: int, description: str, parameters: dict[str, Any] | None = None
    ) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


def _bad(description: str) -> _ApiError:
    return _ApiError(400, f"Bad Request: {description}")


# --------------------------------------------------------------------------------------------
# HTML parse mode: a port of TDLib's parse_html (td/telegram/MessageEntity.cpp)
# --------------------------------------------------------------------------------------------


class EntityParseError(ValueError):
    """The text is not valid Telegram HTML; str(e) is TDLib's detail after "can't parse
    entities: "."""


_SUPPORTED_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "s",
        "strike",
        "del",
        "u",
        "ins",
        "tg-spoiler",
        "tg-emoji",
        "tg-time",
        "span",
        "pre",
        "code",
        "blockquote",
    }
)
_NAMED_ENTITIES = {b"lt": ord("<"), b"gt": ord(">"), b"amp": ord("&"), b"quot": ord('"')}
_AMP, _LT, _GT, _SLASH, _EQ = ord("&"), ord("<"), ord(">"), ord("/"), ord("=")
_QUOTES = (ord('"'), ord("'"))
_HEX = frozenset(b"0123456789abcdefABCDEF")
_DIGITS = frozenset(b"0123456789")
_ALPHA = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NAME_TOKEN = _ALPHA | _DIGITS | frozenset(b".-")
_SIMPLE_TAG_TYPES = {
    "i": "italic",
    "em": "italic",
    "b": "bold",
    "strong": "bold",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "u": "underline",
    "ins": "underline",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
}


def _is_space(c: int) -> bool:
    # TDLib's is_space: ' ', '\t', '\r', '\n', '\0', '\v'
    return c in (0x20, 0x09, 0x0D, 0x0A, 0x00, 0x0B)


def _decode_html_entity(b: bytes, pos: int) -> tuple[int, int] | None:
    """TDLib's decode_html_entity: (code point, position after it), or None if the '&' at
    ``pos`` starts no supported entity (TDLib then keeps it as a literal character)."""
    n = len(b)

    def at(k: int) -> int:
        return b[k] if k < n else 0

    end = pos + 1
    code = 0
    if at(pos + 1) == ord("#"):
        end += 1
        if at(pos + 2) == ord("x"):
            end += 1
            while at(end) in _HEX:
                code = code * 16 + int(chr(at(end)), 16)
                end += 1
        else:
            while at(end) in _DIGITS:
                code = code * 10 + at(end) - ord("0")
                end += 1
        if code == 0 or code >= 0x10FFFF or end - pos >= 10:
            return None
    else:
        while at(end) in _ALPHA:
            end += 1
        named = _NAMED_ENTITIES.get(b[pos + 1 : end])
        if named is None:
            return None
        code = named
    if at(end) == ord(";"):
        end += 1
    return code, end


def _is_strict_entity(b: bytes, pos: int) -> bool:
    return re.match(rb"&(?:lt|gt|amp|quot|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});", b[pos:]) is not None


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def parse_html(text: str, *, strict_ampersand: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """Parse Telegram HTML like TDLib: returns (plain text, entities with UTF-16 offsets) or
    raises :class:`EntityParseError`. With ``strict_ampersand`` a ``&`` that does not start
    ``&lt; &gt; &amp; &quot; &#N; &#xN;`` is an error (Telegram would keep it literally)."""
    try:
        b = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EntityParseError("Strings must be encoded in UTF-8") from exc
    n = len(b)

    def at(k: int) -> int:
        return b[k] if k < n else 0

    def ascii_lower(raw: bytes) -> str:
        return raw.decode("utf-8", "replace").lower()

    out = bytearray()
    utf16 = 0
    # (tag, argument, utf16 offset of content, byte offset of content in `out`)
    open_tags: list[tuple[str, str, int, int]] = []
    entities: list[dict[str, Any]] = []
    code_languages: dict[int, str] = {}  # id(entity) -> language, for <pre><code class=…>
    decoded_surrogate = False
    i = 0
    while i < n:
        c = b[i]
        if c == _AMP:
            decoded = _decode_html_entity(b, i)
            if decoded is not None:
                if strict_ampersand and not _is_strict_entity(b, i):
                    raise EntityParseError(
                        f"Unsupported HTML entity at byte offset {i} (strict fake: end it with ';')"
                    )
                code, i = decoded
                utf16 += 2 if code > 0xFFFF else 1
                decoded_surrogate |= 0xD800 <= code <= 0xDFFF
                out += chr(code).encode("utf-8", "surrogatepass")
                continue
            if strict_ampersand:
                raise EntityParseError(
                    f"Unsupported HTML entity at byte offset {i} (strict fake: Telegram would"
                    " keep a bare '&' as text; escape it as &amp;)"
                )
        if c != _LT:
            if (c & 0xC0) != 0x80:
                utf16 += 2 if c >= 0xF0 else 1
            out.append(c)
            i += 1
            continue

        begin = i
        i += 1
        if at(i) != _SLASH:
            while not _is_space(at(i)) and at(i) != _GT:
                i += 1
            if at(i) == 0:
                raise EntityParseError(f"Unclosed start tag at byte offset {begin}")
            tag = ascii_lower(b[begin + 1 : i])
            if tag not in _SUPPORTED_TAGS:
                raise EntityParseError(f'Unsupported start tag "{tag}" at byte offset {begin}')
            argument = ""
            while at(i) != _GT:
                while at(i) != 0 and _is_space(at(i)):
                    i += 1
                if at(i) == _GT:
                    break
                attr_begin = i
                while not (_is_space(at(i)) or at(i) in (_EQ, _GT, _SLASH, *_QUOTES)):
                    i += 1
                attr_name = b[attr_begin:i].decode("utf-8", "replace")
                if not attr_name:
                    raise EntityParseError(
                        f'Empty attribute name in the tag "{tag}" at byte offset {begin}'
                    )
                while at(i) != 0 and _is_space(at(i)):
                    i += 1
                if at(i) != _EQ:
                    if at(i) == 0:
                        raise EntityParseError(f'Unclosed start tag "{tag}" at byte offset {begin}')
                    if tag == "blockquote" and attr_name == "expandable":
                        argument = "1"
                    continue
                i += 1
                while at(i) != 0 and _is_space(at(i)):
                    i += 1
                if at(i) == 0:
                    raise EntityParseError(f'Unclosed start tag "{tag}" at byte offset {begin}')
                if at(i) not in _QUOTES:
                    token_begin = i
                    while at(i) in _NAME_TOKEN:
                        i += 1
                    value = ascii_lower(b[token_begin:i])
                    if not _is_space(at(i)) and at(i) != _GT:
                        raise EntityParseError(
                            f"Unexpected end of name token at byte offset {token_begin}"
                        )
                else:
                    quote = at(i)
                    i += 1
                    raw_value = bytearray()
                    while at(i) != quote and at(i) != 0:
                        if at(i) == _AMP:
                            decoded = _decode_html_entity(b, i)
                            if decoded is not None:
                                raw_value += chr(decoded[0]).encode("utf-8", "surrogatepass")
                                i = decoded[1]
                                continue
                        raw_value.append(b[i])
                        i += 1
                    if at(i) == quote:
                        i += 1
                    value = raw_value.decode("utf-8", "replace")
                if at(i) == 0:
                    raise EntityParseError(f"Unclosed start tag at byte offset {begin}")
                if tag == "a" and attr_name == "href":
                    argument = value
                elif tag == "code" and attr_name == "class" and value.startswith("language-"):
                    argument = value[len("language-") :]
                elif tag == "span" and attr_name == "class" and value.startswith("tg-"):
                    argument = value[len("tg-") :]
                elif tag == "tg-emoji" and attr_name == "emoji-id":
                    argument = value
                elif tag == "blockquote" and attr_name == "expandable":
                    argument = "1"
            if tag == "span" and argument != "spoiler":
                raise EntityParseError(
                    f'Tag "span" must have class "tg-spoiler" at byte offset {begin}'
                )
            open_tags.append((tag, argument, utf16, len(out)))
            i += 1  # the '>'
            continue

        # an end tag
        if not open_tags:
            raise EntityParseError(f"Unexpected end tag at byte offset {begin}")
        while not _is_space(at(i)) and at(i) != _GT:
            i += 1
        end_name = ascii_lower(b[begin + 2 : i])
        while _is_space(at(i)) and at(i) != 0:
            i += 1
        if at(i) != _GT:
            raise EntityParseError(f"Unclosed end tag at byte offset {begin}")
        tag, argument, offset, content_begin = open_tags[-1]
        if end_name and end_name != tag:
            raise EntityParseError(
                f'Unmatched end tag at byte offset {begin}, expected "</{tag}>", found'
                f' "</{end_name}>"'
            )
        length = utf16 - offset
        if length > 0:
            previous = entities[-1] if entities else None
            same_span = (
                previous is not None
                and previous["offset"] == offset
                and previous["length"] == length
            )
            if tag in _SIMPLE_TAG_TYPES:
                entities.append(
                    {"type": _SIMPLE_TAG_TYPES[tag], "offset": offset, "length": length}
                )
            elif tag == "tg-emoji":
                if not argument.isdigit():
                    raise EntityParseError("Invalid custom emoji identifier specified")
                entities.append(
                    {
                        "type": "custom_emoji",
                        "offset": offset,
                        "length": length,
                        "custom_emoji_id": argument,
                    }
                )
            elif tag == "a":
                url = argument or out[content_begin:].decode("utf-8", "replace")
                user = re.fullmatch(r"tg://user\?id=(\d+)", url)
                if user:
                    entities.append(
                        {
                            "type": "text_mention",
                            "offset": offset,
                            "length": length,
                            "user": {"id": int(user.group(1)), "is_bot": False, "first_name": ""},
                        }
                    )
                elif url.strip():
                    entities.append(
                        {"type": "text_link", "offset": offset, "length": length, "url": url}
                    )
            elif tag == "pre":
                if (
                    previous is not None
                    and same_span
                    and previous["type"] == "code"
                    and code_languages.get(id(previous))
                ):
                    entities[-1] = {
                        "type": "pre",
                        "offset": offset,
                        "length": length,
                        "language": code_languages[id(previous)],
                    }
                else:
                    entities.append({"type": "pre", "offset": offset, "length": length})
            elif tag == "code":
                if (
                    previous is not None
                    and same_span
                    and previous["type"] == "pre"
                    and "language" not in previous
                    and argument
                ):
                    previous["language"] = argument
                else:
                    entity = {"type": "code", "offset": offset, "length": length}
                    entities.append(entity)
                    if argument:
                        code_languages[id(entity)] = argument
            elif tag == "blockquote":
                entities.append(
                    {
                        "type": "expandable_blockquote" if argument else "blockquote",
                        "offset": offset,
                        "length": length,
                    }
                )
            # tg-time: accepted, no entity (python-telegram-bot 22.8 has no type for it)
        open_tags.pop()
        i += 1  # the '>'

    if open_tags:
        raise EntityParseError(
            f'Can\'t find end tag corresponding to start tag "{open_tags[-1][0]}"'
        )
    if decoded_surrogate:
        raise EntityParseError(
            "Text contains invalid Unicode characters after decoding HTML entities, check for"
            " unmatched surrogate code units"
        )
    try:
        plain = out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EntityParseError("Strings must be encoded in UTF-8") from exc
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return plain, entities


def _trim(text: str, entities: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Telegram strips leading and trailing whitespace; entities move with the text."""
    stripped = text.strip()
    if stripped == text:
        return text, entities
    lead = _utf16_len(text[: len(text) - len(text.lstrip())])
    total = _utf16_len(stripped)
    result = []
    for entity in entities:
        start = max(entity["offset"] - lead, 0)
        end = min(entity["offset"] - lead + entity["length"], total)
        if end > start:
            result.append({**entity, "offset": start, "length": end - start})
    return stripped, result


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


Predicate = Callable[[], Any] | Callable[[], Awaitable[Any]]


class FakeTelegram:
    """A Telegram Bot API server on 127.0.0.1 (random free port). See the module docstring."""

    def __init__(
        self,
        token: str = "123:ABC",
        *,
        strict_limits: bool = True,
        enforce_rate_limits: bool = False,
        strict_html_ampersand: bool = True,
        text_length_unit: Literal["utf16", "chars"] = "utf16",
        privacy_mode: bool = True,
        bot_username: str = "approvalbot_test_bot",
        bot_first_name: str = "ApprovalBot",
        fault_rate: float = 0.0,
        fault_seed: int = 1234,
        fault_kinds: Iterable[FaultKind] = ("500", "429", "timeout"),
        timeout_delay: float = 6.0,
    ) -> None:
        self.token = token
        self.strict_limits = strict_limits
        self.enforce_rate_limits = enforce_rate_limits
        self.strict_html_ampersand = strict_html_ampersand
        self.text_length_unit = text_length_unit
        self.privacy_mode = privacy_mode
        self.bot_user: dict[str, Any] = {
            "id": int(token.split(":", 1)[0]) if token.split(":", 1)[0].isdigit() else 123,
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
        }
        # rate limits (see module docstring)
        self.rate_limit_edits = True
        self.per_chat_per_second = 1.0
        self.per_chat_burst = 3
        self.per_group_per_minute = 20
        self.global_per_second = 30
        # faults
        self.fault_rate = fault_rate
        self.fault_kinds: tuple[str, ...] = tuple(fault_kinds)
        self.fault_methods: frozenset[str] | None = None  # None: DEFAULT_FAULT_METHODS
        self.fault_retry_after = 1
        self.timeout_delay = timeout_delay
        self.callback_query_ttl = 15.0
        self._random = random.Random(fault_seed)
        self._faults: list[_Fault] = []

        # what happened
        self.chats: dict[int, dict[str, Any]] = {}
        self.sent: list[SentMessage] = []
        self.user_messages: list[SentMessage] = []
        self.messages: dict[tuple[int, int], SentMessage] = {}
        self.edits: list[EditRecord] = []
        self.deleted: list[tuple[int, int]] = []
        self.callback_answers: list[CallbackAnswer] = []
        self.calls: list[Call] = []
        self.rejected: list[Rejection] = []
        self.faults_injected: list[tuple[str, str]] = []
        self.webhook_deliveries: list[tuple[int, int]] = []  # (update_id, HTTP status or 0)

        # webhook / updates
        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self.webhook_allowed_updates: list[str] | None = None
        self.allowed_updates: list[str] | None = None
        self._updates: list[dict[str, Any]] = []
        self._next_update_id = 1
        self._updates_changed = asyncio.Event()
        self._poll_generation = 0
        self._callback_queries: dict[str, _CallbackQuery] = {}
        self._next_message_id: dict[int, int] = {}
        self._next_user_message_id = 0

        # rate-limit state
        self._chat_buckets: dict[int, tuple[float, float]] = {}
        self._group_windows: dict[int, deque[float]] = {}
        self._global_window: deque[float] = deque()

        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._client: ClientSession | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0

    # ---------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._closing = asyncio.Event()
        self._updates_changed = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        self._closing.set()
        self._updates_changed.set()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---------------------------------------------------------------- set-up helpers

    def add_chat(
        self,
        chat_id: int,
        type: Literal["private", "group", "supergroup", "channel"] = "group",
        title: str | None = None,
        *,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> None:
        """Register a chat the bot is in (unknown chats answer ``chat not found``)."""
        chat: dict[str, Any] = {"id": chat_id, "type": type}
        if type == "private":
            chat["first_name"] = first_name
            if username:
                chat["username"] = username
        else:
            chat["title"] = title or f"Test {type} {chat_id}"
            if username:
                chat["username"] = username
        self.chats[chat_id] = chat

    def fail_next(
        self,
        n: int,
        *,
        kind: FaultKind,
        retry_after: int = 1,
        methods: set[str] | frozenset[str] | None = None,
    ) -> None:
        """The next ``n`` calls (of ``methods``, default :data:`DEFAULT_FAULT_METHODS`) fail."""
        for _ in range(n):
            self._faults.append(
                _Fault(kind, retry_after, frozenset(methods) if methods is not None else None)
            )

    # ---------------------------------------------------------------- feeding updates

    def push_update(self, update: dict[str, Any]) -> int:
        """Queue an update for getUpdates, or (while a webhook is set) POST it to the webhook.
        An ``update_id`` is assigned if missing; returns it."""
        update = dict(update)
        if "update_id" not in update:
            update["update_id"] = self._next_update_id
        self._next_update_id = max(self._next_update_id, int(update["update_id"]) + 1)
        kind = _update_type(update)
        allowed = self.webhook_allowed_updates if self.webhook_url else self.allowed_updates
        if not _is_allowed(kind, allowed):
            return int(update["update_id"])  # Telegram does not even keep it
        if self.webhook_url:
            task = asyncio.get_running_loop().create_task(self._deliver_webhook(update))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._updates.append(update)
            self._wake_pollers()
        return int(update["update_id"])

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        return list(self._updates)

    def press_button(
        self,
        *,
        chat_id: int,
        message_id: int,
        user_id: int,
        data: str | None = None,
        text: str | None = None,
        first_name: str = "Alice",
        username: str | None = None,
        force: bool = False,
    ) -> int:
        """A user presses an inline button of a stored message (found by ``data`` or by button
        ``text``). Queues the callback_query update and returns its update_id; the callback
        query id is ``str(update_id)``. Unless ``force``, the button must be on the message as it
        is now (a removed keyboard can't be pressed); ``force`` sends arbitrary ``data``."""
        msg = self.messages.get((chat_id, message_id))
        if msg is None:
            raise LookupError(f"no message {(chat_id, message_id)} in the fake")
        if data is None:
            if text is None:
                raise ValueError("give data or text")
            data = msg.button(text).get("callback_data")
            if data is None:
                raise ValueError(f"button {text!r} has no callback_data")
        if not force and data not in msg.callback_data:
            raise LookupError(
                f"message {(chat_id, message_id)} has no button with data {data!r}: "
                f"{msg.callback_data}"
            )
        update_id = self._next_update_id
        query_id = str(update_id)
        self._callback_queries[query_id] = _CallbackQuery(
            query_id, chat_id, message_id, user_id, time.monotonic()
        )
        update = {
            "update_id": update_id,
            "callback_query": {
                "id": query_id,
                "from": _user(user_id, first_name, username),
                "message": self._message_json(msg),
                "chat_instance": str((chat_id * 2654435761) & 0x7FFFFFFFFFFFFFFF),
                "data": data,
            },
        }
        return self.push_update(update)

    def send_user_message(
        self,
        *,
        chat_id: int,
        user_id: int,
        text: str,
        reply_to_message_id: int | None = None,
        first_name: str = "Alice",
        username: str | None = None,
    ) -> int:
        """A user writes ``text`` in a chat, optionally as a reply (e.g. to a ForceReply prompt;
        the replied message is embedded in full). Returns the update_id, or 0 if Telegram would
        not deliver it: in a group with privacy mode on, the bot only gets commands, replies to
        its own messages and mentions of it. The stored message is in ``user_messages``."""
        if chat_id not in self.chats:
            raise LookupError(f"chat {chat_id} not registered (add_chat)")
        replied = None
        if reply_to_message_id is not None:
            replied = self.messages.get((chat_id, reply_to_message_id))
            if replied is None:
                raise LookupError(f"no message {(chat_id, reply_to_message_id)} to reply to")
        msg = SentMessage(
            message_id=self._new_message_id(chat_id),
            chat_id=chat_id,
            text=text,
            parse_mode=None,
            reply_markup=None,
            reply_to_message_id=reply_to_message_id,
            date=int(time.time()),
            raw_text=text,
            entities=_auto_entities(text),
            from_bot=False,
            from_user=_user(user_id, first_name, username),
        )
        self.messages[msg.key] = msg
        self.user_messages.append(msg)
        chat_type = self.chats[chat_id]["type"]
        if self.privacy_mode and chat_type in ("group", "supergroup"):
            to_bot = replied is not None and replied.from_bot
            command = text.startswith("/")
            mention = f"@{self.bot_user['username']}".lower() in text.lower()
            if not (to_bot or command or mention):
                return 0
        return self.push_update({"message": self._message_json(msg)})

    async def post_to_webhook(
        self,
        update: dict[str, Any],
        url: str | None = None,
        secret: str | None = _UNSET,
        *,
        timeout: float = 5.0,
    ) -> int:
        """POST one update to ``url`` (default: the URL set with setWebhook) with the
        ``X-Telegram-Bot-Api-Secret-Token`` header (default: the secret set with setWebhook;
        pass ``None`` to send no header, or a wrong value). Returns the HTTP status."""
        target = url or self.webhook_url
        if not target:
            raise ValueError("no webhook URL: pass url= or call setWebhook first")
        update = dict(update)
        if "update_id" not in update:
            update["update_id"] = self._next_update_id
            self._next_update_id += 1
        token = self.webhook_secret if secret is _UNSET else secret
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["X-Telegram-Bot-Api-Secret-Token"] = token
        if self._client is None:
            self._client = ClientSession()
        async with self._client.post(
            target,
            data=json.dumps(update),
            headers=headers,
            timeout=ClientTimeout(total=timeout),
        ) as response:
            await response.read()
            return response.status

    async def wait_for(
        self,
        predicate: Predicate,
        timeout: float = PATIENCE,
        interval: float = 0.01,
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

    # ---------------------------------------------------------------- query helpers

    def messages_in(self, chat_id: int) -> list[SentMessage]:
        """The bot's messages now in a chat, oldest first."""
        return sorted(
            (m for m in self.messages.values() if m.chat_id == chat_id and m.from_bot),
            key=lambda m: m.message_id,
        )

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        return [c.params for c in self.calls if c.method == method]

    def rejections(self, status: int | None = None) -> list[Rejection]:
        return [r for r in self.rejected if status is None or r.status == status]

    # ---------------------------------------------------------------- HTTP

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        match = re.fullmatch(r"/bot([^/]+)/([A-Za-z]+)", request.path)
        if match is None:
            return _error_response(404, "Not Found")
        token, method_name = match.groups()
        try:
            params = await _read_params(request)
        except _ApiError as exc:
            return _error_response(exc.status, exc.description)
        handler = self._methods().get(method_name.lower())
        method = handler[0] if handler else method_name
        self.calls.append(Call(method, params))
        if token != self.token:
            return self._reject(method, params, _ApiError(401, "Unauthorized"))
        if handler is None:
            return self._reject(method, params, _ApiError(404, "Not Found"))

        fault = self._take_fault(method)
        if fault is not None:
            self.faults_injected.append((method, fault.kind))
            if fault.kind == "timeout":
                await self._hold()
                return self._reject(method, params, _ApiError(502, "Bad Gateway"))
            if fault.kind != "timeout_after_apply":
                return self._reject(method, params, _fault_error(fault))
        try:
            result = await handler[1](params)
        except _ApiError as exc:
            if fault is not None:
                await self._hold()
            return self._reject(method, params, exc)
        if fault is not None:  # timeout_after_apply: it happened, the answer is late
            await self._hold()
        body: dict[str, Any] = {"ok": True, "result": result}
        if method == "setWebhook":
            body["description"] = "Webhook was set" if self.webhook_url else "Webhook was deleted"
        elif method == "deleteWebhook":
            body["description"] = "Webhook was deleted"
        return web.json_response(body)

    def _reject(self, method: str, params: dict[str, Any], exc: _ApiError) -> web.Response:
        self.rejected.append(Rejection(method, params, exc.status, exc.description))
        if exc.status == 502:
            return web.Response(
                status=502,
                text="<html><head><title>502 Bad Gateway</title></head><body><center>"
                "<h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>",
                content_type="text/html",
            )
        return _error_response(exc.status, exc.description, exc.parameters)

    async def _hold(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), self.timeout_delay)

    def _take_fault(self, method: str) -> _Fault | None:
        for index, fault in enumerate(self._faults):
            if method in (fault.methods if fault.methods is not None else DEFAULT_FAULT_METHODS):
                return self._faults.pop(index)
        eligible = self.fault_methods if self.fault_methods is not None else DEFAULT_FAULT_METHODS
        if self.fault_rate > 0 and method in eligible and self._random.random() < self.fault_rate:
            kind = self._random.choice(self.fault_kinds)
            return _Fault(kind, self.fault_retry_after, None)
        return None

    def _methods(
        self,
    ) -> dict[str, tuple[str, Callable[[dict[str, Any]], Awaitable[Any]]]]:
        methods = {
            "getMe": self._get_me,
            "deleteWebhook": self._delete_webhook,
            "setWebhook": self._set_webhook,
            "getWebhookInfo": self._get_webhook_info,
            "getUpdates": self._get_updates,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "editMessageReplyMarkup": self._edit_message_reply_markup,
            "answerCallbackQuery": self._answer_callback_query,
            "deleteMessage": self._delete_message,
        }
        return {name.lower(): (name, fn) for name, fn in methods.items()}

    # ---------------------------------------------------------------- methods

    async def _get_me(self, params: dict[str, Any]) -> Any:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": not self.privacy_mode,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    async def _delete_webhook(self, params: dict[str, Any]) -> Any:
        self.webhook_url = ""
        self.webhook_secret = None
        self.webhook_allowed_updates = None
        if _bool(params.get("drop_pending_updates")):
            self._updates.clear()
        return True

    async def _set_webhook(self, params: dict[str, Any]) -> Any:
        url = _str(params.get("url"))
        secret = _str(params.get("secret_token"))
        if secret and not SECRET_TOKEN_RE.fullmatch(secret):
            if len(secret) > 256:
                raise _bad("secret token is too long")
            raise _bad("secret token contains unallowed characters")
        if url:
            parts = urlsplit(url)
            loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
            if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
                raise _bad("bad webhook: An HTTPS URL must be provided for webhook")
            if not parts.hostname:
                raise _bad("bad webhook: Failed to resolve host: Name or service not known")
        if _bool(params.get("drop_pending_updates")):
            self._updates.clear()
        self.webhook_url = url
        self.webhook_secret = secret or None
        allowed = _json_field(params, "allowed_updates", "allowed updates")
        self.webhook_allowed_updates = list(allowed) if isinstance(allowed, list) else None
        if url:
            self._wake_pollers()
        return True

    async def _get_webhook_info(self, params: dict[str, Any]) -> Any:
        info: dict[str, Any] = {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": 0 if self.webhook_url else len(self._updates),
        }
        if self.webhook_url:
            info["max_connections"] = 40
            if self.webhook_allowed_updates is not None:
                info["allowed_updates"] = self.webhook_allowed_updates
        return info

    async def _get_updates(self, params: dict[str, Any]) -> Any:
        if self.webhook_url:
            raise _ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use"
                " deleteWebhook to delete the webhook first",
            )
        offset = _int(params.get("offset"), 0)
        limit = min(max(_int(params.get("limit"), 100), 1), 100)
        timeout = max(_float(params.get("timeout"), 0.0), 0.0)
        allowed = _json_field(params, "allowed_updates", "allowed updates")
        if isinstance(allowed, list):
            self.allowed_updates = list(allowed)
            self._updates = [
                u for u in self._updates if _is_allowed(_update_type(u), self.allowed_updates)
            ]
        if offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        elif offset < 0:
            self._updates = self._updates[offset:]
        self._poll_generation += 1
        generation = self._poll_generation
        self._wake_pollers()  # a newer getUpdates ends an older one (409 below)
        deadline = time.monotonic() + timeout
        while True:
            changed = self._updates_changed
            if generation != self._poll_generation:
                raise _ApiError(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one"
                    " bot instance is running",
                )
            if self._updates or self._closing.is_set() or self.webhook_url:
                return [copy.deepcopy(u) for u in self._updates[:limit]]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)

    async def _send_message(self, params: dict[str, Any]) -> Any:
        chat_id = self._chat_id(params)
        if "text" not in params or _str(params.get("text")) == "":
            raise _bad("message text is empty")
        markup = self._read_markup(params, inline_only=False)
        chat = self._chat(chat_id)
        reply_to = self._reply_target(params, chat_id)
        self._check_markup_limits(markup)
        raw = _str(params.get("text"))
        parse_mode = _str(params.get("parse_mode")) or None
        text, entities = self._parse_text(raw, parse_mode, params, too_long="message is too long")
        self._rate_limit("sendMessage", chat)
        msg = SentMessage(
            message_id=self._new_message_id(chat_id),
            chat_id=chat_id,
            text=text,
            parse_mode=parse_mode,
            reply_markup=markup,
            reply_to_message_id=reply_to,
            date=int(time.time()),
            raw_text=raw,
            entities=entities,
            from_bot=True,
            from_user=dict(self.bot_user),
        )
        self.messages[msg.key] = msg
        self.sent.append(copy.deepcopy(msg))
        return self._message_json(msg)

    async def _edit_message_text(self, params: dict[str, Any]) -> Any:
        msg, chat = self._editable(params)
        if "text" not in params or _str(params.get("text")) == "":
            raise _bad("message text is empty")
        markup = self._read_markup(params, inline_only=True)
        self._check_markup_limits(markup)
        raw = _str(params.get("text"))
        parse_mode = _str(params.get("parse_mode")) or None
        text, entities = self._parse_text(raw, parse_mode, params, too_long="MESSAGE_TOO_LONG")
        if (
            text == msg.text
            and entities == msg.entities
            and _inline(markup) == _inline(msg.reply_markup)
        ):
            raise _bad(NOT_MODIFIED[len("Bad Request: ") :])
        self._rate_limit("editMessageText", chat)
        msg.text, msg.entities, msg.raw_text, msg.parse_mode = text, entities, raw, parse_mode
        msg.reply_markup = markup
        msg.edit_date = int(time.time())
        self.edits.append(
            EditRecord(
                "editMessageText",
                msg.chat_id,
                msg.message_id,
                text,
                raw,
                parse_mode,
                copy.deepcopy(markup),
                msg.edit_date,
            )
        )
        return self._message_json(msg)

    async def _edit_message_reply_markup(self, params: dict[str, Any]) -> Any:
        msg, chat = self._editable(params)
        markup = self._read_markup(params, inline_only=True)
        self._check_markup_limits(markup)
        if _inline(markup) == _inline(msg.reply_markup):
            raise _bad(NOT_MODIFIED[len("Bad Request: ") :])
        self._rate_limit("editMessageReplyMarkup", chat)
        msg.reply_markup = markup
        msg.edit_date = int(time.time())
        self.edits.append(
            EditRecord(
                "editMessageReplyMarkup",
                msg.chat_id,
                msg.message_id,
                None,
                None,
                None,
                copy.deepcopy(markup),
                msg.edit_date,
            )
        )
        return self._message_json(msg)

    async def _answer_callback_query(self, params: dict[str, Any]) -> Any:
        query_id = _str(params.get("callback_query_id"))
        query = self._callback_queries.get(query_id)
        if (
            query is None
            or query.answered
            or time.monotonic() - query.created > self.callback_query_ttl
        ):
            raise _ApiError(400, QUERY_TOO_OLD)
        text = _str(params.get("text")) if params.get("text") is not None else None
        if (
            text is not None
            and self.strict_limits
            and self._length(text) > MAX_CALLBACK_ANSWER_LENGTH
        ):
            raise _bad("MESSAGE_TOO_LONG")
        query.answered = True
        cache_time = params.get("cache_time")
        self.callback_answers.append(
            CallbackAnswer(
                callback_query_id=query_id,
                text=text,
                show_alert=_bool(params.get("show_alert")),
                url=_str(params.get("url")) or None,
                cache_time=_int(cache_time, 0) if cache_time is not None else None,
            )
        )
        return True

    async def _delete_message(self, params: dict[str, Any]) -> Any:
        chat_id = self._chat_id(params)
        message_id = _int(params.get("message_id"), 0)
        if not message_id:
            raise _bad("message identifier is not specified")
        self._chat(chat_id)
        if (chat_id, message_id) not in self.messages:
            raise _bad("message to delete not found")
        del self.messages[(chat_id, message_id)]
        self.deleted.append((chat_id, message_id))
        return True

    # ---------------------------------------------------------------- checks

    def _chat_id(self, params: dict[str, Any]) -> int:
        raw = params.get("chat_id")
        if raw is None or _str(raw).strip() == "":
            raise _bad("chat_id is empty")
        try:
            return int(_str(raw))
        except ValueError:
            raise _bad("chat not found") from None  # "@username" chats are not modelled

    def _chat(self, chat_id: int) -> dict[str, Any]:
        chat = self.chats.get(chat_id)
        if chat is None:
            raise _bad("chat not found")
        return chat

    def _editable(self, params: dict[str, Any]) -> tuple[SentMessage, dict[str, Any]]:
        if params.get("inline_message_id") is not None:
            raise _bad("MESSAGE_ID_INVALID")  # inline messages are not modelled
        chat_id = self._chat_id(params)
        message_id = _int(params.get("message_id"), 0)
        if not message_id:
            raise _bad("message identifier is not specified")
        chat = self._chat(chat_id)
        msg = self.messages.get((chat_id, message_id))
        if msg is None:
            raise _bad("message to edit not found")
        if not msg.from_bot or (msg.reply_markup and "inline_keyboard" not in msg.reply_markup):
            raise _bad("message can't be edited")
        return msg, chat

    def _reply_target(self, params: dict[str, Any], chat_id: int) -> int | None:
        reply = _json_field(params, "reply_parameters", "reply parameters")
        message_id: int | None = None
        allow_missing = _bool(params.get("allow_sending_without_reply"))
        if isinstance(reply, dict):
            message_id = _int(reply.get("message_id"), 0) or None
            allow_missing = allow_missing or bool(reply.get("allow_sending_without_reply"))
            if reply.get("chat_id") not in (None, chat_id, str(chat_id)):
                raise _bad("message to be replied not found")
        elif params.get("reply_to_message_id") is not None:
            message_id = _int(params.get("reply_to_message_id"), 0) or None
        if message_id is None:
            return None
        if (chat_id, message_id) not in self.messages:
            if allow_missing:
                return None
            raise _bad("message to be replied not found")
        return message_id

    def _read_markup(self, params: dict[str, Any], *, inline_only: bool) -> dict[str, Any] | None:
        if params.get("reply_markup") in (None, ""):
            return None
        markup = _json_field(params, "reply_markup", "reply keyboard markup")
        if not isinstance(markup, dict):
            raise _bad("can't parse reply keyboard markup JSON object")
        if "inline_keyboard" in markup:
            rows = markup["inline_keyboard"]
            if not isinstance(rows, list):
                raise _bad('Field "inline_keyboard" must be of type Array')
            for row in rows:
                if not isinstance(row, list):
                    raise _bad('Field "inline_keyboard" must be of type Array of Arrays')
                for button in row:
                    if not isinstance(button, dict):
                        raise _bad("can't parse InlineKeyboardButton: expected an Object")
                    if "text" not in button:
                        raise _bad("can't parse InlineKeyboardButton: Can't find field \"text\"")
                    actions = [k for k in button if k not in ("text", "callback_data")]
                    has_data = button.get("callback_data") not in (None, "")
                    if not has_data and not actions:
                        raise _ApiError(400, TEXT_BUTTONS)
            return {"inline_keyboard": rows}
        if inline_only:
            raise _bad("inline keyboard expected")  # not verified against Telegram
        if not any(k in markup for k in ("keyboard", "remove_keyboard", "force_reply")):
            raise _bad("can't parse reply keyboard markup JSON object")
        return markup

    def _check_markup_limits(self, markup: dict[str, Any] | None) -> None:
        rows = (markup or {}).get("inline_keyboard") or []
        buttons = [b for row in rows for b in row]
        for button in buttons:
            if not str(button.get("text", "")).strip():
                raise _bad("BUTTON_TEXT_INVALID")
        if not self.strict_limits:
            return
        for button in buttons:
            data = button.get("callback_data")
            if data is not None and len(str(data).encode("utf-8")) > MAX_CALLBACK_DATA_BYTES:
                raise _bad("BUTTON_DATA_INVALID")
        if len(buttons) > MAX_INLINE_BUTTONS:
            raise _bad("reply markup is too long")

    def _parse_text(
        self, raw: str, parse_mode: str | None, params: dict[str, Any], *, too_long: str
    ) -> tuple[str, list[dict[str, Any]]]:
        mode = (parse_mode or "").lower()
        if mode == "html":
            try:
                text, entities = parse_html(raw, strict_ampersand=self.strict_html_ampersand)
            except EntityParseError as exc:
                raise _bad(f"can't parse entities: {exc}") from None
        elif mode in ("", "markdown", "markdownv2"):
            text = raw  # Markdown is not parsed here: length is counted on the raw text
            given = _json_field(params, "entities", "message entities") if not mode else None
            entities = list(given) if isinstance(given, list) else []
        else:
            raise _bad("unsupported parse_mode")
        text, entities = _trim(text, entities)
        if not text:
            raise _bad("message text is empty")
        if self.strict_limits and self._length(text) > MAX_TEXT_LENGTH:
            raise _bad(too_long)
        return text, entities

    def _length(self, text: str) -> int:
        return _utf16_len(text) if self.text_length_unit == "utf16" else len(text)

    def _rate_limit(self, method: str, chat: dict[str, Any]) -> None:
        if not self.enforce_rate_limits:
            return
        if method not in _RATE_LIMITED_SENDS and not (
            self.rate_limit_edits and method in _RATE_LIMITED_EDITS
        ):
            return
        now = time.monotonic()
        chat_id = int(chat["id"])
        waits: list[float] = []
        # overall, sliding 1 s
        while self._global_window and now - self._global_window[0] >= 1.0:
            self._global_window.popleft()
        if len(self._global_window) >= self.global_per_second:
            waits.append(self._global_window[0] + 1.0 - now)
        # per group, sliding 60 s
        is_group = chat["type"] in ("group", "supergroup", "channel")
        window = self._group_windows.setdefault(chat_id, deque())
        while window and now - window[0] >= 60.0:
            window.popleft()
        if is_group and len(window) >= self.per_group_per_minute:
            waits.append(window[0] + 60.0 - now)
        # per chat, token bucket
        tokens, last = self._chat_buckets.get(chat_id, (float(self.per_chat_burst), now))
        tokens = min(float(self.per_chat_burst), tokens + (now - last) * self.per_chat_per_second)
        if tokens < 1.0:
            waits.append((1.0 - tokens) / self.per_chat_per_second)
        if waits:
            self._chat_buckets[chat_id] = (tokens, now)
            retry_after = max(1, math.ceil(max(waits)))
            raise _ApiError(
                429,
                f"Too Many Requests: retry after {retry_after}",
                {"retry_after": retry_after},
            )
        self._chat_buckets[chat_id] = (tokens - 1.0, now)
        self._global_window.append(now)
        if is_group:
            window.append(now)

    # ---------------------------------------------------------------- internals

    def _new_message_id(self, chat_id: int) -> int:
        self._next_message_id[chat_id] = self._next_message_id.get(chat_id, 0) + 1
        return self._next_message_id[chat_id]

    def _message_json(self, msg: SentMessage, *, nested: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "message_id": msg.message_id,
            "date": msg.date,
            "chat": dict(self.chats[msg.chat_id]),
            "from": dict(msg.from_user or self.bot_user),
            "text": msg.text,
        }
        if msg.entities:
            data["entities"] = copy.deepcopy(msg.entities)
        if msg.edit_date:
            data["edit_date"] = msg.edit_date
        if msg.reply_markup and "inline_keyboard" in msg.reply_markup:
            data["reply_markup"] = copy.deepcopy(msg.reply_markup)
        if not nested and msg.reply_to_message_id is not None:
            replied = self.messages.get((msg.chat_id, msg.reply_to_message_id))
            if replied is not None:
                data["reply_to_message"] = self._message_json(replied, nested=True)
        return data

    def _wake_pollers(self) -> None:
        event, self._updates_changed = self._updates_changed, asyncio.Event()
        event.set()

    async def _deliver_webhook(self, update: dict[str, Any]) -> None:
        update_id = int(update["update_id"])
        for attempt in range(3):
            try:
                status = await self.post_to_webhook(update)
            except Exception:  # connection refused, timeout…: Telegram retries later
                status = 0
            self.webhook_deliveries.append((update_id, status))
            if 200 <= status < 300:
                return
            await asyncio.sleep(0.05 * (attempt + 1))


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------


async def _read_params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.method not in ("POST", "PUT"):
        return params
    content_type = request.content_type
    if content_type == "application/json":
        raw = await request.read()
        if raw.strip():
            try:
                body = json.loads(raw)
            except ValueError:
                raise _bad("can't parse JSON encoded request parameters") from None
            if not isinstance(body, dict):
                raise _bad("can't parse JSON encoded request parameters")
            params.update(body)
    elif content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        for key, value in form.items():
            params[key] = value if isinstance(value, str) else getattr(value, "filename", "")
    return params


def _error_response(
    status: int, description: str, parameters: dict[str, Any] | None = None
) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)


def _fault_error(fault: _Fault) -> _ApiError:
    if fault.kind == "429":
        return _ApiError(
            429,
            f"Too Many Requests: retry after {fault.retry_after}",
            {"retry_after": fault.retry_after},
        )
    if fault.kind == "502":
        return _ApiError(502, "Bad Gateway")
    return _ApiError(500, "Internal Server Error")


def _str(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _int(value: Any, default: int) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    match = re.match(r"\s*(-?\d+)", str(value))
    return int(match.group(1)) if match else default


def _float(value: Any, default: float) -> float:
    if value is None or value == "":
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1", "yes")


def _json_field(params: dict[str, Any], name: str, what: str) -> Any:
    value = params.get(name)
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except ValueError:
            raise _bad(f"can't parse {what} JSON object") from None
    return value


def _inline(markup: dict[str, Any] | None) -> Any:
    if not markup:
        return None
    rows = markup.get("inline_keyboard")
    return json.dumps(rows, sort_keys=True) if rows else None


def _user(user_id: int, first_name: str, username: str | None) -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": user_id,
        "is_bot": False,
        "first_name": first_name,
        "language_code": "en",
    }
    if username:
        user["username"] = username
    return user


def _auto_entities(text: str) -> list[dict[str, Any]]:
    """The bot_command entity Telegram adds to a message starting with a command."""
    match = re.match(r"/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?", text)
    if not match:
        return []
    return [{"type": "bot_command", "offset": 0, "length": _utf16_len(match.group(0))}]


def _update_type(update: dict[str, Any]) -> str:
    return next((k for k in update if k != "update_id"), "")


def _is_allowed(kind: str, allowed: list[str] | None) -> bool:
    if not allowed:  # empty or unset: everything but the opt-in types
        return kind not in _UPDATE_TYPES_DEFAULT_OFF
    return kind in allowed
