"""Paths and text (SPEC 2.4): walking `tool_input` along a dotted path to the text a glob reads.

- an object segment is a key; on an array the segment must be a decimal index (ASCII digits,
  leading zeros allowed) in range;
- the text is a string as it is, or an array of scalars joined by one space in JSON spelling
  (`["rm", "-rf", "/"]` reads `rm -rf /`, `[]` reads the empty string);
- anything else (missing, object, a lone number/boolean/null, an array holding an object or an
  array) has no text.

The engine works on the UTF-8 bytes of the text; a lone surrogate (possible in parsed JSON) is
encoded with `surrogatepass` rather than raising.
"""

from __future__ import annotations

import json
from typing import Any

Step = tuple[str, int | None]


def encode_text(text: str) -> bytes:
    """UTF-8 bytes of a string; a lone surrogate is passed through instead of raising."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # beyond sys.get_int_max_str_digits(): spell it in chunks
        chunks: list[str] = []
        rest = abs(value)
        while rest:
            rest, low = divmod(rest, 10**1000)
            chunks.append(str(low))
        head, *tail = reversed(chunks)
        return ("-" if value < 0 else "") + head + "".join(c.zfill(1000) for c in tail)


def _join_scalars(items: list[Any]) -> str | None:
    """An array of scalars joined by one space in JSON spelling; None if any item is not."""
    parts: list[str] = []
    for item in items:
        if isinstance(item, str):
            parts.append(item)
        elif item is None:
            parts.append("null")
        elif item is True:
            parts.append("true")
        elif item is False:
            parts.append("false")
        elif isinstance(item, int):
            parts.append(_int_text(item))
        elif isinstance(item, float):
            parts.append(json.dumps(item))
        else:
            return None
    return " ".join(parts)


def text_bytes_at(value: object, steps: tuple[Step, ...]) -> bytes | None:
    """The UTF-8 text at a path (SPEC 2.4), or None when there is no text."""
    for key, index in steps:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list):
            if index is None or index >= len(value):
                return None
            value = value[index]
        else:
            return None
    return leaf_text(value)


def leaf_text(value: object) -> bytes | None:
    """The text of the value a path reached: a string, an array of scalars, or nothing."""
    if isinstance(value, str):
        return encode_text(value)
    if isinstance(value, list):
        joined = _join_scalars(value)
        return None if joined is None else encode_text(joined)
    return None


def text_at(tool_input: object, path: str) -> str | None:
    """The text at a dotted path, for display and tests (the engine works on bytes)."""
    raw = text_bytes_at(tool_input, path_steps(path))
    return None if raw is None else raw.decode("utf-8", "surrogatepass")


def path_steps(path: str) -> tuple[Step, ...]:
    """Each segment with its array index (None when the segment cannot index an array)."""
    out: list[Step] = []
    for seg in path.split("."):
        # no array holds 10**18 items: longer digit runs are never in range (and int() of
        # thousands of digits would raise)
        index = int(seg) if seg.isascii() and seg.isdigit() and len(seg) <= 18 else None
        out.append((seg, index))
    return tuple(out)
