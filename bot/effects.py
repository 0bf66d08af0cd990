"""The effect profile an approver reads: supplied with the call, or derived from name and input."""

from __future__ import annotations

import functools
from typing import Any

from bot import errors, jsontext
from bot.errors import ApprovalError

_KNOWN = ("summary", "effects", "targets", "risk", "reversible")
_EFFECT_WORDS = (
    (("bash", "shell", "exec", "process", "run", "terminal", "command"), "executes"),
    (("write", "edit", "create", "update", "patch", "save", "put"), "writes"),
    (("delete", "remove", "rm", "drop", "destroy"), "deletes"),
    (("read", "get", "list", "view", "search", "glob", "grep", "fetch"), "reads"),
    (("http", "fetch", "web", "request", "curl", "url", "api", "deploy"), "network"),
    (("pay", "charge", "transfer", "purchase", "buy", "refund"), "spends"),
    (("email", "mail", "slack", "post", "send", "tweet", "publish", "deploy"), "external"),
)
_TARGET_KEYS = ("path", "file_path", "file", "paths", "url", "host", "repository", "to", "target")
_COMMAND_KEYS = ("command", "cmd", "script")


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


@functools.lru_cache(maxsize=4096)
def _guess_effects(tool: str) -> tuple[str, ...]:
    """Effect words guessed from a tool's name (an agent uses few names, many times)."""
    lowered = tool.lower()
    effects: list[str] = []
    for words, effect in _EFFECT_WORDS:
        if any(word in lowered for word in words) and effect not in effects:
            effects.append(effect)
    return tuple(effects)


def derive(tool: str, tool_input: Any) -> dict[str, Any]:
    """A minimal profile: a summary, effect words guessed from the tool name, and targets."""
    effects = list(_guess_effects(tool))
    targets: list[str] = []
    summary = f"{tool} call"
    if isinstance(tool_input, dict):
        for key in _TARGET_KEYS:
            value = tool_input.get(key)
            if value is None:
                continue
            if isinstance(value, str) and value:
                targets.append(value)
            elif isinstance(value, list):
                targets.extend(str(v) for v in value[:10] if isinstance(v, str | int))
        for key in _COMMAND_KEYS:
            value = tool_input.get(key)
            if value is None:
                continue
            if isinstance(value, str) and value.strip():
                summary = f"{tool}: {_first_line(value)}"
                break
            if isinstance(value, list) and value:
                summary = f"{tool}: {_first_line(' '.join(str(v) for v in value))}"
                break
        else:
            if targets:
                summary = f"{tool} {targets[0]}"
    profile: dict[str, Any] = {"summary": summary, "derived": True}
    if effects:
        profile["effects"] = effects
    if targets:
        profile["targets"] = targets
    return profile


def _shown(key: str) -> str:
    """A key as an error names it: a NUL is written out, never sent back raw."""
    return key.replace("\x00", "\\u0000")


def _nul_in(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return f"{path}: NUL characters (U+0000) are not accepted" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                return f"{path}.{_shown(key)}: NUL characters (U+0000) are not accepted in keys"
            found = _nul_in(item, f"{path}.{key}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _nul_in(item, f"{path}[{index}]")
            if found:
                return found
    return None


def storable_problem(value: Any, path: str) -> str | None:
    """What keeps a JSON value out of the store, naming where (`tool_input.edits[0].text: …`),
    or None. PostgreSQL text cannot hold U+0000, in a key or a string at any depth."""
    try:
        text = jsontext.dumpb(value)
    except (TypeError, ValueError):
        return f"{path}: not a JSON value"
    if b"\\u0000" not in text:  # how JSON writes a NUL: almost every value stops here
        return None
    return _nul_in(value, path)  # None when the text merely holds a backslash and "u0000"


def check(profile: Any) -> None:
    """A supplied profile is an object the store can hold; refused: 422 naming the field."""
    if profile is None:
        return
    if not isinstance(profile, dict):
        raise ApprovalError(errors.INVALID_REQUEST, "effect_profile: an object", 422)
    problem = storable_problem(profile, "effect_profile")
    if problem:
        raise ApprovalError(errors.INVALID_REQUEST, problem, 422)


# What the service itself writes into a profile: how each command of a shell line was judged
# (bot/rules/compound.py). An agent's own profile never supplies these.
JUDGEMENT_KEYS = ("commands", "unseen", "commands_not_shown")


def without_judgement(profile: dict[str, Any] | None) -> dict[str, Any] | None:
    """A supplied profile without the keys only the service may write."""
    if not profile or not any(key in profile for key in JUDGEMENT_KEYS):
        return profile
    return {k: v for k, v in profile.items() if k not in JUDGEMENT_KEYS}


def normalise(profile: dict[str, Any] | None, tool: str, tool_input: Any) -> dict[str, Any]:
    """The profile to freeze on the call: the supplied one (already `check`ed), else a derived
    one."""
    if not profile:
        return derive(tool, tool_input)
    return dict(profile)


def known_keys() -> tuple[str, ...]:
    return _KNOWN
