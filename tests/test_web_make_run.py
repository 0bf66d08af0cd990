"""`make run` from a fresh checkout in a temporary directory reaches /readyz, the sign-in
link it prints opens the inbox, and the README's terminal path works as written: in a shell
with the virtualenv activated, `approvalbot asks` (no flags: the CLI profile the first start
wrote) lists a parked call and `approvalbot asks approve ID` approves it, recorded `via: "cli"`.

Practical form of "a fresh clone": the checkout is the repository's files as a clone would have
them (tracked and new, minus what .gitignore leaves out, so the uncommitted work is tested too)
copied into a temporary directory. Creating a virtualenv from nothing needs the network, so
the target reuses the test run's virtualenv (`VENV=`, with `-o` so make does not reinstall into
it) and imports the code from the checkout (`PYTHONPATH`). Everything else is the newcomer's
path: no config file, no database, `make run` in the checkout, the printed link.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from adapters.http.client import Client

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"Sign in:\s+(http://\S+/login/\S+)")
SERVING = re.compile(r"serving on http://127\.0\.0\.1:(\d+)")
APP_TOKEN = re.compile(r"application token \(shown once, for agents\): (aba_\S+)")

pytestmark = pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git"
)


def fresh_checkout(target: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def in_activated_shell(venv: Path, command: str, cwd: Path, env: dict[str, str]) -> str:
    """`source .venv/bin/activate && …` as the README says; stdout, after a zero exit."""
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", f"source {venv}/bin/activate && {command}",
        cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, f"{command}: {out.decode()}{err.decode()}"
    return out.decode()


@pytest.mark.timeout(120)
async def test_make_run_from_a_fresh_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "approvalbot"
    fresh_checkout(checkout)
    assert not list(checkout.glob("*.db")) and (checkout / "Makefile").is_file()
    venv = Path(sys.executable).parent.parent
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPROVALBOT_")}
    env.pop("XDG_CONFIG_HOME", None)  # a newcomer's: the profile goes to ~/.config
    # Port 0: the service picks a free one, and the link and the CLI profile must carry it.
    env |= {"APPROVALBOT_SERVER__PORT": "0", "PYTHONPATH": str(checkout), "HOME": str(home)}
    process = await asyncio.create_subprocess_exec(
        "make", "run", f"VENV={venv}", "-o", f"{venv}/.installed",
        cwd=checkout,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    output: list[str] = []
    try:
        assert process.stdout is not None
        link = None
        async with asyncio.timeout(45):
            while link is None:
                line = (await process.stdout.readline()).decode()
                assert line, "make run ended early:\n" + "".join(output)
                output.append(line)
                found = LINK.search(line)
                link = found.group(1) if found else None
        printed = "".join(output)
        serving = SERVING.search(printed)
        assert serving is not None, printed
        port = int(serving.group(1))
        assert port != 0 and f"127.0.0.1:{port}/login/" in link
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as client:
            async with client.get(f"http://127.0.0.1:{port}/readyz") as ready:
                assert ready.status == 200 and (await ready.json())["ready"] is True
            async with client.get(link) as inbox:
                html = await inbox.text()
                assert inbox.status == 200 and str(inbox.url).endswith("/inbox")
                text = re.sub(r"<[^>]+>", "", html)  # who is signed in, however it is marked up
                assert "admin · default" in text and "Nothing is waiting for you" in text
        assert (checkout / "approvalbot.db").is_file()  # the embedded default: SQLite here
        assert "shown once" in printed and "abm_… is a person's credential" in printed
        await the_terminal_path(venv, checkout, env, port, printed, home)
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGTERM)  # make and the service it started
            await asyncio.wait_for(process.wait(), 15)


async def the_terminal_path(
    venv: Path, checkout: Path, env: dict[str, str], port: int, printed: str, home: Path
) -> None:
    """The README's terminal section: an agent parks a call; `approvalbot asks` shows it and
    `approvalbot asks approve ID` approves it, with nothing but the profile the start wrote."""
    profile = home / ".config" / "approvalbot" / "cli.toml"
    assert profile.stat().st_mode & 0o777 == 0o600
    assert f'url = "http://127.0.0.1:{port}"' in profile.read_text()
    app_token = APP_TOKEN.search(printed)
    assert app_token is not None
    url = f"http://127.0.0.1:{port}"
    async with Client(url, app_token.group(1)) as agent:
        run = await agent.workspace("default").runs.declare(approval_mode="ask", title="fresh")
        parked = await run.append("bash", {"command": "make deploy"})
        assert parked.parked
        table = await in_activated_shell(venv, "approvalbot asks", checkout, env)
        row = next((line for line in table.splitlines() if "bash make deploy" in line), None)
        assert row is not None, table
        decision = row.split()[0]
        said = await in_activated_shell(venv, f"approvalbot asks approve {decision}", checkout, env)
        assert said.startswith(f"approved {decision}")
        task = await run.task(parked.key)
        assert (task.state, task.resolved_by, task.via) == ("granted", "admin", "cli")
