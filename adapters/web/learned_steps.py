"""The timeline's words for what issue 15 logs: a learned rule and its removal, and an approval
counted toward a quorum (the rest of a run's record is adapters/web/timeline.py's). Pure."""

from __future__ import annotations

import json

from adapters.web import edits, timeline


def worded(steps: list[timeline.Step]) -> list[timeline.Step]:
    """The timeline's steps, with a learned rule and its removal said in words ("alice allowed
    calls like it from now on, in this run: bash when command matches git push *") rather
    than by their log action. Their detail is the entry's own (`raw`, masked as shown)."""
    for step in steps:
        if step.action not in ("learned_rule", "learned_rule_removed", "reviewed"):
            continue
        try:
            detail = json.loads(step.raw).get("detail") or {}
        except ValueError:
            continue
        if step.action == "reviewed":
            _counted(step, detail)
            continue
        rule = detail.get("rule")
        what = ""
        if isinstance(rule, dict):
            row = timeline.rule_rows([rule])[0]
            what = row.tool + (f" when {row.condition}" if row.condition else " with any input")
        scope = detail.get("scope")
        where = f"the profile {detail.get('profile')}" if scope == "profile" else "this run"
        if step.action == "learned_rule":
            step.badge, step.tone = "learned", "approved"
            step.text = f"{step.who} allowed calls like it from now on, in {where}"
        else:
            step.badge, step.tone = "rule removed", "expired"
            step.text = f"{step.who} removed the learned rule {detail.get('rule_id', '')}"
        step.note = what
    return steps


def _counted(step: timeline.Step, detail: dict[str, object]) -> None:
    """ "bob approved (1 of 2 approvals): deploy", and an edit that restarted the count with
    its diff (the entry's inputs, masked as shown)."""
    given, required = detail.get("approvals"), detail.get("required")
    if isinstance(given, int) and isinstance(required, int):
        count = f"({given} of {required} approvals)"
        step.text = step.text.replace("(more approvals needed)", count, 1)
    if detail.get("count_restarted"):
        step.text += " — on an edited call, the count starts again"
        lines = edits.input_diff(detail.get("tool_input"), detail.get("approved_input"), True)
        step.extra["edit"] = lines
