"""People's names as decisions record them: refused when they hide characters, mix look-alike
scripts, or could be mistaken for the name of another member of the workspace.

A name is recorded on every decision ("approved by alice"), so two members whose names look the
same on a page or in a chat make the audit trail lie. Two names clash when they are the same
after Unicode NFKC and case folding (`Alice`, `ａｌｉｃｅ` and `alice`), or when their
*skeletons* are (letters that look alike folded onto one: the Cyrillic `а` onto `a`, the Greek
`Κ` onto `K`, `I`, `1` and `|` onto `l`, `0` onto `O`), in the spirit of Unicode TS #39. A name
holding an invisible or formatting character (a zero-width space, a direction override, a
soft hyphen, a variation selector, a space other than U+0020) or mixing Latin, Cyrillic and
Greek letters is refused outright.
"""

from __future__ import annotations

import unicodedata

NAME_LIMIT = 200

# Default_Ignorable_Code_Point outside the categories refused as a whole (DerivedCoreProperties),
# and the blanks that render as nothing: each is invisible in a name.
_IGNORABLE = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian variation selectors, vowel separator
    (0x200B, 0x200F),  # zero-width space, joiners, direction marks
    (0x202A, 0x202E),  # direction embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, isolates
    (0x2800, 0x2800),  # Braille pattern blank
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFEFF, 0xFEFF),  # zero-width no-break space (BOM)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical formatting
    (0xE0000, 0xE0FFF),  # tags, variation selectors supplement
)
# Control, format, surrogate, private use, unassigned, line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")

# Letters that look like a Latin one, case by case (applied before case folding: the Greek
# capital Eta looks like H, its small letter like n). Written as escapes so that what is
# mapped is plain to read.
_LOOKS_LIKE = {
    # Cyrillic capitals
    "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u0405": "S", "\u0406": "I", "\u0408": "J",
    "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O", "\u0420": "P", "\u0421": "C",
    "\u0422": "T", "\u0423": "Y", "\u0425": "X", "\u04ae": "Y", "\u051a": "Q", "\u051c": "W",
    "\u04c0": "l",
    # Cyrillic small letters
    "\u0430": "a", "\u0435": "e", "\u0456": "i", "\u0458": "j", "\u043a": "k", "\u043e": "o",
    "\u0440": "p", "\u0441": "c", "\u0455": "s", "\u0443": "y", "\u0445": "x", "\u0501": "d",
    "\u051b": "q", "\u051d": "w", "\u04bb": "h", "\u04cf": "l", "\u04af": "y",
    # Greek capitals
    "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H", "\u0399": "I",
    "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O", "\u03a1": "P", "\u03a4": "T",
    "\u03a5": "Y", "\u03a7": "X",
    # Greek small letters
    "\u03b1": "a", "\u03b3": "y", "\u03b9": "i", "\u03ba": "k", "\u03bd": "v", "\u03bf": "o",
    "\u03c1": "p", "\u03c5": "u", "\u03c7": "x",
    # Latin look-alikes of each other
    "I": "l", "1": "l", "|": "l", "\u01c0": "l", "0": "O", "\u0131": "i", "\u0251": "a",
    "\u0261": "g",
}  # fmt: skip
_TABLE = str.maketrans(_LOOKS_LIKE)


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _visible(text: str) -> str:
    """What a reader sees of TEXT: invisible characters dropped, any space as U+0020, runs of
    spaces as one (a name stored before these checks may hold them)."""
    kept = (
        " " if unicodedata.category(c) == "Zs" or c.isspace() else c
        for c in text
        if c.isspace() or not _invisible(c)
    )
    return " ".join("".join(kept).split())


def folded(name: str) -> str:
    """The name as compared: NFKC, case folded, NFKC again (`Alice` and `ａｌｉｃｅ` are
    `alice`), without what does not show."""
    return _visible(_nfkc(_nfkc(name).casefold()))


def skeleton(name: str) -> str:
    """The folded name with look-alike letters folded onto one (`аlice` with a Cyrillic `а`,
    `aIice` and `a1ice` all read `alice`)."""
    mapped = _nfkc(_visible(name)).translate(_TABLE)
    return _visible(_nfkc(mapped.casefold()).translate(_TABLE))


def look_alike(a: str, b: str) -> bool:
    """Whether two names could be taken for each other (the same name included)."""
    return folded(a) == folded(b) or skeleton(a) == skeleton(b)


def _invisible(char: str) -> bool:
    if unicodedata.category(char) in _REFUSED_CATEGORIES:
        return True
    if unicodedata.category(char) == "Zs" and char != " ":
        return True
    point = ord(char)
    return any(low <= point <= high for low, high in _IGNORABLE)


def _describe(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}"


def problem(name: str) -> str | None:
    """Why NAME cannot be a person's name, or None: empty or too long, spaces at either end,
    an invisible or formatting character, letters of more than one of Latin, Cyrillic and
    Greek."""
    if not name or len(name) > NAME_LIMIT:
        return f"1-{NAME_LIMIT} characters"
    for char in name:
        if _invisible(char):
            return f"no invisible or formatting characters ({_describe(char)})"
    if name.strip() != name:
        return "no spaces at either end"
    if unicodedata.category(name[0]).startswith("M"):
        return f"it starts with a combining mark ({_describe(name[0])})"
    scripts = {
        script
        for char in _nfkc(name)
        if unicodedata.category(char).startswith("L")
        for script in _SCRIPTS
        if unicodedata.name(char, "").startswith(script + " ")
    }
    if len(scripts) > 1:
        mixed = " and ".join(s.title() for s in _SCRIPTS if s in scripts)
        return f"letters of one script only: it mixes {mixed} letters, a look-alike's trick"
    return None
