"""`approvalbot asks`: what rests on people, listed and decided from the terminal.

It talks HTTP to the running service with a member token, through the Python SDK. Each decision
gets a short id (six hex digits of a hash of run id and key), stable for as long as the decision
waits, so `approvalbot asks approve 3fa9c1` is easy to type; a unique prefix works too.

`approve --input JSON` approves the call as edited, `approve --allow run|profile` also learns a
rule ("Approve & allow like this"), which `asks proposal ID` shows first with the past calls it
would have allowed. `asks show ID` shows one decision in full: the call, why it waits, and a
shell line's commands one per line, the one that made it park marked (secrets masked).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from rich import box
from rich.console import Console
from rich.table import Table

from adapters.http import models as m
from adapters.http.client import UNEDITED, ApprovalbotError, Client, Decision, Scope
from adapters.http.policy_models import LearnedRuleOut
from bot.cli.common import fail
from bot.cli.login import DEFAULT_URL, SURFACE, pick_workspace, profile_path, resolve
from bot.masking import mask_text
from bot.rendering import command_lines, render_call, shows_commands

T = TypeVar("T")


def short_id(run_id: str, key: str) -> str:
    return hashlib.sha256(f"{run_id}/{key}".encode()).hexdigest()[:6]


def _until(deadline: datetime | None) -> str:
    """How long is left, short enough for its column (`--json` has the deadline itself)."""
    if deadline is None:
        return ""
    left = int((deadline - datetime.now(UTC)).total_seconds())
    if left <= 0:
        return "now"
    hours, minutes = divmod(left // 60, 60)
    return f"in {hours}h{minutes:02d}m" if hours else f"in {max(minutes, 1)}m"


# Keys of a tool input that say in a word what a call does, in the order they are looked for.
_TELLING = ("command", "file_path", "path", "notebook_path", "url", "pattern", "query", "service")


def one_line(text: str, width: int) -> str:
    """Whitespace (newlines too) collapsed, cut with an ellipsis at `width` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def summary(ask: m.AskOut, width: int = 72) -> str:
    """One line a person reads: the question's prompt, or the tool and what it acts on (its
    command or path, else the caller's own summary, else its first fields), never raw JSON."""
    if ask.kind == "ask":
        return one_line(ask.prompt or "", width)
    given = ask.tool_input if isinstance(ask.tool_input, dict) else {}
    telling = next((str(given[k]) for k in _TELLING if isinstance(given.get(k), str)), None)
    said = ask.effect_profile.get("summary")
    said = said if isinstance(said, str) and not ask.effect_profile.get("derived") else ""
    if telling is not None and said:
        telling += f" · {said}"  # the caller's own words, after what the call acts on
    if telling is None and said:
        telling = said
    if telling is None and given:
        telling = " ".join(
            f"{k}={v}" for k, v in list(given.items())[:3] if not isinstance(v, dict | list)
        )
    if telling is None and not isinstance(ask.tool_input, dict | list | None):
        telling = str(ask.tool_input)
    return one_line(f"{ask.tool} {telling or ''}".strip(), width)


def _kind(ask: m.AskOut) -> str:
    """The kind column; a call under a quorum says how many approvals it has (`1/2`)."""
    if ask.kind == "ask":
        return "question"
    if ask.approvals:
        return f"approval {len(ask.approvals.get('given') or [])}/{ask.approvals.get('required')}"
    return "approval"


def _extra(ask: m.AskOut) -> str:
    if ask.kind == "ask":
        return ", ".join(ask.options or []) + (" (several)" if ask.multi else "")
    profile = ask.effect_profile
    extra = ", ".join(profile.get("effects") or [])
    if profile.get("risk"):
        extra += f" risk={profile['risk']}"
    return extra.strip()


# Columns with the width each gets; "what" takes the rest. Below 100 columns the two least
# needed go (`--json` has everything).
_FIXED = {"id": 6, "kind": 8, "options / effects": 14, "why": 20, "run": 18, "due": 9}
_DROPPED_WHEN_NARROW = ("options / effects", "why")


def _table(asks: list[m.AskOut], width: int) -> Table:
    """One line per decision, each cell cut to its column with an ellipsis, so nothing wraps
    and no id is ever broken across lines, at any terminal width."""
    columns = dict(_FIXED)
    if any(ask.approvals for ask in asks):
        columns["kind"] = 12  # room for "approval 1/2"
    if width < 100:
        for name in _DROPPED_WHEN_NARROW:
            del columns[name]
    # the box puts one space between columns; no padding, no edges; one column spare
    what = max(16, width - sum(columns.values()) - len(columns) - 1)
    if what > 80:  # a wide terminal: the rest goes to the other text columns
        spare, what = what - 80, 80
        growing = [n for n in ("options / effects", "why", "run") if n in columns]
        for name in growing:
            columns[name] += spare // len(growing)
    table = Table(
        title=f"{len(asks)} decision(s) waiting",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=0,
        pad_edge=False,
        show_edge=False,
    )
    names = ["id", "kind", "what", *[n for n in columns if n not in ("id", "kind")]]
    widths = columns | {"what": what}
    for name in names:
        table.add_column(name, no_wrap=True, width=widths[name], overflow="ellipsis")
    for ask in asks:
        cells = {
            "id": short_id(ask.run_id, ask.key),
            "kind": _kind(ask),
            "what": summary(ask, what),
            "options / effects": _extra(ask),
            "why": ask.why,
            "run": ask.run_title or ask.run_id,
            "due": _until(ask.deadline),
        }
        # What an agent wrote is masked as on every surface (a secret in a command or a run's
        # title never reaches the terminal); ids and times are the service's own.
        table.add_row(*(one_line(mask_text(cells[n]), widths[n]) for n in names))
    return table


def detail_lines(ask: m.AskOut) -> list[str]:
    """One decision in full, for `asks show`: what it is, why it waits, the call (or the
    question), its effects, and a compound shell line's commands one per line with the one
    that made it park marked "▶ … ← parks". Everything from the call is masked."""
    sid = short_id(ask.run_id, ask.key)
    head = f"{sid}  {_kind(ask)}" + ("" if ask.kind == "ask" else f"  {mask_text(ask.tool)}")
    lines = [head, f"run: {mask_text(ask.run_title or ask.run_id)}"]
    lines.append(f"why: {mask_text(ask.why) or 'no rule decides it'}")
    if ask.deadline is not None:
        lines.append(f"due: {_until(ask.deadline)}")
    if ask.kind == "ask":
        lines.append(f"question: {mask_text(ask.prompt or '')}")
        if ask.options:
            several = " (one or more)" if ask.multi else ""
            lines.append(f"options{several}: " + ", ".join(mask_text(o) for o in ask.options))
        return lines
    code, extra = render_call(ask.tool_input)
    if code is not None:
        lines.append("call:")
        lines.extend(f"  {line}" for line in code.text.splitlines())
    lines.extend(f"{f.label.lower()}: {one_line(f.value, 200)}" for f in extra)
    effects = _extra(ask)
    if effects:
        lines.append(f"effects: {mask_text(effects)}")
    if shows_commands(ask.effect_profile):
        lines.append("commands:")
        lines.extend(f"  {line}" for line in command_lines(ask.effect_profile, limit=200))
    return lines


class Connection:
    """The service, the token and the workspace of one command: each from its flag, its
    environment variable or the CLI profile (`approvalbot login`, or the first start's)."""

    def __init__(self, url: str | None, token: str | None, workspace: str | None) -> None:
        target = resolve(url, token, workspace)
        if not target.token:
            fail(
                "a member token is needed: --token, APPROVALBOT_TOKEN, or `approvalbot login` "
                f"(the first `approvalbot serve` saves the admin's in {profile_path()})"
            )
        self.url, self.token, self.workspace = target.url, target.token, target.workspace or ""

    def run(self, action: Callable[[Client], Awaitable[T]]) -> T:
        async def go() -> T:
            async with Client(self.url, self.token, surface=SURFACE) as client:
                self.workspace = await pick_workspace(client, self.workspace or None)
                return await action(client)

        try:
            return asyncio.run(go())
        except ApprovalbotError as error:
            fail(f"{error.code}: {error.detail}", 1)
        except LookupError as error:
            fail(str(error), 1)
        except OSError as error:  # connection refused, DNS, …
            fail(f"cannot reach {self.url}: {error}", 1)
        except ValueError:  # aiohttp's InvalidUrlClientError: no scheme, no host
            fail(f"{self.url} is not a service URL: give it as http://host:port", 1)

    def find(self, client: Client, wanted: str) -> Awaitable[Decision]:
        async def go() -> Decision:
            decisions = await client.workspace(self.workspace).decisions.list()
            matches = [
                d for d in decisions
                if short_id(d.task.run_id, d.task.key).startswith(wanted.lower())
                or f"{d.task.run_id}/{d.task.key}" == wanted
            ]  # fmt: skip
            if not matches or len(wanted) < 3:
                raise LookupError(f"no waiting decision with id {wanted!r} (decided already?)")
            if len(matches) > 1:
                ids = ", ".join(short_id(d.task.run_id, d.task.key) for d in matches)
                raise LookupError(f"{wanted!r} is ambiguous: {ids}")
            return matches[0]

        return go()


connection_options = [
    click.option("--url", envvar="APPROVALBOT_URL", default=None,
                 help="The service (env APPROVALBOT_URL; default: the CLI profile's, or "
                      f"{DEFAULT_URL})."),
    click.option("--token", envvar="APPROVALBOT_TOKEN", default=None,
                 help="A member token (env APPROVALBOT_TOKEN; default: the CLI profile's)."),
    click.option("--workspace", envvar="APPROVALBOT_WORKSPACE", default=None,
                 help="The workspace (env APPROVALBOT_WORKSPACE; default: the profile's, or the "
                      "token's only one)."),
]  # fmt: skip
CONNECTION = ("url", "token", "workspace")


def with_connection(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(connection_options):
        func = option(func)
    return func


@click.group(invoke_without_command=True)
@with_connection
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON (every page).")
@click.pass_context
def asks(ctx: click.Context, url: str | None, token: str | None, workspace: str | None,
         as_json: bool) -> None:  # fmt: skip
    """List what rests on people; decide with `approve`, `deny` or `answer` (`show` shows one
    in full, `proposal` the rule `approve --allow` would learn)."""
    if ctx.invoked_subcommand is not None:
        return
    conn = Connection(url, token, workspace)
    found = conn.run(lambda client: client.workspace(conn.workspace).asks())
    if as_json:
        items = [a.model_dump(mode="json") | {"id": short_id(a.run_id, a.key)} for a in found]
        click.echo(json.dumps(items, ensure_ascii=False))
    elif not found:
        click.echo("nothing waits on people")
    else:
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console = Console(width=160)  # piped: do not squeeze the table into 80 columns
        console.print(_table(found, console.width))


_RANK = {ParameterSource.COMMANDLINE: 2, ParameterSource.ENVIRONMENT: 1}


def _connection(ctx: click.Context) -> Connection:
    """Each value from the verb's options or the group's (`asks --url … approve`): a flag beats
    an environment variable wherever it is given; the verb's wins a tie."""
    chosen: dict[str, str | None] = {}
    for name in CONNECTION:
        best, rank = None, 0
        for level in (ctx.parent, ctx):
            if level is None or level.params.get(name) is None:
                continue
            source = level.get_parameter_source(name)
            here = _RANK.get(source, 0) if source is not None else 0
            if here >= rank:
                best, rank = level.params[name], here
        chosen[name] = best
    return Connection(chosen["url"], chosen["token"], chosen["workspace"])


def _answer_form(decision: Decision, sid: str) -> str:
    task = decision.task
    if task.options and task.multi:
        return f"approvalbot asks answer {sid} OPTION…  (one or more of: {', '.join(task.options)})"
    if task.options:
        return f"approvalbot asks answer {sid} OPTION  (one of: {', '.join(task.options)})"
    return f'approvalbot asks answer {sid} "TEXT"'


def _wrong_verb(decision: Decision, verb: str) -> str | None:
    """Approve/deny on a question, or answer on a call: the command that fits, or None."""
    sid = short_id(decision.task.run_id, decision.task.key)
    if decision.is_question and verb == "approve":
        return f"{sid} is a question, not a call\nuse: {_answer_form(decision, sid)}"
    if decision.is_question and verb == "deny":
        return (
            f"{sid} is a question, not a call\nuse: {_answer_form(decision, sid)}"
            f"\n  or: approvalbot asks answer {sid} --decline"
        )
    if decision.is_question and verb == "proposal":
        return (
            f"{sid} is a question: there is no rule to learn from it\n"
            f"use: {_answer_form(decision, sid)}"
        )
    if not decision.is_question and verb == "answer":
        return (
            f"{sid} is a call to approve or deny, not a question\n"
            f'use: approvalbot asks approve {sid}\n  or: approvalbot asks deny {sid} --reason "…"'
        )
    return None


class WrongVerb(Exception):
    pass


def _found(ctx: click.Context, wanted: str, name: str,
           verb: Callable[[Decision], Awaitable[T]]) -> tuple[Decision, T]:  # fmt: skip
    """Find the decision `wanted` and act on it with `verb`: a refusal is its stable code and
    detail (exit 1), the wrong verb for its kind says the command that fits (exit 2)."""
    conn = _connection(ctx)

    async def act(client: Client) -> tuple[Decision, T]:
        decision = await conn.find(client, wanted)
        hint = _wrong_verb(decision, name)
        if hint is not None:
            raise WrongVerb(hint)
        return decision, await verb(decision)

    try:
        return conn.run(act)
    except WrongVerb as hint:
        fail(str(hint))


def _decide(ctx: click.Context, wanted: str, name: str,
            verb: Callable[[Decision], Awaitable[m.TaskOut]]) -> None:  # fmt: skip
    decision, task = _found(ctx, wanted, name, verb)
    ending = {"granted": "approved", "resolved": "answered", "failed": "refused"}.get(
        task.state, task.state
    )
    if task.error and task.error.get("code") == "declined":
        ending = "declined"
    elif task.state == "failed":
        ending = "denied"
    click.echo(f"{ending} {short_id(task.run_id, task.key)} ({summary(decision.task)})")


def _json_option(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A JSON flag parsed before anything is sent: text that does not parse is a usage error."""
    if value is None:  # not given: `--input` approves as proposed, `--rule` is the proposal's
        return UNEDITED if param.name == "edited" else None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError) as error:
        where = f" (column {error.colno})" if isinstance(error, json.JSONDecodeError) else ""
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deeply"
        raise click.BadParameter(
            f"not JSON: {reason}{where}; quote it for the shell, e.g. "
            '\'{"command": "git push origin feature"}\''
        ) from None
    if param.name == "rule" and not isinstance(parsed, dict):
        raise click.BadParameter('a rule is a JSON object, e.g. \'{"tool": "bash"}\'')
    return parsed


def _approvals_left(task: m.TaskOut) -> str:
    """`1 of 2 approvals: waiting for one more` — a counted approval that does not end it."""
    approvals = task.approvals or {}
    given, required = len(approvals.get("given") or []), int(approvals.get("required") or 0)
    left = max(required - given, 1)
    more = "one more" if left == 1 else f"{left} more"
    return f"{given} of {required} approvals: waiting for {more}"


def _learned_line(rule: LearnedRuleOut) -> str:
    scope = f"the profile {rule.profile}" if rule.scope == "profile" else "this run"
    return f"learned {rule.id} for {scope}: {json.dumps(rule.rule, ensure_ascii=False)}"


@asks.command()
@click.argument("decision_id")
@click.option(
    "--input",
    "edited",
    metavar="JSON",
    callback=_json_option,
    help="Approve this input instead of the proposed one (JSON, e.g. "
    '\'{"command": "git push origin feature"}\'); the run\'s rules evaluate it again, and a '
    "deny still binds.",
)
@click.option(
    "--allow",
    type=click.Choice(["run", "profile"]),
    default=None,
    help="Approve & allow like this: also learn an allow rule for this run, or for "
    "the profile the run came from (see it first: `approvalbot asks proposal ID`).",
)
@click.option(
    "--rule",
    metavar="JSON",
    callback=_json_option,
    help="With --allow: the rule to learn instead of the proposal (a JSON object).",
)
@with_connection
@click.pass_context
def approve(ctx: click.Context, /, decision_id: str, edited: Any, allow: Scope | None,
            rule: dict[str, Any] | None, **_connection_options: str | None) -> None:  # fmt: skip
    """Approve a waiting call: as proposed, or as edited (--input), learning a rule (--allow)."""
    if rule is not None and allow is None:
        raise click.UsageError("--rule needs --allow run or --allow profile")

    async def verb(decision: Decision) -> tuple[m.TaskOut, list[LearnedRuleOut]]:
        task = await decision.approve(tool_input=edited, allow=allow, rule=rule)
        learned: list[LearnedRuleOut] = []
        if allow is not None and not task.parked:  # the rules it learned, to say so
            rules = await decision.run.workspace.learned_rules()
            learned = [r for r in rules if (r.from_.run_id, r.from_.key) == (task.run_id, task.key)]
        return task, learned

    decision, (task, learned) = _found(ctx, decision_id, "approve", verb)
    sid = short_id(task.run_id, task.key)
    if task.state == "needs_approval":  # counted toward a quorum that wants more
        if edited is UNEDITED:
            click.echo(f"{_approvals_left(task)} ({sid}: {summary(decision.task)})")
        else:  # the count restarted on the edit, this approval first
            as_edited = decision.task.model_copy(update={"tool_input": edited})
            click.echo(f"{_approvals_left(task)} ({sid} as edited: {summary(as_edited)})")
        return
    if task.state != "granted":  # ended otherwise meanwhile
        click.echo(f"{task.state} {sid} ({summary(decision.task)})")
        return
    if task.approved_input is not None:
        as_edited = decision.task.model_copy(update={"tool_input": task.approved_input})
        click.echo(f"approved {sid} as edited ({summary(as_edited)})")
        click.echo(f"  proposed: {summary(decision.task)}")  # what the person changed
    else:
        click.echo(f"approved {sid} ({summary(decision.task)})")
    for each in learned:  # a compound shell line learns one rule per command
        click.echo(_learned_line(each))


@asks.command()
@click.argument("decision_id")
@click.option("--json", "as_json", is_flag=True, help="Print the proposal as JSON.")
@with_connection
@click.pass_context
def proposal(ctx: click.Context, /, decision_id: str, as_json: bool,
             **_connection_options: str | None) -> None:  # fmt: skip
    """The rule `approve --allow` would learn from a waiting call, and the past calls (last 30
    days) it would have allowed."""
    decision, found = _found(ctx, decision_id, "proposal", lambda d: d.proposal())
    if as_json:
        click.echo(json.dumps(found.model_dump(mode="json"), ensure_ascii=False))
        return
    sid = short_id(decision.task.run_id, decision.task.key)
    for each in found.rules or [found.rule]:  # one per command of a compound shell line
        click.echo(f"rule: {json.dumps(each, ensure_ascii=False)}")
    if not found.would_allow:
        click.echo("it would have allowed none of the past calls (last 30 days)")
    else:
        click.echo(f"it would have allowed {len(found.would_allow)} past call(s) (last 30 days):")
        for past in found.would_allow:
            at = past.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
            click.echo(f"  {at}  {past.state:<14} {one_line(past.summary, 60)}  "
                       f"{past.run_id}/{past.key}")  # fmt: skip
    click.echo(f"learn it: approvalbot asks approve {sid} --allow run  (or --allow profile; "
               "--rule JSON to change it)")  # fmt: skip


@asks.command()
@click.argument("decision_id")
@with_connection
@click.pass_context
def show(ctx: click.Context, /, decision_id: str, **_connection_options: str | None) -> None:
    """One waiting decision in full: the call, why it waits, a shell line's commands."""

    async def look(decision: Decision) -> None:
        return None

    decision, _ = _found(ctx, decision_id, "show", look)
    for line in detail_lines(decision.task):
        click.echo(line)


@asks.command()
@click.argument("decision_id")
@click.option("--reason", default="", help="Why (the agent reads it).")
@with_connection
@click.pass_context
def deny(ctx: click.Context, /, decision_id: str, reason: str,
         **_connection_options: str | None) -> None:  # fmt: skip
    """Deny a waiting call."""
    _decide(ctx, decision_id, "deny", lambda d: d.deny(reason))


@asks.command()
@click.argument("decision_id")
@click.argument("text", nargs=-1)
@click.option("--decline", is_flag=True, help="Decline to answer.")
@with_connection
@click.pass_context
def answer(ctx: click.Context, /, decision_id: str, text: tuple[str, ...], decline: bool,
           **_connection_options: str | None) -> None:  # fmt: skip
    """Answer a question: free text, an option, or (several allowed) one argument per option."""
    if decline == bool(text):
        fail("give an answer or --decline (not both)")

    async def verb(decision: Decision) -> m.TaskOut:
        if decline:
            return await decision.decline()
        content: Any = list(text) if decision.task.multi else " ".join(text)
        return await decision.answer(content)

    _decide(ctx, decision_id, "answer", verb)
