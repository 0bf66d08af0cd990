"""First start (part of the entry point): a workspace, a person and an agent token.

On the first start (no `bootstrap` marker in meta) it creates the workspace, an admin member and
an application token for agents, and prints the tokens once. Every start while
`[bootstrap] enabled` prints a fresh one-time sign-in link for the admin; production installs
turn it off and add people with `approvalbot admin`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from adapters.web.links import login_url
from bot import logins
from bot.config import Settings
from bot.core import Core
from bot.domain import Principal
from bot.errors import ApprovalError
from bot.ports import DuplicateKey

MARKER = "bootstrap"


@dataclass(frozen=True)
class Bootstrap:
    workspace: str
    admin: str
    app: str
    created: bool  # this start made them (tokens below are shown this once)
    admin_token: str | None = None
    app_token: str | None = None
    login_link: str | None = None


def public_base(settings: Settings, port: int | None = None) -> str:
    """The address people open: `public_url`, else where the service listens."""
    if settings.server.public_url:
        return settings.server.public_url.rstrip("/")
    return listen_base(settings, port)


def listen_base(settings: Settings, port: int | None = None) -> str:
    """host:port as a URL (a wildcard host reads as local); `port` is the one actually bound,
    which differs from the configured one when that is 0."""
    host = settings.server.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.server.port if port is None else port}"


async def _created(core: Core, settings: Settings) -> tuple[bool, str | None, str | None]:
    """Create what is missing; tokens come back only for what this call created."""
    boot = settings.bootstrap
    made = False
    try:
        await core.admin.create_workspace(boot.workspace)
        made = True
    except ApprovalError as error:
        if error.status != 409:
            raise
    admin_token = app_token = None
    try:
        admin_token = (await core.admin.add_member(boot.workspace, boot.admin_name)).token
    except ApprovalError as error:
        if error.status != 409:
            raise
    try:
        app_token = (await core.admin.add_application(boot.workspace, boot.app_name)).token
    except ApprovalError as error:
        if error.status != 409:
            raise
    return made or admin_token is not None or app_token is not None, admin_token, app_token


async def _admin(core: Core, settings: Settings) -> Principal | None:
    boot = settings.bootstrap
    async with core.store.read() as tx:
        member = await tx.find_member(boot.workspace, name=boot.admin_name)
    if member is None:
        return None
    return Principal("member", member.id, member.name, member.workspace_id)


async def bootstrap(core: Core, settings: Settings, port: int | None = None) -> Bootstrap | None:
    """Run at every start; idempotent. None when `[bootstrap] enabled = false`. `port` is the
    one the service listens on (for the sign-in link)."""
    boot = settings.bootstrap
    if not boot.enabled:
        return None
    async with core.store.read() as tx:
        done = await tx.get_meta(MARKER)
    created, admin_token, app_token = False, None, None
    if done is None:
        created, admin_token, app_token = await _created(core, settings)
        try:
            async with core.store.write() as tx:
                record = {"workspace": boot.workspace, "admin": boot.admin_name}
                await tx.set_meta(MARKER, json.dumps(record))
        except DuplicateKey:
            pass  # another instance finished first
    link = None
    admin = await _admin(core, settings)
    if admin is not None:
        token = await logins.issue(core.store, core.clock, admin)
        link = login_url(public_base(settings, port), token)
    return Bootstrap(
        boot.workspace, boot.admin_name, boot.app_name, created, admin_token, app_token, link
    )


def describe(result: Bootstrap | None, profile_note: str | None = None) -> list[str]:
    """What `serve` prints: the tokens made on this start, what each is for, where the admin's
    was saved for the CLI (`profile_note`), and the sign-in link, plainly."""
    if result is None:
        return []
    lines: list[str] = []
    if result.created:
        lines.append(
            f"approvalbot: first start: created workspace {result.workspace!r}, "
            f"person {result.admin!r} and application {result.app!r}"
        )
    if result.admin_token:
        lines.append(
            f"approvalbot:   {result.admin}'s member token (shown once): {result.admin_token}"
        )
        lines.append(
            f"approvalbot:   (abm_… is a person's credential: {result.admin!r} deciding from the "
            "terminal, `approvalbot asks`, or over the API; keep it secret)"
        )
        if profile_note:
            lines.append(profile_note)
    if result.app_token:
        lines.append(
            f"approvalbot:   {result.app}'s application token (shown once, for agents): "
            f"{result.app_token}"
        )
        lines.append(
            "approvalbot:   (aba_… is an agent's credential: it declares runs and asks; it cannot "
            "decide)"
        )
    if result.login_link:
        minutes = int(logins.LOGIN_LINK_TTL.total_seconds() // 60)
        lines += [
            "",
            f"    Sign in:  {result.login_link}",
            f"    (one-time link for {result.admin!r}, valid {minutes} min; each start prints a "
            "new one)",
            "",
        ]
    return lines
