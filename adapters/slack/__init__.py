"""Slack: approve tool calls and answer questions in a run's thread (slack-bolt)."""

from __future__ import annotations

from adapters.slack.adapter import EVENTS_PATH, SlackAdapter, SlackTuning, mount
from adapters.slack.platform import CHANNEL

__all__ = ["CHANNEL", "EVENTS_PATH", "SlackAdapter", "SlackTuning", "mount"]
