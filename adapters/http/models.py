"""Wire models of the HTTP API (SPEC 4), shared by the server and the SDK so the two never drift.

Request bodies forbid unknown keys: a misspelt `orgin` must be refused, not silently dropped
(a forgotten origin defaults to `model`, which is safe; a typo that the server ignored would
leave the caller believing it said something it did not). Response models ignore unknown keys
so an older SDK keeps working against a newer server.

JSON values the core stores (tool_input, effect profiles, rules, answers) are checked for what
the databases cannot hold: NUL characters, non-finite numbers and integers too large to print.
Such a body is a 422 naming the field, never a 500 from the store.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from bot.domain import Executor, Run, Task

_MAX_DIGITS = 300  # far beyond any real number; keeps int->str within Python's own limit
NO_NUL = "^[^\\u0000]*$"  # JSON-schema pattern (ECMA-262): a string without NUL characters
# The JSON-schema of a stored JSON value, recursive; `/openapi.json` holds it under this name.
JSON_VALUE = "JsonValue"
# A marker `/openapi.json` turns into a `$ref` to JSON_VALUE_SCHEMA (pydantic resolves every
# `$ref` it sees, and this schema is not one of its own).
JSON_VALUE_MARK = "x-approvalbot-json-value"
JSON_VALUE_SCHEMA: dict[str, Any] = {
    "description": "Any JSON value the store can hold: no NUL character in a string or a key, "
    "finite numbers, integers of at most 300 digits.",
    "anyOf": [
        {"type": "string", "pattern": NO_NUL},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": f"#/components/schemas/{JSON_VALUE}"}},
        {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL},
            "additionalProperties": {"$ref": f"#/components/schemas/{JSON_VALUE}"},
        },
    ],
}


def _check_json(value: Any, nul: bool = True) -> Any:
    """Refuse what JSON columns cannot store; the error names the path inside the value.
    `nul=False` leaves NUL characters to another check (the core's, for effect profiles)."""
    if isinstance(value, str):
        if nul and "\x00" in value:
            raise ValueError("NUL characters are not accepted")
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        if value and math.log10(abs(value)) > _MAX_DIGITS:
            raise ValueError("number too large")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("numbers must be finite (no NaN or Infinity)")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            try:
                _check_json(item, nul)
            except ValueError as error:
                raise ValueError(f"[{index}]: {error}") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            if nul and "\x00" in key:
                raise ValueError("NUL characters are not accepted in keys")
            try:
                _check_json(item, nul)
            except ValueError as error:
                raise ValueError(f".{key}: {error}") from None
    return value


def _check_text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("NUL characters are not accepted")
    return value


_JSON_REF = WithJsonSchema({JSON_VALUE_MARK: True})
_NO_NUL = Field(json_schema_extra={"pattern": NO_NUL})
JsonValue = Annotated[Any, AfterValidator(_check_json), _JSON_REF]
Text = Annotated[str, _NO_NUL, AfterValidator(_check_text)]
Name = Annotated[str, Field(min_length=1, max_length=200), _NO_NUL, AfterValidator(_check_text)]
# What identifiers may contain (adapters.http.ids checks them in paths; the core, in keys).
KEY_SCHEMA = "^[A-Za-z0-9._:~-]{1,200}$"
RECORD_SCHEMA = "^[A-Za-z0-9_-]{1,40}$"
Key = Annotated[str, Field(min_length=1, max_length=200, json_schema_extra={"pattern": KEY_SCHEMA}),
                AfterValidator(_check_text)]  # fmt: skip
RecordId = Annotated[str, Field(min_length=1, max_length=200,
                                json_schema_extra={"pattern": RECORD_SCHEMA}),
                     AfterValidator(_check_text)]  # fmt: skip
Mode = Literal["bypass", "ask", "rules"]
Origin = Literal["model", "author", "kernel"]


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ResponseModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


# requests --------------------------------------------------------------------------------------
class RunIn(RequestModel):
    """Declare a run. Without `profile`, an omitted mode is `ask` and omitted rules are []."""

    approval_mode: Mode | None = None
    # Checked by the rule engine, which names each problem as `approval_rules[3].mtach`.
    approval_rules: list[JsonValue] | None = None
    tool_names: list[Name] | None = None
    aliases: dict[Text, Text] | None = None
    profile: Text | None = None
    title: Annotated[str, Field(max_length=500), _NO_NUL, AfterValidator(_check_text)] = ""
    executor_id: Text | None = None
    parent_run: Text | None = None
    # Several approvers (bot/quorum.py), checked by the core: `approval_requirements[0].mtach`.
    approval_requirements: list[JsonValue] | None = None
    forbid_self_approval: bool | None = None
    on_behalf_of: Text | None = None  # a member's name
    # Shell lines judged per command (bot/rules/compound.py), checked by the core:
    # `shell_commands[0].pth: unknown key`.
    shell_commands: list[JsonValue] | None = None


class EffectProfile(BaseModel):
    """What the approver reads (SPEC 3.3). Other keys are kept and shown as key/value."""

    model_config = ConfigDict(
        extra="allow",
        allow_inf_nan=False,
        json_schema_extra={
            "additionalProperties": {JSON_VALUE_MARK: True},
            "propertyNames": {"pattern": NO_NUL},
        },
    )

    summary: Text | None = None
    effects: list[Text] | None = None
    targets: list[Text] | None = None
    risk: Literal["low", "medium", "high"] | None = None
    reversible: bool | None = None

    @model_validator(mode="after")
    def _finite_extras(self) -> EffectProfile:
        """The other keys hold numbers by the rules of any JSON value here (finite, at most
        300 digits; `Infinity` would be stored as null). NUL characters in them are the
        core's to refuse (bot.effects.check), naming the key its way."""
        _check_json(self.model_extra or {}, nul=False)
        return self


class TaskIn(RequestModel):
    """Append a tool call (or, with `tool_name: "ask"`, a question). `origin` defaults to
    `model`: a forgotten field must never pre-approve."""

    key: Key | None = None
    tool_name: Name
    tool_input: JsonValue
    origin: Origin = "model"
    effect_profile: EffectProfile | None = None
    failure_policy: Literal["continue", "hold"] = "continue"
    tool_names: list[Name] | None = None
    approval_mode: Mode | None = None

    def effect_profile_json(self) -> dict[str, Any] | None:
        """The profile as sent (its other keys too). What the store cannot hold in it is the
        core's to refuse (bot.effects.check: a 422 naming the key)."""
        if self.effect_profile is None:
            return None
        return self.effect_profile.model_dump(exclude_none=True)


class DenyIn(RequestModel):
    reason: Annotated[str, Field(max_length=4000), _NO_NUL, AfterValidator(_check_text)] = ""


class EmptyIn(RequestModel):
    """Verbs without arguments accept no body, `{}`, or nothing else."""


# A stop's or a withdrawal's reason: stripped, at most 500 characters, no NUL.
ShortReason = Annotated[
    str,
    StringConstraints(strip_whitespace=True, max_length=500),
    _NO_NUL,
    AfterValidator(_check_text),
]


class StopIn(RequestModel):
    """Stop a run, optionally saying how its work went: `outcome` and a short `reason` (stripped,
    at most 500 characters) go to the decision log. No body, or `{}`, stops it saying nothing."""

    outcome: Literal["succeeded", "failed"] | None = None
    reason: ShortReason | None = None


class WithdrawIn(RequestModel):
    """Withdraw a parked call or question: the agent stopped waiting. An optional short `reason`
    (stripped, at most 500 characters) goes to the error's detail and the decision log."""

    reason: ShortReason | None = None


class ResolutionIn(RequestModel):
    """Answer a question: `content` is free text, one option, or (multi) a list of options;
    `outcome: failed` declines. `resolution_token` (from an author ask's receipt) stands in for
    any other credential."""

    content: JsonValue = None
    outcome: Literal["resolved", "failed"] | None = None
    resolution_token: Name | None = None


class ExecutorIn(RequestModel):
    name: Name


class ClaimIn(RequestModel):
    run_id: RecordId
    task_key: Key


# responses -------------------------------------------------------------------------------------
class ErrorBody(ResponseModel):
    model_config = ConfigDict(extra="allow")

    code: str
    detail: str


class ErrorOut(ResponseModel):
    error: ErrorBody


class TaskOut(ResponseModel):
    """The task object of SPEC 4: an append receipt and `GET …/tasks/{key}`. `tool` is the
    resolved name; `resolution_token` appears only on the receipt of an author ask."""

    key: str
    run_id: str
    kind: Literal["tool_call", "ask"]
    origin: str
    tool_name: str
    tool: str
    tool_input: Any
    state: str
    error: dict[str, Any] | None
    effect_profile: dict[str, Any]
    deadline: datetime | None
    resolved_by: str | None
    via: str | None
    resolution: dict[str, Any] | None
    resolution_token: str | None = None
    # The input a person approved when they edited it before approving; null unless edited.
    # Under a quorum that is not met yet: the edited input the approvals so far are for, so
    # the next approver sees what they are approving.
    approved_input: Any = None
    # Only when an approval requirement applies: {"required": 2, "given": [{"by", "at"}]}.
    approvals: dict[str, Any] | None = None

    @property
    def parked(self) -> bool:
        return self.state in ("needs_approval", "awaiting_input")


class AskOut(TaskOut):
    """A decision resting on a person: the task plus why it parked and when."""

    why: str
    created_at: datetime
    run_title: str = ""
    prompt: str | None = None
    options: list[str] | None = None
    multi: bool = False


class AsksOut(ResponseModel):
    asks: list[AskOut]
    next_cursor: str | None = None  # the next page's `?cursor=`; null on the last page


class RunOut(ResponseModel):
    id: str
    state: Literal["running", "held", "stopped"]
    approval_mode: str
    approval_rules: list[dict[str, Any]]
    tool_names: list[str] | None
    aliases: dict[str, str]
    title: str
    profile: str | None
    executor_id: str | None
    parent_run: str | None
    held_task_key: str | None
    created_at: datetime
    # Several approvers, each only when set.
    approval_requirements: list[dict[str, Any]] | None = None
    forbid_self_approval: bool | None = None
    on_behalf_of: str | None = None
    shell_commands: list[dict[str, str]] = Field(default_factory=list)
    declared_by: str | None = None


class ExecutorOut(ResponseModel):
    id: str
    name: str
    revoked: bool = False


class RevokedOut(ResponseModel):
    id: str
    revoked: bool
    cleared: int


class InboxRow(ResponseModel):
    """A pending decision addressed to the executor: a notice, never claimable work."""

    kind: Literal["approval", "ask"]
    run_id: str
    key: str
    tool: str
    tool_input: Any
    state: str
    effect_profile: dict[str, Any]
    deadline: datetime | None


class InboxOut(ResponseModel):
    items: list[InboxRow]


class FeedEvent(ResponseModel):
    """One Server-Sent Event as the SDK hands it out: `id` (the run's sequence, or for the cable
    the global event id), `event` name, and the JSON `data`."""

    id: int
    event: str
    data: dict[str, Any]


# conversions (server side) ---------------------------------------------------------------------
def task_out(task: Task, token: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "key": task.key,
        "run_id": task.run_id,
        "kind": task.kind,
        "origin": task.origin,
        "tool_name": task.tool_name,
        "tool": task.tool,
        "tool_input": task.tool_input,
        "state": task.state,
        "error": task.error,
        "effect_profile": task.effect_profile,
        "deadline": task.deadline.isoformat() if task.deadline else None,
        "resolved_by": task.resolved_by,
        "via": task.via,
        "resolution": task.resolution,
        "approved_input": (
            task.approved_input if task.approved_input is not None else task.reviewed_input
        ),
    }
    if task.approvals_given is not None:
        body["approvals"] = {
            "required": task.required_approvals,
            "given": [{"by": g["by"], "at": g["at"]} for g in task.approvals_given],
        }
    if token is not None:
        body["resolution_token"] = token
    return body


def ask_out(task: Task, run_title: str = "") -> dict[str, Any]:
    body = task_out(task)
    body["why"] = task.why
    body["created_at"] = task.created_at.isoformat()
    body["run_title"] = run_title
    if task.kind == "ask" and isinstance(task.tool_input, dict):
        body["prompt"] = task.tool_input.get("prompt")
        body["options"] = task.tool_input.get("options")
        body["multi"] = bool(task.tool_input.get("multi"))
    return body


def run_out(run: Run) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": run.id,
        "state": run.state,
        "approval_mode": run.approval_mode,
        "approval_rules": run.approval_rules,
        "tool_names": run.tool_names,
        "aliases": run.aliases,
        "title": run.title,
        "profile": run.profile,
        "executor_id": run.executor_id,
        "parent_run": run.parent_run,
        "held_task_key": run.held_task_key,
        "created_at": run.created_at.isoformat(),
        "shell_commands": run.shell_commands,
    }
    if run.approval_requirements:
        body["approval_requirements"] = run.approval_requirements
    if run.forbid_self_approval:
        body["forbid_self_approval"] = True
    if run.on_behalf_of is not None:
        body["on_behalf_of"] = run.on_behalf_of
    if run.declared_by is not None:
        body["declared_by"] = run.declared_by  # a member who declared it
    return body


def executor_out(executor: Executor) -> dict[str, Any]:
    return {"id": executor.id, "name": executor.name, "revoked": executor.revoked}


def inbox_row(task: Task) -> dict[str, Any]:
    return {
        "kind": "ask" if task.kind == "ask" else "approval",
        "run_id": task.run_id,
        "key": task.key,
        "tool": task.tool,
        "tool_input": task.tool_input,
        "state": task.state,
        "effect_profile": task.effect_profile,
        "deadline": task.deadline.isoformat() if task.deadline else None,
    }
