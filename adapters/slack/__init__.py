"""Slack: approve tool calls and answer questions in a run's thread (slack-bolt)."""
