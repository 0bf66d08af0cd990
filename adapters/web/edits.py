"""Edit before approve, on the page: which part of a call a person edits, the input their edit
makes, and the diff between what the agent proposed and what was approved. Pure functions.

A shell command is edited as its text (`command`), a file write as the text it writes
(`content`); anything else as the whole input in JSON. The rest of the input stays as stored.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from adapters.web import render
from bot.masking import mask_value

EDIT_KEYS = ("command", "content")
EDIT_LIMIT = 200_000  # characters a person may post as an edit (the store bounds inputs too)


@dataclass(frozen=True)
class EditField:
    """What the page offers to edit: `as_` is `command`, `content` or `json`."""

    as_: str
    text: str

    @property
    def label(self) -> str:
        return {"command": "The command", "content": "The text it writes"}.get(
            self.as_, "The whole input (JSON)"
        )


def edit_field(tool_input: Any) -> EditField:
    if isinstance(tool_input, dict):
        command = tool_input.get("command")
        if isinstance(command, str):
            return EditField("command", command)
        content = tool_input.get("content")
        if isinstance(content, str) and any(
            isinstance(tool_input.get(k), str) for k in ("file_path", "path")
        ):
            return EditField("content", content)
    return EditField("json", json.dumps(tool_input, indent=2, ensure_ascii=False))


class EditInvalid(ValueError):
    """An edit the page cannot read: `invalid_request: …`."""


def edited_input(stored: Any, as_: str, text: str) -> Any:
    """The input a person's edit makes of the stored one. Browsers post a textarea's lines
    ending in CRLF: they read as the LF the field was filled with."""
    text = text.replace("\r\n", "\n")
    if len(text) > EDIT_LIMIT:
        raise EditInvalid(f"tool_input: at most {EDIT_LIMIT} characters")
    if as_ in EDIT_KEYS and isinstance(stored, dict) and isinstance(stored.get(as_), str):
        return {**stored, as_: text}
    if as_ != "json":
        raise EditInvalid(f"edit_as: {as_!r} is not a part of this call's input")
    try:
        return json.loads(text)
    except ValueError as error:
        raise EditInvalid(f"tool_input: not JSON ({error})") from None


def _line_class(text: str) -> str:
    if text.startswith(("+++", "---")):
        return "meta"
    if text.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(text[:1], "ctx")


def _text(value: Any, key: str | None) -> str:
    if key is not None:
        return str(value[key])
    return json.dumps(value, indent=2, ensure_ascii=False)


def edit_diff(task: Any, revealed: bool = False) -> list[render.Line]:
    """The lines between the proposed input and the approved one (the edited text alone when
    only a command or a written text changed); masked unless revealed. [] when not edited."""
    return input_diff(task.tool_input, getattr(task, "approved_input", None), revealed)


def review_diff(task: Any, revealed: bool = False) -> list[render.Line]:
    """Under a quorum, the edit the approvals so far are for (`reviewed_input`): a further
    Approve approves it, so the card shows it. [] when the count is for the call as proposed."""
    return input_diff(task.tool_input, getattr(task, "reviewed_input", None), revealed)


def input_diff(proposed: Any, approved: Any, revealed: bool = False) -> list[render.Line]:
    if approved is None:
        return []
    old, new = proposed, approved
    if not revealed:
        old, new = mask_value(old), mask_value(new)
    key = None
    if isinstance(old, dict) and isinstance(new, dict):
        for k in EDIT_KEYS:
            if isinstance(old.get(k), str) and isinstance(new.get(k), str):
                others_same = {a: b for a, b in old.items() if a != k} == {
                    a: b for a, b in new.items() if a != k
                }
                key = k if others_same else None
                break
    lines = difflib.unified_diff(
        _text(old, key).splitlines(),
        _text(new, key).splitlines(),
        "proposed",
        "approved",
        lineterm="",
        n=3,
    )
    found = render.numbered([render.Line(_line_class(t), t) for t in lines])
    return found or [render.Line("ctx", "(the same input)")]
