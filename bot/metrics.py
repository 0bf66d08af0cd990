"""Prometheus metrics the core records; /metrics renders them (with gauges read at scrape)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

DECISIONS = Counter(
    "approvalbot_decisions_total",
    "Endings of calls and questions, by outcome (task state) and surface.",
    ["outcome", "via"],
    registry=REGISTRY,
)
APPENDS = Counter(
    "approvalbot_calls_total",
    "Calls appended, by what the engine decided at once.",
    ["outcome"],
    registry=REGISTRY,
)
_APPEND_OUTCOMES: dict[str, Counter] = {}


def count_append(outcome: str) -> None:
    """`APPENDS` for one outcome; the labelled child is looked up once (every call comes here)."""
    child = _APPEND_OUTCOMES.get(outcome)
    if child is None:
        child = _APPEND_OUTCOMES[outcome] = APPENDS.labels(outcome=outcome)
    child.inc()


DECISION_LATENCY = Histogram(
    "approvalbot_decision_latency_seconds",
    "Time from park to a person's (or the clock's) ending.",
    buckets=(1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 48 * 3600),
    registry=REGISTRY,
)
NOTIFICATIONS = Counter(
    "approvalbot_notifications_total",
    "Outbox deliveries, by channel and result.",
    ["channel", "result"],
    registry=REGISTRY,
)
