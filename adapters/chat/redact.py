"""Keeping a chat platform's secrets out of log lines (HTTP clients log request URLs, and the
Telegram Bot API puts the token in the URL)."""

from __future__ import annotations

import logging
from collections.abc import Iterable


class Redact(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # (A secret of a few characters protects nothing, and replacing it everywhere would
        # garble every log line.)
        self.secrets = [s for s in secrets if len(s) >= 6]

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        if any(s in message for s in self.secrets):
            for secret in self.secrets:
                message = message.replace(secret, "<redacted>")
            record.msg, record.args = message, None
        return True


def redact_everywhere(secrets: Iterable[str]) -> None:
    """On every handler of the root logger: records from any library pass through them."""
    redact = Redact(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)
