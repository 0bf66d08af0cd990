"""Identities: workspaces, members (people), applications (agent runtimes) and their tokens."""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot import errors, names, quorum, tokens
from bot.clock import Clock
from bot.domain import CLAIMABLE_ORIGINS, Application, Member, Principal, Workspace, new_id
from bot.errors import ApprovalError
from bot.ports import DuplicateKey, Store, Tx

log = logging.getLogger(__name__)

_WORKSPACE_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_SECRET_KEY = "instance_secret"
_SLACK_ID_LIMIT = 64  # the column's length
_TELEGRAM_ID_MAX = 2**63 - 1  # a BIGINT


def _check_chat_ids(telegram_user_id: int | None, slack_user_id: str | None) -> None:
    """A chat identity a person could have: a positive Telegram user id, a Slack user id of
    printable ASCII without spaces (`U…`, `W…`)."""
    if telegram_user_id is not None and not 0 < telegram_user_id <= _TELEGRAM_ID_MAX:
        raise ApprovalError(
            errors.INVALID_REQUEST, "telegram user id: a person's id is a positive number", 422
        )
    if slack_user_id is not None and not (
        0 < len(slack_user_id) <= _SLACK_ID_LIMIT
        and slack_user_id.isascii()
        and slack_user_id.isprintable()
        and " " not in slack_user_id
    ):
        raise ApprovalError(
            errors.INVALID_REQUEST,
            f"slack user id: 1-{_SLACK_ID_LIMIT} printable ASCII characters, no spaces (U…)",
            422,
        )


def _clash(
    workspace_id: str,
    new: Member,
    existing: Iterable[Member],
) -> ApprovalError | None:
    """Why NEW cannot join the workspace's EXISTING members: a name that is, or looks like,
    another's; a Telegram or Slack identity mapped to another member already (a press must
    name one person)."""
    for other in existing:
        if other.name == new.name:
            return ApprovalError(errors.CONFLICT, f"member {new.name} exists", 409)
        if names.look_alike(other.name, new.name):
            return ApprovalError(
                errors.CONFLICT,
                f"member name {new.name!r} looks like that of member {other.name!r} "
                f"in {workspace_id} (names are compared ignoring case, width and look-alike "
                "letters): choose a name people can tell apart",
                409,
            )
        if new.telegram_user_id is not None and other.telegram_user_id == new.telegram_user_id:
            return ApprovalError(
                errors.CONFLICT,
                f"telegram user id {new.telegram_user_id} is mapped to member {other.name} "
                f"in {workspace_id} already",
                409,
            )
        if new.slack_user_id is not None and other.slack_user_id == new.slack_user_id:
            return ApprovalError(
                errors.CONFLICT,
                f"slack user id {new.slack_user_id} is mapped to member {other.name} "
                f"in {workspace_id} already",
                409,
            )
    return None


def parse_claims(value: Iterable[str] | str) -> frozenset[str]:
    """`author,kernel` (or a list of them) as a set; anything else is `invalid_request`."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    claims = frozenset(part.strip() for part in parts if part.strip())
    unknown = sorted(claims - set(CLAIMABLE_ORIGINS))
    if unknown:
        raise ApprovalError(
            errors.INVALID_REQUEST,
            f"may_claim: {unknown[0]!r} is not an origin an application may claim "
            "(author, kernel; comma-separated)",
            422,
        )
    return claims


@dataclass(frozen=True)
class Issued:
    """A new principal and its token; the token is shown once and stored only as a hash."""

    principal: Principal
    token: str


@dataclass(frozen=True)
class GroupRemoval:
    """What `remove_group` did: the members taken out, whether the group itself went, and,
    when it was forced, the running runs it left short of approvers."""

    removed: list[str]
    deleted: bool
    forced: quorum.GroupInUse | None = None


class Admin:
    def __init__(self, store: Store, clock: Clock, *, token_cache_seconds: float = 1.0) -> None:
        self.store = store
        self.clock = clock
        # Bearer lookups are remembered briefly: at full load every request would otherwise
        # open a read transaction just for this. Revocations in this process clear the cache
        # at once; one made by another process (the admin CLI) takes effect within this time.
        self._token_cache_seconds = token_cache_seconds
        self._token_cache: dict[str, tuple[float, Principal]] = {}

    async def instance_secret(self) -> str:
        """A random secret made on first start; keys derived tokens (resolution, login links)."""
        async with self.store.read() as tx:
            value = await tx.get_meta(_SECRET_KEY)
        if value is not None:
            return value
        try:
            async with self.store.write() as tx:
                await tx.set_meta(_SECRET_KEY, secrets.token_hex(32))
        except DuplicateKey:
            pass  # another instance made it first
        async with self.store.read() as tx:
            value = await tx.get_meta(_SECRET_KEY)
        assert value is not None
        return value

    async def create_workspace(self, name: str) -> Workspace:
        if not _WORKSPACE_ID.match(name):
            raise ApprovalError(
                errors.INVALID_REQUEST,
                "workspace name: lowercase letters, digits, - and _, at most 63",
                422,
            )
        workspace = Workspace(id=name, name=name, created_at=self.clock.now())
        try:
            async with self.store.write() as tx:
                await tx.insert_workspace(workspace)
        except DuplicateKey:
            raise ApprovalError(errors.CONFLICT, f"workspace {name} exists", 409) from None
        return workspace

    async def workspaces(self) -> list[Workspace]:
        async with self.store.read() as tx:
            return await tx.list_workspaces()

    async def _workspace(self, workspace_id: str) -> Workspace:
        async with self.store.read() as tx:
            workspace = await tx.get_workspace(workspace_id)
        if workspace is None:
            raise ApprovalError(errors.NOT_FOUND, f"workspace {workspace_id} not found", 404)
        return workspace

    async def add_member(
        self,
        workspace_id: str,
        name: str,
        *,
        telegram_user_id: int | None = None,
        slack_user_id: str | None = None,
    ) -> Issued:
        """Add a person and issue their token. Refused: a name with invisible characters or
        mixed scripts (422), a name that is or looks like another member's, or a Telegram or
        Slack identity mapped to another member of the workspace (409)."""
        await self._workspace(workspace_id)
        problem = names.problem(name)
        if problem is not None:
            raise ApprovalError(errors.INVALID_REQUEST, f"member name: {problem}", 422)
        _check_chat_ids(telegram_user_id, slack_user_id)
        member = Member(new_id("mem"), workspace_id, name, telegram_user_id, slack_user_id)
        principal = Principal("member", member.id, name, workspace_id)
        token = tokens.new_token("member")
        try:
            async with self.store.write() as tx:
                await tx.lock_members(workspace_id)  # another addition waits, or is seen
                clash = _clash(workspace_id, member, await tx.list_members(workspace_id))
                if clash is not None:
                    raise clash
                await tx.insert_member(member)
                await self._issue(tx, principal, token)
        except DuplicateKey:
            raise ApprovalError(errors.CONFLICT, f"member {name} exists", 409) from None
        return Issued(principal, token)

    async def add_application(
        self, workspace_id: str, name: str, *, may_claim: Iterable[str] | str = ()
    ) -> Issued:
        """Register an agent runtime and issue its token. `may_claim` names the origins beyond
        `model` its appends may claim (`author`, `kernel`); nothing unless it is given."""
        claims = parse_claims(may_claim)
        await self._workspace(workspace_id)
        if not name or len(name) > 200:
            raise ApprovalError(errors.INVALID_REQUEST, "application name: 1-200 characters", 422)
        app = Application(new_id("app"), workspace_id, name, may_claim=claims)
        principal = Principal("application", app.id, name, workspace_id)
        token = tokens.new_token("application")
        try:
            async with self.store.write() as tx:
                await tx.insert_application(app)
                await self._issue(tx, principal, token)
        except DuplicateKey:
            raise ApprovalError(errors.CONFLICT, f"application {name} exists", 409) from None
        return Issued(principal, token)

    async def applications(self, workspace_id: str) -> list[Application]:
        """The workspace's applications by name, with the origins each may claim."""
        await self._workspace(workspace_id)
        async with self.store.read() as tx:
            return await tx.list_applications(workspace_id)

    # groups (several approvers: a requirement's `groups` count their members) ---------------
    async def add_group(
        self, workspace_id: str, name: str, members: Sequence[str] = ()
    ) -> tuple[bool, list[str]]:
        """Make the group NAME (if new) and add the named members to it; (created, the names
        newly added). An unknown member is `not_found` and nothing is changed."""
        await self._workspace(workspace_id)
        if not quorum.group_name_ok(name):
            raise ApprovalError(
                errors.INVALID_REQUEST,
                f"group name: 1-{quorum.GROUP_NAME_LIMIT} printable characters, no outer spaces",
                422,
            )
        try:
            async with self.store.write() as tx:
                await tx.lock_groups(workspace_id)  # a removal of this group waits, or is seen
                ids = await self._member_ids(tx, workspace_id, members)
                group_id = await tx.group_id(workspace_id, name)
                created = group_id is None
                if group_id is None:
                    group_id = new_id("grp")
                    await tx.insert_group(group_id, workspace_id, name, self.clock.now())
                added = [m for m, i in ids.items() if await tx.add_group_member(group_id, i)]
        except DuplicateKey:  # made by another writer at the same moment: add to it
            return False, (await self.add_group(workspace_id, name, members))[1]
        return created, added

    async def remove_group(
        self, workspace_id: str, name: str, members: Sequence[str] = (), *, force: bool = False
    ) -> GroupRemoval:
        """Take the named members out of the group, or with none named remove the group. Runs
        declared before keep their requirements (they are frozen) and count the group's members
        as they are now, so a change that leaves a running (or held) run's requirement naming
        the group with fewer eligible approvers than it asks for is `409 group_in_use`, unless
        `force`: then it is made, and the removal says which runs it left short. Changes to a
        workspace's groups are one at a time (`lock_groups`), so two removals at once never
        both spend the same spare approver."""
        await self._workspace(workspace_id)
        async with self.store.write() as tx:
            # Before anything is read: the members counted below stay as they are until this
            # commits (another removal, or a declaration naming the group, waits for it).
            await tx.lock_groups(workspace_id)
            group_id = await tx.group_id(workspace_id, name)
            if group_id is None:
                raise ApprovalError(
                    errors.NOT_FOUND, f"group {name} not found in {workspace_id}", 404
                )
            ids = await self._member_ids(tx, workspace_id, members)
            before = await tx.groups(workspace_id)
            taking = set(before.get(name, [])) if not members else set(ids)
            after = before | {name: [m for m in before.get(name, []) if m not in taking]}
            runs = await tx.live_runs(workspace_id)
            in_use = quorum.group_in_use(name, runs, before, after)
            if in_use is not None and not force:
                raise ApprovalError(errors.GROUP_IN_USE, in_use.detail, 409)
            if not members:
                await tx.delete_group(group_id)
                return GroupRemoval(before.get(name, []), True, in_use)
            removed = [m for m, i in ids.items() if await tx.remove_group_member(group_id, i)]
            return GroupRemoval(removed, False, in_use)

    async def groups(self, workspace_id: str) -> dict[str, list[str]]:
        """The workspace's groups by name, each with its members' names."""
        await self._workspace(workspace_id)
        async with self.store.read() as tx:
            return await tx.groups(workspace_id)

    async def _member_ids(self, tx: Tx, workspace_id: str, names: Sequence[str]) -> dict[str, str]:
        ids: dict[str, str] = {}
        for member_name in dict.fromkeys(names):
            found = await tx.find_member(workspace_id, name=member_name)
            if found is None:
                raise ApprovalError(
                    errors.NOT_FOUND, f"member {member_name} not found in {workspace_id}", 404
                )
            ids[member_name] = found.id
        return ids

    async def _issue(self, tx: Tx, principal: Principal, token: str) -> None:
        await tx.insert_credential(
            credential_id=new_id("cred"),
            principal=principal,
            token_hash=tokens.token_hash(token),
            at=self.clock.now(),
        )

    async def principal(self, workspace_id: str, kind: str, name: str) -> Principal:
        """The member or application of that name; `not_found` when there is none."""
        async with self.store.read() as tx:
            if kind == "member":
                member = await tx.find_member(workspace_id, name=name)
                if member is not None:
                    return Principal("member", member.id, member.name, workspace_id)
            else:
                app = await tx.find_application(workspace_id, name)
                if app is not None:
                    return Principal("application", app.id, app.name, workspace_id)
        raise ApprovalError(errors.NOT_FOUND, f"{kind} {name} not found in {workspace_id}", 404)

    async def rotate(self, workspace_id: str, kind: str, name: str) -> Issued:
        """Revoke every token of the member/application and issue a new one."""
        principal = await self.principal(workspace_id, kind, name)
        token = tokens.new_token(principal.kind)
        async with self.store.write() as tx:
            await tx.revoke_credentials(principal.id, self.clock.now())
            await self._issue(tx, principal, token)
        self._token_cache.clear()
        return Issued(principal, token)

    async def revoke(self, workspace_id: str, kind: str, name: str) -> int:
        principal = await self.principal(workspace_id, kind, name)
        async with self.store.write() as tx:
            revoked = await tx.revoke_credentials(principal.id, self.clock.now())
        self._token_cache.clear()
        return revoked

    async def authenticate(self, token: str) -> Principal | None:
        """The principal a bearer token stands for, or None. Lookup is by SHA-256, so the
        comparison never touches the token itself."""
        if not token or len(token) > 200:
            return None
        digest = tokens.token_hash(token)
        now = time.monotonic()
        cached = self._token_cache.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        async with self.store.read() as tx:
            principal = await tx.principal_for_token(digest)
        if principal is not None and self._token_cache_seconds > 0:
            if len(self._token_cache) >= 10_000:
                self._token_cache.clear()
            self._token_cache[digest] = (now + self._token_cache_seconds, principal)
        return principal

    async def is_active(self, principal: Principal) -> bool:
        """Whether the principal still holds a token that is not revoked (web sessions end
        with the person's last token)."""
        async with self.store.read() as tx:
            return await tx.has_active_credential(principal.id)

    async def member_by_chat(
        self,
        *,
        telegram_user_id: int | None = None,
        slack_user_id: str | None = None,
        workspace_id: str,
    ) -> Principal | None:
        """The person a press in Telegram or Slack stands for, if they may decide now: the
        identity is mapped to a member of the task's workspace, and that member holds a member
        token that is not revoked (the condition their web sessions live by, too). Revoked,
        unmapped, of another workspace: None ("You are not an approver here"). Read from the
        store at every press, never cached, so a revocation by another process (the admin CLI)
        holds from the next press on; a rotation gives the person their say back."""
        async with self.store.read() as tx:
            found = await tx.chat_members(
                workspace_id, telegram_user_id=telegram_user_id, slack_user_id=slack_user_id
            )
        deciding = [member for member, live in found if live]
        if len(deciding) > 1:  # mapped twice before `member add` refused it: whose press?
            log.warning(
                "a %s identity is mapped to %d members of workspace %s: their presses are "
                "refused until only one of them holds a token",
                "Telegram" if telegram_user_id is not None else "Slack",
                len(deciding),
                workspace_id,
            )
            return None
        if not deciding:
            return None
        member = deciding[0]
        return Principal("member", member.id, member.name, workspace_id)
