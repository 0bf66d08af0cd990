"""`make run` from a fresh checkout in a temporary directory reaches /readyz, and the sign-in
link it prints opens the inbox.

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

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"Sign in:\s+(http://\S+/login/\S+)")

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


@pytest.mark.timeout(90)
async def test_make_run_from_a_fresh_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "approvalbot"
    fresh_checkout(checkout)
    assert not list(checkout.glob("*.db")) and (checkout / "Makefile").is_file()
    venv = Path(sys.executable).parent.parent
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPROVALBOT_")}
    env |= {"APPROVALBOT_SERVER__PORT": str(port), "PYTHONPATH": str(checkout)}
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
        assert f"127.0.0.1:{port}" in link
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as client:
            async with client.get(f"http://127.0.0.1:{port}/readyz") as ready:
                assert ready.status == 200 and (await ready.json())["ready"] is True
            async with client.get(link) as inbox:
                html = await inbox.text()
                assert inbox.status == 200 and str(inbox.url).endswith("/inbox")
                assert "admin · default" in html and "Nothing is waiting for you" in html
        assert (checkout / "approvalbot.db").is_file()  # the embedded default: SQLite here
        assert "shown once" in "".join(output)
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGTERM)  # make and the service it started
            await asyncio.wait_for(process.wait(), 15)
