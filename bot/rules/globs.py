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
  matches. One RE2 `Set` searches the text for a literal piece of every glob at once (its
  needle), and only the globs whose needle occurs are checked with `Glob.match`; falls back to a
  loop over `Glob.match` when RE2 is unavailable or the set cannot be built within its memory
  budget.

What a glob may cost is bounded when it is declared (issue 21): see the bounds below.
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


_QMARK_MASK = bytes(0x00 if b == QMARK else 0xFF for b in range(256))


class _Segment:
    """A star-free, fixed-length piece of a glob.

    A piece with `?` is compared in place by its literal bytes under a mask (two integers
    made when first needed), and searched for with a regex compiled when first needed: most
    globs of a large list are never checked on their own, and only pieces between two stars
    are ever searched for (their `?` bytes are bounded, MAX_INNER_QMARK_BYTES)."""

    __slots__ = ("_bits", "_raw", "_rx", "length", "literal")

    def __init__(self, raw: bytes) -> None:
        self.length = len(raw)
        self.literal: bytes | None = raw if QMARK not in raw else None
        self._raw = raw
        self._rx: re.Pattern[bytes] | None = None
        self._bits: tuple[int, int] | None = None

    def at(self, text: bytes, pos: int) -> bool:
        """Does the segment sit at `pos` (the caller checked there is room)?"""
        if self.literal is not None:
            return text.startswith(self.literal, pos)
        bits = self._bits
        if bits is None:
            raw = self._raw
            mask = int.from_bytes(raw.translate(_QMARK_MASK), "big")
            bits = self._bits = (int.from_bytes(raw, "big") & mask, mask)
        window = int.from_bytes(text[pos : pos + self.length], "big")
        return window & bits[1] == bits[0]

    def find(self, text: bytes, start: int, end: int) -> int:
        """Leftmost position >= start where the segment fits entirely before `end`, or -1."""
        if self.literal is not None:
            return text.find(self.literal, start, end)
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(_segment_regex(self._raw), re.DOTALL)
        m = rx.search(text, start, end)
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


def lazy_predicate(pattern: bytes) -> Callable[[bytes], bool]:
    """`predicate(pattern)`, built when it is first called: a large list compiles without
    allocating the segments of globs that may never be checked on their own."""
    simple = simple_predicate(pattern)
    if simple is not None:
        return simple
    built: list[Callable[[bytes], bool]] = []

    def check(text: bytes) -> bool:
        if not built:
            built.append(Glob(pattern).match)
        return built[0](text)

    return check


# -- what one glob may cost (issue 21) ---------------------------------------------------------
#
# What comes before a glob's first `*` is compared in place, in one pass, however long (a
# learned rule is often a whole command); from the first `*` on, pieces are searched for, and
# that part is bounded. Checked when a rule list is declared (bot/rules/validate.py); the
# measurements behind the figures are in docs/performance.md ("Glob bounds (issue 21)").

MAX_STARRED_BYTES = 4096  # a glob (a `match`, or a `tool` alternative) from its first `*` on
MAX_STARRED_WILDCARDS = 32  # `*` and `?` from the first `*` on, each one counted
# In one list, the pieces between two `*` that hold a `?` (`*v?.?*`), in bytes all together.
# Such a piece is searched for with a regex whose cost grows with the piece times the text
# (every other piece is a plain substring search, or compared in place at the start or end).
MAX_INNER_QMARK_BYTES = 256


def glob_problem(pattern: bytes) -> str | None:
    """Why one glob is refused when it is declared (too long or too many wildcards from its
    first `*` on), or None."""
    star = pattern.find(b"*")
    if star < 0:
        return None
    starred = len(pattern) - star
    if starred > MAX_STARRED_BYTES:
        return f"{starred} bytes from its first * on (at most {MAX_STARRED_BYTES})"
    wildcards = pattern.count(b"*", star) + pattern.count(b"?", star)
    if wildcards > MAX_STARRED_WILDCARDS:
        return (
            f"{wildcards} wildcards (* and ?) from its first * on (at most {MAX_STARRED_WILDCARDS})"
        )
    return None


def inner_qmark_bytes(pattern: bytes) -> int:
    """The bytes of the glob's pieces between two `*` that hold a `?` (0 for most globs)."""
    return sum(len(piece) for piece in pattern.split(b"*")[1:-1] if QMARK in piece)


# -- many globs over one text ------------------------------------------------------------------
#
# A DFA over whole globs (`.*rm -rf.*` and the like, in one RE2 set) must remember, for every
# glob, how far through its stars a text has got, so the number of its states grows with the
# product of the globs' progress: a thousand `*xy*` globs took 1-6 s over 64 KiB of random
# letters, and globs with many stars or `?` tens of seconds. So the set searches only for one
# literal piece of each glob (its needle, at most _NEEDLE_MAX bytes): an Aho-Corasick-like
# search whose states are the needles' prefixes, never more, however many there are. Each glob
# whose needle occurs is then checked exactly on its own, in linear time (`Glob.match`).

_NEEDLE_MAX = 16
_WILDCARDS = re.compile(rb"[*?]+")


def needle(pattern: bytes) -> bytes:
    """A literal piece of the glob that every text it matches contains (its first longest piece,
    cut to _NEEDLE_MAX bytes); b"" for a glob of wildcards only."""
    best = b""
    for piece in _WILDCARDS.split(pattern):
        if len(piece) > len(best):
            best = piece
    return best[:_NEEDLE_MAX]


# RE2 answers "no match" silently when a Set's DFA cannot be built within its memory budget.
# That would drop a deny, so every set is checked right after it is compiled against a text it
# must match (one of its own needles: the failure is the set's, not a text's). If the check
# fails the set is built again with more memory, and past the last step the exact loop is used.
_RE2_MEM_STEPS = (8 << 20, 32 << 20, 128 << 20)


def _build_search_set(needles: Sequence[bytes]) -> Callable[[bytes], list[int]] | None:
    """An unanchored RE2 set over literal needles: the indices of those the text contains."""
    if _re2 is None:  # pragma: no cover
        return None
    for mem in _RE2_MEM_STEPS:
        options = _re2.Options()
        options.encoding = _re2.Options.Encoding.LATIN1
        options.never_capture = True
        options.log_errors = False
        options.max_mem = mem
        try:
            rset = _re2.Set.SearchSet(options)
            for literal in needles:
                rset.Add(_segment_regex(literal))
            rset.Compile()
        except _re2.error:
            continue
        raw: Any = getattr(rset, "_set", rset)
        match: Callable[[bytes], list[int]] = raw.Match
        last = len(needles) - 1
        if 0 in match(needles[0]) and last in match(needles[last]):
            return match
    return None


Check = Callable[[bytes], bool] | None  # None: the needle alone decides (`*lit*`)


def _prefiltered(
    patterns: Sequence[bytes], checks: Sequence[Callable[[bytes], bool]]
) -> Callable[[bytes], list[int]] | None:
    by_needle: dict[bytes, list[tuple[int, Check]]] = {}
    always: list[tuple[int, Callable[[bytes], bool]]] = []
    for index, pattern in enumerate(patterns):
        found = needle(pattern)
        if not found:
            always.append((index, checks[index]))
            continue
        # `*lit*` matches exactly the texts that contain its needle: no check to make.
        exact = pattern == b"*" + found + b"*"
        by_needle.setdefault(found, []).append((index, None if exact else checks[index]))
    if not by_needle:
        return None
    needles = list(by_needle)
    search = _build_search_set(needles)
    if search is None:
        return None
    owners = tuple(tuple(by_needle[n]) for n in needles)
    rest = tuple(always)

    def match_all(text: bytes) -> list[int]:
        found: list[int] = []
        for hit in search(text):
            for index, check in owners[hit]:
                if check is None or check(text):
                    found.append(index)
        if rest:
            found.extend(index for index, check in rest if check(text))
        return found

    return match_all


class MultiGlob:
    """Many globs over one text: `match_all(text)` lists the indices of every glob that matches.

    Indices are positions in the `patterns` given to the constructor; the list is not sorted.
    The `re2` backend searches for every glob's needle at once and checks exactly only the
    globs whose needle occurs; `python` checks every glob. Both answer the same.
    """

    __slots__ = ("backend", "match_all", "patterns")

    def __init__(self, patterns: Sequence[bytes], *, backend: str = "auto") -> None:
        if not patterns:
            raise ValueError("MultiGlob needs at least one pattern")
        if backend not in ("auto", "python", "re2"):
            raise ValueError(f"unknown backend {backend!r}")
        self.patterns = tuple(patterns)
        checks = [lazy_predicate(p) for p in self.patterns]
        match_all: Callable[[bytes], list[int]] | None = None
        if backend == "re2" or (backend == "auto" and len(self.patterns) > _PYTHON_LOOP_MAX):
            match_all = _prefiltered(self.patterns, checks)
        self.backend = "python" if match_all is None else "re2"
        self.match_all = match_all or _loop(tuple(enumerate(checks)))


def _loop(checks: Sequence[tuple[int, Callable[[bytes], bool]]]) -> Callable[[bytes], list[int]]:
    def match_all(text: bytes) -> list[int]:
        return [index for index, check in checks if check(text)]

    return match_all


# Up to this many patterns on one text, the plain loop over specialised predicates beats the
# round trip into RE2 (measured by bench/rules_bench.py; see docs/performance.md).
_PYTHON_LOOP_MAX = 2
