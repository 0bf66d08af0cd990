""" "Approve & allow like this" and "Edit & approve" in the chats, on Telegram and on Slack
(tests/chat_drivers.py: the real libraries against the strict fakes), over the core's learned
rules and edited approvals (bot/lifecycle/learn.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from adapters.chat.offers import EDIT_GLOB
from adapters.chat.presses import GLOB_TOO_LONG, GLOB_TYPED_MAX, NOT_APPROVER
from adapters.telegram.handlers import OFFER_NOT_SHOWN
from bot.service import CallSpec, RunSpec
from store.sql import SqlStore
from tests import telegram_harness as th
from tests.chat_drivers import (
    PLATFORMS,
    WS,
    ChatDriver,
    Handle,
    Shown,
    TelegramDriver,
    open_driver,
)

pytestmark = pytest.mark.usefixtures("ptb_timedelta")


@pytest.fixture(params=PLATFORMS)
async def chat(request: pytest.FixtureRequest, store: SqlStore) -> AsyncIterator[ChatDriver]:
    async with open_driver(request.param, store) as driver:
        yield driver


async def _ended(chat: ChatDriver, message: Handle) -> Shown:
    def done() -> Shown | None:
        shown = chat.shown(message)
        return None if shown.has_buttons else shown

    shown: Shown = await chat.eventually(done)
    return shown


def _push(key: str, branch: str) -> dict[str, Any]:
    return {"tool_input": {"command": f"git push origin {branch}"}}


# A shell path (issue 20): a `command` of `bash` is judged, and proposed for, command by command
# (`git push origin main` proposes `git push *`; off a shell path, its exact text).
SHELL = [{"tool": "bash", "path": "command"}]


async def _shell_run(chat: ChatDriver) -> str:
    spec = RunSpec(approval_mode="ask", shell_commands=SHELL, title="pushes")
    return str((await chat.service.declare_run(chat.agent, WS, spec)).id)


# approve & allow like this -------------------------------------------------------------------
async def test_allow_like_this_shows_the_rule_and_past_calls_then_learns_it(
    chat: ChatDriver,
) -> None:
    run_id = await _shell_run(chat)
    await chat.park("k0", run_id=run_id, **_push("k0", "dev"))
    await chat.service.approve(chat.member("carol"), WS, run_id, "k0", via="api")
    await chat.park("k1", run_id=run_id, **_push("k1", "main"))
    await chat.flush()
    decision = chat.decision_in("usual", "git push origin main")

    offered = await chat.offer(decision)
    assert "bash · command matches git push *" in offered.text
    assert "\nIt would have allowed 1 past call" in offered.text  # a line of its own
    assert "\n• " in offered.text  # each past call too
    assert "git push origin dev" in offered.text  # the past call, by name
    assert [label.removeprefix("✅ ") for label in offered.scopes] == ["This run"]  # no profile
    assert (await chat.service.get_task(chat.agent, WS, run_id, "k1")).parked  # nothing saved
    async with chat.store.read() as tx:
        assert await tx.learned_rules(WS) == []

    notice = await chat.choose(offered, "run")
    assert notice == "✅ Approved · calls like it are allowed from now on (this run)"
    task = await chat.service.get_task(chat.agent, WS, run_id, "k1")
    assert (task.state, task.resolved_by, task.via) == ("granted", "alice", chat.platform)
    async with chat.store.read() as tx:
        [learned] = await tx.learned_rules(WS)
    assert learned.rule["match"] == "git push *" and learned.scope == "run"
    assert (learned.added_by, learned.from_run_id, learned.from_key) == ("alice", run_id, "k1")
    receipt = await chat.service.append(
        chat.agent, WS, run_id, CallSpec("bash", {"command": "git push origin x"}, key="k2")
    )
    assert receipt.task.state == "granted"  # the run allows it now, without a person
    await chat.flush()
    assert "Approved by alice" in (await _ended(chat, decision)).text


async def test_allow_like_this_on_a_decided_call_says_so_and_learns_nothing(
    chat: ChatDriver,
) -> None:
    await chat.park("k1", **_push("k1", "main"))
    await chat.flush()
    decision = chat.decision_in("usual", "git push origin main")
    offered = await chat.offer(decision)
    await chat.service.deny(chat.member("carol"), WS, chat.run_id, "k1", reason="no", via="api")
    notice = await chat.choose(offered, "run")
    assert notice is not None and notice.startswith("Already denied by carol"), notice
    async with chat.store.read() as tx:
        assert await tx.learned_rules(WS) == []


async def test_allow_like_this_in_a_runs_profile(chat: ChatDriver) -> None:
    run = await chat.service.declare_run(chat.agent, WS, RunSpec(profile="mcp", title="tools"))
    await chat.park("k1", run_id=run.id, **_push("k1", "main"))
    await chat.flush()
    offered = await chat.offer(chat.decision_in("usual", "git push origin main"))
    assert [label.removeprefix("✅ ") for label in offered.scopes] == ["This run", "Profile mcp"]
    notice = await chat.choose(offered, "profile")
    assert notice == "✅ Approved · calls like it are allowed from now on (its profile)"
    async with chat.store.read() as tx:
        [learned] = await tx.learned_rules(WS)
    assert (learned.scope, learned.profile, learned.run_id) == ("profile", "mcp", None)
    assert learned.rule["match"] == "git push origin main"  # no shell path: the exact text
    later = await chat.service.declare_run(chat.agent, WS, RunSpec(profile="mcp"))
    receipt = await chat.service.append(
        chat.agent, WS, later.id, CallSpec("bash", {"command": "git push origin main"}, key="k9")
    )
    assert receipt.task.state == "granted"  # runs declared from the profile afterwards
    longer = CallSpec("bash", {"command": "git push origin main && rm -rf ~"}, key="k10")
    receipt = await chat.service.append(chat.agent, WS, later.id, longer)
    assert receipt.task.state == "needs_approval"  # nothing rides on the exact text


async def test_a_prefix_judged_per_command_is_never_learned_for_a_profile_that_is_not(
    chat: ChatDriver,
) -> None:
    """A run that adds a shell path its profile lacks learns `git push *` for itself only: in
    the profile's later runs the glob would read whole lines."""
    spec = RunSpec(profile="mcp", title="tools", shell_commands=SHELL)
    run = await chat.service.declare_run(chat.agent, WS, spec)
    await chat.park("k1", run_id=run.id, **_push("k1", "main"))
    await chat.flush()
    offered = await chat.offer(chat.decision_in("usual", "git push origin main"))
    refused = await chat.choose(offered, "profile")
    assert refused is not None and "learn with scope run" in refused, refused
    async with chat.store.read() as tx:
        assert await tx.learned_rules(WS) == []
    notice = await chat.choose(offered, "run")
    assert notice == "✅ Approved · calls like it are allowed from now on (this run)"


async def test_allow_like_this_learns_the_glob_as_the_person_changed_it(
    chat: ChatDriver,
) -> None:
    """Slack's modal, Telegram's "✏️ Edit glob" (a reply): a glob that does not match the
    call is refused with the core's words, nothing decided; an accepted one is learned."""
    await chat.park("k1", **_push("k1", "main"))
    await chat.flush()
    offered = await chat.offer(chat.decision_in("usual", "git push origin main"))
    refused = await chat.choose(offered, "run", match="git pull *")
    assert refused is not None and "does not match" in refused, refused
    assert (await chat.task("k1")).parked  # a refusal keeps the offer and the call open
    async with chat.store.read() as tx:
        assert await tx.learned_rules(WS) == []
    notice = await chat.choose(offered, "run", match="git push origin *")
    assert notice == "✅ Approved · calls like it are allowed from now on (this run)", notice
    async with chat.store.read() as tx:
        [learned] = await tx.learned_rules(WS)
    assert learned.rule["match"] == "git push origin *"


async def test_telegrams_edited_glob_is_masked_in_chat_and_its_prompt_counts_once(
    store: SqlStore,
) -> None:
    """A glob written with a secret in it is learned as written, but every message the bot
    shows masks it (the refusal quoting it too); the prompt is gone once answered, so a
    second reply changes nothing; a stranger cannot ask to edit."""
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    async with open_driver("telegram", store) as chat:
        assert isinstance(chat, TelegramDriver)
        await chat.park("k1", tool_input={"command": f"deploy --token {token} prod"})
        await chat.flush()
        offered = await chat.offer(chat.decision_in("usual", "deploy"))
        offer = chat.fake.messages[offered.handle.key]
        stranger = await chat.world.press(offer, EDIT_GLOB, user=th.STRANGER)
        assert stranger.text == NOT_APPROVER
        # Longer than the offer shows in full: refused before the prompt is used up.
        too_long, _ = await chat.edit_glob(offered, "deploy " + "y" * GLOB_TYPED_MAX)
        assert too_long == GLOB_TOO_LONG
        # Spaces the offer would fold, or characters that count double there (emoji): the
        # offer would not show the glob as it is learned.
        for unseen in ("deploy  --token *", "deploy " + "😀" * 250 + "*"):
            said, _ = await chat.edit_glob(offered, unseen)
            assert said == GLOB_TOO_LONG, unseen
        refused, _ = await chat.edit_glob(offered, f"undeploy {token} *")
        assert refused is not None and "does not match" in refused and token not in refused
        accepted, prompt = await chat.edit_glob(offered, f"deploy --token {token[:12]}*")
        assert accepted is None
        shown = chat.fake.messages[offered.handle.key].text
        assert "bash · command matches deploy --token" in shown and token[:12] not in shown
        adapter = chat.world.adapter
        assert await adapter.chats.prompt("telegram", str(th.GROUP), str(prompt.message_id)) is None
        notice = await chat.choose(offered, "run")
        assert notice == "✅ Approved · calls like it are allowed from now on (this run)", notice
        async with chat.store.read() as tx:
            [learned] = await tx.learned_rules(WS)
        assert learned.rule["match"] == f"deploy --token {token[:12]}*"  # as written
        said = [m.raw_text + m.text for m in chat.fake.sent if m.from_bot]
        said += [e.text or "" for e in chat.fake.edits]
        assert said and not [t for t in said if token[:12] in t]


async def test_an_edited_offer_that_cannot_be_shown_says_so(store: SqlStore) -> None:
    """Telegram refuses the offer's edit (a 500): the person is told to try again, and the
    scope buttons still learn only what was shown (the proposed glob)."""
    async with open_driver("telegram", store) as chat:
        assert isinstance(chat, TelegramDriver)
        await chat.park("k1", tool_input={"command": "git push origin main"})
        await chat.flush()
        offered = await chat.offer(chat.decision_in("usual", "git push"))
        chat.fake.fail_next(1, kind="500", methods={"editMessageText"})
        said, _ = await chat.edit_glob(offered, "git push origin *")
        assert said == OFFER_NOT_SHOWN, said
        assert (await chat.task("k1")).parked


async def test_a_long_globs_offer_fits_and_a_secret_in_it_is_never_shown(
    chat: ChatDriver,
) -> None:
    """The glob is as long as the command (off a shell path, its exact text): the offer still
    fits the platform's limits (Telegram's 4096 characters), and one holding a secret is shown
    masked, never offered for editing in clear (Slack's modal), yet learned as proposed."""
    word = "x" * 5000
    await chat.park("k1", tool_input={"command": f"deploy {word} now"})
    await chat.flush()
    offered = await chat.offer(chat.decision_in("usual", "deploy"))
    assert "bash · command matches deploy xxx" in offered.text and "…" in offered.text
    assert offered.scopes

    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    await chat.park("k2", tool_input={"command": f"export GITHUB_TOKEN={token} && make"})
    await chat.flush()
    offered = await chat.offer(chat.decision_in("usual", "export"))
    assert "export GITHUB_TOKEN=" in offered.text and token not in offered.text
    assert token not in json.dumps(getattr(offered.handle, "view", None))  # Slack's modal
    notice = await chat.choose(offered, "run")
    assert notice is not None and notice.startswith("✅ Approved"), notice
    async with chat.store.read() as tx:
        [learned] = await tx.learned_rules(WS)
    assert learned.rule["match"] == f"export GITHUB_TOKEN={token} && make"  # as proposed


async def test_a_stranger_can_neither_edit_nor_allow(chat: ChatDriver) -> None:
    await chat.park("k1", **_push("k1", "main"))
    await chat.flush()
    decision = chat.decision_in("usual", "git push origin main")
    for button in ("allow", "edit"):
        assert await chat.press(decision, button, user="stranger") == NOT_APPROVER
    offered = await chat.offer(decision)
    assert await chat.choose(offered, "run", user="stranger") == NOT_APPROVER
    assert (await chat.task("k1")).parked
    async with chat.store.read() as tx:
        assert await tx.learned_rules(WS) == []


# edit before approve -------------------------------------------------------------------------
async def test_an_edited_command_is_approved_and_every_message_shows_the_diff(
    chat: ChatDriver,
) -> None:
    await chat.park("k1")
    await chat.flush()
    decision = chat.decision_in("usual", "make deploy k1")
    assert await chat.edit(decision, "k1", "make deploy k1 --dry-run") is None
    task = await chat.settled("k1")
    assert (task.state, task.resolved_by, task.via) == ("granted", "alice", chat.platform)
    assert task.tool_input == {"command": "make deploy k1"}  # as proposed, kept
    assert task.approved_input == {"command": "make deploy k1 --dry-run"}
    await chat.flush()
    shown = await _ended(chat, decision)
    assert "Approved by alice" in shown.text and "Edited" in shown.text
    assert "-make deploy k1\n+make deploy k1 --dry-run" in shown.text


async def test_an_edit_the_rules_deny_is_refused_and_the_call_stays_parked(
    chat: ChatDriver,
) -> None:
    rules = [
        {"tool": "bash", "path": "command", "match": "*rm -rf*", "verdict": "deny",
         "reason": "no recursive deletes"},
    ]  # fmt: skip
    run = await chat.service.declare_run(
        chat.agent, WS, RunSpec(approval_mode="ask", approval_rules=rules, title="careful")
    )
    await chat.park("k1", run_id=run.id)
    await chat.flush()
    decision = chat.decision_in("usual", "make deploy k1")
    said = await chat.edit(decision, "k1", "rm -rf /")
    assert said is not None and "no recursive deletes" in said, said
    task = await chat.service.get_task(chat.agent, WS, run.id, "k1")
    assert task.parked and task.approved_input is None
    assert chat.shown(decision).has_buttons  # still decidable


# several approvers ---------------------------------------------------------------------------
async def _quorum_run(chat: ChatDriver, **fields: Any) -> str:
    spec = RunSpec(
        approval_requirements=[{"tool": "bash", "approvals": 2}], title="two keys", **fields
    )
    return str((await chat.service.declare_run(chat.agent, WS, spec)).id)


async def _shows(chat: ChatDriver, message: Handle, text: str) -> Shown:
    shown: Shown = await chat.eventually(
        lambda: chat.shown(message) if text in chat.shown(message).text else None
    )
    return shown


async def test_a_quorum_counts_approvals_and_stays_open_until_it_is_met(chat: ChatDriver) -> None:
    run_id = await _quorum_run(chat)
    await chat.park("k1", run_id=run_id)
    await chat.flush()
    decision = chat.decision_in("usual", "make deploy k1")
    assert "0 of 2 approvals" in chat.shown(decision).text
    counted = await chat.press(decision, "approve")
    assert counted == "👍 Your approval counts: 1 of 2 approvals · alice ✓"
    await chat.flush()  # every message shows the count, buttons kept
    assert (await _shows(chat, decision, "1 of 2 approvals · alice ✓")).has_buttons
    again = await chat.press(decision, "approve")
    assert again is not None and "alice already reviewed this decision" in again, again
    assert await chat.press(decision, "approve", user="carol") == "✅ Approved"
    task = await chat.service.get_task(chat.agent, WS, run_id, "k1")
    assert (task.state, task.resolved_by) == ("granted", "carol")
    await chat.flush()
    shown = await _ended(chat, decision)
    assert "Approved by carol" in shown.text and "2 of 2 approvals · alice ✓ carol ✓" in shown.text


async def test_under_a_quorum_the_next_approver_sees_the_edit_they_approve(
    chat: ChatDriver,
) -> None:
    run_id = await _quorum_run(chat)
    await chat.park("k1", run_id=run_id)
    await chat.flush()
    decision = chat.decision_in("usual", "make deploy k1")
    said = await chat.edit(decision, "k1", "make deploy k1 --dry-run")
    counted = "👍 Your approval counts: 1 of 2 approvals · alice ✓"
    assert said == (counted if chat.platform == "telegram" else None)  # Slack: modal closed
    task = await chat.service.get_task(chat.agent, WS, run_id, "k1")
    assert task.parked and task.reviewed_input == {"command": "make deploy k1 --dry-run"}
    await chat.flush()
    shown = await _shows(chat, decision, "1 of 2 approvals · alice ✓")
    assert shown.has_buttons and "edited by alice: Approve approves it as edited" in shown.text
    assert "-make deploy k1\n+make deploy k1 --dry-run" in shown.text
    assert await chat.press(decision, "approve", user="carol") == "✅ Approved"
    task = await chat.service.get_task(chat.agent, WS, run_id, "k1")
    assert (task.state, task.approved_input) == ("granted", {"command": "make deploy k1 --dry-run"})
    await chat.flush()
    shown = await _ended(chat, decision)
    assert "approved as edited by carol" in shown.text and "+make deploy k1 --dry-run" in shown.text


async def test_allow_under_a_quorum_offers_the_rule_of_the_edit_it_would_approve(
    chat: ChatDriver,
) -> None:
    run_id = await _quorum_run(chat, shell_commands=SHELL)
    await chat.park("k1", run_id=run_id)
    await chat.flush()
    decision = chat.decision_in("usual", "make deploy k1")
    await chat.edit(decision, "k1", "npm publish --tag next")
    offered = await chat.offer(decision, user="carol")
    assert "bash · command matches npm publish *" in offered.text, offered.text
    notice = await chat.choose(offered, "run", user="carol")
    assert notice is not None and notice.startswith("✅ Approved"), notice
    task = await chat.service.get_task(chat.agent, WS, run_id, "k1")
    assert (task.state, task.approved_input) == ("granted", {"command": "npm publish --tag next"})
    async with chat.store.read() as tx:
        [learned] = await tx.learned_rules(WS)
    assert learned.rule["match"] == "npm publish *"  # what the offer showed


async def test_slacks_edit_under_a_quorum_starts_from_the_edit_being_counted(
    store: SqlStore,
) -> None:
    async with open_driver("slack", store) as chat:
        run_id = await _quorum_run(chat)
        await chat.park("k1", run_id=run_id)
        await chat.flush()
        decision = chat.decision_in("usual", "make deploy k1")
        assert await chat.edit(decision, "k1", "make deploy k1 --dry-run") is None
        prompt = await chat.ask_for_text(decision, "edit", "carol")
        [block] = prompt.view["blocks"]
        assert block["element"]["initial_value"] == "make deploy k1 --dry-run"


async def test_a_deny_ends_a_quorum_at_once(chat: ChatDriver) -> None:
    run_id = await _quorum_run(chat)
    await chat.park("k1", run_id=run_id)
    await chat.flush()
    decision = chat.decision_in("usual", "make deploy k1")
    await chat.press(decision, "approve")
    assert await chat.press(decision, "deny", user="carol") == "❌ Denied"
    await chat.flush()
    assert "Denied by carol" in (await _ended(chat, decision)).text


async def test_a_quorums_reminder_mentions_only_who_may_still_approve(chat: ChatDriver) -> None:
    run_id = await _quorum_run(chat)
    await chat.park("k1", run_id=run_id)
    await chat.flush()
    await chat.press(chat.decision_in("usual", "make deploy k1"), "approve")  # alice counted
    await chat.flush()
    await chat.clock.advance(timedelta(hours=23))  # 1 h before the deadline
    await chat.core.scheduler.run_once()
    await chat.flush()
    (nudge,) = chat.nudges()
    assert nudge.mentions == {"carol"}
