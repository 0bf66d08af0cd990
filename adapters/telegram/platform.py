"""Telegram as a chat platform (adapters/chat/port.py): decisions, notices and digest pages as
HTML messages with inline keyboards, private answers to presses, ForceReply for free text.

Telegram has no threads: a run's decisions go to the workspace's chat itself. Ids cross the
port as strings ("-100200300", "17") and become integers again here.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from telegram.error import BadRequest, Forbidden

from adapters.chat.context import CoreLink
from adapters.chat.globs import Globs
from adapters.chat.offers import EDIT_GLOB, GLOB_ACTION, Offer, edit_key, input_to_edit, proposed
from adapters.chat.port import MessageRef, Notice, Page, Place, Post, Press, Unreachable
from adapters.telegram.calls import TelegramCalls
from adapters.telegram.format import card_html, digest_buttons, digest_html, esc, keyboard
from bot.config import TelegramConfig
from bot.domain import Member, Run, Task
from bot.ports import ChatPrompt, ChatState
from bot.rendering import Action

CHANNEL = "telegram"
_PROMPTS = {
    "deny_reason": (
        "📝 {who}, reply to this message with your reason for denying {what}.",
        "Reason",
    ),
    "answer_text": ("💬 {who}, reply to this message with your answer to {what}.", "Your answer"),
    "edit": (
        "✏️ {who}, reply to this message with the new {input} for {what}: it is approved as you"
        " write it (the rules look at it again).",
        "New {input}",
    ),
    GLOB_ACTION: (
        "✏️ {who}, reply to this message with the glob the {path} of {what} calls must match"
        " (<code>*</code> matches any text): the offer is shown again with it, to choose where"
        " to allow it.",
        "Glob",
    ),
}


def is_group(chat: str) -> bool:
    """Groups, supergroups and channels have negative ids; people's private chats positive.
    Telegram counts messages per minute in groups only."""
    return chat.startswith("-")


def _notice_html(notice: Notice) -> str:
    bold = f"<b>{esc(notice.bold)}</b>" if notice.bold else ""
    text = " ".join(part for part in (notice.icon, bold, esc(notice.text)) if part)
    if notice.mentions:
        text += " — " + " ".join(notice.mentions)
    return "\n".join([text, *(esc(line) for line in notice.lines)])


def offer_message(offer: Offer) -> tuple[str, InlineKeyboardMarkup]:
    """An offer as a message: the rule (masked), the past calls it would have allowed, a row
    of scopes and, where the glob may change, "✏️ Edit glob" below them."""
    lines = offer.lines()
    notice = Notice(
        "— " + lines[0], bold="Approve & allow like this?", icon="🔁", lines=tuple(lines[1:])
    )
    rows = [[InlineKeyboardButton(label, callback_data=i) for _, label, i in offer.scopes]]
    if offer.edit_glob is not None:
        rows.append([InlineKeyboardButton(EDIT_GLOB, callback_data=offer.edit_glob)])
    return _notice_html(notice), InlineKeyboardMarkup(rows)


def _notice_keyboard(notice: Notice) -> InlineKeyboardMarkup | None:
    if not notice.buttons:
        return None
    row = [InlineKeyboardButton(label, callback_data=i) for label, i in notice.buttons]
    return InlineKeyboardMarkup([row])


class TelegramPlatform:
    name = CHANNEL

    def __init__(
        self, config: TelegramConfig, calls: TelegramCalls, chats: ChatState, link: CoreLink,
        running: Callable[[], bool],
    ) -> None:  # fmt: skip
        self.config = config
        self.calls = calls
        self.chats = chats
        self.link = link
        self._running = running
        self.globs = Globs(CHANNEL, chats)

    def place_for(self, workspace_id: str) -> Place | None:
        chat = self.config.workspace_chats.get(workspace_id, self.config.chat_id)
        return None if chat is None else Place(str(chat))

    async def direct(self, member: Member) -> Place | None:
        """A person's private chat with the bot has their user id as its id (they must have
        pressed Start once, or Telegram refuses to deliver)."""
        user = member.telegram_user_id
        return None if user is None else Place(str(user))

    async def healthy(self) -> bool:
        return self._running()

    async def open_thread(self, run: Run, place: Place, *, posting: str | None = None) -> Place:
        return place

    def mention(self, member: Member) -> str | None:
        if member.telegram_user_id is None:
            return None
        name = html.escape(member.name, quote=False)
        return f'<a href="tg://user?id={member.telegram_user_id}">{name}</a>'

    def _page(self, page: Page) -> tuple[str, object]:
        text, numbered = digest_html(list(page.tasks), self.link.now(), page.inbox_url,
                                     done=page.done)  # fmt: skip
        ids: dict[tuple[str, str, int | None], str] = {
            (task_id, action, None): v for (task_id, action), v in page.buttons.items()
        }
        return text, digest_buttons(numbered, ids)

    async def post(
        self, place: Place, message: Post | Notice | Page, *, reply_to: MessageRef | None = None,
        max_wait: float | None = None,
    ) -> MessageRef:  # fmt: skip
        try:
            return await self._post(place, message, reply_to, max_wait)
        except Forbidden:  # blocked by the person, or never started; removed from the group
            raise Unreachable(f"telegram refuses to post to chat {place.chat}") from None
        except BadRequest as error:
            if "chat not found" in str(error).lower():
                raise Unreachable(f"telegram has no chat {place.chat}") from None
            raise

    async def _post(
        self, place: Place, message: Post | Notice | Page, reply_to: MessageRef | None,
        max_wait: float | None,
    ) -> MessageRef:  # fmt: skip
        chat = int(place.chat)
        reply = int(reply_to.id) if reply_to is not None else None
        if isinstance(message, Page):  # booked by the digest worker already
            text, markup = self._page(message)
            sent = await self.calls.send(chat, text, markup=markup, reply_to=reply,  # type: ignore[arg-type]
                                         pace=False)  # fmt: skip
        elif isinstance(message, Post):
            sent = await self.calls.send(
                chat, card_html(message.card), reply_to=reply, max_wait=max_wait,
                markup=keyboard(message.card.buttons, message.buttons), decision=True,
            )  # fmt: skip
        else:
            sent = await self.calls.send(
                chat, _notice_html(message), reply_to=reply, max_wait=max_wait,
                markup=_notice_keyboard(message),
            )  # fmt: skip
        return MessageRef(place.chat, str(sent.message_id))

    async def edit(
        self, ref: MessageRef, message: Post | Page | Notice, *, max_wait: float | None = None
    ) -> bool:
        chat, message_id = int(ref.chat), int(ref.id)
        if isinstance(message, Notice):
            return await self.calls.edit(
                chat, message_id, _notice_html(message), _notice_keyboard(message),
                max_wait=max_wait,
            )  # fmt: skip
        if isinstance(message, Page):
            text, markup = self._page(message)
            return await self.calls.edit(chat, message_id, text, markup, pace=False)  # type: ignore[arg-type]
        markup = keyboard(message.card.buttons, message.buttons)
        return await self.calls.edit(
            chat, message_id, card_html(message.card), markup, max_wait=max_wait
        )

    async def tell(self, press: Press, text: str, *, alert: bool = False) -> None:
        if isinstance(press.handle, CallbackQuery):
            await self.calls.answer(press.handle, text, alert=alert)

    async def offer_rule(self, press: Press, offer: Offer) -> bool:
        """The offer as a reply to the pressed decision, a button per scope: anyone who may
        decide can confirm it (the first press decides, as on the decision itself)."""
        query = press.handle
        if press.message is None or not isinstance(query, CallbackQuery):
            return False
        text, markup = offer_message(offer)
        chat, reply_to = int(press.message.chat), int(press.message.id)
        await self.calls.send(chat, text, markup=markup, reply_to=reply_to, max_wait=10.0)
        await self.calls.answer(query, "Choose where to allow it, below")
        return True

    async def show_offer(self, chat: str, offer: Offer, *, message: str | None,
                         reply_to: int) -> None:  # fmt: skip
        """Show `offer` again (a glob was changed): in place of the offer `message`, or, when
        that cannot be edited any more (or is not known), as a new one under `reply_to`."""
        text, markup = offer_message(offer)
        if message is not None and await self.calls.edit(
            int(chat), int(message), text, markup, max_wait=10.0
        ):
            return
        await self.calls.send(int(chat), text, markup=markup, reply_to=reply_to, max_wait=10.0)

    async def ask_text(self, press: Press, task: Task, action: Action) -> bool:
        """A ForceReply prompt under the pressed message; the reply that answers it is looked
        up by its message id (handlers.py)."""
        query = press.handle
        if press.message is None or not isinstance(query, CallbackQuery):
            return False
        if not isinstance(query.message, Message) or action not in _PROMPTS:
            return False
        who = f'<a href="tg://user?id={press.user}">{esc(press.user_name or "you")}</a>'
        template, placeholder = _PROMPTS[action]
        what = "this question" if task.kind == "ask" else f"<b>{esc(task.tool)}</b>"
        kind = "command" if edit_key(input_to_edit(task)) is not None else "input (JSON)"
        path = esc(str(proposed(task).get("path", "input")))
        prompt = await self.calls.send(
            int(press.message.chat), template.format(who=who, what=what, input=kind, path=path),
            reply_to=int(press.message.id), force_reply=placeholder.format(input=kind)[:64],
            max_wait=10.0,
        )  # fmt: skip
        chat, prompt_id = press.message.chat, str(prompt.message_id)
        if action == GLOB_ACTION:  # the offer to show again once a glob comes
            await self.globs.asked(task.id, chat, prompt_id, press.message.id)
        record = ChatPrompt(CHANNEL, chat, prompt_id, task.id, action, press.user)
        await self.chats.add_prompt(record, self.link.now())
        await self.calls.answer(query, "Reply to my message, please")
        return True
