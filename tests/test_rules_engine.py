"""SPEC 2.3-2.8: tool names, paths and text, evaluation, modes, origins, denial details."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import APPROVAL_DENIED, INVALID_REQUEST, TOOL_NOT_DECLARED, ApprovalError
from bot.rules import (
    Policy,
    Verdict,
    compile_policy,
    cut_reason,
    member_denial_detail,
    strip_runner_suffix,
    text_at,
)


def decide(
    rules: list[dict[str, Any]], tool: str = "bash", tool_input: Any = None, **kw: Any
) -> Verdict:
    kw.setdefault("mode", "rules")
    aliases = kw.pop("aliases", None)
    policy = compile_policy(rules, aliases)
    return policy.evaluate(
        tool_name=tool, tool_input={} if tool_input is None else tool_input, **kw
    )


# -- 2.3 tool names -----------------------------------------------------------------------------

SUFFIXES = [
    ("bash__0123456789ab", "bash"),  # exactly 12 lowercase hex: stripped
    ("bash__abcdefabcdef", "bash"),
    ("bash__000000000000", "bash"),
    ("bash__0123456789a", "bash__0123456789a"),  # 11 digits
    ("bash__0123456789abc", "bash__0123456789abc"),  # 13 digits
    ("bash__0123456789AB", "bash__0123456789AB"),  # uppercase
    ("bash__0123456789ag", "bash__0123456789ag"),  # non-hex
    ("bash_0123456789ab", "bash_0123456789ab"),  # one underscore
    ("bash0123456789ab", "bash0123456789ab"),
    ("__0123456789ab", "__0123456789ab"),  # nothing left: not a suffix
    ("a__0123456789ab__0123456789ab", "a__0123456789ab"),  # only one suffix goes
    ("bash__0123456789ab\n", "bash__0123456789ab\n"),
]


@pytest.mark.parametrize(("name", "resolved"), SUFFIXES)
def test_runner_suffix_is_exactly_double_underscore_and_12_lowercase_hex(
    name: str, resolved: str
) -> None:
    assert strip_runner_suffix(name) == resolved
    assert compile_policy([]).resolve_tool(name) == resolved


def test_alias_applies_after_the_suffix_is_stripped() -> None:
    policy = compile_policy([], {"shell": "bash"})
    assert policy.resolve_tool("shell") == "bash"
    assert policy.resolve_tool("shell__0123456789ab") == "bash"
    assert policy.resolve_tool("bash") == "bash"
    assert policy.resolve_tool("shell__0123456789AB") == "shell__0123456789AB"


def test_alias_is_one_step_not_chained() -> None:
    policy = compile_policy([], {"a": "b", "b": "c"})
    assert policy.resolve_tool("a") == "b"


def test_rules_match_the_resolved_name() -> None:
    rules = [{"tool": "bash", "verdict": "allow"}]
    v = decide(rules, "shell__0123456789ab", aliases={"shell": "bash"})
    assert (v.outcome, v.tool, v.matched) == ("granted", "bash", (0,))
    v = decide(rules, "bash__0123456789AB")
    assert (v.outcome, v.tool, v.matched) == ("failed", "bash__0123456789AB", ())


@pytest.mark.parametrize(
    ("tool_glob", "name", "matches"),
    [
        ("bash|start_process", "bash", True),
        ("bash|start_process", "start_process", True),
        ("bash|start_process", "bash|start_process", False),
        ("bash|start_process", "xbash", False),  # each alternative anchored at the start
        ("bash|start_process", "bashx", False),  # ... and at the end
        ("bash|start_process", "start_processing", False),
        ("bash|start_process", "my_start_process", False),
        ("memory_*", "memory_write", True),
        ("memory_*", "memory_", True),
        ("memory_*", "memory", False),
        ("*_write|read", "memory_write", True),
        ("*_write|read", "reader", False),
        ("b?sh", "bash", True),
        ("*", "anything", True),
        ("caf?", "café", False),  # ? is one byte; é is two
        ("caf??", "café", True),
    ],
)
def test_tool_alternatives_are_each_anchored(tool_glob: str, name: str, matches: bool) -> None:
    v = decide([{"tool": tool_glob, "verdict": "allow"}], name)
    assert v.matched == ((0,) if matches else ())


# -- 2.4 paths and text ---------------------------------------------------------------------------

TEXTS: list[tuple[Any, str, str | None]] = [
    ({"command": "ls -la"}, "command", "ls -la"),
    ({"command": ["rm", "-rf", "/"]}, "command", "rm -rf /"),
    ({"command": []}, "command", ""),
    ({"command": [1, 2.5, True, False, None, "x"]}, "command", "1 2.5 true false null x"),
    ({"command": [-0.0, 1e100, 10**30]}, "command", "-0.0 1e+100 " + str(10**30)),
    ({"command": ["a", {"b": 1}]}, "command", None),  # an array holding an object
    ({"command": ["a", ["b"]]}, "command", None),  # an array holding an array
    ({"command": 5}, "command", None),  # a lone number
    ({"command": 2.5}, "command", None),
    ({"command": True}, "command", None),  # a lone boolean
    ({"command": None}, "command", None),  # a lone null
    ({"command": {"a": "b"}}, "command", None),  # an object
    ({}, "command", None),  # missing
    ({"edits": [{"path": "a.py"}, {"path": "b.py"}]}, "edits.0.path", "a.py"),
    ({"edits": [{"path": "a.py"}, {"path": "b.py"}]}, "edits.1.path", "b.py"),
    ({"edits": [{"path": "a.py"}]}, "edits.1.path", None),  # index out of range
    ({"edits": [{"path": "a.py"}]}, "edits.-1.path", None),  # not a decimal index
    ({"edits": [{"path": "a.py"}]}, "edits.x.path", None),
    ({"edits": [{"path": "a.py"}]}, "edits.0x0.path", None),
    ({"edits": [{"path": "a.py"}]}, "edits.٠.path", None),  # a non-ASCII digit
    ({"edits": {"0": {"path": "k.py"}}}, "edits.0.path", "k.py"),  # on an object, 0 is a key
    ({"a": {"b": {"c": "deep"}}}, "a.b.c", "deep"),
    ({"a": "string"}, "a.b", None),  # walking into a string
    ([["x", "y"]], "0", "x y"),  # tool_input itself an array
    ("top", "a", None),
    ({"a.b": "dotted key"}, "a.b", None),  # segments split on "."
    ({"text": "line1\nline2"}, "text", "line1\nline2"),
]


@pytest.mark.parametrize(("tool_input", "path", "expected"), TEXTS)
def test_text_at_path(tool_input: Any, path: str, expected: str | None) -> None:
    assert text_at(tool_input, path) == expected
    # a rule with path and no match matches exactly when there is text
    v = decide([{"tool": "t", "verdict": "allow", "path": path}], "t", tool_input)
    assert v.matched == (() if expected is None else (0,))
    # a match rule with `*` matches exactly when there is text too
    v = decide([{"tool": "t", "verdict": "allow", "path": path, "match": "*"}], "t", tool_input)
    assert v.matched == (() if expected is None else (0,))


def test_rule_without_path_matches_the_tool_as_a_whole() -> None:
    inputs: list[Any] = [{}, {"command": 5}, None, [], "x"]
    for tool_input in inputs:
        v = decide([{"tool": "bash", "verdict": "allow"}], "bash", tool_input)
        assert v.matched == (0,)


def test_match_globs_work_on_the_utf8_text() -> None:
    rules = [
        {"tool": "t", "verdict": "deny", "path": "p", "match": "caf?"},
        {"tool": "t", "verdict": "deny", "path": "p", "match": "caf??"},
        {"tool": "t", "verdict": "deny", "path": "p", "match": "*a*b*"},
        {"tool": "t", "verdict": "deny", "path": "p", "match": "[a]"},
        {"tool": "t", "verdict": "deny", "path": "p", "match": "a\\b"},
    ]
    assert decide(rules, "t", {"p": "café"}, mode="bypass").matched == (1,)
    assert decide(rules, "t", {"p": "xa\n\nby"}, mode="bypass").matched == (2,)
    assert decide(rules, "t", {"p": "[a]"}, mode="bypass").matched == (3,)
    assert decide(rules, "t", {"p": "a"}, mode="bypass").matched == ()
    assert decide(rules, "t", {"p": "a\\b"}, mode="bypass").matched == (2, 4)
    assert decide(rules, "t", {"p": ["a", "b"]}, mode="bypass").matched == (2,)


def test_many_globs_on_one_path_use_the_multi_pattern_matcher_with_the_same_answers() -> None:
    rules = [
        {"tool": "bash", "verdict": "allow", "path": "command", "match": f"*tok{i}*x?y*"}
        for i in range(40)
    ] + [{"tool": "bash", "verdict": "deny", "path": "command", "match": "*tok3*"}]
    v = decide(rules, "bash", {"command": "a tok3 xzy tok31 x-y"}, mode="bypass")
    assert v.matched == (3, 31, 40)
    assert v.outcome == "failed"


def test_lone_surrogates_in_input_do_not_crash() -> None:
    v = decide(
        [{"tool": "t", "verdict": "deny", "path": "p", "match": "a*"}], "t", {"p": "a\ud800"}
    )
    assert v.matched == (0,)


# -- 2.5 evaluation -------------------------------------------------------------------------------


def test_every_matching_rule_is_collected_in_order() -> None:
    rules = [
        {"tool": "bash", "verdict": "allow"},
        {"tool": "write", "verdict": "deny"},
        {"tool": "bash", "verdict": "ask", "path": "command", "match": "git *"},
        {"tool": "b*", "verdict": "allow", "path": "command"},
        {"tool": "bash", "verdict": "deny", "path": "other"},
    ]
    v = decide(rules, "bash", {"command": "git status"}, mode="ask")
    assert v.matched == (0, 2, 3)
    assert (v.outcome, v.rule_index) == ("parked", 2)


@pytest.mark.parametrize("mode", ["bypass", "ask", "rules"])
def test_deny_wins_over_earlier_and_later_allows(mode: str) -> None:
    rules = [
        {"tool": "bash", "verdict": "allow"},
        {"tool": "bash", "verdict": "ask"},
        {"tool": "bash", "verdict": "deny", "reason": "first"},
        {"tool": "bash", "verdict": "allow"},
        {"tool": "bash", "verdict": "deny", "reason": "second"},
    ]
    v = decide(rules, mode=mode)
    assert v.outcome == "failed"
    assert v.error is not None and v.error.code == APPROVAL_DENIED
    assert v.error.detail == "first"  # the first matching deny's reason
    assert v.rule_index == 2
    assert v.matched == (0, 1, 2, 3, 4)


def test_ask_beats_allow() -> None:
    rules = [{"tool": "bash", "verdict": "allow"}, {"tool": "bash", "verdict": "ask"}]
    for mode in ("ask", "rules"):
        v = decide(rules, mode=mode)
        assert (v.outcome, v.rule_index, v.why) == ("parked", 1, "rule 1 (ask) matches bash")


def test_rules_of_other_origins_are_ignored_for_model_calls() -> None:
    rules = [
        {"tool": "bash", "verdict": "deny", "origin": "author"},
        {"tool": "bash", "verdict": "deny", "origin": "kernel"},
    ]
    v = decide(rules, mode="bypass")
    assert (v.outcome, v.matched) == ("granted", ())


# -- 2.6 the mode table (model rows) ------------------------------------------------------------

DENY = {"tool": "bash", "verdict": "deny"}
ALLOW = {"tool": "bash", "verdict": "allow"}
ASK = {"tool": "bash", "verdict": "ask"}

MODE_TABLE = [
    # (mode, rules, outcome, error detail or None, rule_index, why)
    ("bypass", [DENY], "failed", "approval rule 0 denies bash", 0, "denied by rule 0"),
    ("bypass", [ALLOW], "granted", None, 0, "allowed by rule 0"),
    ("bypass", [ASK], "granted", None, None, "granted in bypass mode (rule 0 asks)"),
    ("bypass", [], "granted", None, None, "granted in bypass mode"),
    ("ask", [DENY], "failed", "approval rule 0 denies bash", 0, "denied by rule 0"),
    ("ask", [ALLOW], "granted", None, 0, "allowed by rule 0"),
    ("ask", [ASK], "parked", None, 0, "rule 0 (ask) matches bash"),
    ("ask", [], "parked", None, None, "no rule allows bash in ask mode"),
    ("rules", [DENY], "failed", "approval rule 0 denies bash", 0, "denied by rule 0"),
    ("rules", [ALLOW], "granted", None, 0, "allowed by rule 0"),
    ("rules", [ASK], "parked", None, 0, "rule 0 (ask) matches bash"),
    (
        "rules",
        [],
        "failed",
        "no approval rule allows bash",
        None,
        "no approval rule allows bash in rules mode",
    ),
    ("bypass", [ALLOW, ASK], "granted", None, None, "granted in bypass mode (rule 1 asks)"),
    ("ask", [ALLOW, ASK], "parked", None, 1, "rule 1 (ask) matches bash"),
    ("rules", [ASK, ALLOW], "parked", None, 0, "rule 0 (ask) matches bash"),
]


@pytest.mark.parametrize(("mode", "rules", "outcome", "detail", "rule_index", "why"), MODE_TABLE)
def test_mode_table(
    mode: str,
    rules: list[dict[str, str]],
    outcome: str,
    detail: str | None,
    rule_index: int | None,
    why: str,
) -> None:
    v = decide(rules, "bash", mode=mode)
    assert v.outcome == outcome
    assert v.tool == "bash"
    if detail is None:
        assert v.error is None
    else:
        assert v.error is not None
        assert (v.error.code, v.error.detail) == (APPROVAL_DENIED, detail)
    assert v.rule_index == rule_index
    assert v.why == why
    assert v.by_member is False


def test_rules_mode_unmatched_names_the_resolved_tool() -> None:
    v = decide([], "shell__0123456789ab", aliases={"shell": "bash"})
    assert v.error is not None and v.error.detail == "no approval rule allows bash"


def test_a_typo_in_a_tool_name_is_a_refusal_in_rules_mode() -> None:
    v = decide([{"tool": "bash", "verdict": "allow"}], "bsah")
    assert v.outcome == "failed"


def test_catch_all_allow_written_last() -> None:
    rules = [{"tool": "bash", "verdict": "deny"}, {"tool": "*", "verdict": "allow"}]
    assert decide(rules, "write").outcome == "granted"
    assert decide(rules, "bash").outcome == "failed"


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ApprovalError) as info:
        decide([], mode="strict")
    assert info.value.code == INVALID_REQUEST


# -- 2.7 origins ----------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["author", "kernel"])
@pytest.mark.parametrize("mode", ["bypass", "ask", "rules"])
def test_author_and_kernel_rows_are_pre_approved(origin: str, mode: str) -> None:
    rules = [DENY, ASK]  # model rules do not apply to them
    v = decide(rules, origin=origin, mode=mode)
    assert (v.outcome, v.error, v.matched, v.rule_index) == ("granted", None, (), None)
    assert v.why == f"{origin} call pre-approved"


@pytest.mark.parametrize("origin", ["author", "kernel"])
@pytest.mark.parametrize("mode", ["bypass", "ask", "rules"])
@pytest.mark.parametrize(
    ("verdict", "outcome"), [("deny", "failed"), ("ask", "parked"), ("allow", "granted")]
)
def test_a_rule_naming_the_origin_applies_directly_whatever_the_mode(
    origin: str, mode: str, verdict: str, outcome: str
) -> None:
    rules = [{"tool": "bash", "verdict": verdict, "origin": origin, "reason": "no"}]
    v = decide(rules, origin=origin, mode=mode)
    assert (v.outcome, v.matched, v.rule_index) == (outcome, (0,), 0)
    if outcome == "failed":
        assert v.error is not None and v.error.detail == "no"
    else:
        assert v.error is None


def test_origin_rules_see_only_their_own_origin() -> None:
    rules = [{"tool": "bash", "verdict": "deny", "origin": "kernel"}]
    assert decide(rules, origin="author").outcome == "granted"
    assert decide(rules, origin="kernel").outcome == "failed"


def test_origin_defaults_to_model() -> None:
    policy = compile_policy([{"tool": "bash", "verdict": "ask"}])
    v = policy.evaluate(tool_name="bash", tool_input={}, mode="ask")
    assert v.outcome == "parked"


def test_unknown_origin_is_refused() -> None:
    with pytest.raises(ApprovalError) as info:
        decide([], origin="human")
    assert (info.value.code, info.value.status) == (INVALID_REQUEST, 422)


def test_member_author_row_that_would_park_is_granted_as_approved_by_the_member() -> None:
    rules = [{"tool": "bash", "verdict": "ask", "origin": "author"}]
    v = decide(rules, origin="author", member=True)
    assert (v.outcome, v.by_member, v.rule_index) == ("granted", True, 0)
    assert v.why == "your own command: approved by you"
    # without the member credential it parks
    v = decide(rules, origin="author", member=False)
    assert (v.outcome, v.by_member) == ("parked", False)


def test_member_deny_still_binds() -> None:
    rules = [
        {"tool": "bash", "verdict": "ask", "origin": "author"},
        {"tool": "bash", "verdict": "deny", "origin": "author", "reason": "never"},
    ]
    v = decide(rules, origin="author", member=True)
    assert (v.outcome, v.by_member) == ("failed", False)
    assert v.error is not None and v.error.detail == "never"


def test_member_flag_does_nothing_for_model_or_kernel_rows() -> None:
    assert decide([ASK], member=True, mode="ask").outcome == "parked"
    kernel_ask = [{"tool": "bash", "verdict": "ask", "origin": "kernel"}]
    v = decide(kernel_ask, origin="kernel", member=True)
    assert (v.outcome, v.by_member) == ("parked", False)


def test_member_author_row_without_rules_is_simply_pre_approved() -> None:
    v = decide([], origin="author", member=True)
    assert (v.outcome, v.by_member) == ("granted", False)


# -- 2.8 denial detail ----------------------------------------------------------------------------


def test_deny_reason_is_the_detail() -> None:
    v = decide([{"tool": "bash", "verdict": "deny", "reason": "force push rewrites history"}])
    assert v.error is not None
    assert v.error.to_json() == {"code": "approval_denied", "detail": "force push rewrites history"}
    assert v.why == "denied by rule 0: force push rewrites history"


def test_deny_without_reason_names_rule_and_resolved_tool() -> None:
    rules = [ALLOW, {"tool": "b*", "verdict": "deny"}]
    v = decide(rules, "bash__0123456789ab")
    assert v.error is not None and v.error.detail == "approval rule 1 denies bash"


def test_empty_reason_counts_as_no_reason() -> None:
    v = decide([{"tool": "bash", "verdict": "deny", "reason": ""}])
    assert v.error is not None and v.error.detail == "approval rule 0 denies bash"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("x" * 256, "x" * 256),
        ("x" * 257, "x" * 256),
        ("x" * 255 + "é", "x" * 255),  # é would straddle byte 256: dropped whole
        ("x" * 254 + "é", "x" * 254 + "é"),  # é ends exactly at byte 256
        ("x" * 254 + "€", "x" * 254),  # a three-byte character cut after its first 2 bytes
        ("x" * 253 + "€", "x" * 253 + "€"),
        ("x" * 255 + "😀", "x" * 255),  # four bytes
        ("é" * 200, "é" * 128),
        ("short", "short"),
    ],
)
def test_reason_is_cut_to_256_bytes_on_a_character_boundary(reason: str, expected: str) -> None:
    assert cut_reason(reason) == expected
    assert len(expected.encode()) <= 256
    v = decide([{"tool": "bash", "verdict": "deny", "reason": reason}])
    assert v.error is not None and v.error.detail == expected


def test_member_denial_detail() -> None:
    assert member_denial_detail("alice", None) == "denied by alice"
    assert member_denial_detail("alice", "") == "denied by alice"
    assert member_denial_detail("alice", "not now") == "not now"


# -- tool_names (2.9): checked before any rule, for every origin -----------------------------------


@pytest.mark.parametrize("origin", ["model", "author", "kernel"])
def test_tool_outside_tool_names_fails_not_declared(origin: str) -> None:
    rules = [{"tool": "*", "verdict": "allow", "origin": origin}]
    v = decide(rules, "write", origin=origin, tool_names=frozenset({"bash"}), mode="bypass")
    assert v.outcome == "failed"
    assert v.error is not None
    assert v.error.to_json() == {
        "code": TOOL_NOT_DECLARED,
        "detail": "tool write is not declared for this run",
    }
    assert (v.matched, v.rule_index) == ((), None)


def test_tool_names_are_checked_on_the_resolved_name() -> None:
    rules = [{"tool": "bash", "verdict": "allow"}]
    names = frozenset({"bash"})
    v = decide(rules, "shell__0123456789ab", aliases={"shell": "bash"}, tool_names=names)
    assert v.outcome == "granted"
    v = decide(rules, "shell", tool_names=names)
    assert v.error is not None and v.error.code == TOOL_NOT_DECLARED


def test_tool_names_none_means_every_tool_and_empty_means_none() -> None:
    assert decide([ALLOW], tool_names=None).outcome == "granted"
    v = decide([ALLOW], tool_names=frozenset())
    assert v.error is not None and v.error.code == TOOL_NOT_DECLARED


# -- compile once, memoise safely --------------------------------------------------------------


def test_equal_declarations_share_one_compiled_policy() -> None:
    rules = [{"tool": "bash", "verdict": "allow"}]
    assert compile_policy(rules) is compile_policy([dict(rules[0])])
    assert compile_policy(rules) is not compile_policy(rules, {"a": "b"})


def test_memoised_plans_and_verdicts_stay_exact_across_many_calls() -> None:
    policy = compile_policy(
        [
            {"tool": "bash", "verdict": "deny", "path": "command", "match": "*rm -rf*"},
            {"tool": "bash", "verdict": "allow", "path": "command", "match": "ls*"},
        ]
    )
    for i in range(3000):  # past the plan memo bound: distinct names keep coming
        name = f"bash__{i:012x}" if i % 2 else f"tool{i}"
        command = "rm -rf /" if i % 3 == 0 else "ls"
        v = policy.evaluate(tool_name=name, tool_input={"command": command}, mode="rules")
        if i % 2 == 0:
            assert v.outcome == "failed" and v.matched == ()
        elif i % 3 == 0:
            assert v.outcome == "failed" and v.matched == (0,)
        else:
            assert v.outcome == "granted" and v.matched == (1,)


def test_verdict_to_json() -> None:
    v = decide([{"tool": "bash", "verdict": "deny", "reason": "r"}])
    assert v.to_json() == {
        "tool": "bash",
        "outcome": "failed",
        "error": {"code": "approval_denied", "detail": "r"},
        "matched": [0],
    }


# -- properties -------------------------------------------------------------------------------

NAMES = ["bash", "write", "read", "memory_x", "bash__0123456789ab"]
GLOBS = ["*", "bash", "b*", "*x", "w?ite", "*a*", "ls*", "*rm*", "", "?"]
PATHS = ["command", "path", "a.0", "a.b", "0"]

rule_st = st.fixed_dictionaries(
    {
        "tool": st.lists(st.sampled_from(GLOBS[:-2]), min_size=1, max_size=3).map("|".join),
        "verdict": st.sampled_from(["allow", "ask", "deny"]),
    },
    optional={
        "origin": st.sampled_from(["model", "author", "kernel"]),
        "reason": st.text(max_size=5),
    },
).flatmap(
    lambda r: st.one_of(
        st.just(r),
        st.sampled_from(PATHS).map(lambda p: {**r, "path": p}),
        st.tuples(st.sampled_from(PATHS), st.sampled_from(GLOBS)).map(
            lambda pm: {**r, "path": pm[0], "match": pm[1]}
        ),
    )
)
json_st = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda c: (
        st.lists(c, max_size=3)
        | st.dictionaries(st.sampled_from(["command", "path", "a", "b", "0"]), c, max_size=3)
    ),
    max_leaves=10,
)
call_st = st.fixed_dictionaries(
    {
        "tool_name": st.sampled_from(NAMES) | st.text(max_size=6),
        "tool_input": json_st,
        "origin": st.sampled_from(["model", "author", "kernel"]),
        "mode": st.sampled_from(["bypass", "ask", "rules"]),
        "member": st.booleans(),
    }
)


def _policy(rules: list[dict[str, Any]]) -> Policy:
    return compile_policy(rules, {"shell": "bash"})


@settings(max_examples=100, deadline=None)
@given(st.lists(rule_st, max_size=6), st.lists(call_st, min_size=1, max_size=4))
def test_evaluating_any_valid_list_on_any_input_never_crashes(
    rules: list[dict[str, Any]], calls: list[dict[str, Any]]
) -> None:
    policy = _policy(rules)
    for call in calls:
        v = policy.evaluate(**call)
        assert v.outcome in ("granted", "parked", "failed")
        assert (v.error is not None) == (v.outcome == "failed")
        assert list(v.matched) == sorted(set(v.matched))
        assert all(rules[i].get("origin", "model") == call["origin"] for i in v.matched)
        assert v.rule_index is None or v.rule_index in v.matched


@settings(max_examples=100, deadline=None)
@given(
    st.lists(rule_st, max_size=5),
    st.lists(st.tuples(st.integers(0, 10), rule_st), max_size=4),
    call_st,
)
def test_adding_allow_rules_anywhere_never_overturns_a_deny(
    rules: list[dict[str, Any]], inserts: list[tuple[int, dict[str, Any]]], call: dict[str, Any]
) -> None:
    rules = [{**rule, "reason": f"rule{i}"} for i, rule in enumerate(rules)]  # names the rule
    before = _policy(rules).evaluate(**call)
    widened = list(rules)
    for position, rule in inserts:
        widened.insert(min(position, len(widened)), {**rule, "verdict": "allow"})
    after = _policy(widened).evaluate(**call)
    if before.error is not None and before.rule_index is not None:
        assert after.outcome == "failed"
        assert after.error is not None
        assert after.error.detail == before.error.detail  # the same first deny decides


def test_integers_past_the_str_digit_limit_still_have_text() -> None:
    big = 10**5000 + 7  # str() refuses it by default; the text must still be spelled out
    text = text_at({"a": [-big, "x"]}, "a")
    assert text is not None
    assert text.startswith("-1000") and text.endswith("0007 x")
    assert len(text) == 1 + 5001 + 2


def test_a_very_long_digit_segment_is_never_in_range() -> None:
    path = "a." + "1" * 5000
    v = decide([{"tool": "t", "verdict": "allow", "path": path}], "t", {"a": [1, 2]}, mode="ask")
    assert v.matched == ()
    v = decide([{"tool": "t", "verdict": "allow", "path": path}], "t", {"a": {"1" * 5000: "k"}})
    assert v.matched == (0,)
