"""The small ports the core needs: storage and notifications. store/ and adapters/ implement them.

Every ending is a compare-and-set in `Tx.end_task`: the first writer wins on every database and
under every race, and a loser reads back who won.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from bot.domain import (
    Application,
    Ending,
    Event,
    Executor,
    LogEntry,
    LogRecord,
    Member,
    NewEvent,
    OutboxItem,
    Principal,
    Run,
    RunState,
    Task,
    TaskState,
    Timer,
    Workspace,
)

if TYPE_CHECKING:
    from bot.learning import LearnedRule


class DuplicateKey(Exception):
    """An insert hit a unique key (a task key already used in the run, a name taken…)."""


class IdentityTx(Protocol):
    """Workspaces, members, applications, credentials, instance metadata."""

    async def get_workspace(self, workspace_id: str) -> Workspace | None: ...
    async def insert_workspace(self, workspace: Workspace) -> None: ...
    async def list_workspaces(self) -> list[Workspace]: ...
    async def insert_member(self, member: Member) -> None: ...
    async def get_member(self, member_id: str) -> Member | None: ...
    async def find_member(
        self,
        workspace_id: str,
        *,
        name: str | None = None,
        telegram_user_id: int | None = None,
        slack_user_id: str | None = None,
    ) -> Member | None: ...
    async def chat_members(
        self,
        workspace_id: str,
        *,
        telegram_user_id: int | None = None,
        slack_user_id: str | None = None,
    ) -> list[tuple[Member, bool]]:
        """The workspace's members mapped to that chat identity, each with whether they hold
        a live (unrevoked) member token: whether they may decide now."""
        ...

    async def lock_members(self, workspace_id: str) -> None:
        """Serialise additions of members to the workspace until the transaction ends."""
        ...

    async def list_members(self, workspace_id: str) -> list[Member]: ...
    async def insert_application(self, app: Application) -> None: ...
    async def find_application(self, workspace_id: str, name: str) -> Application | None: ...
    async def get_application(self, application_id: str) -> Application | None: ...
    async def list_applications(self, workspace_id: str) -> list[Application]: ...
    async def insert_credential(
        self, *, credential_id: str, principal: Principal, token_hash: str, at: datetime
    ) -> None: ...
    async def principal_for_token(self, token_hash: str) -> Principal | None: ...
    async def has_active_credential(self, principal_id: str) -> bool: ...
    async def revoke_credentials(self, principal_id: str, at: datetime) -> int: ...
    async def get_meta(self, key: str) -> str | None: ...
    async def set_meta(self, key: str, value: str) -> None: ...


class ExecutorTx(Protocol):
    """An application's executors."""

    async def insert_executor(self, executor: Executor) -> None: ...
    async def get_executor(self, executor_id: str) -> Executor | None: ...
    async def revoke_executor(self, executor_id: str) -> bool: ...
    async def clear_addressee(self, executor_id: str) -> list[Task]: ...


class RunTx(Protocol):
    """Runs and their tasks; every ending is the compare-and-set `end_task(s)`."""

    async def insert_run(self, run: Run) -> None: ...
    async def get_run(self, run_id: str, *, for_update: bool = False) -> Run | None:
        """With `for_update`, lock the run row: every write that touches a run's tasks takes
        this lock first, so concurrent writers always lock in the same order."""
        ...

    async def get_run_state(
        self, run_id: str, *, for_update: bool = False
    ) -> tuple[RunState, str | None, int] | None:
        """(state, held_task_key, rules_version): the parts of a run that change after
        creation (the version counts changes of its learned rules)."""
        ...

    async def set_learned_rules(self, run_id: str, learned: Sequence[dict[str, Any]]) -> None:
        """Replace the run's learned rules and bump its `rules_version`."""
        ...

    async def recent_calls(self, workspace_id: str, since: datetime, limit: int) -> list[Task]: ...

    async def set_run_state(
        self,
        run_id: str,
        from_states: Sequence[str],
        to_state: str,
        held_task_key: str | None = None,
    ) -> bool: ...
    async def insert_task(self, task: Task) -> None: ...
    async def get_task(self, run_id: str, key: str) -> Task | None: ...
    async def get_task_by_id(self, task_id: str) -> Task | None: ...
    async def tasks_by_ids(self, task_ids: Sequence[str]) -> list[Task]: ...
    async def parked_keys(self, run_id: str) -> list[tuple[str, str]]: ...
    async def lock_runs(self, run_ids: Sequence[str]) -> dict[str, Run]: ...
    async def parked_keys_of(self, run_ids: Sequence[str]) -> dict[str, list[tuple[str, str]]]: ...
    async def parked_tasks(self, run_id: str) -> list[Task]: ...
    async def tasks_of_run(self, run_id: str) -> list[Task]: ...
    async def end_task(
        self, task_id: str, from_states: Sequence[TaskState], ending: Ending
    ) -> Task | None: ...
    async def end_tasks(
        self, task_ids: Sequence[str], from_states: Sequence[TaskState], ending: Ending
    ) -> list[Task]: ...


class JournalTx(Protocol):
    """What goes with every change: events, decision-log entries, outbox items, timers."""

    async def add_events(self, events: Sequence[NewEvent], at: datetime) -> None: ...
    async def add_log(self, entries: Sequence[LogEntry]) -> None: ...
    async def add_outbox(self, items: Sequence[OutboxItem]) -> None: ...
    async def add_timers(self, timers: Sequence[Timer]) -> None: ...
    async def claim_due_timers(self, now: datetime, limit: int) -> list[Timer]: ...
    async def finish_timers(self, timer_ids: Sequence[str]) -> None: ...


class LearnedRuleTx(Protocol):
    """Rules learned from decisions, listed per workspace (a run keeps its own copy)."""

    async def insert_learned_rule(self, rule: LearnedRule) -> None: ...
    async def get_learned_rule(self, rule_id: str) -> LearnedRule | None: ...
    async def learned_rules(
        self, workspace_id: str, *, profile: str | None = None
    ) -> list[LearnedRule]: ...
    async def delete_learned_rule(self, rule_id: str) -> bool: ...


class QuorumTx(Protocol):
    """Several approvers: groups of members, review rows, a task's count (store/tx_quorum.py)."""

    async def lock_groups(self, workspace_id: str, *, shared: bool = False) -> None:
        """Hold the workspace's groups still until the transaction ends (before reading them):
        exclusive to change them, shared to check a declaration's; a no-op where writers are
        serialised anyway (SQLite)."""
        ...

    async def insert_group(
        self, group_id: str, workspace_id: str, name: str, at: datetime
    ) -> None: ...
    async def group_id(self, workspace_id: str, name: str) -> str | None: ...
    async def add_group_member(self, group_id: str, member_id: str) -> bool: ...
    async def remove_group_member(self, group_id: str, member_id: str) -> bool: ...
    async def delete_group(self, group_id: str) -> None: ...
    async def groups(self, workspace_id: str) -> dict[str, list[str]]: ...
    async def live_runs(self, workspace_id: str) -> list[Run]:
        """The workspace's running and held runs that have approval requirements."""
        ...

    async def member_names(self, workspace_id: str) -> list[str]: ...
    async def groups_of_members(
        self, workspace_id: str, names: Sequence[str]
    ) -> dict[str, set[str]]: ...
    async def put_review(
        self,
        *,
        task_id: str,
        member: Principal,
        verdict: str,
        reason: str,
        via: str,
        at: datetime,
    ) -> bool:
        """False when the member reviewed the task already (and nothing is written)."""
        ...

    async def supersede_approvals(self, task_id: str, keep_member_id: str) -> None: ...
    async def set_approvals(
        self,
        task_id: str,
        *,
        approvals_given: list[dict[str, Any]],
        reviewed_input: Any,
        required_approvals: int,
    ) -> None: ...


class Tx(IdentityTx, ExecutorTx, RunTx, JournalTx, LearnedRuleTx, QuorumTx, Protocol):
    """One transaction. Reads see the transaction's own writes."""


class Store(Protocol):
    """Persistence. `write()` is a serialisable-enough write transaction; `read()` a snapshot."""

    def write(self) -> AbstractAsyncContextManager[Tx]: ...
    def read(self) -> AbstractAsyncContextManager[Tx]: ...

    async def events_after(self, run_id: str, seq: int, limit: int = 500) -> list[Event]: ...
    async def work_events(
        self, executor_id: str, after_id: int, limit: int = 500
    ) -> list[Event]: ...
    async def next_timer_due(self) -> datetime | None: ...
    async def asks(
        self,
        workspace_id: str,
        *,
        run_id: str | None = None,
        limit: int | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[Task]:
        """Parked tasks resting on a person, newest first; `before` is the (created_at, id) of
        the last one already seen (keyset paging: stable while new ones arrive)."""
        ...

    async def ask_counts(self, workspace_id: str) -> list[tuple[str, int, datetime]]:
        """(run_id, waiting, newest created_at) per run with something resting on a person,
        the run with the newest first."""
        ...

    async def executor_inbox(self, executor_id: str) -> list[Task]: ...
    async def log_entries(
        self,
        workspace_id: str,
        *,
        after_id: int = 0,
        limit: int = 1000,
        run_id: str | None = None,
        task_key: str | None = None,
    ) -> list[LogRecord]: ...
    async def log_page(
        self, workspace_id: str, run_id: str, *, before_id: int | None = None, limit: int = 300
    ) -> tuple[list[LogRecord], int, int]:
        """A run's entries before `before_id` (the newest `limit` without it), oldest first;
        the run's count of entries; the count of those older than the page."""
        ...

    async def tasks(
        self,
        workspace_id: str,
        *,
        states: Sequence[str] | None = None,
        run_id: str | None = None,
        tool: str | None = None,
        resolved_by: str | None = None,
        via: str | None = None,
        parked_only: bool = False,
        limit: int = 200,
        search: str | None = None,
        error_codes: Sequence[str] | None = None,
        not_error_codes: Sequence[str] | None = None,
    ) -> list[Task]:
        """`search`: text found literally (no wildcards), case-insensitively, in the tool, the
        input, the effect profile or who decided (the history page's search box).
        `error_codes` / `not_error_codes`: the ending's `error.code` is / is not one of them."""
        ...

    async def run_endings(
        self, workspace_id: str, run_ids: Sequence[str], actions: Sequence[str]
    ) -> dict[str, LogRecord]:
        """Per run, its latest log entry with one of `actions` (how each run ended)."""
        ...

    async def first_tasks(self, run_ids: Sequence[str]) -> dict[str, Task]:
        """Per run, its first call or question."""
        ...

    async def runs(self, workspace_id: str, *, limit: int = 100) -> list[Run]: ...
    async def claim_outbox(self, now: datetime, limit: int, lease: float) -> list[OutboxItem]: ...
    async def outbox_done(self, item_id: str, at: datetime) -> None: ...
    async def outbox_retry(self, item_id: str, next_at: datetime, error: str) -> None: ...
    async def purge(self, before: datetime) -> int: ...
    async def outbox_backlog(self) -> int: ...
    async def count_parked(self) -> int: ...
    async def ping(self) -> bool: ...
    async def close(self) -> None: ...


class Notifier(Protocol):
    """A surface that shows decisions to people (Telegram, Slack). Delivers one outbox item.

    Delivery must be idempotent on `item.idempotency_key`: the relay may hand the same item
    again after a crash between sending and marking it done.
    """

    name: str

    async def deliver(self, item: OutboxItem, task: Task, run: Run) -> None: ...

    async def healthy(self) -> bool: ...


JsonDict = dict[str, Any]


# Chat adapters' own state ---------------------------------------------------------------------


@dataclass(frozen=True)
class ChatCallback:
    """What an opaque button id stands for (the button itself carries only `id`): on the
    platform `channel`, in the place `chat` (None: in any of the platform's places, as the ids
    saved before migration 0011)."""

    id: str
    channel: str
    task_id: str
    action: str
    option: int | None = None
    chat: str | None = None


@dataclass(frozen=True)
class ChatPrompt:
    """A ForceReply prompt whose reply decides `task_id` (a deny reason, a free-text answer).
    Ids are the platform's own, as text: Telegram's integers in decimal ("-100200300")."""

    channel: str
    chat_id: str
    message_id: str
    task_id: str
    action: str
    user_id: str


@dataclass(frozen=True)
class Versioned:
    """A JSON record and the version a compare-and-swap must name (0: the record is absent)."""

    data: dict[str, Any]
    version: int


@dataclass(frozen=True)
class DigestPage:
    """One digest message listing many decisions of a chat (ids as text, like ChatPrompt's;
    `message_id` is None until the message is sent)."""

    id: int
    channel: str
    chat_id: str
    message_id: str | None
    task_ids: list[str]
    is_open: bool
    done: bool
    shown: str
    lease_until: float
    version: int


class PollLock(Protocol):
    """Elects the one instance that long-polls a chat platform."""

    async def acquire(self) -> bool: ...
    async def alive(self) -> bool: ...
    async def release(self) -> None: ...


class ChatState(Protocol):
    """What a chat adapter keeps between messages. Every write that could race between two
    instances is a compare-and-swap on a version, so exactly one of them wins."""

    async def save_callbacks(self, callbacks: Sequence[ChatCallback], at: datetime) -> None:
        """Insert, keeping rows that exist (ids are derived, so a retry writes the same)."""
        ...

    async def callback_task(
        self, channel: str, callback_id: str
    ) -> tuple[ChatCallback, Task] | None:
        """The platform's button and its task, in one read."""
        ...

    async def get_ref(self, channel: str, task_id: str) -> Versioned | None: ...
    async def get_refs(self, channel: str, task_ids: Sequence[str]) -> dict[str, Versioned]:
        """The delivery records of those of `task_ids` that have one, by task id."""
        ...

    async def swap_ref(
        self,
        channel: str,
        task_id: str,
        data: dict[str, Any],
        version: int,
        callbacks: Sequence[ChatCallback] = (),
        at: datetime | None = None,
    ) -> bool:
        """Compare-and-swap the task's delivery record, saving `callbacks` with it."""
        ...

    async def get_choice(self, channel: str, task_id: str) -> Versioned | None: ...
    async def swap_choice(
        self, channel: str, task_id: str, data: dict[str, Any], version: int
    ) -> bool: ...
    async def add_prompt(self, prompt: ChatPrompt, at: datetime) -> None: ...
    async def prompt(self, channel: str, chat_id: str, message_id: str) -> ChatPrompt | None: ...
    async def drop_prompt(self, channel: str, chat_id: str, message_id: str) -> bool: ...
    async def join_digest(
        self,
        channel: str,
        chat_id: str,
        task_id: str,
        page_size: int,
        at: datetime,
        ref: Versioned,
        fresh_for: float = 600.0,
    ) -> DigestPage | None:
        """Append the task to the chat's open digest page (a new one when it is full or older
        than `fresh_for` seconds) and compare-and-swap the task's delivery ref to `ref.data`
        plus the page id under "digest", in one transaction; None (nothing written) if the
        ref moved on from `ref.version`."""
        ...

    async def tasks(self, task_ids: Sequence[str]) -> list[Task]:
        """Tasks by id, in the order given (a digest page's list, in one read)."""
        ...

    async def digest_pages(self, channel: str, chat_id: str | None = None) -> list[DigestPage]:
        """Pages not yet done, oldest first."""
        ...

    def poll_lock(self, name: str) -> PollLock | None:
        """The election among instances sharing the store (None: a single instance)."""
        ...

    async def get_page(self, page_id: int) -> DigestPage | None: ...
    async def swap_page(self, page_id: int, version: int, **changes: Any) -> bool: ...

    async def get_record(self, channel: str, key: str) -> Versioned | None:
        """A platform record the adapter names itself (a Slack run's thread, a send budget
        shared by instances); None if absent."""
        ...

    async def swap_record(self, channel: str, key: str, data: dict[str, Any], version: int) -> bool:
        """Compare-and-swap the record like `swap_ref`: write `data` if it is still at
        `version` (0: insert it if absent); True for the one writer that won."""
        ...


# The browser page's sessions ------------------------------------------------------------------


@dataclass(frozen=True)
class WebSession:
    """A signed-in browser session as the store keeps it: the signed cookie names `id`."""

    id: str
    member: Principal
    created_at: datetime
    expires_at: datetime


class WebSessions(Protocol):
    """Server-side sessions of the browser page, so that signing out, or rotating or revoking the
    person's token, ends a session at once even for a cookie copied before."""

    async def create(self, session: WebSession) -> None: ...

    async def get(self, session_id: str, now: datetime) -> WebSession | None:
        """The session if it is live (one indexed read): not signed out, not expired, and its
        person still holds a token, none of which was revoked since the session began. The
        member's name and workspace are the store's, not the cookie's."""
        ...

    async def revoke(self, session_id: str, at: datetime) -> bool:
        """Sign-out: True if the session was live until now."""
        ...

    async def revoke_for_member(self, member_id: str, at: datetime) -> int:
        """End every live session of the person (token rotation or revocation); how many."""
        ...
