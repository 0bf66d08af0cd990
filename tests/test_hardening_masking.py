"""Issue 21 (9): secret shapes that reached Telegram and Slack unmasked, grown into families
(tests/masking_corpus.py: FAMILIES). Every family's shapes and near misses on every surface
that shows a call: the masker alone, the chat card as Telegram HTML and as Slack blocks, the
digest line, the web page's call view (adapters/web/render.py) and `approvalbot asks show`
(bot/cli/asks.py), each through its public rendering function with a Task built directly."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.http import models as m
from adapters.slack.format import decision_blocks
from adapters.telegram.format import card_html
from adapters.web import render as web
from bot.cli.asks import detail_lines
from bot.domain import Run, Task
from bot.masking import MASK, STDIN_READERS, mask_argv, mask_text, mask_value
from bot.rendering import ACTIONS, digest_line, render_decision
from tests.masking_corpus import ARGV, FAMILIES, STRUCTURED

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
URL = "https://x.example/decisions/run_1/k1"
IDS: dict[tuple[str, int | None], str] = {
    (action, option): f"cb_{action}_{option}" for action in ACTIONS for option in (None, *range(9))
}

SHAPES = [
    (family, shape, text, shown)
    for family, (rows, _) in FAMILIES.items()
    for shape, text, shown in rows
]
NEAR = [(family, shape, text) for family, (_, rows) in FAMILIES.items() for shape, text, _ in rows]


def hidden(text: str, shown: str) -> list[str]:
    """The parts of `text` that `shown` replaces with MASK: the secrets."""
    pieces = shown.split(MASK)
    assert text.startswith(pieces[0]) and text.endswith(pieces[-1]), (text, shown)
    secrets: list[str] = []
    at = len(pieces[0])
    for piece in pieces[1:-1]:
        found = text.find(piece, at + 1)
        secrets.append(text[at:found])
        at = found + len(piece)
    secrets.append(text[at : len(text) - len(pieces[-1])])
    return secrets


def run() -> Run:
    rules: list[dict[str, Any]] = [{"tool": "bash", "verdict": "ask", "reason": "shell"}]
    return Run("run_1", "acme", "app_1", "running", "rules", rules, None, {}, NOW, title="ci")


def task(tool_input: Any, **kw: Any) -> Task:
    values: dict[str, Any] = {
        "id": "task_1",
        "run_id": "run_1",
        "workspace_id": "acme",
        "key": "k1",
        "kind": "tool_call",
        "origin": "model",
        "tool_name": "bash",
        "tool": "bash",
        "tool_input": tool_input,
        "state": "needs_approval",
        "created_at": NOW,
        "deadline": NOW + timedelta(hours=24),
        "why": "rule 0 (ask) matches bash",
        "rule_index": 0,
        "appended_by": "agent",
    }
    return Task(**(values | kw))


def ask_out(tool_input: Any) -> m.AskOut:
    return m.AskOut(
        key="k1",
        run_id="run_1",
        kind="tool_call",
        origin="model",
        tool_name="bash",
        tool="bash",
        tool_input=tool_input,
        state="needs_approval",
        error=None,
        effect_profile={},
        deadline=datetime.now(UTC) + timedelta(hours=2),
        resolved_by=None,
        via=None,
        resolution=None,
        why="rule 0 (ask) matches bash",
        created_at=NOW,
        run_title="ci",
    )


def slack_unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def surfaces(tool_input: Any) -> dict[str, str]:
    """What each surface shows of a call, as the reader sees it (entities decoded)."""
    t = task(tool_input)
    card = render_decision(t, run(), NOW, URL)
    slack_text, blocks = decision_blocks(card, IDS)
    view = web.render_call(web.masked(t))
    return {
        "telegram": html.unescape(card_html(card)),
        "slack": slack_unescape(slack_text + "\n" + json.dumps(blocks, ensure_ascii=False)),
        "slack blocks": "\n".join(
            slack_unescape(b["text"]["text"]) for b in blocks if isinstance(b.get("text"), dict)
        ),
        "digest": digest_line(t),
        "web": "\n".join(b.text for b in view.blocks) + "\n" + view.rest,
        "cli": "\n".join(detail_lines(ask_out(tool_input))),
    }


def test_every_family_has_a_handful_of_shapes_and_near_misses() -> None:
    for family, (secrets, near) in FAMILIES.items():
        assert len(secrets) >= 5 and len(near) >= 4, family
    assert len(SHAPES) >= 90 and len(NEAR) >= 50


@pytest.mark.parametrize(
    ("family", "shape", "text", "shown"), SHAPES, ids=[f"{r[0]}: {r[1]}" for r in SHAPES]
)
def test_a_family_shape_is_masked_on_every_surface(
    family: str, shape: str, text: str, shown: str
) -> None:
    secrets = [s for s in hidden(text, shown) if len(s) >= 4]
    assert secrets, shape
    # The masker alone: as text, as a JSON value, as an argv list's element.
    assert mask_text(text) == shown
    assert mask_value({"command": text, "note": text}) == {"command": shown, "note": shown}
    assert mask_argv(["sh", "-c", text]) == ["sh", "-c", shown]
    for where, seen in surfaces({"command": text}).items():
        leaked = [s for s in secrets if s in seen]
        assert not leaked, (where, leaked)
    # The command itself reaches the places that show it whole (so the check above means
    # something): masked, not dropped.
    shown_on = surfaces({"command": text})
    assert shown in shown_on["telegram"] and shown in shown_on["web"] and MASK in shown_on["cli"]
    assert shown.split("\n")[0] in shown_on["slack blocks"]


@pytest.mark.parametrize(("family", "shape", "text"), NEAR, ids=[f"{r[0]}: {r[1]}" for r in NEAR])
def test_a_near_miss_stays_readable_on_every_surface(family: str, shape: str, text: str) -> None:
    assert mask_text(text) == text
    assert mask_value({"command": text}) == {"command": text}
    seen = surfaces({"command": text})
    assert MASK not in seen["telegram"] and text in seen["telegram"]
    assert MASK not in seen["web"] and text in seen["web"]
    assert MASK not in seen["cli"] and text.split("\n")[0] in seen["cli"]
    assert MASK not in seen["slack blocks"] and text.split("\n")[0] in seen["slack blocks"]


def test_a_raw_string_input_and_a_question_are_masked_too() -> None:
    for _, shape, text, shown in SHAPES:
        secrets = [s for s in hidden(text, shown) if len(s) >= 4]
        raw = render_decision(task(text), run(), NOW, URL)
        assert not [s for s in secrets if s in html.unescape(card_html(raw))], shape
        question = task(
            {"prompt": f"Run this? {text}", "options": [text, "no"]},
            kind="ask",
            state="awaiting_input",
        )
        card = render_decision(question, run(), NOW, URL)
        seen = html.unescape(card_html(card))
        slack_text, blocks = decision_blocks(card, IDS)
        seen += slack_unescape(slack_text + json.dumps(blocks, ensure_ascii=False))
        seen += digest_line(question)
        assert not [s for s in secrets if s in seen], shape


STRUCTURED_NEW = [row for row in STRUCTURED if row[0] in {
    "aws tags", "cloudformation parameters", "beanstalk option", "ecs env", "ssm SecureString",
    "pin",
}]  # fmt: skip


def leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


@pytest.mark.parametrize(
    ("shape", "value", "shown"), STRUCTURED_NEW, ids=[r[0] for r in STRUCTURED_NEW]
)
def test_structured_name_value_pairs_on_every_surface(shape: str, value: Any, shown: Any) -> None:
    secrets = [
        str(a) for a, b in zip(leaves(value), leaves(shown), strict=True) if a != b
    ]  # fmt: skip
    assert secrets and mask_value(value) == shown
    for where, seen in surfaces(value).items():
        assert not [s for s in secrets if s in seen], where
    assert "****" in surfaces(value)["web"]


ARGV_NEW = [row for row in ARGV if row[0] in {
    "htpasswd -b", "net user", "rabbitmqctl add_user", "setx", "xfreerdp /p:", "--pin X",
    "doppler secrets set",
}]  # fmt: skip


@pytest.mark.parametrize(("shape", "argv", "shown"), ARGV_NEW, ids=[r[0] for r in ARGV_NEW])
def test_argv_lists_on_every_surface(shape: str, argv: list[str], shown: list[str]) -> None:
    secrets = [a for a, b in zip(argv, shown, strict=True) if a != b]
    for where, seen in surfaces({"command": argv}).items():
        assert not [s for s in secrets if s in seen], where
    assert " ".join(shown) in surfaces({"command": argv})["telegram"]


def test_the_issue_reports_each_reach_no_chat() -> None:
    """The shapes issue 21 (9) names, as reported: each was shown unmasked."""
    reports = {
        "set -x AWS_SECRET_ACCESS_KEY wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "wJalrXUtnFEMI",
        "ENV API_KEY abcdef123456": "abcdef123456",
        "SSHPASS=hunter2pass sshpass -e ssh host": "hunter2pass",
        "<password>xmlSecret1</password>": "xmlSecret1",
        "echo sudoSecret1 | sudo -S apt-get update": "sudoSecret1",
        "htpasswd -b /etc/nginx/.htpasswd bob htSecret1": "htSecret1",
        '{"Key": "DB_PASSWORD", "Value": "tagSecret1"}': "tagSecret1",
        "setx API_KEY setxSecret1": "setxSecret1",
        "net user bob netSecret1 /add": "netSecret1",
        "rabbitmqctl add_user admin rabbitSecret1": "rabbitSecret1",
        "echo 'bob:chSecret1' | chpasswd": "chSecret1",
        'requests.get(url, auth=("bob", "reqSecret1"))': "reqSecret1",
        '<add key="ApiKey" value="dotnetSecret1" />': "dotnetSecret1",
        "yubico-piv-tool --pin 987654 -a verify-pin": "987654",
        "echo Z2hwX2FiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEyMzQ1Njc4OQ== | base64 -d": "Z2hwX2",
    }
    for text, secret in reports.items():
        assert secret in text and secret not in mask_text(text), text
        for where, seen in surfaces({"command": text}).items():
            assert secret not in seen, (text, where)
    tags = {"Tags": [{"Key": "DB_PASSWORD", "Value": "tagSecret2"}]}
    assert not [w for w, seen in surfaces(tags).items() if "tagSecret2" in seen]


def test_stdin_readers_table_is_exercised() -> None:
    """Every program STDIN_READERS names has a corpus shape or a check here."""
    extra = {
        "smbpasswd": "printf 'SmbPw1\\nSmbPw1\\n' | smbpasswd -s -a bob",
        "cryptsetup": "echo -n LuksPw1 | cryptsetup luksOpen /dev/sdb1 data",
        "vncpasswd": "echo VncPw1 | vncpasswd -f > ~/.vnc/passwd",
        "ldappasswd": "echo LdapPw9 | ldappasswd -x -D cn=admin -W -S uid=bob",
        "chgpasswd": "echo 'devs:GroupPw1' | chgpasswd",
        "htpasswd": "echo HtStdin1 | htpasswd -i /etc/x bob",
        "ssh-add": "echo KeyPass1 | ssh-add -",
        "docker": "echo DockerSecret9 | docker secret create db_pw -",
        "podman": "printf PodSecret1 | podman secret create db_pw -",
        "wg": "echo WgPrivateKey1 | wg pubkey",
        "ansible-vault": "echo -n VaultStr1 | ansible-vault encrypt_string --stdin-name db",
        "vercel": "echo VercelVal1 | vercel env add API_KEY production",
        "gh": "echo GhBody1 | gh secret set DEPLOY_KEY",
        "gpg": "echo GpgPass1 | gpg --batch --passphrase-fd 0 -d f.gpg",
        "gpg2": "echo GpgPass2 | gpg2 --batch --passphrase-fd 0 -d f.gpg",
    }
    programs = {p for reader in STDIN_READERS for p in reader.programs}
    assert set(extra) <= programs
    for program in programs:
        in_corpus = any(
            f"| {program} " in text or f"| sudo {program}" in text or f"{program} " in text
            for _, text, _ in FAMILIES["a secret fed on standard input"][0]
        )
        assert in_corpus or program in extra, program
    for text in extra.values():
        reader = text.split(" | ")[1]
        masked = mask_text(text)
        assert masked.split(" | ")[1] == reader and MASK in masked.split(" | ")[0], text
