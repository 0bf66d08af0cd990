"""Webhook mode: Telegram POSTs updates to our own aiohttp app, authenticated by the secret
token header (403 otherwise)."""

from __future__ import annotations

from aiohttp import web

from adapters.telegram.adapter import WEBHOOK_PATH, TelegramAdapter


def mount(app: web.Application, adapter: TelegramAdapter) -> None:
    """Add `POST /telegram/webhook` to the service's app (before it starts)."""
    app.router.add_post(WEBHOOK_PATH, adapter.handle_webhook)
