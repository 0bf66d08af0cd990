"""`approvalbot asks`: what rests on people, listed and decided from the terminal.

It talks HTTP to the running service with a member token, through the Python SDK. Each decision
gets a short id (six hex digits of a hash of run id and key), stable for as long as the decision
waits, so `approvalbot asks approve 3fa9c1` is easy to type; a unique prefix works too.
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
from rich.console import Console
from rich.table import Table

from adapters.http import models as m
from adapters.http.client import ApprovalbotError, Client, Decision
from bot.cli.common import fail

T = TypeVar("T")


def short_id(run_id: str, key: str) -> str:
    return hashlib.sha256(f"{run_id}/{key}".encode()).hexdigest()[:6]


def _until(deadline: datetime | None) -> str:
    if deadline is None:
        return ""
    left = int((deadline - datetime.now(UTC)).total_seconds())
    stamp = deadline.strftime("%Y-%m-%d %H:%M UTC")
    if left <= 0:
        return f"{stamp} (due)"
    hours, minutes = divmod(left // 60, 60)
    return f"{stamp} (in {hours}h{minutes:02d}m)" if hours else f"{stamp} (in {minutes}m)"


def _what(ask: m.AskOut) -> str:
    if ask.kind == "ask":
        return ask.prompt or ""
    summary = ask.effect_profile.get("summary")
    shown = json.dumps(ask.tool_input, ensure_ascii=False)
    if len(shown) > 120:
        shown = shown[:117] + "…"
    return f"{ask.tool} {shown}" + (f"\n{summary}" if summary else "")


def _table(asks: list[m.AskOut]) -> Table:
    table = Table(title=f"{len(asks)} decision(s) waiting", show_lines=True)
    for column in ("id", "kind", "what", "options / effects", "why", "run", "deadline"):
        table.add_column(column, overflow="fold")
    for ask in asks:
        if ask.kind == "ask":
            extra = ", ".join(ask.options or []) + (" (several)" if ask.multi else "")
        else:
            profile = ask.effect_profile
            extra = ", ".join(profile.get("effects") or [])
            if profile.get("risk"):
                extra += f" risk={profile['risk']}"
        table.add_row(
            short_id(ask.run_id, ask.key),
            "question" if ask.kind == "ask" else "approval",
            _what(ask),
            extra,
            ask.why,
            f"{ask.run_title} {ask.run_id}".strip() + f"\nkey {ask.key}",
            _until(ask.deadline),
        )
    return table


class Connection:
    def __init__(self, url: str, token: str | None, workspace: str | None) -> None:
        if not token:
            fail("a member token is needed: --token or APPROVALBOT_TOKEN")
        if not workspace:
            fail("a workspace is needed: --workspace or APPROVALBOT_WORKSPACE")
        self.url, self.token, self.workspace = url, token, workspace

    def run(self, action: Callable[[Client], Awaitable[T]]) -> T:
        async def go() -> T:
            async with Client(self.url, self.token) as client:
                return await action(client)

        try:
            return asyncio.run(go())
        except ApprovalbotError as error:
            fail(f"{error.code}: {error.detail}", 1)
        except LookupError as error:
            fail(str(error), 1)
        except OSError as error:  # connection refused, DNS, …
            fail(f"cannot reach {self.url}: {error}", 1)

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
    click.option("--url", envvar="APPROVALBOT_URL", default="http://127.0.0.1:8787",
                 show_default=True, help="The service (env APPROVALBOT_URL)."),
    click.option("--token", envvar="APPROVALBOT_TOKEN", default=None,
                 help="A member token (env APPROVALBOT_TOKEN)."),
    click.option("--workspace", envvar="APPROVALBOT_WORKSPACE", default=None,
                 help="The workspace (env APPROVALBOT_WORKSPACE)."),
]  # fmt: skip


def with_connection(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(connection_options):
        func = option(func)
    return func


@click.group(invoke_without_command=True)
@with_connection
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
def asks(ctx: click.Context, url: str, token: str | None, workspace: str | None,
         as_json: bool) -> None:  # fmt: skip
    """List what rests on people; decide with `approve`, `deny` or `answer`."""
    ctx.obj = (url, token, workspace)
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
        console.print(_table(found))


def _connection(ctx: click.Context, url: str, token: str | None, ws: str | None) -> Connection:
    """Options given after the verb win over those given before it (`asks --url … approve`)."""
    group_url, group_token, group_ws = ctx.obj or (url, None, None)
    defaulted = ctx.get_parameter_source("url") == click.core.ParameterSource.DEFAULT
    return Connection(group_url if defaulted else url, token or group_token, ws or group_ws)


def _decide(ctx: click.Context, wanted: str, verb: Callable[[Decision], Awaitable[m.TaskOut]],
            url: str, token: str | None, workspace: str | None) -> None:  # fmt: skip
    conn = _connection(ctx, url, token, workspace)

    async def act(client: Client) -> tuple[Decision, m.TaskOut]:
        decision = await conn.find(client, wanted)
        return decision, await verb(decision)

    decision, task = conn.run(act)
    ending = {"granted": "approved", "resolved": "answered", "failed": "refused"}.get(
        task.state, task.state
    )
    if task.error and task.error.get("code") == "declined":
        ending = "declined"
    elif task.state == "failed":
        ending = "denied"
    what = decision.task.prompt if decision.is_question else decision.task.tool
    click.echo(f"{ending} {short_id(task.run_id, task.key)} ({what})")


@asks.command()
@click.argument("decision_id")
@with_connection
@click.pass_context
def approve(ctx: click.Context, decision_id: str, url: str, token: str | None,
            workspace: str | None) -> None:  # fmt: skip
    """Approve a waiting call."""
    _decide(ctx, decision_id, lambda d: d.approve(), url, token, workspace)


@asks.command()
@click.argument("decision_id")
@click.option("--reason", default="", help="Why (the agent reads it).")
@with_connection
@click.pass_context
def deny(ctx: click.Context, decision_id: str, reason: str, url: str, token: str | None,
         workspace: str | None) -> None:  # fmt: skip
    """Deny a waiting call."""
    _decide(ctx, decision_id, lambda d: d.deny(reason), url, token, workspace)


@asks.command()
@click.argument("decision_id")
@click.argument("text", nargs=-1)
@click.option("--decline", is_flag=True, help="Decline to answer.")
@with_connection
@click.pass_context
def answer(ctx: click.Context, decision_id: str, text: tuple[str, ...], decline: bool, url: str,
           token: str | None, workspace: str | None) -> None:  # fmt: skip
    """Answer a question: free text, an option, or (several allowed) one argument per option."""
    if decline == bool(text):
        fail("give an answer or --decline (not both)")

    async def verb(decision: Decision) -> m.TaskOut:
        if decline:
            return await decision.decline()
        content: Any = list(text) if decision.task.multi else " ".join(text)
        return await decision.answer(content)

    _decide(ctx, decision_id, verb, url, token, workspace)
