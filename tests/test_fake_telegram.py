"""The fake Bot API server, driven by the real python-telegram-bot."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from telegram import (
    Bot,
    ForceReply,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from telegram.error import BadRequest, Conflict, InvalidToken, NetworkError, RetryAfter, TimedOut
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    ContextTypes,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from tests.fakes.telegram_api import FakeTelegram, parse_html

TOKEN = "123456:TEST-token_abc"
GROUP = -100200300
PRIVATE = 4242
ALICE = 1001


def keyboard(*data: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(f"b{i}", callback_data=d)] for i, d in enumerate(data)]
    )


@pytest.fixture(autouse=True)
def _retry_after_as_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    """PTB 22 warns unless RetryAfter.retry_after is a timedelta (the coming default)."""
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    server = FakeTelegram(TOKEN)
    server.add_chat(GROUP, "supergroup", "Approvers")
    server.add_chat(PRIVATE, "private", first_name="Alice")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def local_request(read_timeout: float = 2.0) -> HTTPXRequest:
    # plain http to 127.0.0.1: not loading CA certificates saves ~0.1 s per client
    return HTTPXRequest(
        read_timeout=read_timeout, connect_timeout=2.0, httpx_kwargs={"verify": False}
    )


def make_bot(fake: FakeTelegram, token: str = TOKEN, read_timeout: float = 2.0) -> Bot:
    return Bot(
        token,
        base_url=fake.base_url,
        request=local_request(read_timeout),
        get_updates_request=local_request(),
    )


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    async with make_bot(fake) as b:
        yield b


@contextlib.asynccontextmanager
async def polling(
    fake: FakeTelegram, *handlers: Any
) -> AsyncIterator[Application[Any, Any, Any, Any, Any, Any]]:
    app = (
        ApplicationBuilder()
        .token(TOKEN)
        .base_url(fake.base_url)
        .request(local_request())
        .get_updates_request(local_request())
        .build()
    )
    for handler in handlers:
        app.add_handler(handler)
    await app.initialize()
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(poll_interval=0, timeout=1)
    try:
        yield app
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()


# ------------------------------------------------------------------------------------------------


async def test_send_message_round_trip(fake: FakeTelegram, bot: Bot) -> None:
    me = await bot.get_me()
    assert me.is_bot and me.username == "approvalbot_test_bot"

    msg = await bot.send_message(
        GROUP,
        "<b>Approve</b> <code>rm -rf /tmp/x</code> &lt;ok&gt;",
        parse_mode="HTML",
        reply_markup=keyboard("a:1", "d:1"),
    )
    assert msg.message_id == 1
    assert msg.chat.id == GROUP and msg.chat.title == "Approvers"
    assert msg.date.timestamp() > 0
    assert msg.from_user is not None and msg.from_user.is_bot
    assert msg.text == "Approve rm -rf /tmp/x <ok>"
    assert [(e.type, e.offset, e.length) for e in msg.entities] == [
        ("bold", 0, 7),
        ("code", 8, 13),
    ]
    assert msg.reply_markup is not None
    assert msg.reply_markup.inline_keyboard[1][0].callback_data == "d:1"

    (sent,) = fake.sent
    assert sent.raw_text.startswith("<b>Approve</b>") and sent.parse_mode == "HTML"
    assert sent.reply_markup == {
        "inline_keyboard": [
            [{"text": "b0", "callback_data": "a:1"}],
            [{"text": "b1", "callback_data": "d:1"}],
        ]
    }
    assert sent.callback_data == ["a:1", "d:1"]
    assert fake.messages[(GROUP, 1)].text == msg.text
    assert [c.method for c in fake.calls] == ["getMe", "getMe", "sendMessage"]

    reply = await bot.send_message(GROUP, "nudge", reply_to_message_id=msg.message_id)
    assert reply.reply_to_message is not None
    assert reply.reply_to_message.message_id == msg.message_id
    assert fake.sent[-1].reply_to_message_id == msg.message_id


async def test_unknown_chat_and_wrong_token(fake: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"^Chat not found$"):
        await bot.send_message(777, "hello")
    assert fake.rejected[-1].description == "Bad Request: chat not found"
    with pytest.raises(InvalidToken):
        async with make_bot(fake, token="999:WRONG"):
            pass
    assert fake.rejected[-1].status == 401


async def test_callback_data_limit_is_64_utf8_bytes(fake: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(GROUP, "ok", reply_markup=keyboard("x" * 64))
    await bot.send_message(GROUP, "ok", reply_markup=keyboard("é" * 32))  # 64 bytes
    for data in ("x" * 65, "é" * 33):
        with pytest.raises(BadRequest, match="Button_data_invalid"):
            await bot.send_message(GROUP, "too long", reply_markup=keyboard(data))
    assert fake.rejected[-1].description == "Bad Request: BUTTON_DATA_INVALID"
    with pytest.raises(BadRequest, match=r"(?i)text buttons are not allowed"):
        await bot.send_message(GROUP, "empty", reply_markup=keyboard(""))
    with pytest.raises(BadRequest, match=r"(?i)reply markup is too long"):
        await bot.send_message(GROUP, "many", reply_markup=keyboard(*map(str, range(101))))
    assert len(fake.sent) == 2


async def test_text_length_is_counted_after_entity_parsing(fake: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(GROUP, "a" * 4096)
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(GROUP, "a" * 4097)
    # tags count nothing, an entity counts one character
    await bot.send_message(GROUP, "<b>" + "a" * 4096 + "</b>", parse_mode="HTML")
    sent = await bot.send_message(GROUP, "&lt;" * 4096, parse_mode="HTML")
    assert sent.text == "<" * 4096
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(GROUP, "&lt;" * 4097, parse_mode="HTML")
    # leading/trailing whitespace is trimmed before counting, as Telegram does
    await bot.send_message(GROUP, "\n" + "a" * 4096 + "\n")
    # an emoji outside the BMP is two UTF-16 code units
    with pytest.raises(BadRequest):
        await bot.send_message(GROUP, "😀" * 2049)
    with pytest.raises(BadRequest, match="Message_too_long"):
        await bot.edit_message_text("a" * 4097, GROUP, sent.message_id)
    with pytest.raises(BadRequest, match="Message text is empty"):
        await bot.send_message(GROUP, "<b> </b>", parse_mode="HTML")
    assert len(fake.sent) == 4


@pytest.mark.parametrize(
    ("html", "detail"),
    [
        ("<foo>x</foo>", 'Unsupported start tag "foo" at byte offset 0'),
        ("<b>x", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ("1 < 2", 'Unsupported start tag "" at byte offset 2'),
        ("</b>", "Unexpected end tag at byte offset 0"),
        ("<span>x</span>", 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ("a & b", "Unsupported HTML entity at byte offset 2"),
    ],
)
async def test_malformed_html_is_refused(
    fake: FakeTelegram, bot: Bot, html: str, detail: str
) -> None:
    with pytest.raises(BadRequest, match="Can't parse entities"):
        await bot.send_message(GROUP, html, parse_mode="HTML")
    assert fake.rejected[-1].description.startswith("Bad Request: can't parse entities: " + detail)
    assert fake.sent == []


async def test_supported_html_parses_like_telegram(bot: Bot) -> None:
    msg = await bot.send_message(
        GROUP,
        '<pre><code class="language-bash">ls &amp;&amp; rm</code></pre>'
        '<blockquote expandable>why</blockquote><a href="https://x.example/d/1">full</a>'
        "<tg-spoiler>s</tg-spoiler><u>u</u><s>s</s>&#128512;&quot;",
        parse_mode="HTML",
    )
    assert msg.text == 'ls && rmwhyfullsus😀"'
    types = {e.type: e for e in msg.entities}
    assert types["pre"].language == "bash" and types["pre"].length == 8
    assert types["expandable_blockquote"].offset == 8
    assert types["text_link"].url == "https://x.example/d/1"
    assert {"spoiler", "underline", "strikethrough"} <= set(types)
    # Telegram itself keeps a bare "&" literally; the lenient setting does the same
    assert parse_html("a & b", strict_ampersand=False) == ("a & b", [])


async def test_edit_rules(fake: FakeTelegram, bot: Bot) -> None:
    msg = await bot.send_message(
        GROUP, "<b>pending</b>", parse_mode="HTML", reply_markup=keyboard("a:1")
    )
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_text(
            "<b>pending</b>", GROUP, msg.message_id, parse_mode="HTML", reply_markup=keyboard("a:1")
        )
    # an edit without reply_markup removes the keyboard, as on Telegram
    edited = await bot.edit_message_text("<b>pending</b>", GROUP, msg.message_id, parse_mode="HTML")
    assert isinstance(edited, Message)
    assert edited.reply_markup is None and edited.edit_date is not None
    assert fake.messages[(GROUP, msg.message_id)].reply_markup is None
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_reply_markup(GROUP, msg.message_id, reply_markup=None)
    await bot.edit_message_reply_markup(GROUP, msg.message_id, reply_markup=keyboard("b:2"))
    assert fake.messages[(GROUP, msg.message_id)].callback_data == ["b:2"]
    assert [e.method for e in fake.edits] == ["editMessageText", "editMessageReplyMarkup"]
    assert fake.sent[0].callback_data == ["a:1"]  # `sent` keeps what was sent
    with pytest.raises(BadRequest, match="Message to edit not found"):
        await bot.edit_message_text("x", GROUP, 999)
    prompt = await bot.send_message(GROUP, "reason?", reply_markup=ForceReply())
    with pytest.raises(BadRequest, match="Message can't be edited"):
        await bot.edit_message_text("x", GROUP, prompt.message_id)
    assert await bot.delete_message(GROUP, prompt.message_id)
    with pytest.raises(BadRequest, match="Message to delete not found"):
        await bot.delete_message(GROUP, prompt.message_id)
    assert fake.deleted == [(GROUP, prompt.message_id)]


async def test_pressed_button_reaches_callback_handler(fake: FakeTelegram) -> None:
    seen: list[tuple[str | None, int]] = []

    async def on_press(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        assert query is not None and query.message is not None
        seen.append((query.data, query.from_user.id))
        await query.answer("Approved", show_alert=False)
        await query.edit_message_text(f"✅ Approved by {query.from_user.first_name}")

    async with polling(fake, CallbackQueryHandler(on_press)) as app:
        msg = await app.bot.send_message(GROUP, "Run rm?", reply_markup=keyboard("a:1", "d:1"))
        update_id = fake.press_button(
            chat_id=GROUP, message_id=msg.message_id, user_id=ALICE, data="a:1", username="alice"
        )
        await fake.wait_for(lambda: fake.edits)
    assert seen == [("a:1", ALICE)]
    (answer,) = fake.callback_answers
    assert answer.callback_query_id == str(update_id)
    assert answer.text == "Approved" and answer.show_alert is False
    final = fake.messages[(GROUP, msg.message_id)]
    assert final.text == "✅ Approved by Alice" and final.reply_markup is None
    with pytest.raises(LookupError):  # the keyboard is gone: nothing left to press
        fake.press_button(chat_id=GROUP, message_id=msg.message_id, user_id=ALICE, data="a:1")
    assert fake.pending_updates == []  # polling confirmed every update


async def test_answer_callback_query_limits(fake: FakeTelegram, bot: Bot) -> None:
    msg = await bot.send_message(GROUP, "q", reply_markup=keyboard("a:1"))
    query_id = str(
        fake.press_button(chat_id=GROUP, message_id=msg.message_id, user_id=ALICE, data="a:1")
    )
    with pytest.raises(BadRequest, match="Message_too_long"):
        await bot.answer_callback_query(query_id, "x" * 201, show_alert=True)
    assert await bot.answer_callback_query(query_id, "x" * 200, show_alert=True)
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query(query_id, "again")
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query("no-such-query")
    assert [a.show_alert for a in fake.callback_answers] == [True]


async def test_force_reply_answer_reaches_message_handler(fake: FakeTelegram) -> None:
    replies: list[tuple[str | None, int | None]] = []

    async def on_reply(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        assert message is not None and message.reply_to_message is not None
        replies.append((message.text, message.reply_to_message.message_id))

    async with polling(fake, MessageHandler(filters.TEXT & filters.REPLY, on_reply)) as app:
        prompt = await app.bot.send_message(
            GROUP, "📝 Reason for denying?", reply_markup=ForceReply(selective=True)
        )
        assert fake.sent[-1].reply_markup == {"force_reply": True, "selective": True}
        # privacy mode: a plain group message that is no reply to the bot never reaches it
        assert fake.send_user_message(chat_id=GROUP, user_id=ALICE, text="chatter") == 0
        fake.send_user_message(
            chat_id=GROUP, user_id=ALICE, text="too risky", reply_to_message_id=prompt.message_id
        )
        await fake.wait_for(lambda: replies)
    assert replies == [("too risky", prompt.message_id)]


async def test_get_updates_long_poll_and_offset(fake: FakeTelegram, bot: Bot) -> None:
    first = fake.send_user_message(chat_id=PRIVATE, user_id=ALICE, text="/start")
    updates = await bot.get_updates(timeout=0)
    assert [u.update_id for u in updates] == [first]
    assert updates[0].message is not None and updates[0].message.text == "/start"
    assert await bot.get_updates(offset=first + 1, timeout=0) == ()  # confirmed
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    loop.call_later(0.2, lambda: fake.send_user_message(chat_id=PRIVATE, user_id=ALICE, text="hi"))
    (update,) = await bot.get_updates(offset=first + 1, timeout=3)
    assert 0.15 < time.monotonic() - started < 2
    assert update.message is not None and update.message.text == "hi"
    assert await bot.get_updates(offset=update.update_id + 1, timeout=0) == ()


async def test_retry_after_from_injected_429(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_next(1, kind="429", retry_after=3)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(GROUP, "x")
    assert caught.value.retry_after == dtm.timedelta(seconds=3)
    assert fake.rejected[-1].status == 429 and fake.sent == []
    await bot.send_message(GROUP, "x")  # only the next call failed
    assert len(fake.sent) == 1


async def test_enforced_rate_limits() -> None:
    async with FakeTelegram(TOKEN, enforce_rate_limits=True) as fake:
        fake.add_chat(PRIVATE, "private")
        fake.add_chat(GROUP, "supergroup")
        async with make_bot(fake) as bot:
            for _ in range(3):  # a burst of 3 is tolerated…
                await bot.send_message(PRIVATE, "x")
            with pytest.raises(RetryAfter) as caught:  # …then about 1 message/s
                await bot.send_message(PRIVATE, "x")
            assert caught.value.retry_after == dtm.timedelta(seconds=1)

            fake.per_chat_burst = 100  # isolate the group limit: 20 per minute
            for _ in range(20):
                await bot.send_message(GROUP, "x")
            with pytest.raises(RetryAfter) as caught:
                await bot.send_message(GROUP, "x")
            retry_after = caught.value.retry_after
            assert isinstance(retry_after, dtm.timedelta)
            assert dtm.timedelta(seconds=58) <= retry_after <= dtm.timedelta(seconds=60)
    assert len(fake.rejections(429)) == 2 and len(fake.sent) == 23


async def test_injected_server_errors_are_network_errors(fake: FakeTelegram, bot: Bot) -> None:
    fake.fail_next(1, kind="500")
    fake.fail_next(1, kind="502")
    for _ in range(2):
        with pytest.raises(NetworkError) as caught:
            await bot.send_message(GROUP, "x")
        assert not isinstance(caught.value, BadRequest)
    assert [f[1] for f in fake.faults_injected] == ["500", "502"]
    assert fake.sent == []
    await bot.get_me()  # getMe is not among the default fault methods
    await bot.send_message(GROUP, "x")
    assert len(fake.sent) == 1


async def test_timeouts(fake: FakeTelegram) -> None:
    async with make_bot(fake, read_timeout=0.2) as bot:
        fake.fail_next(1, kind="timeout")
        with pytest.raises(TimedOut):
            await bot.send_message(GROUP, "lost")
        assert fake.sent == []
        fake.fail_next(1, kind="timeout_after_apply")
        with pytest.raises(TimedOut):
            await bot.send_message(GROUP, "delivered, answer lost")
        assert [m.text for m in fake.sent] == ["delivered, answer lost"]


async def test_fault_rate_is_seeded_and_mixed() -> None:
    async def run() -> list[tuple[str, str]]:
        async with FakeTelegram(TOKEN, fault_rate=0.5, fault_kinds=("500", "429")) as fake:
            fake.add_chat(GROUP)
            async with make_bot(fake) as bot:
                for _ in range(20):
                    with contextlib.suppress(NetworkError, RetryAfter):
                        await bot.send_message(GROUP, "x")
            assert len(fake.sent) + len(fake.faults_injected) == 20
            return fake.faults_injected

    first, second = await run(), await run()
    assert first == second and {kind for _, kind in first} == {"500", "429"}


async def test_webhook_secret_and_delivery(fake: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match="Secret token contains unallowed characters"):
        await bot.set_webhook("http://127.0.0.1:1/hook", secret_token="bad:secret")
    with pytest.raises(BadRequest, match=r"(?i)an https url must be provided"):
        await bot.set_webhook("http://example.com/hook")

    received: list[Update] = []

    async def hook(request: web.Request) -> web.Response:  # what our webhook endpoint does
        if request.headers.get("X-Telegram-Bot-Api-Secret-Token") != "s3cr3t_-X":
            return web.Response(status=403)
        received.append(Update.de_json(await request.json(), bot))
        return web.Response()

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        assert await bot.set_webhook(f"http://127.0.0.1:{port}/hook", secret_token="s3cr3t_-X")
        info = await bot.get_webhook_info()
        assert info.url.endswith("/hook") and fake.webhook_secret == "s3cr3t_-X"
        with pytest.raises(Conflict):
            await bot.get_updates(timeout=0)

        update = {
            "message": {
                "message_id": 1,
                "date": 1,
                "chat": {"id": PRIVATE, "type": "private"},
                "text": "hi",
            }
        }
        assert await fake.post_to_webhook(update) == 200
        assert await fake.post_to_webhook(update, secret="wrong") == 403
        assert await fake.post_to_webhook(update, secret=None) == 403
        # while a webhook is set, users' actions are POSTed to it
        update_id = fake.send_user_message(chat_id=PRIVATE, user_id=ALICE, text="/start")
        await fake.wait_for(lambda: fake.webhook_deliveries)
        assert fake.webhook_deliveries == [(update_id, 200)]
        assert [u.message.text for u in received if u.message] == ["hi", "/start"]
    finally:
        await runner.cleanup()
    assert await bot.delete_webhook()
    assert await bot.get_updates(timeout=0) == ()
