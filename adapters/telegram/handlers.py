"""Updates from Telegram turned into core calls: button presses and ForceReply replies.

Nothing a client sends is trusted: a button carries only an opaque id, looked up in the store
for the task and the action; the presser is mapped to a member of the task's workspace by
their Telegram user id (`Admin.member_by_chat`), and the core decides whether the action is
allowed. Every refusal is a short answer to the person, never an exception in the chat.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from telegram import CallbackQuery, Message, Update
from telegram.ext import ContextTypes

from adapters.telegram.format import esc
from adapters.telegram.notifier import CHANNEL
from bot import errors
from bot.domain import Principal, Task
from bot.errors import ApprovalError
from bot.masking import shorten
from bot.ports import ChatCallback, ChatPrompt
from bot.rendering import render_ending

if TYPE_CHECKING:
    from adapters.telegram.adapter import TelegramAdapter

log = logging.getLogger(__name__)

NOT_APPROVER = "You are not an approver here"
EXPIRED_BUTTON = "This button is no longer valid."
_PROMPTS = {
    "deny_reason": (
        "📝 {who}, reply to this message with your reason for denying {what}.",
        "Reason",
    ),
    "answer_text": ("💬 {who}, reply to this message with your answer to {what}.", "Your answer"),
}


class Handlers:
    def __init__(self, adapter: TelegramAdapter) -> None:
        self.adapter = adapter

    # button presses ----------------------------------------------------------------------------
    async def on_callback(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None:
            return
        adapter = self.adapter
        found = await adapter.chats.callback_task(query.data or "")
        if found is None or found[0].channel != CHANNEL:
            await adapter.answer(query, EXPIRED_BUTTON)
            return
        callback, task = found
        member = await adapter.member(query.from_user.id, task.workspace_id)
        if member is None:
            await adapter.answer(query, NOT_APPROVER, alert=True)
            return
        if not task.parked:
            await self._stale(query, task)
            return
        try:
            notice = await self._act(query, callback, task, member)
        except ApprovalError as error:
            if error.code == errors.ALREADY_DECIDED:
                await self._stale(query, await adapter.task(task.id) or task)
                return
            notice = shorten(error.detail, 190)
        await adapter.answer(query, notice)

    async def _stale(self, query: CallbackQuery, task: Task) -> None:
        """A press on an ended decision: say who ended it and show it ended."""
        adapter = self.adapter
        outcome = render_ending(task)
        text = f"Already {outcome.ago(adapter.now())}" if outcome else "Already decided"
        await adapter.answer(query, shorten(text, 190))
        message = query.message
        if isinstance(message, Message):
            await adapter.refresh_pressed(message, task)

    async def _act(
        self, query: CallbackQuery, callback: ChatCallback, task: Task, member: Principal
    ) -> str:
        service = self.adapter.service
        where = (member, task.workspace_id, task.run_id, task.key)
        action = callback.action
        if action == "approve":
            await service.approve(*where, via="telegram")
            return "✅ Approved"
        if action == "deny":
            await service.deny(*where, via="telegram")
            return "❌ Denied"
        if action in ("deny_reason", "answer_text"):
            await self._prompt(query, task, action)
            return "Reply to my message, please"
        if action == "decline":
            await service.resolve(*where, outcome="failed", via="telegram")
            return "🚫 Declined"
        if action == "option":
            content = self._option(task, callback.option)
            await service.resolve(*where, content=content, via="telegram")
            return shorten(f"💬 Answered: {content}", 190)
        if action == "toggle":
            return await self._toggle(query, task, callback.option)
        if action == "submit":
            chosen = await self.adapter.chosen(task.id)
            options = self._options(task)
            if not chosen:
                return "Choose at least one option first"
            labels = [options[i] for i in sorted(chosen) if i < len(options)]
            await service.resolve(*where, content=labels, via="telegram")
            return shorten("💬 Answered: " + ", ".join(labels), 190)
        if action == "expand":
            posted = await self.adapter.expand(query, task)
            return "Posted below" if posted else "It has a message of its own already"
        return EXPIRED_BUTTON

    @staticmethod
    def _options(task: Task) -> list[str]:
        question: Any = task.tool_input if isinstance(task.tool_input, dict) else {}
        options = question.get("options")
        return [str(o) for o in options] if isinstance(options, list) else []

    def _option(self, task: Task, index: int | None) -> str:
        options = self._options(task)
        if index is None or not 0 <= index < len(options):
            raise ApprovalError(errors.INVALID_OPTION, "that option no longer exists", 422)
        return options[index]

    async def _toggle(self, query: CallbackQuery, task: Task, index: int | None) -> str:
        options = self._options(task)
        if index is None or not 0 <= index < len(options):
            return EXPIRED_BUTTON
        chosen = await self.adapter.toggle(task.id, index)
        message = query.message
        if isinstance(message, Message):
            await self.adapter.refresh_pressed(message, task, max_wait=3.0)
        mark = "☑" if index in chosen else "☐"
        return shorten(f"{mark} {options[index]}", 190)

    async def _prompt(self, query: CallbackQuery, task: Task, action: str) -> None:
        adapter = self.adapter
        message = query.message
        if not isinstance(message, Message):
            return
        user = query.from_user
        who = f'<a href="tg://user?id={user.id}">{esc(user.first_name or "you")}</a>'
        template, placeholder = _PROMPTS[action]
        what = "this question" if task.kind == "ask" else f"<b>{esc(task.tool)}</b>"
        prompt = await adapter.send(
            message.chat_id,
            template.format(who=who, what=what),
            reply_to=message.message_id,
            force_reply=placeholder,
            max_wait=10.0,
        )
        record = ChatPrompt(
            CHANNEL, str(message.chat_id), str(prompt.message_id), task.id, action, str(user.id)
        )
        await adapter.chats.add_prompt(record, adapter.now())

    # ForceReply replies ------------------------------------------------------------------------
    async def on_reply(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or message.reply_to_message is None or not message.text:
            return
        adapter = self.adapter
        chat_id, replied = str(message.chat_id), str(message.reply_to_message.message_id)
        prompt = await adapter.chats.prompt(CHANNEL, chat_id, replied)
        if prompt is None:
            return  # a reply to something else
        task = await adapter.task(prompt.task_id)
        if task is None or message.from_user is None:
            return
        member = await adapter.member(message.from_user.id, task.workspace_id)
        if member is None:
            await adapter.reply(message, NOT_APPROVER)
            return
        if not task.parked:
            outcome = render_ending(task)
            await adapter.reply(message, f"Already {outcome.ago(adapter.now())}" if outcome else "")
            return
        if not await adapter.chats.drop_prompt(CHANNEL, chat_id, replied):
            return  # another reply took it first
        where = (member, task.workspace_id, task.run_id, task.key)
        try:
            if prompt.action == "deny_reason":
                await adapter.service.deny(*where, reason=message.text, via="telegram")
            else:
                await adapter.service.resolve(*where, content=message.text, via="telegram")
        except ApprovalError as error:
            if error.code == errors.ALREADY_DECIDED:
                ended = render_ending(await adapter.task(task.id) or task)
                await adapter.reply(message, f"Already {ended.ago(adapter.now())}" if ended else "")
            else:
                await adapter.reply(message, shorten(error.detail, 300))

    # commands ----------------------------------------------------------------------------------
    async def on_whoami(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """/start and /whoami: the ids an operator needs to map people and pick the chat."""
        message = update.effective_message
        if message is None or message.from_user is None:
            return
        text = (
            f"Your Telegram user id: <code>{message.from_user.id}</code>\n"
            f"This chat's id: <code>{message.chat_id}</code>\n"
            "An operator maps you with <code>approvalbot admin member add --workspace W "
            f"--name NAME --telegram-user-id {message.from_user.id}</code>"
        )
        await self.adapter.reply(message, text, html=True)
