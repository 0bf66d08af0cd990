"""Slack as a chat platform (adapters/chat/port.py), on slack_sdk's AsyncWebClient.

Each run gets one thread in its workspace's channel (and in each other channel a route shows
some of its decisions in): a parent message ("title · agent · N waiting", N the run's open
decisions shown in that channel, kept current), created once even when two instances race (a
compare-and-swap on the run-thread record), and every decision of the run posted in it, the
first one also broadcast to the channel. Slack has no idempotency key, so every decision is
posted with `metadata` naming its task: after an uncertain failure (a timeout) the thread is
searched for it before posting again, and a decision is shown exactly once even then.

Slack's errors are mapped once, here: 429 → `RateLimited` (its Retry-After honoured, within
the caller's patience), our own pacing → `Busy`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.chat.context import CoreLink
from adapters.chat.offers import Offer, edit_start, input_to_edit
from adapters.chat.pacing import Budget
from adapters.chat.places import shown_in
from adapters.chat.port import (
    MessageRef,
    Notice,
    NotYet,
    Page,
    Place,
    Post,
    Press,
    RateLimited,
    Unreachable,
)
from adapters.chat.records import CLAIM_SECONDS, RunThread, swap
from adapters.slack import format as fmt
from adapters.web.links import run_url
from bot.config import SlackConfig
from bot.domain import Member, Run, Task
from bot.masking import shorten
from bot.ports import ChatState
from bot.rendering import Action

log = logging.getLogger(__name__)
T = TypeVar("T")

CHANNEL = "slack"
METADATA_EVENT = "approvalbot_decision"
TEXT_VIEW = "approvalbot_text"  # the modal that asks for a deny reason, an answer, an edit
TEXT_BLOCK = "text"
ALLOW_VIEW = "approvalbot_allow"  # "Approve & allow like this": the rule, its glob, the scope
MATCH_BLOCK = "match"
SCOPE_BLOCK = "scope"
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")
_GONE = {"message_not_found", "cant_update_message", "channel_not_found", "is_archived"}
_UNREACHABLE = {"channel_not_found", "not_in_channel", "is_archived", "user_not_found"}
_MODALS = {
    "deny_reason": ("Deny with reason", "Reason", "Deny", "Why not? The agent reads this."),
    "answer_text": ("Answer", "Your answer", "Send", "Your answer goes to the agent."),
    "edit": (
        "Edit & approve",
        "",
        "Approve",
        "Approved as you write it; the run's rules look at it again.",
    ),
}


def thread_key(run_id: str, chat: str | None = None) -> str:
    """The run's thread record: in the workspace's usual channel `thread:RUN`, in any other
    channel a route shows it in (or a person's direct messages) `thread:RUN@CHANNEL`."""
    return f"thread:{run_id}" if chat is None else f"thread:{run_id}@{chat}"


def ts_key(chat: str, ts: str) -> str:
    """The record that leads from a thread's parent message back to its run."""
    return f"thread-of:{chat}:{ts}"


def retry_after(error: SlackApiError) -> float | None:
    response = error.response
    if response.status_code != 429:
        return None
    try:
        return float(response.headers.get("Retry-After", response.headers.get("retry-after", 1)))
    except (TypeError, ValueError):
        return 1.0


def _raise_unreachable(error: SlackApiError, chat: str) -> None:
    """Slack's "never here" answers as the port's `Unreachable`; others are left to the caller."""
    code = str(error.response.get("error", ""))
    if code in _UNREACHABLE:
        raise Unreachable(f"slack refuses to post to {chat} ({code})") from None


class SlackPlatform:
    name = CHANNEL

    def __init__(
        self, config: SlackConfig, client: AsyncWebClient, chats: ChatState, link: CoreLink,
        budget: Budget, running: Callable[[], bool], *, parent_refresh: float = 0.5,
    ) -> None:  # fmt: skip
        self.config = config
        self.client = client
        self.chats = chats
        self.link = link
        self.budget = budget
        self._running = running
        self._parent_refresh = parent_refresh  # seconds a parent's count waits to settle
        self.retry_afters = 0  # 429s received (the bench reports them)
        self._announce: set[str] = set()  # threads whose first decision is still to come
        self._parents: dict[str, asyncio.Task[None]] = {}  # thread key -> its parent's refresh
        self._refreshing: set[asyncio.Task[None]] = set()  # every refresh not done, for stop()
        self._posting: dict[str, set[str]] = {}  # thread key -> decisions on their way there
        self._directs: dict[str, str] = {}  # user id -> their direct-message channel (D…)

    def place_for(self, workspace_id: str) -> Place | None:
        channel = self.config.workspace_channels.get(workspace_id, self.config.channel)
        return Place(channel) if channel else None

    async def direct(self, member: Member) -> Place | None:
        """The member's direct messages with the app (`conversations.open`, kept per process:
        Slack answers the same channel every time)."""
        user = member.slack_user_id
        if not user or not _USER_ID.match(user):
            return None
        if user not in self._directs:
            try:
                response = await self._call(
                    user, lambda: self.client.conversations_open(users=user), max_wait=None,
                    pace=False,
                )  # fmt: skip
            except SlackApiError as error:  # not a user of this Slack (any more): skip them
                log.info("slack: no direct messages with a member (%s)",
                         error.response.get("error"))  # fmt: skip
                return None
            self._directs[user] = str((response.get("channel") or {}).get("id", ""))
        channel = self._directs[user]
        return Place(channel) if channel else None

    async def healthy(self) -> bool:
        return self._running()

    def mention(self, member: Member) -> str | None:
        user = member.slack_user_id
        return f"<@{user}>" if user and _USER_ID.match(user) else None

    # calls, paced, with 429s honoured ----------------------------------------------------------
    async def _call(
        self, chat: str, call: Callable[[], Awaitable[T]], *, max_wait: float | None,
        pace: bool = True, post: bool = False,
    ) -> T:  # fmt: skip
        for attempt in range(4):
            if pace or attempt:
                await self.budget.acquire(chat, max_wait, post and not attempt)
            try:
                return await call()
            except SlackApiError as error:
                seconds = retry_after(error)
                if seconds is None:
                    raise
                self.retry_afters += 1
                await self.budget.penalise(chat, seconds)
                if attempt == 3 or (max_wait is not None and seconds > max_wait):
                    raise RateLimited(seconds) from None
        raise AssertionError("unreachable")

    # the port ----------------------------------------------------------------------------------
    async def post(
        self, place: Place, message: Post | Notice | Page, *, reply_to: MessageRef | None = None,
        max_wait: float | None = None,
    ) -> MessageRef:  # fmt: skip
        thread = place.thread or (reply_to.thread or reply_to.id if reply_to else None)
        args: dict[str, Any] = {"channel": place.chat, "unfurl_links": False}
        if thread:
            args["thread_ts"] = thread
        decision = isinstance(message, Post)
        blocks: list[dict[str, Any]] | None
        if isinstance(message, Post):
            if message.maybe_sent:
                found = await self._find(place.chat, thread, message.task_id)
                if found is not None:
                    return found
            text, blocks = fmt.decision_blocks(message.card, message.buttons)
            args["metadata"] = {
                "event_type": METADATA_EVENT, "event_payload": {"task_id": message.task_id},
            }  # fmt: skip
            if thread and thread in self._announce:
                args["reply_broadcast"] = True  # the run's first decision: the channel sees it
        elif isinstance(message, Page):
            text, blocks = self._page(message)
        else:
            text, blocks = self._notice(message), self._notice_blocks(message)
        try:
            response = await self._call(
                place.chat,
                lambda: self.client.chat_postMessage(text=text, blocks=blocks, **args),
                max_wait=max_wait, pace=not isinstance(message, Page), post=decision,
            )  # fmt: skip
        except SlackApiError as error:
            _raise_unreachable(error, place.chat)
            raise
        if args.get("reply_broadcast"):
            self._announce.discard(thread or "")
            await self._announced(place.chat, thread or "")
        return MessageRef(place.chat, str(response["ts"]), thread)

    async def edit(
        self, ref: MessageRef, message: Post | Page | Notice, *, max_wait: float | None = None
    ) -> bool:
        if isinstance(message, Notice):
            text, blocks = self._notice(message), self._notice_blocks(message) or []
        elif isinstance(message, Page):
            text, blocks = self._page(message)
        else:
            text, blocks = fmt.decision_blocks(message.card, message.buttons)
        try:
            await self._call(
                ref.chat,
                lambda: self.client.chat_update(
                    channel=ref.chat, ts=ref.id, text=text, blocks=blocks
                ),
                max_wait=max_wait, pace=not isinstance(message, Page),
            )  # fmt: skip
        except SlackApiError as error:
            code = str(error.response.get("error", ""))
            if code in _GONE:
                log.info("slack: a decision message can no longer be edited (%s)", code)
                return False
            raise
        return True

    async def tell(self, press: Press, text: str, *, alert: bool = False) -> None:
        """An ephemeral message only the presser sees, in the pressed message's thread."""
        if press.message is None or not text:
            return
        args: dict[str, Any] = {"channel": press.message.chat, "user": press.user}
        if press.message.thread:
            args["thread_ts"] = press.message.thread
        try:
            await self.client.chat_postEphemeral(text=fmt.escape(shorten(text, 300)), **args)
        except Exception as error:  # a notice only: the decision is made already
            log.info("slack: could not tell a person (%s)", type(error).__name__)

    async def ask_text(self, press: Press, task: Task, action: Action) -> bool:
        """A modal with one required text input; its submission (view_submission) comes back
        with the button's opaque id in `private_metadata`."""
        trigger = press.handle.get("trigger_id") if isinstance(press.handle, dict) else None
        if not trigger or action not in _MODALS:
            return False
        title, label, submit, hint = _MODALS[action]
        what = "this question" if task.kind == "ask" else task.tool
        element: dict[str, Any] = {
            "type": "plain_text_input", "action_id": TEXT_BLOCK, "multiline": True,
            "max_length": 3000 if action == "edit" else 2000,
        }  # fmt: skip
        if action == "edit":
            label, start = edit_start(input_to_edit(task))
            if start and len(start) <= 3000:
                element["initial_value"] = start
        view = {
            "type": "modal",
            "callback_id": TEXT_VIEW,
            "private_metadata": press.button,
            "title": {"type": "plain_text", "text": title},
            "submit": {"type": "plain_text", "text": submit},
            "close": {"type": "plain_text", "text": "Cancel"},
            "blocks": [
                {
                    "type": "input", "block_id": TEXT_BLOCK,
                    "label": {"type": "plain_text", "text": label},
                    "hint": {"type": "plain_text", "text": shorten(f"{hint} ({what})", 150)},
                    "element": element,
                }
            ],
        }  # fmt: skip
        try:
            await self.client.views_open(trigger_id=trigger, view=view)
        except SlackApiError as error:
            log.info("slack: could not open a modal (%s)", error.response.get("error"))
            return False
        return True

    async def offer_rule(self, press: Press, offer: Offer) -> bool:
        """A modal: the rule and the past calls it would have allowed, its glob to change,
        and the scope; submitting it (view_submission) approves and learns."""
        trigger = press.handle.get("trigger_id") if isinstance(press.handle, dict) else None
        if not trigger or not offer.scopes:
            return False
        lines = [fmt.escape(line) for line in offer.lines()]
        rule = "`" + lines[0].replace("`", "'") + "`"  # a glob's * must not read as bold
        # One line per part (shorten folds newlines: only when Slack's 3000 would cut it).
        text = "\n".join(["*Allow calls like this from now on?*", rule, *lines[1:]])
        text = text if len(text) <= 3000 else shorten(text, 3000)
        blocks: list[dict[str, Any]] = [
            {"type": "section", "block_id": "rule", "text": {"type": "mrkdwn", "text": text}},
        ]  # fmt: skip
        if offer.match is not None and len(offer.match) <= 3000:
            blocks.append({
                "type": "input", "block_id": MATCH_BLOCK,
                "label": {"type": "plain_text", "text": "Glob"},
                "hint": {"type": "plain_text", "text": "The rules' globs: * any text, ? one "
                         "character, anchored at both ends"},
                "element": {"type": "plain_text_input", "action_id": MATCH_BLOCK,
                            "initial_value": offer.match, "max_length": 3000},
            })  # fmt: skip
        options = [
            {"text": {"type": "plain_text", "text": label.removeprefix("✅ ")}, "value": scope}
            for scope, label, _ in offer.scopes
        ]
        blocks.append({
            "type": "input", "block_id": SCOPE_BLOCK,
            "label": {"type": "plain_text", "text": "Allow it in"},
            "element": {"type": "radio_buttons", "action_id": SCOPE_BLOCK, "options": options,
                        "initial_option": options[0]},
        })  # fmt: skip
        view = {
            "type": "modal", "callback_id": ALLOW_VIEW, "private_metadata": press.button,
            "title": {"type": "plain_text", "text": "Approve & allow"},
            "submit": {"type": "plain_text", "text": "Approve & allow"},
            "close": {"type": "plain_text", "text": "Cancel"},
            "blocks": blocks,
        }  # fmt: skip
        try:
            await self.client.views_open(trigger_id=trigger, view=view)
        except SlackApiError as error:
            log.info("slack: could not open a modal (%s)", error.response.get("error"))
            return False
        return True

    # threads -----------------------------------------------------------------------------------
    def _thread_key(self, run: Run, chat: str) -> str:
        usual = self.place_for(run.workspace_id)
        return thread_key(run.id, None if usual is not None and usual.chat == chat else chat)

    async def open_thread(self, run: Run, place: Place, *, posting: str | None = None) -> Place:
        """The run's thread in `place` (created once per channel), its parent's count
        refreshed soon."""
        key = self._thread_key(run, place.chat)
        found = await self.chats.get_record(CHANNEL, key)
        thread = RunThread.of(found.data) if found else RunThread()
        if thread.ts:
            if posting is not None:
                self._posting.setdefault(key, set()).add(posting)
            self._refresh_parent_soon(run, key)
            return Place(thread.chat, thread.ts)
        now = time.time()
        if thread.claimed_until > now:
            raise NotYet("the run's thread is being created elsewhere")
        claimed = RunThread(chat=place.chat, claimed_until=now + CLAIM_SECONDS)
        if not await self.chats.swap_record(
            CHANNEL, key, claimed.data(), found.version if found else 0
        ):
            raise NotYet("the run's thread is being created elsewhere")
        waiting = await self._waiting(run, place.chat, () if posting is None else (posting,))
        text, blocks = self._parent(run, waiting)
        try:
            response = await self._call(
                place.chat,
                lambda: self.client.chat_postMessage(
                    channel=place.chat, text=text, blocks=blocks, unfurl_links=False
                ),
                max_wait=None,
            )
        except BaseException as error:
            await self._update_thread(key, lambda t: RunThread(chat=t.chat))
            if isinstance(error, SlackApiError):
                _raise_unreachable(error, place.chat)
            raise
        ts = str(response["ts"])
        await self.chats.swap_record(
            CHANNEL, ts_key(place.chat, ts), {"run_id": run.id, "key": key}, 0
        )
        done = RunThread(chat=place.chat, ts=ts, waiting=waiting)
        await self._update_thread(key, lambda _: done)
        self._announce.add(ts)
        return Place(place.chat, ts)

    async def run_of_thread(self, chat: str, ts: str) -> str | None:
        found = await self.chats.get_record(CHANNEL, ts_key(chat, ts))
        return str(found.data["run_id"]) if found and "run_id" in found.data else None

    async def _update_thread(self, key: str, change: Callable[[RunThread], RunThread]) -> None:
        await swap(
            lambda: self.chats.get_record(CHANNEL, key),
            lambda data, version: self.chats.swap_record(CHANNEL, key, data, version),
            lambda data: change(RunThread.of(data)).data(),
        )

    async def _announced(self, chat: str, ts: str) -> None:
        found = await self.chats.get_record(CHANNEL, ts_key(chat, ts))
        if found is not None and "run_id" in found.data:
            key = str(found.data.get("key") or thread_key(str(found.data["run_id"])))
            await self._update_thread(key, lambda t: RunThread(
                chat=t.chat, ts=t.ts, waiting=t.waiting, announced=True,
            ))  # fmt: skip

    async def _waiting(self, run: Run, chat: str, posting: Collection[str]) -> int:
        """The run's open decisions shown in `chat`: a route may show some of them in
        another channel only, and that channel's parent counts those."""
        parked = await self.link.parked_tasks(run.id)
        return len(await shown_in(self.chats, CHANNEL, parked, chat, posting))

    def _parent(self, run: Run, waiting: int) -> tuple[str, list[dict[str, Any]]]:
        return fmt.thread_parent(
            run.title or run.id, run.profile, waiting, run_url(self.link.base_url, run.id)
        )

    def _refresh_parent_soon(self, run: Run, key: str) -> None:
        """Bring the parent's count up to date once a burst of changes settles (one edit for
        many parks or endings)."""
        if key in self._parents and not self._parents[key].done():
            return
        refresh = self._refresh_parent(run, key, self._parent_refresh)
        self._parents[key] = task = asyncio.create_task(refresh)
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def _refresh_parent(self, run: Run, key: str, delay: float) -> None:
        await asyncio.sleep(delay)
        self._parents.pop(key, None)
        posting = self._posting.pop(key, set())
        try:
            found = await self.chats.get_record(CHANNEL, key)
            thread = RunThread.of(found.data) if found else RunThread()
            waiting = await self._waiting(run, thread.chat, posting)
            if not thread.ts or waiting == thread.waiting:
                return
            text, blocks = self._parent(run, waiting)
            await self.client.chat_update(channel=thread.chat, ts=thread.ts, text=text,
                                          blocks=blocks)  # fmt: skip
            await self._update_thread(key, lambda t: RunThread(
                chat=t.chat, ts=t.ts, waiting=waiting, announced=t.announced,
            ))  # fmt: skip
        except Exception as error:  # cosmetic: the next change corrects it
            log.info("slack: could not refresh a run's thread (%s)", type(error).__name__)

    async def stop(self) -> None:
        # Every refresh, a running one too (it has left `_parents` once its wait is over):
        # nothing of this adapter writes to the store after it stopped.
        tasks = [*self._parents.values(), *self._refreshing]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._parents.clear()
        self._posting.clear()

    # rendering and lookups -----------------------------------------------------------------------
    def _page(self, page: Page) -> tuple[str, list[dict[str, Any]]]:
        return fmt.digest_blocks(
            list(page.tasks), self.link.now(), page.inbox_url, page.buttons, done=page.done
        )

    @staticmethod
    def _notice(notice: Notice) -> str:
        bold = f"*{fmt.escape(notice.bold)}*" if notice.bold else ""
        text = " ".join(part for part in (notice.icon, bold, fmt.escape(notice.text)) if part)
        if notice.mentions:
            text += " — " + " ".join(notice.mentions)
        return "\n".join([text, *(fmt.escape(line) for line in notice.lines)])

    @staticmethod
    def _notice_blocks(notice: Notice) -> list[dict[str, Any]] | None:
        """A notice with buttons needs blocks; a plain one is text alone."""
        if not notice.buttons:
            return None
        text = SlackPlatform._notice(notice)
        buttons = [
            {"type": "button", "text": {"type": "plain_text", "text": label[:75]},
             "action_id": i, "value": i}
            for label, i in notice.buttons
        ]  # fmt: skip
        return [
            {"type": "section", "block_id": "notice",
             "text": {"type": "mrkdwn", "text": shorten(text, 3000)}},
            {"type": "actions", "block_id": "notice-buttons", "elements": buttons},
        ]  # fmt: skip

    async def _find(self, chat: str, thread: str | None, task_id: str) -> MessageRef | None:
        """The decision's message in the thread, if an earlier attempt posted it after all."""
        if not thread:
            return None
        cursor: str | None = None
        for _ in range(20):
            page = await self._replies(chat, thread, cursor)
            for message in page.get("messages") or []:
                metadata = message.get("metadata") or {}
                payload = metadata.get("event_payload") or {}
                ours = metadata.get("event_type") == METADATA_EVENT
                if ours and payload.get("task_id") == task_id:
                    return MessageRef(chat, str(message["ts"]), thread)
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return None
        return None

    async def _replies(self, chat: str, thread: str, cursor: str | None) -> Any:
        args: dict[str, Any] = {"channel": chat, "ts": thread, "include_all_metadata": True}
        if cursor:
            args["cursor"] = cursor
        return await self._call(
            chat, lambda: self.client.conversations_replies(limit=200, **args), max_wait=None,
            pace=False,
        )  # fmt: skip
