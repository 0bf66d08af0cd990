"""How calls read on the page, the URL scheme, signed sessions, and the documented config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from adapters.web import links, render
from adapters.web.session import Session, Signer, new_session
from bot.cli.demo import DEMO_PROFILE
from bot.config import Settings, load_settings
from bot.domain import Principal, Task

ROOT = Path(__file__).resolve().parents[1]


def task(tool_input: Any, tool: str = "bash", **fields: Any) -> Task:
    return Task(
        id="task_1",
        run_id="run_1",
        workspace_id="acme",
        key="k1",
        kind=fields.pop("kind", "tool_call"),
        origin="model",
        tool_name=tool,
        tool=tool,
        tool_input=tool_input,
        state="needs_approval",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        **fields,
    )


def test_a_shell_command_is_a_code_block_and_the_rest_stays_visible() -> None:
    view = render.render_call(task({"command": "ls -la /tmp", "timeout": 30}))
    assert [(b.kind, b.text) for b in view.blocks] == [("command", "ls -la /tmp")]
    assert '"timeout": 30' in view.rest
    argv = render.render_call(task({"cmd": ["git", "commit", "-m", "a message"]}))
    assert argv.blocks[0].text == "git commit -m 'a message'"
    assert argv.rest == ""


def test_a_file_edit_is_a_diff() -> None:
    edit = {"file_path": "app.py", "old_string": "a = 1\nb = 2\n", "new_string": "a = 1\nb = 3\n"}
    view = render.render_call(task(edit, "Edit"))
    (block,) = view.blocks
    assert block.kind == "diff" and block.title == "edit of app.py"
    assert [(line.cls, line.text) for line in block.lines if line.cls in ("add", "del")] == [
        ("del", "-b = 2"),
        ("add", "+b = 3"),
    ]
    assert view.rest == ""
    multi = {"file_path": "x.py", "edits": [{"old_string": "1", "new_string": "2"}] * 2}
    added = [ln for ln in render.render_call(task(multi)).blocks[0].lines if ln.cls == "add"]
    assert len(added) == 2
    patch = render.render_call(task({"patch": "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y"}))
    assert [ln.cls for ln in patch.blocks[0].lines] == ["meta", "meta", "hunk", "del", "add"]


def test_a_write_shows_its_content_and_anything_else_is_json() -> None:
    write = render.render_call(task({"file_path": "n.txt", "content": "hello"}, "Write"))
    assert [(b.kind, b.title, b.text) for b in write.blocks] == [("code", "writes n.txt", "hello")]
    other = render.render_call(task({"amount": 5, "to": "ACME"}, "pay"))
    assert other.blocks[0].kind == "json" and '"amount": 5' in other.blocks[0].text
    assert render.render_call(task("plain text")).blocks[0].kind == "text"
    assert render.render_call(task([1, 2])).blocks[0].kind == "json"


def test_long_input_is_clipped_head_and_tail() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    clipped, hidden = render.clip(text, 10)
    assert hidden == 90 and clipped.startswith("line 0\n") and clipped.endswith("line 99")
    assert "… 90 more lines …" in clipped
    assert render.clip("short", 10) == ("short", 0)


def test_the_effect_profile_reads_as_badges() -> None:
    view = render.profile_view(
        {"summary": "pay", "effects": ["spends"], "risk": "high", "reversible": False, "cost": 3}
    )
    assert (view.summary, view.effects, view.risk) == ("pay", ["spends"], "high")
    assert view.reversible is False
    assert view.other == [("cost", "3")]
    assert render.profile_view({"risk": "extreme"}).risk == ""


def test_deadlines_read_in_people_terms() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert render.remaining(now + timedelta(hours=23, minutes=59, seconds=30), now) == (
        "expires in 23 h 59 min"
    )
    assert render.remaining(now, now) == "expiring now"
    assert render.remaining(None, now) == ""


def test_the_decision_url_scheme() -> None:
    assert links.decision_url("https://a.example/", "run_1", "k:1~retry2") == (
        "https://a.example/decisions/run_1/k%3A1~retry2"
    )
    assert links.run_url("http://h:1", "run_1") == "http://h:1/runs/run_1"
    assert links.login_url("http://h:1", "abl_x") == "http://h:1/login/abl_x"


def test_sessions_are_signed_and_csrf_tokens_bound_to_them() -> None:
    signer = Signer("secret")
    alice = Principal("member", "mem_1", "alice", "acme")
    session = new_session(1000.0, alice)
    value = signer.encode(session)
    assert signer.loads(value) is not None
    assert Signer("another secret").loads(value) is None
    tampered = value[:-2] + ("yy" if value.endswith("xx") else "xx")  # always a change
    assert signer.loads(tampered) is None
    assert signer.loads("garbage") is None
    other = Session("other-sid", session.expires)
    assert signer.csrf_ok(session, signer.csrf(session))
    assert not signer.csrf_ok(other, signer.csrf(session))
    assert not signer.csrf_ok(session, None)


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += _keys(annotation, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def test_config_example_documents_every_key_and_loads() -> None:
    text = (ROOT / "config.example.toml").read_text()
    settings = load_settings(ROOT / "config.example.toml")
    for key in _keys(Settings):
        if key == "profiles":
            assert "[profiles." in text
            continue
        if key == "routes":  # a list of tables, documented commented out
            assert "# [[routes]]" in text
            continue
        section, _, name = key.rpartition(".")
        if section:
            assert f"[{section}]" in text, f"config.example.toml lacks [{section}]"
        assert f"{name} =" in text or f"# {name} =" in text, f"undocumented key {key}"
    for name in ("approval_mode", "approval_rules", "tool_names", "aliases",
                 "approval_requirements", "forbid_self_approval"):  # fmt: skip
        assert name in text
    defaults = Settings()
    assert settings.server == defaults.server and settings.store == defaults.store
    assert settings.decisions == defaults.decisions and settings.bootstrap == defaults.bootstrap


def test_the_demo_policy_is_the_example_profile() -> None:
    profile = load_settings(ROOT / "config.example.toml").profiles["demo"].model_dump()
    no_quorum = {"approval_requirements": [], "forbid_self_approval": False}
    assert profile == DEMO_PROFILE | {"tool_names": None, "shell_commands": []} | no_quorum
