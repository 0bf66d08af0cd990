"""`approvalbot login` and the CLI profile: checked against the service, written 0600, read by
`approvalbot asks` after flags and environment, refused when others may read it, and its token
sent only to its own service."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Awaitable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.cli import main
from bot.cli.login import PROFILE_ENV, Profile, profile_path, read_profile, write_profile
from bot.service import CallSpec, RunSpec
from tests.http_harness import Served, fixtures

pytestmark = pytest.mark.asyncio(loop_scope="module")

server, api = fixtures(backends=["sqlite"])


def invoke(*args: str, env: dict[str, str], stdin: str | None = None) -> Awaitable[Result]:
    return asyncio.to_thread(CliRunner().invoke, main, list(args), input=stdin, env=env)


@pytest.fixture
def profile_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A profile location of this test's own (the env var the CLI names for it)."""
    path = tmp_path / "conf" / "cli.toml"
    monkeypatch.setenv(PROFILE_ENV, str(path))
    for name in ("APPROVALBOT_URL", "APPROVALBOT_TOKEN", "APPROVALBOT_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    return path


async def one_waiting(api: Served) -> str:
    agent = await api.core.admin.authenticate(api.token("agent"))
    assert agent is not None
    run = await api.core.service.declare_run(agent, api.ws, RunSpec(approval_mode="ask"))
    await api.core.service.append(agent, api.ws, run.id, CallSpec("bash", {"command": "ls"}))
    return run.id


async def test_the_profile_path_follows_xdg(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert profile_path() == tmp_path / "xdg" / "approvalbot" / "cli.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")  # the spec: absolute paths only
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert profile_path() == tmp_path / "home" / ".config" / "approvalbot" / "cli.toml"
    monkeypatch.setenv(PROFILE_ENV, str(tmp_path / "mine.toml"))
    assert profile_path() == tmp_path / "mine.toml"


async def test_login_checks_writes_0600_and_asks_reads_it(api: Served, profile_file: Path) -> None:
    token = api.token("alice")
    done = await invoke("login", "--url", api.url, "--workspace", api.ws, "--token", token, env={})
    assert done.exit_code == 0, done.output
    assert token not in done.output and str(profile_file) in done.output
    assert stat.S_IMODE(os.stat(profile_file).st_mode) == 0o600
    assert read_profile(profile_file) == Profile(api.url, api.ws, token)
    await one_waiting(api)
    listed = await invoke("asks", env={})  # no flag, no environment: the profile
    assert listed.exit_code == 0 and "bash ls" in listed.output, listed.output
    assert token not in listed.output


async def test_login_asks_for_the_token_and_refuses_a_wrong_one(
    api: Served, profile_file: Path
) -> None:
    prompted = await invoke(
        "login", "--url", api.url, "--workspace", api.ws, env={}, stdin=api.token("bob") + "\n"
    )
    assert prompted.exit_code == 0, prompted.output
    assert api.token("bob") not in prompted.output  # typed hidden, never echoed back
    written = read_profile(profile_file)
    assert written is not None and written.token == api.token("bob")
    for token, workspace, code in (
        ("abm_" + "x" * 43, api.ws, "unauthorized"),
        (api.token("agent"), api.ws, "member_credential_required"),
        (api.token("alice"), api.beta, "not_found"),
    ):
        refused = await invoke(
            "login", "--url", api.url, "--workspace", workspace, "--token", token, env={}
        )
        assert refused.exit_code == 1 and code in refused.output, refused.output
        assert token not in refused.output
    assert read_profile(profile_file) == written  # a refused login leaves the profile alone


async def test_login_defaults_the_workspace_when_the_token_sees_one(
    api: Served, profile_file: Path
) -> None:
    async with api.session.get(
        f"{api.url}/v1/whoami", headers={"Authorization": f"Bearer {api.token('alice')}"}
    ) as answer:
        assert answer.status == 200 and (await answer.json())["workspaces"] == [api.ws]
    done = await invoke("login", "--url", api.url, "--token", api.token("alice"), env={})
    assert done.exit_code == 0, done.output
    written = read_profile(profile_file)
    assert written is not None and written.workspace == api.ws


async def test_flags_beat_the_environment_which_beats_the_profile(
    api: Served, profile_file: Path
) -> None:
    await one_waiting(api)
    # A profile for a service that is not there, with a token of another workspace.
    write_profile(Profile("http://127.0.0.1:9", api.beta, "abm_" + "p" * 43), profile_file)
    env = {"APPROVALBOT_URL": api.url, "APPROVALBOT_TOKEN": api.token("alice")}
    # The environment's URL differs from the profile's: the profile's token is not sent there,
    # nor its workspace used; the environment's token and the flag's workspace are.
    used = await invoke("asks", "--workspace", api.ws, env=env)
    assert used.exit_code == 0 and "bash ls" in used.output, used.output
    flagged = await invoke("asks", "--url", "http://127.0.0.1:9", "--workspace", api.ws, env=env)
    assert flagged.exit_code == 1 and "cannot reach http://127.0.0.1:9" in flagged.output
    # Only the profile: its (unreachable) service, never the default one.
    alone = await invoke("asks", env={})
    assert alone.exit_code == 1 and "cannot reach http://127.0.0.1:9" in alone.output
    # The profile's URL but another token: the profile's workspace is not assumed for it.
    write_profile(Profile(api.url, api.beta, api.token("carol")), profile_file)
    mine = await invoke("asks", "--workspace", api.ws, env={"APPROVALBOT_TOKEN": api.token("bob")})
    assert mine.exit_code == 0 and "bash ls" in mine.output, mine.output
    carol = await invoke("asks", env={})  # the profile alone: carol in beta, where nothing waits
    assert carol.exit_code == 0 and "nothing waits on people" in carol.output, carol.output


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
async def test_a_profile_others_may_read_is_refused(api: Served, profile_file: Path) -> None:
    write_profile(Profile(api.url, api.ws, api.token("alice")), profile_file)
    os.chmod(profile_file, 0o644)
    refused = await invoke("asks", env={})
    assert refused.exit_code == 2
    assert f"chmod 600 {profile_file}" in refused.output and "0644" in refused.output
    assert api.token("alice") not in refused.output
    os.chmod(profile_file, 0o600)
    assert (await invoke("asks", env={})).exit_code == 0
    await asyncio.to_thread(profile_file.write_text, "url = ")  # broken: said so, with the fix
    broken = await invoke("asks", env={})
    assert broken.exit_code == 2 and "approvalbot login" in broken.output


async def test_without_a_token_anywhere_the_error_says_where_one_comes_from(
    profile_file: Path,
) -> None:
    result = await invoke("asks", env={})
    assert result.exit_code == 2
    assert "approvalbot login" in result.output and str(profile_file) in result.output


async def test_the_first_start_writes_the_profile_but_not_over_another_services(
    profile_file: Path,
) -> None:
    from bot.cli.login import first_start_profile

    said = first_start_profile("http://127.0.0.1:4711", "default", "abm_" + "a" * 43)
    assert "mode 0600" in said and "abm_" not in said
    assert read_profile(profile_file) == Profile(
        "http://127.0.0.1:4711", "default", "abm_" + "a" * 43
    )
    # A restart after the database was reset, same address: the new admin token replaces it.
    first_start_profile("http://127.0.0.1:4711", "default", "abm_" + "b" * 43)
    assert read_profile(profile_file) == Profile(
        "http://127.0.0.1:4711", "default", "abm_" + "b" * 43
    )
    # Another service's profile is left alone, and the output says how to switch.
    said = first_start_profile("http://127.0.0.1:9999", "default", "abm_" + "c" * 43)
    assert "approvalbot login --url http://127.0.0.1:9999 --workspace default" in said
    kept = read_profile(profile_file)
    assert kept is not None and kept.url == "http://127.0.0.1:4711"


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
async def test_the_profile_is_0600_whatever_the_umask_and_a_failed_write_leaves_nothing(
    profile_file: Path,
) -> None:
    before = os.umask(0)  # the most open umask: the file must still be the owner's alone
    try:
        write_profile(Profile("http://127.0.0.1:4711", "default", "abm_" + "a" * 43), profile_file)
    finally:
        os.umask(before)
    assert stat.S_IMODE(os.stat(profile_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(profile_file.parent).st_mode) == 0o700
    # The rename cannot happen (a directory where the file goes): the error surfaces and no
    # partial file holding the token is left beside it.
    blocked = profile_file.parent / "blocked.toml"
    (blocked / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        write_profile(Profile("http://127.0.0.1:4711", "default", "abm_" + "b" * 43), blocked)
    assert sorted(p.name for p in profile_file.parent.iterdir()) == ["blocked.toml", "cli.toml"]
    assert read_profile(profile_file) == Profile(
        "http://127.0.0.1:4711", "default", "abm_" + "a" * 43
    )


async def test_login_with_a_url_that_is_not_one_says_so(profile_file: Path) -> None:
    token = "abm_" + "s" * 43
    done = await invoke(
        "login", "--url", "example.com", "--token", token, "--workspace", "w", env={}
    )
    assert done.exit_code == 1 and "example.com is not a service URL" in done.output, done.output
    assert token not in done.output and read_profile(profile_file) is None
