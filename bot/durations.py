"""Durations as people write them: "24h", "10m", "90s", "1h30m", or a number of seconds."""

from __future__ import annotations

import re
from datetime import timedelta

_PART = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s|ms)")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(value: object) -> timedelta:
    """Parse a duration; raise ValueError with a readable message on anything else."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value!r}")
        return timedelta(seconds=value)
    if not isinstance(value, str):
        raise ValueError(f"not a duration: {value!r}")
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds < 0:
            raise ValueError(f"a duration cannot be negative: {value!r}")
        return timedelta(seconds=seconds)
    pos = 0
    total = 0.0
    for part in _PART.finditer(text):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _UNIT_SECONDS[part.group(2)]
        pos = part.end()
    if pos == 0 or pos != len(text):
        raise ValueError(
            f'not a duration: {value!r} (write "24h", "10m", "90s", "1h30m" or seconds)'
        )
    return timedelta(seconds=total)


def format_duration(delta: timedelta) -> str:
    """The reader's terms: "23 h 59 min", "10 min", "45 s"."""
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min"
    return f"{secs} s"
