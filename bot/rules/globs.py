"""Anchored byte globs (SPEC 2.2) and a multi-pattern matcher.

A glob works on bytes (UTF-8): `*` matches any run of bytes (empty and newlines included), `?`
matches exactly one byte, every other byte is literal (`[`, `\\`, `{`, `.` included). A glob must
match the whole text.

Three implementations live here, all with the same semantics:

- `glob_match_reference`: a dynamic programme over bytes; slow and obviously right, used by tests.
- `Glob.match`: the segment algorithm. The pattern is cut at its stars into fixed-length segments;
  the first must sit at the start, the last at the end, and the middle ones are placed leftmost
  in order. Linear-ish, never backtracks catastrophically whatever the text.
- `MultiGlob`: many globs over the same text in one call, returning the index of every glob that
  matches. Backed by RE2's `Set` (one DFA pass for all patterns) with the Latin-1 encoding so that
  `.` is exactly one byte; falls back to a loop over `Glob.match` when RE2 is unavailable or the
  set cannot be built within its memory budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

STAR = 0x2A  # b"*"
QMARK = 0x3F  # b"?"

_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")

# google-re2 is a runtime dependency; the pure fallback keeps the module importable without it.
try:
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised only on installs without google-re2
    _re2 = None


def glob_match_reference(pattern: bytes, text: bytes) -> bool:
    """The plain O(len(pattern) * len(text)) dynamic programme. For tests, not for speed."""
    n = len(text)
    # row[j] is True when pattern[:i] matches text[:j]
    row = [True] + [False] * n
    for p in pattern:
        if p == STAR:
            new = row[:]
            for j in range(1, n + 1):
                new[j] = new[j - 1] or row[j]
        else:
            new = [False] * (n + 1)
            for j in range(1, n + 1):
                new[j] = row[j - 1] and (p == QMARK or text[j - 1] == p)
        row = new
    return row[n]


def _segment_regex(segment: bytes) -> bytes:
    """A Python `re` / RE2 regex (bytes) for one star-free segment: `?` is any one byte."""
    out = bytearray()
    for b in segment:
        if b == QMARK:
            out += b"."
        elif b in _ALNUM:
            out.append(b)
        else:
            out += b"\\x%02x" % b
    return bytes(out)


def glob_to_regex(pattern: bytes) -> bytes:
    """The glob as a regex over bytes (needs dot-matches-newline and whole-text anchoring)."""
    parts = [p for i, p in enumerate(pattern.split(b"*")) if p or i == 0]
    if pattern.endswith(b"*"):
        parts.append(b"")
    return b".*".join(_segment_regex(p) for p in parts)


class _Segment:
    """A star-free, fixed-length piece of a glob."""

    __slots__ = ("_rx", "length", "literal")

    def __init__(self, raw: bytes) -> None:
        self.length = len(raw)
        self.literal: bytes | None = raw if QMARK not in raw else None
        self._rx: re.Pattern[bytes] | None = (
            None if self.literal is not None else re.compile(_segment_regex(raw), re.DOTALL)
        )

    def at(self, text: bytes, pos: int) -> bool:
        """Does the segment sit at `pos` (the caller checked there is room)?"""
        if self.literal is not None:
            return text.startswith(self.literal, pos)
        assert self._rx is not None
        return self._rx.match(text, pos) is not None

    def find(self, text: bytes, start: int, end: int) -> int:
        """Leftmost position >= start where the segment fits entirely before `end`, or -1."""
        if self.literal is not None:
            return text.find(self.literal, start, end)
        assert self._rx is not None
        m = self._rx.search(text, start, end)
        return -1 if m is None else m.start()


class Glob:
    """One compiled glob. `match(text)` is exact and never backtracks."""

    __slots__ = ("_head", "_middle", "_starred", "_tail", "min_length", "pattern")

    def __init__(self, pattern: bytes) -> None:
        self.pattern = pattern
        parts = pattern.split(b"*")
        self._starred = len(parts) > 1
        self._head = _Segment(parts[0])
        self._tail = _Segment(parts[-1])
        self._middle = tuple(_Segment(p) for p in parts[1:-1] if p)
        self.min_length = len(pattern) - pattern.count(b"*")

    def match(self, text: bytes) -> bool:
        head = self._head
        if not self._starred:
            return len(text) == head.length and head.at(text, 0)
        n = len(text)
        if n < self.min_length:
            return False
        tail = self._tail
        end = n - tail.length
        if not head.at(text, 0) or not tail.at(text, end):
            return False
        pos = head.length
        for seg in self._middle:
            found = seg.find(text, pos, end)
            if found < 0:
                return False
            pos = found + seg.length
        return True


def glob_match(pattern: bytes, text: bytes) -> bool:
    """Match one glob against one text (compiles each time: use `Glob` for repeated use)."""
    return Glob(pattern).match(text)


def simple_predicate(pattern: bytes) -> Callable[[bytes], bool] | None:
    """A fast predicate for the common shapes `lit`, `lit*`, `*lit`, `*lit*` (no `?`), else None."""
    if QMARK in pattern:
        return None
    after_lead = pattern.lstrip(b"*")
    core = after_lead.rstrip(b"*")
    if b"*" in core:
        return None
    lead = len(after_lead) != len(pattern)
    trail = len(core) != len(after_lead)
    if lead and trail:
        return lambda text: core in text
    if trail:
        return lambda text: text.startswith(core)
    if lead:
        return lambda text: text.endswith(core)
    return lambda text: text == core


def predicate(pattern: bytes) -> Callable[[bytes], bool]:
    """The fastest exact single-glob predicate: a string method for simple shapes, else `Glob`."""
    return simple_predicate(pattern) or Glob(pattern).match


# RE2's DFA gets `max_mem`; if the program does not fit, every Set.Match quietly reports "no
# match". We never let that happen: each set is checked right after compiling (see `_Re2Set`),
# retrying with more memory, and falls back to the pure loop past the last step.
_RE2_MEM_STEPS = (8 << 20, 32 << 20, 128 << 20)


def _witness(pattern: bytes) -> bytes:
    """A text the glob certainly matches (stars empty, `?` as `a`)."""
    return pattern.replace(b"*", b"").replace(b"?", b"a")


def _build_re2_set(patterns: Sequence[bytes]) -> Callable[[bytes], list[int]] | None:
    if _re2 is None:  # pragma: no cover
        return None
    for mem in _RE2_MEM_STEPS:
        options = _re2.Options()
        options.encoding = _re2.Options.Encoding.LATIN1
        options.dot_nl = True
        options.never_capture = True
        options.log_errors = False
        options.max_mem = mem
        try:
            rset = _re2.Set.FullMatchSet(options)
            for p in patterns:
                rset.Add(glob_to_regex(p))
            rset.Compile()
        except _re2.error:
            continue
        raw: Any = getattr(rset, "_set", rset)
        match: Callable[[bytes], list[int]] = raw.Match
        # A set whose DFA could not be built answers "nothing" for everything; a witness of
        # the first and last pattern catches that (the failure is per set, not per text).
        if 0 in (match(_witness(patterns[0])) or ()) and len(patterns) - 1 in (
            match(_witness(patterns[-1])) or ()
        ):
            return match
    return None


class MultiGlob:
    """Many globs over one text: `match_all(text)` lists the indices of every glob that matches.

    Indices are positions in the `patterns` given to the constructor; the list is not sorted.
    """

    __slots__ = ("_globs", "backend", "match_all", "patterns")

    def __init__(self, patterns: Sequence[bytes], *, backend: str = "auto") -> None:
        if not patterns:
            raise ValueError("MultiGlob needs at least one pattern")
        self.patterns = tuple(patterns)
        self._globs = tuple(predicate(p) for p in self.patterns)
        match_all: Callable[[bytes], list[int]] | None = None
        chosen = "python"
        if backend == "re2" or (backend == "auto" and len(self.patterns) > _PYTHON_LOOP_MAX):
            match_all = _build_re2_set(self.patterns)
            if match_all is not None:
                chosen = "re2"
        elif backend not in ("auto", "python"):
            raise ValueError(f"unknown backend {backend!r}")
        if match_all is None:
            match_all = self._loop
        self.backend = chosen
        self.match_all = match_all

    def _loop(self, text: bytes) -> list[int]:
        return [i for i, m in enumerate(self._globs) if m(text)]


# Up to this many patterns on one text, the plain loop over specialised predicates beats the
# round trip into RE2 (measured by bench/rules_bench.py; see docs/performance.md).
_PYTHON_LOOP_MAX = 2
