"""Routing and escalation (`[[routes]]`): where a decision goes, who sees it once a reminder
went unanswered, and that it ends everywhere it is shown.

The route decision is tested on its own (adapters/chat/routing.py, pure), then every flow on
Telegram and on Slack (tests/chat_drivers.py: the real libraries against the strict fakes),
with one configuration for both: each platform keeps the targets it can show.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.chat.routing import Router, Routing
from bot.config import ConfigError, RouteConfig, RouteWhen, load_settings
from bot.domain import Run, Task
from store.sql import SqlStore
from tests import slack_harness as sh
from tests import telegram_harness as th
from tests.chat_drivers import PLATFORMS, WS, ChatDriver, Handle, Shown, open_driver

ONCALL = [f"telegram:{th.ONCALL}", f"slack:{sh.ONCALL}"]
ROUTES: list[dict[str, Any]] = [
    {"when": {"risk": "high"}, "to": [*ONCALL, "member:alice"], "escalate_to": ["member:carol"]},
]
HIGH = {"summary": "deploy to production", "risk": "high"}


# the decision itself (pure) ------------------------------------------------------------------
def _task(tool: str = "bash", risk: str | None = None, rule: int | None = None) -> Task:
    profile = {} if risk is None else {"risk": risk}
    return Task(
        "t1", "run_1", WS, "k1", "tool_call", "model", tool, tool, {}, "needs_approval",
        datetime.now(UTC), effect_profile=profile, rule_index=rule,
    )  # fmt: skip


def _run(rules: list[dict[str, Any]] | None = None) -> Run:
    return Run("run_1", WS, None, "running", "ask", rules or [], None, {}, datetime.now(UTC))


def _router(*routes: dict[str, Any]) -> Router:
    return Router([RouteConfig.model_validate(r) for r in routes])


def test_every_matching_route_applies_in_order_each_target_once() -> None:
    router = _router(
        {"when": {"risk": "high|critical"}, "to": ["slack:C1", "member:alice"]},
        {"when": {"tool": "deploy*"}, "to": ["default", "slack:C1"], "escalate_to": ["member:bo"]},
        {"when": {"workspace": "other"}, "to": ["slack:C9"]},
    )
    routed = router.route(_task("deploy_prod", "critical"), _run())
    assert routed is not None
    assert routed.to == ("slack:C1", "member:alice", "default")
    assert routed.escalate_to == ("member:bo",)
    only_tool = router.route(_task("deploy"), _run())  # no risk given: the risk route is out
    assert only_tool is not None and only_tool.to == ("default", "slack:C1")
    assert router.route(_task("bash", "low"), _run()) is None  # none matches: the usual chats


def test_globs_are_anchored_like_rules_and_a_route_without_when_takes_all() -> None:
    router = _router({"when": {"tool": "dep?oy"}, "to": ["slack:C1"]})
    assert router.route(_task("deploy"), _run()) is not None
    assert router.route(_task("redeploy"), _run()) is None  # anchored: the whole name
    assert router.route(_task("deploys"), _run()) is None
    everything = _router({"escalate_to": ["member:lead"]})
    routed = everything.route(_task("anything"), _run())
    assert routed is not None and routed.to == ("default",)  # `to` left out: the usual chat
    assert not Router() and Router().route(_task(), _run()) is None


def test_rule_matches_the_reason_of_the_rule_that_parked_the_call() -> None:
    rules = [
        {"tool": "read", "verdict": "allow"},
        {"tool": "bash", "verdict": "ask", "reason": "deploys need a human"},
    ]
    router = _router({"when": {"rule": "deploys*"}, "to": ["slack:C1"]})
    assert router.route(_task(rule=1), _run(rules)) is not None
    assert router.route(_task(rule=0), _run(rules)) is None  # a rule without a reason
    assert router.route(_task(rule=None), _run(rules)) is None  # parked by ask mode itself


def test_escalation_comes_after_an_unanswered_reminder_or_at_the_last() -> None:
    three = Routing(Router(), nudges=3)
    assert not three.escalates(0, [])  # the first reminder: nobody ignored one yet
    assert three.escalates(1, [0])  # the first went unanswered
    assert not three.escalates(1, [])  # skipped (a short deadline): this one is the first
    assert three.escalates(2, [])  # the last there is
    assert Routing(Router(), nudges=1).escalates(0, [])  # a single reminder escalates at once


@pytest.mark.parametrize(
    ("route", "problem"),
    [
        ({"to": ["slak:C1"]}, "routes.0.to.0: "),
        ({"to": ["telegram:ops"]}, "a Telegram chat id is a number"),
        ({"to": ["member:"]}, "a target is slack:CHANNEL"),
        ({"when": {"mtach": "x"}}, "routes.0.when.mtach: unknown key"),
        ({"when": {"tool": "a||b"}}, "routes.0.when.tool: "),
        ({"escalate": ["member:bo"]}, "routes.0.escalate: unknown key"),
    ],
)
def test_a_wrong_route_stops_the_start_naming_the_key(route: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(routes=[route])
    assert problem in str(caught.value)


def test_the_example_configuration_documents_every_route_key() -> None:
    example = (Path(__file__).parent.parent / "config.example.toml").read_text()
    assert "# [[routes]]" in example
    for key in RouteConfig.model_fields:
        assert f"# {key} =" in example, key
    assert ", ".join(RouteWhen.model_fields) in example  # "workspace, tool, risk, rule"


def test_routes_read_from_toml(tmp_path: Any) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[[routes]]\nwhen = { risk = "high" }\nto = ["slack:C_ONCALL", "member:alice"]\n'
        'escalate_to = ["member:bob"]\n\n[[routes]]\nwhen = { tool = "deploy" }\n'
        'to = ["telegram:-100123"]\n'
    )
    settings = load_settings(path)
    assert [r.to for r in settings.routes] == [
        ["slack:C_ONCALL", "member:alice"], ["telegram:-100123"]
    ]  # fmt: skip
    assert settings.routes[0].escalate_to == ["member:bob"]
    assert settings.routes[1].when.tool == "deploy"


# on both platforms ---------------------------------------------------------------------------
@pytest.fixture(params=PLATFORMS)
async def chat(request: pytest.FixtureRequest, store: SqlStore) -> AsyncIterator[ChatDriver]:
    decisions = {"nudge_before": ["2h", "1h", "10m"]}
    async with open_driver(request.param, store, routes=ROUTES, decisions=decisions) as driver:
        yield driver


async def _ended(chat: ChatDriver, message: Handle) -> Shown:
    def done() -> Shown | None:
        shown = chat.shown(message)
        return None if shown.has_buttons else shown

    shown: Shown = await chat.eventually(done)
    return shown


@pytest.mark.usefixtures("ptb_timedelta")
async def test_a_high_risk_call_goes_to_on_call_and_to_alices_direct_messages(
    chat: ChatDriver,
) -> None:
    await chat.park("k1", effect_profile=HIGH)
    await chat.park("k2")  # no route matches: the usual chat, as without routes
    await chat.flush()
    assert chat.shown(chat.decision_in("oncall", "make deploy k1")).has_buttons
    assert chat.shown(chat.decision_in("dm:alice", "make deploy k1")).has_buttons
    assert chat.shown(chat.decision_in("usual", "make deploy k2")).has_buttons
    assert len(chat.decisions_in("usual")) == 1  # k1 is not in the usual chat
    assert len(chat.decisions_in("oncall")) == 1 and len(chat.decisions_in("dm:alice")) == 1
    assert chat.decisions_in("dm:carol") == []  # carol only once it escalates
    await chat.flush()  # handed over again: nothing is posted twice
    assert [len(chat.decisions_in(w)) for w in ("usual", "oncall", "dm:alice")] == [1, 1, 1]


@pytest.mark.usefixtures("ptb_timedelta")
async def test_an_approve_in_one_place_ends_the_decision_in_every_place(
    chat: ChatDriver,
) -> None:
    await chat.park("k1", effect_profile=HIGH)
    await chat.flush()
    oncall, direct = chat.decision_in("oncall", "k1"), chat.decision_in("dm:alice", "k1")
    assert await chat.press(direct, "approve") == "✅ Approved"
    await chat.flush()
    for message in (oncall, direct):
        shown = await _ended(chat, message)
        assert "Approved by alice" in shown.text and "make deploy k1" in shown.text


@pytest.mark.usefixtures("ptb_timedelta")
async def test_two_places_pressing_at_once_end_it_once(chat: ChatDriver) -> None:
    await chat.park("k1", effect_profile=HIGH)
    await chat.flush()
    oncall, direct = chat.decision_in("oncall", "k1"), chat.decision_in("dm:alice", "k1")
    notices = await asyncio.gather(
        chat.press(direct, "approve", user="alice"),
        chat.press(oncall, "deny", user="carol"),
    )
    task = await chat.settled("k1")
    assert task.state in ("granted", "failed")
    winner = "alice" if task.state == "granted" else "carol"
    assert task.resolved_by == winner and task.via == chat.platform
    won, lost = (notices[0], notices[1]) if winner == "alice" else (notices[1], notices[0])
    assert won in ("✅ Approved", "❌ Denied")
    assert lost is not None and lost.startswith("Already "), lost
    log = await chat.store.log_entries(WS, task_key="k1")
    endings = [r.entry.action for r in log if r.entry.action in ("approved", "denied")]
    assert len(endings) == 1, [r.entry.action for r in log]
    await chat.flush()
    word = "Approved" if winner == "alice" else "Denied"
    for message in (oncall, direct):
        assert f"{word} by {winner}" in (await _ended(chat, message)).text


@pytest.mark.usefixtures("ptb_timedelta")
async def test_an_unanswered_reminder_escalates_once(chat: ChatDriver) -> None:
    task = await chat.park("k1", effect_profile=HIGH)
    await chat.flush()
    await chat.clock.advance(timedelta(hours=22))  # 2 h before the deadline: the first one
    await chat.core.scheduler.run_once()
    await chat.flush()
    assert len(chat.nudges_in("oncall")) == 1 and len(chat.nudges_in("dm:alice")) == 1
    assert chat.decisions_in("dm:carol") == []  # nobody ignored a reminder yet

    await chat.clock.advance(timedelta(hours=1))  # 1 h before: the first went unanswered
    await chat.core.scheduler.run_once()
    await chat.flush()
    escalated = chat.decision_in("dm:carol", "make deploy k1")
    assert chat.shown(escalated).has_buttons
    assert [len(chat.nudges_in(w)) for w in ("oncall", "dm:alice", "dm:carol")] == [2, 2, 1]
    assert "expires in 1 h" in chat.nudges_in("dm:carol")[0]
    await chat.redeliver_nudge(task, seq=1)  # handed over again: nothing twice
    assert [len(chat.nudges_in(w)) for w in ("oncall", "dm:alice", "dm:carol")] == [2, 2, 1]

    await chat.clock.advance(timedelta(minutes=50))  # 10 min before: reminded, not again
    await chat.core.scheduler.run_once()
    await chat.flush()
    assert len(chat.decisions_in("dm:carol")) == 1  # escalated once
    assert [len(chat.nudges_in(w)) for w in ("oncall", "dm:alice", "dm:carol")] == [3, 3, 2]

    assert await chat.press(escalated, "approve", user="carol") == "✅ Approved"
    await chat.flush()
    for where in ("oncall", "dm:alice", "dm:carol"):
        shown = await _ended(chat, chat.decision_in(where, "make deploy k1"))
        assert "Approved by carol" in shown.text


@pytest.mark.usefixtures("ptb_timedelta")
@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_place_the_platform_refuses_is_given_up_and_the_rest_still_works(
    platform: str, store: SqlStore
) -> None:
    nowhere = ["telegram:-100111222", "slack:C0NOWHERE"]  # chats the bot is not in
    routes = [{"when": {"risk": "high"}, "to": ["default", *nowhere, "member:alice"]}]
    async with open_driver(platform, store, routes=routes) as chat:
        await chat.park("k1", effect_profile=HIGH)
        await chat.flush()
        assert await chat.store.outbox_backlog() == 0  # nothing left retrying
        usual, direct = chat.decision_in("usual", "k1"), chat.decision_in("dm:alice", "k1")
        await chat.flush()  # handed over again: the refused place is not tried again
        assert await chat.press(usual, "approve") == "✅ Approved"
        await chat.flush()
        for message in (usual, direct):
            assert "Approved by alice" in (await _ended(chat, message)).text


@pytest.mark.usefixtures("ptb_timedelta")
@pytest.mark.parametrize("platform", PLATFORMS)
async def test_an_escalation_reaches_a_platform_the_decision_was_not_routed_to(
    platform: str, store: SqlStore
) -> None:
    elsewhere = f"slack:{sh.ONCALL}" if platform == "telegram" else f"telegram:{th.ONCALL}"
    routes = [{"when": {"risk": "high"}, "to": [elsewhere], "escalate_to": ["member:carol"]}]
    async with open_driver(platform, store, routes=routes) as chat:
        await chat.park("k1", effect_profile=HIGH)
        await chat.flush()
        assert [chat.decisions_in(w) for w in ("usual", "oncall", "dm:carol")] == [[], [], []]
        await chat.clock.advance(timedelta(hours=23))  # the first reminder: nothing here
        await chat.core.scheduler.run_once()
        await chat.flush()
        assert chat.decisions_in("dm:carol") == []
        await chat.clock.advance(timedelta(minutes=50))  # the last one: escalated here too
        await chat.core.scheduler.run_once()
        await chat.flush()
        escalated = chat.decision_in("dm:carol", "make deploy k1")
        assert len(chat.nudges_in("dm:carol")) == 1
        assert await chat.press(escalated, "approve", user="carol") == "✅ Approved"
        await chat.flush()
        assert "Approved by carol" in (await _ended(chat, escalated)).text


async def test_each_slack_thread_parent_counts_the_decisions_shown_in_its_channel(
    store: SqlStore,
) -> None:
    """A run's thread parent says "N waiting" of the decisions in its own channel: one routed
    to on-call only counts there, not in the usual channel's parent."""
    routes = [{"when": {"risk": "high"}, "to": [f"slack:{sh.ONCALL}"]}]
    async with open_driver("slack", store, routes=routes) as chat:
        fake = chat.fake  # type: ignore[attr-defined]

        def parent(channel: str) -> str:
            [found] = [m for m in fake.messages_in(channel) if m.from_bot and not m.thread_ts]
            return str(fake.message(channel, found.ts).text)

        async def counts(usual: int, oncall: int) -> None:
            def shown() -> bool:
                return f"· {usual} waiting" in parent(sh.CHANNEL) and (
                    f"· {oncall} waiting" in parent(sh.ONCALL)
                )

            await chat.eventually(shown)

        await chat.park("k1", effect_profile=HIGH)
        await chat.park("k2")
        await chat.park("k3")
        await chat.flush()
        await counts(usual=2, oncall=1)
        await chat.service.approve(chat.member("alice"), WS, chat.run_id, "k1", via="api")
        await chat.flush()
        await counts(usual=2, oncall=0)


async def test_a_reply_in_a_slack_thread_answers_the_question_shown_in_that_channel(
    store: SqlStore,
) -> None:
    """Two open questions of one run, one routed to on-call: a reply in the usual channel's
    thread answers the one shown there (not "several are waiting")."""
    routes = [{"when": {"risk": "high"}, "to": [f"slack:{sh.ONCALL}"]}]
    async with open_driver("slack", store, routes=routes) as chat:
        sl = chat.world  # type: ignore[attr-defined]
        await sl.park("q1", "ask", {"prompt": "Page whom?"}, effect_profile=HIGH)
        await sl.park("q2", "ask", {"prompt": "Which branch?"})
        await chat.flush()
        [parent] = [m for m in sl.fake.messages_in(sh.CHANNEL) if m.from_bot and not m.thread_ts]
        event = sl.fake.message_event(sh.ALICE, sh.CHANNEL, "main", thread_ts=parent.ts)
        assert (await sl.fake.post_event(sl.events_url, event, sh.SIGNING_SECRET))[0] == 200
        answered = await chat.settled("q2")
        assert answered.resolution is not None and answered.resolution["content"] == "main"
        assert answered.resolved_by == "alice"
        assert (await chat.task("q1")).parked  # shown in on-call only: not this thread's
