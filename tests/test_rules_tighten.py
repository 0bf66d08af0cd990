"""SPEC 2.9: strictness, per-request tightening, continued runs."""

from __future__ import annotations

from typing import Any

import pytest

from bot.errors import APPROVAL_WIDENING, INVALID_REQUEST, ApprovalError
from bot.rules import at_least_as_strict, strictness, tighten

MODES = ["bypass", "ask", "rules"]


def test_strictness_order() -> None:
    assert strictness("bypass") < strictness("ask") < strictness("rules")
    with pytest.raises(ValueError):
        strictness("strict")  # type: ignore[arg-type]


@pytest.mark.parametrize("run", MODES)
@pytest.mark.parametrize("req", [*MODES, None])
def test_mode_may_narrow_never_widen(run: Any, req: Any) -> None:
    if req is not None and MODES.index(req) < MODES.index(run):
        with pytest.raises(ApprovalError) as info:
            tighten(run, None, req, None)
        assert (info.value.code, info.value.status) == (APPROVAL_WIDENING, 422)
        assert info.value.detail == f"approval_mode {req} is less strict than the run's {run}"
    else:
        assert tighten(run, None, req, None) == (req or run, None)


def test_tool_names_subset_is_accepted() -> None:
    run = frozenset({"bash", "write", "read"})
    assert tighten("ask", run, None, ["bash"]) == ("ask", frozenset({"bash"}))
    assert tighten("ask", run, None, run) == ("ask", run)
    assert tighten("ask", run, None, []) == ("ask", frozenset())
    assert tighten("ask", run, None, None) == ("ask", run)


def test_tool_names_may_narrow_an_undeclared_run() -> None:
    assert tighten("ask", None, None, ("bash",)) == ("ask", frozenset({"bash"}))


def test_tool_names_outside_the_run_are_widening() -> None:
    with pytest.raises(ApprovalError) as info:
        tighten("ask", frozenset({"bash"}), None, ["bash", "write", "edit"])
    assert info.value.code == APPROVAL_WIDENING
    assert info.value.status == 422
    assert info.value.detail == "tool_names edit, write are not declared for the run"


def test_one_new_tool_name_reads_singular() -> None:
    with pytest.raises(ApprovalError) as info:
        tighten("ask", frozenset({"bash"}), None, ["write"])
    assert info.value.detail == "tool_names write is not declared for the run"


def test_both_widenings_are_named() -> None:
    with pytest.raises(ApprovalError) as info:
        tighten("rules", frozenset({"bash"}), "bypass", ["write"])
    assert info.value.detail == (
        "approval_mode bypass is less strict than the run's rules; "
        "tool_names write is not declared for the run"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("strict", None, None, None), 'run: unknown approval_mode "strict"'),
        (("ask", None, "loose", None), 'request: unknown approval_mode "loose"'),
        (("ask", None, None, "bash"), "request: tool_names must be a list of names"),
        (("ask", None, None, [1]), "request: tool_names must be strings"),
    ],
)
def test_malformed_requests_are_invalid_not_widening(args: Any, message: str) -> None:
    with pytest.raises(ApprovalError) as info:
        tighten(*args)
    assert info.value.code == INVALID_REQUEST
    assert info.value.detail.startswith(message)


def test_continued_run_is_at_least_as_strict_as_its_parent() -> None:
    assert at_least_as_strict("rules", None, "bypass", None) == ("rules", None)
    assert at_least_as_strict("bypass", None, "ask", None) == ("ask", None)
    parent = frozenset({"bash", "read"})
    assert at_least_as_strict("ask", parent, "ask", None) == ("ask", parent)
    assert at_least_as_strict("ask", None, "ask", parent) == ("ask", parent)
    assert at_least_as_strict("ask", parent, "ask", frozenset({"read", "write"})) == (
        "ask",
        frozenset({"read"}),
    )
