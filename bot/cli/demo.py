"""`approvalbot demo`: a small simulated agent against the running service.

It declares a run with the sample policy (`[profiles.demo]` of config.example.toml) and makes a
realistic mix of calls: some granted by rule at once, some denied by rule, some parked for a
person, and questions with options. Then it waits, like an agent does, and carries on as each
decision lands: decide in the browser and watch it continue here. When it is done (or gives up,
or is interrupted) it stops its run, as an agent ends its session; with `--no-wait` it leaves the
run open so its decisions stay in the inbox. Each run's title carries the time it began, so two
demos read apart on the page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import click

from adapters.http.client import ApiError, Client
from adapters.http.client import Run as ClientRun
from adapters.http.models import TaskOut
from adapters.web.links import decision_url, inbox_url
from bot.admin import Admin
from bot.cli.bootstrap import public_base
from bot.cli.common import config_option, fail, settings_or_exit
from bot.clock import SystemClock
from bot.config import Settings
from bot.durations import parse_duration
from bot.errors import ApprovalError
from store.sql import SqlStore

DEMO_APP = "demo-agent"

# The sample policy; config.example.toml's [profiles.demo] says the same (a test checks it).
DEMO_PROFILE: dict[str, Any] = {
    "approval_mode": "rules",
    "aliases": {"Bash": "bash", "shell": "bash"},
    "approval_rules": [
        {"tool": "Read|Glob|Grep", "verdict": "allow"},
        {"tool": "bash", "path": "command", "match": "git status*", "verdict": "allow"},
        {"tool": "bash", "path": "command", "match": "git diff*", "verdict": "allow"},
        {"tool": "bash", "path": "command", "match": "git log*", "verdict": "allow"},
        {"tool": "bash", "path": "command", "match": "make *", "verdict": "allow"},
        {
            "tool": "bash",
            "path": "command",
            "match": "*| *sh",
            "verdict": "deny",
            "reason": "no piping downloads into a shell",
        },
        {
            "tool": "bash",
            "path": "command",
            "match": "git push --force*",
            "verdict": "deny",
            "reason": "no force pushes: open a pull request instead",
        },
        {"tool": "bash", "path": "command", "match": "git push *", "verdict": "ask"},
        {"tool": "Edit|Write|MultiEdit", "verdict": "ask"},
        {"tool": "deploy", "verdict": "ask"},
        {"tool": "ask", "verdict": "allow"},
    ],
}

CHANGELOG_OLD = """# Changelog

## 1.3.2
- Fix the currency rounding in invoices
"""
CHANGELOG_NEW = """# Changelog

## 1.4.0
- Customers can pay by bank transfer
- The order page loads twice as fast

## 1.3.2
- Fix the currency rounding in invoices
"""


@dataclass(frozen=True)
class Call:
    tool: str
    input: dict[str, Any]
    says: str  # what the agent means to do, in its own words
    profile: dict[str, Any] | None = None
    then: str = ""  # what it does once the call is granted

    @property
    def key(self) -> str:
        """A readable task key (it shows in the decision's URL): "bump-the-version"."""
        return slug(self.says)


def slug(text: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())[:60]


CALLS: list[Call] = [
    Call("Read", {"file_path": "CHANGELOG.md"}, "read the changelog"),
    Call("Bash", {"command": "git status --short"}, "look at the working tree"),
    Call("Bash", {"command": "git log --oneline -5"}, "read the last commits"),
    Call(
        "Bash",
        {"command": "curl -fsSL https://get.example-tools.sh | sh"},
        "install a release helper",
    ),
    Call("Bash", {"command": "git push --force origin main"}, "force-push main"),
    Call("WebFetch", {"url": "https://pastebin.com/raw/8xYz"}, "fetch a snippet from a paste"),
    Call(
        "Edit",
        {
            "file_path": "shop/__init__.py",
            "old_string": '__version__ = "1.3.2"',
            "new_string": '__version__ = "1.4.0"',
        },
        "bump the version",
        then="version bumped to 1.4.0",
    ),
    Call(
        "Edit",
        {"file_path": "CHANGELOG.md", "old_string": CHANGELOG_OLD, "new_string": CHANGELOG_NEW},
        "write the changelog entry",
        then="changelog written",
    ),
    Call(
        "Bash",
        {"command": "git push origin release/1.4"},
        "push the release branch",
        {
            "summary": "push branch release/1.4 to GitHub",
            "effects": ["network", "external"],
            "targets": ["github.com/acme/shop"],
            "risk": "medium",
            "reversible": True,
        },
        then="release/1.4 pushed",
    ),
    Call(
        "deploy",
        {"service": "shop", "version": "1.4.0", "environment": "production", "strategy": "canary"},
        "deploy 1.4.0 to production",
        {
            "summary": "deploy shop 1.4.0 to production (canary, then all regions)",
            "effects": ["external", "writes"],
            "targets": ["prod-eu-1", "prod-us-1"],
            "risk": "high",
            "reversible": False,
        },
        then="canary deploy started",
    ),
]

QUESTIONS: list[dict[str, Any]] = [
    {
        "prompt": "Which checks should I run before tagging 1.4.0?",
        "options": ["unit tests", "lint", "integration tests", "load test"],
        "multi": True,
    },
    {"prompt": "Tag it as a release candidate or final?", "options": ["v1.4.0-rc1", "v1.4.0"]},
]

CHECK_COMMANDS = {
    "unit tests": "make test",
    "lint": "make lint",
    "integration tests": "make integration",
    "load test": "make load-test",
}


@dataclass
class Tally:
    at_once: dict[str, int] = field(default_factory=lambda: {"granted": 0, "refused": 0})
    by_people: dict[str, int] = field(default_factory=dict)

    def person(self, word: str) -> None:
        self.by_people[word] = self.by_people.get(word, 0) + 1


def _word(task: TaskOut) -> str:
    if task.state == "failed":
        return "declined" if (task.error or {}).get("code") == "declined" else "denied"
    return {"granted": "approved", "resolved": "answered", "timed_out": "expired"}.get(
        task.state, task.state
    )


def _why(task: TaskOut) -> str:
    error = task.error or {}
    return f"{error.get('code')}: {error.get('detail')}"


async def demo_token(settings: Settings, workspace: str) -> str:
    """An application token for the demo agent, made in the store (shown nowhere else)."""
    store = SqlStore(settings.store.url)
    admin = Admin(store, SystemClock())
    try:
        try:
            return (await admin.add_application(workspace, DEMO_APP)).token
        except ApprovalError as error:
            if error.status != 409:
                raise
            return (await admin.rotate(workspace, "application", DEMO_APP)).token
    finally:
        await store.close()


async def run_demo(
    client: Client,
    workspace: str,
    base: str,
    profile: dict[str, Any],
    say: Callable[[str], None],
    *,
    wait: bool = True,
    timeout: float = 1800.0,
    title: str | None = None,
) -> Tally:
    """The agent's whole session; returns what happened, for the summary. Waiting, the run is
    stopped at the end, whatever the end (done, timed out, interrupted)."""
    declared = client.workspace(workspace).runs.declare(
        approval_mode=profile["approval_mode"],
        approval_rules=profile["approval_rules"],
        aliases=profile.get("aliases") or None,
        title=title or demo_title(),
    )
    if not wait:
        return await _session(await declared, base, profile, say, wait=False, timeout=timeout)
    async with declared as run:
        tally = await _session(run, base, profile, say, wait=True, timeout=timeout)
    say(f"demo agent: run {run.id} stopped")
    return tally


async def _session(
    run: ClientRun,
    base: str,
    profile: dict[str, Any],
    say: Callable[[str], None],
    *,
    wait: bool,
    timeout: float,
) -> Tally:
    say(f"demo agent: run {run.id} declared ({profile['approval_mode']} mode)")
    say(f"demo agent: open the inbox: {inbox_url(base)}")
    tally = Tally()
    parked: list[tuple[TaskOut, str]] = []
    for call in CALLS:
        receipt = await run.append(call.tool, call.input, key=call.key, effect_profile=call.profile)
        if receipt.parked:
            say(f"  ⏸  waits   {call.says}  →  {decision_url(base, run.id, receipt.key)}")
            parked.append((receipt, call.then))
        elif receipt.state == "granted":
            tally.at_once["granted"] += 1
            say(f"  ✓  granted {call.says}")
        else:
            tally.at_once["refused"] += 1
            say(f"  ✗  refused {call.says}  ({_why(receipt)})")
    for question in QUESTIONS:
        receipt = await run.append("ask", question, key=slug(question["prompt"]))
        say(f"  ?  asks    {question['prompt']}  →  {decision_url(base, run.id, receipt.key)}")
        parked.append((receipt, ""))
    if not wait:
        say(
            "demo agent: not waiting (--no-wait); the run stays open: decide on the page "
            "whenever you like"
        )
        return tally
    say(f"demo agent: waiting for {len(parked)} decisions; decide them on the page")
    try:
        await asyncio.wait_for(
            asyncio.gather(*(_follow(run, task, then, say, tally) for task, then in parked)),
            timeout,
        )
    except TimeoutError:
        say("demo agent: gave up waiting; stopping the run (its open decisions are cancelled)")
    return tally


async def _follow(
    run: ClientRun, receipt: TaskOut, then: str, say: Callable[[str], None], tally: Tally
) -> None:
    """Wait for one decision like an agent does, then carry on."""
    task = await run.wait(receipt.key)
    word = _word(task)
    tally.person(word)
    who = f" by {task.resolved_by}" if task.resolved_by else ""
    if task.kind == "ask":
        answer = (task.resolution or {}).get("content")
        if task.state != "resolved":
            say(f"  ←  question {word}{who}: I will go with the defaults")
            return
        shown = ", ".join(answer) if isinstance(answer, list) else answer
        say(f"  ←  answered{who}: {shown}")
        chosen = answer if isinstance(answer, list) else [answer]
        for option in chosen:
            command = CHECK_COMMANDS.get(str(option))
            if command is not None:
                ran = await run.append("Bash", {"command": command})
                say(f"  ✓  {ran.state} {command}")
        return
    if task.state == "granted":
        say(f"  ←  approved{who}: {task.tool}, done: {then or 'ran it'}")
    else:
        say(f"  ←  {word}{who}: {task.tool} skipped ({_why(task)})")


def demo_title(now: datetime | None = None) -> str:
    """The run's title, distinct per demo: what it does and when it began."""
    began = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"demo: prepare the shop 1.4.0 release · {began}"


def _summary(tally: Tally) -> str:
    people = ", ".join(f"{n} {w}" for w, n in sorted(tally.by_people.items())) or "none yet"
    return (
        f"demo agent: done. At once by rule: {tally.at_once['granted']} granted, "
        f"{tally.at_once['refused']} refused. By people: {people}."
    )


@click.command()
@config_option
@click.option("--url", default=None, help="The service (default: from the configuration).")
@click.option(
    "--token",
    envvar="APPROVALBOT_TOKEN",
    default=None,
    help=f"An application token (default: make one for {DEMO_APP!r} in the store).",
)
@click.option("--workspace", default=None, help="Workspace (default: the bootstrap one).")
@click.option("--wait/--no-wait", default=True, help="Wait for the decisions and carry on.")
@click.option("--timeout", default="30m", help="How long to wait for people (e.g. 30m).")
def demo(
    config_path: str | None,
    url: str | None,
    token: str | None,
    workspace: str | None,
    wait: bool,
    timeout: str,
) -> None:
    """Run a small simulated agent against the running service (start it with `make run`)."""
    settings = settings_or_exit(config_path)
    ws = workspace or settings.bootstrap.workspace
    base = (url or public_base(settings)).rstrip("/")
    profile = DEMO_PROFILE
    if "demo" in settings.profiles:
        profile = settings.profiles["demo"].model_dump()
    try:
        seconds = parse_duration(timeout).total_seconds()
    except ValueError as error:
        fail(str(error))

    async def go() -> Tally:
        secret = token or await demo_token(settings, ws)
        async with Client(base, secret) as client:
            return await run_demo(client, ws, base, profile, click.echo, wait=wait, timeout=seconds)

    try:
        tally = asyncio.run(go())
    except ApprovalError as error:
        fail(f"{error.code}: {error.detail} (has `approvalbot serve` made workspace {ws!r}?)", 1)
    except ApiError as error:
        fail(f"{error.code}: {error.detail}", 1)
    except OSError as error:
        fail(f"cannot reach the service at {base} ({error}); start it with `make run`", 1)
    click.echo(_summary(tally))
