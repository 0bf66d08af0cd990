"""Helpers shared by the commands: loading configuration, opening the store, printing errors."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import click

from bot.config import ConfigError, Settings, load_settings
from bot.errors import ApprovalError

T = TypeVar("T")

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="APPROVALBOT_CONFIG",
    default=None,
    help="TOML configuration file (default: embedded defaults; env APPROVALBOT_CONFIG).",
)


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def settings_or_exit(config_path: str | None) -> Settings:
    try:
        return load_settings(config_path)
    except ConfigError as error:
        fail(f"configuration:\n{error}")


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; an ApprovalError becomes its code and detail on stderr, exit 1."""
    try:
        return asyncio.run(factory())  # type: ignore[arg-type]
    except ApprovalError as error:
        fail(f"{error.code}: {error.detail}", 1)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, sort_keys=True))
