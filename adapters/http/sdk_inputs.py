"""What the SDK sends and runs around an approval: the approve body (edited, learning a rule),
and the input a granted call runs with (a decorated function's arguments, or a person's edit)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any, Literal

from adapters.http import models as m
from adapters.http.sdk_errors import EditedInputUnfit


class _Unedited:
    """The default of `approve(tool_input=…)`: approve the call as proposed. (None cannot be
    that default: an edit to null is a real request, which the service refuses.)"""

    def __repr__(self) -> str:
        return "UNEDITED"


UNEDITED: Any = _Unedited()
Scope = Literal["run", "profile"]


def input_to_run(task: m.TaskOut) -> Any:
    """What the agent runs once a call is granted: the input a person approved when they edited
    it (`approved_input`), else the input as proposed (`tool_input`)."""
    return task.tool_input if task.approved_input is None else task.approved_input


def approve_body(
    tool_input: Any = UNEDITED, allow: Scope | None = None, rule: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The body of `POST …/approve`: none for a plain approval; `tool_input` approves the call
    as edited; `allow` (the scope) also learns a rule, `rule` overriding the proposal."""
    body: dict[str, Any] = {}
    if tool_input is not UNEDITED:
        body["tool_input"] = tool_input
    if allow is not None:
        body["allow"] = {"scope": allow} | ({} if rule is None else {"rule": rule})
    elif rule is not None:
        raise ValueError("a rule is learned only with allow='run' or allow='profile'")
    return body or None


def call_input(func: Callable[..., Any], args: Any, kwargs: Any) -> dict[str, Any]:
    """The tool input for a decorated function: its bound arguments as JSON."""
    bound = inspect.signature(func).bind(*args, **kwargs)
    bound.apply_defaults()
    loaded: dict[str, Any] = json.loads(json.dumps(bound.arguments, default=repr))
    return loaded


def edited_call(func: Callable[..., Any], approved: Any) -> tuple[list[Any], dict[str, Any]]:
    """The arguments to call a decorated function with, from the approved (edited) input: the
    inverse of `call_input`."""
    signature = inspect.signature(func)
    unknown = set(approved) - set(signature.parameters) if isinstance(approved, dict) else None
    if unknown is None or unknown:
        what = f"unknown arguments {sorted(unknown)}" if unknown else "not an object"
        raise EditedInputUnfit("edited_input_unfit", f"{func.__name__}: the approved input: {what}")
    bound = inspect.BoundArguments(signature, dict(approved))
    try:
        signature.bind(*bound.args, **bound.kwargs)
    except TypeError as error:
        raise EditedInputUnfit("edited_input_unfit", f"{func.__name__}: {error}") from None
    return list(bound.args), dict(bound.kwargs)
