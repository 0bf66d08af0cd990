"""What identifiers in a URL may contain, checked before anything reaches the store.

Workspace ids are names (`admin workspace add`: lowercase letters, digits, `-` and `_`, at most
63); runs and executors get `new_id` ids (a prefix, `_`, hex; their columns hold 40); task keys
follow the core's rule (`bot.decisions.KEY_PATTERN`). An identifier outside its alphabet cannot
name anything, so it is answered as missing (404) — or, for a filter, as malformed (422) —
without a query: PostgreSQL refuses a NUL in a text parameter with an error, not a miss.

The same patterns are the JSON-schema `pattern` of each path parameter in `/openapi.json`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from bot import errors
from bot.decisions import KEY_PATTERN
from bot.errors import ApprovalError


def _anchored(body: str) -> str:
    return f"^{body}$"


def _body(pattern: str) -> str:
    return pattern.removeprefix("^").removesuffix("$")


WORKSPACE = _anchored("[a-z0-9][a-z0-9_-]{0,62}")  # bot.admin's rule for workspace names
RECORD = _anchored("[A-Za-z0-9_-]{1,40}")  # run_…, exe_…
RUN_FILTER = _anchored("[A-Za-z0-9_-]{0,40}")  # `?run_id=`: empty is no filter
KEY = _anchored(_body(KEY_PATTERN.pattern))

# JSON-schema patterns (ECMA-262: `$` is the end of the text), by path parameter name.
PATTERNS: dict[str, str] = {
    "ws": WORKSPACE, "run": RECORD, "key": KEY, "executor": RECORD, "rule": RECORD,
}  # fmt: skip
# Python's `$` also matches before a final newline: check with fullmatch on the bare body.
_COMPILED = {name: re.compile(_body(pattern)) for name, pattern in PATTERNS.items()}
_MISSING = {
    "ws": "workspace", "run": "run", "key": "task", "executor": "executor", "rule": "learned rule",
}  # fmt: skip


def fits(name: str, value: str) -> bool:
    """Whether `value` could be an identifier of kind `name` (a path parameter's name)."""
    compiled = _COMPILED.get(name)
    return compiled is None or compiled.fullmatch(value) is not None


def bad_parameter(match_info: Mapping[str, str]) -> str | None:
    """The first path parameter that cannot name anything, or None."""
    for name, value in match_info.items():
        if not fits(name, value):
            return name
    return None


def not_found(name: str) -> ApprovalError:
    return ApprovalError(errors.NOT_FOUND, f"{_MISSING.get(name, name)} not found", 404)


def check_path(match_info: Mapping[str, str]) -> None:
    """404 for a path naming what cannot exist (the same answer a missing one gets)."""
    bad = bad_parameter(match_info)
    if bad is not None:
        raise not_found(bad)


def run_filter(value: str | None) -> str | None:
    """A `?run_id=` filter: absent or empty means none; malformed is a 422."""
    if not value:
        return None
    if not fits("run", value):
        raise ApprovalError(errors.INVALID_REQUEST, "run_id: not a run id", 422)
    return value


# The decision log's ids are 32-bit integers on PostgreSQL (its `id` column is INTEGER): a
# larger cursor would make the query fail rather than find nothing.
LOG_ID_MAX = 2**31 - 1


def log_id(raw: str) -> int | None:
    """A log entry id from a query value (`?after=`, the run page's `?before=`), or None when
    it is not a whole number from 0 to LOG_ID_MAX in ASCII digits."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 10:
        return None
    value = int(raw)
    return value if value <= LOG_ID_MAX else None


# RFC 6750 b64token: what a bearer (or resolution) token may be made of. Ours are a prefix and
# URL-safe base64 or hex; anything else (non-ASCII, control bytes) cannot be one.
_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")
TOKEN_MAX = 200


def token_shaped(token: str) -> bool:
    return len(token) <= TOKEN_MAX and _TOKEN.fullmatch(token) is not None
