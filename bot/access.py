"""Who may do what: the one place that checks a credential's workspace, its kind, and the
origins its appends may claim. Pure functions over a Principal; every surface (the core, the
HTTP middleware) calls these rather than keeping checks of its own.
"""

from __future__ import annotations

from collections.abc import Collection

from bot import errors
from bot.domain import CLAIMABLE_ORIGINS, Principal, Run
from bot.errors import ApprovalError

MEMBER_DETAIL = "deciding needs a person's (member) credential, not an application's"
APPLICATION_DETAIL = "this needs an application's credential, not a person's"
# What a person's own credential may claim: people append author rows (SPEC 2.7).
MEMBER_CLAIMS = frozenset({"author"})


def check_workspace(principal: Principal, workspace_id: str) -> None:
    """A credential of one workspace sees nothing of another: the same 404 as a missing one."""
    if principal.workspace_id != workspace_id:
        raise ApprovalError(errors.NOT_FOUND, "workspace not found", 404)


def require_member(principal: Principal, detail: str = MEMBER_DETAIL) -> None:
    """Deciding (approve, deny, answer, retry, abandon) is for people."""
    if not principal.is_member:
        raise ApprovalError(errors.MEMBER_CREDENTIAL_REQUIRED, detail, 403)


def require_application(principal: Principal, detail: str = APPLICATION_DETAIL) -> None:
    """Executors belong to an agent runtime, never to a person."""
    if principal.is_member:
        raise ApprovalError(errors.APPLICATION_CREDENTIAL_REQUIRED, detail, 403)


DECLARER_DETAIL = "{} needs a member's credential or that of the application that declared the run"


def require_member_or_declarer(principal: Principal, run: Run, doing: str = "withdrawing") -> None:
    """People may withdraw any parked task of their workspace, and stop any run; an application
    only those of a run it declared (another agent's calls are not its to give up)."""
    if principal.is_member or (
        run.application_id is not None and run.application_id == principal.id
    ):
        return
    raise ApprovalError(errors.MEMBER_CREDENTIAL_REQUIRED, DECLARER_DETAIL.format(doing), 403)


def check_origin(principal: Principal, origin: str, may_claim: Collection[str] = ()) -> None:
    """May this credential append a row of `origin`? `model` is anyone's; `author` a person's,
    or an application's whose registration says so (`may_claim`, from `admin app add
    --may-claim`); `kernel` only such an application's. Refused: `403 origin_not_allowed`."""
    if origin == "model" or origin not in CLAIMABLE_ORIGINS:
        return  # `model` needs no right; an unknown origin is the caller's 422 to give
    allowed = MEMBER_CLAIMS if principal.is_member else may_claim
    if origin in allowed:
        return
    if principal.is_member:
        detail = f"origin {origin}: a person's credential appends author rows only"
    else:
        detail = (
            f"origin {origin}: application {principal.name} is not registered to claim it "
            f"(admin app add --may-claim {origin})"
        )
    raise ApprovalError(errors.ORIGIN_NOT_ALLOWED, detail, 403)
