"""Slack end to end: the real slack-bolt app on our aiohttp server, the fake Slack Web API."""

from __future__ import annotations

from store.sql import SqlStore
from tests.slack_harness import CHANNEL, STRANGER, slack_world


async def test_a_decision_in_the_runs_thread_approved_by_a_member(sqlite_store: SqlStore) -> None:
    async with slack_world(sqlite_store) as sl:
        await sl.park("k1")
        await sl.flush()
        [parent] = [m for m in sl.fake.messages_in(CHANNEL) if m.from_bot and not m.thread_ts]
        assert parent.text.startswith("nightly") and "1 waiting" in parent.text
        [decision] = sl.fake.messages_in(CHANNEL, parent.ts)[1:]
        assert decision.reply_broadcast and decision.metadata is not None
        labels = [(e.get("text") or {}).get("text") for e in decision.elements]
        assert labels == [
            "Approve", "Deny", "Deny with reason", "Edit & approve", "Approve & allow like this"
        ]  # fmt: skip
        answer = await sl.press(decision, "Approve")
        assert answer is not None and answer.text == "✅ Approved"
        task = await sl.settled("k1")
        assert (task.state, task.resolved_by, task.via) == ("granted", "alice", "slack")
        await sl.flush()
        shown = sl.fake.message(CHANNEL, decision.ts)
        assert shown.elements == [] and "Approved by alice" in shown.text


async def test_a_stranger_changes_nothing(sqlite_store: SqlStore) -> None:
    async with slack_world(sqlite_store) as sl:
        await sl.park("k1")
        await sl.flush()
        decision = sl.message("make deploy k1")
        answer = await sl.press(decision, "Approve", user=STRANGER)
        assert answer is not None and answer.text == "You are not an approver here"
        assert (await sl.task("k1")).parked
