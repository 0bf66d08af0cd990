"""SPEC 2.1: declaration and validation of `approval_rules` (and the alias map)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import INVALID_RULES, ApprovalError
from bot.rules import MAX_RULES_BYTES, RulesInvalid, compile_policy, validate_rules


def problems_of(rules: Any, aliases: Any = None) -> list[str]:
    with pytest.raises(RulesInvalid) as info:
        compile_policy(rules, aliases)
    error = info.value
    assert isinstance(error, ApprovalError)
    assert error.code == INVALID_RULES == "invalid_rules"
    assert error.status == 422
    assert error.detail == "; ".join(error.problems)
    assert error.to_json()["error"]["problems"] == error.problems
    return error.problems


VALID = [
    [],
    [{"tool": "bash", "verdict": "allow"}],
    [{"tool": "bash|start_process", "verdict": "ask", "path": "command"}],
    [{"tool": "*", "verdict": "deny", "path": "a.0.b", "match": "", "reason": ""}],
    [{"tool": "x", "verdict": "deny", "origin": "model"}],
    [{"tool": "x", "verdict": "deny", "origin": "author"}],
    [{"tool": "x", "verdict": "deny", "origin": "kernel"}],
    [{"tool": "é|ü?", "verdict": "allow", "path": "ключ", "match": "*ß*", "reason": "ok"}],
]


@pytest.mark.parametrize("rules", VALID)
def test_valid_lists_are_accepted(rules: list[dict[str, str]]) -> None:
    policy = compile_policy(rules)
    assert policy.rules_json == rules
    assert len(validate_rules(rules)) == len(rules)


INVALID: list[tuple[Any, list[str]]] = [
    # (rules, expected problems) — each sentence of SPEC 2.1
    ({"tool": "bash"}, ["approval_rules: must be an array, not object"]),
    ("[]", ["approval_rules: must be an array, not string"]),
    (None, ["approval_rules: must be an array, not null"]),
    ([3], ["approval_rules[0]: must be an object, not number"]),
    ([[]], ["approval_rules[0]: must be an object, not array"]),
    (["bash"], ["approval_rules[0]: must be an object, not string"]),
    ([None], ["approval_rules[0]: must be an object, not null"]),
    (
        [
            {"tool": "a", "verdict": "allow"},
            {"tool": "a", "verdict": "allow"},
            {"tool": "a", "verdict": "allow"},
            {"tool": "a", "verdict": "allow", "mtach": "x"},
        ],
        ["approval_rules[3].mtach: unknown key"],
    ),
    ([{"verdict": "allow"}], ["approval_rules[0].tool: required"]),
    ([{"tool": "a"}], ["approval_rules[0].verdict: required"]),
    ([{}], ["approval_rules[0].tool: required", "approval_rules[0].verdict: required"]),
    ([{"tool": 1, "verdict": "allow"}], ["approval_rules[0].tool: must be a string, not number"]),
    ([{"tool": "", "verdict": "allow"}], ["approval_rules[0].tool: must not be empty"]),
    ([{"tool": "a|", "verdict": "allow"}], ['approval_rules[0].tool: empty glob in "a|"']),
    ([{"tool": "|a", "verdict": "allow"}], ['approval_rules[0].tool: empty glob in "|a"']),
    ([{"tool": "a||b", "verdict": "allow"}], ['approval_rules[0].tool: empty glob in "a||b"']),
    ([{"tool": "|", "verdict": "allow"}], ['approval_rules[0].tool: empty glob in "|"']),
    (
        [{"tool": "a", "verdict": "Allow"}],
        ['approval_rules[0].verdict: must be allow, ask or deny, not "Allow"'],
    ),
    (
        [{"tool": "a", "verdict": True}],
        ["approval_rules[0].verdict: must be a string, not boolean"],
    ),
    (
        [{"tool": "a", "verdict": "allow", "path": ""}],
        ["approval_rules[0].path: must not be empty"],
    ),
    (
        [{"tool": "a", "verdict": "allow", "path": "a..b"}],
        ['approval_rules[0].path: empty segment in "a..b"'],
    ),
    (
        [{"tool": "a", "verdict": "allow", "path": ".a"}],
        ['approval_rules[0].path: empty segment in ".a"'],
    ),
    (
        [{"tool": "a", "verdict": "allow", "path": "a."}],
        ['approval_rules[0].path: empty segment in "a."'],
    ),
    (
        [{"tool": "a", "verdict": "allow", "path": ["a"]}],
        ["approval_rules[0].path: must be a string, not array"],
    ),
    (
        [{"tool": "a", "verdict": "allow", "match": "x"}],
        ["approval_rules[0].match: only allowed together with path"],
    ),
    (
        [{"tool": "a", "verdict": "allow", "path": "p", "match": 3}],
        ["approval_rules[0].match: must be a string, not number"],
    ),
    (
        [{"tool": "a", "verdict": "deny", "reason": None}],
        ["approval_rules[0].reason: must be a string, not null"],
    ),
    (
        [{"tool": "a", "verdict": "deny", "origin": "human"}],
        ['approval_rules[0].origin: must be model, author or kernel, not "human"'],
    ),
    (
        [{"tool": "a", "verdict": "deny", "origin": {}}],
        ["approval_rules[0].origin: must be a string, not object"],
    ),
    (
        [{"tool": "a\ud800", "verdict": "deny"}],
        ["approval_rules[0].tool: not valid Unicode (lone surrogate)"],
    ),
]


@pytest.mark.parametrize(("rules", "expected"), INVALID)
def test_invalid_lists_name_element_and_key(rules: Any, expected: list[str]) -> None:
    assert problems_of(rules) == expected


def test_every_problem_is_reported_never_a_partial_accept() -> None:
    rules = [
        {"tool": "ok", "verdict": "allow"},
        {"tool": "", "verdict": "maybe", "mtach": "x", "extra": 1},
        "not an object",
        {"tool": "ok", "verdict": "deny", "match": "*"},
    ]
    assert problems_of(rules) == [
        "approval_rules[1].mtach: unknown key",
        "approval_rules[1].extra: unknown key",
        "approval_rules[1].tool: must not be empty",
        'approval_rules[1].verdict: must be allow, ask or deny, not "maybe"',
        "approval_rules[2]: must be an object, not string",
        "approval_rules[3].match: only allowed together with path",
    ]


def test_unknown_key_with_odd_characters_is_shown_quoted() -> None:
    assert problems_of([{"tool": "a", "verdict": "allow", "a\nb": 1}]) == [
        'approval_rules[0]."a\\nb": unknown key'
    ]


def _list_of_size(size: int) -> list[dict[str, str]]:
    """A valid list whose compact JSON text is exactly `size` bytes (non-ASCII included)."""
    base = [{"tool": "bash", "verdict": "deny", "reason": "é"}]
    room = size - len(json.dumps(base, separators=(",", ":"), ensure_ascii=False).encode())
    base[0]["reason"] = "é" + "x" * room
    return base


def test_list_of_exactly_65536_bytes_is_accepted() -> None:
    rules = _list_of_size(MAX_RULES_BYTES)
    assert len(json.dumps(rules, separators=(",", ":"), ensure_ascii=False).encode()) == 65_536
    assert compile_policy(rules).rules_json == rules


def test_list_of_65537_bytes_is_refused_naming_the_bound() -> None:
    rules = _list_of_size(MAX_RULES_BYTES + 1)
    assert problems_of(rules) == ["approval_rules: 65537 bytes exceeds the 65536-byte bound"]


def test_size_counts_utf8_bytes_unescaped_not_characters() -> None:
    # 'é' is 2 bytes: a list that is 65,536 characters but more bytes is refused
    rules = [{"tool": "bash", "verdict": "deny", "reason": ""}]
    overhead = len(json.dumps(rules, separators=(",", ":")).encode())
    rules[0]["reason"] = "é" * (MAX_RULES_BYTES - overhead)
    assert problems_of(rules)[0].startswith("approval_rules: ")
    assert "65536-byte bound" in problems_of(rules)[0]


def test_insignificant_whitespace_does_not_count() -> None:
    rules = _list_of_size(MAX_RULES_BYTES)
    spaced = json.loads(json.dumps(rules, indent=8))
    assert compile_policy(spaced).rules_json == rules


def test_oversized_and_invalid_elements_are_all_reported() -> None:
    rules: list[Any] = [*_list_of_size(MAX_RULES_BYTES + 10), {"tool": "a"}]
    problems = problems_of(rules)
    assert problems[0].startswith("approval_rules: ") and "bytes exceeds" in problems[0]
    assert "approval_rules[1].verdict: required" in problems


@pytest.mark.parametrize(
    ("aliases", "expected"),
    [
        ([("shell", "bash")], ["aliases: must be an object, not array"]),
        ({"shell": 1}, ["aliases.shell: must be a string, not number"]),
        ({"shell": ""}, ["aliases.shell: must not be empty"]),
        ({"": "bash"}, ['aliases."": an alias name must be a non-empty string']),
    ],
)
def test_bad_alias_map(aliases: Any, expected: list[str]) -> None:
    assert problems_of([], aliases) == expected


def test_alias_and_rule_problems_come_together() -> None:
    assert problems_of([{"tool": "a"}], {"x": None}) == [
        "approval_rules[0].verdict: required",
        "aliases.x: must be a string, not null",
    ]


def test_policy_keeps_the_declared_list_and_aliases() -> None:
    rules = [{"tool": "bash", "verdict": "allow", "origin": "model"}]
    policy = compile_policy(rules, {"shell": "bash"})
    assert policy.rules_json == rules
    assert dict(policy.aliases) == {"shell": "bash"}
    with pytest.raises(TypeError):
        policy.aliases["x"] = "y"  # type: ignore[index]


# -- property: validation of arbitrary JSON raises nothing but RulesInvalid ---------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.sampled_from(["tool", "verdict", "allow", "ask", "deny", "path", "match", "*", "a.b"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["tool", "verdict", "path", "match", "reason", "origin", "x"])
            | st.text(max_size=4),
            children,
            max_size=6,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values, st.one_of(st.none(), json_values))
def test_validation_of_arbitrary_json_only_raises_rules_invalid(rules: Any, aliases: Any) -> None:
    try:
        policy = compile_policy(rules, aliases)
    except RulesInvalid as error:
        assert error.problems
        assert all(p.startswith(("approval_rules", "aliases")) for p in error.problems)
    else:
        assert isinstance(rules, list)
        assert policy.rules_json == rules
