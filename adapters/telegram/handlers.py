"""Updates from Telegram handed to the shared chat layer: button presses and ForceReply replies
(adapters/chat/presses.py decides what they do), and /whoami."""

from __future__ import annotations

import logging

from telegram import Message, Update
from telegram.ext import ContextTypes

from adapters.chat.offers import GLOB_ACTION
from adapters.chat.port import MessageRef, Press
from adapters.chat.presses import Presses
from adapters.telegram.calls import TelegramCalls
from adapters.telegram.platform import CHANNEL, TelegramPlatform
from bot.ports import ChatState

log = logging.getLogger(__name__)
OFFER_NOT_SHOWN = "Could not show the offer with your glob: press ✏️ Edit glob again"


class Handlers:
    def __init__(
        self, presses: Presses, chats: ChatState, calls: TelegramCalls, platform: TelegramPlatform
    ) -> None:
        self.presses = presses
        self.chats = chats
        self.calls = calls
        self.platform = platform

    async def on_callback(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None:
            return
        message = query.message
        ref = None
        if isinstance(message, Message):
            ref = MessageRef(str(message.chat_id), str(message.message_id))
        user = query.from_user
        press = Press(str(user.id), user.first_name or "", query.data or "", ref, handle=query)
        await self.presses.on_press(press)

    async def on_reply(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or message.reply_to_message is None or not message.text:
            return
        chat, replied = str(message.chat_id), str(message.reply_to_message.message_id)
        prompt = await self.chats.prompt(CHANNEL, chat, replied)
        if prompt is None:
            return  # a reply to something else
        task = await self.presses.link.task(prompt.task_id)
        if task is None or message.from_user is None:
            return

        async def claim() -> bool:  # one reply per prompt counts
            return await self.chats.drop_prompt(CHANNEL, chat, replied)

        if prompt.action == GLOB_ACTION:  # "✏️ Edit glob": the offer shown again with it
            user = str(message.from_user.id)
            notice, offer = await self.presses.on_glob(user, task, message.text, claim, chat)
            if offer is not None:
                shown = await self.platform.globs.offer_of(task.id, chat, replied)
                try:
                    await self.platform.show_offer(
                        chat, offer, message=shown, reply_to=message.message_id
                    )
                except Exception as error:  # busy, rate limited, unreachable: say so
                    log.info("could not show an edited offer (%s)", type(error).__name__)
                    notice = OFFER_NOT_SHOWN
            await self.calls.reply(message, notice)
            return
        notice = await self.presses.on_text(
            str(message.from_user.id), task, prompt.action, message.text, claim
        )
        await self.calls.reply(message, notice)

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
        await self.calls.reply(message, text, html=True)
