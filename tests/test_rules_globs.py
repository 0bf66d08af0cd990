"""SPEC 2.2: anchored byte globs — table tests and properties against a reference matcher."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.rules import Glob, MultiGlob, glob_match, glob_match_reference
from bot.rules.globs import glob_to_regex, predicate

E_ACUTE = "é".encode()  # two bytes: c3 a9
EURO = "€".encode()  # three bytes

GLOB_TABLE = [
    # (pattern, text, expected, why)
    (b"bash", b"bash", True, "literal matches itself"),
    (b"bash", b"bash2", False, "anchored at the end"),
    (b"bash", b"xbash", False, "anchored at the start"),
    (b"ash", b"bash", False, "a fragment needs a leading *"),
    (b"*ash", b"bash", True, "leading * makes a suffix"),
    (b"ba*", b"bash", True, "trailing * makes a prefix"),
    (b"*as*", b"bash", True, "both stars make a fragment"),
    (b"*", b"", True, "* matches the empty text"),
    (b"", b"", True, "empty glob matches empty text"),
    (b"", b"a", False, "empty glob matches only empty text"),
    (b"a*b", b"ab", True, "* matches an empty run"),
    (b"a*b", b"a\nb", True, "* crosses a newline"),
    (b"a*b", b"a\n\n\r\nxb", True, "* crosses several newlines"),
    (b"*git push*--force*", b"git push origin\n--force", True, "fragments across lines"),
    (b"a?c", b"abc", True, "? is one byte"),
    (b"a?c", b"ac", False, "? is exactly one byte, not zero"),
    (b"a?c", b"abbc", False, "? is exactly one byte, not two"),
    (b"a?c", b"a\nc", True, "? matches a newline byte"),
    (b"?", E_ACUTE, False, "? does not match a two-byte character"),
    (b"??", E_ACUTE, True, "?? matches a two-byte character"),
    (b"???", EURO, True, "??? matches a three-byte character"),
    (b"??", EURO, False, "?? is too short for a three-byte character"),
    (b"caf?", "café".encode(), False, "? against the first byte of é leaves one over"),
    (b"caf??", "café".encode(), True, "two ? cover é"),
    (b"[ab]", b"a", False, "[ is literal: no character classes"),
    (b"[ab]", b"[ab]", True, "[ab] matches itself"),
    (b"a\\*", b"a\\xyz", True, "backslash is literal and does not escape *"),
    (b"a\\*", b"a*", False, "backslash does not escape: needs a literal backslash"),
    (b"\\", b"\\", True, "lone backslash is literal"),
    (b"{a,b}", b"a", False, "{ is literal: no brace expansion"),
    (b"{a,b}", b"{a,b}", True, "braces match themselves"),
    (b"*.env", b"app/.env", True, ". is literal"),
    (b"*.env", b"app/xenv", False, ". is not any character"),
    (b"a+b", b"a+b", True, "+ is literal"),
    (b"a+b", b"aab", False, "+ is not a repeat"),
    (b"(a|b)", b"(a|b)", True, "parentheses and | are literal inside a glob"),
    (b"^a$", b"^a$", True, "^ and $ are literal"),
    (b"a.*", b"abc", False, ".* is a literal dot then a star"),
    (b"a.*", b"a.bc", True, ".* is a literal dot then a star (match)"),
    (b"**", b"anything", True, "double star is a star"),
    (b"*a*a*a*", b"aaa", True, "stars between repeated letters"),
    (b"*a*a*a*", b"aa", False, "too few letters for the segments"),
    (b"*aa*a", b"aa", False, "segments cannot overlap"),
    (b"*ab*b", b"abb", True, "leftmost placement leaves room for the tail"),
    (b"a\x00b", b"a\x00b", True, "NUL is an ordinary byte"),
    (E_ACUTE + b"*", "éa".encode(), True, "multi-byte literal prefix"),
    (b"\xc3*", "é".encode(), True, "a glob byte may be half a character"),
]


@pytest.mark.parametrize(("pattern", "text", "expected", "why"), GLOB_TABLE)
def test_glob_table(pattern: bytes, text: bytes, expected: bool, why: str) -> None:
    assert glob_match_reference(pattern, text) is expected, f"reference: {why}"
    assert Glob(pattern).match(text) is expected, f"Glob: {why}"
    assert glob_match(pattern, text) is expected, why
    assert predicate(pattern)(text) is expected, f"predicate: {why}"
    for backend in ("python", "re2"):
        assert (MultiGlob([pattern], backend=backend).match_all(text) == [0]) is expected, backend


def test_regex_translation_escapes_every_special_byte() -> None:
    assert glob_to_regex(b"a?*") == b"a..*"
    assert glob_to_regex(b"[.]") == b"\\x5b\\x2e\\x5d"
    assert glob_to_regex(b"a***b") == b"a.*b"


def test_multiglob_reports_every_matching_index() -> None:
    patterns = [b"*push*", b"git*", b"*force", b"nope", b"*", b"git push --force"]
    for backend in ("python", "re2"):
        multi = MultiGlob(patterns, backend=backend)
        assert multi.backend == backend
        assert sorted(multi.match_all(b"git push --force")) == [0, 1, 2, 4, 5]
        assert sorted(multi.match_all(b"")) == [4]


def test_multiglob_refuses_nothing() -> None:
    with pytest.raises(ValueError, match="at least one"):
        MultiGlob([])
    with pytest.raises(ValueError, match="backend"):
        MultiGlob([b"a"], backend="hyperscan")


def test_re2_set_survives_a_large_pattern_list_and_long_text() -> None:
    patterns = [b"*%d*tok%d*x*y*" % (i, i) for i in range(600)]
    multi = MultiGlob(patterns, backend="re2")
    assert multi.backend == "re2"
    text = b"0 tok0 x y " + b"ab" * 20_000 + b" 599 tok599 x y"
    expected = [i for i, p in enumerate(patterns) if Glob(p).match(text)]
    assert sorted(multi.match_all(text)) == expected
    assert 0 in expected and 599 in expected


# -- properties -----------------------------------------------------------------------------

# A small alphabet makes matches likely; it includes the specials, a newline and UTF-8 bytes.
ALPHABET = [ord(c) for c in "ab*?[\\.\n"] + [0xC3, 0xA9, 0x00]
pattern_bytes = st.lists(st.sampled_from(ALPHABET), max_size=10).map(bytes)
text_bytes = st.lists(st.sampled_from(ALPHABET), max_size=14).map(bytes)


@settings(max_examples=400, deadline=None)
@given(pattern_bytes, text_bytes)
def test_glob_agrees_with_reference(pattern: bytes, text: bytes) -> None:
    expected = glob_match_reference(pattern, text)
    assert Glob(pattern).match(text) is expected
    assert predicate(pattern)(text) is expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=8), st.binary(max_size=16))
def test_glob_agrees_with_reference_on_any_bytes(pattern: bytes, text: bytes) -> None:
    assert Glob(pattern).match(text) is glob_match_reference(pattern, text)


@settings(max_examples=150, deadline=None)
@given(st.lists(pattern_bytes, min_size=1, max_size=8), st.lists(text_bytes, max_size=6))
def test_multiglob_backends_agree_with_reference(patterns: list[bytes], texts: list[bytes]) -> None:
    multis = [MultiGlob(patterns, backend=b) for b in ("python", "re2")]
    for text in texts:
        expected = [i for i, p in enumerate(patterns) if glob_match_reference(p, text)]
        for multi in multis:
            assert sorted(multi.match_all(text)) == expected, multi.backend


@pytest.mark.parametrize("budget", [64, 4096])
def test_re2_set_without_memory_falls_back_to_the_exact_loop(
    monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    # When RE2 cannot build the set within its memory budget (a compile error, or a DFA that
    # does not fit and would answer "no match" to everything) the exact pure loop takes over.
    import bot.rules.globs as globs

    monkeypatch.setattr(globs, "_RE2_MEM_STEPS", (budget,))
    patterns = [b"*%d*tok%d*x*y*" % (i, i) for i in range(300)]
    multi = MultiGlob(patterns, backend="re2")
    assert multi.backend == "python"
    assert multi.match_all(b"7 tok7 x y") == [7]
