"""Secrets out of chat messages, and long text cut to fit.

People read decisions in group chats, on phones, in notification previews; a token pasted into a
tool call must not travel there. Masking recognises common shapes and keeps just enough of each
(the key name, a recognisable prefix, the rest of the command) for the reader to know what was
there: `PGPASSWORD=**** psql …`, `ghp_****`, `curl -u admin:****`. It errs on the side of
masking: a false positive costs a few characters of context, a miss leaks a secret.

Three tables drive it; adding a shape is one row in one of them.

- `TEXT_RULES`: named patterns over free text. Each has a group `s`, the only part replaced.
  Keyed rows also capture a name (group `k`: `k=v`, `"k": "v"`, `--k v`, `K: v` headers) and
  mask only when that name is a secret's.
- The name vocabulary (`_STRONG`, `_LAST`, `_ABOUT`, …, read by `is_secret_name`): which names
  hold secrets. It serves JSON/dict keys at any depth (`mask_value`) and the keyed text rows.
- `ARG_RULES`: how particular programs take secrets on their command line (`mysql -pX`,
  `curl -u user:pw`, `sshpass -p X`, `docker login -p X`), applied to argv lists and to the
  commands found in text. Long flags named like secrets (`--password X`, `--api-key=X`) need no
  row: any program's are masked.

What stays readable, on purpose: names that are about a secret rather than one
(`PASSWORD_MIN_LENGTH=8`, `token_count: 5`, `--password-file /etc/x`, `token_type: Bearer`,
`secret_name: db`), booleans and words like `required` or `none`, references (`$DB_PASSWORD`,
`${{ secrets.X }}`, `$(cat f)`), code (`password = getpass()`, `password: str`), paths given
where a key file or cookie jar is expected, public keys and certificates, Stripe publishable
keys (`pk_live_…`, public by design), ids (`aws_access_key_id` itself, though the AKIA… value is
masked; `private_key_id`, `session_id`), `mysql -p db` (mysql's `-p` takes no separate value:
it prompts) and `-p 8080` for other programs.

Matching runs on RE2 (google-re2, linear time whatever the input) over UTF-8 bytes in Latin-1
mode; without it, on `re`, with patterns kept free of ambiguous nested repetition. Each row
names the substrings one of which every match contains (`triggers`), so a message skips the rows
that cannot apply.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
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
    "psk",
)  # fmt: skip
# A word ending in one of these makes a secret's name wherever it stands (pgpassword, authtoken).
_STRONG_ROOTS = ("password", "passwd", "passphrase", "secret", "token")
# Words that do the same as a whole.
_STRONG = frozenset(
    {
        "passwords", "secrets", "credential", "credentials", "creds", "passcode", "apikey",
        "accesskey", "secretkey", "privatekey", "masterkey", "signingkey", "encryptionkey",
        "licensekey", "accountkey", "sessionkey", "authkey", "storepass", "keypass",
        "srcstorepass", "deststorepass", "srckeypass", "destkeypass", "dbpass", "adminpass",
        "rootpass", "newpass", "oldpass",
    }
)  # fmt: skip
# Words that make a secret's name only as its last word (basic_auth, db_pass, x_amz_signature).
_LAST = frozenset(
    {
        "pass", "pwd", "pw", "auth", "authorization", "cookie", "cookies", "sig", "signature",
        "bearer", "otp", "psk",
    }
)  # fmt: skip
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
        "list", "array", "enum", "kv", "dynamo",
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
    if any(w in _STRONG or w.endswith(_STRONG_ROOTS) for w in words):
        return True
    if words[-1] == "key":
        return len(words) > 1 and words[-2] not in _KEY_NOT_SECRET
    return words[-1] in _LAST


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
    prefix = _KEPT_PREFIX.match(value, start, end)
    if prefix is not None:
        start = prefix.end()
    if start >= end:
        return []
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


@dataclass(frozen=True, slots=True)
class Rule:
    """A shape of secret in free text. `pattern` has a group `s`, the part replaced by MASK."""

    name: str
    pattern: str
    triggers: tuple[str, ...]  # lowercase substrings; every match contains one of them
    keyed: bool = False  # group `k` names `s`: masked only when `is_secret_name(k)`
    value: bool = False  # `s` is a value (quotes, `$REF`, `Bearer` stay), not a token's body
    check: Callable[[bytes], bool] | None = None  # a last word on `s` (on `k` when keyed)


# Pieces of the keyed patterns.
_TRIGGER_RE = "(?i:" + "|".join(_NAME_TRIGGERS) + ")"
# A name with a trigger in it. RE2 is linear whatever the repetition; on `re` the runs are
# bounded so that a long run of name characters costs at most 65² steps.
_RUN = "*" if _re2 is not None else "{0,64}"
_NAME = rf"[\w.-]{_RUN}{_TRIGGER_RE}[\w.-]{_RUN}"
_BEFORE = r"(?:^|[^\w.-])"  # names start after a non-name character: linear even on `re`
_QUOTED = r'\\"(?:[^"\\\n]|\\[^"\n])*\\"|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\''
_FIRST = r"[^\s&;,'\"\\\[\](){}<>|`=]"  # a bare value's first character
_EQ_VALUE = rf"{_QUOTED}|{_FIRST}[^\s&;,'\"\]}})<>|`]*"  # to the next space or separator
_COLON_WORD = rf"{_QUOTED}|{_FIRST}[^\s&;,'\"\]}})<>|`@]*"
_LINE_VALUE = rf"{_QUOTED}|{_FIRST}[^\r\n,;'\"\]}})<>|`#]*"  # YAML: to the end of the line
_FLAG_VALUE = r"""\"[^"\n]*\"|'[^'\n]*'|[^\s;|&'"<>()`-][^\s;|&'"<>()`]*"""

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
)
# fmt: on
TEXT_RULES = _TEXT_RULES


# --------------------------------------------------------------------------------------------
# Command lines: the argv table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArgRule:
    """How `programs` take a secret on their command line. `flags` empty: the first positional
    argument. `setting`: `<flag> NAME VALUE`, VALUE masked when NAME is a secret's."""

    name: str
    programs: tuple[str, ...]
    flags: tuple[str, ...] = ()
    glued: bool = True  # -pX, --flag=X
    spaced: bool = True  # -p X
    within: str | None = None  # a word that must come first: docker *login* -p
    after: str | None = None  # mask only what follows this: user:pw → user:****
    until: str | None = None  # ... and precedes this: scott/tiger@db → scott/****@db
    value_name: str = ""  # what the value is, for readability checks (a cookie jar path)
    setting: bool = False


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
)
# fmt: on


@dataclass(frozen=True, slots=True)
class _Arg:
    rule: ArgRule
    flags: tuple[bytes, ...]
    within: bytes | None
    after: bytes | None
    until: bytes | None


def _arg_table() -> dict[str, tuple[_Arg, ...]]:
    table: dict[str, list[_Arg]] = {}
    for rule in ARG_RULES:
        compiled = _Arg(
            rule,
            tuple(f.encode() for f in rule.flags),
            None if rule.within is None else rule.within.encode(),
            None if rule.after is None else rule.after.encode(),
            None if rule.until is None else rule.until.encode(),
        )
        for program in rule.programs:
            table.setdefault(program, []).append(compiled)
    return {program: tuple(rules) for program, rules in table.items()}


_ARGS = _arg_table()
_SHELL_SEPARATORS = frozenset({b";", b"|", b"||", b"&", b"&&"})


def _unquote(token: bytes) -> bytes:
    if len(token) >= 2 and token[0] in b"\"'" and token[-1] == token[0]:
        return token[1:-1]
    return token


def _program(token: bytes) -> str | None:
    base = _unquote(token).rsplit(b"/", 1)[-1].rsplit(b"\\", 1)[-1].lower()
    if base.endswith(b".exe"):
        base = base[:-4]
    name = base.decode("latin-1")
    return name if name in _ARGS else None


Found = list[tuple[int, int, int]]  # (token index, start, end) within the token


def _found(found: Found, index: int, spans: list[tuple[int, int]]) -> None:
    found.extend((index, start, end) for start, end in spans)


def _apply_arg(arg: _Arg, tokens: Sequence[bytes], i: int, seen: set[bytes], found: Found) -> int:
    """Tokens consumed by `arg` at `tokens[i]` (0: it does not apply there)."""
    rule, token = arg.rule, tokens[i]
    spans = _value_spans
    if rule.setting:
        if token != arg.flags[0] or i + 2 >= len(tokens):
            return 0
        if is_secret_name(_unquote(tokens[i + 1]).decode("latin-1")):
            _found(found, i + 2, spans(tokens[i + 2], 0, "value"))
        return 3
    if not arg.flags:
        if seen or token.startswith(b"-"):
            return 0
        _found(found, i, spans(token, 0, rule.value_name, arg.after, arg.until, positional=True))
        return 1
    for flag in arg.flags:
        if token == flag:
            following = tokens[i + 1] if i + 1 < len(tokens) else None
            if not rule.spaced or following is None:
                return 1
            if flag.startswith(b"-") and following.startswith(b"-"):
                return 1
            _found(found, i + 1, spans(following, 0, rule.value_name, arg.after, arg.until))
            return 2
        if not rule.glued:
            continue
        if flag.startswith(b"--") and token.startswith(flag + b"="):
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
    seen: set[bytes] = set()
    i = 0
    while i < len(tokens):
        token = tokens[i]
        named = _program(token)
        if named is not None:
            rules, seen = _ARGS[named], set()
            i += 1
            continue
        if token in _SHELL_SEPARATORS:
            rules, seen = (), set()
            i += 1
            continue
        step = 0
        for arg in rules:
            if arg.within is None or arg.within in seen:
                step = _apply_arg(arg, tokens, i, seen, found)
                if step:
                    break
        if not step:
            step = _generic_flag(tokens, i, found)
        if not token.startswith(b"-"):
            seen.add(_unquote(token))
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
_COMMAND_PATTERN = (
    r"(?:^|[\s;|&(`'\"/=])(?P<p>"
    + "|".join(re.escape(p) for p in _PROGRAM_NAMES)
    + rf")(?:\.exe)?(?P<rest>(?:{_SEPARATION}{_TOKEN})+)"
)
_COMMAND, _COMMAND_GROUPS = _compile(_COMMAND_PATTERN)
_COMMAND_TRIGGERS = tuple(p.encode() for p in _PROGRAM_NAMES)
_TOKEN_RE = re.compile(_TOKEN.encode())  # within one command line: no ambiguity, plain `re`
_TRIGGERS = tuple(sorted({t for c in _COMPILED for t in c.triggers} | set(_COMMAND_TRIGGERS)))
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
    program, rest = _COMMAND_GROUPS["p"], _COMMAND_GROUPS["rest"]
    for m in _COMMAND.finditer(data):
        start, end = m.span(rest)
        words = [(t.start(), t.end()) for t in _TOKEN_RE.finditer(data, start, end)]
        ps, pe = m.span(program)
        tokens = [data[a:b] for a, b in words]
        for index, a, b in _scan_argv(tokens, data[ps:pe].decode("latin-1").lower()):
            spans.append((words[index][0] + a, words[index][0] + b))


def _text_spans(data: bytes, keep: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans to mask in `data`; `keep` receives the prefixes that tell a token's kind
    (`ghp_`), kept even when a wider span (the value of GH_TOKEN=…) covers them."""
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
                if c.rule.check is None or c.rule.check(name):
                    if is_secret_name(name.decode("latin-1")):
                        spans.extend(_value_spans(data[start:end], start, name.decode("latin-1")))
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
        return text
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


def _mask(value: Any, program: str | None) -> Any:
    if isinstance(value, dict):
        hint = _program_hint(value) or program
        label = value.get("name", value.get("key"))
        pair = isinstance(label, str) and "value" in value and is_secret_name(label)
        masked: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_secret_name(key):
                item = _mask_secret(item, key)
            elif pair and key == "value":
                item = _mask_secret(item, str(label))
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
