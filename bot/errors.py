"""Errors as values: one stable code per kind of refusal.

The API, the CLI and the chat messages all show an error the same way: its code and a detail
for people. `status` is the HTTP status the API answers with; other surfaces ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ErrorValue:
    """The `error` object stored on a task and sent on the wire: `{code, detail}`."""

    code: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "detail": self.detail}


@dataclass
class ApprovalError(Exception):
    """A refusal with a stable code. Raised by the core, rendered by every surface."""

    code: str
    detail: str
    status: int = 400
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(f"{self.code}: {self.detail}")

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "detail": self.detail}
        body.update(self.extra)
        return {"error": body}


# The stable codes. Surfaces must use these names, never ad-hoc strings.
APPROVAL_DENIED = "approval_denied"
APPROVAL_EXPIRED = "approval_expired"
QUESTION_EXPIRED = "question_expired"
DECLINED = "declined"
RUN_STOPPED = "run_stopped"
WITHDRAWN = "withdrawn"  # the agent (or a person) stopped waiting for the decision
TOOL_NOT_DECLARED = "tool_not_declared"
APPROVAL_WIDENING = "approval_widening"
INVALID_RULES = "invalid_rules"
ALREADY_DECIDED = "already_decided"
NOT_FOUND = "not_found"
CONFLICT = "conflict"
INVALID_REQUEST = "invalid_request"
INVALID_OPTION = "invalid_option"
INVALID_RESOLUTION_TOKEN = "invalid_resolution_token"
RUN_NOT_HELD = "run_not_held"
RUN_NOT_RUNNING = "run_not_running"
NOT_CLAIMABLE_KIND = "not_claimable_kind"
MEMBER_CREDENTIAL_REQUIRED = "member_credential_required"
APPLICATION_CREDENTIAL_REQUIRED = "application_credential_required"
ORIGIN_NOT_ALLOWED = "origin_not_allowed"
UNAUTHORIZED = "unauthorized"
PAYLOAD_TOO_LARGE = "payload_too_large"
UNKNOWN_PROFILE = "unknown_profile"
GROUP_IN_USE = "group_in_use"  # removing it would leave a running run's calls short of approvers
STORAGE_UNAVAILABLE = "storage_unavailable"  # the database cannot take a write now (503)


class StorageUnavailable(ApprovalError):
    """The store cannot do what was asked now: its disk is full, it is read-only, or it cannot
    be reached. Raised by the store at its boundary (store/faults.py), so every surface shows
    the same code; `cause` (also in the JSON, as `cause`) is one of store.faults' causes, and
    the detail says it plainly. Nothing of the refused operation was kept."""

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(STORAGE_UNAVAILABLE, detail, 503, {"cause": cause})

    @property
    def cause(self) -> str:
        return str(self.extra["cause"])
