"""Secrets out of chat messages, and long text cut to fit.

People read decisions in group chats, on phones, in notification previews; a token pasted into a
tool call must not travel there. Masking recognises common shapes and keeps just enough of each
(the key name, a recognisable prefix, the rest of the command) for the reader to know what was
there: `PGPASSWORD=**** psql …`, `ghp_****`, `curl -u admin:****`. It errs on the side of
masking: a false positive costs a few characters of context, a miss leaks a secret.

Four tables drive it; adding a shape is one row in one of them.

- `TEXT_RULES`: named patterns over free text. Each has a group `s`, the only part replaced.
  Keyed rows also capture a name (group `k`: `k=v`, `"k": "v"`, `--k v`, `K: v` headers) and
  mask only when that name is a secret's (or when their `judge` says so: `k` is then a
  callee, or the command that reads what `echo` prints).
- The name vocabulary (`_STRONG`, `_LAST`, `_ABOUT`, …, read by `is_secret_name`): which names
  hold secrets. It serves JSON/dict keys at any depth (`mask_value`) and the keyed text rows.
- `ARG_RULES`: how particular programs take secrets on their command line (`mysql -pX`,
  `curl -u user:pw`, `sshpass -p X`, `htpasswd -b FILE USER PW`, `net user NAME PW`,
  `xfreerdp /p:X`, `setx NAME VALUE`), applied to argv lists and to the commands found in
  text. Long flags named like secrets (`--password X`, `--api-key=X`, `--pin X`) need no row:
  any program's are masked.
- `STDIN_READERS`: programs that read a secret on standard input (`sudo -S`, `chpasswd`,
  `docker login --password-stdin`), so that what `echo`/`printf` pipe into them or a
  here-string gives them is masked.

The rows are grouped by family — one way of handing over a secret, in every syntax it comes
in: a secret-named variable assigned (`X=v`, `export`, fish `set -x X v`, Dockerfile `ENV X v`,
`setx`, systemd, YAML, TOML, XML elements and attributes, .NET `<add key=… value=…>`, JSON
and AWS `{"Key": …, "Value": …}` pairs), a password given as an argument, a secret fed on
stdin, credentials in code (`auth=("u", "pw")`, `HTTPBasicAuth("u", "pw")`), and encoded
secrets: base64 after `Basic`, and base64 runs whose decoding masking finds a secret in (each
decoded once, its text masked without decoding again: at most the cost of masking it twice).

What stays readable, on purpose: names that are about a secret rather than one
(`PASSWORD_MIN_LENGTH=8`, `token_count: 5`, `--password-file /etc/x`, `token_type: Bearer`,
`secret_name: db`), booleans and words like `required` or `none`, references (`$DB_PASSWORD`,
`${{ secrets.X }}`, `$(cat f)`), code (`password = getpass()`, `password: str`), paths given
where a key file or cookie jar is expected, public keys and certificates, Stripe publishable
keys (`pk_live_…`, public by design), ids (`aws_access_key_id` itself, though the AKIA… value is
masked; `private_key_id`, `session_id`), `mysql -p db` (mysql's `-p` takes no separate value:
it prompts) and `-p 8080` for other programs; `set -x PATH …`, `ENV NODE_ENV production`,
`<passwordPolicy>`, `{"name": "DB_PASSWORD", "valueFrom": …}`, `echo y | sudo apt …` (sudo
without -S reads no password), `auth=(user, password)` (variables), f-strings made of fields
only (`f"Bearer {token}"`), base64 that decodes to no secret.

Matching runs on RE2 (google-re2, linear time whatever the input) over UTF-8 bytes in Latin-1
mode; without it, on `re`, with patterns kept free of ambiguous nested repetition. Each row
names the substrings one of which every match contains (`triggers`), so a message skips the rows
that cannot apply.
"""

from __future__ import annotations

import base64
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

# google-re2 is a runtime dependency; the fallback keeps the module importable without it.
try:
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised only on installs without google-re2
    _re2 = None

MASK = "****"
_MASK = MASK.encode()
ENGINE = "re2" if _re2 is not None else "re"

# --------------------------------------------------------------------------------------------
# Names that hold secrets
# --------------------------------------------------------------------------------------------

# Every secret name contains one of these (checked first: most names contain none).
_NAME_TRIGGERS = (
    "pass", "pw", "secret", "token", "auth", "key", "cred", "cookie", "sig", "bearer", "otp",
    "psk", "pin",
)  # fmt: skip
# A word ending in one of these makes a secret's name wherever it stands (pgpassword, authtoken).
_STRONG_ROOTS = ("password", "passwd", "passphrase", "secret", "token")
# Words that do the same as a whole.
_STRONG = frozenset(
    {
        "passwords", "secrets", "credential", "credentials", "creds", "passcode", "apikey",
        "accesskey", "secretkey", "privatekey", "masterkey", "signingkey", "encryptionkey",
        "licensekey", "accountkey", "sessionkey", "authkey", "storepass", "keypass", "pincode",
        "srcstorepass", "deststorepass", "srckeypass", "destkeypass", "dbpass", "adminpass",
        "rootpass", "newpass", "oldpass",
    }
)  # fmt: skip
# Words that make a secret's name only as its last word (basic_auth, db_pass, x_amz_signature).
_LAST = frozenset(
    {
        "pass", "pwd", "pw", "auth", "authorization", "cookie", "cookies", "sig", "signature",
        "bearer", "otp", "psk", "pin",
    }
)  # fmt: skip
# A word ending in `pass` is a password's name (SSHPASS, PGPASS, smtppass) unless it is one of
# these words.
_NOT_PASS = frozenset(
    {
        "bypass", "compass", "encompass", "overpass", "underpass", "surpass", "trespass",
        "multipass", "lowpass", "highpass", "bandpass", "allpass", "subpass", "renderpass",
        "onepass", "twopass", "firstpass", "secondpass", "singlepass", "getpass", "askpass",
        "ksshaskpass", "keepass",
    }
)  # fmt: skip
# `*_code` is a secret's name after these (pin_code, auth_code, otp_code); error_code is not.
_SECRET_CODES = frozenset({"pin", "pass", "auth", "otp", "totp"})
# `*_key` is a secret's name (api_key, STRIPE_KEY, account_key) unless the word before says
# which kind of non-secret key it is.
_KEY_NOT_SECRET = frozenset(
    {
        "sort", "primary", "foreign", "partition", "cache", "idempotency", "public", "pub",
        "range", "row", "shard", "routing", "lookup", "map", "dict", "object", "s3", "bucket",
        "i18n", "translation", "message", "event", "label", "tag", "group", "unique", "index",
        "composite", "dedup", "dedupe", "redis", "state", "config", "setting", "settings",
        "metadata", "field", "column", "table", "hash", "cluster", "join", "parent", "child",
        "json", "yaml", "cursor", "page", "next", "prev", "previous", "continuation", "short",
        "hot", "natural", "surrogate", "candidate", "order", "record", "item", "entry", "node",
        "list", "array", "enum", "kv", "dynamo", "parameter",
    }
)  # fmt: skip
# A last word that makes the name about a secret, not the secret (password_file, token_type).
_ABOUT = frozenset(
    {
        "file", "files", "path", "paths", "dir", "directory", "folder", "url", "urls", "uri",
        "endpoint", "host", "hostname", "port", "name", "names", "type", "types", "kind", "id",
        "ids", "arn", "ref", "refs", "reference", "env", "var", "variable", "field", "fields",
        "label", "prompt", "hint", "policy", "reset", "required", "enabled", "disabled", "mode",
        "method", "methods", "scheme", "format", "version", "provider", "source", "location",
        "stdin", "fd", "cmd", "command", "helper", "manager", "store", "at", "date", "time",
        "changed", "created", "updated", "fingerprint", "public", "header", "headers", "prefix",
        "suffix", "pattern", "regex", "rule", "rules", "validation", "validator", "error",
        "errors", "message", "msg", "text", "placeholder", "input", "form", "page", "link",
        "template", "scope", "scopes", "permissions", "audience", "issuer", "algorithm", "alg",
        "domain", "realm", "user", "username", "login", "email", "owner", "backend", "engine",
        "service", "server", "flow", "grant", "exchange", "introspection", "revocation",
        "status", "state", "enable",
    }
)  # fmt: skip
# A word anywhere that makes the name a measure (password_min_length, token_count, token_ttl).
_MEASURE = frozenset(
    {
        "count", "counts", "num", "number", "total", "max", "min", "maximum", "minimum",
        "limit", "limits", "len", "length", "size", "ttl", "timeout", "lifetime", "expiry",
        "expiration", "expires", "expire", "expired", "age", "usage", "used", "remaining",
        "budget", "rate", "estimate", "threshold", "bits", "rounds", "iterations", "attempts",
        "retries", "strength", "complexity", "rotation", "interval", "duration", "window",
        "per",
    }
)  # fmt: skip
# A first word that makes the name a switch (no_password, use_token, ask_pass, with_token).
_SWITCH = frozenset(
    {
        "no", "not", "skip", "disable", "without", "with", "use", "require", "requires", "has",
        "is", "allow", "enable", "show", "hide", "ask", "prompt", "save", "remember", "need",
        "needs", "should", "can", "must", "want", "include", "exclude",
    }
)  # fmt: skip
# Whole names that are secrets' though the rules above say otherwise (Vault's AppRole secret_id).
_SECRET_NAMES = frozenset({"secret_id", "secretid"})
# Names whose value may be a path to the secret rather than the secret (ssh_key: ~/.ssh/id).
_PATH_OK = frozenset({"key", "pwd", "cookie", "cookies", "credentials", "credential", "creds"})
_COOKIE_NAMES = frozenset({"cookie", "cookies"})

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+")


def _words(name: str) -> tuple[str, ...]:
    """`X-Api-Key` → (x, api, key); `keyStorePassword2` → (key, store, password)."""
    return tuple(w.lower().rstrip("0123456789") or w.lower() for w in _WORD.findall(name))


def is_secret_name(name: str) -> bool:
    """Whether a key, variable, header or flag named `name` holds a secret: `password`,
    `PGPASSWORD`, `x-api-key`, `--client-secret`, `aws_secret_access_key`, `_authToken`; not
    `password_file`, `token_count`, `max_tokens`, `sort_key`, `author`."""
    return _secret_name(name[-256:])


@lru_cache(maxsize=8192)
def _secret_name(name: str) -> bool:
    low = name.lower()
    if not any(t in low for t in _NAME_TRIGGERS):
        return False
    words = _words(name)
    if not words:
        return False
    if "_".join(words) in _SECRET_NAMES:
        return True
    if words[-1] in _ABOUT or any(w in _MEASURE for w in words):
        return False
    if len(words) > 1 and words[0] in _SWITCH:
        return False
    if any(w in _STRONG or w.endswith(_STRONG_ROOTS) or _pass_word(w) for w in words):
        return True
    if words[-1] == "key":
        return len(words) > 1 and words[-2] not in _KEY_NOT_SECRET
    if words[-1] == "code":
        return len(words) > 1 and words[-2] in _SECRET_CODES
    return words[-1] in _LAST


def _pass_word(word: str) -> bool:
    return len(word) > 4 and word.endswith("pass") and word not in _NOT_PASS


@lru_cache(maxsize=8192)
def _last_word(name: str) -> str:
    words = _words(name)
    return words[-1] if words else ""


# --------------------------------------------------------------------------------------------
# Values: what part of a value after a secret's name is the secret
# --------------------------------------------------------------------------------------------

# Values that are not secrets by nature (after `password:` in YAML, `auth=` in a query, ...).
_PLAIN = frozenset(
    {
        b"true", b"false", b"yes", b"no", b"on", b"off", b"null", b"none", b"nil",
        b"undefined", b"required", b"optional", b"enabled", b"disabled", b"inherit", b"stdin",
        b"prompt", b"ask", b"...", "…".encode(), b"-",
    }
)  # fmt: skip
# References to a secret kept elsewhere: $DB_PASSWORD, ${token}, ${{ secrets.X }}, $(cat f),
# %PASSWORD%, {{ .Values.password }}.
_REFERENCE = re.compile(
    rb"\$[A-Z_][A-Z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\}?|\$\{\{.*|\$\(.*|%[A-Z_][A-Z0-9_]*%"
    rb"|\{\{.*|<[^<>]*>",
    re.DOTALL,
)
# Code: a call or subscript (getpass(), os.environ["X"]), an attribute of a well-known object,
# a type (password: str).
_CODE = re.compile(
    rb"[A-Za-z_][\w.]*[(\[]"
    rb"|(?:self|cls|this|process\.env|os\.environ|settings|config|ctx|args|opts|options|env"
    rb"|secrets|vars|params|props|inputs|request|req|steps|needs)\.[\w.]+$"
    rb"|(?:str|string|bytes|int|integer|float|number|bool|boolean|any|unknown|object|optional"
    rb"|secretstr|secretbytes|varchar|char)(?:$|[\[|?!;,= ])",
    re.IGNORECASE,
)
# openssl's ways of naming where a password comes from; docker build's --secret spec.
_SOURCE = re.compile(rb"(?:env|file|fd):|stdin$|(?:id|src|source|type|target)=", re.IGNORECASE)
_SCHEME_WORDS = frozenset(
    {b"bearer", b"basic", b"token", b"bot", b"digest", b"negotiate", b"ntlm", b"oauth"}
)
# Kept in front of the secret: an authorization scheme, openssl's `pass:`.
_KEPT_PREFIX = re.compile(
    rb"(?:bearer|basic|token|bot|digest|negotiate|ntlm|oauth|aws4-hmac-sha256|sso-key)[ \t]+"
    rb"|pass:",
    re.IGNORECASE,
)
_PATH = re.compile(
    rb"(?:~|\.{1,2}|\$HOME|\$\{HOME\})?/|[A-Za-z]:[\\/]"
    rb"|[\w.-]+\.(?:json|pem|key|crt|cer|p12|pfx|txt|ini|cfg|conf|ya?ml|toml|env|jks|keystore"
    rb"|der|pub|gpg|asc|ppk|kdbx|cookies?)$",
    re.IGNORECASE,
)
_COOKIE_ATTRIBUTES = frozenset(
    {b"path", b"domain", b"expires", b"max-age", b"samesite", b"secure", b"httponly",
     b"priority", b"partitioned"}
)  # fmt: skip
_SPACE = b" \t\r\n"
_STRING_PREFIX = re.compile(rb"[bBrRuUfF]{1,2}(?=[\"'])")
_FSTRING_FIELD = re.compile(rb"\{[^{}]*\}")
_ALNUM = re.compile(rb"[A-Za-z0-9]")


def _readable(value: bytes, name: str) -> bool:
    """A value that is no secret whatever its name: empty, already masked, a word like `none`,
    a reference, code, a scheme word alone, openssl's `env:VAR`, a path where one is expected."""
    if not value or _MASK in value or value.strip(b"*") == b"":  # masked already (ghp_****)
        return True
    low = value.lower()
    if low in _PLAIN or low in _SCHEME_WORDS:
        return True
    if _REFERENCE.fullmatch(value) or _CODE.match(value) or _SOURCE.match(value):
        return True
    return _last_word(name) in _PATH_OK and _PATH.match(value) is not None


def _cookie_spans(value: bytes, offset: int) -> list[tuple[int, int]]:
    """`a=1; b=2` → the spans of 1 and 2; Set-Cookie attributes (Path=/) stay readable."""
    spans: list[tuple[int, int]] = []
    pos = 0
    pairs = 0
    for part in value.split(b";"):
        eq = part.find(b"=")
        if eq > 0:
            pairs += 1
            start, end = eq + 1, len(part)
            while start < end and part[start] in _SPACE:
                start += 1
            while end > start and part[end - 1] in _SPACE:
                end -= 1
            if part[:eq].strip().lower() not in _COOKIE_ATTRIBUTES and start < end:
                if part[start:end] != _MASK:
                    spans.append((offset + pos + start, offset + pos + end))
        pos += len(part) + 1
    if not pairs and value.strip() and not _readable(value.strip(), ""):
        return [(offset, offset + len(value))]
    return spans


def _value_spans(
    value: bytes,
    offset: int,
    name: str,
    after: bytes | None = None,
    until: bytes | None = None,
    *,
    positional: bool = False,
) -> list[tuple[int, int]]:
    """The spans to mask in `value` (found at `offset`), the value of something named `name`:
    quotes, a scheme word (`Bearer`), openssl's `pass:` and, with `after`, what precedes it
    (`user:` of `user:pw`) stay; readable values give nothing."""
    start, end = 0, len(value)
    while end > start and value[end - 1] in _SPACE:
        end -= 1
    while start < end and value[start] in _SPACE:
        start += 1
    prefix = _STRING_PREFIX.match(value, start, end)  # b"…", r'…': the prefix stays
    template = False
    if prefix is not None:
        template = b"f" in prefix.group().lower()
        start = prefix.end()
    if end - start >= 4 and value.startswith(b'\\"', start) and value.endswith(b'\\"', 0, end):
        start, end = start + 2, end - 2
    elif end - start >= 2 and value[start] in b"\"'" and value[end - 1] == value[start]:
        start, end = start + 1, end - 1
    if _readable(value[start:end], name):
        return []
    if after is not None:
        at = value.find(after, start, end)
        if at < 0 or (positional and at == start):
            return []
        start = at + len(after)
        if until is not None:
            cut = value.find(until, start, end)
            end = cut if cut >= 0 else end
        if _readable(value[start:end], name):
            return []
    kept = _KEPT_PREFIX.match(value, start, end)
    if kept is not None:
        start = kept.end()
    if start >= end:
        return []
    if template and not _ALNUM.search(_FSTRING_FIELD.sub(b"", value[start:end])):
        return []  # f"{user}:{password}", f"Bearer {token}": fields only, a template
    if _last_word(name) in _COOKIE_NAMES:
        return _cookie_spans(value[start:end], offset + start)
    return [(offset + start, offset + end)]


# --------------------------------------------------------------------------------------------
# Free text: the rule table
# --------------------------------------------------------------------------------------------


def _flag_name(flag: bytes) -> bool:
    """Not a short option glued to its value (`-pSevenPass`: -p, then a password)."""
    return (
        flag.startswith(b"--")
        or len(flag) < 3
        or not (97 <= flag[1] <= 122)
        or (97 <= flag[2] <= 122 or flag[2] in b"-_")
    )


def _random_looking(value: bytes) -> bool:
    """A token rather than a word (`Bearer tokens`, `Basic authentication`): 8+ characters with
    a digit, a symbol, or a capital past the first."""
    if len(value) < 8:
        return False
    return any(c < 65 or 90 < c < 97 or c > 122 for c in value) or any(
        65 <= c <= 90 for c in value[1:]
    )


_PRINTABLE = bytes(range(32, 127)) + b"\t\r\n"


def _decoded_text(value: bytes) -> bytes | None:
    """`value` decoded as base64 (standard or URL-safe, padded or not) when that gives printable
    ASCII text; None otherwise."""
    raw = value.rstrip(b"=")
    urlsafe = b"-" in raw or b"_" in raw
    if (urlsafe and (b"+" in raw or b"/" in raw)) or len(raw) % 4 == 1:
        return None
    try:
        decoded = base64.b64decode(
            raw + b"=" * (-len(raw) % 4), altchars=b"-_" if urlsafe else None, validate=True
        )
    except ValueError:  # binascii.Error
        return None
    if not decoded or decoded.translate(None, _PRINTABLE):
        return None
    return decoded


def _basic_credentials(value: bytes) -> bool:
    """Base64 of `user:password` (what follows `Basic`)."""
    decoded = _decoded_text(value)
    return decoded is not None and 0 < decoded.find(b":") < len(decoded) - 1


_QUOTED_ITEM = re.compile(rb"\"[^\"]*\"|'[^']*'")
# An argument in code (the rows' `_ARG`): a string literal, a variable, a number.
_ARG_ITEM = re.compile(rb"\"[^\"\\\n]*\"|'[^'\\\n]*'|[A-Za-z_][\w.]*|\d+")


def _items(value: bytes, offset: int, name: str) -> list[tuple[int, int]]:
    """The string literals in an argument list's tail (`, "pw", "domain"`), each a value."""
    spans: list[tuple[int, int]] = []
    for m in _QUOTED_ITEM.finditer(value):
        spans.extend(_value_spans(m.group(), offset + m.start(), name))
    return spans


def _secret_items(name: str, value: bytes, offset: int) -> list[tuple[int, int]]:
    """`auth=("user", "pw")`, `"auth": ["u", "pw"]`: a secret's name (quoted or not) given a
    tuple; every string after the first (the user) is masked."""
    bare = name.replace("\\", "")
    if bare[-1:] in ("'", '"') and bare[:1] != bare[-1:]:
        return []  # the end of a quoted text (`"python -c pass": […]`), not a name
    bare = bare.strip("'\"")
    return _items(value, offset, bare) if is_secret_name(bare) else []


# A call that stores what it is given: setenv, headers.set, System.setProperty, os.environ
# .setdefault, SetEnvironmentVariable, put, add_header, with_token.
_SETTERS = frozenset(
    {
        "set", "put", "add", "append", "insert", "store", "save", "write", "update", "with",
        "setdefault", "setenv", "putenv", "setitem", "header", "headers", "property",
        "variable", "param", "option", "cookie", "secret",
    }
)  # fmt: skip


_FIELD_SEPARATOR = re.compile(r"[ \t]*[:=][ \t]*")


def _pair_value(fields: str, value: bytes, offset: int) -> list[tuple[int, int]]:
    """`"Key": "DB_PASSWORD"` (JSON: both quoted), `Key=DB_PASSWORD` (AWS shorthand, YAML flow:
    neither), then the value's field. (`{"key": cookie.key, …}` is code: it names nothing.)"""
    label, name = _FIELD_SEPARATOR.split(fields.replace("\\", ""), maxsplit=1)
    if (label[:1] in ("'", '"')) != (name[:1] in ("'", '"')):
        return []
    name = name.strip("'\"")
    return _value_spans(value, offset, name) if is_secret_name(name) else []


# The row's `s`: a quoted name, a comma, a quoted value.
_SETTER_ARGS = re.compile(rb"[\"']([^\"']*)[\"'][ \t]*,[ \t]*(.*)", re.DOTALL)


def _setter_pair(callee: str, args: bytes, offset: int) -> list[tuple[int, int]]:
    """`setenv("API_TOKEN", "…")`, `headers.set("Authorization", "…")`: a setter given a
    secret's name and a value. (`("token", "revoke")`, `row("pwd", "parked")` are not.)"""
    if _SETTERS.isdisjoint(_words(callee)):
        return []
    parsed = _SETTER_ARGS.match(args)
    if parsed is None:
        return []
    name = parsed.group(1).decode("latin-1")
    if name.startswith("-") or not is_secret_name(name):
        return []  # `add_argument("--password", "-p")` declares an option
    return _value_spans(parsed.group(2), offset + parsed.start(2), name)


# Constructors of credentials (HTTPBasicAuth, NetworkCredential, UsernamePasswordCredentials)
# unless a verb says the call reads one (get_auth, check_credentials).
_CREDENTIAL_WORDS = frozenset({"auth", "credential", "credentials", "creds"})
_READ_VERBS = frozenset(
    {"get", "check", "verify", "validate", "parse", "load", "read", "fetch", "find", "lookup",
     "decode", "refresh", "revoke", "delete", "remove", "clear", "reset", "require", "has", "is"}
)  # fmt: skip
_SET_VERBS = frozenset({"set", "store", "save", "put", "with", "add", "use"})
# Calls that take a user and a password (smtp.login("u", "pw"), conn.simple_bind_s(dn, "pw")).
_LOGIN_CALLS = frozenset(
    {"login", "signin", "sign_in", "bind", "bind_s", "simple_bind", "simple_bind_s",
     "authenticate"}
)  # fmt: skip


def _credential_call(callee: str, args: bytes, offset: int) -> list[tuple[int, int]]:
    """The string arguments holding a secret: after the first in `HTTPBasicAuth("u", "pw")`;
    the last in `keyring.set_password("svc", "u", "pw")` or `client.setApiKey("k")`; the
    second of two in `smtp.login("u", "pw")`."""
    words = _words(callee)
    if not words:
        return []
    items = list(_ARG_ITEM.finditer(args))
    if words[-1] in _CREDENTIAL_WORDS and len(words) > 1 and words[0] not in _READ_VERBS:
        chosen = items[1:]
    elif words[0] in _SET_VERBS and len(words) > 1 and is_secret_name("_".join(words[1:])):
        chosen = items[-1:]
    elif callee.lower() in _LOGIN_CALLS and len(items) == 2:
        chosen = items[1:]
    else:
        return []
    spans: list[tuple[int, int]] = []
    for m in chosen:
        if m.group()[:1] in (b'"', b"'"):
            spans.extend(_value_spans(m.group(), offset + m.start(), "password"))
    return spans


@dataclass(frozen=True, slots=True)
class StdinReader:
    """A program that reads a secret on its standard input, so that what `echo` or `printf`
    pipe into it (or a here-string gives it) is one: `echo pw | sudo -S …`."""

    programs: tuple[str, ...]
    # When it reads one: each entry is words all given (`login -` for `vault login -`); a
    # one-letter option also counts inside a cluster (`sudo -kS`). Empty: always.
    needs: tuple[str, ...] = ()
    after: str | None = None  # the secret follows this (chpasswd's `user:pw`)


# fmt: off
STDIN_READERS: tuple[StdinReader, ...] = (
    StdinReader(("sudo",), ("-S", "--stdin")),
    StdinReader(("passwd", "smbpasswd", "kinit", "cryptsetup", "vncpasswd", "ldappasswd")),
    StdinReader(("chpasswd", "chgpasswd"), after=":"),
    StdinReader(("htpasswd",), ("-i",)),
    StdinReader(("vault",), ("login -",)),
    StdinReader(("ssh-add",), ("-",)),
    StdinReader(("docker", "podman"), ("secret -",)),
    StdinReader(("wg",), ("pubkey",)),
    StdinReader(("gcloud",), ("--data-file=-",)),
    StdinReader(("ansible-vault",), ("encrypt_string",)),
    StdinReader(("wrangler",), ("secret put",)),
    StdinReader(("vercel",), ("env add",)),
    StdinReader(("gh",), ("--with-token", "secret set")),
    StdinReader(("gpg", "gpg2"), ("--passphrase-fd",)),
    StdinReader(("openssl",), ("stdin", "fd:0", "-stdin")),
)
# fmt: on
_STDIN_READERS = {p: r for r in STDIN_READERS for p in r.programs}
# Programs that run the rest of their line: the reader is what they run (`sudo chpasswd`).
# Their options taking a value (sudo -u bob) are skipped with it.
_WRAPPERS = {
    b"sudo": frozenset({b"-u", b"-g", b"-C", b"-D", b"-h", b"-p", b"-r", b"-t", b"-T", b"-U"}),
    b"doas": frozenset({b"-u", b"-C"}),
    b"env": frozenset({b"-u", b"-C", b"-S"}),
    b"nohup": frozenset(),
    b"time": frozenset(),
    b"command": frozenset(),
    b"exec": frozenset(),
}


def _reader_words(command: bytes, *, find: bool = False) -> Iterator[tuple[str, list[bytes]]]:
    """Each program of a command line with its arguments: `sudo -u bob chpasswd -e` is sudo
    with `-u bob`, then chpasswd with `-e`. Leading `NAME=value` assignments are skipped;
    `find`: so are words up to the first that names a reader or a wrapper (prose before a
    command: `Run this? sudo -S id <<< pw`)."""
    tokens = [_unquote(t.group()) for t in _TOKEN_RE.finditer(command)]
    i = 0
    while i < len(tokens) and b"=" in tokens[i] and not tokens[i].startswith(b"-"):
        i += 1
    if find:
        while i < len(tokens) and not _names_reader(tokens[i]):
            i += 1
    while i < len(tokens):
        program = tokens[i].rsplit(b"/", 1)[-1].lower()
        valued = _WRAPPERS.get(program)
        if valued is None:
            yield program.decode("latin-1"), tokens[i + 1 :]
            return
        start = i = i + 1
        while i < len(tokens) and tokens[i].startswith(b"-"):
            i += 2 if tokens[i] in valued else 1
        yield program.decode("latin-1"), tokens[start:i]


def _gives(args: list[bytes], need: str) -> bool:
    """Whether `args` hold every word of `need` (`-S` also inside a cluster like `-kS`)."""
    for word in need.encode().split():
        if word in args:
            continue
        if len(word) == 2 and word[0] == 45 and word[1] != 45:  # -S in -kS
            if any(a[:1] == b"-" and a[1:2] != b"-" and a[1:].isalpha() and word[1] in a[1:]
                   for a in args):  # fmt: skip
                continue
        return False
    return True


def _stdin_flag(arg: bytes) -> bool:
    """`--password-stdin`, `--token-stdin`: any program's flag saying a secret comes on stdin."""
    if not arg.startswith(b"--") or not arg.endswith(b"-stdin"):
        return False
    return is_secret_name(arg[: -len(b"-stdin")].decode("latin-1"))


def _names_reader(token: bytes) -> bool:
    program = token.rsplit(b"/", 1)[-1].lower()
    return program in _WRAPPERS or program.decode("latin-1") in _STDIN_READERS


def _here_string_secret(command: str, value: bytes, offset: int) -> list[tuple[int, int]]:
    """`sudo -S id <<< pw`: the words before `<<<` may start with prose."""
    if any(_stdin_flag(_unquote(t.group())) for t in _TOKEN_RE.finditer(command.encode("latin-1"))):
        return _value_spans(value, offset, "stdin-secret")
    return _stdin_secret(command, value, offset, find=True)


def _stdin_secret(
    command: str, value: bytes, offset: int, *, find: bool = False
) -> list[tuple[int, int]]:
    """The spans of `value` (what `echo`/`printf` print, a here-string) when `command`, the
    line that reads it, reads a secret on its standard input."""
    for program, args in _reader_words(command.encode("latin-1"), find=find):
        if any(_stdin_flag(a) for a in args):
            return _value_spans(value, offset, "stdin-secret")
        reader = _STDIN_READERS.get(program)
        if reader is not None and (
            not reader.needs or any(_gives(args, need) for need in reader.needs)
        ):
            after = None if reader.after is None else reader.after.encode()
            return _value_spans(value, offset, "stdin-secret", after)
    return []


@dataclass(frozen=True, slots=True)
class Rule:
    """A shape of secret in free text. `pattern` has a group `s`, the part replaced by MASK."""

    name: str
    pattern: str
    triggers: tuple[str, ...]  # lowercase substrings; every match contains one of them
    keyed: bool = False  # group `k` names `s`: masked only when `is_secret_name(k)`
    value: bool = False  # `s` is a value (quotes, `$REF`, `Bearer` stay), not a token's body
    check: Callable[[bytes], bool] | None = None  # a last word on `s` (on `k` when keyed)
    # Keyed rows whose `k` is not a name: the spans to mask, from `k`, `s` and where `s` is.
    judge: Callable[[str, bytes, int], list[tuple[int, int]]] | None = None


# Pieces of the keyed patterns.
_TRIGGER_RE = "(?i:" + "|".join(_NAME_TRIGGERS) + ")"
# A name with a trigger in it. RE2 is linear whatever the repetition; on `re` the runs are
# bounded so that a long run of name characters costs at most 65² steps.
_RUN = "*" if _re2 is not None else "{0,64}"
_NAME = rf"[\w.-]{_RUN}{_TRIGGER_RE}[\w.-]{_RUN}"
_BEFORE = r"(?:^|[^\w.-])"  # names start after a non-name character: linear even on `re`
_QUOTED = r'\\"(?:[^"\\\n]|\\[^"\n])*\\"|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\''
_FIRST = r"[^\s&;,'\"\\\[\](){}<>|`=]"  # a bare value's first character
_EQ_VALUE = (  # to the next space or separator; b"…", r'…' are quoted too
    rf"(?:[bBrRuUfF]{{1,2}})?(?:{_QUOTED})|{_FIRST}[^\s&;,'\"\]}})<>|`]*"
)
_COLON_WORD = rf"(?:[bBrRuUfF]{{1,2}})?(?:{_QUOTED})|{_FIRST}[^\s&;,'\"\]}})<>|`@]*"
_LINE_VALUE = (  # YAML: to the end of the line
    rf"(?:[bBrRuUfF]{{1,2}})?(?:{_QUOTED})|{_FIRST}[^\r\n,;'\"\]}})<>|`#]*"
)
_FLAG_VALUE = r"""\"[^"\n]*\"|'[^'\n]*'|[^\s;|&'"<>()`-][^\s;|&'"<>()`]*"""
# A name given as a value (`"Key": "DB_PASSWORD"`, `--name /app/db/password`): paths too.
_LABEL_NAME = rf"[\w./-]{_RUN}{_TRIGGER_RE}[\w./-]{_RUN}"
# The fields of a name/value pair: AWS tags and CloudFormation parameters, Elastic Beanstalk
# options, k8s/ECS env entries, Postman variables, .NET appSettings, Spring properties.
_LABEL = r"(?i:key|name|parameter_?key|option_?name)"
_VALUE_FIELD = r"(?i:value|parameter_?value)"
# Another field between the two (`"ResourceId": "i-1",` in describe-tags output).
_OTHER_FIELD = r"""["']?[\w-]+["']?[ \t]*[:=][ \t]*(?:"[^"\n]*"|'[^'\n]*'|[\w.-]+)"""
# An XML tag's attributes, without a bare `/` (so not a self-closing tag).
_ATTRIBUTES = r"""(?:[^<>"'/]|"[^"<>]*"|'[^'<>]*')"""
# One attribute: quoted, bare or none (HTML's `required`). Rows count them ({0,6}) rather than
# scan lazily, which on `re` would cost a tag's length at every `key=` in it.
_XML_ATTRIBUTE = (
    r"""[ \t\r\n]+[\w:.-]+(?:[ \t]*=[ \t]*(?:"[^"<>\n]*"|'[^'<>\n]*'|[^\s"'<>/=`]+))?"""
)
# An element's text, the secret: in a CDATA section or not.
_XML_TEXT = r"(?:<!\[CDATA\[)?(?P<s>[^<>]*?)(?:\]\]>)?"
# An argument in code: a string literal, a variable, a number.
_ARG = r"""\"[^"\\\n]*\"|'[^'\\\n]*'|[A-Za-z_][\w.]*|\d+"""
_ARG_TAIL = rf"(?:[ \t]*,[ \t]*(?:{_ARG})){{1,3}}"
# A word `echo` prints.
_WORD_ARG = r"""\"(?:[^"\\\n]|\\.)*\"|'[^'\n]*'|[^\s|;&<>()'"`]+"""

_AWS_KEY_IDS = "AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA"
_GITLAB_KINDS = "pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent"

# fmt: off
_TEXT_RULES: tuple[Rule, ...] = (
    # Private keys and other key files: the BEGIN and END lines stay.
    Rule(
        "pem-private-key",
        r"-{4,5} ?BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}(?:\\n|\r?\n)?"
        r"(?P<s>[^\"]*?)(?:\\n|\r?\n)?"  # to its END line, the end of a JSON string or the text
        r"(?:-{4,5} ?END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}|\"|$)",
        ("private key",),
    ),
    Rule(
        "putty-private-key",
        r"Private-Lines:[ \t]*\d+\r?\n(?P<s>(?:[A-Za-z0-9+/=]+\r?\n)*[A-Za-z0-9+/=]+)\r?\n",
        ("private-lines",),
    ),
    Rule("age-secret-key", r"AGE-SECRET-KEY-1(?P<s>[0-9A-Z]{50,})", ("age-secret-key",)),
    # Credentials in URLs: scheme://user:pw@host, scheme://:pw@host, https://TOKEN@host.
    Rule(
        "url-password",
        r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^\s/:@?#\"'<>]*:(?P<s>[^\s/?#\"'<>]*)@",
        ("://",),
        value=True,
    ),
    Rule("url-token-user", r"(?i)\bhttps?://(?P<s>[A-Za-z0-9_-]{20,})@", ("://",)),
    # Cloud providers.
    Rule(
        "aws-access-key-id",
        rf"\b(?:{_AWS_KEY_IDS})(?P<s>[A-Z0-9]{{16}})\b",
        tuple(k.lower() for k in _AWS_KEY_IDS.split("|")),
    ),
    Rule(
        "aws-secret-after-key-id",  # a credentials CSV; `aws configure`'s answers on one line
        r"\b(?:AKIA|ASIA)[A-Z0-9]{16}[\s,;:|\"'=]{1,20}(?P<s>[A-Za-z0-9/+]{40})"
        r"(?:[^A-Za-z0-9/+=]|$)",
        ("akia", "asia"),
    ),
    Rule("gcp-api-key", r"\bAIza(?P<s>[0-9A-Za-z_-]{35})", ("aiza",)),
    Rule("gcp-oauth-token", r"\bya29\.(?P<s>[0-9A-Za-z_-]{20,})", ("ya29.",)),
    Rule("gcp-oauth-client-secret", r"\bGOCSPX-(?P<s>[0-9A-Za-z_-]{20,})", ("gocspx-",)),
    Rule("gcp-refresh-token", r"\b1//0(?P<s>[0-9A-Za-z_-]{30,})", ("1//0",)),
    Rule(
        "azure-client-secret",
        r"(?:^|[^A-Za-z0-9_~.-])(?P<s>[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34})"
        r"(?:[^A-Za-z0-9_~.-]|$)",
        ("q~",),
    ),
    Rule("digitalocean-token", r"\bdo[opr]_v1_(?P<s>[a-f0-9]{64})", ("_v1_",)),
    Rule("databricks-token", r"\bdapi(?P<s>[a-f0-9]{32})", ("dapi",)),
    Rule("terraform-cloud-token", r"\b[A-Za-z0-9]{14}\.atlasv1\.(?P<s>[\w-]{60,})", ("atlasv1",)),
    Rule("pulumi-token", r"\bpul-(?P<s>[a-f0-9]{40})", ("pul-",)),
    Rule("vault-token", r"\bhv[sbr]\.(?P<s>[A-Za-z0-9_-]{24,})", ("hvs.", "hvb.", "hvr.")),
    Rule(
        "doppler-token",
        r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,40}\.)?(?P<s>[A-Za-z0-9]{30,})",
        ("dp.",),
    ),
    Rule("heroku-token", r"\bHRKU-(?P<s>[A-Za-z0-9_-]{30,})", ("hrku-",)),
    # Source hosting and package registries.
    Rule("github-token", r"\bgh[pousr]_(?P<s>[A-Za-z0-9]{20,})",
         ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    Rule("github-fine-grained-pat", r"\bgithub_pat_(?P<s>[A-Za-z0-9_]{20,})", ("github_pat_",)),
    Rule(
        "gitlab-token",
        rf"\bgl(?:{_GITLAB_KINDS})-(?P<s>[A-Za-z0-9_-]{{16,}})",
        tuple(f"gl{k}-" for k in _GITLAB_KINDS.split("|")),
    ),
    Rule("atlassian-token", r"\bATATT3(?P<s>[A-Za-z0-9_=-]{50,})", ("atatt3",)),
    Rule("npm-token", r"\bnpm_(?P<s>[A-Za-z0-9]{30,})", ("npm_",)),
    Rule("pypi-token", r"\bpypi-(?P<s>Ag[A-Za-z0-9_-]{40,})", ("pypi-",)),
    Rule("docker-hub-token", r"\bdckr_pat_(?P<s>[A-Za-z0-9_-]{20,})", ("dckr_pat_",)),
    # Chat platforms.
    Rule("slack-token", r"\bxox[abposre]-(?P<s>[A-Za-z0-9-]{10,})", ("xox",)),
    Rule("slack-app-token", r"\bxapp-(?P<s>[A-Za-z0-9-]{10,})", ("xapp-",)),
    Rule(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9/_-]{10,})",
        ("hooks.slack.com",),
    ),
    Rule(
        "telegram-bot-token",  # the bot's id (before the colon) is public
        r"(?:^|[^A-Za-z0-9_:-]|bot)\d{5,12}:(?P<s>[A-Za-z0-9_-]{30,50})(?:[^A-Za-z0-9_-]|$)",
        (":",),
    ),
    Rule(
        "discord-bot-token",  # the first part is the bot's id
        r"\b[MNO][A-Za-z0-9_-]{23,27}\.(?P<s>[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40})\b",
        (".",),
    ),
    Rule(
        "discord-webhook",
        r"discord(?:app)?\.com/api/webhooks/\d+/(?P<s>[A-Za-z0-9_-]{20,})",
        ("discord",),
    ),
    # Payments, e-mail, SaaS APIs.
    Rule("stripe-secret-key", r"\b(?:sk|rk)_(?:live|test)_(?P<s>[A-Za-z0-9]{10,})", ("sk_", "rk_")),
    Rule("stripe-webhook-secret", r"\bwhsec_(?P<s>[A-Za-z0-9]{20,})", ("whsec_",)),
    Rule("square-token", r"\bsq0(?:atp|csp)-(?P<s>[A-Za-z0-9_-]{22,})", ("sq0",)),
    Rule("shopify-token", r"\bshp(?:at|ca|pa|ss)_(?P<s>[a-fA-F0-9]{32})", ("shp",)),
    Rule("sendgrid-key", r"\bSG\.(?P<s>[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})", ("sg.",)),
    Rule("mailgun-key", r"\bkey-(?P<s>[0-9a-f]{32})\b", ("key-",)),
    Rule("postman-key", r"\bPMAK-(?P<s>[A-Za-z0-9-]{30,})", ("pmak-",)),
    Rule("linear-key", r"\blin_api_(?P<s>[A-Za-z0-9]{30,})", ("lin_api_",)),
    Rule("notion-token", r"\b(?:secret_|ntn_)(?P<s>[A-Za-z0-9]{40,})", ("secret_", "ntn_")),
    Rule("grafana-token", r"\b(?:glsa_|glc_)(?P<s>[A-Za-z0-9+/=_-]{32,})", ("glsa_", "glc_")),
    Rule("sentry-token", r"\bsntry[su]_(?P<s>[A-Za-z0-9+/=_-]{30,})", ("sntry",)),
    # Model providers.
    Rule("anthropic-key", r"\bsk-ant-(?:[a-z]{2,8}\d{2}-)?(?P<s>[A-Za-z0-9_-]{20,})", ("sk-ant-",)),
    Rule("openai-project-key", r"\bsk-(?:proj|svcacct|admin)-(?P<s>[A-Za-z0-9_-]{20,})", ("sk-",)),
    Rule("openai-key", r"\bsk-(?P<s>[A-Za-z0-9]{32,})", ("sk-",)),  # not sk-learn, risk-free
    Rule("huggingface-token", r"\bhf_(?P<s>[A-Za-z0-9]{30,})", ("hf_",)),
    Rule("llm-provider-key", r"\b(?:gsk_|xai-|pplx-|r8_)(?P<s>[A-Za-z0-9]{30,})",
         ("gsk_", "xai-", "pplx-", "r8_")),  # Groq, xAI, Perplexity, Replicate
    # JWTs: the header (the algorithm) stays, payload and signature go.
    Rule("jwt", r"\beyJ[\w-]{5,}\.(?P<s>eyJ[\w-]{5,}(?:\.[\w-]*)?)", ("eyj",)),
    # Headers whose value runs to the end of the line: Authorization (the scheme stays),
    # Cookie and Set-Cookie (each value goes, the names and attributes stay).
    Rule(
        "auth-or-cookie-header",
        r"(?i)(?:^|[^\w-])(?P<k>(?:proxy-)?authorization|(?:set-)?cookie)[ \t]*:[ \t]*"
        r"(?P<s>[^\r\n'\"]+)",
        ("authorization", "cookie"),
        keyed=True,
    ),
    # A scheme word and a token outside a header: `Bearer eyJ…`, `token ghp_…`.
    Rule(
        "bearer-token",
        r"(?i)(?:^|[^\w-])(?:bearer|token|basic)[ \t]+(?P<s>[A-Za-z0-9._~+/-]+=*)",
        ("bearer", "token", "basic"),
        check=_random_looking,
    ),
    # `Basic` and base64 of `user:password`, however short or plain (`Basic dTpw`).
    Rule(
        "basic-credentials",
        r"(?i)(?:^|[^\w-])basic[ \t]+(?P<s>[A-Za-z0-9+/]{4,}=*)",
        ("basic",),
        check=_basic_credentials,
    ),
    # name=value, name => value, name := value: env, shell, query strings, .env, kwargs, TOML,
    # connection strings (AccountKey=…;), JSON and dicts printed as text.
    Rule(
        "assignment",
        rf"{_BEFORE}\\?[\"']?(?P<k>{_NAME})\\?[\"']?\]?[ \t]*(?:=>|:=|==?)[ \t]*"
        rf"(?P<s>{_EQ_VALUE})",
        _NAME_TRIGGERS,
        keyed=True,
    ),
    # name: value inline (JSON, dicts, `pass:x`, X-Api-Key: …): one word or a quoted string;
    # `@` ends it (`__token__:pypi-…@host` is a URL's user and password).
    Rule(
        "colon-pair",
        rf"{_BEFORE}\\?[\"']?(?P<k>{_NAME})\\?[\"']?\]?[ \t]*:[ \t]*(?P<s>{_COLON_WORD})",
        _NAME_TRIGGERS,
        keyed=True,
    ),
    # name: value starting a line (YAML, e-mail-like headers): to the end of the line.
    Rule(
        "yaml-pair",
        rf"(?:^|\n)[ \t]*(?:- )?[\"']?(?P<k>{_NAME})[\"']?[ \t]*:[ \t]*(?P<s>{_LINE_VALUE})",
        _NAME_TRIGGERS,
        keyed=True,
    ),
    # Annotated assignments: `password: str = "hunter2"`.
    Rule(
        "annotated-assignment",
        rf"{_BEFORE}(?P<k>{_NAME})[ \t]*:[ \t]*[A-Za-z_][\w.]*(?:\[[\w., |\[\]]*\])?"
        rf"(?:[ \t]*\|[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*(?P<s>{_EQ_VALUE})",
        _NAME_TRIGGERS,
        keyed=True,
    ),
    # --name value, -name value (keytool -storepass, PowerShell -Password, openssl -pass pass:x).
    Rule(
        "flag-value",
        rf"(?:^|[\s\"'(\[,;|&=])(?P<k>-{{1,2}}{_NAME})[ \t]+(?P<s>{_FLAG_VALUE})",
        _NAME_TRIGGERS,
        keyed=True,
        check=_flag_name,
    ),
    # .netrc and ftp: `machine h login u password p`.
    Rule(
        "netrc-password",
        r"\blogin[ \t]+\S+[ \t]+password[ \t]+(?P<s>[^\s'\"\\]+)",
        ("password",),
        value=True,
    ),
    # Family: a secret-named variable assigned in any shell or config syntax. `NAME=value`
    # (sh, export, .env, INI, TOML, properties, systemd `Environment=`, PowerShell `$env:`,
    # Dockerfile `ENV NAME=value`) and `name: value` (YAML) are the rows above; these are the
    # spaced forms. (`setx`, `setenv`, `launchctl setenv`: the argv table.)
    Rule(
        "fish-set",  # set -x NAME value, set -gx NAME value
        r"(?:^|[\s;&|(`{])set"
        r"(?:[ \t]+(?:-[a-zA-Z]{0,6}[xgUl][a-zA-Z]{0,6}|--(?:export|global|universal|local)))+"
        rf"[ \t]+(?P<k>{_NAME})[ \t]+(?P<s>{_FLAG_VALUE})",
        ("set",),
        keyed=True,
    ),
    Rule(
        "dockerfile-env",  # ENV NAME value: the legacy form, the value to the end of the line
        rf"(?:^|\n|\\n)[ \t]*ENV[ \t]+(?P<k>{_NAME})[ \t]+"
        rf"(?P<s>{_QUOTED}|{_FIRST}(?:[^\r\n\"\\]|\\[^n\r\n])*)",
        ("env",),
        keyed=True,
    ),
    # Family: a name and a value given as two fields, in any syntax. JSON, dicts, YAML flow,
    # HCL, AWS shorthand (`Key=DB_PASSWORD,Value=…`): the name's field first, up to four
    # other fields between.
    Rule(
        "name-value-pair",
        rf"{_BEFORE}(?P<k>\\?[\"']?{_LABEL}\\?[\"']?[ \t]*[:=][ \t]*"
        rf"\\?[\"']?{_LABEL_NAME}\\?[\"']?)[ \t]*,[ \t\r\n]*"
        rf"(?:{_OTHER_FIELD}[ \t]*,[ \t\r\n]*){{0,4}}"
        rf"\\?[\"']?{_VALUE_FIELD}\\?[\"']?[ \t]*[:=][ \t]*(?P<s>{_EQ_VALUE})",
        ("value",),
        keyed=True,
        judge=_pair_value,
    ),
    Rule(
        "yaml-name-value",  # - name: DB_PASSWORD / value: …, on two lines
        rf"(?:^|\n)[ \t]*(?:-[ \t]+)?[\"']?{_LABEL}[\"']?[ \t]*:[ \t]*"
        rf"[\"']?(?P<k>{_LABEL_NAME})[\"']?[ \t]*\r?\n"
        r"(?:[ \t]*[\w-]+[ \t]*:[^\n]*\n){0,3}"
        rf"[ \t]*[\"']?{_VALUE_FIELD}[\"']?[ \t]*:[ \t]*(?P<s>{_LINE_VALUE})",
        ("value",),
        keyed=True,
    ),
    Rule(
        "flag-name-value",  # --name /app/db/password --value …, -Name apiKey -Value …
        rf"(?:^|\s)-{{1,2}}{_LABEL}[ \t]+[\"']?(?P<k>{_LABEL_NAME})[\"']?"
        r"(?:[ \t]+-{1,2}[\w-]+(?:[ \t]+[^\s\"'-]\S*)?){0,3}"
        rf"[ \t]+-{{1,2}}{_VALUE_FIELD}[ \t]+(?P<s>{_FLAG_VALUE})",
        ("value",),
        keyed=True,
    ),
    Rule(
        "xml-name-value",  # <add key="ApiKey" value="…"/>, <meta name="csrf-token" content=…>
        rf"[ \t\r\n]{_LABEL}[ \t]*=[ \t]*[\"'](?P<k>{_LABEL_NAME})[\"']"
        rf"(?:{_XML_ATTRIBUTE}){{0,4}}[ \t\r\n]+(?i:value|content)[ \t]*=[ \t]*"
        r"""(?P<s>"[^"<>\n]*"|'[^'<>\n]*')""",
        ("value", "content"),
        keyed=True,
    ),
    Rule(
        "xml-named-element",  # <entry key="password">…</entry>, <setting name="ApiKey"><value>…
        rf"<[\w:.-]+(?:{_XML_ATTRIBUTE}){{0,6}}[ \t\r\n]+{_LABEL}[ \t]*=[ \t]*"
        rf"[\"'](?P<k>{_LABEL_NAME})[\"'](?:{_XML_ATTRIBUTE}){{0,6}}[ \t\r\n]*>"
        rf"[ \t\r\n]*(?:<value>)?{_XML_TEXT}<",
        ("key", "name"),
        keyed=True,
    ),
    # An element named like a secret: <password>…</password>, <ns:ApiKey><![CDATA[…]]>.
    Rule(
        "xml-element",
        rf"<(?:[\w.-]+:)?(?P<k>{_NAME})(?:[ \t\r\n]{_ATTRIBUTES}*)?>{_XML_TEXT}</",
        ("</",),
        keyed=True,
    ),
    # Family: credentials in code.
    Rule(
        "call-name-value",  # setenv("API_TOKEN", "…"), headers.set("Authorization", "…")
        rf"(?:^|\W)(?P<k>\w+)\([ \t]*(?P<s>[\"']{_LABEL_NAME}[\"'][ \t]*,[ \t]*"
        r"""(?:"[^"\\\n]*"|'[^'\\\n]*'))""",
        _NAME_TRIGGERS,
        keyed=True,
        judge=_setter_pair,
    ),
    Rule(
        "keyword-pair",  # auth=("user", "pw"), http_auth=['u', 'pw'], auth=HTTPBasicAuth(…)
        rf"{_BEFORE}(?P<k>\\?[\"']?{_NAME}\\?[\"']?)[ \t]*[=:][ \t]*(?:[A-Za-z_][\w.]*)?"
        rf"[(\[][ \t]*(?:{_ARG})(?P<s>{_ARG_TAIL})[ \t]*,?[ \t]*[)\]]",
        _NAME_TRIGGERS,
        keyed=True,
        judge=_secret_items,
    ),
    Rule(
        "credential-call",  # HTTPBasicAuth("u", "pw"), smtp.login("u", "pw"), setApiKey("k")
        rf"(?:^|\W)(?P<k>\w{_RUN}(?:(?i:login|bind|sign_?in)|{_TRIGGER_RE})"
        rf"\w{_RUN})\((?P<s>[ \t]*(?:{_ARG})(?:[ \t]*,[ \t]*(?:{_ARG})){{0,3}})[ \t]*,?[ \t]*\)",
        ("login", "bind", "signin", "sign_in", *_NAME_TRIGGERS),
        keyed=True,
        judge=_credential_call,
    ),
    # Family: a secret fed on standard input, to a program STDIN_READERS names.
    Rule(
        "piped-secret",  # echo pw | sudo -S …, printf 'u:pw\n' | chpasswd
        r"(?:^|[\s;&|(`])(?:echo|printf)(?:[ \t]+-[neE]{1,3})*[ \t]+"
        r"""(?:(?:'%s(?:\\n)?'|"%s(?:\\n)?")[ \t]+)?"""
        rf"(?P<s>(?:{_WORD_ARG})(?:[ \t]+(?:{_WORD_ARG})){{0,7}})[ \t]*\|[ \t]*"
        r"(?P<k>[^\n;&|()]+)",
        ("echo", "printf"),
        keyed=True,
        judge=_stdin_secret,
    ),
    Rule(
        "here-string-secret",  # sudo -S cmd <<< 'pw'
        rf"(?:^|[\n;&|(`])[ \t]*(?P<k>[^\n;&|()<>]+)<<<[ \t]*(?P<s>{_WORD_ARG})",
        ("<<<",),
        keyed=True,
        judge=_here_string_secret,
    ),
)
# fmt: on
TEXT_RULES = _TEXT_RULES


# --------------------------------------------------------------------------------------------
# Command lines: the argv table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArgRule:
    """How `programs` take a secret on their command line. `flags` empty: a positional argument
    (the first, or the `position`th after `within`). `setting`: `<flag> NAME VALUE` (without
    flags: `NAME VALUE` first), VALUE masked when NAME is a secret's."""

    name: str
    programs: tuple[str, ...]
    flags: tuple[str, ...] = ()
    glued: bool = True  # -pX, --flag=X, /p:X
    spaced: bool = True  # -p X
    within: str | None = None  # a word that must come first: docker *login* -p ("a|b": either)
    after: str | None = None  # mask only what follows this: user:pw → user:****
    until: str | None = None  # ... and precedes this: scott/tiger@db → scott/****@db
    value_name: str = ""  # what the value is, for readability checks (a cookie jar path)
    setting: bool = False
    any_name: bool = False  # a setting whose every value is a secret (a secret store's)
    position: int = 0  # without flags: which positional argument (after `within`); 0 is 1
    needs: str = ""  # one-letter options all given first (htpasswd's -b), clusters too (-bc)
    unless: str = ""  # ... and none of these (htpasswd -n)
    valued: tuple[str, ...] = ()  # options whose value is no positional (htpasswd -C 10)
    windows: bool = False  # options start with `/` too, and match in any case (/P:, /RP)


_MYSQL = ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlcheck", "mysqlshow",
          "mysqlpump", "mysqlbinlog", "mysqlslap", "mariadb", "mariadb-dump", "mariadb-admin",
          "mariadb-import", "mariadb-check")  # fmt: skip
_MONGO = ("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport",
          "mongostat", "mongotop", "mongofiles")  # fmt: skip
_LDAP = ("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldapwhoami", "ldappasswd",
         "ldapcompare", "ldapmodrdn", "ldapexop", "ldapurl")  # fmt: skip
_LOGIN = ("docker", "podman", "buildah", "nerdctl", "skopeo", "oras", "helm", "oc", "az", "cf")

# fmt: off
ARG_RULES: tuple[ArgRule, ...] = (
    ArgRule("mysql -pX", _MYSQL, ("-p",), spaced=False),  # `-p db`: a prompt, then a database
    ArgRule("sshpass -p", ("sshpass",), ("-p",)),
    ArgRule("redis-cli -a", ("redis-cli", "valkey-cli", "keydb-cli"), ("-a",)),
    ArgRule("registry login -p", _LOGIN, ("-p",), within="login"),
    ArgRule("twine upload -p", ("twine",), ("-p",)),
    ArgRule("mongo -p", _MONGO, ("-p",)),
    ArgRule("sqlcmd -P", ("sqlcmd", "bcp", "osql"), ("-P",)),
    ArgRule("ldap -w", _LDAP, ("-w",)),
    ArgRule("ssh-keygen -N/-P", ("ssh-keygen",), ("-N", "-P")),
    ArgRule("plink -pw", ("plink", "pscp", "psftp"), ("-pw",), glued=False),
    ArgRule("zip -P", ("zip", "unzip", "zipcloak"), ("-P",)),
    ArgRule("7z -pX", ("7z", "7za", "7zr", "rar", "unrar"), ("-p",), spaced=False),
    ArgRule("openssl -k", ("openssl",), ("-k",)),
    ArgRule("openssl -pass", ("openssl",), ("-pass", "-passin", "-passout"), glued=False),
    ArgRule("curl -u", ("curl",), ("-u", "--user", "-U", "--proxy-user"), after=":"),
    ArgRule("curl -b", ("curl",), ("-b", "--cookie"), value_name="cookie"),
    ArgRule("curl -E", ("curl",), ("-E", "--cert"), after=":"),
    ArgRule("smbclient -U", ("smbclient", "rpcclient", "smbget"), ("-U", "--user"), after="%"),
    ArgRule("lftp -u", ("lftp",), ("-u",), after=","),
    ArgRule("sqlplus user/pw", ("sqlplus", "rman", "expdp", "impdp"), after="/", until="@"),
    ArgRule("nmcli password", ("nmcli",), ("password", "wifi-sec.psk", "802-1x.password")),
    ArgRule("gh secret --body", ("gh",), ("-b", "--body"), within="secret"),
    ArgRule("kubectl --from-literal", ("kubectl", "oc"), ("--from-literal",), within="secret",
            after="="),
    ArgRule("ngrok authtoken", ("ngrok",), ("authtoken", "add-authtoken"), glued=False),
    ArgRule("doctl auth -t", ("doctl",), ("-t",), within="auth"),
    ArgRule("config set", ("npm", "yarn", "pnpm", "git"), ("set",), within="config",
            setting=True),
    ArgRule("aws configure set", ("aws",), ("set",), within="configure", setting=True),
    # A password at a position: htpasswd -b FILE USER PW, net user NAME PW, …
    ArgRule("htpasswd -b file user pw", ("htpasswd",), position=3, needs="b", unless="n",
            valued=("-C", "-r")),
    ArgRule("htpasswd -nb user pw", ("htpasswd",), position=2, needs="nb", valued=("-C", "-r")),
    ArgRule("net user name pw", ("net",), within="user", position=2, windows=True),
    ArgRule("rabbitmqctl add_user u pw", ("rabbitmqctl",),
            within="add_user|change_password|authenticate_user", position=2,
            valued=("-n", "--node", "-t", "--timeout")),
    ArgRule("mysqladmin password pw", ("mysqladmin", "mariadb-admin"), within="password",
            position=1),
    ArgRule("openssl passwd pw", ("openssl",), within="passwd", position=1,
            valued=("-salt", "-in")),
    # A password after an option that is not named like one.
    ArgRule("useradd -p hash", ("useradd", "usermod"), ("-p",)),
    ArgRule("psexec -p", ("psexec", "psexec64", "paexec"), ("-p",)),
    ArgRule("ipmitool -P", ("ipmitool",), ("-P",)),
    ArgRule("mosquitto -P", ("mosquitto_pub", "mosquitto_sub", "mosquitto_rr"), ("-P",)),
    ArgRule("ldappasswd -s/-a", ("ldappasswd",), ("-s", "-a")),
    ArgRule("security -w", ("security",), ("-w",),
            within="add-generic-password|add-internet-password"),
    ArgRule("az keyvault secret --value", ("az",), ("--value",), within="secret"),
    ArgRule("freerdp /p:", ("xfreerdp", "wlfreerdp", "sdl-freerdp", "cmdkey", "wmic"),
            ("/p:", "/pass:", "/password:"), spaced=False, windows=True),
    ArgRule("schtasks /rp", ("schtasks", "setx"), ("/rp", "/p"), glued=False, windows=True),
    # Variables set with a space, values handed to a secret store.
    ArgRule("setx NAME value", ("setx",), setting=True, windows=True,
            valued=("/s", "/u", "/p", "/k")),
    ArgRule("setenv NAME value", ("setenv",), setting=True),
    ArgRule("launchctl setenv", ("launchctl",), ("setenv",), setting=True),
    ArgRule("doppler secrets set", ("doppler",), ("set",), within="secrets", setting=True,
            any_name=True),
    ArgRule("dotnet user-secrets set", ("dotnet",), ("set",), within="user-secrets",
            setting=True, any_name=True),
)
# fmt: on


@dataclass(frozen=True, slots=True)
class _Arg:
    rule: ArgRule
    flags: tuple[bytes, ...]  # lowercase for Windows programs
    within: frozenset[bytes] | None
    after: bytes | None
    until: bytes | None
    position: int
    needs: bytes
    unless: bytes


def _arg_table() -> dict[str, tuple[_Arg, ...]]:
    table: dict[str, list[_Arg]] = {}
    for rule in ARG_RULES:
        compiled = _Arg(
            rule,
            tuple((f.lower() if rule.windows else f).encode() for f in rule.flags),
            None if rule.within is None else frozenset(w.encode() for w in rule.within.split("|")),
            None if rule.after is None else rule.after.encode(),
            None if rule.until is None else rule.until.encode(),
            rule.position or 1,
            rule.needs.encode(),
            rule.unless.encode(),
        )
        for program in rule.programs:
            table.setdefault(program, []).append(compiled)
    return {program: tuple(rules) for program, rules in table.items()}


_ARGS = _arg_table()
# Per program: the options taking a value that is no positional, and whether `/x` options.
_OPTIONS = {
    program: (
        frozenset(v.lower().encode() for a in rules for v in a.rule.valued),
        any(a.rule.windows for a in rules),
    )
    for program, rules in _ARGS.items()
}
_NO_OPTIONS: tuple[frozenset[bytes], bool] = (frozenset(), False)
_REDIRECTION = re.compile(rb"\d*(?:<<?|>>?)&?")
_REDIRECTION_FIRST = frozenset({b"<", b">", *(str(d).encode() for d in range(10))})
_SHELL_SEPARATORS = frozenset({b";", b"|", b"||", b"&", b"&&"})


def _unquote(token: bytes) -> bytes:
    if len(token) >= 2 and token[0] in b"\"'" and token[-1] == token[0]:
        return token[1:-1]
    return token


@lru_cache(maxsize=4096)
def _program(token: bytes) -> str | None:
    base = _unquote(token).rsplit(b"/", 1)[-1].rsplit(b"\\", 1)[-1].lower()
    if base.endswith(b".exe"):
        base = base[:-4]
    name = base.decode("latin-1")
    return name if name in _ARGS else None


Found = list[tuple[int, int, int]]  # (token index, start, end) within the token


def _found(found: Found, index: int, spans: list[tuple[int, int]]) -> None:
    found.extend((index, start, end) for start, end in spans)


@dataclass(slots=True)
class _Given:
    """What one command has been given so far."""

    options: tuple[frozenset[bytes], bool] = _NO_OPTIONS  # its program's (`_OPTIONS`)
    seen: set[bytes] = field(default_factory=set)  # its words: `login` of `docker login`
    words: list[bytes] = field(default_factory=list)  # the same in order, option values out
    first: dict[bytes, int] = field(default_factory=dict)  # each word's first place in words
    letters: set[int] = field(default_factory=set)  # one-letter options, clusters split
    value_at: int = -1  # the index of the value of an option that takes one

    def option(self, token: bytes) -> bool:
        """An option (`-x`, `/x` for Windows programs) or a redirection (`<`, `2>file`)."""
        first = token[:1]
        return (
            first == b"-"
            or (first == b"/" and self.options[1])
            or (first in _REDIRECTION_FIRST and _REDIRECTION.match(token) is not None)
        )

    def note(self, token: bytes, i: int, step: int) -> None:
        if not token:
            return
        if self.option(token):
            if token[0] == 45 and token[1:2] != b"-" and token[1:].isalpha():
                self.letters.update(token[1:])
            if step > 1:
                return
            if self.options[0] and token.lower() in self.options[0]:
                self.value_at = i + 1  # the option's value
            elif token[0] != 45 and _REDIRECTION.fullmatch(token):
                self.value_at = i + 1  # the redirection's file
            return
        word = _unquote(token)
        self.seen.add(word)
        if i != self.value_at:
            self.first.setdefault(word, len(self.words))
            self.words.append(word)


def _apply_arg(arg: _Arg, tokens: Sequence[bytes], i: int, given: _Given, found: Found) -> int:
    """Tokens consumed by `arg` at `tokens[i]` (0: it does not apply there)."""
    rule, token = arg.rule, tokens[i]
    key = token.lower() if rule.windows else token
    spans = _value_spans
    if rule.setting:
        if arg.flags:
            if key != arg.flags[0]:
                return 0
            at = i + 1
        elif given.option(token) or given.words or i == given.value_at:
            return 0
        else:
            at = i
        if at + 1 >= len(tokens):
            return 0
        if rule.any_name or is_secret_name(_unquote(tokens[at]).decode("latin-1")):
            _found(found, at + 1, spans(tokens[at + 1], 0, "value"))
        return at + 2 - i
    if not arg.flags:
        base = -1
        if arg.within is not None:
            base = min((given.first[w] for w in arg.within if w in given.first), default=-2)
            if base < 0:
                return 0
        if len(given.words) - base != arg.position:
            return 0
        if given.option(token) or i == given.value_at:
            return 0
        if any(c not in given.letters for c in arg.needs) or any(
            c in given.letters for c in arg.unless
        ):
            return 0
        _found(found, i, spans(token, 0, rule.value_name, arg.after, arg.until, positional=True))
        return 1
    for flag in arg.flags:
        if key == flag:
            following = tokens[i + 1] if i + 1 < len(tokens) else None
            if not rule.spaced or following is None:
                return 1
            if flag.startswith(b"-") and following.startswith(b"-"):
                return 1
            _found(found, i + 1, spans(following, 0, rule.value_name, arg.after, arg.until))
            return 2
        if not rule.glued:
            continue
        if flag.endswith(b":") and key.startswith(flag):
            cut = len(flag)
        elif flag.startswith(b"--") and token.startswith(flag + b"="):
            cut = len(flag) + 1
        elif len(flag) == 2 and token.startswith(flag) and len(token) > 2:
            cut = 2
        else:
            continue
        _found(found, i, spans(token[cut:], cut, rule.value_name, arg.after, arg.until))
        return 1
    return 0


def _generic_flag(tokens: Sequence[bytes], i: int, found: Found) -> int:
    """`--password X`, `--api-key=X`, `-storepass X`: any program's flag named like a secret."""
    token = tokens[i]
    if not token.startswith(b"-"):
        return 0
    name, eq, rest = token.partition(b"=")
    flag = name.decode("latin-1")
    if len(flag.lstrip("-")) < 3 or not _flag_name(name) or not is_secret_name(flag):
        return 0
    if eq:
        _found(found, i, _value_spans(rest, len(name) + 1, flag))
        return 1
    if i + 1 < len(tokens) and not tokens[i + 1].startswith(b"-"):
        _found(found, i + 1, _value_spans(tokens[i + 1], 0, flag))
        return 2
    return 1


def _scan_argv(tokens: Sequence[bytes], program: str | None = None) -> Found:
    """The secret spans in a command's arguments; `program` is who they belong to when the
    list does not start with it (an `args` list beside `"command": "mysql"`)."""
    found: Found = []
    rules = _ARGS.get(program or "", ())
    given = _Given(_OPTIONS.get(program or "", _NO_OPTIONS))
    i = 0
    while i < len(tokens):
        token = tokens[i]
        named = _program(token)
        if named is not None:
            rules, given = _ARGS[named], _Given(_OPTIONS[named])
            i += 1
            continue
        if token in _SHELL_SEPARATORS:
            rules, given = (), _Given()
            i += 1
            continue
        step = 0
        for arg in rules:
            if arg.within is None or not arg.within.isdisjoint(given.seen):
                step = _apply_arg(arg, tokens, i, given, found)
                if step:
                    break
        if not step:
            step = _generic_flag(tokens, i, found)
        given.note(token, i, step)
        i += max(step, 1)
    return found


# --------------------------------------------------------------------------------------------
# Compiled
# --------------------------------------------------------------------------------------------


class _Match(Protocol):
    def span(self, group: int = ..., /) -> tuple[int, int]: ...
    def start(self, group: int = ..., /) -> int: ...


class _Matcher(Protocol):
    def finditer(self, string: bytes, /) -> Iterator[_Match]: ...


def _compile(pattern: str) -> tuple[_Matcher, dict[str, int]]:
    raw = pattern.encode("ascii")
    if _re2 is not None:
        options = _re2.Options()
        options.encoding = _re2.Options.Encoding.LATIN1
        options.log_errors = False
        compiled: Any = _re2.compile(raw, options)
        groups = {k.decode(): v for k, v in compiled.groupindex.items()}
        matcher: _Matcher = compiled
        return matcher, groups
    fallback = re.compile(raw)  # pragma: no cover - without google-re2
    return fallback, dict(fallback.groupindex)  # pragma: no cover


@dataclass(frozen=True, slots=True)
class _Compiled:
    rule: Rule
    matcher: _Matcher
    secret: int
    key: int | None
    triggers: frozenset[bytes]


def _build(rules: Sequence[Rule]) -> tuple[_Compiled, ...]:
    compiled: list[_Compiled] = []
    for rule in rules:
        matcher, groups = _compile(rule.pattern)
        key = groups.get("k")
        if rule.keyed != (key is not None) or "s" not in groups:
            raise ValueError(f"masking rule {rule.name}: group s (and k when keyed) expected")
        if not rule.triggers or any(t != t.lower() for t in rule.triggers):
            raise ValueError(f"masking rule {rule.name}: lowercase triggers expected")
        triggers = frozenset(t.encode() for t in rule.triggers)
        compiled.append(_Compiled(rule, matcher, groups["s"], key, triggers))
    return tuple(compiled)


def _any_of(patterns: Sequence[str]) -> _Matcher | None:
    """One RE2 program for all the patterns, groups dropped: a text none of them matches
    (most texts) costs one pass. RE2 falls back from its DFA to an NFA when memory runs out,
    so the answer stays exact. None without RE2."""
    if _re2 is None:  # pragma: no cover
        return None
    branches = []
    for pattern in patterns:
        pattern = re.sub(r"\(\?P<\w+>", "(?:", pattern)
        if pattern.startswith("(?i)"):
            pattern = "(?i:" + pattern[4:] + ")"
        branches.append(f"(?:{pattern})")
    options = _re2.Options()
    options.encoding = _re2.Options.Encoding.LATIN1
    options.log_errors = False
    options.never_capture = True
    options.max_mem = 64 << 20
    matcher: _Matcher = _re2.compile("|".join(branches).encode("ascii"), options)
    return matcher


_COMPILED = _build(_TEXT_RULES)
_SEPARATION = r"(?:[ \t]|\\\r?\n)+"
_TOKEN = r"""(?:"[^"\n]*"|'[^'\n]*'|\\[^\r\n]|[^\s;|&"'\\])+"""
_PROGRAM_NAMES = sorted(_ARGS, key=len, reverse=True)
# No groups: RE2 finds a command's bounds with its DFA alone; the program is its first word.
_COMMAND_PATTERN = (
    r"(?:^|[\s;|&(`'\"/=])(?:"
    + "|".join(re.escape(p) for p in _PROGRAM_NAMES)
    + rf")(?:\.exe)?(?:{_SEPARATION}{_TOKEN})+"
)
_COMMAND, _ = _compile(_COMMAND_PATTERN)
_COMMAND_BOUNDARY = frozenset(b" \t\r\n\v\f;|&(`'\"/=")
_PROGRAM_END = re.compile(rb"[ \t\\]")
_COMMAND_TRIGGERS = tuple(p.encode() for p in _PROGRAM_NAMES)
_TOKEN_RE = re.compile(_TOKEN.encode())  # within one command line: no ambiguity, plain `re`
_TRIGGERS = tuple(sorted({t for c in _COMPILED for t in c.triggers} | set(_COMMAND_TRIGGERS)))

# Encoded secrets: base64 whose decoding holds a secret (a token, a .env file, a docker config
# with an `auth`). Base64 of ASCII text starts every 4-character group with one of I-Z, a-f
# (the top six bits of a byte from 0x20 to 0x7e), so only runs of 4+ such groups after a
# character that is not base64 are decoded (hex, ids, words, base64 of binary data mostly are
# not); what decodes to printable text is masked whole when masking finds a secret in it.
# Each run is decoded once and its text masked without decoding again: the cost is at most
# that of masking the text a second time.
_B64 = r"A-Za-z0-9+/_\-"
# No group: RE2 finds a match's bounds with its DFA (a group would take its NFA over the run).
_ENCODED, _ = _compile(
    rf"(?:^|[^{_B64}])(?:[I-Za-f][{_B64}]{{3}}){{4,}}(?:[I-Za-f][{_B64}]{{1,2}})?={{0,2}}"
)
_B64_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_ANY = _any_of([r.pattern for r in _TEXT_RULES] + [_COMMAND_PATTERN])


def _trigger_set() -> Callable[[bytes], list[int] | None] | None:
    """All triggers as one RE2 set: the ones present in a text in one pass."""
    if _re2 is None:  # pragma: no cover
        return None
    options = _re2.Options()
    options.encoding = _re2.Options.Encoding.LATIN1
    options.log_errors = False
    options.never_capture = True
    options.max_mem = 64 << 20
    rset = _re2.Set.SearchSet(options)
    for trigger in _TRIGGERS:
        rset.Add(_re2.escape(trigger))
    rset.Compile()
    match: Callable[[bytes], list[int] | None] = rset.Match
    return match


_TRIGGER_SET = _trigger_set()


def _present(lowered: bytes) -> set[bytes]:
    """The triggers in `lowered`. Every rule has triggers and `_ANY` matched, so some trigger is
    there: an empty answer from the set means its DFA ran out of memory, and the plain loop
    answers instead."""
    found = _TRIGGER_SET(lowered) if _TRIGGER_SET is not None else None
    if found:
        return {_TRIGGERS[i] for i in found}
    return {t for t in _TRIGGERS if t in lowered}


def _command_spans(data: bytes, present: set[bytes], spans: list[tuple[int, int]]) -> None:
    if present.isdisjoint(_COMMAND_TRIGGERS):
        return
    for m in _COMMAND.finditer(data):
        ps, end = m.span()
        if data[ps] in _COMMAND_BOUNDARY:
            ps += 1
        at = _PROGRAM_END.search(data, ps, end)
        pe = at.start() if at is not None else end
        program = data[ps:pe].decode("latin-1")
        words = [(t.start(), t.end()) for t in _TOKEN_RE.finditer(data, pe, end)]
        tokens = [data[a:b] for a, b in words]
        for index, a, b in _scan_argv(tokens, program.removesuffix(".exe")):
            spans.append((words[index][0] + a, words[index][0] + b))


def _encoded_spans(data: bytes, spans: list[tuple[int, int]]) -> None:
    for m in _ENCODED.finditer(data):
        start, end = m.span()
        if data[start] not in _B64_CHARS:  # the character before the run
            start += 1
        decoded = _decoded_text(data[start:end])
        if decoded is None:
            continue
        if _ANY is not None and next(_ANY.finditer(decoded), None) is None:
            continue
        if _text_spans(decoded, [], decode=False):
            spans.append((start, end))


def _text_spans(
    data: bytes, keep: list[tuple[int, int]], *, decode: bool = True
) -> list[tuple[int, int]]:
    """The spans to mask in `data`; `keep` receives the prefixes that tell a token's kind
    (`ghp_`), kept even when a wider span (the value of GH_TOKEN=…) covers them. `decode`:
    look into base64 too (not within decoded text)."""
    lowered = data.lower()
    present = _present(lowered)
    spans: list[tuple[int, int]] = []
    for c in _COMPILED:
        if c.triggers.isdisjoint(present):
            continue
        for m in c.matcher.finditer(data):
            start, end = m.span(c.secret)
            if start < 0 or start == end:
                continue
            if c.key is not None:
                ks, ke = m.span(c.key)
                name = data[ks:ke]
                if c.rule.check is not None and not c.rule.check(name):
                    continue
                text_name = name.decode("latin-1")
                if c.rule.judge is not None:
                    spans.extend(c.rule.judge(text_name, data[start:end], start))
                elif is_secret_name(text_name):
                    spans.extend(_value_spans(data[start:end], start, text_name))
            elif c.rule.value:
                spans.extend(_value_spans(data[start:end], start, ""))
            elif data.startswith(_MASK, end):
                continue  # a kept prefix (ghp_****): masked already
            elif c.rule.check is None or c.rule.check(data[start:end]):
                while data[start] in _SPACE and start < end - 1:  # a key block's indentation
                    start += 1
                while data[end - 1] in _SPACE and end > start + 1:
                    end -= 1
                spans.append((start, end))
                if m.start() < start:
                    keep.append((m.start(), start))
    _command_spans(data, present, spans)
    if decode:
        _encoded_spans(data, spans)
    return spans


def _splice(
    data: bytes, spans: list[tuple[int, int]], keep: list[tuple[int, int]] | None = None
) -> bytes:
    """`data` with each span (overlapping or touching ones merged) replaced by MASK; a span
    starting inside a `keep` region and running past it starts after it instead."""
    if keep:
        keep.sort()
        starts = [a for a, _ in keep]
        moved = []
        for start, end in spans:
            at = bisect_right(starts, start) - 1
            if at >= 0 and keep[at][0] <= start < keep[at][1] < end:
                start = keep[at][1]
            moved.append((start, end))
        spans = moved
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    out: list[bytes] = []
    pos = 0
    for start, end in merged:
        out += (data[pos:start], _MASK)
        pos = end
    out.append(data[pos:])
    return b"".join(out)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------------------------
# The API
# --------------------------------------------------------------------------------------------


def mask_text(text: str) -> str:
    """`text` with every recognised secret replaced by `****` (its name, a prefix that tells its
    kind and the rest of the text stay)."""
    if not text:
        return text
    data = _encode(text)
    if _ANY is not None and next(_ANY.finditer(data), None) is None:
        if len(data) < 16:  # shorter than any base64 run decoded
            return text
        encoded: list[tuple[int, int]] = []  # no rule applies; base64 may still hide one
        _encoded_spans(data, encoded)
        return _decode(_splice(data, encoded)) if encoded else text
    keep: list[tuple[int, int]] = []
    spans = _text_spans(data, keep)
    return _decode(_splice(data, spans, keep)) if spans else text


def mask_argv(argv: Sequence[str], program: str | None = None) -> list[str]:
    """An argument vector with its secrets masked: the argv rules (`["mysql", "-pX"]`,
    `["curl", "-u", "admin:pw"]`, `["x", "--password", "pw"]`), then `mask_text` on each."""
    tokens = [_encode(a) for a in argv]
    by_token: dict[int, list[tuple[int, int]]] = {}
    for index, start, end in _scan_argv(tokens, program):
        by_token.setdefault(index, []).append((start, end))
    out: list[str] = []
    for index, arg in enumerate(argv):
        spans = by_token.get(index)
        out.append(mask_text(_decode(_splice(tokens[index], spans)) if spans else arg))
    return out


_PROGRAM_KEYS = ("command", "cmd", "program", "executable", "exe", "binary")
_ARGV_KEYS = frozenset({"args", "argv", "arguments", "command", "cmd"})


def _program_hint(value: dict[Any, Any]) -> str | None:
    for key in _PROGRAM_KEYS:
        item = value.get(key)
        if isinstance(item, str) and item and " " not in item.strip():
            return _program(_encode(item.strip()))
    return None


def _mask_secret(value: Any, name: str) -> Any:
    """A value under a secret's name: strings down to their secret part, numbers whole (a PIN),
    containers leaf by leaf (names about the secret, like `type` or `expires_in`, stay)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        data = _encode(value)
        spans = _value_spans(data, 0, name)
        return _decode(_splice(data, spans)) if spans else mask_text(value)
    if isinstance(value, int | float):
        return MASK
    if isinstance(value, dict):
        return {
            k: (
                mask_value(v)
                if isinstance(k, str) and _about_secret(k)
                else _mask_secret(v, k if isinstance(k, str) else name)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask_secret(v, name) for v in value]
    return MASK


def _about_secret(name: str) -> bool:
    """A name that describes a secret (type, expires_in, username) rather than holds one."""
    words = _words(name)
    if not words or is_secret_name(name):
        return False
    return (
        words[-1] in _ABOUT
        or any(w in _MEASURE for w in words)
        or (len(words) > 1 and words[0] in _SWITCH)
    )


def mask_value(value: Any) -> Any:
    """A JSON value with secrets masked: values under secret names (`password`, `auth`,
    `x-api-key`, `client_secret`, …) at any depth, `{"name": "DB_PASSWORD", "value": …}`
    pairs, argv lists by the argv rules (a bare `args` list by its sibling `command`'s
    program), every other string through `mask_text`."""
    return _mask(value, None)


# A name/value pair's fields, in any case: k8s and ECS env entries, AWS tags, CloudFormation
# parameters, Elastic Beanstalk options, SSM parameters, Postman variables.
_PAIR_LABELS = frozenset({"name", "key", "parameterkey", "parameter_key", "optionname"})
_PAIR_VALUES = frozenset({"value", "parametervalue", "parameter_value"})
_SECURE_TYPES = frozenset({"securestring", "secret", "password"})  # `"Type": "SecureString"`


def _pair(value: dict[Any, Any]) -> tuple[str, frozenset[str]] | None:
    """A name/value pair whose value is a secret: its name and its value's keys."""
    if len(value) > 8 or not any(isinstance(k, str) and k[-5:].lower() == "value" for k in value):
        return None
    label: str | None = None
    values: set[str] = set()
    secure = False
    for key, item in value.items():
        if not isinstance(key, str) or len(key) > 15:
            continue
        low = key.lower()
        if low in _PAIR_VALUES:
            values.add(key)
        elif isinstance(item, str):
            if low in _PAIR_LABELS and label is None:
                label = item
            elif low == "type" and item.lower() in _SECURE_TYPES:
                secure = True
    if not values or label is None or not (secure or is_secret_name(label)):
        return None
    return label, frozenset(values)


def _mask(value: Any, program: str | None) -> Any:
    if isinstance(value, dict):
        hint = _program_hint(value) or program
        pair = _pair(value)
        label, values = pair if pair is not None else ("", frozenset[str]())
        masked: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_name(key):
                item = _mask_secret(item, key)
            elif key in values:
                item = _mask_secret(item, label if is_secret_name(label) else "value")
            else:
                item = _mask(item, hint if key in _ARGV_KEYS else None)
            new_key = mask_text(key) if isinstance(key, str) else key
            if new_key != key and new_key in masked:
                new_key = f"{new_key} #{len(masked)}"
            masked[new_key] = item
        return masked
    if isinstance(value, list | tuple):  # (JSON has no tuples; Python callers may)
        if value and all(isinstance(v, str) for v in value):
            return mask_argv(value, program)
        return [_mask(item, None) for item in value]
    if isinstance(value, str):
        return mask_text(value)
    return value


# --------------------------------------------------------------------------------------------
# Fitting text
# --------------------------------------------------------------------------------------------


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
