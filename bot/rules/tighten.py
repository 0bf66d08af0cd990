"""Per-request tightening (SPEC 2.9): a request may narrow the frozen settings, never widen them."""

from __future__ import annotations

from collections.abc import Iterable

from bot.errors import APPROVAL_WIDENING, INVALID_REQUEST, ApprovalError
from bot.rules.engine import MODES, Mode
from bot.rules.validate import compact_json

_STRICTNESS: dict[str, int] = {mode: rank for rank, mode in enumerate(MODES)}


def strictness(mode: Mode) -> int:
    """`bypass` < `ask` < `rules`. Raises ValueError for anything else."""
    try:
        return _STRICTNESS[mode]
    except (KeyError, TypeError):
        raise ValueError(f"unknown approval mode {mode!r}") from None


def _check_mode(mode: object, what: str) -> Mode:
    if not isinstance(mode, str) or mode not in _STRICTNESS:
        shown = compact_json(mode) if isinstance(mode, str) else repr(mode)
        raise ApprovalError(
            INVALID_REQUEST,
            f"{what}: unknown approval_mode {shown} (expected bypass, ask or rules)",
            422,
        )
    return mode  # type: ignore[return-value]


def _names(names: Iterable[str], what: str) -> frozenset[str]:
    if isinstance(names, str | bytes):
        raise ApprovalError(INVALID_REQUEST, f"{what}: tool_names must be a list of names", 422)
    result = frozenset(names)
    if not all(isinstance(n, str) for n in result):
        raise ApprovalError(INVALID_REQUEST, f"{what}: tool_names must be strings", 422)
    return result


def tighten(
    run_mode: Mode,
    run_tool_names: frozenset[str] | None,
    req_mode: Mode | None,
    req_tool_names: Iterable[str] | None,
) -> tuple[Mode, frozenset[str] | None]:
    """The effective `(approval_mode, tool_names)` for one request.

    `None` means "not given" for the request and "every tool" for the run's `tool_names`.
    A request mode less strict than the run's, or request tool names outside the run's, is
    refused with `422 approval_widening` naming everything that widened.
    """
    run_mode = _check_mode(run_mode, "run")
    mode = run_mode if req_mode is None else _check_mode(req_mode, "request")
    widened: list[str] = []
    if strictness(mode) < strictness(run_mode):
        widened.append(f"approval_mode {mode} is less strict than the run's {run_mode}")
    names = run_tool_names
    if req_tool_names is not None:
        names = _names(req_tool_names, "request")
        if run_tool_names is not None:
            extra = sorted(names - run_tool_names)
            if extra:
                verb = "is" if len(extra) == 1 else "are"
                widened.append(f"tool_names {', '.join(extra)} {verb} not declared for the run")
    if widened:
        raise ApprovalError(APPROVAL_WIDENING, "; ".join(widened), 422)
    return mode, names


def at_least_as_strict(
    parent_mode: Mode,
    parent_tool_names: frozenset[str] | None,
    child_mode: Mode,
    child_tool_names: frozenset[str] | None,
) -> tuple[Mode, frozenset[str] | None]:
    """Settings for a run continued from another (SPEC 2.9 last bullet).

    Never less strict than the parent's current settings: the stricter mode of the two, and the
    intersection of the declared tools (`None` = every tool).
    """
    mode = max(_check_mode(parent_mode, "parent"), _check_mode(child_mode, "child"), key=strictness)
    if parent_tool_names is None:
        names = child_tool_names
    elif child_tool_names is None:
        names = parent_tool_names
    else:
        names = parent_tool_names & child_tool_names
    return mode, names
