"""One transaction on the store's tables (implements bot.ports.Tx), for SQLite and PostgreSQL.

It is composed by aggregate: identity (store/tx_identity.py), executors (store/tx_executors.py),
runs and tasks (store/tx_runs.py), the journal of events, log, outbox and timers
(store/tx_journal.py) and the rules learned from decisions (store/tx_learned.py), over the
connection and helpers of store/txbase.py. The statements of the hot path (an append) are
prepared once and, on SQLite, run on the driver's connection (store/prepared.py); the rest go
through SQLAlchemy Core.
"""

from __future__ import annotations

from store.tx_executors import ExecutorTx
from store.tx_identity import IdentityTx
from store.tx_journal import JournalTx
from store.tx_learned import LearnedRuleTx
from store.tx_quorum import QuorumTx
from store.tx_runs import RunTx
from store.txbase import (
    CALLBACK,
    CHOICE,
    CREDENTIAL,
    DIGEST,
    EVENT,
    LOG,
    MEMBER,
    NOTIFY_CHANNEL,
    OUTBOX,
    PER_TASK_CHAT,
    PROMPT,
    RECORD,
    REF,
    RUN,
    TASK,
    TIMER,
    WEB_SESSION,
)

__all__ = [
    "CALLBACK", "CHOICE", "CREDENTIAL", "DIGEST", "EVENT", "LOG", "MEMBER", "NOTIFY_CHANNEL",
    "OUTBOX", "PER_TASK_CHAT", "PROMPT", "RECORD", "REF", "RUN", "TASK", "TIMER", "WEB_SESSION",
    "SqlTx",
]  # fmt: skip


class SqlTx(IdentityTx, ExecutorTx, RunTx, JournalTx, LearnedRuleTx, QuorumTx):
    """One transaction on one connection; implements bot.ports.Tx."""
