"""The "simple loop" of the approvals document, for a person:

    subscribe to the run's lifecycle feed, read each task named in
    attention_required.blocked_task_keys, show the question or the call, call the verb.

    export APPROVALBOT_URL=http://127.0.0.1:8787 APPROVALBOT_WORKSPACE=acme
    APPROVALBOT_TOKEN=<member token> python examples/simple_loop.py RUN_ID

It asks on the terminal: y approves, e approves an edited input (type the JSON the agent should
run instead; the run's rules check it again), n denies (with a reason), and a question takes
its answer (for several options, separate them with commas; an empty answer declines). The feed
reconnects by itself from its last event id, so the loop survives a restart of the service.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.http import models as m
from adapters.http.client import ApiError, Client, Run

Prompt = Callable[[str], Awaitable[str]]


def show(task: m.TaskOut) -> str:
    if task.kind == "ask":
        question = task.tool_input
        options = question.get("options")
        lines = [f"question {task.key}: {question.get('prompt')}"]
        if options:
            lines.append(
                f"  options: {', '.join(options)}" + (" (several)" if question.get("multi") else "")
            )
        return "\n".join(lines)
    profile = task.effect_profile
    lines = [f"call {task.key}: {task.tool} {json.dumps(task.tool_input, ensure_ascii=False)}"]
    if profile.get("summary"):
        lines.append(
            f"  effect: {profile['summary']}"
            + (f" (risk {profile['risk']})" if profile.get("risk") else "")
        )
    lines.append(f"  deadline: {task.deadline}")
    return "\n".join(lines)


async def decide(run: Run, task: m.TaskOut, ask: Prompt) -> m.TaskOut:
    """Show one decision and end it with the verb the person chose."""
    if task.kind == "ask":
        reply = (await ask(show(task) + "\n  answer> ")).strip()
        if not reply:
            return await run.resolve(task.key, outcome="failed")
        content = (
            [part.strip() for part in reply.split(",")] if task.tool_input.get("multi") else reply
        )
        return await run.resolve(task.key, content)
    reply = (await ask(show(task) + "\n  approve? [y/e(dit)/n]> ")).strip().lower()
    if reply.startswith("y"):
        return await run.approve(task.key)
    if reply.startswith("e"):
        return await run.approve(task.key, tool_input=await edited(task, ask))
    reason = (await ask("  reason (optional)> ")).strip()
    return await run.deny(task.key, reason)


async def edited(task: m.TaskOut, ask: Prompt) -> Any:
    """The input a person approves instead: JSON, asked again until it parses."""
    prompt = f"  edited input (JSON; was {json.dumps(task.tool_input, ensure_ascii=False)})> "
    while True:
        text = await ask(prompt)
        try:
            return json.loads(text)
        except ValueError as error:
            prompt = f"  not JSON ({error}); edited input> "


async def loop(run: Run, ask: Prompt, say: Callable[[str], None] = print) -> None:
    done: set[str] = set()
    async for event in run.events():
        if event.event == "run_stopped":
            say("the run was stopped")
            return
        if event.event != "attention_required":
            continue
        for key in event.data["blocked_task_keys"]:
            if key in done:
                continue
            task = await run.task(key)
            if not task.parked:
                continue  # someone else decided it meanwhile
            try:
                ended = await decide(run, task, ask)
            except ApiError as error:  # e.g. already_decided: another surface was faster
                say(f"{key}: {error.code}: {error.detail}")
            else:
                edited_note = "" if ended.approved_input is None else " (as edited)"
                say(f"{key}: {ended.state}{edited_note}")
            done.add(key)


async def terminal(text: str) -> str:
    return await asyncio.to_thread(input, text)


async def main(url: str, token: str, workspace: str, run_id: str, ask: Prompt = terminal) -> None:
    async with Client(url, token) as client:
        await loop(client.workspace(workspace).runs.run(run_id), ask)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: simple_loop.py RUN_ID")
    asyncio.run(
        main(
            os.environ.get("APPROVALBOT_URL", "http://127.0.0.1:8787"),
            os.environ["APPROVALBOT_TOKEN"],
            os.environ.get("APPROVALBOT_WORKSPACE", "acme"),
            sys.argv[1],
        )
    )
