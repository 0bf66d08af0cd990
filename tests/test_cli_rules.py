"""`approvalbot rules validate` / `rules check` (SPEC 4a).

The main paths run the real command (`python -m bot.cli`) as subprocesses, all started at once
because interpreter and import start-up dominate; the remaining edge cases go through click's
in-process runner on the same `main` group to keep the suite fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.rules import compile_policy

RULES = [
    {
        "tool": "bash|start_process",
        "path": "command",
        "match": "*git push*--force*",
        "verdict": "deny",
        "reason": "force push rewrites history others may hold; a person can run it",
    },
    {"tool": "write|edit", "path": "path", "match": "*.env", "verdict": "deny"},
    {"tool": "memory_*|ask|delegate_task|code|skill", "verdict": "allow"},
    {"tool": "bash|start_process", "path": "command", "match": "ls*", "verdict": "allow"},
    {"tool": "bash", "verdict": "ask", "origin": "author"},
]

CALLS: list[dict[str, Any]] = [
    {"tool": "bash", "input": {"command": "git push origin main --force"}},
    {"tool": "shell__0123456789ab", "input": {"command": ["ls", "-la"]}},
    {"tool": "edit", "input": {"path": "app/.env"}},
    {"tool": "bash", "input": {"command": "rm -rf /"}, "origin": "author"},
    {"tool": "bash", "input": {"command": "make"}, "origin": "author", "member": True},
    {"tool_name": "memory_write", "tool_input": {"key": "k"}, "ts": "2026-01-01T00:00:00Z"},
    {"tool": "bsah", "input": {}},
    {"tool": "bash", "input": {"command": "cat notes"}, "origin": "kernel"},
]


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Result]]:
    d: Path = tmp_path_factory.mktemp("cli")
    (d / "rules.json").write_text(json.dumps(RULES, indent=2))
    (d / "bad.json").write_text(
        json.dumps([{"tool": "a", "verdict": "allow", "mtach": "x"}, {"tool": "", "verdict": "no"}])
    )
    (d / "broken.json").write_text('[{"tool": "a",\n')
    lines = [json.dumps(c) for c in CALLS]
    lines.insert(3, "")  # blank lines are skipped but still counted
    (d / "calls.jsonl").write_text("\n".join(lines) + "\n")
    (d / "badcalls.jsonl").write_text(
        '{"tool": "bash", "input": {}}\n[1, 2]\n{"tool": "bash", "origin": "human"}\n{nope\n'
        '{"input": {}}\n{"tool": "bash", "member": "yes"}\n'
    )
    m = [sys.executable, "-m", "bot.cli", "rules"]
    rules, calls = str(d / "rules.json"), str(d / "calls.jsonl")
    commands = {
        "validate_bad": [*m, "validate", str(d / "bad.json")],
        "check_calls": [
            *m,
            "check",
            "--rules",
            rules,
            "--mode",
            "rules",
            "--calls",
            calls,
            "--alias",
            "shell=bash",
        ],
    }
    procs = {
        name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, cmd in commands.items()
    }
    runner = CliRunner()
    out: dict[str, Result] = {}
    in_process = {
        "validate_ok": ["validate", rules],
        "check_table": [
            "check",
            "--rules",
            rules,
            "--mode",
            "ask",
            "--calls",
            calls,
            "--format",
            "table",
        ],
        "validate_broken": ["validate", str(d / "broken.json")],
        "check_one": [
            "check",
            "--rules",
            rules,
            "--mode",
            "rules",
            "--tool",
            "shell__0123456789ab",
            "--input",
            '{"command": "git push --force"}',
            "--alias",
            "shell=bash",
        ],
        "check_member": [
            "check",
            "--rules",
            rules,
            "--mode",
            "ask",
            "--tool",
            "bash",
            "--origin",
            "author",
            "--member",
        ],
        "check_badcalls": [
            "check",
            "--rules",
            rules,
            "--mode",
            "ask",
            "--calls",
            str(d / "badcalls.jsonl"),
        ],
        "check_badrules": [
            "check",
            "--rules",
            str(d / "bad.json"),
            "--mode",
            "ask",
            "--tool",
            "bash",
        ],
        "check_neither": ["check", "--rules", rules, "--mode", "ask"],
        "check_both": [
            "check",
            "--rules",
            rules,
            "--mode",
            "ask",
            "--tool",
            "x",
            "--calls",
            calls,
        ],
        "check_badmode": ["check", "--rules", rules, "--mode", "strict", "--tool", "x"],
        "check_badalias": [
            "check",
            "--rules",
            rules,
            "--mode",
            "ask",
            "--tool",
            "x",
            "--alias",
            "nope",
        ],
        "check_badaliasmap": [
            "check",
            "--rules",
            rules,
            "--mode",
            "ask",
            "--tool",
            "x",
            "--alias",
            "a=b",
            "--alias",
            "=c",
        ],
        "check_badinput": [
            "check",
            "--rules",
            rules,
            "--mode",
            "ask",
            "--tool",
            "x",
            "--input",
            "{nope",
        ],
        "check_declared": [
            "check",
            "--rules",
            rules,
            "--mode",
            "bypass",
            "--tool",
            "write",
            "--tool-names",
            "bash,read",
        ],
    }
    for name, args in in_process.items():
        res = runner.invoke(main, ["rules", *args])
        out[name] = Result(res.exit_code, res.stdout, res.stderr)
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        out[name] = Result(proc.returncode, stdout, stderr)
    yield out


def test_validate_ok(results: dict[str, Result]) -> None:
    r = results["validate_ok"]
    assert (r.code, r.out, r.err) == (0, "ok: 5 rules\n", "")


def test_validate_reports_every_problem_one_per_line_on_stderr(results: dict[str, Result]) -> None:
    r = results["validate_bad"]
    assert r.code == 2
    assert r.out == ""
    assert r.err.splitlines() == [
        "approval_rules[0].mtach: unknown key",
        "approval_rules[1].tool: must not be empty",
        'approval_rules[1].verdict: must be allow, ask or deny, not "no"',
    ]


def test_validate_bad_json_is_a_clear_line(results: dict[str, Result]) -> None:
    r = results["validate_broken"]
    assert r.code == 2
    assert "broken.json: invalid JSON:" in r.err
    assert "line 2" in r.err
    assert "Traceback" not in r.err


def test_check_one_call(results: dict[str, Result]) -> None:
    r = results["check_one"]
    assert r.code == 0, r.err
    assert [json.loads(line) for line in r.out.splitlines()] == [
        {
            "tool": "bash",
            "outcome": "failed",
            "error": {
                "code": "approval_denied",
                "detail": "force push rewrites history others may hold; a person can run it",
            },
            "matched": [0],
        }
    ]
    assert list(json.loads(r.out)) == ["tool", "outcome", "error", "matched"]


def test_check_member_author_row(results: dict[str, Result]) -> None:
    r = results["check_member"]
    assert r.code == 0, r.err
    assert json.loads(r.out) == {
        "tool": "bash",
        "outcome": "granted",
        "error": None,
        "matched": [4],
    }


def test_check_calls_one_line_per_call_as_the_engine_decides(results: dict[str, Result]) -> None:
    r = results["check_calls"]
    assert r.code == 0, r.err
    got = [json.loads(line) for line in r.out.splitlines()]
    policy = compile_policy(RULES, {"shell": "bash"})
    expected = [
        policy.evaluate(
            tool_name=str(c.get("tool", c.get("tool_name"))),
            tool_input=c.get("input", c.get("tool_input", {})),
            origin=c.get("origin", "model"),
            member=bool(c.get("member", False)),
            mode="rules",
        ).to_json()
        for c in CALLS
    ]
    assert got == expected
    assert [g["outcome"] for g in got] == [
        "failed",
        "granted",
        "failed",
        "parked",
        "granted",
        "granted",
        "failed",
        "granted",
    ]
    assert got[6]["error"] == {"code": "approval_denied", "detail": "no approval rule allows bsah"}


def test_check_table_has_rows_and_summary(results: dict[str, Result]) -> None:
    r = results["check_table"]
    assert r.code == 0, r.err
    assert "Outcomes: 3 granted, 3 parked, 2 failed" in r.out
    assert "Rules that matched most" in r.out
    assert "│ shell " in r.out  # suffix stripped; no alias given here, so not bash
    assert "Rules that matched no call: 3" in r.out


def test_check_invalid_lines_are_named_by_number(results: dict[str, Result]) -> None:
    r = results["check_badcalls"]
    assert r.code == 2
    assert r.out == ""
    lines = r.err.splitlines()
    assert [line.split(": ", 1)[0].rsplit(":", 1)[1] for line in lines] == ["2", "3", "4", "5", "6"]
    assert lines[0].endswith("badcalls.jsonl:2: must be a JSON object")
    assert "invalid JSON" in lines[2]


def test_check_invalid_rules_exit_2(results: dict[str, Result]) -> None:
    r = results["check_badrules"]
    assert r.code == 2
    assert "approval_rules[0].mtach: unknown key" in r.err.splitlines()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("check_neither", "exactly one of --tool or --calls"),
        ("check_both", "exactly one of --tool or --calls"),
        ("check_badmode", "'strict' is not one of"),
        ("check_badalias", "'nope' is not FROM=TO"),
        ("check_badaliasmap", "'=c' is not FROM=TO"),
        ("check_badinput", "invalid JSON"),
    ],
)
def test_usage_errors_exit_2(results: dict[str, Result], name: str, message: str) -> None:
    r = results[name]
    assert r.code == 2
    assert message in r.err


def test_check_tool_names(results: dict[str, Result]) -> None:
    r = results["check_declared"]
    assert r.code == 0, r.err
    assert json.loads(r.out)["error"] == {
        "code": "tool_not_declared",
        "detail": "tool write is not declared for this run",
    }
