"""Configuration: TOML plus APPROVALBOT_ environment overrides; clear errors naming the key."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from bot.config import ConfigError, Settings, load_settings
from bot.durations import format_duration, parse_duration

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("24h", 86400),
        ("10m", 600),
        ("90s", 90),
        ("1h30m", 5400),
        ("45", 45),
        (30, 30),
        ("1.5", 1.5),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["", "h", "10x", "1h 30m", "-5", True, None, "m10", "1h30"])
def test_bad_durations_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


def test_format_duration_reads_like_a_person() -> None:
    assert format_duration(timedelta(hours=23, minutes=59, seconds=30)) == "23 h 59 min"
    assert format_duration(timedelta(minutes=10)) == "10 min"
    assert format_duration(timedelta(seconds=-3)) == "0 s"


def test_embedded_defaults_without_a_file() -> None:
    settings = load_settings()
    assert settings.server.host == "127.0.0.1" and settings.server.port == 8787
    assert settings.store.url == "sqlite+aiosqlite:///approvalbot.db"
    assert settings.decisions.park_ttl == timedelta(hours=24)
    assert settings.decisions.nudge_before == [timedelta(hours=1), timedelta(minutes=10)]
    assert not settings.telegram.enabled and not settings.slack.enabled


def test_file_and_nested_environment_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[telegram]\nenabled = true\ntoken = "from-file"\nchat_id = -100\n'
        '[decisions]\npark_ttl = "2h"\nnudge_before = ["30m"]\n'
        '[profiles.dev]\napproval_mode = "rules"\n'
        'approval_rules = [{tool = "ls", verdict = "allow"}]\n'
    )
    monkeypatch.setenv("APPROVALBOT_TELEGRAM__TOKEN", "from-env")
    monkeypatch.setenv("APPROVALBOT_DECISIONS__PARK_TTL", "1h30m")
    settings = load_settings(path)
    assert settings.telegram.token.get_secret_value() == "from-env"
    assert settings.telegram.chat_id == -100  # the rest of the section still comes from the file
    assert settings.decisions.park_ttl == timedelta(minutes=90)
    assert settings.decisions.nudge_before == [timedelta(minutes=30)]
    assert settings.profiles["dev"].approval_rules == [{"tool": "ls", "verdict": "allow"}]
    assert "from-env" not in repr(settings) and "from-env" not in str(settings.telegram)


def test_every_problem_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[telegram]\nenabld = true\n[decisions]\npark_ttl = "2x"\n[server]\nport = "a"\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    lines = str(caught.value).splitlines()
    assert "telegram.enabld: unknown key" in lines
    assert any(line.startswith("decisions.park_ttl: ") and "2x" in line for line in lines)
    assert any(line.startswith("server.port: ") for line in lines)
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "missing.toml")
    path.write_text("[server\n")
    with pytest.raises(ConfigError):
        load_settings(path)


def test_example_config_loads_and_documents_every_key() -> None:
    example = ROOT / "config.example.toml"
    settings = load_settings(example)
    assert "demo" in settings.profiles
    documented = example.read_text()
    for section, model in Settings.model_fields.items():
        if section in ("profiles", "routes"):  # tables of tables: tests of their own
            assert f"[{section}" in documented or f"[[{section}]]" in documented, section
            continue
        assert f"[{section}]" in documented, section
        annotation = model.annotation
        assert annotation is not None
        for key in annotation.model_fields:  # type: ignore[union-attr]
            assert f"{key} =" in documented or f"# {key} =" in documented, f"{section}.{key}"
    assert tomllib.loads(documented)


def test_serve_reports_a_bad_config_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[store]\nurll = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--config", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "store.urll: unknown key" in done.stderr and "Traceback" not in done.stderr


def test_serve_refuses_slack_without_its_secrets(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[store]\nurl = "sqlite+aiosqlite:///{tmp_path}/s.db"\n[slack]\nenabled = true\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--config", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "slack.bot_token: required" in done.stderr
    assert "slack.signing_secret: required in http mode" in done.stderr
