"""Presses and typed text turned into core calls, the same on every platform.

Nothing a client sends is trusted: a button carries only an opaque id, looked up in the store
for the task and the action; the presser is mapped to a member of the task's workspace by
their platform identity, and the core decides whether the action is allowed. Every refusal is
a short private answer to the person, never an error in the chat.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from adapters.chat import offers
from adapters.chat.buttons import pressed_where_shown
from adapters.chat.cards import Cards
from adapters.chat.context import CoreLink
from adapters.chat.globs import Globs
from adapters.chat.offers import GLOB_ACTION, OFFER_ACTIONS, Offer
from adapters.chat.port import Notice, Place, Platform, Press
from adapters.chat.records import Delivery
from bot import errors
from bot.domain import Principal, Run, Task
from bot.errors import ApprovalError
from bot.learning import AllowSpec, Proposal
from bot.masking import mask_text, shorten
from bot.ports import ChatCallback, ChatState
from bot.rendering import approvals_line, render_ending

log = logging.getLogger(__name__)

NOT_APPROVER = "You are not an approver here"
EXPIRED_BUTTON = "This button is no longer valid."
NOTICE_LENGTH = 190
TOO_MANY_GLOBS = "Too many globs tried on this decision: use the full view"
# A glob typed in chat is learned only as the offer shows it in full: longer, the offer's text
# would be cut ("…") and a person pressing its scope button would learn what they never saw.
GLOB_TYPED_MAX = 300
GLOB_TOO_LONG = (
    f"A glob of at most {GLOB_TYPED_MAX} characters on one line, without runs of spaces,"
    " please (or use the full view)"
)
MemberOf = Callable[[str, str], Awaitable[Principal | None]]  # (user id, workspace) -> member
Expand = Callable[[Press, Task], Awaitable[bool]]


COUNTED = "👍 Your approval counts"


def counted(task: Task, approved: str) -> str:
    """The notice for an approve: `approved`, or under a quorum not met yet, the count."""
    if task.parked:
        return shorten(f"{COUNTED}: {approvals_line(task)}", NOTICE_LENGTH)
    return approved


def question_options(task: Task) -> list[str]:
    question: Any = task.tool_input if isinstance(task.tool_input, dict) else {}
    options = question.get("options")
    return [str(o) for o in options] if isinstance(options, list) else []


class Presses:
    def __init__(
        self, platform: Platform, chats: ChatState, link: CoreLink, cards: Cards,
        member_of: MemberOf, *, touch: Callable[[Place], None] | None = None,
        expand: Expand | None = None, globs: Globs | None = None,
    ) -> None:  # fmt: skip
        self.platform = platform
        self.via = platform.name
        self.chats = chats
        self.link = link
        self.cards = cards
        self.member_of = member_of
        self._touch = touch  # a digest page changed (a press on a digest)
        self._expand = expand  # 🔎 on a digest: post one decision in full
        self.globs = globs  # a glob is asked for in a reply ("✏️ Edit glob" on an offer)

    def already(self, task: Task) -> str:
        """E.g. "Already approved by alice 3 min ago"."""
        outcome = render_ending(task)
        return (
            shorten(f"Already {outcome.ago(self.link.now())}", NOTICE_LENGTH)
            if outcome
            else ("Already decided")
        )

    async def on_press(self, press: Press) -> None:
        found = await self.chats.callback_task(self.via, press.button)
        if found is None or not pressed_where_shown(found[0], press.message):
            await self.platform.tell(press, EXPIRED_BUTTON)
            return
        callback, task = found
        member = await self.member_of(press.user, task.workspace_id)
        if member is None:
            await self.platform.tell(press, NOT_APPROVER, alert=True)
            return
        if not task.parked:
            await self.stale(press, task, offer=callback.action in OFFER_ACTIONS)
            return
        try:
            notice = await self._act(press, callback, task, member)
        except ApprovalError as error:
            if error.code == errors.ALREADY_DECIDED:
                fresh = await self.link.task(task.id) or task
                await self.stale(press, fresh, offer=callback.action in OFFER_ACTIONS)
                return
            # masked: a refused rule is quoted, and the glob a person wrote may hold a secret
            notice = shorten(mask_text(error.detail), NOTICE_LENGTH)
        if notice:
            await self.platform.tell(press, notice)

    async def stale(self, press: Press, task: Task, *, offer: bool = False) -> None:
        """A press on an ended decision: say who ended it and show it ended (on an offer's
        message: the offer is closed)."""
        already = self.already(task)
        await self.platform.tell(press, already)
        if offer:
            await self._close_offer(press, already)
        else:
            await self.refresh(press, task)

    async def _close_offer(self, press: Press, text: str) -> None:
        if press.message is None:
            return
        try:
            await self.platform.edit(press.message, Notice(text), max_wait=5.0)
        except Exception as error:  # cosmetic: its buttons answer "Already …" anyway
            log.info("could not close an offer (%s)", type(error).__name__)

    async def refresh(self, press: Press, task: Task, max_wait: float = 5.0) -> None:
        """Bring a pressed message up to date: a decision's own message is re-rendered, a
        digest page refreshed by its worker. Best effort: the ending's own item follows."""
        message = press.message
        if message is None:
            return
        ref = await self.chats.get_ref(self.via, task.id)
        delivery = Delivery.of(ref.data if ref else {})
        if not delivery.shows(message):  # on a digest page
            if self._touch is not None:
                self._touch(Place(message.chat))
            return
        run = await self.link.run(task.run_id)
        if run is None:
            return
        try:
            await self.cards.show(self.platform, message, task, run, max_wait=max_wait)
        except Exception as error:  # best effort: the ending's own item edits it too
            log.info("could not refresh a pressed message (%s)", type(error).__name__)

    async def _act(
        self, press: Press, callback: ChatCallback, task: Task, member: Principal
    ) -> str:
        service, via = self.link.service, self.via
        where = (member, task.workspace_id, task.run_id, task.key)
        action = callback.action
        if action == "approve":
            return counted(await service.approve(*where, via=via), "✅ Approved")
        if action == "deny":
            await service.deny(*where, via=via)
            return "❌ Denied"
        if action in ("deny_reason", "answer_text", "edit") or (
            action == GLOB_ACTION and self.globs is not None
        ):
            asked = await self.platform.ask_text(press, task, action)  # type: ignore[arg-type]
            return "" if asked else "Could not ask for your text: use the full view"
        if action == "allow":
            return await self._offer(press, task, member)
        if action in offers.SCOPE_ACTIONS:
            rule = None
            if callback.option is not None:  # an edited offer's button: the glob it shows
                globs, number = self.globs, callback.option
                glob = None if globs is None else await globs.glob(task.id, number)
                if glob is None:
                    return EXPIRED_BUTTON
                rule = offers.with_match(offers.proposed(task), glob)
            notice = await self._allow(member, task, offers.SCOPE_ACTIONS[action], rule)
            await self._close_offer(press, notice)
            return notice
        if action == "decline":
            await service.resolve(*where, outcome="failed", via=via)
            return "🚫 Declined"
        if action == "option":
            content = self._option(task, callback.option)
            await service.resolve(*where, content=content, via=via)
            return shorten(mask_text(f"💬 Answered: {content}"), NOTICE_LENGTH)
        if action == "toggle":
            return await self._toggle(press, task, callback.option)
        if action == "submit":
            return await self._submit(press, task, member)
        if action == "expand" and self._expand is not None:
            posted = await self._expand(press, task)
            return "Posted below" if posted else "It has a message of its own already"
        return EXPIRED_BUTTON

    # approve & allow like this ------------------------------------------------------------------
    async def _offer(self, press: Press, task: Task, member: Principal) -> str:
        """Show the rule it would learn before saving anything (the core's proposal)."""
        run = await self.link.run(task.run_id)
        if run is None:
            return EXPIRED_BUTTON
        # Under a quorum the approval ends the call as someone edited it, and learns from that.
        edit = {} if task.reviewed_input is None else {"tool_input": task.reviewed_input}
        proposal = await self.link.service.proposal(
            member, task.workspace_id, task.run_id, task.key, **edit
        )
        chat = press.message.chat if press.message else None  # the offer is shown there
        found = await self._offer_of(task, run, proposal, None, chat)
        shown = await self.platform.offer_rule(press, found)
        return "" if shown else "Could not show the rule: use the full view"

    async def _offer_of(
        self, task: Task, run: Run, proposal: Proposal, glob: int | None, chat: str | None
    ) -> Offer:
        """The offer of `proposal` for the place `chat`, its scope buttons learning glob
        number `glob` (None: the rule as proposed), with "✏️ Edit glob" where the platform
        asks for one in a reply."""
        keys: list[tuple[str, str, int | None]] = [(task.id, "allow_run", glob)]
        if run.profile is not None:
            keys.append((task.id, "allow_profile", glob))
        if self.globs is not None and isinstance(proposal.rule.get("match"), str):
            keys.append((task.id, GLOB_ACTION, None))
        ids = await self.cards.buttons.ensure(keys, chat)
        return offers.offer(task, run, proposal, {k[1]: v for k, v in ids.items()})

    async def on_glob(
        self, user: str, task: Task, text: str, claim: Callable[[], Awaitable[bool]],
        chat: str | None = None,
    ) -> tuple[str, Offer | None]:  # fmt: skip
        """A glob written in reply to "✏️ Edit glob": checked by the core as the rule it would
        learn (it must match the call), then the offer to show again with it (in `chat`), its
        scope buttons learning it; else the refusal to show the person. Nothing is approved or
        learned here. `claim`: one reply per prompt counts."""
        member = await self.member_of(user, task.workspace_id)
        if member is None:
            return NOT_APPROVER, None
        if not task.parked:
            return self.already(task), None
        glob = text.strip()
        if not glob or self.globs is None:
            return "Write the glob calls like this must match", None
        proposed = offers.proposed(task)
        if "path" not in proposed:
            return EXPIRED_BUTTON, None  # a rule without a glob (the tool alone)
        # Learned only as the offer shows it: not cut, its spaces not folded.
        shown = offers.describe_rule({**proposed, "match": glob})
        if len(glob) > GLOB_TYPED_MAX or not shown.endswith(mask_text(glob)):
            return GLOB_TOO_LONG, None
        if not await claim():
            return "", None
        run = await self.link.run(task.run_id)
        if run is None:
            return EXPIRED_BUTTON, None
        rule = offers.with_match(proposed, glob)
        edit = {} if task.reviewed_input is None else {"tool_input": task.reviewed_input}
        try:
            proposal = await self.link.service.proposal(
                member, task.workspace_id, task.run_id, task.key, rule=rule, **edit
            )
        except ApprovalError as error:
            if error.code == errors.ALREADY_DECIDED:
                return self.already(await self.link.task(task.id) or task), None
            return shorten(mask_text(error.detail), 300), None
        number = await self.globs.add(task.id, glob)
        if number is None:
            return TOO_MANY_GLOBS, None
        return "", await self._offer_of(task, run, proposal, number, chat)

    async def _allow(
        self, member: Principal, task: Task, scope: str, rule: dict[str, Any] | None
    ) -> str:
        done = await self.link.service.approve(
            member, task.workspace_id, task.run_id, task.key, via=self.via,
            allow=AllowSpec(scope, rule),
        )  # fmt: skip
        where = "this run" if scope == "run" else "its profile"
        return counted(done, f"✅ Approved · calls like it are allowed from now on ({where})")

    async def on_allow(
        self, user: str, task: Task, scope: str, match: str | None
    ) -> tuple[bool, str]:
        """A scope chosen where the platform asked in a form (Slack's modal), with the glob as
        the person left it: (decided, the notice to show them)."""
        member = await self.member_of(user, task.workspace_id)
        if member is None:
            return False, NOT_APPROVER
        if not task.parked:
            return False, self.already(task)
        rule = offers.with_match(offers.proposed(task), match)
        try:
            return True, await self._allow(member, task, scope, rule)
        except ApprovalError as error:
            if error.code == errors.ALREADY_DECIDED:
                return False, self.already(await self.link.task(task.id) or task)
            return False, shorten(mask_text(error.detail), 300)

    @staticmethod
    def _option(task: Task, index: int | None) -> str:
        options = question_options(task)
        if index is None or not 0 <= index < len(options):
            raise ApprovalError(errors.INVALID_OPTION, "that option no longer exists", 422)
        return options[index]

    async def _toggle(self, press: Press, task: Task, index: int | None) -> str:
        if index is None:
            return ""  # ticking a box (Slack): nothing is answered until Submit
        options = question_options(task)
        choices = self.cards.choices
        if choices is None or not 0 <= index < len(options):
            return EXPIRED_BUTTON
        chosen = await choices.toggle(task.id, index)
        await self.refresh(press, task, max_wait=3.0)
        mark = "☑" if index in chosen else "☐"
        return shorten(mask_text(f"{mark} {options[index]}"), NOTICE_LENGTH)

    async def _submit(self, press: Press, task: Task, member: Principal) -> str:
        options = question_options(task)
        if press.chosen is not None:
            chosen = set(press.chosen)
        elif self.cards.choices is not None:
            chosen = await self.cards.choices.chosen(task.id)
        else:
            chosen = set()
        labels = [options[i] for i in sorted(chosen) if 0 <= i < len(options)]
        if not labels:
            return "Choose at least one option first"
        await self.link.service.resolve(
            member, task.workspace_id, task.run_id, task.key, content=labels, via=self.via
        )
        return shorten(mask_text("💬 Answered: " + ", ".join(labels)), NOTICE_LENGTH)

    async def on_text(
        self, user: str, task: Task, action: str, text: str,
        claim: Callable[[], Awaitable[bool]] | None = None,
    ) -> str:  # fmt: skip
        """Typed text that decides `task` (a deny reason, an answer, an edit): the notice to
        show the person ("" when it decided, or when `claim` says another text took it
        first; an edit a quorum counted without ending says so, starting with COUNTED)."""
        member = await self.member_of(user, task.workspace_id)
        if member is None:
            return NOT_APPROVER
        if not task.parked:
            return self.already(task)
        edited: Any = None
        if action == "edit":
            try:
                edited = offers.edited_input(offers.input_to_edit(task), text)
            except offers.EditUnreadable as error:
                return str(error)
        if claim is not None and not await claim():
            return ""
        where = (member, task.workspace_id, task.run_id, task.key)
        try:
            if action == "deny_reason":
                await self.link.service.deny(*where, reason=text, via=self.via)
            elif action == "edit":
                done = await self.link.service.approve(*where, tool_input=edited, via=self.via)
                return counted(done, "")  # under a quorum: counted, on the edited input
            else:
                await self.link.service.resolve(*where, content=text, via=self.via)
        except ApprovalError as error:
            if error.code == errors.ALREADY_DECIDED:
                return self.already(await self.link.task(task.id) or task)
            return shorten(error.detail, 300)
        return ""
