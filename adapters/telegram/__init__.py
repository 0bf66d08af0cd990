"""Telegram: approve tool calls and answer questions from a chat (python-telegram-bot)."""

from __future__ import annotations

from adapters.telegram.adapter import WEBHOOK_PATH, TelegramAdapter, Tuning
from adapters.telegram.notifier import CHANNEL, TelegramNotifier
from adapters.telegram.pacing import Limits
from adapters.telegram.webhook import mount

__all__ = [
    "CHANNEL",
    "WEBHOOK_PATH",
    "Limits",
    "TelegramAdapter",
    "TelegramNotifier",
    "Tuning",
    "mount",
]
