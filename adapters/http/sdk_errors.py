"""The SDK's errors: every refusal is a value with the service's stable `code` and `detail`."""

from __future__ import annotations

import json
from typing import Any

from adapters.http import models as m


class ApprovalbotError(Exception):
    """Anything the service refused; `code` is the stable error code, `detail` says why."""

    def __init__(self, code: str, detail: str, status: int = 0) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.status = status


class ApiError(ApprovalbotError):
    """An HTTP error answer (`{"error": {...}}`); `body` holds every field of it."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(
            str(body.get("code", f"http_{status}")), str(body.get("detail", "")), status
        )
        self.body = body


class CallRefused(ApprovalbotError):
    """A call or question ended without a grant; `task` is how it ended."""

    def __init__(self, task: m.TaskOut) -> None:
        error = task.error or {}
        super().__init__(str(error.get("code", task.state)), str(error.get("detail", "")))
        self.task = task


class ApprovalDenied(CallRefused):
    """Refused: by a rule, by a person (`detail` is their reason), or the tool is undeclared."""


class ApprovalExpired(CallRefused):
    """Nobody decided before the deadline (`approval_expired` or `question_expired`)."""


class QuestionDeclined(CallRefused):
    """A person declined to answer the question."""


class RunStopped(CallRefused):
    """The run was stopped while the call waited."""


class CallWithdrawn(CallRefused):
    """The call was withdrawn while it waited (`Run.withdraw`, by its agent or a member)."""


def error_from(status: int, text: str) -> ApiError:
    """The API's error envelope as an exception; anything else (a proxy's HTML page) kept short."""
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    return ApiError(status, error if isinstance(error, dict) else {"detail": text[:200]})


def settled(task: m.TaskOut) -> m.TaskOut:
    """The task if it ended well (granted or answered); otherwise the typed refusal."""
    if task.state in ("granted", "resolved"):
        return task
    code = (task.error or {}).get("code")
    if task.state == "timed_out":
        raise ApprovalExpired(task)
    if task.state == "cancelled":
        raise CallWithdrawn(task) if code == "withdrawn" else RunStopped(task)
    if code == "declined":
        raise QuestionDeclined(task)
    raise ApprovalDenied(task)


class EditedInputUnfit(ApprovalbotError):
    """A person approved an edited input that the decorated function cannot be called with (not
    an object of its parameters): nothing ran, since running the unedited call would do what
    nobody approved."""
