"""Who a chat identity stands for, and which people may be added (issue 21, items 1 and 16).

A press in Telegram or Slack decides only for a member who may decide now: mapped to exactly
one member of the decision's workspace who holds a member token that is not revoked. Checked
at every press, so a revocation made by another process (the admin CLI) holds from the next
press on, on both chats and both stores. `member add` refuses a chat identity mapped to another
member of the workspace and names that could be taken for another member's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from adapters.chat.presses import NOT_APPROVER
from bot import tokens
from bot.admin import Admin, Issued
from bot.cli import main
from bot.clock import FakeClock
from bot.domain import Member, Principal
from bot.errors import ApprovalError
from store.sql import SqlStore
from tests import slack_harness as sh
from tests import telegram_harness as th
from tests.chat_drivers import PLATFORMS, WS, ChatDriver, open_driver

pytestmark = pytest.mark.usefixtures("ptb_timedelta")


def _other_process(chat: ChatDriver) -> Admin:
    """An Admin of its own on the same store, as the admin CLI in another process is: the
    chat's instance is told nothing of what it does."""
    return Admin(chat.store, FakeClock())


async def _parked(chat: ChatDriver, *keys: str) -> None:
    for key in keys:
        task = await chat.task(key)
        assert (task.parked, task.resolved_by) == (True, None), (key, task.state)


# 1. a revoked person decides nothing from a chat -------------------------------------------------
@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_revoked_members_presses_are_refused_until_she_has_a_token_again(
    platform: str, store: SqlStore
) -> None:
    async with open_driver(platform, store) as chat:
        await chat.park("k1")
        await chat.ask("q1", prompt="Where to?", options=["staging", "production"])
        await chat.flush()
        msg, question = chat.decision("make deploy k1"), chat.decision("Where to?")
        before = chat.shown(msg), chat.shown(question)

        assert await _other_process(chat).revoke(WS, "member", "alice") == 1
        # Another workspace maps the same Telegram and Slack identity to a member with a live
        # token: that says nothing about whether she may decide in this one.
        other = _other_process(chat)
        await other.create_workspace("other")
        await other.add_member("other", "alice", telegram_user_id=th.ALICE, slack_user_id=sh.ALICE)

        for button in ("approve", "deny", "deny_reason", "edit", "allow"):
            assert await chat.press(msg, button) == NOT_APPROVER, button
        for button in ("option:production", "decline"):
            assert await chat.press(question, button) == NOT_APPROVER, button
        await chat.flush()
        await _parked(chat, "k1", "q1")
        assert (chat.shown(msg), chat.shown(question)) == before  # nothing changed in the chat
        async with chat.store.read() as tx:
            assert await tx.learned_rules(WS) == []

        # Carol still decides; alice, given a token again, decides as before.
        assert await chat.press(question, "option:production", user="carol") == (
            "💬 Answered: production"
        )
        await _other_process(chat).rotate(WS, "member", "alice")
        assert await chat.press(msg, "approve") == "✅ Approved"
        task = await chat.settled("k1")
        assert (task.state, task.resolved_by, task.via) == ("granted", "alice", platform)


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_revoked_member_cannot_finish_what_she_began_before(
    platform: str, store: SqlStore
) -> None:
    """A deny-with-reason prompt and an "allow like this" offer opened while she could decide,
    answered after her revocation: refused at the answer, not at the opening."""
    async with open_driver(platform, store) as chat:
        await chat.park("k1")
        await chat.park("k2")
        await chat.flush()
        prompt = await chat.ask_for_text(chat.decision("make deploy k1"), "deny_reason")
        offered = await chat.offer(chat.decision("make deploy k2"))

        await _other_process(chat).revoke(WS, "member", "alice")

        told = await chat.write_text(prompt, "not today", notice=True)
        assert told == NOT_APPROVER
        assert await chat.choose(offered, "run") == NOT_APPROVER
        await _parked(chat, "k1", "k2")
        async with chat.store.read() as tx:
            assert await tx.learned_rules(WS) == []


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_an_identity_mapped_to_two_members_decides_for_nobody(
    platform: str, store: SqlStore
) -> None:
    """Two members of one workspace on one chat identity (written before `member add` refused
    it): whose press is it? Nobody's, until only one of them holds a token."""
    async with open_driver(platform, store) as chat:
        twin = Member("mem_twin", WS, "alicia", th.ALICE, sh.ALICE)
        async with chat.store.write() as tx:
            await tx.insert_member(twin)
            await tx.insert_credential(
                credential_id="cred_twin",
                principal=Principal("member", twin.id, twin.name, WS),
                token_hash=tokens.token_hash(tokens.new_token("member")),
                at=chat.clock.now(),
            )
        await chat.park("k1")
        await chat.flush()
        msg = chat.decision("make deploy k1")
        assert await chat.press(msg, "approve") == NOT_APPROVER
        await _parked(chat, "k1")

        await _other_process(chat).revoke(WS, "member", "alicia")
        assert await chat.press(msg, "approve") == "✅ Approved"
        task = await chat.settled("k1")
        assert (task.resolved_by, task.via) == ("alice", platform)


# 16. who may be added --------------------------------------------------------------------------
async def _names(admin: Admin, workspace: str) -> list[str]:
    async with admin.store.read() as tx:
        return [m.name for m in await tx.list_members(workspace)]


async def _refused(call: Awaitable[Issued]) -> ApprovalError:
    with pytest.raises(ApprovalError) as caught:
        await call
    return caught.value


async def test_member_add_refuses_a_chat_identity_mapped_to_another_member(
    store: SqlStore,
) -> None:
    admin = Admin(store, FakeClock())
    await admin.create_workspace("acme")
    await admin.create_workspace("beta")
    await admin.add_member("acme", "alice", telegram_user_id=42, slack_user_id="U42")

    taken = await _refused(admin.add_member("acme", "bob", telegram_user_id=42))
    assert (taken.code, taken.status) == ("conflict", 409)
    assert taken.detail == "telegram user id 42 is mapped to member alice in acme already"
    taken = await _refused(admin.add_member("acme", "bob", slack_user_id="U42"))
    assert (taken.code, taken.status) == ("conflict", 409)
    assert taken.detail == "slack user id U42 is mapped to member alice in acme already"
    for bad in ({"telegram_user_id": 0}, {"telegram_user_id": -5}, {"slack_user_id": ""},
                {"slack_user_id": "U 42"}, {"slack_user_id": "U\u200b42"}):  # fmt: skip
        refused = await _refused(admin.add_member("acme", "bob", **bad))  # type: ignore[arg-type]
        assert (refused.code, refused.status) == ("invalid_request", 422), bad
    assert await _names(admin, "acme") == ["alice"]  # nothing written

    # Another workspace's member may be the same person; a new identity here is fine.
    await admin.add_member("beta", "alice", telegram_user_id=42, slack_user_id="U42")
    await admin.add_member("acme", "bob", telegram_user_id=43, slack_user_id="U43")
    assert await _names(admin, "acme") == ["alice", "bob"]


LOOK_ALIKES = [
    "Alice",
    "ALICE",
    "\uff41\uff4c\uff49\uff43\uff45",  # fullwidth
    "\u0430\u04cf\u0456\u0441\u0435",  # Cyrillic letters only, each like a Latin one
    "a1ice",
    "aIice",  # a capital I
]
HIDDEN_OR_MIXED = [
    "ali\u200bce",  # zero-width space
    "\u200balice",
    "alice\u2060",  # word joiner
    "ali\u00adce",  # soft hyphen
    "\u202eecila",  # right-to-left override
    "alice\ufe0f",  # variation selector
    "alice\u00a0",  # no-break space
    " alice",
    "\u0430lice",  # a Cyrillic a among Latin letters
    "\u0391lice",  # a Greek capital Alpha
]


async def test_member_add_refuses_names_that_look_like_another_or_hide_characters(
    store: SqlStore,
) -> None:
    admin = Admin(store, FakeClock())
    await admin.create_workspace("acme")
    await admin.add_member("acme", "alice")
    same = await _refused(admin.add_member("acme", "alice"))
    assert (same.code, same.detail) == ("conflict", "member alice exists")
    for name in LOOK_ALIKES:
        refused = await _refused(admin.add_member("acme", name))
        assert (refused.code, refused.status) == ("conflict", 409), name
        assert refused.detail.startswith(f"member name {name!r} looks like that of member")
    for name in HIDDEN_OR_MIXED:
        refused = await _refused(admin.add_member("acme", name))
        assert (refused.code, refused.status) == ("invalid_request", 422), name
        assert refused.detail.startswith("member name: "), refused.detail
    assert await _names(admin, "acme") == ["alice"]

    # Names people can tell apart are welcome, in any one script.
    for name in ("alicia", "Alice Smith", "Zo\u00eb", "\u0414\u043c\u0438\u0442\u0440\u0438\u0439"):
        await admin.add_member("acme", name)
    smith = await _refused(admin.add_member("acme", "alice  smith"))
    assert smith.code == "conflict"


async def test_look_alike_additions_at_once_leave_one(store: SqlStore) -> None:
    """Two additions at the same moment each check the other's name: one of them wins."""
    admin = Admin(store, FakeClock())
    await admin.create_workspace("acme")
    for names, ids in ((("bob", "Bob", "BOB"), (None, None, None)),
                       (("carol", "dave", "erin"), (7, 7, 7))):  # fmt: skip
        done = await asyncio.gather(
            *(
                admin.add_member("acme", n, telegram_user_id=i)
                for n, i in zip(names, ids, strict=True)
            ),
            return_exceptions=True,
        )
        made = [d for d in done if isinstance(d, Issued)]
        refused = [d for d in done if isinstance(d, ApprovalError)]
        assert (len(made), len(refused)) == (1, 2), done
        assert {r.code for r in refused} == {"conflict"}
    assert len(await _names(admin, "acme")) == 2


def _cli(*args: str, env: dict[str, str]) -> Awaitable[Result]:
    return asyncio.to_thread(CliRunner().invoke, main, ["admin", *args], env=env)


async def test_the_cli_says_why_it_refuses_a_member(tmp_path: Path) -> None:
    env = {"APPROVALBOT_STORE__URL": f"sqlite+aiosqlite:///{tmp_path}/admin.db"}
    assert (await _cli("workspace", "create", "acme", env=env)).exit_code == 0
    add = ("member", "add", "--workspace", "acme", "--name")
    made = await _cli(*add, "alice", "--telegram-user-id", "42", "--slack-user-id", "U42", env=env)
    assert made.exit_code == 0, made.output
    for args, needle in (
        (("bob", "--telegram-user-id", "42"),
         "conflict: telegram user id 42 is mapped to member alice in acme already"),
        (("bob", "--slack-user-id", "U42"),
         "conflict: slack user id U42 is mapped to member alice in acme already"),
        (("Alice",), "conflict: member name 'Alice' looks like that of member 'alice'"),
        (("ali\u200bce",),
         "invalid_request: member name: no invisible or formatting characters "
         "(U+200B ZERO WIDTH SPACE)"),
        (("\u0430lice",), "invalid_request: member name: letters of one script only"),
    ):  # fmt: skip
        result = await _cli(*add, *args, env=env)
        assert (result.exit_code, needle in result.output) == (1, True), result.output
