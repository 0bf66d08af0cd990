"""SQLModel tables. Times are stored as epoch seconds (float): portable, indexable, tz-free."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel


def _json(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=sa.Column(sa.JSON, nullable=nullable))


class WorkspaceRow(SQLModel, table=True):
    __tablename__ = "workspace"
    id: str = Field(primary_key=True, max_length=64)
    name: str = Field(max_length=200)
    created_at: float


class MemberRow(SQLModel, table=True):
    __tablename__ = "member"
    __table_args__ = (sa.UniqueConstraint("workspace_id", "name"),)
    id: str = Field(primary_key=True, max_length=40)
    workspace_id: str = Field(index=True, max_length=64)
    name: str = Field(max_length=200)
    telegram_user_id: int | None = Field(default=None, sa_type=sa.BigInteger, index=True)
    slack_user_id: str | None = Field(default=None, max_length=64, index=True)
    created_at: float


class ApplicationRow(SQLModel, table=True):
    __tablename__ = "application"
    __table_args__ = (sa.UniqueConstraint("workspace_id", "name"),)
    id: str = Field(primary_key=True, max_length=40)
    workspace_id: str = Field(index=True, max_length=64)
    name: str = Field(max_length=200)
    created_at: float
    # The origins beyond `model` its appends may claim: "", "author", "kernel" or
    # "author,kernel" (`admin app add --may-claim`). Nothing unless its registration says so.
    may_claim: str = Field(default="", max_length=64, sa_column_kwargs={"server_default": ""})


class WebSessionRow(SQLModel, table=True):
    """A signed-in browser session. The cookie names it; signing out, or rotating or revoking
    the person's token, sets `revoked_at`, and the cookie stops working at once."""

    __tablename__ = "web_session"
    id: str = Field(primary_key=True, max_length=64)
    member_id: str = Field(index=True, max_length=40)
    workspace_id: str = Field(max_length=64)
    created_at: float
    expires_at: float
    revoked_at: float | None = None


class CredentialRow(SQLModel, table=True):
    """A bearer token. Only its SHA-256 is kept; the token itself is shown once."""

    __tablename__ = "credential"
    id: str = Field(primary_key=True, max_length=40)
    workspace_id: str = Field(max_length=64)
    kind: str = Field(max_length=16)
    principal_id: str = Field(index=True, max_length=40)
    principal_name: str = Field(max_length=200)
    token_hash: str = Field(unique=True, max_length=64)
    created_at: float
    revoked_at: float | None = None


class ExecutorRow(SQLModel, table=True):
    __tablename__ = "executor"
    id: str = Field(primary_key=True, max_length=40)
    workspace_id: str = Field(index=True, max_length=64)
    application_id: str = Field(max_length=40)
    name: str = Field(max_length=200)
    created_at: float
    revoked_at: float | None = None


class MetaRow(SQLModel, table=True):
    __tablename__ = "meta"
    key: str = Field(primary_key=True, max_length=64)
    value: str


class RunRow(SQLModel, table=True):
    __tablename__ = "run"
    id: str = Field(primary_key=True, max_length=40)
    workspace_id: str = Field(index=True, max_length=64)
    application_id: str | None = Field(default=None, max_length=40)
    state: str = Field(max_length=16)
    approval_mode: str = Field(max_length=16)
    approval_rules: Any = _json(nullable=False)
    tool_names: Any = _json()
    aliases: Any = _json(nullable=False)
    title: str = ""
    profile: str | None = None
    executor_id: str | None = Field(default=None, max_length=40)
    parent_run: str | None = Field(default=None, max_length=40)
    held_task_key: str | None = None
    learned_rules: Any = _json()
    rules_version: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    approval_requirements: Any = _json()  # several approvers (bot/quorum.py)
    forbid_self_approval: bool = Field(
        default=False, sa_column_kwargs={"server_default": sa.false()}
    )
    on_behalf_of: str | None = Field(default=None, max_length=200)
    shell_commands: Any = _json()  # shell lines judged per command (bot/rules/compound.py)
    declared_by: str | None = Field(default=None, max_length=200)  # a member who declared it
    created_at: float


class RunSeqRow(SQLModel, table=True):
    """A run's last event sequence number, on PostgreSQL: its row lock orders concurrent writers
    of one run. Apart from the run row, which holds the rules (up to 64 KiB), because every
    event bumps it. SQLite, with one writer at a time, numbers events from the event index
    instead and does not use this table."""

    __tablename__ = "run_seq"
    run_id: str = Field(primary_key=True, max_length=40)
    workspace_id: str = Field(max_length=64)  # for the NOTIFY that announces the events
    seq: int = 0


class TaskRow(SQLModel, table=True):
    __tablename__ = "task"
    __table_args__ = (
        sa.UniqueConstraint("run_id", "key"),
        # The inbox pages parked tasks newest first (keyset on created_at, id).
        sa.Index("ix_task_workspace_state_created", "workspace_id", "state", "created_at"),
        # Only calls parked for an executor are looked up by addressee.
        sa.Index(
            "ix_task_addressee_state",
            "addressee",
            "state",
            sqlite_where=sa.text("addressee IS NOT NULL"),
            postgresql_where=sa.text("addressee IS NOT NULL"),
        ),
    )
    id: str = Field(primary_key=True, max_length=40)
    run_id: str = Field(max_length=40)
    workspace_id: str = Field(max_length=64)
    key: str = Field(max_length=200)
    kind: str = Field(max_length=16)
    origin: str = Field(max_length=16)
    tool_name: str
    tool: str
    tool_input: Any = _json()
    state: str = Field(max_length=16)
    effect_profile: Any = _json()
    error: Any = _json()
    deadline: float | None = None
    failure_policy: str = Field(default="continue", max_length=16)
    addressee: str | None = Field(default=None, max_length=40)
    resolved_by: str | None = None
    via: str | None = Field(default=None, max_length=16)
    resolution: Any = _json()
    decided_at: float | None = None
    why: str = ""
    rule_index: int | None = None
    matched: Any = _json()
    request_hash: str = Field(default="", max_length=64)
    appended_by: str | None = None
    resolution_token_hash: str | None = Field(default=None, max_length=64)
    required_approvals: int = 1
    retry_of: str | None = None
    approved_input: Any = _json()
    approvals_given: Any = _json()  # under a quorum: [{"by", "at"}] counted so far
    reviewed_input: Any = _json()  # under a quorum: the edited input the approvals are for
    created_at: float


class LearnedRuleRow(SQLModel, table=True):
    """An allow rule a person learned from a decision ("approve always"): for one run, or for
    the runs declared from a profile afterwards (and the run it came from)."""

    __tablename__ = "learned_rule"
    id: str = Field(primary_key=True, max_length=40)
    workspace_id: str = Field(index=True, max_length=64)
    scope: str = Field(max_length=16)
    profile: str | None = Field(default=None, max_length=200)
    run_id: str | None = Field(default=None, max_length=40)
    rule: Any = _json(nullable=False)
    added_by: str = Field(max_length=200)
    from_run_id: str = Field(max_length=40)
    from_key: str = Field(max_length=200)
    created_at: float


class MemberGroupRow(SQLModel, table=True):
    """A named group of a workspace's members (`admin group add`): the people a quorum
    requirement's `groups` count (bot/quorum.py)."""

    __tablename__ = "member_group"
    __table_args__ = (sa.UniqueConstraint("workspace_id", "name"),)
    id: str = Field(primary_key=True, max_length=40)
    workspace_id: str = Field(max_length=64)
    name: str = Field(max_length=64)
    created_at: float


class GroupMemberRow(SQLModel, table=True):
    __tablename__ = "group_member"
    group_id: str = Field(primary_key=True, max_length=40)
    member_id: str = Field(primary_key=True, max_length=40, index=True)


class ReviewRow(SQLModel, table=True):
    """One person's approve or deny. An ending is computed from reviews."""

    __tablename__ = "review"
    __table_args__ = (sa.UniqueConstraint("task_id", "member_id"),)
    id: int | None = Field(default=None, primary_key=True)
    task_id: str = Field(max_length=40)
    member_id: str = Field(max_length=40)
    member_name: str
    verdict: str = Field(max_length=16)
    reason: str = ""
    via: str = Field(max_length=16)
    created_at: float


class EventRow(SQLModel, table=True):
    __tablename__ = "event"
    __table_args__ = (
        sa.UniqueConstraint("run_id", "seq"),
        # Only `work_available` notices carry an executor.
        sa.Index(
            "ix_event_executor_id",
            "executor_id",
            sqlite_where=sa.text("executor_id IS NOT NULL"),
            postgresql_where=sa.text("executor_id IS NOT NULL"),
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(max_length=40)
    seq: int
    name: str = Field(max_length=40)
    data: Any = _json(nullable=False)
    # Set on `work_available` so an executor's cable can follow its own notices across runs.
    executor_id: str | None = Field(default=None, max_length=40)
    created_at: float


class DecisionLogRow(SQLModel, table=True):
    """Append-only audit trail: who did what, when, from which surface."""

    __tablename__ = "decision_log"
    # A run's page and the runs list read one run's entries.
    __table_args__ = (sa.Index("ix_decision_log_run", "run_id", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    workspace_id: str = Field(index=True, max_length=64)
    run_id: str | None = None
    task_key: str | None = None
    action: str = Field(max_length=40)
    actor: str
    via: str = Field(max_length=16)
    detail: Any = _json()
    at: float


class TimerRow(SQLModel, table=True):
    __tablename__ = "timer"
    # (due_at, run_id) so the clock claims a batch in index order, grouped by run.
    __table_args__ = (sa.Index("ix_timer_due_run", "done", "due_at", "run_id"),)
    id: str = Field(primary_key=True, max_length=60)
    task_id: str = Field(index=True, max_length=40)
    run_id: str = Field(max_length=40)
    kind: str = Field(max_length=16)
    seq: int = 0
    due_at: float
    done: bool = False


class OutboxRow(SQLModel, table=True):
    __tablename__ = "outbox"
    __table_args__ = (sa.Index("ix_outbox_pending", "delivered_at", "next_attempt_at"),)
    id: str = Field(primary_key=True, max_length=40)
    channel: str = Field(max_length=32)
    kind: str = Field(max_length=16)
    task_id: str = Field(max_length=40)
    run_id: str = Field(max_length=40)
    workspace_id: str = Field(max_length=64)
    idempotency_key: str = Field(unique=True, max_length=200)
    payload: Any = _json()
    created_at: float
    attempts: int = 0
    next_attempt_at: float
    lease_until: float = 0.0
    delivered_at: float | None = None
    last_error: str = ""


class DeliveryRefRow(SQLModel, table=True):
    """What an adapter sent for a task (chat message ids to edit later); compare-and-swap on
    `version` so two instances never both post the same decision."""

    __tablename__ = "delivery_ref"
    channel: str = Field(primary_key=True, max_length=32)
    task_id: str = Field(primary_key=True, max_length=40)
    data: Any = _json(nullable=False)
    version: int = 0


# Chat adapters' own state (written through store/chat.py; platform ids as text) ---------------


class ChatCallbackRow(SQLModel, table=True):
    """An opaque button id and what it stands for. Chat buttons carry only the id; everything
    else is looked up here, so nothing a client sends back is trusted. Each platform's buttons
    are its own (keyed by channel and id), and `chat` is the place they are shown in (None:
    any place of the platform, for ids saved before migration 0011)."""

    __tablename__ = "chat_callback"
    channel: str = Field(primary_key=True, max_length=32)
    id: str = Field(primary_key=True, max_length=32)
    task_id: str = Field(index=True, max_length=40)
    action: str = Field(max_length=16)
    option: int | None = None
    created_at: float
    chat: str | None = Field(default=None, max_length=64)


class ChatPromptRow(SQLModel, table=True):
    """A question the bot asked in chat (ForceReply) whose reply decides a task."""

    __tablename__ = "chat_prompt"
    channel: str = Field(primary_key=True, max_length=32)
    chat_id: str = Field(primary_key=True, max_length=64)
    message_id: str = Field(primary_key=True, max_length=64)
    task_id: str = Field(index=True, max_length=40)
    action: str = Field(max_length=16)
    user_id: str = Field(max_length=64)
    created_at: float


class ChatChoiceRow(SQLModel, table=True):
    """The toggles of a multi-select question, shared by everyone in the chat until Submit."""

    __tablename__ = "chat_choice"
    channel: str = Field(primary_key=True, max_length=32)
    task_id: str = Field(primary_key=True, max_length=40)
    chosen: Any = _json(nullable=False)
    version: int = 0


class ChatDigestRow(SQLModel, table=True):
    """One digest message: many decisions listed together when a chat gets more than it can
    take one by one. `shown` fingerprints what the message displays now, so a refresh after a
    restart edits only when something changed."""

    __tablename__ = "chat_digest"
    __table_args__ = (sa.Index("ix_chat_digest_active", "channel", "done", "chat_id"),)
    id: int | None = Field(default=None, primary_key=True)
    channel: str = Field(max_length=32)
    chat_id: str = Field(max_length=64)
    message_id: str | None = Field(default=None, max_length=64)
    task_ids: Any = _json(nullable=False)
    is_open: bool = True
    done: bool = False
    shown: str = Field(default="", max_length=64)
    lease_until: float = 0.0
    version: int = 0
    created_at: float
    updated_at: float


class ChatRecordRow(SQLModel, table=True):
    """A platform's own record under a key it names (a Slack run's thread, a send budget
    shared by instances); compare-and-swap on `version` like the delivery refs."""

    __tablename__ = "chat_record"
    channel: str = Field(primary_key=True, max_length=32)
    key: str = Field(primary_key=True, max_length=200)
    data: Any = _json(nullable=False)
    version: int = 0
    updated_at: float
