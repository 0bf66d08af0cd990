"""`approvalbot login` and the CLI profile: where the member commands find the service.

The profile is one small TOML file holding the service's URL, the workspace and a member token.
`approvalbot login` writes it after checking the three against the service; the first
`approvalbot serve` writes it too, for the admin it just created, so `approvalbot asks` works
on a fresh machine without a flag. The commands take each value from, in order: its flag, its
environment variable (`APPROVALBOT_URL`, `APPROVALBOT_TOKEN`, `APPROVALBOT_WORKSPACE`), the
profile. The profile's token is only ever sent to the profile's own URL.

Where: `$APPROVALBOT_CLI_PROFILE`, else `$XDG_CONFIG_HOME/approvalbot/cli.toml`, else
`~/.config/approvalbot/cli.toml`. It holds a secret, so it is written with mode 0600 and a
profile that others may read is refused (with the `chmod` that fixes it).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import click

from adapters.http.client import ApiError, ApprovalbotError, Client
from bot.cli.common import fail

PROFILE_ENV = "APPROVALBOT_CLI_PROFILE"
DEFAULT_URL = "http://127.0.0.1:8787"
SURFACE = "cli"  # sent with every request, so decisions made here are recorded `via: "cli"`


class ProfileError(Exception):
    """The profile exists but cannot be used (others may read it, or it does not parse)."""


@dataclass(frozen=True)
class Profile:
    url: str
    workspace: str
    token: str = field(repr=False)  # a secret: never in a traceback or a log line


def profile_path() -> Path:
    chosen = os.environ.get(PROFILE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    home = os.environ.get("XDG_CONFIG_HOME")
    base = Path(home) if home and Path(home).is_absolute() else Path.home() / ".config"
    return base / "approvalbot" / "cli.toml"


def read_profile(path: Path | None = None) -> Profile | None:
    """The profile, or None when there is none; ProfileError when it may not or cannot be used."""
    path = path or profile_path()
    try:
        opened = path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ProfileError(
            f"the CLI profile {path} cannot be read ({type(error).__name__}): "
            "write it again with `approvalbot login`"
        ) from None
    with opened:
        mode = os.fstat(opened.fileno()).st_mode  # of the file read, not of a path checked earlier
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ProfileError(
                f"the CLI profile {path} holds a token and others may read it "
                f"(mode {stat.S_IMODE(mode):04o}): run `chmod 600 {path}`"
            )
        raw = opened.read()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
        profile = Profile(str(data["url"]), str(data["workspace"]), str(data["token"]))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError) as error:
        raise ProfileError(
            f"the CLI profile {path} cannot be read ({type(error).__name__}): "
            "write it again with `approvalbot login`"
        ) from None
    return profile


def write_profile(profile: Profile, path: Path | None = None) -> Path:
    """Write the profile atomically, mode 0600 from its first byte (its directory 0700)."""
    path = path or profile_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = (
        "# approvalbot CLI profile (approvalbot login): the service, workspace and member token\n"
        # JSON strings (not ASCII-escaped) are valid TOML basic strings.
        f"url = {json.dumps(profile.url, ensure_ascii=False)}\n"
        f"workspace = {json.dumps(profile.workspace, ensure_ascii=False)}\n"
        f"token = {json.dumps(profile.token, ensure_ascii=False)}\n"
    )
    partial = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # A new file only (O_EXCL: never one planted or left there, nor a symlink's target), 0600
    # from its creation; on any failure it is removed, so a crash leaves the old profile whole.
    fd = os.open(
        partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600
    )
    try:
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            data = memoryview(text.encode())
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)  # the bytes are on disk before the rename makes them the profile
        finally:
            os.close(fd)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path


def same_service(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


@dataclass(frozen=True)
class Target:
    """Where a member command goes: each value from its flag, its env variable or the profile."""

    url: str
    token: str | None
    workspace: str | None


def resolve(url: str | None, token: str | None, workspace: str | None) -> Target:
    """Fill what flags and environment left out from the profile (read only when needed). The
    profile's token goes only to the profile's URL, and its workspace only with its token."""
    if url and token and workspace:
        return Target(url, token, workspace)
    try:
        profile = read_profile()
    except ProfileError as error:
        fail(str(error))
    if profile is None or (url and not same_service(url, profile.url)):
        return Target(url or DEFAULT_URL, token, workspace)
    token = token or profile.token
    if workspace is None and token == profile.token:
        workspace = profile.workspace
    return Target(url or profile.url, token, workspace)


async def workspaces_of(client: Client) -> list[str] | None:
    """The workspaces the client's token can see, or None from a service without `/v1/whoami`."""
    try:
        body = await client.request("GET", "/v1/whoami")
    except ApiError as error:
        if error.status in (404, 405):
            return None
        raise
    found = body.get("workspaces") if isinstance(body, dict) else None
    return [str(w) for w in found] if isinstance(found, list) else None


async def pick_workspace(client: Client, workspace: str | None) -> str:
    """The workspace given, or the token's only one."""
    if workspace:
        return workspace
    seen = await workspaces_of(client)
    if seen is not None and len(seen) == 1:
        return seen[0]
    if seen:
        raise LookupError(f"this token sees {len(seen)} workspaces: choose one with --workspace")
    raise LookupError(
        "a workspace is needed: --workspace, APPROVALBOT_WORKSPACE or `approvalbot login`"
    )


async def check(url: str, token: str, workspace: str | None) -> Profile:
    """Ask the service whether the token is a member's of the workspace; the checked profile."""
    async with Client(url, token, surface=SURFACE, retries=0) as client:
        chosen = await pick_workspace(client, workspace)
        await client.workspace(chosen).asks_page(limit=1)  # 401/403/404 unless all three fit
    return Profile(url.rstrip("/"), chosen, token)


@click.command()
@click.option(
    "--url",
    envvar="APPROVALBOT_URL",
    default=None,
    help=f"The service (env APPROVALBOT_URL; default: the profile's, or {DEFAULT_URL}).",
)
@click.option(
    "--workspace",
    envvar="APPROVALBOT_WORKSPACE",
    default=None,
    help="The workspace (env APPROVALBOT_WORKSPACE; default: the token's only one).",
)
@click.option(
    "--token",
    envvar="APPROVALBOT_TOKEN",
    default=None,
    help="A member token, abm_… (env APPROVALBOT_TOKEN; asked for when not given).",
)
def login(url: str | None, workspace: str | None, token: str | None) -> None:
    """Check a member token against the service and save it in the CLI profile (mode 0600)."""
    if not token:
        token = click.prompt("member token (abm_…)", hide_input=True).strip()
    if not url:
        try:
            known = read_profile()
        except ProfileError:
            known = None  # replaced by the one this login writes
        url = known.url if known is not None else DEFAULT_URL
    url = url.rstrip("/")
    try:
        profile = asyncio.run(check(url, token, workspace))
    except ApprovalbotError as error:
        fail(f"{url} refused: {error.code}: {error.detail}", 1)
    except LookupError as error:
        fail(str(error), 1)
    except OSError as error:
        fail(f"cannot reach {url}: {error}", 1)
    except ValueError:  # aiohttp's InvalidURL (a ValueError): `--url example.com` without http://
        fail(f"{url} is not a service URL: give it as http://host:port", 1)
    path = write_profile(profile)
    click.echo(
        f"approvalbot: signed in to {profile.url}, workspace {profile.workspace!r}; "
        f"CLI profile written to {path} (mode 0600)"
    )


def first_start_profile(url: str, workspace: str, token: str) -> str:
    """The first `serve` saves the admin's token for the CLI; what it says about it. A profile
    for another service is left alone (the admin can `approvalbot login` to switch)."""
    path = profile_path()
    try:
        existing = read_profile(path)
    except ProfileError:
        existing = None  # unreadable or too open: replaced by a good one
    if existing is not None and not same_service(existing.url, url):
        return (
            f"approvalbot:   the CLI profile {_shown(path)} is for {existing.url}, left as it is; "
            f"for this service: approvalbot login --url {url} --workspace {workspace} "
            "(with the member token above)"
        )
    try:
        write_profile(Profile(url, workspace, token), path)
    except OSError as error:
        return f"approvalbot:   could not write the CLI profile {path}: {error.strerror}"
    return (
        f"approvalbot:   saved for the CLI in {_shown(path)} (mode 0600, with {url} and workspace "
        f"{workspace!r}): `approvalbot asks` needs no flags"
    )


def _shown(path: Path) -> str:
    """The path as a person reads it: under the home directory as `~/…`."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except (ValueError, RuntimeError):
        return str(path)
