"""Secrets out of chat messages, and long text cut to fit.

People read decisions in group chats, on phones, in notification previews; a token pasted into a
tool call must not travel there. Masking recognises common shapes (API tokens, bearer headers,
password assignments, private key blocks, credentials in URLs) and keeps just enough of each
(the key name, a recognisable prefix) for the reader to know what was there. It errs on the
side of masking: a false positive costs a few characters of context, a miss leaks a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "****"

# Keys whose values are secrets, in JSON objects and in `key=value` text.
_SECRET_KEY = (
    r"(?:password|passwd|passphrase|pwd|secret|client_secret|token|access_token|refresh_token"
    r"|auth_token|api_key|apikey|api-key|private_key|access_key|secret_key|aws_secret_access_key"
    r"|credentials?|session_key|signing_secret)"
)
_SECRET_KEY_RE = re.compile(rf"^(?:[\w.-]*[_.-])?{_SECRET_KEY}$", re.IGNORECASE)

_PEM = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*)-----.*?(?:-----END \1-----|\Z)", re.DOTALL
)
_JSON_PAIR = re.compile(
    rf'("(?:[\w.-]*[_.-])?{_SECRET_KEY}"\s*:\s*)"(?:[^"\\]|\\.)*"', re.IGNORECASE
)
# key=value / key: value in shell lines, env files, query strings, YAML. The value runs to
# whitespace or a separator; quoted values are taken whole.
_ASSIGNMENT = re.compile(
    rf"(\b(?:[\w-]*[_-])?{_SECRET_KEY}\b\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s&;,'\"]+)",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"\b([a-z][a-z0-9+.-]*://)([^\s/:@]+):([^\s/@]+)@", re.IGNORECASE)
_AUTH_HEADER = re.compile(r"\b(Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_CLI_FLAG = re.compile(
    r"(--(?:password|passwd|token|secret|api-key|apikey|access-key|secret-key)(?:=|\s+))"
    r"(\"[^\"]*\"|'[^']*'|\S+)",
    re.IGNORECASE,
)

# Token shapes: (pattern, how many leading characters to keep so the reader sees the kind).
_TOKENS: list[tuple[re.Pattern[str], int]] = [
    (re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"), 3),  # OpenAI, Anthropic
    (re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"), 8),  # Stripe
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), 4),  # GitHub
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), 11),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"), 6),  # GitLab
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), 5),  # Slack
    (re.compile(r"\bxapp-[A-Za-z0-9-]{10,}"), 5),
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"), 4),  # AWS access key id
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), 4),  # Google API key
    (re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"), 5),  # Google OAuth
    (re.compile(r"\b\d{8,10}:[A-Za-z0-9_-]{35}\b"), 0),  # Telegram bot token
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), 3),  # JWT
    (re.compile(r"\bnpm_[A-Za-z0-9]{30,}"), 4),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), 3),  # Hugging Face
    (re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"), 29),
]


def _keep(prefix: int) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group(0)[:prefix] + MASK


def _quoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + MASK + value[0]
    return MASK


def mask_text(text: str) -> str:
    """`text` with every recognised secret replaced by `****` (a short prefix may stay)."""
    if not text:
        return text
    text = _PEM.sub(lambda m: f"-----BEGIN {m.group(1)}-----{MASK}-----END {m.group(1)}-----", text)
    text = _JSON_PAIR.sub(lambda m: f'{m.group(1)}"{MASK}"', text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _CLI_FLAG.sub(lambda m: m.group(1) + _quoted(m.group(2)), text)
    text = _ASSIGNMENT.sub(
        lambda m: m.group(0) if m.group(2) == MASK else m.group(1) + _quoted(m.group(2)), text
    )
    for pattern, prefix in _TOKENS:
        text = pattern.sub(_keep(prefix), text)
    return text


def mask_value(value: Any) -> Any:
    """A JSON value with secrets masked: values under secret-looking keys entirely, every string
    through `mask_text`."""
    if isinstance(value, dict):
        masked: dict[Any, Any] = {}
        for key, item in value.items():
            secret_key = isinstance(key, str) and _SECRET_KEY_RE.match(key) is not None
            if secret_key and item not in (None, "", False, True) and not isinstance(item, dict):
                masked[key] = MASK
            else:
                masked[key] = mask_value(item)
        return masked
    if isinstance(value, list):
        return [mask_value(item) for item in value]
    if isinstance(value, str):
        return mask_text(value)
    return value


def utf16_len(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units): an emoji outside the BMP is two."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _cut_utf16(text: str, units: int, *, from_end: bool = False) -> str:
    """The longest head (or tail) of `text` within `units` UTF-16 code units."""
    if units <= 0:
        return ""
    if utf16_len(text) <= units:
        return text
    total = 0
    chars = reversed(text) if from_end else iter(text)
    count = 0
    for ch in chars:
        total += 2 if ord(ch) > 0xFFFF else 1
        if total > units:
            break
        count += 1
    return text[len(text) - count :] if from_end else text[:count]


def truncate_middle(text: str, limit: int, marker: str = "\n… {n} characters cut …\n") -> str:
    """`text` within `limit` UTF-16 units, keeping its head and tail (the start of a command and
    the end of a log both matter). `marker` may name `{n}`, the number of characters cut."""
    if utf16_len(text) <= limit:
        return text
    # The marker's own length depends on n; reserve room for the largest n (the whole text).
    room = limit - utf16_len(marker.format(n=len(text)))
    if room <= 0:
        return _cut_utf16(text, limit)
    head = _cut_utf16(text, (room * 2 + 2) // 3)
    tail = _cut_utf16(text[len(head) :], room - utf16_len(head), from_end=True)
    cut = len(text) - len(head) - len(tail)
    return head + marker.format(n=cut) + tail


def shorten(text: str, limit: int) -> str:
    """One line for a list or a button: whitespace folded, cut at `limit` with an ellipsis."""
    line = " ".join(text.split())
    if utf16_len(line) <= limit:
        return line
    return _cut_utf16(line, limit - 1).rstrip() + "…"
