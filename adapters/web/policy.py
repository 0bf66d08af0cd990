"""Approve always, edit before approve and the Policy view, on the page (issue 15).

- `GET /decisions/{run}/{key}/allow`: "Approve & allow like this". The proposed rule (its tool
  and glob editable, the whole rule as JSON for more), the scope (this run, or the profile the
  run was declared from) and the past calls the rule would have allowed. `POST` the same path
  with `do=preview` shows them again for the edited rule; `do=approve` approves and learns it.
- `POST /decisions/{run}/{key}/approve-edited`: approve the call as the person edited it (the
  command's text, the text a write writes, or the whole input as JSON).
- `GET /policy`: the profiles' declared rules and the learned rules; `POST
  /policy/learned/{id}/remove` removes one.

The core decides what may be learned and which edits bind (bot/lifecycle/learn.py); every
refusal shows as `code: detail`, like the page's other errors. Everything records `via: "web"`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, NoReturn

from aiohttp import web
from multidict import MultiDict

from adapters.web import edits, links, render, timeline
from adapters.web.context import (
    SECURITY_HEADERS,
    checked_form,
    error_html,
    page,
    path_values,
    redirect,
    require_member,
    resolve_session,
    state,
)
from adapters.web.views import make_card, outcome_word, runs_by_id
from bot import learning
from bot.decisions import already_decided, ending_word
from bot.domain import Principal, Run, Task
from bot.errors import ApprovalError
from bot.learning import AllowSpec, LearnedRule
from bot.masking import mask_text, mask_value
from bot.profiles import BUILTIN
from bot.service import UNEDITED, ApprovalService

VIA = "web"
SCOPES = ("run", "profile")
RULE_TEXT_LIMIT = 20_000  # a rule posted as JSON (a declared list is bounded far below this)


def allow_path(run_id: str, key: str) -> str:
    return links.decision_path(run_id, key) + "/allow"


def _refusal(error: ApprovalError) -> str:
    return f"{error.code}: {error.detail}"


# approve & allow like this --------------------------------------------------------------------
@dataclass
class RuleForm:
    """What the allow page's form holds: the rule's tool and glob, or the whole rule as JSON
    (which wins when given), and the scope."""

    tool: str
    match: str | None  # None: the proposal has no glob (the tool alone)
    path: str | None
    text: str  # the rule as JSON, as typed ("" unless the person edits it that way)
    scope: str
    # Approve edited & allow: the edit as the decision page's form posted it (kept in hidden
    # fields), and the input it makes (UNEDITED without one): the rule is learned from it.
    edit_as: str = ""
    edited: str = ""
    tool_input: Any = UNEDITED

    def rule(self) -> Any:
        if self.text.strip():
            try:
                parsed = json.loads(self.text)
            except ValueError as error:
                raise ApprovalError(
                    "invalid_request", f"allow.rule: not JSON ({error})", 422
                ) from None
            return parsed  # the core checks it like a declared rule
        rule: dict[str, Any] = {"tool": self.tool, "verdict": "allow"}
        if self.path is not None and self.match is not None:
            rule |= {"path": self.path, "match": self.match}
        return rule


def _proposed(
    service: ApprovalService, task: Task, run: Run, tool_input: Any = UNEDITED
) -> dict[str, Any]:
    """The first rule the core proposes (on a shell path: for the first command the run does
    not already grant)."""
    call_input = task.tool_input if tool_input is UNEDITED else tool_input
    return service.proposed_rules(run, task, call_input)[0]


def _form_of(
    service: ApprovalService, task: Task, run: Run, form: MultiDict[str] | None
) -> RuleForm:
    """The proposal (for the edited input, with one), with whatever the person changed in the
    posted form. An edit the page cannot read raises `edits.EditInvalid`."""
    tool_input: Any = UNEDITED
    edit_as, edited = "", ""
    if form is not None and "edited" in form:
        edit_as, edited = form.get("edit_as", "json"), form["edited"]
        tool_input = edits.edited_input(task.tool_input, edit_as, edited)
    elif task.reviewed_input is not None:
        # Under a quorum, the approvals so far are for a person's edit, and so is this one: the
        # rule is proposed from, checked against and learned from the edited call.
        tool_input = task.reviewed_input
    proposed = _proposed(service, task, run, tool_input)
    match = proposed.get("match")
    rule_form = RuleForm(
        tool=str(proposed["tool"]),
        match=str(match) if match is not None else None,
        path=str(proposed["path"]) if "path" in proposed else None,
        text="",
        scope="run",
        edit_as=edit_as,
        edited=edited,
        tool_input=tool_input,
    )
    if form is None or form.get("do") == "edit":  # just edited: the proposal for the edit
        return rule_form
    if "tool" in form:
        rule_form.tool = form["tool"].strip()
    if rule_form.match is not None and "match" in form:
        rule_form.match = form["match"]
    rule_form.text = form.get("rule", "")[:RULE_TEXT_LIMIT]
    rule_form.scope = form.get("scope", "run")
    return rule_form


@dataclass
class PastCall:
    task: Task  # masked
    title: str
    word: str


def _past(calls: list[Task]) -> list[PastCall]:
    shown = [render.masked(t) for t in calls]
    return [PastCall(t, render.title_of(t), outcome_word(t)) for t in shown]


async def _task_and_run(request: web.Request, member: Principal) -> tuple[Task, Run]:
    run_id, key = path_values(request, "run_id", "key")
    service = state(request).core.service
    try:
        task = await service.get_task(member, member.workspace_id, run_id, key)
        run = await service.get_run(member, member.workspace_id, run_id)
    except ApprovalError:
        raise web.HTTPNotFound(
            text=error_html(request, 404, "Not found", "not_found: decision not found"),
            content_type="text/html",
        ) from None
    return task, run


def _back_to_decision(request: web.Request, task: Task, error: ApprovalError) -> NoReturn:
    redirect(request, links.decision_path(task.run_id, task.key), _refusal(error), "error")


async def _allow_page(
    request: web.Request,
    member: Principal,
    task: Task,
    run: Run,
    rule_form: RuleForm,
    *,
    error: ApprovalError | None = None,
) -> web.Response:
    """The allow page for the form's rule: its replay, or the refusal when it has none."""
    service = state(request).core.service
    reveal = request.query.get("reveal") == "1"
    would_allow: list[Task] = []
    rule: Any = None
    more: tuple[dict[str, Any], ...] = ()  # a compound line's other proposed rules
    if error is None:
        try:
            asked = rule_form.rule()
            as_proposed = asked == _proposed(service, task, run, rule_form.tool_input)
            found = await service.proposal(
                member,
                member.workspace_id,
                task.run_id,
                task.key,
                tool_input=rule_form.tool_input,
                rule=None if as_proposed else asked,
            )
            rule, would_allow = found.rule, found.would_allow
            more = found.rules[1:]
        except ApprovalError as refused:
            if refused.code in ("already_decided", "approval_denied"):
                _back_to_decision(request, task, refused)  # the call or its edit is the matter
            error = refused
    proposed = _proposed(service, task, run, rule_form.tool_input)
    shown_rule = rule if isinstance(rule, dict) else proposed  # a refused one is in the form
    # A glob cut from a command can hold a secret (`export TOKEN=… *`): masked, the page offers
    # the proposal as it is and a Reveal to edit it.
    hides = mask_text(json.dumps(proposed)) != json.dumps(proposed) and not reveal
    status = 200 if error is None else error.status
    edit: list[render.Line] = []
    if rule_form.tool_input is not UNEDITED and rule_form.tool_input != task.tool_input:
        edit = edits.edit_diff(
            dataclasses.replace(task, approved_input=rule_form.tool_input), reveal
        )
    return page(
        request,
        "allow.html",
        {
            "c": make_card(task, run, request, full=False, reveal=reveal),
            "run": run,
            "title": render.title_of(render.masked(task)),
            "form": rule_form,
            "row": timeline.rule_rows([shown_rule if reveal else mask_value(shown_rule)])[0],
            "more_rows": timeline.rule_rows([r if reveal else mask_value(r) for r in more]),
            "rule_json": json.dumps(shown_rule, ensure_ascii=False),
            "hides": hides,
            "revealed": reveal,
            "would_allow": _past(would_allow),
            "replay_limit": learning.REPLAY_LIMIT,
            "replay_days": learning.REPLAY_DAYS,
            "error": _refusal(error) if error is not None else "",
            "action": allow_path(task.run_id, task.key),
            "edit": edit,
        },
        status=status,
    )


async def allow_form(request: web.Request) -> web.Response:
    """GET …/allow: the proposal and the past calls it would have allowed."""
    member = await require_member(request)
    task, run = await _task_and_run(request, member)
    if task.kind != "tool_call" or not task.parked:
        if task.kind != "tool_call":
            message = "conflict: a question has no rule to learn"
            redirect(request, links.decision_path(task.run_id, task.key), message, "error")
        _back_to_decision(request, task, already_decided(task))
    return await _allow_page(
        request, member, task, run, _form_of(state(request).core.service, task, run, None)
    )


async def allow_post(request: web.Request) -> web.Response:
    """POST …/allow: `do=preview` shows the edited rule's replay; `do=approve` approves the
    call and learns the rule (the proposal itself when the form leaves it as proposed)."""
    member = await require_member(request)
    _, form = await checked_form(request)
    task, run = await _task_and_run(request, member)
    try:
        rule_form = _form_of(state(request).core.service, task, run, form)
    except edits.EditInvalid as problem:
        back = links.decision_path(task.run_id, task.key)
        redirect(request, back, f"invalid_request: {problem}", "error")
    if form.get("do") != "approve":
        return await _allow_page(request, member, task, run, rule_form)
    service = state(request).core.service
    try:
        rule = rule_form.rule()
        proposed = _proposed(service, task, run, rule_form.tool_input)
        allow = AllowSpec(rule_form.scope, None if rule == proposed else rule)
        ended = await service.approve(
            member,
            member.workspace_id,
            task.run_id,
            task.key,
            via=VIA,
            allow=allow,
            tool_input=rule_form.tool_input,
        )
    except ApprovalError as error:
        if error.code in ("already_decided", "already_reviewed", "approval_denied"):
            _back_to_decision(request, task, error)
        return await _allow_page(request, member, task, run, rule_form, error=error)
    title = render.title_of(render.masked(ended))
    where = f"in the profile {run.profile}" if rule_form.scope == "profile" else "in this run"
    edited = " as edited" if ended.approved_input is not None else ""
    message = f"{title}: {ending_word(ended)} by you{edited}; calls like it are allowed {where} now"
    redirect(request, links.decision_path(task.run_id, task.key), message, "ok outcome-approved")


# edit before approve --------------------------------------------------------------------------
async def approve_edited(request: web.Request) -> web.Response:
    """POST …/approve-edited: approve the call as edited. A refused edit (a deny rule binds
    it: `approval_denied`) leaves the task parked and says why."""
    member = await require_member(request)
    _, form = await checked_form(request)
    task, _ = await _task_and_run(request, member)
    back = links.decision_path(task.run_id, task.key)
    service = state(request).core.service
    try:
        tool_input = edits.edited_input(
            task.tool_input, form.get("edit_as", "json"), form.get("edited", "")
        )
    except edits.EditInvalid as problem:
        redirect(request, back, f"invalid_request: {problem}", "error")
    try:
        ended = await service.approve(
            member, member.workspace_id, task.run_id, task.key, via=VIA, tool_input=tool_input
        )
    except ApprovalError as error:
        redirect(request, back, _refusal(error), "error")
    title = render.title_of(render.masked(task))
    if ended.parked:
        redirect(request, back, f"{title}: your approval is recorded; more are needed", "info")
    word = ending_word(ended)
    edited = " as edited" if ended.approved_input is not None else " (unchanged)"
    redirect(request, back, f"{title}: {word} by you{edited}", f"ok outcome-{word}")


# the Policy view ------------------------------------------------------------------------------
@dataclass
class ProfileRules:
    name: str
    source: str  # "configured", "built in", "configured (replaces the built-in one)"
    mode: str
    rows: list[timeline.RuleRow]
    tools: list[str] | None
    aliases: dict[str, str]
    requirements: list[dict[str, Any]]  # several approvers: approval_requirements
    forbid_self_approval: bool
    shell_commands: list[dict[str, str]]  # text judged command by command


@dataclass
class LearnedRow:
    rule: LearnedRule
    row: timeline.RuleRow
    source: str  # the title of the decision it came from (its key when that is gone)
    run_title: str = ""  # a run-scoped rule's run, by its title


def _profiles(request: web.Request) -> list[ProfileRules]:
    web_state = state(request)
    configured = web_state.settings.profiles
    found = []
    for name, profile in sorted(web_state.core.service.profiles.items()):
        if name in configured:
            source = "configured" + (" (replaces the built-in one)" if name in BUILTIN else "")
        else:
            source = "built in"
        found.append(
            ProfileRules(
                name,
                source,
                profile.approval_mode,
                timeline.rule_rows(list(profile.approval_rules)),
                profile.tool_names,
                dict(profile.aliases),
                list(profile.approval_requirements),
                profile.forbid_self_approval,
                list(profile.shell_commands),
            )
        )
    return found


def _secured(response: web.Response) -> web.Response:
    """`/policy` is a page: its headers, whichever paths the middleware knows as the page's."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


async def policy(request: web.Request) -> web.Response:
    """GET /policy: the rules people and profiles set, declared and learned."""
    await resolve_session(request)  # once per request: a no-op when the middleware ran
    member = await require_member(request)
    service = state(request).core.service
    learned = await service.learned_rules(member, member.workspace_id)
    rows = []
    for rule in reversed(learned):  # newest first
        try:
            source = await service.get_task(
                member, member.workspace_id, rule.from_run_id, rule.from_key
            )
            title = render.title_of(render.masked(source))
        except ApprovalError:
            title = rule.from_key
        rows.append(LearnedRow(rule, timeline.rule_rows([mask_value(rule.rule)])[0], title))
    runs = await runs_by_id(request, {r.rule.run_id for r in rows if r.rule.run_id})
    for row in rows:
        run = runs.get(row.rule.run_id or "")
        row.run_title = render.run_name(run, row.rule.run_id or "")
    return _secured(
        page(
            request,
            "policy.html",
            {"profiles": _profiles(request), "learned": rows},
        )
    )


async def remove_learned(request: web.Request) -> web.Response:
    """POST /policy/learned/{id}/remove: runs declared afterwards go without the rule (and so
    does the run of a run-scoped one)."""
    await resolve_session(request)
    member = await require_member(request)
    _, _ = await checked_form(request)
    (rule_id,) = path_values(request, "rule_id")
    service = state(request).core.service
    try:
        removed = await service.remove_learned_rule(member, member.workspace_id, rule_id, via=VIA)
    except ApprovalError as error:
        redirect(request, "/policy", _refusal(error), "error")
    row = timeline.rule_rows([removed.rule])[0]
    what = f"{row.tool}" + (f" when {row.condition}" if row.condition else "")
    redirect(request, "/policy", f"learned rule {removed.id} ({what}) removed by you", "ok")


__all__ = [
    "allow_form",
    "allow_path",
    "allow_post",
    "approve_edited",
    "policy",
    "remove_learned",
]
