"""One driver per chat platform, so the shared chat layer's behaviour is tested once.

A `ChatDriver` hides how a platform is driven (Telegram: inline buttons, ForceReply prompts,
toggle buttons; Slack: signed block_actions posts, modals, checkboxes sent along with Submit)
behind a few verbs. Each wraps the platform's harness world (tests/telegram_harness.py,
tests/slack_harness.py): the real library against the strict fake API server on 127.0.0.1.

Buttons are named neutrally: "approve", "deny", "deny_reason", "answer_text", "decline",
"submit", "option:<label>". People are "alice" and "carol" (members on both platforms) and
"stranger" (not mapped to anyone).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from adapters.chat.offers import EDIT_GLOB
from adapters.chat.pacing import Limits
from bot.clock import FakeClock
from bot.core import Core
from bot.domain import OutboxItem, Principal, Task
from bot.masking import mask_text
from store.sql import SqlStore
from tests import slack_harness as sh
from tests import telegram_harness as th
from tests.fakes.slack_api import FakeSlack, SlackMessage
from tests.fakes.telegram_api import FakeTelegram, SentMessage

RELAXED = Limits(per_interval=0.01, per_burst=100, window_count=10_000)
User = Literal["alice", "carol", "stranger"]
Where = Literal["usual", "oncall", "dm:alice", "dm:carol"]
PLATFORMS = ["telegram", "slack"]
WS = th.WS
assert WS == sh.WS

# the labels people see on each platform, for the neutral button names
_LABELS = {
    "approve": "Approve",
    "deny": "Deny",
    "deny_reason": "Deny with reason",
    "answer_text": "Answer",
    "decline": "Decline",
    "submit": "Submit",
    "edit": "Edit & approve",
    "allow": "Approve & allow like this",
}


def label_of(button: str) -> str:
    if button.startswith("option:"):
        return button.removeprefix("option:")
    return _LABELS[button]


@dataclass(frozen=True)
class Handle:
    """A decision's message on the fake: its platform key, (chat, message id) or (channel, ts)."""

    key: tuple[Any, Any]


@dataclass(frozen=True)
class Shown:
    """A message as people see it now."""

    text: str
    has_buttons: bool


@dataclass(frozen=True)
class Offered:
    """An offer of "Approve & allow like this" as shown: its text and scope choices."""

    text: str
    scopes: tuple[str, ...]  # the labels of the scope choices
    handle: Any  # the platform's: the offer's message, or the modal


@dataclass(frozen=True)
class Nudge:
    text: str
    mentions: frozenset[str]  # the member names it notifies


class ChatDriver(Protocol):
    platform: str  # "telegram" or "slack": also the recorded `via`
    store: SqlStore

    @property
    def core(self) -> Core: ...
    @property
    def service(self) -> Any: ...
    @property
    def clock(self) -> FakeClock: ...
    @property
    def run_id(self) -> str: ...
    def member(self, name: User) -> Principal: ...
    @property
    def agent(self) -> Principal: ...

    async def park(self, key: str, **kw: Any) -> Task: ...
    async def ask(self, key: str, **question: Any) -> Task: ...
    async def flush(self) -> None: ...
    async def task(self, key: str) -> Task: ...
    async def settled(self, key: str) -> Task: ...
    def decision(self, needle: str) -> Handle: ...
    async def press(self, handle: Handle, button: str, user: User = "alice") -> str | None:
        """Press `button` as `user`; the private notice they were shown (None: none came)."""
        ...

    async def tick(self, handle: Handle, labels: list[str], user: User = "alice") -> None: ...
    async def ask_for_text(self, handle: Handle, action: str, user: User = "alice") -> Any:
        """Press "deny_reason" or "answer_text": where the platform asks for the text (a
        ForceReply prompt, a modal), to write into with `write_text`."""
        ...

    async def write_text(
        self, prompt: Any, text: str, user: User = "alice", *, notice: bool = False
    ) -> str | None:
        """Write `text` where `prompt` asks for it; with `notice`, wait for the private
        answer the person gets (a refusal, "Already …") and return it."""
        ...

    async def give_text(self, handle: Handle, action: str, text: str, user: User = "alice") -> None:
        """`ask_for_text` then `write_text`."""
        ...

    def shown(self, handle: Handle) -> Shown: ...
    def nudges(self) -> list[Nudge]: ...
    def decision_in(self, where: Where, needle: str) -> Handle:
        """The decision whose text contains `needle` in one place (routes): "usual" (the
        workspace's chat), "oncall" (a second group or channel), "dm:alice", "dm:carol"."""
        ...

    def decisions_in(self, where: Where) -> list[Handle]: ...
    async def offer(self, handle: Handle, user: User = "alice") -> Offered:
        """Press "Approve & allow like this": what the person is shown before anything is
        saved (a message with a button per scope, a modal)."""
        ...

    async def choose(
        self, offered: Offered, scope: str, user: User = "alice", match: str | None = None
    ) -> str | None:
        """Confirm the offer in `scope` ("run", "profile"), with the glob changed to `match`
        first (Slack: in the modal; Telegram: "✏️ Edit glob" and a reply), where the offer
        lets it change; the notice or refusal the person got."""
        ...

    async def edit(self, handle: Handle, key: str, text: str, user: User = "alice") -> str | None:
        """Press "Edit & approve" on decision `key` and give the new command or input; the
        refusal the person was shown (None when it was approved)."""
        ...

    def nudges_in(self, where: Where) -> list[str]: ...
    async def redeliver_nudge(self, task: Task, seq: int = 0) -> None: ...
    async def eventually(self, predicate: Callable[[], Any], timeout: float = 20.0) -> Any: ...
    async def restart(self) -> None: ...
    async def close(self) -> None: ...


# --------------------------------------------------------------------------------------------
# Common to both: the core side of a harness world
# --------------------------------------------------------------------------------------------


class _Base:
    platform = ""
    world: Any

    @property
    def core(self) -> Core:
        return self.world.core  # type: ignore[no-any-return]

    @property
    def service(self) -> Any:
        return self.world.service

    @property
    def clock(self) -> FakeClock:
        return self.world.clock  # type: ignore[no-any-return]

    @property
    def run_id(self) -> str:
        return self.world.run_id  # type: ignore[no-any-return]

    @property
    def agent(self) -> Principal:
        return self.world.agent  # type: ignore[no-any-return]

    def member(self, name: User) -> Principal:
        assert name in ("alice", "carol"), name
        return getattr(self.world, name)  # type: ignore[no-any-return]

    async def park(self, key: str, **kw: Any) -> Task:
        return await self.world.park(key, **kw)  # type: ignore[no-any-return]

    async def ask(self, key: str, **question: Any) -> Task:
        return await self.world.ask(key, **question)  # type: ignore[no-any-return]

    async def flush(self) -> None:
        await self.world.flush()

    async def task(self, key: str) -> Task:
        return await self.world.task(key)  # type: ignore[no-any-return]

    async def settled(self, key: str) -> Task:
        return await self.world.settled(key)  # type: ignore[no-any-return]

    async def eventually(self, predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
        return await self.world.fake.wait_for(predicate, timeout=timeout)

    async def ask_for_text(self, handle: Handle, action: str, user: User = "alice") -> Any:
        raise NotImplementedError

    async def write_text(
        self, prompt: Any, text: str, user: User = "alice", *, notice: bool = False
    ) -> str | None:
        raise NotImplementedError

    async def give_text(self, handle: Handle, action: str, text: str, user: User = "alice") -> None:
        await self.write_text(await self.ask_for_text(handle, action, user), text, user)

    async def redeliver_nudge(self, task: Task, seq: int = 0) -> None:
        """The relay hands the nudge's item over again (as after a crash before marking it
        done): nothing must be sent twice."""
        item = OutboxItem(
            f"out_again_{seq}", self.platform, "nudge", task.id, task.run_id, WS,
            f"{self.platform}:{task.id}:nudge:{seq}", self.clock.now(),
            payload={"remaining": 3600, "seq": seq},
        )  # fmt: skip
        adapter = self.world.adapter
        run = await adapter.link.run(task.run_id)
        await adapter.notifier.deliver(item, task, run)


# --------------------------------------------------------------------------------------------
# Telegram
# --------------------------------------------------------------------------------------------

_TG_USERS: dict[str, tuple[int, str]] = {
    "alice": (th.ALICE, "Alice"),
    "carol": (th.CAROL, "Carol"),
    "stranger": (th.STRANGER, "Mallory"),
}


class TelegramDriver(_Base):
    platform = "telegram"

    def __init__(
        self, store: SqlStore, fake: FakeTelegram, world: th.TgWorld, **world_kw: Any
    ) -> None:
        self.store = store
        self.fake = fake
        self.world: th.TgWorld = world
        self._world_kw = world_kw  # the same again after a restart

    def _message(self, handle: Handle) -> SentMessage:
        return self.fake.messages[handle.key]

    def decision(self, needle: str) -> Handle:
        return Handle(self.world.message(needle).key)

    async def press(self, handle: Handle, button: str, user: User = "alice") -> str | None:
        user_id, first_name = _TG_USERS[user]
        answer = await self.world.press(
            self._message(handle), label_of(button), user=user_id, first_name=first_name
        )
        return answer.text

    async def tick(self, handle: Handle, labels: list[str], user: User = "alice") -> None:
        """One toggle button per option: press each (the message is edited after each)."""
        for label in labels:
            notice = await self.press(handle, f"option:{label}", user)
            assert notice == f"☑ {label}", notice

    async def ask_for_text(self, handle: Handle, action: str, user: User = "alice") -> Any:
        """Press the button; the ForceReply prompt it sent under the message."""
        before = len(self.fake.sent)
        notice = await self.press(handle, action, user)
        assert notice == "Reply to my message, please", notice
        message = self._message(handle)
        prompts = [
            m
            for m in self.fake.sent[before:]
            if m.reply_to_message_id == message.message_id
            and (m.reply_markup or {}).get("force_reply")
        ]
        assert len(prompts) == 1, [m.text for m in self.fake.sent[before:]]
        return prompts[0]

    async def write_text(
        self, prompt: Any, text: str, user: User = "alice", *, notice: bool = False
    ) -> str | None:
        """Reply to the prompt; the bot answers a refusal in reply to that reply."""
        await self.world.reply(prompt, text, user=_TG_USERS[user][0])
        if not notice:
            return None
        mine = self.fake.user_messages[-1]
        answer = await self.fake.wait_for(
            lambda: next(
                (m for m in self.fake.sent if m.reply_to_message_id == mine.message_id), None
            ),
        )
        return answer.text  # type: ignore[no-any-return]

    def shown(self, handle: Handle) -> Shown:
        message = self._message(handle)
        return Shown(message.text, bool(message.buttons))

    async def offer(self, handle: Handle, user: User = "alice") -> Offered:
        before = len(self.fake.sent)
        notice = await self.press(handle, "allow", user)
        assert notice == "Choose where to allow it, below", notice
        message = self._message(handle)
        [found] = [
            m for m in self.fake.sent[before:]
            if m.reply_to_message_id == message.message_id and m.buttons
        ]  # fmt: skip
        scopes = tuple(b["text"] for b in found.buttons if b["text"] != EDIT_GLOB)
        return Offered(found.text, scopes, found)

    async def choose(
        self, offered: Offered, scope: str, user: User = "alice", match: str | None = None
    ) -> str | None:
        """With `match`: press "✏️ Edit glob" and reply with it first; a refusal (the bot's
        reply to that reply) is returned, an accepted glob edits the offer, whose scope
        button is then pressed."""
        user_id, first_name = _TG_USERS[user]
        if match is not None:
            refused, _ = await self.edit_glob(offered, match, user)
            if refused is not None:
                return refused
        label = {"run": "This run", "profile": "Profile"}[scope]
        message = self.fake.messages[offered.handle.key]
        answer = await self.world.press(message, label, user=user_id, first_name=first_name)
        return answer.text

    async def edit_glob(
        self, offered: Offered, match: str, user: User = "alice"
    ) -> tuple[str | None, SentMessage]:
        """Press "✏️ Edit glob" on the offer and reply to its prompt with `match`: the bot's
        refusal (None once the offer shows the new glob: its scope buttons changed), and the
        prompt."""
        user_id, first_name = _TG_USERS[user]
        offer = self.fake.messages[offered.handle.key]
        before, buttons = len(self.fake.sent), offer.callback_data
        answer = await self.world.press(offer, EDIT_GLOB, user=user_id, first_name=first_name)
        assert answer.text == "Reply to my message, please", answer.text
        [prompt] = [
            m for m in self.fake.sent[before:]
            if m.reply_to_message_id == offer.message_id
            and (m.reply_markup or {}).get("force_reply")
        ]  # fmt: skip
        await self.world.reply(prompt, match, user=user_id)
        mine = self.fake.user_messages[-1]

        def outcome() -> tuple[str | None] | None:
            for m in self.fake.sent:
                if m.reply_to_message_id == mine.message_id:
                    return (m.text,)
            edited = self.fake.messages[offer.key]
            return (None,) if edited.callback_data != buttons else None

        (refused,) = await self.fake.wait_for(outcome, timeout=20.0)
        if refused is None and mask_text(match) == match:
            assert f"matches {match}" in self.fake.messages[offer.key].text
        return refused, prompt

    async def edit(self, handle: Handle, key: str, text: str, user: User = "alice") -> str | None:
        button = self._message(handle).callback_data[0]
        found = await self.world.adapter.chats.callback_task("telegram", button)
        assert found is not None and found[1].key == key
        task_id = found[1].id
        prompt = await self.ask_for_text(handle, "edit", user)
        before = len(self.fake.sent)
        await self.world.reply(prompt, text, user=_TG_USERS[user][0])
        mine = self.fake.user_messages[-1]

        async def answered() -> tuple[str | None] | None:
            """The bot's reply to the reply (a refusal), or none once the decision ended."""
            for m in self.fake.sent[before:]:
                if m.reply_to_message_id == mine.message_id:
                    return (m.text,)
            task = await self.world.adapter.link.task(task_id)
            return (None,) if task is not None and not task.parked else None

        (said,) = await self.fake.wait_for(answered, timeout=20.0)
        return said  # type: ignore[no-any-return]

    def _chat(self, where: Where) -> int:
        return {"usual": th.GROUP, "oncall": th.ONCALL, "dm:alice": th.ALICE,
                "dm:carol": th.CAROL}[where]  # fmt: skip

    def decisions_in(self, where: Where) -> list[Handle]:
        return [
            Handle(m.key) for m in self.fake.messages_in(self._chat(where)) if "Run id" in m.text
        ]  # fmt: skip

    def decision_in(self, where: Where, needle: str) -> Handle:
        found = [h for h in self.decisions_in(where) if needle in self._message(h).text]
        assert len(found) == 1, (where, needle, [self._message(h).text[:60] for h in found])
        return found[0]

    def nudges_in(self, where: Where) -> list[str]:
        return [m.text for m in self.fake.messages_in(self._chat(where)) if m.text.startswith("⏰")]

    def nudges(self) -> list[Nudge]:
        names = {user_id: name for name, (user_id, _) in _TG_USERS.items()}
        found = []
        for m in self.fake.sent:
            if m.text.startswith("⏰"):
                ids = {e["user"]["id"] for e in m.entities if e["type"] == "text_mention"}
                found.append(Nudge(m.text, frozenset(names.get(i, str(i)) for i in ids)))
        return found

    async def restart(self) -> None:
        clock = self.world.clock
        await th.close_world(self.world)
        self.world = await th.build_world(
            self.store, self.fake, clock=clock, create=False, **self._world_kw
        )

    async def close(self) -> None:
        await th.close_world(self.world)


# --------------------------------------------------------------------------------------------
# Slack
# --------------------------------------------------------------------------------------------

_SL_USERS: dict[str, str] = {"alice": sh.ALICE, "carol": sh.CAROL, "stranger": sh.STRANGER}
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)>")


def _texts(node: Any) -> list[str]:
    """Every text of a Block Kit tree, in order (headers, sections, contexts), leaving out
    the interactive parts (buttons, checkboxes): what `Shown.has_buttons` says."""
    if isinstance(node, list):
        return [t for item in node for t in _texts(item)]
    if not isinstance(node, dict) or node.get("type") == "actions":
        return []
    if node.get("type") in ("plain_text", "mrkdwn") and isinstance(node.get("text"), str):
        return [_read(node)]
    return [t for value in node.values() for t in _texts(value)]


def _unescape(text: str) -> str:
    """Message text (mrkdwn) as people read it: entities decoded, the invisible word joiners
    (the adapter's, in broadcast words) dropped."""
    text = text.replace("\u2060", "")
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _read(text_object: dict[str, Any]) -> str:
    """A text object as people read it: plain_text is shown as is (but for the invisible word
    joiners the adapter puts after "<"), mrkdwn decoded."""
    if text_object.get("type") == "plain_text":
        return str(text_object["text"]).replace("\u2060", "")
    return _unescape(str(text_object["text"]))


def _button(message: SlackMessage, label: str) -> dict[str, Any]:
    """The button people see labelled `label`."""
    found = [e for e in message.elements if e.get("type") == "button" and _read(e["text"]) == label]
    assert len(found) == 1, (label, [e.get("text") for e in message.elements])
    return found[0]


class SlackDriver(_Base):
    platform = "slack"

    def __init__(
        self, store: SqlStore, fake: FakeSlack, world: sh.SlackWorld, **world_kw: Any
    ) -> None:
        self.store = store
        self.fake = fake
        self.world: sh.SlackWorld = world
        self._world_kw = world_kw  # the same again after a restart
        self._ticked: dict[tuple[Any, str], dict[str, Any]] = {}  # (message, user): state

    def _message(self, handle: Handle) -> SlackMessage:
        return self.fake.message(*handle.key)

    def decision(self, needle: str) -> Handle:
        return Handle(self.world.message(needle).key)

    async def _post_press(self, handle: Handle, button: str, user: User) -> int:
        """Post the signed block_actions of a press; how many ephemerals there were before."""
        message = self._message(handle)
        element = _button(message, label_of(button))
        state = self._ticked.get((handle.key, user)) if button == "submit" else None
        payload = self.fake.block_actions_payload(
            _SL_USERS[user], message.channel, message.ts, element["action_id"], state=state
        )
        before = len(self.fake.ephemeral_messages)
        status, _ = await self.world.post(payload)
        assert status == 200, status
        return before

    async def press(self, handle: Handle, button: str, user: User = "alice") -> str | None:
        before = await self._post_press(handle, button, user)
        notice = await self.world.next_ephemeral(before, _SL_USERS[user])
        return None if notice is None else _unescape(notice.text)

    async def tick(self, handle: Handle, labels: list[str], user: User = "alice") -> None:
        """Tick the checkboxes: Slack keeps them in the person's client and sends them with
        their Submit, every checkboxes block's state (ticking itself reaches the app too, and
        must answer nothing)."""
        message = self._message(handle)
        state: dict[str, Any] = {}
        found: list[str] = []
        for block in message.blocks or []:
            for box in block.get("elements") or []:
                if block.get("type") != "actions" or box.get("type") != "checkboxes":
                    continue
                options = [o for o in box["options"] if _read(o["text"]) in labels]
                found += [_read(o["text"]) for o in options]
                state[block["block_id"]] = {
                    box["action_id"]: {"type": "checkboxes", "selected_options": options}
                }
                if not options:
                    continue
                payload = self.fake.block_actions_payload(
                    _SL_USERS[user], message.channel, message.ts, box["action_id"],
                    action_type="checkboxes", selected_options=options, block_id=block["block_id"],
                )  # fmt: skip
                status, _ = await self.world.post(payload)
                assert status == 200, status
        assert sorted(found) == sorted(labels), (labels, found)
        self._ticked[(handle.key, user)] = state

    async def ask_for_text(self, handle: Handle, action: str, user: User = "alice") -> Any:
        """Press the button; the modal it opened."""
        opened = len(self.fake.views_opened())
        before = await self._post_press(handle, action, user)
        user_id = _SL_USERS[user]

        def view() -> Any:
            return next(
                (v for v in self.fake.views_opened()[opened:] if v.user_id == user_id), None
            )

        try:
            return await self.fake.wait_for(view, timeout=20.0)
        except TimeoutError:
            said = [e.text for e in self.fake.ephemeral_messages[before:] if e.user == user_id]
            raise AssertionError(f"no modal opened for {user}; told {said}") from None

    async def write_text(
        self, prompt: Any, text: str, user: User = "alice", *, notice: bool = False
    ) -> str | None:
        """Submit the modal; a refusal comes as an ephemeral message."""
        payload = self.fake.view_submission_payload(
            _SL_USERS[user], "approvalbot_text", private_metadata=prompt.view["private_metadata"],
            values={"text": {"text": text}}, view_id=prompt.id,
        )  # fmt: skip
        before = len(self.fake.ephemeral_messages)
        status, _ = await self.world.post(payload)
        assert status == 200, status
        if not notice:
            return None
        told = await self.world.next_ephemeral(before, _SL_USERS[user])
        return None if told is None else _unescape(told.text)

    def shown(self, handle: Handle) -> Shown:
        message = self._message(handle)
        texts = _texts(message.blocks or []) or [_unescape(message.text)]
        return Shown("\n".join(texts), bool(message.elements))

    async def offer(self, handle: Handle, user: User = "alice") -> Offered:
        opened = len(self.fake.views_opened())
        await self._post_press(handle, "allow", user)
        user_id = _SL_USERS[user]
        view = await self.fake.wait_for(
            lambda: next(
                (v for v in self.fake.views_opened()[opened:] if v.user_id == user_id), None
            ),
        )
        blocks = view.view["blocks"]
        text = "\n".join(_texts([b for b in blocks if b.get("type") == "section"]))
        [scope] = [b for b in blocks if b.get("block_id") == "scope"]
        labels = tuple(_read(o["text"]) for o in scope["element"]["options"])
        return Offered(text, labels, view)

    async def choose(
        self, offered: Offered, scope: str, user: User = "alice", match: str | None = None
    ) -> str | None:
        view = offered.handle
        [block] = [b for b in view.view["blocks"] if b.get("block_id") == "scope"]
        [option] = [o for o in block["element"]["options"] if o["value"] == scope]
        values: dict[str, Any] = {
            "scope": {"scope": {"type": "radio_buttons", "selected_option": option}}
        }
        globs = [b for b in view.view["blocks"] if b.get("block_id") == "match"]
        if globs:
            initial = globs[0]["element"]["initial_value"]
            values["match"] = {"match": initial if match is None else match}
        payload = self.fake.view_submission_payload(
            _SL_USERS[user], "approvalbot_allow", private_metadata=view.view["private_metadata"],
            values=values, view_id=view.id,
        )  # fmt: skip
        before = len(self.fake.ephemeral_messages)
        status, body = await self.world.post(payload)
        assert status == 200, status
        if body and "errors" in body:
            return " ".join(json.loads(body)["errors"].values())
        told = await self.world.next_ephemeral(before, _SL_USERS[user])
        return None if told is None else _unescape(told.text)

    async def edit(self, handle: Handle, key: str, text: str, user: User = "alice") -> str | None:
        prompt = await self.ask_for_text(handle, "edit", user)
        payload = self.fake.view_submission_payload(
            _SL_USERS[user], "approvalbot_text", private_metadata=prompt.view["private_metadata"],
            values={"text": {"text": text}}, view_id=prompt.id,
        )  # fmt: skip
        status, body = await self.world.post(payload)
        assert status == 200, status
        if body and "errors" in body:
            return " ".join(json.loads(body)["errors"].values())
        return None

    def _channel(self, where: Where) -> str:
        direct = self.fake.direct_channel
        return {"usual": sh.CHANNEL, "oncall": sh.ONCALL, "dm:alice": direct(sh.ALICE),
                "dm:carol": direct(sh.CAROL)}[where]  # fmt: skip

    def decisions_in(self, where: Where) -> list[Handle]:
        return [
            Handle(m.key) for m in self.fake.messages_in(self._channel(where))
            if m.from_bot and m.metadata is not None
        ]  # fmt: skip

    def decision_in(self, where: Where, needle: str) -> Handle:
        found = [h for h in self.decisions_in(where) if needle in self.shown(h).text]
        assert len(found) == 1, (where, needle, [self.shown(h).text[:60] for h in found])
        return found[0]

    def nudges_in(self, where: Where) -> list[str]:
        return [
            _unescape(m.text) for m in self.fake.messages_in(self._channel(where))
            if m.from_bot and m.text.startswith("⏰")
        ]  # fmt: skip

    def nudges(self) -> list[Nudge]:
        names = {user_id: name for name, user_id in _SL_USERS.items()}
        found = []
        for m in self.fake.messages_in(sh.CHANNEL):
            if m.from_bot and m.text.startswith("⏰"):
                ids = set(_MENTION.findall(m.text))
                found.append(Nudge(_unescape(m.text), frozenset(names.get(i, i) for i in ids)))
        return found

    async def restart(self) -> None:
        clock = self.world.clock
        await sh.close_world(self.world)
        self.world = await sh.build_world(
            self.store, self.fake, clock=clock, create=False, **self._world_kw
        )

    async def close(self) -> None:
        await sh.close_world(self.world)


# --------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def open_driver(
    platform: str, store: SqlStore, *, routes: list[Any] | None = None,
    decisions: dict[str, Any] | None = None, **world: Any,
) -> AsyncIterator[ChatDriver]:  # fmt: skip
    """A driver for `platform` on a fresh fake and a world over `store`; closed after.
    Pacing is relaxed (the fakes here do not enforce rate limits): these tests are about
    what is shown, not when. `routes` and `decisions`: those settings (the same for both
    platforms: each keeps the targets it can show)."""
    driver: TelegramDriver | SlackDriver
    world.setdefault("limits", RELAXED)
    configured = {"routes": routes, "decisions": decisions}
    if platform == "telegram":
        async with th.fake_telegram() as tg_fake:
            if routes or decisions:
                world["settings"] = th.settings_for(tg_fake, **configured)  # type: ignore[arg-type]
            tg_world = await th.build_world(store, tg_fake, **world)
            driver = TelegramDriver(store, tg_fake, tg_world, **world)
            try:
                yield driver
            finally:
                await driver.close()
    elif platform == "slack":
        async with sh.fake_slack() as sl_fake:
            if routes or decisions:
                world["settings"] = sh.settings_for(sl_fake, **configured)  # type: ignore[arg-type]
            sl_world = await sh.build_world(store, sl_fake, **world)
            driver = SlackDriver(store, sl_fake, sl_world, **world)
            try:
                yield driver
            finally:
                await driver.close()
    else:
        raise ValueError(platform)
