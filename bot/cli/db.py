"""`approvalbot db upgrade`: apply the schema migrations (the service also does it at start)."""

from __future__ import annotations

import click

from bot.cli.common import config_option, run_async, settings_or_exit
from store.migrate import upgrade as apply_migrations
from store.sql import SqlStore


@click.group()
def db() -> None:
    """Database maintenance."""


@db.command()
@config_option
def upgrade(config_path: str | None) -> None:
    """Apply every pending migration."""
    settings = settings_or_exit(config_path)

    async def go() -> None:
        store = SqlStore(settings.store.url)
        try:
            await apply_migrations(store.engine)
        finally:
            await store.close()

    run_async(go)
    click.echo("ok: schema is current")
