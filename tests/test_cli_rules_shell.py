"""`approvalbot rules check --shell TOOL:PATH` and `rules validate` with `shell_commands`
(issue 20), through click's runner on the real `main` group. The lines are data, never run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from bot.cli import main

RULES = [
    {"tool": "bash", "path": "command", "match": "git push *", "verdict": "allow"},
    {"tool": "bash", "path": "command", "match": "rm *", "verdict": "deny", "reason": "no rm"},
    {"tool": "bash", "path": "command", "match": "ls*", "verdict": "allow"},
]
LINE = "git push origin main && rm -rf ~"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["rules", *args])
    return result.exit_code, result.stdout, result.stderr


def write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


def test_check_judges_each_command_with_shell(tmp_path: Path) -> None:
    rules = write(tmp_path / "rules.json", RULES)
    call = json.dumps({"command": LINE})
    code, out, _ = run(
        "check", "--rules", rules, "--mode", "ask", "--tool", "bash", "--input", call
    )
    assert code == 0 and json.loads(out)["outcome"] == "granted"  # the seed's contract
    code, out, _ = run(
        "check", "--rules", rules, "--mode", "ask", "--tool", "bash", "--input", call,
        "--shell", "bash:command",
    )  # fmt: skip
    verdict = json.loads(out)
    assert code == 0 and verdict["outcome"] == "failed"
    assert verdict["error"] == {"code": "approval_denied", "detail": "no rm"}
    assert verdict["matched"] == [0, 1]
    assert [(c["text"], c.get("marked", False)) for c in verdict["commands"]] == [
        ("git push origin main", False),
        ("rm -rf ~", True),
    ]


def test_a_file_declares_its_shell_commands_and_replay_uses_them(tmp_path: Path) -> None:
    declared = {"approval_rules": RULES, "shell_commands": [{"tool": "bash", "path": "command"}]}
    rules = write(tmp_path / "run.json", declared)
    calls = tmp_path / "calls.jsonl"
    lines = [LINE, "ls -la | ls", "ls > out.txt", "git push x; make"]
    calls.write_text("".join(json.dumps({"tool": "bash", "input": {"command": c}}) + "\n"
                             for c in lines))  # fmt: skip
    code, out, _ = run("check", "--rules", rules, "--mode", "rules", "--calls", str(calls))
    outcomes = [json.loads(line)["outcome"] for line in out.splitlines()]
    assert code == 0 and outcomes == ["failed", "granted", "parked", "failed"]
    refused = json.loads(out.splitlines()[3])
    assert refused["error"]["detail"] == "no approval rule allows make"
    assert json.loads(out.splitlines()[2])["unseen"] == ["writes to out.txt"]
    code, out, _ = run(
        "check", "--rules", rules, "--mode", "ask", "--calls", str(calls), "--format", "table"
    )
    summary = [line for line in out.splitlines() if line.startswith("Outcomes:")]
    assert code == 0 and summary == ["Outcomes: 1 granted, 2 parked, 1 failed"]


def test_validate_knows_shell_commands(tmp_path: Path) -> None:
    good = write(tmp_path / "good.json", {"approval_rules": RULES, "shell_commands": []})
    assert run("validate", good) == (0, "ok: 3 rules\n", "")
    assert run("validate", good, "--shell", "bash:command") == (
        0,
        "ok: 3 rules, 1 shell path\n",
        "",
    )
    bad = write(tmp_path / "bad.json", {"approval_rules": RULES, "shell_commands": [{"pth": 1}]})
    code, _, err = run("validate", bad)
    assert code == 2
    assert "shell_commands[0].pth: unknown key" in err
    assert "shell_commands[0].tool: required" in err
    other = write(tmp_path / "other.json", {"approval_rules": RULES, "rules": []})
    code, _, err = run("validate", other)
    assert code == 2 and "rules: unknown key" in err
    code, _, err = run("validate", good, "--shell", "bash")
    assert code == 2 and "is not TOOL:PATH" in err
