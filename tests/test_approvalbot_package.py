"""The `approvalbot` import name: the SDK's public names re-exported (the same objects, no
logic of its own), the bridges as submodules, and each extra pinned to the versions the
bridges' tests run against (what `pip install approvalbot[…]` installs)."""

from __future__ import annotations

import importlib
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import approvalbot
from adapters.http import client, sync_client

ROOT = Path(__file__).resolve().parents[1]
PINS = {
    "langchain": {"langchain": "1.5.0", "langgraph": "1.2.22"},
    "openai-agents": {"openai-agents": "0.24.0"},
    "claude-agent-sdk": {"claude-agent-sdk": "0.2.184"},
}


def test_the_sdk_names_are_the_sdks_own() -> None:
    from approvalbot import Client, require_approval

    assert Client is client.Client and require_approval is client.require_approval
    for name in approvalbot.__all__:
        source = client if hasattr(client, name) else sync_client
        assert getattr(approvalbot, name) is getattr(source, name), name
    errors = {"ApprovalbotError", "ApiError", "ApprovalDenied", "ApprovalExpired",
              "QuestionDeclined", "RunStopped", "CallRefused"}  # fmt: skip
    assert errors <= set(approvalbot.__all__)
    assert {"SyncClient", "SyncRun"} <= set(approvalbot.__all__)


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("approvalbot.langchain", {"ApprovalMiddleware", "ask_human"}),
        ("approvalbot.openai_agents", {"needs_approval", "resolve_interruptions", "ask_human"}),
        ("approvalbot.claude_agent_sdk", {"can_use_tool"}),
    ],
)
def test_each_bridge_is_a_submodule(module: str, names: set[str]) -> None:
    imported = importlib.import_module(module)
    assert names <= set(imported.__all__)
    framework = module.replace("approvalbot.", "adapters.frameworks.")
    code = importlib.import_module(framework)
    for name in imported.__all__:
        assert getattr(imported, name) is getattr(code, name)


def test_the_extras_pin_the_tested_versions() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, pins in PINS.items():
        assert sorted(extras[extra]) == sorted(f"{n}=={v}" for n, v in pins.items()), extra
        for name, pinned in pins.items():
            assert version(name) == pinned, name
