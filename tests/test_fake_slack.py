"""The fake Slack Web API, driven by the real slack_sdk AsyncWebClient (and slack-bolt)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_api import FakeSlack, check_blocks, sign

BOT = "xoxb-1-test-bot-token"
APP = "xapp-1-A0FAKEAPP-1-test-app-token"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHAN = "C0APPROVALS"
OUTSIDE = "C0NOTJOINED"
ALICE = "U0ALICE"
BOB = "U0BOB"
CAROL = "U0CAROL"  # known user, not in CHAN

# slack_sdk warns when a message has no top-level text; some tests send none on purpose
pytestmark = pytest.mark.filterwarnings("ignore:The top-level `text` argument:UserWarning")


def section(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}, **extra}


def button(action_id: str, text: str = "Approve", **extra: Any) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        **extra,
    }


def option(value: str, text: str | None = None) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": text or value}, "value": value}


def modal(**extra: Any) -> dict[str, Any]:
    view: dict[str, Any] = {
        "type": "modal",
        "callback_id": "deny_reason",
        "title": {"type": "plain_text", "text": "Deny request"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": "req-42",
        "blocks": [
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Reason"},
                "element": {"type": "plain_text_input", "action_id": "text", "multiline": True},
            }
        ],
    }
    view.update(extra)
    return view


def approval_blocks() -> list[dict[str, Any]]:
    return [
        {"type": "header", "text": {"type": "plain_text", "text": "Approval needed"}},
        section("*deploy* to prod", block_id="summary"),
        {
            "type": "actions",
            "block_id": "decide",
            "elements": [
                button("approve", value="req-42", style="primary"),
                button("deny", "Deny", value="req-42", style="danger"),
            ],
        },
    ]


def make_fake(**kwargs: Any) -> FakeSlack:
    fake = FakeSlack(BOT, APP, **kwargs)
    fake.add_user(ALICE, "alice")
    fake.add_user(BOB, "bob")
    fake.add_user(CAROL, "carol")
    fake.add_channel(CHAN, [ALICE, BOB], name="approvals")
    fake.add_channel(OUTSIDE, [ALICE], bot_member=False)
    return fake


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with make_fake() as server:
        yield server


@pytest.fixture
def client(fake: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT, base_url=fake.base_url)


async def slack_error(call: Any) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        await call
    return info.value


# --------------------------------------------------------------------------------------------
# Auth, unknown methods, request encodings
# --------------------------------------------------------------------------------------------


async def test_auth_test_and_token_errors(fake: FakeSlack, client: AsyncWebClient) -> None:
    me = await client.auth_test()
    assert (me["user_id"], me["bot_id"], me["team_id"]) == ("UBOT", fake.bot_id, fake.team_id)
    assert me["url"].startswith("https://")

    bad = AsyncWebClient(token="xoxb-wrong", base_url=fake.base_url)
    assert (await slack_error(bad.auth_test())).response["error"] == "invalid_auth"
    anonymous = AsyncWebClient(base_url=fake.base_url)
    assert (await slack_error(anonymous.auth_test())).response["error"] == "not_authed"
    app_level = AsyncWebClient(token=APP, base_url=fake.base_url)
    err = await slack_error(app_level.chat_postMessage(channel=CHAN, text="x"))
    assert err.response["error"] == "not_allowed_token_type"
    err = await slack_error(client.apps_connections_open(app_token=BOT))
    assert err.response["error"] == "not_allowed_token_type"
    assert [r.error for r in fake.rejections()] == [
        "invalid_auth",
        "not_authed",
        "not_allowed_token_type",
        "not_allowed_token_type",
    ]


async def test_unknown_method(fake: FakeSlack, client: AsyncWebClient) -> None:
    err = await slack_error(client.api_call("chat.postMessagee", json={"channel": CHAN}))
    assert err.response.status_code == 200
    assert err.response["error"] == "unknown_method"
    assert fake.rejections("chat.postMessagee")[0].error == "unknown_method"


async def test_form_encoding_and_token_placement(fake: FakeSlack) -> None:
    blocks = json.dumps([section("from a form")])
    async with aiohttp.ClientSession() as http:
        # form body: the token may be a parameter, blocks/metadata JSON strings
        form = {
            "token": BOT,
            "channel": CHAN,
            "text": "hi",
            "blocks": blocks,
            "metadata": json.dumps({"event_type": "t", "event_payload": {"a": 1}}),
        }
        async with http.post(f"{fake.base_url}chat.postMessage", data=form) as resp:
            body = await resp.json()
        assert body["ok"] is True
        assert fake.message(CHAN, body["ts"]).metadata == {
            "event_type": "t",
            "event_payload": {"a": 1},
        }
        # JSON body: a token inside the body is ignored, as Slack does
        payload = {"token": BOT, "channel": CHAN, "text": "hi"}
        async with http.post(f"{fake.base_url}chat.postMessage", json=payload) as resp:
            assert (resp.status, (await resp.json())["error"]) == (200, "not_authed")
        # a form with invalid JSON blocks
        bad = {"token": BOT, "channel": CHAN, "blocks": "[{"}
        async with http.post(f"{fake.base_url}chat.postMessage", data=bad) as resp:
            assert (await resp.json())["error"] == "invalid_blocks_format"


# --------------------------------------------------------------------------------------------
# Messages, threads, metadata, updates
# --------------------------------------------------------------------------------------------


async def test_post_update_and_replies_with_metadata(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    meta = {"event_type": "approval_request", "event_payload": {"request_id": "req-42"}}
    parent = await client.chat_postMessage(
        channel=CHAN, text="Approval needed", blocks=approval_blocks(), metadata=meta
    )
    ts = parent["ts"]
    assert parent["channel"] == CHAN
    assert parent["message"]["bot_id"] == fake.bot_id
    assert parent["message"]["user"] == "UBOT"
    seconds, micros = ts.split(".")
    assert len(seconds) == 10 and len(micros) == 6

    reply1 = await client.chat_postMessage(channel=CHAN, text="first reply", thread_ts=ts)
    # a reply's ts is taken as its thread, as on Slack
    reply2 = await client.chat_postMessage(
        channel=CHAN, text="broadcast", thread_ts=reply1["ts"], reply_broadcast=True
    )
    assert float(ts) < float(reply1["ts"]) < float(reply2["ts"])
    assert reply2["message"]["thread_ts"] == ts
    assert reply2["message"]["subtype"] == "thread_broadcast"

    updated = await client.chat_update(channel=CHAN, ts=ts, text="Approved by alice")
    assert updated["text"] == "Approved by alice"
    # blocks and metadata not given: kept, as on Slack
    msg = fake.message(CHAN, ts)
    assert msg.text == "Approved by alice"
    assert msg.metadata == meta
    assert msg.blocks is not None and msg.blocks[2]["block_id"] == "decide"
    await client.chat_update(channel=CHAN, ts=ts, text="Approved", blocks=[])
    assert fake.message(CHAN, ts).blocks is None
    assert [v.text for v in msg.versions] == ["Approval needed", "Approved by alice", "Approved"]
    assert [v.via for v in msg.edits] == ["chat.update", "chat.update"]

    plain = await client.conversations_replies(channel=CHAN, ts=ts)
    messages = plain["messages"]
    assert [m["text"] for m in messages] == ["Approved", "first reply", "broadcast"]
    assert all("metadata" not in m for m in messages)
    assert messages[0]["reply_count"] == 2 and messages[0]["thread_ts"] == ts
    assert all(m["thread_ts"] == ts for m in messages)
    assert messages[0]["edited"]["user"] == "UBOT"
    assert plain["has_more"] is False

    with_meta = await client.conversations_replies(channel=CHAN, ts=ts, include_all_metadata=True)
    assert with_meta["messages"][0]["metadata"] == meta
    assert "metadata" not in with_meta["messages"][1]

    page1 = await client.conversations_replies(channel=CHAN, ts=reply2["ts"], limit=2)
    assert [m["ts"] for m in page1["messages"]] == [ts, reply1["ts"]]
    assert page1["has_more"] is True
    cursor = page1["response_metadata"]["next_cursor"]
    page2 = await client.conversations_replies(channel=CHAN, ts=ts, limit=2, cursor=cursor)
    assert [m["ts"] for m in page2["messages"]] == [reply2["ts"]]
    err = await slack_error(client.conversations_replies(channel=CHAN, ts=ts, cursor="nope"))
    assert err.response["error"] == "invalid_cursor"

    assert [m.ts for m in fake.messages_in(CHAN)] == [ts, reply1["ts"], reply2["ts"]]
    assert [m.ts for m in fake.messages_in(CHAN, ts)] == [ts, reply1["ts"], reply2["ts"]]
    assert fake.messages_in(CHAN)[2].reply_broadcast is True
    assert len(fake.calls_to("chat.postMessage")) == 3


async def test_message_errors(fake: FakeSlack, client: AsyncWebClient) -> None:
    async def error(call: Any) -> str:
        return str((await slack_error(call)).response["error"])

    assert await error(client.chat_postMessage(channel="C0NOPE", text="x")) == "channel_not_found"
    assert await error(client.chat_postMessage(channel=OUTSIDE, text="x")) == "not_in_channel"
    assert await error(client.chat_postMessage(channel=CHAN, text="")) == "no_text"
    too_long = "x" * 40_001
    assert await error(client.chat_postMessage(channel=CHAN, text=too_long)) == "msg_too_long"
    await client.chat_postMessage(channel=CHAN, text="x" * 40_000)
    assert (
        await error(client.chat_postMessage(channel=CHAN, text="x", thread_ts="1700000000.000100"))
        == "thread_not_found"
    )
    bad_meta = {"event_type": "t", "event_payload": "not an object"}
    assert (
        await error(client.chat_postMessage(channel=CHAN, text="x", metadata=bad_meta))
        == "invalid_metadata_format"
    )
    ok = await client.chat_postMessage(channel="#approvals", text="by name")
    assert ok["channel"] == CHAN

    user_msg = fake.add_user_message(CHAN, ALICE, "a human wrote this")
    assert await error(client.chat_update(channel=CHAN, ts=user_msg.ts, text="y")) == (
        "cant_update_message"
    )
    assert await error(client.chat_update(channel=CHAN, ts="1.000001", text="y")) == (
        "message_not_found"
    )
    assert await error(client.chat_update(channel="C0NOPE", ts=ok["ts"], text="y")) == (
        "channel_not_found"
    )
    bad_blocks = [{"type": "section"}]
    assert await error(client.chat_update(channel=CHAN, ts=ok["ts"], blocks=bad_blocks)) == (
        "invalid_blocks"
    )
    assert await error(client.conversations_replies(channel=CHAN, ts="1.000001")) == (
        "thread_not_found"
    )
    assert fake.message(CHAN, ok["ts"]).text == "by name"  # the refused update changed nothing
    assert {r.error for r in fake.rejections("chat.update")} == {
        "cant_update_message",
        "message_not_found",
        "channel_not_found",
        "invalid_blocks",
    }


# --------------------------------------------------------------------------------------------
# Block Kit
# --------------------------------------------------------------------------------------------


def _options(n: int) -> list[dict[str, Any]]:
    return [option(f"v{i}") for i in range(n)]


BLOCK_CASES: list[tuple[str, list[dict[str, Any]], str, bool]] = [
    # (id, blocks, expected words in the rejection detail, is a size limit)
    ("51 blocks", [{"type": "divider"}] * 51, "51 blocks in a message; the limit is 50", True),
    ("section text", [section("x" * 3001)], "section text is 3001 characters", True),
    (
        "11 fields",
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}],
        "11 section fields; the limit is 10",
        True,
    ),
    (
        "field text",
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}],
        "section field is 2001 characters; the limit is 2000",
        True,
    ),
    ("section empty", [{"type": "section"}], "a section needs text or fields", False),
    (
        "header length",
        [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
        "header text is 151 characters; the limit is 150",
        True,
    ),
    (
        "header mrkdwn",
        [{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}],
        "header text has type 'mrkdwn'; expected plain_text",
        False,
    ),
    (
        "context 11",
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
        "11 context elements; the limit is 10",
        True,
    ),
    (
        "actions 26",
        [{"type": "actions", "elements": [button(f"b{i}") for i in range(26)]}],
        "26 actions elements; the limit is 25",
        True,
    ),
    ("actions empty", [{"type": "actions", "elements": []}], "actions elements needs", False),
    (
        "input in message",
        [
            {
                "type": "input",
                "label": {"type": "plain_text", "text": "l"},
                "element": {"type": "plain_text_input", "action_id": "a"},
            }
        ],
        "input blocks are only allowed in views",
        False,
    ),
    ("unknown type", [{"type": "carousel"}], "unknown block type 'carousel'", False),
    (
        "block_id length",
        [section("x", block_id="b" * 256)],
        "block_id is 256 characters; the limit is 255",
        True,
    ),
    (
        "duplicate block_id",
        [section("x", block_id="same"), section("y", block_id="same")],
        "duplicate block_id 'same'",
        False,
    ),
    (
        "button text length",
        [{"type": "actions", "elements": [button("a", "t" * 76)]}],
        "button text is 76 characters; the limit is 75",
        True,
    ),
    (
        "button text mrkdwn",
        [
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "action_id": "a", "text": {"type": "mrkdwn", "text": "t"}}
                ],
            }
        ],
        "button text has type 'mrkdwn'",
        False,
    ),
    (
        "action_id length",
        [{"type": "actions", "elements": [button("a" * 256)]}],
        "action_id is 256 characters; the limit is 255",
        True,
    ),
    (
        "duplicate action_id",
        [
            {"type": "actions", "elements": [button("same")]},
            section("x", accessory=button("same")),
        ],
        "duplicate action_id 'same'",
        False,
    ),
    (
        "button value",
        [{"type": "actions", "elements": [button("a", value="v" * 2001)]}],
        "button value is 2001 characters; the limit is 2000",
        True,
    ),
    (
        "button url",
        [{"type": "actions", "elements": [button("a", url="https://x/" + "u" * 2991)]}],
        "button url is 3001 characters; the limit is 3000",
        True,
    ),
    (
        "button style",
        [{"type": "actions", "elements": [button("a", style="secondary")]}],
        "button style 'secondary'",
        False,
    ),
    (
        "checkboxes 11",
        [
            {
                "type": "actions",
                "elements": [{"type": "checkboxes", "action_id": "c", "options": _options(11)}],
            }
        ],
        "11 checkboxes options; the limit is 10",
        True,
    ),
    (
        "checkboxes none",
        [
            {
                "type": "actions",
                "elements": [{"type": "checkboxes", "action_id": "c", "options": []}],
            }
        ],
        "checkboxes options needs at least 1",
        False,
    ),
    (
        "option text",
        [section("x", accessory={"type": "checkboxes", "options": [option("v", "t" * 76)]})],
        "option text is 76 characters; the limit is 75",
        True,
    ),
    (
        "option value",
        [section("x", accessory={"type": "radio_buttons", "options": [option("v" * 151, "t")]})],
        "option value is 151 characters; the limit is 150",
        True,
    ),
    (
        "empty text",
        [{"type": "section", "text": {"type": "mrkdwn", "text": ""}}],
        "section text is empty",
        False,
    ),
    (
        "bad text type",
        [{"type": "section", "text": {"type": "markdown", "text": "x"}}],
        "section text has type 'markdown'",
        False,
    ),
    (
        "element not allowed",
        [{"type": "actions", "elements": [{"type": "plain_text_input", "action_id": "p"}]}],
        "element 'plain_text_input' is not allowed in a actions block",
        False,
    ),
    (
        "overflow 6",
        [section("x", accessory={"type": "overflow", "options": _options(6)})],
        "6 overflow options; the limit is 5",
        True,
    ),
    (
        "select 101",
        [section("x", accessory={"type": "static_select", "options": _options(101)})],
        "101 select options; the limit is 100",
        True,
    ),
    (
        "placeholder",
        [
            section(
                "x",
                accessory={
                    "type": "users_select",
                    "placeholder": {"type": "plain_text", "text": "p" * 151},
                },
            )
        ],
        "placeholder is 151 characters; the limit is 150",
        True,
    ),
    (
        "confirm title",
        [
            {
                "type": "actions",
                "elements": [
                    button(
                        "a",
                        confirm={
                            "title": {"type": "plain_text", "text": "t" * 101},
                            "text": {"type": "mrkdwn", "text": "sure?"},
                            "confirm": {"type": "plain_text", "text": "Yes"},
                            "deny": {"type": "plain_text", "text": "No"},
                        },
                    )
                ],
            }
        ],
        "confirm title is 101 characters; the limit is 100",
        True,
    ),
]


@pytest.mark.parametrize(
    ("blocks", "detail", "is_size"),
    [pytest.param(b, d, s, id=name) for name, b, d, s in BLOCK_CASES],
)
async def test_block_kit_limit_rejected(
    fake: FakeSlack,
    client: AsyncWebClient,
    blocks: list[dict[str, Any]],
    detail: str,
    is_size: bool,
) -> None:
    err = await slack_error(client.chat_postMessage(channel=CHAN, text="fallback", blocks=blocks))
    assert err.response["error"] == "invalid_blocks"
    assert err.response["response_metadata"]["messages"][0].startswith("[ERROR] ")
    assert "[json-pointer:/blocks" in err.response["response_metadata"]["messages"][0]
    rejection = fake.rejections("chat.postMessage", error="invalid_blocks")[-1]
    assert detail in rejection.detail
    assert fake.messages_in(CHAN) == []
    # with strict_limits off only the size checks go away
    fake.strict_limits = False
    if is_size:
        await client.chat_postMessage(channel=CHAN, text="fallback", blocks=blocks)
        assert len(fake.messages_in(CHAN)) == 1
    else:
        err = await slack_error(client.chat_postMessage(channel=CHAN, text="x", blocks=blocks))
        assert err.response["error"] == "invalid_blocks"


async def test_valid_rich_message_accepted(fake: FakeSlack, client: AsyncWebClient) -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 150, "emoji": True}},
        section("s" * 3000, accessory=button("acc", "t" * 75, value="v" * 2000)),
        {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2000}] * 10},
        {"type": "divider"},
        {
            "type": "context",
            "elements": [
                {"type": "image", "image_url": "https://example.com/a.png", "alt_text": "a"},
                *[{"type": "plain_text", "text": "c"}] * 9,
            ],
        },
        {
            "type": "actions",
            "elements": [
                *[button(f"b{i}") for i in range(23)],
                {"type": "checkboxes", "action_id": "cb", "options": _options(10)},
                {"type": "static_select", "action_id": "sel", "options": _options(100)},
            ],
        },
        {
            "type": "rich_text",
            "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": "r"}]}
            ],
        },
        {"type": "image", "image_url": "https://example.com/b.png", "alt_text": "b"},
        *[{"type": "divider"}] * 42,
    ]
    assert len(blocks) == 50
    check_blocks(blocks)
    result = await client.chat_postMessage(channel=CHAN, text="fallback", blocks=blocks)
    stored = fake.message(CHAN, result["ts"]).blocks
    assert stored is not None and len(stored) == 50
    block_ids = [b["block_id"] for b in stored]
    assert all(block_ids) and len(set(block_ids)) == 50  # Slack fills in missing block_ids
    assert result["message"]["blocks"][0]["block_id"] == block_ids[0]
    # and blocks-only messages need no text
    await client.chat_postMessage(channel=CHAN, blocks=[section("only blocks")])


# --------------------------------------------------------------------------------------------
# Rate limits and faults
# --------------------------------------------------------------------------------------------


async def test_injected_429_surfaces_with_retry_after_and_is_not_retried(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    # AsyncWebClient's only default retry handler is for connection errors: no 429/5xx retries
    assert [type(h) for h in client.retry_handlers] == [AsyncConnectionErrorRetryHandler]
    fake.fail_next("chat.postMessage", retry_after=7)
    err = await slack_error(client.chat_postMessage(channel=CHAN, text="x"))
    assert err.response.status_code == 429
    assert err.response.headers["Retry-After"] == "7"
    assert err.response["error"] == "ratelimited"
    assert len(fake.calls_to("chat.postMessage")) == 1
    assert fake.messages_in(CHAN) == []
    assert fake.faults_injected == [("chat.postMessage", "429")]
    assert fake.rejections(error="ratelimited")[0].status == 429

    fake.fail_next("chat.postMessage", status=500)
    err = await slack_error(client.chat_postMessage(channel=CHAN, text="x"))
    assert err.response.status_code == 500
    assert len(fake.calls_to("chat.postMessage")) == 2

    # with slack_sdk's rate-limit handler opted in, the client waits Retry-After and retries
    retrying = AsyncWebClient(
        token=BOT,
        base_url=fake.base_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    fake.fail_next("chat.postMessage", retry_after=1)
    started = time.monotonic()
    await retrying.chat_postMessage(channel=CHAN, text="eventually")
    assert time.monotonic() - started >= 0.9
    assert len(fake.calls_to("chat.postMessage")) == 4
    assert [m.text for m in fake.messages_in(CHAN)] == ["eventually"]


async def test_enforced_per_channel_rate_limit() -> None:
    async with make_fake(enforce_rate_limits=True) as fake:
        fake.add_channel("C0SECOND", [ALICE])
        client = AsyncWebClient(token=BOT, base_url=fake.base_url)
        await client.chat_postMessage(channel=CHAN, text="one")
        err = await slack_error(client.chat_postMessage(channel=CHAN, text="two"))
        assert err.response.status_code == 429
        assert err.response.headers["Retry-After"] == "1"
        await client.chat_postMessage(channel="C0SECOND", text="other channel is fine")
        # edits and ephemerals are not counted
        first = fake.messages_in(CHAN)[0]
        await client.chat_update(channel=CHAN, ts=first.ts, text="edited")
        await client.chat_postEphemeral(channel=CHAN, user=ALICE, text="psst")
        assert [r.error for r in fake.rejections()] == ["ratelimited"]
        assert [m.text for m in fake.messages_in(CHAN)] == ["edited"]

    async with make_fake(enforce_rate_limits=True, rate_limit=(3, 10.0)) as fake:
        client = AsyncWebClient(token=BOT, base_url=fake.base_url)
        for i in range(3):
            await client.chat_postMessage(channel=CHAN, text=str(i))
        err = await slack_error(client.chat_postMessage(channel=CHAN, text="4th"))
        assert int(err.response.headers["Retry-After"]) in (9, 10)


async def test_fail_next_error_and_times(fake: FakeSlack, client: AsyncWebClient) -> None:
    fake.fail_next(None, error="fatal_error", times=2)
    for _ in range(2):
        err = await slack_error(client.chat_postMessage(channel=CHAN, text="x"))
        assert (err.response.status_code, err.response["error"]) == (200, "fatal_error")
    await client.auth_test()  # None targets the message methods only
    await client.chat_postMessage(channel=CHAN, text="third time lucky")
    assert [m.text for m in fake.messages_in(CHAN)] == ["third time lucky"]
    with pytest.raises(ValueError):
        fake.fail_next("chat.update", status=500, error="x")


async def test_timeout_is_not_applied(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=BOT, base_url=fake.base_url, timeout=1)
    fake.fail_next("chat.postMessage", timeout=3)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await client.chat_postMessage(channel=CHAN, text="lost")
    assert time.monotonic() - started < 2
    assert fake.messages_in(CHAN) == []
    assert len(fake.calls_to("chat.postMessage")) == 1  # timeouts are not retried by default


async def test_apply_then_timeout_leaves_the_message_posted(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=BOT, base_url=fake.base_url, timeout=1)
    fake.fail_next("chat.postMessage", apply_then_timeout=True, timeout=3)
    with pytest.raises(TimeoutError):
        await client.chat_postMessage(channel=CHAN, text="did it go out?")
    assert [m.text for m in fake.messages_in(CHAN)] == ["did it go out?"]
    assert fake.faults_injected == [("chat.postMessage", "apply_then_timeout")]


async def test_fail_rate_is_seeded() -> None:
    async def outcomes(seed: int) -> list[str]:
        async with make_fake() as fake:
            fake.fail_rate("chat.postMessage", 0.2, kinds=("500", "error", "429"), seed=seed)
            client = AsyncWebClient(token=BOT, base_url=fake.base_url)
            result = []
            for i in range(40):
                try:
                    await client.chat_postMessage(channel=CHAN, text=str(i))
                    result.append("ok")
                except SlackApiError as exc:
                    result.append(f"{exc.response.status_code}:{exc.response['error']}")
            await client.auth_test()  # other methods are untouched
            assert result.count("ok") == len(fake.messages_in(CHAN))
            return result

    first, again, other = await outcomes(7), await outcomes(7), await outcomes(8)
    assert first == again
    assert first != other
    assert 2 <= len([r for r in first if r != "ok"]) <= 16
    assert {r for r in first if r != "ok"} <= {
        "500:internal_error",
        "200:internal_error",
        "429:ratelimited",
    }


# --------------------------------------------------------------------------------------------
# Ephemeral messages, views, interaction payloads
# --------------------------------------------------------------------------------------------


async def test_ephemeral(fake: FakeSlack, client: AsyncWebClient) -> None:
    result = await client.chat_postEphemeral(channel=CHAN, user=ALICE, text="only you")
    assert result["message_ts"]
    assert [(e.user, e.text) for e in fake.ephemerals(CHAN)] == [(ALICE, "only you")]
    assert fake.messages_in(CHAN) == []
    err = await slack_error(client.chat_postEphemeral(channel=CHAN, user=CAROL, text="x"))
    assert err.response["error"] == "user_not_in_channel"
    err = await slack_error(client.chat_postEphemeral(channel=CHAN, user="U0GHOST", text="x"))
    assert err.response["error"] == "user_not_found"
    assert fake.ephemerals("C0OTHER") == []


async def test_views_open_trigger_rules() -> None:
    async with make_fake(trigger_ttl=0.2) as fake:
        client = AsyncWebClient(token=BOT, base_url=fake.base_url)
        posted = await client.chat_postMessage(channel=CHAN, text="t", blocks=approval_blocks())
        payload = fake.block_actions_payload(ALICE, CHAN, posted["ts"], "deny")
        trigger = payload["trigger_id"]

        # an invalid view is refused without using up the trigger
        err = await slack_error(
            client.views_open(
                trigger_id=trigger, view=modal(title={"type": "plain_text", "text": "t" * 25})
            )
        )
        assert err.response["error"] == "invalid_arguments"
        assert "/view/title/text" in err.response["response_metadata"]["messages"][0]

        opened = await client.views_open(trigger_id=trigger, view=modal())
        assert opened["view"]["id"].startswith("V")
        assert opened["view"]["callback_id"] == "deny_reason"
        assert opened["view"]["state"] == {"values": {}}
        assert [v.user_id for v in fake.views_opened()] == [ALICE]

        err = await slack_error(client.views_open(trigger_id=trigger, view=modal()))
        assert err.response["error"] == "exchanged_trigger_id"
        err = await slack_error(client.views_open(trigger_id="123.456.abc", view=modal()))
        assert err.response["error"] == "invalid_trigger_id"
        stale = fake.issue_trigger_id(ALICE)
        await asyncio.sleep(0.25)
        err = await slack_error(client.views_open(trigger_id=stale, view=modal()))
        assert err.response["error"] == "expired_trigger_id"
        assert len(fake.views_opened()) == 1


@pytest.mark.parametrize(
    ("view", "words"),
    [
        pytest.param(modal(type="home"), "expected modal", id="type"),
        pytest.param(modal(title=None), "a modal needs a title", id="no title"),
        pytest.param(
            modal(submit={"type": "plain_text", "text": "s" * 25}),
            "view submit is 25 characters; the limit is 24",
            id="submit",
        ),
        pytest.param(
            modal(close={"type": "plain_text", "text": "c" * 25}),
            "view close is 25 characters",
            id="close",
        ),
        pytest.param(
            modal(blocks=[{"type": "divider"}] * 101),
            "101 blocks in a view; the limit is 100",
            id="101 blocks",
        ),
        pytest.param(
            modal(callback_id="c" * 256), "callback_id is 256 characters", id="callback_id"
        ),
        pytest.param(
            modal(private_metadata="p" * 3001),
            "private_metadata is 3001 characters; the limit is 3000",
            id="private_metadata",
        ),
        pytest.param(modal(submit=None), "needs a submit button", id="input without submit"),
    ],
)
async def test_views_open_view_checks(
    fake: FakeSlack, client: AsyncWebClient, view: dict[str, Any], words: str
) -> None:
    view = {k: v for k, v in view.items() if v is not None}
    err = await slack_error(client.views_open(trigger_id=fake.issue_trigger_id(), view=view))
    assert err.response["error"] == "invalid_arguments"
    assert words in fake.rejections("views.open")[-1].detail
    await client.views_open(trigger_id=fake.issue_trigger_id(), view=modal(blocks=[]))


async def test_block_actions_payload_and_response_url(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    parent = await client.chat_postMessage(channel=CHAN, text="p")
    blocks = [
        *approval_blocks(),
        section("pick", accessory={"type": "checkboxes", "action_id": "envs", "options": []}),
    ]
    blocks[-1]["accessory"]["options"] = [option("staging"), option("prod")]
    posted = await client.chat_postMessage(
        channel=CHAN, text="approve?", blocks=blocks, thread_ts=parent["ts"]
    )
    payload = fake.block_actions_payload(ALICE, CHAN, posted["ts"], "approve")
    assert payload["type"] == "block_actions"
    assert payload["user"] == {
        "id": ALICE,
        "username": "alice",
        "name": "alice",
        "team_id": "T0FAKE",
    }
    assert payload["container"] == {
        "type": "message",
        "message_ts": posted["ts"],
        "channel_id": CHAN,
        "is_ephemeral": False,
        "thread_ts": parent["ts"],
    }
    action = payload["actions"][0]
    assert (action["type"], action["block_id"], action["value"]) == ("button", "decide", "req-42")
    assert action["text"] == {"type": "plain_text", "text": "Approve"}
    assert payload["message"]["blocks"][2]["block_id"] == "decide"
    assert payload["state"] == {"values": {}}
    assert payload["response_url"].startswith(f"{fake.url}/response/")
    assert payload["channel"] == {"id": CHAN, "name": "approvals"}

    checked = fake.block_actions_payload(
        BOB, CHAN, posted["ts"], "envs", action_type="checkboxes", selected_options=["prod"]
    )
    assert checked["actions"][0]["selected_options"] == [option("prod")]
    with pytest.raises(LookupError):
        fake.block_actions_payload(ALICE, CHAN, posted["ts"], "nope")
    with pytest.raises(LookupError):
        fake.block_actions_payload(ALICE, CHAN, posted["ts"], "envs", selected_options=["dev"])
    with pytest.raises(LookupError):
        fake.block_actions_payload(
            ALICE, CHAN, posted["ts"], "envs", action_type="checkboxes", selected_options=["dev"]
        )

    async with aiohttp.ClientSession() as http:
        url = payload["response_url"]
        async with http.post(url, json={"text": "only you see this"}) as resp:
            assert resp.status == 200
        async with http.post(url, json={"replace_original": True, "text": "Approved"}) as resp:
            assert resp.status == 200
        async with http.post(f"{fake.url}/response/unknown", json={"text": "x"}) as resp:
            assert resp.status == 404
    msg = fake.message(CHAN, posted["ts"])
    assert msg.text == "Approved"
    assert msg.blocks is not None and msg.blocks[2]["block_id"] == "decide"
    assert [v.via for v in msg.versions] == ["chat.postMessage", "response_url"]
    assert [(e.user, e.via) for e in fake.ephemerals()] == [(ALICE, "response_url")]
    assert [p.status for p in fake.response_posts] == [200, 200, 404]


async def test_view_submission_payload(fake: FakeSlack, client: AsyncWebClient) -> None:
    await client.views_open(trigger_id=fake.issue_trigger_id(ALICE), view=modal())
    payload = fake.view_submission_payload(
        ALICE, "deny_reason", "req-42", {"reason": {"text": "too risky"}}
    )
    assert payload["type"] == "view_submission"
    view = payload["view"]
    assert view["id"] == fake.views_opened()[0].id
    assert view["callback_id"] == "deny_reason"
    assert view["private_metadata"] == "req-42"
    assert view["state"]["values"] == {
        "reason": {"text": {"type": "plain_text_input", "value": "too risky"}}
    }
    assert payload["trigger_id"]
    with pytest.raises(LookupError):
        fake.view_submission_payload(ALICE, "deny_reason", "", {"reason": {"typo": "x"}})
    # without an opened view the values are taken as given
    loose = fake.view_submission_payload(BOB, "other", "", {"b": {"a": {"type": "x", "v": 1}}})
    assert loose["view"]["state"]["values"] == {"b": {"a": {"type": "x", "v": 1}}}


async def test_message_event_is_stored_and_shaped_like_slack(
    fake: FakeSlack, client: AsyncWebClient
) -> None:
    parent = await client.chat_postMessage(channel=CHAN, text="approve?")
    body = fake.message_event(ALICE, CHAN, "lgtm", thread_ts=parent["ts"])
    assert body["type"] == "event_callback"
    assert body["event_id"].startswith("Ev")
    assert body["authorizations"][0]["user_id"] == "UBOT"
    event = body["event"]
    assert (event["type"], event["user"], event["text"]) == ("message", ALICE, "lgtm")
    assert (event["thread_ts"], event["parent_user_id"]) == (parent["ts"], "UBOT")
    assert event["channel_type"] == "channel" and event["client_msg_id"]
    replies = await client.conversations_replies(channel=CHAN, ts=parent["ts"])
    assert [(m["text"], m.get("user")) for m in replies["messages"]] == [
        ("approve?", "UBOT"),
        ("lgtm", ALICE),
    ]
    echo = fake.message_event("UBOT", CHAN, "bot echo", bot_id=fake.bot_id)
    assert echo["event"]["bot_id"] == fake.bot_id
    assert len(fake.messages_in(CHAN)) == 2  # bot echoes are not stored again
    assert fake.url_verification_body("abc") == {
        "token": fake.verification_token,
        "challenge": "abc",
        "type": "url_verification",
    }


# --------------------------------------------------------------------------------------------
# Socket Mode
# --------------------------------------------------------------------------------------------


async def test_socket_mode_hello_envelope_and_ack(fake: FakeSlack) -> None:
    web_client = AsyncWebClient(base_url=fake.base_url)
    socket = SocketModeClient(app_token=APP, web_client=web_client, auto_reconnect_enabled=False)
    seen: list[dict[str, Any]] = []

    async def on_message(
        client: AsyncBaseSocketModeClient, message: dict[str, Any], raw: Any
    ) -> None:
        seen.append(message)

    async def on_request(client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        if req.type == "interactive":
            response = SocketModeResponse(req.envelope_id, {"response_action": "clear"})
        else:
            response = SocketModeResponse(req.envelope_id)
        await client.send_socket_mode_response(response)

    socket.message_listeners.append(on_message)
    socket.socket_mode_request_listeners.append(on_request)
    try:
        await socket.connect()
        await fake.wait_socket_connected()
        await fake.wait_for(lambda: any(m.get("type") == "hello" for m in seen))
        hello = next(m for m in seen if m["type"] == "hello")
        assert hello["connection_info"] == {"app_id": fake.app_id}

        event_id = await fake.socket_send("events_api", fake.message_event(ALICE, CHAN, "hi"))
        ack = await fake.wait_ack(event_id, timeout=20)
        assert ack.payload is None
        envelope = fake.socket_sent[-1]
        assert envelope["type"] == "events_api" and envelope["accepts_response_payload"] is False
        assert envelope["retry_attempt"] == 0

        await client_opened_view(fake)
        submission = fake.view_submission_payload(
            ALICE, "deny_reason", "", {"reason": {"text": "x"}}
        )
        view_id = await fake.socket_send("interactive", submission)
        ack = await fake.wait_ack(view_id, timeout=20)
        assert ack.payload == {"response_action": "clear"}
        assert fake.socket_sent[-1]["accepts_response_payload"] is True
        assert [m["type"] for m in seen] == ["hello", "events_api", "interactive"]
        assert fake.socket_connections == 1
        with pytest.raises(TimeoutError):
            await fake.wait_ack("not-an-envelope", timeout=0.05)
    finally:
        await socket.close()
    await fake.wait_for(lambda: fake.socket_open == 0)
    with pytest.raises(RuntimeError):
        await fake.socket_send("events_api", {})

    # each ticket connects once
    url = (await web_client.apps_connections_open(app_token=APP))["url"]
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url) as ws:
            assert json.loads((await ws.receive()).data)["type"] == "hello"
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await http.ws_connect(url)


async def client_opened_view(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=BOT, base_url=fake.base_url)
    await client.views_open(trigger_id=fake.issue_trigger_id(ALICE), view=modal())


# --------------------------------------------------------------------------------------------
# Signing and delivery to a slack-bolt app
# --------------------------------------------------------------------------------------------


def test_sign_matches_slack_sdk_signature_verifier() -> None:
    body = b'{"type":"event_callback"}'
    headers = sign(SECRET, body)
    verifier = SignatureVerifier(SECRET)
    ts, signature = headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
    assert signature.startswith("v0=")
    assert verifier.is_valid(body=body, timestamp=ts, signature=signature)
    assert verifier.generate_signature(timestamp=ts, body=body) == signature
    assert not SignatureVerifier("other-secret").is_valid(body, ts, signature)
    old = sign(SECRET, body, timestamp=int(time.time()) - 600)
    assert not verifier.is_valid(body, old["X-Slack-Request-Timestamp"], old["X-Slack-Signature"])
    assert sign(SECRET, body.decode(), 1700000000) == sign(SECRET, body, 1700000000)


async def test_post_event_to_a_bolt_app(fake: FakeSlack) -> None:
    bolt = AsyncApp(client=AsyncWebClient(token=BOT, base_url=fake.base_url), signing_secret=SECRET)

    @bolt.action("approve")
    async def on_approve(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        await client.chat_update(
            channel=body["container"]["channel_id"],
            ts=body["container"]["message_ts"],
            text=f"Approved by <@{body['user']['id']}>",
            blocks=[],
        )

    @bolt.event("message")
    async def on_message(event: dict[str, Any], say: Any) -> None:
        await say(text=f"got {event['text']}", thread_ts=event.get("thread_ts") or event["ts"])

    runner = web.AppRunner(bolt.web_app(path="/slack/events"))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    try:
        status, text = await fake.post_event(url, fake.url_verification_body("c-123"), SECRET)
        assert status == 200 and "c-123" in text

        status, _ = await fake.post_event(
            url, fake.url_verification_body("x"), SECRET, signature="v0=" + "0" * 64
        )
        assert status == 401
        status, _ = await fake.post_event(
            url, fake.url_verification_body("x"), SECRET, timestamp=int(time.time()) - 3600
        )
        assert status == 401

        client = AsyncWebClient(token=BOT, base_url=fake.base_url)
        posted = await client.chat_postMessage(channel=CHAN, text="?", blocks=approval_blocks())
        payload = fake.block_actions_payload(ALICE, CHAN, posted["ts"], "approve")
        status, _ = await fake.post_event(url, payload, SECRET, form=True)
        assert status == 200
        await fake.wait_for(lambda: fake.message(CHAN, posted["ts"]).text.startswith("Approved"))
        assert fake.message(CHAN, posted["ts"]).blocks is None

        status, _ = await fake.post_event(url, fake.message_event(BOB, CHAN, "hello bot"), SECRET)
        assert status == 200
        await fake.wait_for(lambda: any(m.text == "got hello bot" for m in fake.messages_in(CHAN)))
        reply = next(m for m in fake.messages_in(CHAN) if m.text == "got hello bot")
        assert reply.is_reply and reply.from_bot
        assert fake.calls_to("auth.test")  # bolt checked the token against the fake
    finally:
        await runner.cleanup()
