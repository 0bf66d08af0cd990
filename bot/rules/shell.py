"""A shell line seen through: the simple commands a bash line would run, and what in it cannot
be seen through (issue 20).

The line is parsed by tree-sitter's bash grammar, never split by hand. Every simple command is
collected wherever it sits: lists and pipelines, subshells and groups, `if`/`for`/`while`/`case`
bodies, functions, command and process substitutions (also inside strings and unquoted heredoc
bodies), the string given to `bash -c` (parsed again), and the command behind a wrapper such as
`sudo` or `timeout 5`. Quoted text, quoted heredoc bodies and comments are data.

Each command is read as rules read text: its words joined by one space, a word that is plain
once unquoted written unquoted (`\\rm` and `"rm"` read `rm`), any other word as it was written
(`"fix; rm it"` keeps its quotes, so it never reads as two commands); leading `VAR=value`
assignments and redirections are left out.

A wrapper's own form (`timeout 5 rm x`) is judged too, but only a deny or an ask rule may use
it: the command behind it (`rm x`) is what must be allowed. `sudo`/`doas` are no such wrappers
(running as root is a command of its own), and a command named by a path (`/bin/rm`) is also
judged by its base name (`rm`), for denies and asks.

`ShellLine.opaque` says why parts cannot be seen through (`eval`, `source`, a command named by an
expansion, `find -exec`, a pipe into an interpreter, output written to a file, a line that does
not parse): such a line is never granted by an allow rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, NamedTuple

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

_BASH = Language(tree_sitter_bash.language())
_PARSER = Parser(_BASH)
# What in a command's text may hold another command or a redirection.
_MAY_HOLD_MORE = re.compile(rb"[$`<>]")
_SUBSTITUTION = re.compile(rb"\$\((?!\()")
_SUBSTITUTION_OR_TICK = re.compile(rb"\$\((?!\()|`")
_CONTINUED_WORD = re.compile(rb"[^\s\\]\\\n[^\s]")
_QUOTING = re.compile(rb"'|\\\$|\$'")
# Where bash evaluates text as arithmetic or a name (a stored `a[$(…)]` then runs).
_EVALUATES = re.compile(
    rb"\$\(\(|\(\(|\[\[|\$\{!|@[A-Za-z]\}|\bprintf\s+-v|\$\{\w+\[|\w\[[^]\n]*\]\+?=|"
    rb"\b(?:declare|typeset|local|let|unset|readonly|read|mapfile|readarray|export)\b"
)

# `bash -c` in `bash -c` deeper than this is not seen through: it only exists to hide something.
MAX_SHELL_NESTING = 8
MAX_REASONS = 10  # why a line cannot be seen through: the first few say enough

# A word that reads the same unquoted: written without its quotes.
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./~^-]+")
_DIGITS = re.compile(r"[0-9]+")
_ESCAPED = re.compile(r"\\(.?)", re.S)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash"})
INTERPRETERS = SHELLS | frozenset(
    {
        "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "deno", "bun",
        "php", "lua", "luajit", "tclsh", "wish", "Rscript", "R", "pwsh", "powershell",
        "osascript", "jshell", "irb", "scala", "groovy", "julia",
    }
)  # fmt: skip
UNSEEN = frozenset(
    {"eval", "source", ".", "trap", "alias", "bind", "complete", "compgen", "enable", "fc",
     "let", "mapfile", "readarray"}
)  # fmt: skip
# Variables that change which program a command runs or what it runs besides.
DANGEROUS_NAMES = frozenset(
    {"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "PS1", "PS2",
     "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "IFS", "CDPATH", "PAGER", "MANPAGER",
     "EDITOR", "VISUAL", "PYTHONSTARTUP", "PYTHONPATH", "NODE_OPTIONS", "PERL5OPT", "PERL5LIB",
     "RUBYOPT", "LESSOPEN", "LESSCLOSE", "BROWSER", "SSH_ASKPASS", "SUDO_ASKPASS"}
)  # fmt: skip
DANGEROUS_PREFIXES = ("GIT_", "DYLD_", "BASH_FUNC_")
FIND_ACTIONS = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
OUTPUT_OPERATORS = frozenset({">", ">>", "&>", "&>>", ">|", ">&", "<>"})
ROOT_WRAPPERS = frozenset({"sudo", "doas"})
# Names whose command needs more than its words read: see `_Reader.judge_name`.
_JUDGED_NAMES = UNSEEN | SHELLS | frozenset({"find", "tee", "env", "time"})

# Per wrapper: options that take the next word as their value (an attached value, `-uroot`
# or `--user=root`, is one word), and whether a first positional word precedes the command.
_WRAPPERS: dict[str, tuple[frozenset[str], bool]] = {
    "sudo": (frozenset("-u -g -C -D -h -p -r -t -U -T -R --user --group --chdir --host "
                       "--prompt --role --type --other-user --command-timeout".split()), False),
    "doas": (frozenset(["-u", "-C"]), False),
    "env": (frozenset("-u -C -S -a -P --unset --chdir --split-string --argv0".split()), False),
    "nice": (frozenset(["-n", "--adjustment"]), False),
    "nohup": (frozenset(), False),
    "time": (frozenset(["-f", "-o", "--format", "--output"]), False),
    "timeout": (frozenset(["-s", "-k", "--signal", "--kill-after"]), True),
    "stdbuf": (frozenset(["-i", "-o", "-e", "--input", "--output", "--error"]), False),
    "command": (frozenset(), False),
    "builtin": (frozenset(), False),
    "exec": (frozenset(["-a"]), False),
    "xargs": (frozenset("-a -d -E -I -J -R -L -n -P -s --arg-file --delimiter --max-lines "
                        "--max-args --max-procs --max-chars --process-slot-var".split()), False),
    "unbuffer": (frozenset(), False),
    "chronic": (frozenset(), False),
    "ionice": (frozenset(["-c", "-n", "-p", "--class", "--classdata"]), False),
    "taskset": (frozenset(), True),
}  # fmt: skip


class Command(NamedTuple):
    """One command a line would run, as rules read it. `needs_grant`: it must be allowed for
    the line to be granted (False for a wrapper's own form or a path's base name, which only
    a deny or an ask rule may use)."""

    text: str
    needs_grant: bool = True


@dataclass(frozen=True, slots=True)
class ShellLine:
    commands: tuple[Command, ...]
    opaque: tuple[str, ...]  # why parts of it cannot be seen through; empty when all can


class _Word(NamedTuple):
    text: str  # as rules read it: unquoted when plain, else as written
    value: str | None  # the unquoted value when it holds no expansion, else None


class _Reader:
    """One pass over a parsed line, collecting commands and what it cannot see through.

    It visits the nodes around the commands, not the words inside them (unless they can hold
    more), and no nesting, however deep, recurses here."""

    def __init__(self, source: bytes, nesting: int) -> None:
        self.source = source
        self.nesting = nesting
        self.commands: list[Command] = []
        self.opaque: list[str] = []
        # A command's text -> the name it runs (None: an expansion), for commands read before.
        self.read_before: dict[str, str | None] = {}

    def note(self, why: str) -> None:
        if why not in self.opaque and len(self.opaque) < MAX_REASONS:
            self.opaque.append(why)

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def read(self, root: Node) -> None:
        source = self.source
        if root.has_error:
            self.note("does not parse")  # what it holds is still read, for the denies
        if b"`" in source or _SUBSTITUTION.search(source):
            self.account(root)
        if b"\\\n" in source and _CONTINUED_WORD.search(source):
            # bash joins `r\<newline>m` into one word (and `x\<newline>#` into `x#`); the
            # grammar splits it
            self.note("a line continuation inside a word")
        if (
            _SUBSTITUTION_OR_TICK.search(source)
            and _QUOTING.search(source)
            and _EVALUATES.search(source)
        ):
            # `x='a[$(rm …)]'; echo $((x))`: bash evaluates a subscript stored as text
            self.note("evaluates text that may hold a command substitution")
        # Every command and output redirection, in the order they are written. The walk
        # keeps its own stack (a line of 4,000 commands nests its lists 4,000 deep) and goes
        # into a command only where it can hold more: `$(…)`, backquotes, `<(…)`, a redirection.
        commands: list[Node] = []
        redirects: list[Node] = []
        stack = [root]
        while stack:
            node = stack.pop()
            kind = node.type
            if kind == "command":
                commands.append(node)
                if _MAY_HOLD_MORE.search(source, node.start_byte, node.end_byte) is None:
                    continue
            elif kind == "file_redirect":
                redirects.append(node)
            elif kind == "variable_assignment":
                self.assignment(node)
            elif kind == "heredoc_redirect" and _quoted_heredoc(node):
                # a quoted delimiter (`<<'EOF'`, `<<E"OF"`): its body is data, whatever the
                # grammar made of it
                stack.extend(c for c in reversed(node.children) if c.type != "heredoc_body")
                continue
            stack.extend(reversed(node.children))
        for node in commands:
            self.command(node)
        for node in redirects:
            self.redirect(node)

    def account(self, root: Node) -> None:
        """Every backquote and `$(` bash would run must be one the grammar read as a
        substitution; any other (in a heredoc body after blanks, in `${x:-`…`}`, behind a `$`
        in a delimiter) is not seen through. Backquotes that hold a backslash re-read their
        text (`\\$(…)` is `$(…)` inside them): not seen through either."""
        source = self.source
        data: list[tuple[int, int]] = []  # quoted text and comments: no substitution there
        parsed: set[int] = set()  # where the grammar's substitutions start (and `…` ends)
        stack = [root]
        while stack:
            node = stack.pop()
            kind = node.type
            if kind in ("raw_string", "ansi_c_string", "comment"):
                data.append((node.start_byte, node.end_byte))
                continue
            if kind == "heredoc_redirect" and _quoted_heredoc(node):
                data.extend(
                    (c.start_byte, c.end_byte) for c in node.children if c.type == "heredoc_body"
                )
            elif kind == "command_substitution":
                parsed.add(node.start_byte)
                if source[node.start_byte] == 0x60:  # `…`
                    parsed.add(node.end_byte - 1)
                    if b"\\" in source[node.start_byte : node.end_byte]:
                        self.note("backquotes that re-read their text")
            stack.extend(node.children)
        for found in _SUBSTITUTION_OR_TICK.finditer(source):
            at = found.start()
            if at in parsed or any(start <= at < end for start, end in data):
                continue
            if at and source[at - 1] == 0x5C:  # `\$(`, `\``: a literal (inside backquotes,
                continue  # caught above)
            self.note("a command substitution the grammar does not read")
            return

    def assignment(self, node: Node) -> None:
        """An assignment that changes how commands are found or what they run is not seen
        through (`PATH=…`, `LD_PRELOAD=…`, `GIT_CONFIG_…=…`, `PS4=…`)."""
        name_node = node.child_by_field_name("name")
        name = self.text(name_node) if name_node is not None else ""
        if _dangerous_name(name):
            self.note(f"sets {name}")

    def interpreter(self, node: Node, name: str) -> None:
        """An interpreter reads code from its input: one after a pipe, or whose input is
        redirected, anywhere above it, runs what it is sent."""
        child, parent = node, node.parent
        while parent is not None:
            if parent.type == "pipeline" and child.start_byte > parent.start_byte:
                self.note(f"pipes into {name}")
            elif parent.type == "redirected_statement" and any(
                self.feeds_input(c) for c in parent.children
            ):
                self.note(f"feeds code to {name}")
            child, parent = parent, parent.parent

    def feeds_input(self, node: Node) -> bool:
        if node.type in ("heredoc_redirect", "herestring_redirect"):
            return True
        return node.type == "file_redirect" and self.operator(node) in ("<", "<&", "<>")

    def operator(self, redirect: Node) -> str:
        for child in redirect.children:
            if child.type != "file_descriptor" and not child.is_named:
                return child.type
        return ""

    def redirect(self, node: Node) -> None:
        plain = _PLAIN_REDIRECT.fullmatch(self.text(node))
        if plain is not None:  # `2>/dev/null`, `> out.txt`: a plain target, read off the text
            operator, target = plain.groups()
            dup = operator == ">&" and (target == "-" or target.isdigit())
            if operator in OUTPUT_OPERATORS and not dup and target != "/dev/null":
                self.note(f"writes to {_short(target)}")
            return
        destinations = [c for c in node.named_children if c.type != "file_descriptor"]
        if len(destinations) > 1:
            # `ls 2>/dev/null --force`: the grammar hands the words after a redirection to
            # it; bash gives them to the command
            self.note("words after a redirection")
        if self.operator(node) not in OUTPUT_OPERATORS:
            return
        target = node.child_by_field_name("destination")
        if target is None:
            named = [c for c in node.named_children if c.type != "file_descriptor"]
            target = named[-1] if named else None
        word = None if target is None else self.word(target)
        dup = (
            self.operator(node) == ">&"
            and word is not None
            and (word.value == "-" or (word.value is not None and _DIGITS.fullmatch(word.value)))
        )
        if not dup and (word is None or word.value != "/dev/null"):
            self.note(f"writes to {'?' if word is None else _short(word.text)}")

    # -- one simple command --------------------------------------------------------------------

    def words(self, node: Node) -> list[_Word]:
        """The command's name and arguments (assignments and redirections left out)."""
        out: list[_Word] = []
        for child in node.children:
            kind = child.type
            if kind == "word":  # the common case, inline: a plain word is itself
                written = self.text(child)
                if "\\" not in written and _PLAIN.fullmatch(written):
                    out.append(_Word(written, written))
                else:
                    out.append(self.word(child))
            elif kind == "command_name":
                # `r"m"`: the grammar may give the name's pieces as its children, unjoined
                named = child.named_children
                if len(named) == 1:
                    out.append(self.word(named[0]))
                else:
                    out.append(self.word(child))
            elif kind in _NOT_WORDS or not child.is_named:
                continue
            else:
                out.append(self.word(child))
        return out

    def command(self, node: Node) -> None:
        text = self.text(node)
        if "=" in text.split(None, 1)[0]:  # `FOO=1 ls`: prefix assignments set its environment
            for child in node.children:
                if child.type == "variable_assignment":
                    self.assignment(child)
        name = self.read_before.get(text, "")
        if name != "":  # the same command again (a long line repeats itself): read already
            if name in INTERPRETERS:
                self.interpreter(node, name)  # where it stands matters, not what it says
            return
        if _PLAIN_COMMAND.fullmatch(text) and "=" not in text:
            # plain words only (most commands): split as bash splits them, without visiting
            # each word's node; a command no one wraps or watches is its words, rejoined
            parts = text.split()
            if parts[0] not in _WATCHED and "/" not in parts[0]:
                self.commands.append(Command(" ".join(parts)))
                self.read_before[text] = parts[0]
                if parts[0] in INTERPRETERS:
                    self.interpreter(node, parts[0])
                return
            words = [_Word(word, word) for word in parts]
        elif _QUOTED_COMMAND.fullmatch(text) and "=" not in text.split(None, 1)[0]:
            words = _quoted_words(text)  # quotes, but nothing they could expand
        else:
            words = self.words(node)
        name = self.command_words(words)
        self.read_before[text] = name
        if name in INTERPRETERS:
            self.interpreter(node, name)

    def command_words(self, words: list[_Word]) -> str | None:
        """Collect a command and the ones behind its wrappers; the name it finally runs."""
        name: str | None = None
        while words:
            name = words[0].value
            outer = len(self.commands)
            self.commands.append(Command(_join(words)))
            if name is None:
                self.note(f"runs a command named by an expansion ({_short(words[0].text)})")
                break
            if "/" in name and name.rstrip("/"):
                name = name.rstrip("/").rsplit("/", 1)[-1]
                self.commands.append(Command(_join([_Word(name, name), *words[1:]]), False))
            inner = _behind_wrapper(words)
            # A wrapper's own form is only for denies and asks (what it runs must be allowed),
            # and so is a shell's given a string, but `sudo x` must be allowed itself.
            if (self.judge_name(name, words) or inner is not None) and name not in ROOT_WRAPPERS:
                self.commands[outer] = Command(self.commands[outer].text, False)
            if inner is None:
                break
            words = inner
        return name

    def judge_name(self, name: str, words: list[_Word]) -> bool:
        """Notes what this command does that rules cannot see into. True when it is a shell
        given a string, whose commands were read in its place."""
        if name in UNSEEN:
            self.note(f"runs text as code ({name})")
        elif name == "find":
            for word in words[1:]:
                if word.value in FIND_ACTIONS:
                    self.note(f"find {word.value}")
                elif word.value is None:  # `$'-exec'`, `$ACTION`: could be any of them
                    self.note("find with a computed argument")
        elif name == "tee":
            for word in words[1:]:
                if word.value is None or (not word.value.startswith("-")):
                    if word.value != "/dev/null":
                        self.note(f"writes to {_short(word.text)}")
        elif name == "env":
            for word in words[1:]:
                value = word.value or ""
                if value.startswith("--split-string") or _short_option(value, "S"):
                    self.note("env -S splits its own command line")
                elif _ASSIGNMENT.match(value) and _dangerous_name(value.split("=", 1)[0]):
                    self.note(f"sets {value.split('=', 1)[0]}")
        elif name == "time" and any(
            (w.value or "").startswith("--output") or _short_option(w.value or "", "o")
            for w in words[1:]
        ):
            self.note("writes to a file (time -o)")
        elif name in SHELLS:
            script = _shell_script(words)
            if script is None:
                self.note(f"{name} -c runs a computed string")
            elif self.nesting >= MAX_SHELL_NESTING:
                self.note(f"{name} -c nested too deeply to read")
            elif script is not False:
                inner = _read(script, self.nesting + 1)
                self.commands.extend(inner.commands)
                for why in inner.opaque:
                    self.note(why)
                return True
        return False

    def word(self, node: Node) -> _Word:
        written = self.text(node)
        value = self.value(node, written)
        if value is not None and _PLAIN.fullmatch(value):
            return _Word(value, value)
        return _Word(written, value)

    def value(self, node: Node, written: str) -> str | None:
        """The word's unquoted value when it expands nothing, else None (`written`: its
        text)."""
        kind = node.type
        if kind in ("word", "number"):
            return _unescape(written) if "\\" in written else written
        if kind == "raw_string":
            return written[1:-1]
        if kind == "string":
            # Text only (the grammar gives no node for blank text: read between the quotes).
            if any(child.type not in ('"', "string_content") for child in node.children):
                return None
            return _unescape_double(written[1:-1])
        if kind in ("concatenation", "command_name"):
            pieces = [self.value(child, self.text(child)) for child in node.children]
            if any(piece is None for piece in pieces):
                return None
            return "".join(p for p in pieces if p is not None)
        return None


def _unescape(written: str) -> str:
    """An unquoted word's backslashes: `\\x` is `x`, a backslash-newline vanishes."""
    return _ESCAPED.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), written)


def _unescape_double(written: str) -> str:
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), written)


def _quoted_words(text: str) -> list[_Word]:
    """The words of a command whose quotes hold nothing to expand (`grep -rn 'a b' "src"`),
    read off its text: what `_Reader.words` reads off the nodes, without visiting them."""
    words: list[_Word] = []
    for written in _QUOTED_WORD.findall(text):
        if "'" not in written and '"' not in written:
            words.append(_Word(written, written))  # as written, whether plain or a glob
            continue
        value = "".join(
            part.group(1) if part.group(1) is not None else
            part.group(2) if part.group(2) is not None else part.group()
            for part in _QUOTED_PART.finditer(written)
        )  # fmt: skip
        words.append(_Word(value, value) if _PLAIN.fullmatch(value) else _Word(written, value))
    return words


def _quoted_heredoc(node: Node) -> bool:
    """Whether a heredoc's delimiter is quoted (any quote or backslash in it): its body is
    then literal text."""
    for child in node.children:
        if child.type == "heredoc_start":
            text = child.text or b""
            return any(mark in text for mark in (b"'", b'"', b"\\"))
    return False


def _dangerous_name(name: str) -> bool:
    return name in DANGEROUS_NAMES or name.startswith(DANGEROUS_PREFIXES)


def _short_option(value: str, letter: str) -> bool:
    """`-S`, `-iS`, `-Sfoo`: a cluster of short options holding `letter`."""
    return len(value) > 1 and value[0] == "-" and value[1] != "-" and letter in value[1:]


def _short(text: str) -> str:
    """A word as a reason names it: cut, so a reason stays a line."""
    return text if len(text) <= 60 else text[:59] + "…"


def _join(words: list[_Word]) -> str:
    return " ".join(word.text for word in words)


def _behind_wrapper(words: list[_Word]) -> list[_Word] | None:
    """The command a wrapper runs (`timeout 5 rm x` -> `rm x`); None when `words` is no wrapper
    or wraps nothing."""
    name = words[0].value
    base = None if name is None else name.rsplit("/", 1)[-1]
    if base is None or base not in _WRAPPERS:
        return None
    takes_value, positional = _WRAPPERS[base]
    index = 1
    while index < len(words):
        value = words[index].value
        if value is None or not value.startswith("-") or value == "-":
            break
        index += 1
        if value == "--":
            break
        if value in takes_value:
            index += 1  # the option's value
    if base == "env":
        while index < len(words) and _ASSIGNMENT.match(words[index].value or ""):
            index += 1  # NAME=value words set the command's environment
    if positional:
        index += 1  # timeout's duration, taskset's mask
    rest = words[index:]
    return rest or None


def _shell_script(words: list[_Word]) -> str | Literal[False] | None:
    """The string `bash -c STRING` runs: the string, None when it is computed (or missing),
    False when the shell is not given one (it runs a script file, or reads its input). As bash
    reads it: `-c` anywhere among the options, the string the first word after them."""
    given_c = False
    index = 1
    while index < len(words):
        value = words[index].value
        if value is None:
            return None if given_c else False
        if value == "--":
            index += 1
            break
        if value in ("-o", "+o", "-O", "+O"):
            index += 2  # a shell option's name
            continue
        if len(value) > 1 and value[0] in "-+" and not value.startswith("--"):
            given_c = given_c or "c" in value[1:]
            index += 1
            continue
        if value.startswith("--"):
            index += 1  # --norc, --login, …
            continue
        break
    if not given_c:
        return False
    return words[index].value if index < len(words) else None


def _read(line: str, nesting: int = 0) -> ShellLine:
    source = line.encode("utf-8", "surrogatepass")
    reader = _Reader(source, nesting)
    if not _read_plain(line, reader):
        reader.read(_PARSER.parse(source).root_node)
    return ShellLine(tuple(dict.fromkeys(reader.commands)), tuple(reader.opaque))


# The fast path. Most lines an agent runs are plain words joined by `&&`, `||`, `;`, `|` and
# `&`: no quotes, expansions, redirections, comments, keywords or new lines. For those the
# grammar has nothing to add, and reading the words costs a fraction of the parse (which is
# about 0.15 µs a byte). Anything else, or anything the grammar would call an error, goes to
# the parser. tests/test_shell_corpus.py holds the two to the same result on such lines.
_PLAIN_LINE = re.compile(r"[A-Za-z0-9_@%+=:,./~^*\- \t;&|]*")
_PLAIN_COMMAND = re.compile(r"[A-Za-z0-9_@%+:,./~^*][A-Za-z0-9_@%+:,./~^*\- \t]*")
_NOT_WORDS = frozenset(
    {"variable_assignment", "file_redirect", "heredoc_redirect", "herestring_redirect", "comment"}
)
# A command whose words are plain or quoted without anything to expand inside (no `$`,
# backquote, backslash or `!` in double quotes): `grep -rn 'TODO' --include='*.py' .`.
_BARE = r"[A-Za-z0-9_@%+:,./~^*=-]+"
_SINGLE = r"'([^']*)'"
_DOUBLE = r'"([^"$`\\!]*)"'
_QUOTED_PART = re.compile(f"{_BARE}|{_SINGLE}|{_DOUBLE}")
_QUOTED_WORD = re.compile(f"""(?:{_BARE}|'[^']*'|"[^"$`\\\\!]*")+""")
_QUOTED_COMMAND = re.compile(f"[A-Za-z0-9_@%+:,./~^*'\"](?:{_BARE}|{_SINGLE}|{_DOUBLE}|[ \t]+)*")
_WATCHED = frozenset(_WRAPPERS) | _JUDGED_NAMES | ROOT_WRAPPERS
_PLAIN_REDIRECT = re.compile(r"[0-9]*(&>>|&>|>>|>\||>&|<>|<&|>|<)[ \t]*([A-Za-z0-9_@%+=:,./~^-]+)")
_OPERATOR = re.compile(r"(&&|\|\||\|&|;|\||&)")
_RESERVED = frozenset(
    "if then else elif fi case esac for select while until do done in function coproc".split()
)


def _read_plain(line: str, reader: _Reader) -> bool:
    """Read a line of plain words and list operators into `reader`; False (nothing read) for
    any other line."""
    if not _PLAIN_LINE.fullmatch(line):
        return False
    parts = _OPERATOR.split(line)
    stages: list[tuple[list[str], bool]] = []  # (words, after a pipe)
    after_pipe = False
    for index in range(0, len(parts), 2):
        words = parts[index].split()
        operator = parts[index + 1] if index + 1 < len(parts) else None
        if not words:
            # only the very end may be empty, after `;` or `&` (or the line is blank)
            if operator is not None or (index and parts[index - 1] not in (";", "&")):
                return False
            continue
        if _RESERVED.intersection(words) or any(word[0] == "=" for word in words):
            return False  # keywords; `==` reads as a test's operator to the grammar
        stages.append((words, after_pipe))
        after_pipe = operator in ("|", "|&")
    for words, _ in stages:
        if "=" in words[0] or words[0][0] == "-":
            return False  # assignments, and words the grammar reads its own way: it decides
    for words, piped in stages:
        if words[0] not in _WATCHED and "/" not in words[0]:
            if piped and words[0] in INTERPRETERS:
                reader.note(f"pipes into {words[0]}")
            reader.commands.append(Command(" ".join(words)))
            continue
        plain = [_Word(word, word) for word in words]
        if piped and plain:
            inner = plain
            while (behind := _behind_wrapper(inner)) is not None:
                inner = behind
            if inner[0].value in INTERPRETERS:
                reader.note(f"pipes into {inner[0].value}")
        reader.command_words(plain)
    return True


# Lines up to this long are remembered (4,096 of them): agents run the same lines again and
# again. A longer one is read each time, so the cache never holds more than about 16 MiB.
CACHED_LINE_CHARS = 4096


@lru_cache(maxsize=4096)
def _cached(line: str) -> ShellLine:
    return _read(line)


def read_line(line: str) -> ShellLine:
    """The commands of a bash line and what in it cannot be seen through (cached per text)."""
    return _cached(line) if len(line) <= CACHED_LINE_CHARS else _read(line)


def clear_cache() -> None:
    """Forget the lines read so far (for benches that time the parse)."""
    _cached.cache_clear()
