"""The shared chat layer (adapters/chat/), tested once for every platform.

Each test runs on Telegram and on Slack (tests/chat_drivers.py): the real library of each
against its strict fake API server, driven through the same verbs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from store.sql import SqlStore
from tests.chat_drivers import PLATFORMS, WS, ChatDriver, Handle, Shown, open_driver

pytestmark = pytest.mark.usefixtures("ptb_timedelta")


@pytest.fixture(params=PLATFORMS)
async def chat(request: pytest.FixtureRequest, sqlite_store: SqlStore) -> AsyncIterator[ChatDriver]:
    async with open_driver(request.param, sqlite_store) as driver:
        yield driver


async def ended(chat: ChatDriver, message: Handle) -> Shown:
    """The message once it shows no buttons any more."""

    def done() -> Shown | None:
        shown = chat.shown(message)
        return None if shown.has_buttons else shown

    shown: Shown = await chat.eventually(done)
    return shown


# a stranger ----------------------------------------------------------------------------------
async def test_a_strangers_press_is_refused_privately(chat: ChatDriver) -> None:
    await chat.park("k1")
    await chat.ask("q1", prompt="Where to?", options=["staging", "production"])
    await chat.flush()
    msg, question = chat.decision("make deploy k1"), chat.decision("Where to?")
    before = chat.shown(msg), chat.shown(question)
    assert before[0].has_buttons and before[1].has_buttons
    for button in ("approve", "deny", "deny_reason"):
        assert await chat.press(msg, button, user="stranger") == "You are not an approver here"
    for button in ("option:production", "decline"):
        assert await chat.press(question, button, user="stranger") == (
            "You are not an approver here"
        )
    await chat.flush()
    task, asked = await chat.task("k1"), await chat.task("q1")
    assert (task.state, task.resolved_by) == ("needs_approval", None)
    assert (asked.parked, asked.resolved_by) == (True, None)
    assert (chat.shown(msg), chat.shown(question)) == before  # nothing changed in the chat
    assert await chat.press(msg, "approve") == "✅ Approved"  # the buttons still work


# a stale press -------------------------------------------------------------------------------
async def _approve(chat: ChatDriver) -> None:
    await chat.service.approve(chat.member("alice"), WS, chat.run_id, "k1", via="api")


async def _deny(chat: ChatDriver) -> None:
    await chat.service.deny(chat.member("carol"), WS, chat.run_id, "k1", reason="no", via="api")


async def _stop(chat: ChatDriver) -> None:
    await chat.service.stop(chat.agent, WS, chat.run_id)


@pytest.mark.parametrize(
    ("end", "notice", "headline", "state"),
    [
        (_approve, "Already approved by alice 3 min ago", "Approved by alice", "granted"),
        (_deny, "Already denied by carol 3 min ago", "Denied by carol", "failed"),
        (_stop, "Already cancelled by agent 3 min ago", "Cancelled by agent", "cancelled"),
    ],
    ids=["approved", "denied", "stopped"],
)
async def test_a_stale_press_names_who_decided_and_shows_the_ending(
    chat: ChatDriver, end: Any, notice: str, headline: str, state: str
) -> None:
    await chat.park("k1")
    await chat.flush()
    msg = chat.decision("make deploy k1")
    await end(chat)
    ending = await chat.task("k1")
    assert ending.state == state
    await chat.clock.advance(timedelta(minutes=3))
    # the relay has not run: the ending is not shown yet and the buttons are still there
    assert chat.shown(msg).has_buttons
    assert await chat.press(msg, "deny", user="carol") == notice
    shown = await ended(chat, msg)  # brought up to date by the press itself
    assert headline in shown.text and "make deploy k1" in shown.text
    if state != "cancelled":  # a person's decision says through what
        assert "via api" in shown.text
    task = await chat.task("k1")
    assert (task.state, task.resolved_by, task.via) == (state, ending.resolved_by, ending.via)
    await chat.flush()  # the ending's own item finds it shown already
    assert chat.shown(msg) == shown


# endings from elsewhere ----------------------------------------------------------------------
async def test_endings_from_the_api_edit_the_messages(chat: ChatDriver) -> None:
    await chat.park("k1")
    await chat.park("k2")
    await chat.ask("q1", prompt="Proceed?", options=["yes", "no"])
    await chat.ask("q2", prompt="Which branch?")
    await chat.flush()
    approved, denied = chat.decision("make deploy k1"), chat.decision("make deploy k2")
    question, answered = chat.decision("Proceed?"), chat.decision("Which branch?")
    everything = (approved, denied, question, answered)
    alice, carol = chat.member("alice"), chat.member("carol")
    await chat.service.approve(alice, WS, chat.run_id, "k1", via="api")
    await chat.service.deny(carol, WS, chat.run_id, "k2", reason="not on a Friday", via="api")
    await chat.service.resolve(carol, WS, chat.run_id, "q2", content="main, v1.2", via="api")
    await chat.service.stop(chat.agent, WS, chat.run_id)
    assert all(chat.shown(m).has_buttons for m in everything)  # not shown yet
    await chat.flush()

    first = chat.shown(approved)
    assert not first.has_buttons
    assert "Approved by alice" in first.text and "via api" in first.text
    assert "make deploy k1" in first.text  # what was approved stays readable
    second = chat.shown(denied)
    assert not second.has_buttons
    assert "Denied by carol" in second.text and "not on a Friday" in second.text
    third = chat.shown(question)
    assert not third.has_buttons and "Cancelled by agent" in third.text
    assert "Proceed?" in third.text
    fourth = chat.shown(answered)
    assert not fourth.has_buttons
    assert "Answered by carol" in fourth.text and "main, v1.2" in fourth.text
    await chat.flush()
    assert [chat.shown(m) for m in everything] == [first, second, third, fourth]


async def test_an_expiry_ends_the_message_and_a_late_press_says_so(chat: ChatDriver) -> None:
    await chat.park("k1")
    await chat.flush()
    msg = chat.decision("make deploy k1")
    await chat.clock.advance(timedelta(hours=24))
    await chat.core.scheduler.run_once()
    assert (await chat.task("k1")).state == "timed_out"
    await chat.clock.advance(timedelta(minutes=3))
    assert chat.shown(msg).has_buttons  # the relay has not run yet
    assert await chat.press(msg, "approve") == "Already expired by the clock 3 min ago"
    shown = await ended(chat, msg)
    assert "Expired by the clock" in shown.text and "make deploy k1" in shown.text
    await chat.flush()
    assert chat.shown(msg) == shown and (await chat.task("k1")).state == "timed_out"


# nudges --------------------------------------------------------------------------------------
async def test_a_nudge_is_sent_once_across_a_restart(chat: ChatDriver) -> None:
    task = await chat.park("k1")
    await chat.flush()
    msg = chat.decision("make deploy k1")
    assert chat.nudges() == []
    await chat.clock.advance(timedelta(hours=23))  # 1 h before the deadline
    await chat.core.scheduler.run_once()
    await chat.flush()
    (nudge,) = chat.nudges()
    assert "bash" in nudge.text and "expires in 1 h" in nudge.text
    assert nudge.mentions == {"alice", "carol"}
    await chat.redeliver_nudge(task)  # handed over again before it was marked done
    assert len(chat.nudges()) == 1

    await chat.restart()  # a second life over the same store and the same chat
    await chat.core.scheduler.run_once()
    await chat.flush()
    await chat.redeliver_nudge(task)
    assert chat.nudges() == [nudge]

    await chat.clock.advance(timedelta(minutes=50))  # the next nudge still comes, once
    await chat.core.scheduler.run_once()
    await chat.flush()
    assert [n.text for n in chat.nudges()][:1] == [nudge.text]
    (later,) = chat.nudges()[1:]
    assert "expires in 10 min" in later.text and later.mentions == {"alice", "carol"}
    assert await chat.press(msg, "approve") == "✅ Approved"  # the new life takes presses
    await chat.clock.advance(timedelta(minutes=5))
    await chat.core.scheduler.run_once()
    await chat.flush()
    assert len(chat.nudges()) == 2  # ended: no more nudges
    assert "Approved by alice" in (await ended(chat, msg)).text


# deny with reason ----------------------------------------------------------------------------
async def test_deny_with_reason(chat: ChatDriver) -> None:
    await chat.park("k1")
    await chat.flush()
    msg = chat.decision("make deploy k1")
    reason = "not on a Friday <b>&amp;</b> not at 5 > 4"
    await chat.give_text(msg, "deny_reason", reason)
    task = await chat.settled("k1")
    assert task.state == "failed"
    assert task.error == {"code": "approval_denied", "detail": reason}
    assert (task.resolved_by, task.via) == ("alice", chat.platform)
    await chat.flush()
    shown = await ended(chat, msg)
    assert "Denied by alice" in shown.text and reason in shown.text  # as typed, not as markup


async def test_text_asked_for_before_a_restart_is_taken_after_it(chat: ChatDriver) -> None:
    await chat.ask("q1", prompt="Which branch?")
    await chat.flush()
    question = chat.decision("Which branch?")
    prompt = await chat.ask_for_text(question, "answer_text")
    await chat.restart()
    assert await chat.write_text(prompt, "main") is None
    task = await chat.settled("q1")
    assert (task.resolution, task.resolved_by, task.via) == (
        {"content": "main"},
        "alice",
        chat.platform,
    )


async def test_text_written_after_someone_else_decided_changes_nothing(
    chat: ChatDriver,
) -> None:
    await chat.park("k1")
    await chat.flush()
    msg = chat.decision("make deploy k1")
    alices = await chat.ask_for_text(msg, "deny_reason", user="alice")
    carols = await chat.ask_for_text(msg, "deny_reason", user="carol")
    assert (await chat.task("k1")).parked  # asking for text decides nothing
    assert await chat.write_text(alices, "not on a Friday") is None
    assert (await chat.settled("k1")).error == {
        "code": "approval_denied",
        "detail": "not on a Friday",
    }
    await chat.clock.advance(timedelta(minutes=1))
    told = await chat.write_text(carols, "tomorrow, then", user="carol", notice=True)
    assert told == "Already denied by alice 1 min ago"
    task = await chat.task("k1")
    assert (task.resolved_by, task.error) == (
        "alice",
        {"code": "approval_denied", "detail": "not on a Friday"},
    )


async def test_a_strangers_text_is_refused_and_the_prompt_still_works(chat: ChatDriver) -> None:
    await chat.park("k1")
    await chat.flush()
    msg = chat.decision("make deploy k1")
    prompt = await chat.ask_for_text(msg, "deny_reason")
    # (on Slack a forged submission of alice's modal: the same check decides)
    told = await chat.write_text(prompt, "because I say so", user="stranger", notice=True)
    assert told == "You are not an approver here"
    assert (await chat.task("k1")).parked
    await chat.write_text(prompt, "alice's reason")
    task = await chat.settled("k1")
    assert (task.resolved_by, task.error) == (
        "alice",
        {"code": "approval_denied", "detail": "alice's reason"},
    )


# each question kind --------------------------------------------------------------------------
@pytest.mark.parametrize("label", ["production", "qa <b>&amp;</b> prod"])
async def test_an_option_button_answers_with_its_label(chat: ChatDriver, label: str) -> None:
    await chat.ask("q1", prompt="Where to?", options=["staging", label])
    await chat.flush()
    question = chat.decision("Where to?")
    assert await chat.press(question, f"option:{label}") == f"💬 Answered: {label}"
    task = await chat.settled("q1")
    assert (task.state, task.resolution) == ("resolved", {"content": label})
    assert (task.resolved_by, task.via) == ("alice", chat.platform)
    await chat.flush()
    shown = await ended(chat, question)
    assert "Answered by alice" in shown.text and label in shown.text


async def test_multi_select_needs_a_choice_then_answers_with_the_list(chat: ChatDriver) -> None:
    await chat.ask("q1", prompt="Which checks?", options=["lint", "types", "tests"], multi=True)
    await chat.flush()
    question = chat.decision("Which checks?")
    assert await chat.press(question, "submit") == "Choose at least one option first"
    assert (await chat.task("q1")).parked
    await chat.tick(question, ["lint", "tests"], user="carol")
    assert (await chat.task("q1")).parked  # ticking answers nothing
    assert await chat.press(question, "submit", user="carol") == "💬 Answered: lint, tests"
    task = await chat.settled("q1")
    assert (task.state, task.resolution) == ("resolved", {"content": ["lint", "tests"]})
    assert (task.resolved_by, task.via) == ("carol", chat.platform)
    await chat.flush()
    shown = await ended(chat, question)
    assert "Answered by carol" in shown.text and "lint" in shown.text


async def test_ticks_survive_a_restart(chat: ChatDriver) -> None:
    await chat.ask("q1", prompt="Which checks?", options=["lint", "types", "tests"], multi=True)
    await chat.flush()
    question = chat.decision("Which checks?")
    await chat.tick(question, ["types"])
    await chat.restart()
    assert await chat.press(question, "submit") == "💬 Answered: types"
    assert (await chat.settled("q1")).resolution == {"content": ["types"]}


async def test_free_text_answer(chat: ChatDriver) -> None:
    await chat.ask("q1", prompt="Which branch should I deploy?")
    await chat.flush()
    question = chat.decision("Which branch should I deploy?")
    await chat.give_text(question, "answer_text", "main, v1.2")
    task = await chat.settled("q1")
    assert (task.state, task.resolution) == ("resolved", {"content": "main, v1.2"})
    assert (task.resolved_by, task.via) == ("alice", chat.platform)
    await chat.flush()
    shown = await ended(chat, question)
    assert "Answered by alice" in shown.text and "main, v1.2" in shown.text


async def test_decline(chat: ChatDriver) -> None:
    await chat.ask("q1", prompt="Anything to add?")
    await chat.flush()
    question = chat.decision("Anything to add?")
    assert await chat.press(question, "decline") == "🚫 Declined"
    task = await chat.settled("q1")
    assert task.state == "failed" and task.error is not None
    assert task.error["code"] == "declined"
    assert (task.resolved_by, task.via) == ("alice", chat.platform)
    await chat.flush()
    assert "Declined by alice" in (await ended(chat, question)).text


# who and through what ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("button", "notice", "state", "action"),
    [("approve", "✅ Approved", "granted", "approved"), ("deny", "❌ Denied", "failed", "denied")],
)
async def test_the_platform_and_the_member_are_recorded(
    chat: ChatDriver, button: str, notice: str, state: str, action: str
) -> None:
    await chat.park("k1")
    await chat.flush()
    msg = chat.decision("make deploy k1")
    assert await chat.press(msg, button, user="carol") == notice
    task = await chat.settled("k1")
    assert (task.state, task.resolved_by, task.via) == (state, "carol", chat.platform)
    log = await chat.store.log_entries(WS, task_key="k1")
    assert [(r.entry.action, r.entry.actor, r.entry.via) for r in log][-1] == (
        action,
        "carol",
        chat.platform,
    )
    await chat.flush()
    shown = await ended(chat, msg)
    assert f"{action.capitalize()} by carol" in shown.text and f"via {chat.platform}" in shown.text


async def test_a_multi_select_question_with_many_options(chat: ChatDriver) -> None:
    """More options than one Slack checkboxes element holds (10): several, one Submit."""
    options = [f"check {i}" for i in range(12)]
    await chat.ask("q1", prompt="Which checks?", options=options, multi=True)
    await chat.flush()
    question = chat.decision("Which checks?")
    await chat.tick(question, ["check 1", "check 11"])
    assert await chat.press(question, "submit") == "💬 Answered: check 1, check 11"
    assert (await chat.settled("q1")).resolution == {"content": ["check 1", "check 11"]}
