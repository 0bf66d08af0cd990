""" "Approve & allow like this" and "Edit & approve" as the chats show them, the same on every
platform.

An offer is what a person sees before a rule is learned: the rule the core proposes (the
narrowest one that would have allowed the call: bot/learning.py), how many of the workspace's
past calls it would have allowed, a few of them, and one button per scope the run can learn
in (this run; the profile it was declared from, if any). Nothing is saved until a scope is
chosen. An edit is the call as the person would approve it: a command's new text, or the
input's new JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot import learning
from bot.domain import Run, Task
from bot.learning import Proposal
from bot.masking import mask_text, mask_value, shorten
from bot.rendering import digest_line

SCOPE_ACTIONS = {"allow_run": "run", "allow_profile": "profile"}
GLOB_ACTION = "allow_glob"  # "✏️ Edit glob", where the platform asks for it in a reply (globs.py)
EDIT_GLOB = "✏️ Edit glob"
OFFER_ACTIONS = {*SCOPE_ACTIONS, GLOB_ACTION}  # the buttons of an offer's message
SHOWN_PAST = 5  # past calls listed by name; the count says how many in all
RULE_SHOWN = 500  # a rule in words: a glob is as long as the command's first words or folder
_SHELL_KEYS = ("command", "cmd", "script")


@dataclass(frozen=True)
class Offer:
    """The rule a decision would learn, for a person to confirm with a scope."""

    task_id: str
    rule: dict[str, Any]
    summary: str  # "bash · command matches git push *" (masked)
    past: tuple[str, ...]  # the first few past calls it would have allowed (masked)
    past_count: int
    scopes: tuple[tuple[str, str, str], ...]  # (scope, button label, button id)
    edit_glob: str | None = None  # the "✏️ Edit glob" button's id (globs.py), where asked

    @property
    def match(self) -> str | None:
        """The glob a person may change before learning (where the platform can ask); None
        when it holds a secret (a chat never shows one, and a masked glob would learn the
        mask): the proposed glob is then learned as it is, shown masked."""
        value = self.rule.get("match")
        if not isinstance(value, str) or mask_text(value) != value:
            return None
        return value

    def lines(self) -> list[str]:
        """The offer as plain lines (platforms escape and emphasise them)."""
        calls = "call" if self.past_count == 1 else "calls"
        head = f"It would have allowed {self.past_count} past {calls} (last 30 days)"
        out = [self.summary, head + (":" if self.past else ".")]
        out += [f"• {line}" for line in self.past]
        if self.past_count > len(self.past):
            out.append(f"… and {self.past_count - len(self.past)} more")
        return out


def describe_rule(rule: Mapping[str, Any]) -> str:
    """A rule in a few words: "bash · command matches git push *" (masked)."""
    tool = str(rule.get("tool", "?"))
    path, match = rule.get("path"), rule.get("match")
    if isinstance(path, str) and isinstance(match, str):
        text = f"{tool} · {path} matches {match}"
    else:
        text = f"every {tool} call"
    return shorten(mask_text(text), RULE_SHOWN)


def offer(task: Task, run: Run, proposal: Proposal, ids: Mapping[str, str]) -> Offer:
    """The offer for `task`; `ids` maps allow_run/allow_profile (and allow_glob, where the
    platform asks for a glob in a reply) to their buttons' ids."""
    scopes = [("run", "✅ This run", ids["allow_run"])]
    if run.profile is not None and "allow_profile" in ids:
        label = shorten(f"✅ Profile {mask_text(run.profile)}", 60)
        scopes.append(("profile", label, ids["allow_profile"]))
    past = tuple(
        shorten(f"{digest_line(t)} ({t.state})", 120) for t in proposal.would_allow[:SHOWN_PAST]
    )
    # A compound shell line proposes one rule per command not yet granted: all are shown (and
    # learned by a scope button); only the first one's glob can be edited.
    summary = "\n".join(describe_rule(rule) for rule in proposal.rules or (proposal.rule,))
    return Offer(
        task.id, dict(proposal.rule), summary, past,
        len(proposal.would_allow), tuple(scopes), ids.get(GLOB_ACTION),
    )  # fmt: skip


def proposed(task: Task) -> dict[str, Any]:
    """The rule the core proposes for the call an approval would end (under a quorum, the
    edit being counted), as `Presses` changes its glob."""
    return learning.propose(task.tool, input_to_edit(task), task.origin)


def with_match(rule: Mapping[str, Any], match: str | None) -> dict[str, Any] | None:
    """The rule with the glob a person wrote instead of the proposed one (None: unchanged)."""
    if match is None or match == rule.get("match"):
        return None
    return {**rule, "match": match}


# edits -----------------------------------------------------------------------------------------
def input_to_edit(task: Task) -> Any:
    """The input an edit starts from: under a quorum, the edit the approvals so far are for
    (what the card shows and a plain Approve approves), else the call as proposed."""
    return task.tool_input if task.reviewed_input is None else task.reviewed_input


def edit_key(tool_input: Any) -> str | None:
    """The key holding the call's command, when there is one: an edit then replaces it."""
    if isinstance(tool_input, dict):
        for key in _SHELL_KEYS:
            if isinstance(tool_input.get(key), str):
                return key
    return None


def edit_start(tool_input: Any) -> tuple[str, str]:
    """What to ask for ("New command" or "New input (JSON)") and the text to start from: the
    call as proposed, or nothing when it holds a secret (a chat never shows one, and a masked
    start would approve the mask)."""
    key = edit_key(tool_input)
    if key is not None:
        command = str(tool_input[key])
        return "New command", command if mask_text(command) == command else ""
    text = json.dumps(tool_input, indent=2, ensure_ascii=False)
    return "New input (JSON)", text if mask_value(tool_input) == tool_input else ""


class EditUnreadable(ValueError):
    pass


def edited_input(tool_input: Any, text: str) -> Any:
    """The call as the person wrote it: a command's new text in place of the old, or a new
    JSON input."""
    key = edit_key(tool_input)
    if key is not None:
        if not text.strip():
            raise EditUnreadable("Write the new command")
        return {**tool_input, key: text.strip()}
    try:
        return json.loads(text)
    except ValueError:
        raise EditUnreadable("That is not JSON: write the call's new input as JSON") from None
