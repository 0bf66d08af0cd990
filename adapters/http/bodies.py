"""Request bodies of the API: read within the bound, decoded, parsed once, validated.

* `Content-Encoding`: none or `identity` as is; `gzip` (`x-gzip`) and `deflate` (zlib or raw)
  are decoded here — never more than the body limit, so a small bomb is a 413; anything else is
  `415 unsupported_encoding`; a body that does not decode is `400 invalid_json`. (The app turns
  aiohttp's own decoding off, which fails a bad body with an exception rather than an answer.)
* JSON objects with the same key twice are `400 invalid_json`: which one counts differs from
  parser to parser, so a proxy that checked one and a server that used the other would disagree.
* The rest is the wire model's: `422 invalid_request` naming the field.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from pydantic import BaseModel, ValidationError

from adapters.http.keys import SETTINGS
from bot import errors
from bot.errors import ApprovalError

M = TypeVar("M", bound=BaseModel)

# Codes of this layer's own refusals (candidates for bot.errors).
INVALID_JSON = "invalid_json"
UNSUPPORTED_ENCODING = "unsupported_encoding"

_GZIP = 16 + zlib.MAX_WBITS
_MEMBERS = 64  # gzip members in one body, more is not a client of ours


def too_large(limit: int) -> ApprovalError:
    return ApprovalError(
        errors.PAYLOAD_TOO_LARGE, f"the request body is larger than {limit} bytes", 413
    )


def invalid_json(detail: str) -> ApprovalError:
    return ApprovalError(INVALID_JSON, detail, 400)


def unsupported_encoding() -> ApprovalError:
    return ApprovalError(
        UNSUPPORTED_ENCODING,
        "Content-Encoding: send the body as is, or with gzip or deflate",
        415,
    )


def decode(raw: bytes, encoding: str | None, limit: int) -> bytes:
    """The body as sent before `Content-Encoding`, at most `limit` bytes of it."""
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        return raw
    if name in ("gzip", "x-gzip"):
        wbits = _GZIP
    elif name == "deflate":
        # RFC 9110 says zlib; some clients send raw deflate. The zlib header's low nibble is 8.
        wbits = zlib.MAX_WBITS if raw[:1] and raw[0] & 0x0F == 8 else -zlib.MAX_WBITS
    else:
        raise unsupported_encoding()
    out = bytearray()
    rest, members = raw, 0
    while rest:
        members += 1
        if members > _MEMBERS:
            raise invalid_json(f"the {name} body has too many members")
        inflater = zlib.decompressobj(wbits)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))  # max_length is >= 1 here
        except zlib.error:
            raise invalid_json(f"the body is not valid {name} data") from None
        if len(out) > limit:
            raise too_large(limit)
        if not inflater.eof:
            raise invalid_json(f"the {name} body ends early")
        rest = inflater.unused_data
        if rest and wbits != _GZIP:
            raise invalid_json(f"data after the end of the {name} body")
    return bytes(out)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen.add(key)


class _Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _ignore(_text: str) -> None:
    return None


def check_duplicate_keys(raw: bytes) -> None:
    """400 when any object in the (already well-formed) JSON has a key twice. Numbers are not
    converted: only the keys are looked at."""
    try:
        json.loads(
            raw,
            object_pairs_hook=_no_duplicates,
            parse_int=_ignore,
            parse_float=_ignore,
            parse_constant=_ignore,
        )
    except _Duplicate as duplicate:
        shown = duplicate.key if len(duplicate.key) <= 40 else duplicate.key[:40] + "…"
        raise invalid_json(f"duplicate key in a JSON object: {json.dumps(shown)}") from None
    except (ValueError, RecursionError):
        pass  # the model's parser accepted it: it is JSON whatever this one thinks


def _where(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "body"


def problems(error: ValidationError) -> list[str]:
    found = []
    for item in error.errors(include_url=False, include_input=False):
        message = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
        found.append(f"{_where(tuple(item['loc']))}: {message.removeprefix('Value error, ')}")
    return found


async def read_raw(request: web.Request) -> bytes:
    """The decoded body, within the configured bound."""
    limit = request.app[SETTINGS].server.max_body_bytes
    try:
        raw = await request.read()
    except RequestPayloadError:
        raise invalid_json("the request body could not be read") from None
    return decode(raw, request.headers.get("Content-Encoding"), limit)


async def read_body(request: web.Request, model: type[M]) -> M:
    """The body validated as `model`; an empty body counts as `{}`. Invalid: 422 naming the
    field (`tool_input.options[0]: …`); not decodable or with a key twice: 400."""
    raw = await read_raw(request)
    try:
        if not raw.strip():
            return model.model_validate({})
        body = model.model_validate_json(raw)
    except ValidationError as error:
        found = problems(error)
        raise ApprovalError(
            errors.INVALID_REQUEST, "; ".join(found[:5]), 422, {"problems": found}
        ) from None
    if raw.count(b'"') >= 4:  # a key twice needs two quoted keys
        check_duplicate_keys(raw)
    return body
