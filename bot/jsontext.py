"""Compact JSON text for the hot path: stored columns and API answers.

orjson writes JSON about ten times faster than the standard library; it refuses integers beyond
64 bits (which agents' tool inputs may hold), and then the standard library writes them. Reading
stays with the standard library: orjson reads such integers as floats, silently.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> str:
    return dumpb(value).decode()


def dumpb(value: Any) -> bytes:
    """UTF-8 bytes, for an HTTP body."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
