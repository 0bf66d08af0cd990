"""Do the framework extras install cleanly into a fresh virtualenv? (Tests may not use the
network; this script does: it installs from the package index.)

    .venv/bin/python bench/extras_check.py            # all three
    .venv/bin/python bench/extras_check.py langchain  # one

The source is the committed tree (`git archive HEAD`, unpacked in a temporary directory, so
the build writes nothing into the working tree). For each extra: a new virtualenv there,
`pip install '<source>[<extra>]'`, then, from outside the source (so the installed copy is
what is imported), import the bridge and print the framework's installed version. Exits
non-zero if any step fails.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = {
    "langchain": ("approvalbot.langchain", "ApprovalMiddleware", ["langchain", "langgraph"]),
    "openai-agents": ("approvalbot.openai_agents", "resolve_interruptions", ["openai-agents"]),
    "claude-agent-sdk": ("approvalbot.claude_agent_sdk", "can_use_tool", ["claude-agent-sdk"]),
}


def unpack(scratch: Path) -> Path:
    source = scratch / "source"
    source.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    return source


def check(extra: str, scratch: Path, source: Path) -> bool:
    module, name, distributions = EXTRAS[extra]
    home = scratch / extra
    venv.create(home, with_pip=True, clear=True)
    python = home / "bin" / "python"
    started = time.monotonic()
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         f"{source}[{extra}]"],
        capture_output=True, text=True, cwd=scratch,
    )  # fmt: skip
    took = time.monotonic() - started
    if install.returncode != 0:
        print(f"{extra}: pip install failed ({took:.0f} s)\n{install.stderr[-2000:]}")
        return False
    probe = (
        "import importlib.metadata as md, sys\n"
        f"from {module} import {name}\n"
        "import approvalbot\n"
        "assert 'site-packages' in approvalbot.__file__, approvalbot.__file__\n"
        f"print(', '.join(f'{{d}} {{md.version(d)}}' for d in {distributions!r}))\n"
    )
    imported = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, cwd=scratch
    )
    if imported.returncode != 0:
        print(f"{extra}: installed, but `from {module} import {name}` failed\n{imported.stderr}")
        return False
    print(f"{extra}: ok, installed in {took:.0f} s; from {module} import {name}; "
          f"{imported.stdout.strip()}")  # fmt: skip
    return True


def main(chosen: list[str]) -> int:
    unknown = [e for e in chosen if e not in EXTRAS]
    if unknown:
        print(f"unknown extras: {', '.join(unknown)} (known: {', '.join(EXTRAS)})")
        return 2
    with tempfile.TemporaryDirectory(prefix="approvalbot-extras-") as scratch:
        source = unpack(Path(scratch))
        results = [check(extra, Path(scratch), source) for extra in chosen or list(EXTRAS)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
