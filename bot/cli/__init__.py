"""The `approvalbot` command: the entry point that wires the core, the store and the surfaces."""

from __future__ import annotations

import click

from bot.cli.admin import admin
from bot.cli.asks import asks
from bot.cli.db import db
from bot.cli.demo import demo
from bot.cli.serve import serve


@click.group(name="approvalbot", context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """approvalbot: the approval stage for AI agents."""


main.add_command(serve)
main.add_command(db)
main.add_command(admin)
main.add_command(asks)
main.add_command(demo)

try:
    from bot.cli.rules import rules
except ImportError:  # pragma: no cover - only while the rules CLI is being written
    pass
else:
    main.add_command(rules)
