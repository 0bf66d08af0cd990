"""`approvalbot rules validate`, `approvalbot rules check` (SPEC 4a) and
`approvalbot rules learned [--remove ID]` (issue 15: the rules learned from decisions).

`check --calls` over a log of past calls is policy replay: try a new rule list on what agents
actually did before deploying it. `--format table` prints a readable table and a summary.

A rules file is a JSON array of rules, or an object `{"approval_rules": [...],
"shell_commands": [...]}`; `--shell bash:command` (repeatable) adds a shell path, where a line
is judged command by command as a run with `shell_commands` judges it (bot/rules/compound.py).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

import click

from bot.errors import ApprovalError
from bot.rules import MODES, ORIGINS, Policy, RulesInvalid, Verdict, compile_policy, compound


def _exit(lines: list[str], code: int = 2) -> NoReturn:
    for line in lines:
        click.echo(line, err=True)
    sys.exit(code)


def _read_text(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        _exit([f"{path}: cannot read: {error}"])


def _load_json(path: str) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        _exit([f"{path}: invalid JSON: {error.msg} (line {error.lineno}, column {error.colno})"])
    except RecursionError:
        _exit([f"{path}: invalid JSON: nested too deeply"])


def _compile(rules: Any, aliases: dict[str, str] | None = None) -> Policy:
    try:
        return compile_policy(rules, aliases)
    except RulesInvalid as error:
        _exit(error.problems)


@click.group(name="rules")
def rules() -> None:
    """Validate approval rule lists and try them on calls."""


def _shell_entries(values: tuple[str, ...]) -> list[dict[str, str]]:
    """`--shell bash:command` -> `{"tool": "bash", "path": "command"}`."""
    entries: list[dict[str, str]] = []
    for value in values:
        tool, sep, path = value.rpartition(":")
        if not sep or not tool or not path:
            raise click.BadParameter(f"{value!r} is not TOOL:PATH", param_hint="--shell")
        entries.append({"tool": tool, "path": path})
    return entries


def _declaration(file: str, shell: tuple[str, ...]) -> tuple[Any, list[dict[str, str]]]:
    """The rules of a file (an array, or an object with `approval_rules` and
    `shell_commands`) and its shell paths with `--shell`'s, checked (exit 2 naming problems)."""
    loaded = _load_json(file)
    entries: Any = []
    rules_value = loaded
    if isinstance(loaded, dict):
        unknown = sorted(set(loaded) - {"approval_rules", "shell_commands"})
        if unknown:
            _exit([f"{file}: {unknown[0]}: unknown key (approval_rules, shell_commands)"])
        rules_value = loaded.get("approval_rules", [])
        entries = loaded.get("shell_commands", [])
    try:
        checked = compound.check_shell_commands(entries)
        checked = compound.merged(checked, _shell_entries(shell))
    except ApprovalError as error:
        _exit(error.detail.split("; "))
    return rules_value, checked


_SHELL_HELP = "A shell path TOOL:PATH (e.g. bash:command): its lines are judged per command."


@rules.command("validate")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--shell", "shell", multiple=True, metavar="TOOL:PATH", help=_SHELL_HELP)
def validate_command(file: str, shell: tuple[str, ...]) -> None:
    """Check a rule list (a JSON array, or an object with `approval_rules` and
    `shell_commands`). Exit 0 and `ok: N rules`, or 2 with every problem."""
    rules_value, entries = _declaration(file, shell)
    policy = _compile(rules_value)
    paths = f", {len(entries)} shell path{'s' if len(entries) != 1 else ''}" if entries else ""
    click.echo(f"ok: {len(policy.rules_json)} rules{paths}")


def _parse_aliases(values: tuple[str, ...]) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for value in values:
        source, sep, target = value.partition("=")
        if not sep or not source or not target:
            raise click.BadParameter(f"{value!r} is not FROM=TO", param_hint="--alias")
        aliases[source] = target
    return aliases


def _call_from_json(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    """One JSONL record -> (call, problem). Accepts the API's `tool_name`/`tool_input` too."""
    if not isinstance(value, dict):
        return None, "must be a JSON object"
    tool = value.get("tool", value.get("tool_name"))
    if not isinstance(tool, str) or not tool:
        return None, '"tool" is required and must be a non-empty string'
    origin = value.get("origin", "model")
    if origin not in ORIGINS:
        return None, f'"origin" must be model, author or kernel, not {json.dumps(origin)}'
    member = value.get("member", False)
    if not isinstance(member, bool):
        return None, '"member" must be true or false'
    tool_input = value["input"] if "input" in value else value.get("tool_input", {})
    return {"tool": tool, "input": tool_input, "origin": origin, "member": member}, None


def _read_calls(path: str) -> list[dict[str, Any]]:
    name = "<stdin>" if path == "-" else path
    calls: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"{name}:{number}: invalid JSON: {error.msg} (column {error.colno})")
            continue
        except RecursionError:
            problems.append(f"{name}:{number}: invalid JSON: nested too deeply")
            continue
        call, problem = _call_from_json(value)
        if problem is not None:
            problems.append(f"{name}:{number}: {problem}")
        elif call is not None:
            call["line"] = number
            calls.append(call)
    if problems:
        _exit(problems)
    return calls


def _render_table(
    policy: Policy, calls: list[dict[str, Any]], verdicts: list[Verdict], mode: str
) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    styles = {"granted": "green", "parked": "yellow", "failed": "red"}
    table = Table(title=f"{len(calls)} call(s) in {mode} mode", title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("tool", no_wrap=True)
    table.add_column("input", overflow="fold", max_width=40)
    table.add_column("outcome")
    table.add_column("matched")
    table.add_column("why", overflow="fold")
    for call, verdict in zip(calls, verdicts, strict=True):
        shown = json.dumps(call["input"], ensure_ascii=False)
        if len(shown) > 120:
            shown = shown[:80] + " … " + shown[-30:]
        tool = verdict.tool if call["origin"] == "model" else f"{verdict.tool} ({call['origin']})"
        table.add_row(
            str(call.get("line", "")),
            Text(tool),
            Text(shown),
            Text(verdict.outcome, style=styles[verdict.outcome]),
            ",".join(map(str, verdict.matched)) or "-",
            Text(verdict.why),
        )
    console.print(table)

    outcomes = Counter(v.outcome for v in verdicts)
    summary = ", ".join(
        f"[{styles[o]}]{outcomes.get(o, 0)} {o}[/]" for o in ("granted", "parked", "failed")
    )
    console.print(f"Outcomes: {summary}")
    deciding = Counter(v.rule_index for v in verdicts if v.rule_index is not None)
    matching = Counter(i for v in verdicts for i in v.matched)
    if matching:
        top = Table(title="Rules that matched most", title_justify="left")
        top.add_column("rule", justify="right")
        top.add_column("verdict")
        top.add_column("tool")
        top.add_column("match")
        top.add_column("matched", justify="right")
        top.add_column("decided", justify="right")
        for index, count in matching.most_common(10):
            rule = policy.rules_json[index]
            top.add_row(
                str(index),
                str(rule["verdict"]),
                Text(str(rule["tool"])),
                Text(f"{rule.get('path', '')} {rule.get('match', '')}".strip() or "(whole tool)"),
                str(count),
                str(deciding.get(index, 0)),
            )
        console.print(top)
    unused = [i for i in range(len(policy.rules_json)) if i not in matching]
    if unused and calls:
        console.print(f"Rules that matched no call: {', '.join(map(str, unused))}")


@rules.command("check")
@click.option("--rules", "rules_file", required=True, type=click.Path(dir_okay=False))
@click.option("--mode", required=True, type=click.Choice(MODES), help="The run's approval mode.")
@click.option("--tool", help="One call: the tool name as the agent sent it.")
@click.option("--input", "input_json", help="One call: tool_input as JSON (default {}).")
@click.option("--origin", type=click.Choice(ORIGINS), default="model", show_default=True)
@click.option("--member", is_flag=True, help="One call: appended with a member credential.")
@click.option(
    "--calls",
    "calls_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help='JSON Lines, one call a line: {"tool", "input", "origin"?, "member"?}.',
)
@click.option("--alias", "alias_values", multiple=True, metavar="FROM=TO", help="Repeatable.")
@click.option("--shell", "shell", multiple=True, metavar="TOOL:PATH", help=_SHELL_HELP)
@click.option(
    "--tool-names",
    help="Comma-separated declared tools; calls outside them fail tool_not_declared.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["json", "table"]),
    default="json",
    show_default=True,
)
def check_command(
    rules_file: str,
    mode: str,
    tool: str | None,
    input_json: str | None,
    origin: str,
    member: bool,
    calls_file: str | None,
    alias_values: tuple[str, ...],
    shell: tuple[str, ...],
    tool_names: str | None,
    output_format: str,
) -> None:
    """Evaluate calls against a rule list: one JSON line per call. Exit 0 whatever the outcomes."""
    if (tool is None) == (calls_file is None):
        raise click.UsageError("give exactly one of --tool or --calls")
    if calls_file is not None and (input_json is not None or member or origin != "model"):
        raise click.UsageError("--input, --origin and --member go with --tool, not --calls")
    aliases = _parse_aliases(alias_values)
    rules_value, entries = _declaration(rules_file, shell)
    policy = _compile(rules_value, aliases)
    shell_paths = compound.compile_shell(entries)
    declared = None
    if tool_names is not None:
        declared = frozenset(n.strip() for n in tool_names.split(",") if n.strip())

    if tool is not None:
        try:
            tool_input = json.loads(input_json) if input_json is not None else {}
        except json.JSONDecodeError as error:
            raise click.BadParameter(f"invalid JSON: {error.msg}", param_hint="--input") from None
        calls: list[dict[str, Any]] = [
            {"tool": tool, "input": tool_input, "origin": origin, "member": member}
        ]
    else:
        assert calls_file is not None
        calls = _read_calls(calls_file)

    judged: list[compound.LineVerdict] = []
    for call in calls:

        def decide(call_input: Any, call: dict[str, Any] = call) -> Verdict:
            return policy.evaluate(
                tool_name=call["tool"],
                tool_input=call_input,
                origin=call["origin"],
                mode=mode,  # type: ignore[arg-type]
                member=call["member"],
                tool_names=declared,
            )

        try:
            line = compound.judge(
                decide, call["input"], shell_paths, mode=mode, origin=call["origin"]
            )
        except ApprovalError as error:  # pragma: no cover - inputs are checked above
            _exit([f"line {call.get('line', 1)}: {error.detail}"])
        judged.append(line)

    verdicts = [line.verdict for line in judged]
    if output_format == "table":
        _render_table(policy, calls, verdicts, mode)
        return
    out = sys.stdout
    for line in judged:
        body = line.verdict.to_json()
        if line.judged:  # a shell line: how each of its commands was judged
            body["commands"] = [c.to_json() for c in line.commands]
            if line.unseen:
                body["unseen"] = list(line.unseen)
        out.write(json.dumps(body, ensure_ascii=False) + "\n")
    out.flush()


@rules.command("learned")
@click.option("--remove", "remove_id", metavar="ID", help="Remove this learned rule.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.option(
    "--url",
    envvar="APPROVALBOT_URL",
    default=None,
    help="The service (env APPROVALBOT_URL; default: the CLI profile's).",
)
@click.option(
    "--token",
    envvar="APPROVALBOT_TOKEN",
    default=None,
    help="A member token (env APPROVALBOT_TOKEN; default: the CLI profile's).",
)
@click.option(
    "--workspace",
    envvar="APPROVALBOT_WORKSPACE",
    default=None,
    help="The workspace (env APPROVALBOT_WORKSPACE; default: the profile's).",
)
def learned_command(
    remove_id: str | None,
    as_json: bool,
    url: str | None,
    token: str | None,
    workspace: str | None,
) -> None:  # fmt: skip
    """The rules learned from decisions ("Approve & allow like this"), or remove one. Talks to
    the running service with a member token, like `approvalbot asks`."""
    from urllib.parse import quote

    from bot.cli.asks import Connection  # the HTTP client is imported only when used

    conn = Connection(url, token, workspace)

    async def act(client: Any) -> Any:
        base = f"/v1/workspaces/{conn.workspace}/rules/learned"
        if remove_id is not None:
            return await client.request("DELETE", f"{base}/{quote(remove_id, safe='')}")
        return (await client.request("GET", base))["rules"]

    found = conn.run(act)
    if remove_id is not None:
        click.echo(f"removed {remove_id}")
    elif as_json:
        click.echo(json.dumps(found, ensure_ascii=False))
    elif not found:
        click.echo("no learned rules")
    else:
        for rule in found:
            scope = (
                f"profile {rule['profile']}"
                if rule["scope"] == "profile"
                else (f"run {rule['run_id']}")
            )
            came = rule["from"]
            click.echo(
                f"{rule['id']}  {json.dumps(rule['rule'], ensure_ascii=False)}  {scope}  "
                f"by {rule['added_by']} from {came['run_id']}/{came['key']}"
            )
