"""Telegram: approve tool calls and answer questions from a chat (python-telegram-bot)."""

from __future__ import annotations

from adapters.chat.digests import DigestTuning
from adapters.chat.pacing import Limits
from adapters.telegram.adapter import WEBHOOK_PATH, TelegramAdapter, Tuning
from adapters.telegram.platform import CHANNEL
from adapters.telegram.webhook import mount

__all__ = [
    "CHANNEL",
    "WEBHOOK_PATH",
    "DigestTuning",
    "Limits",
    "TelegramAdapter",
    "Tuning",
    "mount",
]
