"""Configuration: one TOML file plus `APPROVALBOT_…` environment overrides (nested with `__`).

With no file the service starts on the embedded defaults: SQLite in the working directory, web
page and API on 127.0.0.1, no chat adapters. A wrong key or value is a `ConfigError` naming the
key, never a traceback.
"""

from __future__ import annotations

from contextvars import ContextVar
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from bot.durations import parse_duration
from bot.errors import ApprovalError
from bot.quorum import check_requirements
from bot.rules import compound

Duration = Annotated[timedelta, BeforeValidator(parse_duration)]

_config_file: ContextVar[Path | None] = ContextVar("approvalbot_config_file", default=None)


class ConfigError(Exception):
    """A configuration problem, one line per bad key: `telegram.token: field required`."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    public_url: str = ""  # links in chat messages; empty means http://host:port
    max_body_bytes: int = Field(default=1024 * 1024, gt=0)

    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")


class StoreConfig(_Section):
    url: str = "sqlite+aiosqlite:///approvalbot.db"


class DecisionsConfig(_Section):
    park_ttl: Duration = timedelta(hours=24)
    question_ttl: Duration = timedelta(hours=24)
    nudge_before: list[Duration] = Field(
        default_factory=lambda: [timedelta(hours=1), timedelta(minutes=10)]
    )


class TelegramConfig(_Section):
    enabled: bool = False
    token: SecretStr = SecretStr("")
    api_base_url: str = "https://api.telegram.org/bot"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_secret: SecretStr = SecretStr("")
    chat_id: int | None = None
    # Per-workspace destination chats, workspace name -> chat id; `chat_id` is the fallback.
    workspace_chats: dict[str, int] = Field(default_factory=dict)


class SlackConfig(_Section):
    enabled: bool = False
    bot_token: SecretStr = SecretStr("")
    signing_secret: SecretStr = SecretStr("")
    app_token: SecretStr = SecretStr("")
    api_base_url: str = "https://slack.com/api/"
    mode: Literal["http", "socket"] = "http"
    channel: str = ""
    # Per-workspace channels, workspace name -> channel id (C…); `channel` is the fallback.
    workspace_channels: dict[str, str] = Field(default_factory=dict)


def _requirements(value: list[Any]) -> list[Any]:
    """Checked like a run's (bot/quorum.py), so a bad profile stops the start, naming the key."""
    try:
        return check_requirements(value)
    except ApprovalError as refused:
        raise ValueError(refused.detail) from None


def _shell_commands(value: list[Any]) -> list[Any]:
    try:
        return compound.check_shell_commands(value)
    except ApprovalError as refused:
        raise ValueError(refused.detail) from None


class ProfileConfig(_Section):
    approval_mode: Literal["bypass", "ask", "rules"] = "ask"
    approval_rules: list[Any] = Field(default_factory=list)
    tool_names: list[str] | None = None
    aliases: dict[str, str] = Field(default_factory=dict)
    # Several approvers (bot/quorum.py): the same keys as on a run, which may only tighten them.
    approval_requirements: Annotated[list[Any], AfterValidator(_requirements)] = Field(
        default_factory=list
    )
    forbid_self_approval: bool = False
    # Shell lines judged per command (bot/rules/compound.py): `[{tool = "bash", path = "command"}]`.
    shell_commands: Annotated[list[Any], AfterValidator(_shell_commands)] = Field(
        default_factory=list
    )


def _route_target(target: str) -> str:
    """`slack:C0123`, `telegram:-100123`, `member:alice` or `default` (the workspace's usual
    chat on every platform)."""
    kind, _, value = target.partition(":")
    if target == "default":
        return target
    if kind not in ("slack", "telegram", "member") or not value.strip():
        raise ValueError(
            f"{target!r}: a target is slack:CHANNEL, telegram:CHAT_ID, member:NAME or default"
        )
    if kind == "telegram":
        try:
            int(value)
        except ValueError:
            raise ValueError(f"{target!r}: a Telegram chat id is a number") from None
    return target


def _route_glob(pattern: str | None) -> str | None:
    """The rules' glob syntax: `|` between alternatives, none of them empty."""
    if pattern is not None and "" in pattern.split("|"):
        raise ValueError(f"empty glob in {pattern!r}")
    return pattern


RouteTarget = Annotated[str, AfterValidator(_route_target)]
RouteGlob = Annotated[str | None, AfterValidator(_route_glob)]


class RouteWhen(_Section):
    """What a route applies to: every key given must match (anchored globs, `|` between
    alternatives, as in rules); no key at all matches every decision."""

    workspace: RouteGlob = None
    tool: RouteGlob = None  # the resolved tool name the rules see
    risk: RouteGlob = None  # the effect profile's `risk`; a call without one never matches
    rule: RouteGlob = None  # the `reason` of the rule that parked it; none never matches


class RouteConfig(_Section):
    """Where matching decisions go (instead of the workspace's usual chats, unless `to` lists
    `default`), and who else sees them once a reminder went unanswered."""

    when: RouteWhen = Field(default_factory=RouteWhen)
    to: list[RouteTarget] = Field(default_factory=lambda: ["default"])
    escalate_to: list[RouteTarget] = Field(default_factory=list)


class BootstrapConfig(_Section):
    """What the first start creates so a newcomer can sign in at once."""

    enabled: bool = True
    workspace: str = "default"
    admin_name: str = "admin"
    app_name: str = "agent"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="APPROVALBOT_",
        env_nested_delimiter="__",
        extra="forbid",
        nested_model_default_partial_update=True,
    )

    server: ServerConfig = Field(default_factory=ServerConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    decisions: DecisionsConfig = Field(default_factory=DecisionsConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    profiles: dict[str, ProfileConfig] = Field(default_factory=dict)
    routes: list[RouteConfig] = Field(default_factory=list)
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_file.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def _format_errors(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = "unknown key" if item["type"] == "extra_forbidden" else item["msg"]
        lines.append(f"{key}: {message}")
    return "\n".join(lines)


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Load the TOML file (if any) with environment overrides; raise ConfigError on problems."""
    file = Path(path) if path is not None else None
    if file is not None and not file.is_file():
        raise ConfigError(f"config file not found: {file}")
    token = _config_file.set(file)
    try:
        return Settings(**overrides)
    except ValidationError as error:
        raise ConfigError(_format_errors(error)) from None
    except ValueError as error:  # TOML syntax errors surface as ValueError subclasses
        raise ConfigError(f"{file}: {error}") from None
    finally:
        _config_file.reset(token)
