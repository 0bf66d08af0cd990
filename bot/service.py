"""The decision lifecycle: what happens to a call after the engine has spoken.

Every state change happens in one store transaction together with its events, its decision-log
entries, its outbox notifications and its timers; every ending is a compare-and-set on the task
state, so the first ending wins and every later attempt gets `already_decided`.

`ApprovalService` is composed of the lifecycle's parts in bot/lifecycle/ (one per concern).
"""

from __future__ import annotations

from bot.decisions import (
    CallSpec,
    DecisionSettings,
    Profile,
    Receipt,
    RunSpec,
    already_decided,
    check_answer,
    ending_word,
)
from bot.learning import AllowSpec, LearnedRule, Proposal
from bot.lifecycle.calls import Calls
from bot.lifecycle.executors import Executors
from bot.lifecycle.learn import UNEDITED
from bot.lifecycle.questions import Questions
from bot.lifecycle.reading import Reading
from bot.lifecycle.review import Reviews
from bot.lifecycle.runs import KEY_LIMIT, Runs, retry_key
from bot.lifecycle.withdraw import Withdrawals

# Surfaces import these from here too.
__all__ = [
    "KEY_LIMIT",
    "UNEDITED",
    "AllowSpec",
    "ApprovalService",
    "CallSpec",
    "DecisionSettings",
    "LearnedRule",
    "Profile",
    "Proposal",
    "Receipt",
    "RunSpec",
    "already_decided",
    "check_answer",
    "ending_word",
    "retry_key",
]


class ApprovalService(Reading, Runs, Calls, Reviews, Questions, Withdrawals, Executors):
    """The core every surface calls: the HTTP API, the chat adapters, the web page, the CLI."""
