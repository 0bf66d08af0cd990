"""The agent-side import name: re-exports only (the bridges fill this in)."""
