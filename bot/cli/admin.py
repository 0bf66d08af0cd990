"""`approvalbot admin …`: workspaces, members, groups, applications and their tokens (SPEC 4a).

These commands open the store named by the configuration directly (no running service needed)
and apply pending migrations first, so they also work on a fresh database. A token is printed
once, when it is issued; only its hash is stored. With `--json` each command prints one JSON
object.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from adapters.web.links import login_url
from bot import errors, logins
from bot.admin import Admin, parse_claims
from bot.cli.common import config_option, emit_json, fail, run_async, settings_or_exit
from bot.clock import SystemClock
from bot.errors import ApprovalError
from store.migrate import upgrade
from store.sql import SqlStore

T = TypeVar("T")

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
workspace_option = click.option("--workspace", "workspace", required=True, help="Workspace name.")


def with_admin(config_path: str | None, action: Callable[[Admin], Awaitable[T]]) -> T:
    settings = settings_or_exit(config_path)

    async def go() -> T:
        store = SqlStore(settings.store.url)
        try:
            await upgrade(store.engine)
            return await action(Admin(store, SystemClock()))
        finally:
            await store.close()

    return run_async(go)


def show(as_json: bool, value: dict[str, Any], text: str) -> None:
    if as_json:
        emit_json(value)
    else:
        click.echo(text)
        if "token" in value:
            click.echo(f"token: {value['token']}")
            click.echo("(shown once: store it now; only its hash is kept)", err=True)


@click.group()
def admin() -> None:
    """Manage workspaces, members (people) and applications (agents)."""


@admin.group()
def workspace() -> None:
    """Workspaces."""


@workspace.command("create")
@click.argument("name")
@config_option
@json_option
def workspace_create(name: str, config_path: str | None, as_json: bool) -> None:
    """Create a workspace NAME (lowercase letters, digits, - and _)."""
    created = with_admin(config_path, lambda a: a.create_workspace(name))
    show(as_json, {"workspace": created.id}, f"workspace {created.id} created")


@workspace.command("list")
@config_option
@json_option
def workspace_list(config_path: str | None, as_json: bool) -> None:
    """List the workspaces."""
    found = with_admin(config_path, lambda a: a.workspaces())
    names = sorted(w.id for w in found)
    show(as_json, {"workspaces": names}, "\n".join(names) or "(no workspaces)")


@admin.group()
def member() -> None:
    """Members: the people who decide."""


@member.command("add")
@workspace_option
@click.option("--name", required=True, help="The member's name, as recorded on decisions.")
@click.option("--telegram-user-id", type=int, default=None, help="Their Telegram user id.")
@click.option("--slack-user-id", default=None, help="Their Slack user id (U…).")
@config_option
@json_option
def member_add(
    workspace: str,
    name: str,
    telegram_user_id: int | None,
    slack_user_id: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Add a member and print their token (once)."""
    issued = with_admin(
        config_path,
        lambda a: a.add_member(
            workspace, name, telegram_user_id=telegram_user_id, slack_user_id=slack_user_id
        ),
    )
    value = {"workspace": workspace, "member": name, "id": issued.principal.id}
    show(as_json, value | {"token": issued.token}, f"member {name} added to {workspace}")


@admin.group()
def app() -> None:
    """Applications: the agent runtimes that append calls."""


def _claims_option(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> frozenset[str]:
    try:
        return parse_claims(value or "")
    except ApprovalError as error:
        raise click.BadParameter(error.detail.removeprefix("may_claim: ")) from None


def _claims_text(claims: frozenset[str]) -> str:
    return ",".join(sorted(claims)) or "-"


@app.command("add")
@workspace_option
@click.option("--name", required=True, help="The application's name.")
@click.option(
    "--may-claim",
    "may_claim",
    default=None,
    callback=_claims_option,
    metavar="ORIGINS",
    help="Origins beyond model its appends may claim: author, kernel or author,kernel "
    "(default: none). Such rows are pre-approved unless a rule names their origin.",
)
@config_option
@json_option
def app_add(
    workspace: str, name: str, may_claim: frozenset[str], config_path: str | None, as_json: bool
) -> None:
    """Add an application and print its token (once)."""
    issued = with_admin(
        config_path, lambda a: a.add_application(workspace, name, may_claim=may_claim)
    )
    value = {
        "workspace": workspace,
        "application": name,
        "id": issued.principal.id,
        "may_claim": sorted(may_claim),
    }
    text = f"application {name} added to {workspace}"
    if may_claim:
        text += f" (may claim origin {_claims_text(may_claim)})"
    show(as_json, value | {"token": issued.token}, text)


@app.command("list")
@workspace_option
@config_option
@json_option
def app_list(workspace: str, config_path: str | None, as_json: bool) -> None:
    """List the workspace's applications: name, id, and the origins each may claim."""
    found = with_admin(config_path, lambda a: a.applications(workspace))
    apps = [{"name": x.name, "id": x.id, "may_claim": sorted(x.may_claim)} for x in found]
    lines = [f"{x.name}\t{x.id}\tmay_claim={_claims_text(x.may_claim)}" for x in found]
    show(
        as_json,
        {"workspace": workspace, "applications": apps},
        "\n".join(lines) or "(no applications)",
    )


@admin.group()
def group() -> None:
    """Groups of members: the people an approval requirement's `groups` count."""


member_option = click.option(
    "--member",
    "members",
    multiple=True,
    help="A member's name (repeat for several).",
)


@group.command("add")
@workspace_option
@click.option("--name", required=True, help="The group's name, as requirements name it.")
@member_option
@config_option
@json_option
def group_add(
    workspace: str, name: str, members: tuple[str, ...], config_path: str | None, as_json: bool
) -> None:
    """Make the group NAME (if new) and add each --member to it."""
    created, added = with_admin(config_path, lambda a: a.add_group(workspace, name, members))
    verb = "created" if created else "exists"
    text = f"group {name} {verb} in {workspace}"
    if added:
        text += f"; added {', '.join(added)}"
    value = {"workspace": workspace, "group": name, "created": created, "added": added}
    show(as_json, value, text)


@group.command("remove")
@workspace_option
@click.option("--name", required=True, help="The group's name.")
@member_option
@click.option(
    "--force",
    is_flag=True,
    help="Remove even when a running run's requirement would be left with fewer eligible "
    "approvers than it asks for (refused as group_in_use otherwise); the runs are printed.",
)
@config_option
@json_option
def group_remove(
    workspace: str,
    name: str,
    members: tuple[str, ...],
    force: bool,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Take each --member out of the group; with no --member, remove the group itself."""
    removal = with_admin(
        config_path, lambda a: a.remove_group(workspace, name, members, force=force)
    )
    value: dict[str, Any] = {"workspace": workspace, "group": name, "removed": removal.removed}
    if removal.deleted:
        value["deleted"] = True
        text = f"group {name} removed from {workspace}"
    else:
        text = f"group {name}: removed {', '.join(removal.removed) or 'nobody'}"
    if removal.forced is not None:  # on stderr: --json keeps one object on stdout
        note = f"{errors.GROUP_IN_USE}: {removal.forced.affected()} (removed anyway: --force)"
        click.echo(f"warning: {note}", err=True)
    show(as_json, value, text)


@group.command("list")
@workspace_option
@config_option
@json_option
def group_list(workspace: str, config_path: str | None, as_json: bool) -> None:
    """List the workspace's groups and their members."""
    found = with_admin(config_path, lambda a: a.groups(workspace))
    lines = [f"{name}\t{','.join(names) or '-'}" for name, names in found.items()]
    show(as_json, {"workspace": workspace, "groups": found}, "\n".join(lines) or "(no groups)")


def _whose(member_name: str | None, app_name: str | None) -> tuple[str, str]:
    if (member_name is None) == (app_name is None):
        fail("name exactly one of --member NAME or --app NAME")
    if member_name is not None:
        return "member", member_name
    assert app_name is not None
    return "application", app_name


@admin.group()
def token() -> None:
    """Rotate or revoke a member's or an application's tokens."""


def _token_command(func: Callable[..., None]) -> Callable[..., None]:
    for option in reversed(
        [
            workspace_option,
            click.option("--member", "member_name", default=None, help="A member's name."),
            click.option("--app", "app_name", default=None, help="An application's name."),
            config_option,
            json_option,
        ]
    ):
        func = option(func)
    return func


@token.command("rotate")
@_token_command
def token_rotate(
    workspace: str,
    member_name: str | None,
    app_name: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Revoke every token of the member or application and issue a new one (printed once)."""
    kind, name = _whose(member_name, app_name)
    issued = with_admin(config_path, lambda a: a.rotate(workspace, kind, name))
    value = {"workspace": workspace, kind: name, "token": issued.token}
    show(as_json, value, f"{kind} {name}: tokens rotated")


@token.command("revoke")
@_token_command
def token_revoke(
    workspace: str,
    member_name: str | None,
    app_name: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Revoke every token of the member or application; requests with them get 401."""
    kind, name = _whose(member_name, app_name)
    count = with_admin(config_path, lambda a: a.revoke(workspace, kind, name))
    value = {"workspace": workspace, kind: name, "revoked": count}
    show(as_json, value, f"{kind} {name}: {count} token(s) revoked")


@admin.command("login-link")
@workspace_option
@click.option("--member", "member_name", required=True, help="The person who signs in.")
@config_option
@json_option
def login_link(workspace: str, member_name: str, config_path: str | None, as_json: bool) -> None:
    """Print a one-time sign-in link for the browser page (valid 30 minutes)."""
    settings = settings_or_exit(config_path)

    async def issue_link(a: Admin) -> str:
        principal = await a.principal(workspace, "member", member_name)
        return await logins.issue(a.store, a.clock, principal)

    token = with_admin(config_path, issue_link)
    link = login_url(settings.server.base_url(), token)
    show(as_json, {"workspace": workspace, "member": member_name, "link": link}, link)
