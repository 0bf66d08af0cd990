"""Masking: the corpus of secret shapes and look-alikes (tests/masking_corpus.py), the name
rules, the engines, the cost, and every string a decision card carries to a chat."""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import json
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from adapters.slack.format import decision_blocks, digest_blocks
from adapters.telegram.format import card_html, digest_html
from bot import masking
from bot.domain import Run, Task
from bot.masking import (
    ARG_RULES,
    MASK,
    TEXT_RULES,
    is_secret_name,
    mask_argv,
    mask_text,
    mask_value,
)
from bot.rendering import ACTIONS, Card, digest_line, render_decision
from tests.masking_corpus import ARGV, LOOKALIKES, SECRETS, STRUCTURED

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def ids(rows: list[Any]) -> list[str]:
    return [row[0] for row in rows]


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------


def test_the_corpus_is_large_enough() -> None:
    assert len(SECRETS) >= 60 and len(LOOKALIKES) >= 40
    assert len(set(ids(SECRETS))) == len(SECRETS) and len(set(ids(LOOKALIKES))) == len(LOOKALIKES)


@pytest.mark.parametrize(("shape", "text", "shown"), SECRETS, ids=ids(SECRETS))
def test_secret_shapes(shape: str, text: str, shown: str) -> None:
    assert mask_text(text) == shown
    assert mask_text(shown) == shown  # masking twice changes nothing
    assert MASK in shown and shown != text, shape


@pytest.mark.parametrize(("shape", "text", "why"), LOOKALIKES, ids=ids(LOOKALIKES))
def test_lookalikes_stay_readable(shape: str, text: str, why: str) -> None:
    assert mask_text(text) == text, why


@pytest.mark.parametrize(("shape", "value", "shown"), STRUCTURED, ids=ids(STRUCTURED))
def test_structured_values(shape: str, value: Any, shown: Any) -> None:
    assert mask_value(value) == shown
    assert mask_value(shown) == shown


@pytest.mark.parametrize(("shape", "argv", "shown"), ARGV, ids=ids(ARGV))
def test_argv_lists(shape: str, argv: list[str], shown: list[str]) -> None:
    assert mask_value(argv) == shown
    assert mask_value({"command": argv}) == {"command": shown}
    assert mask_argv(argv) == shown


def test_args_beside_their_program() -> None:
    value = {"command": "mysql", "args": ["-h", "db", "-pArgs1"], "cwd": "/srv"}
    assert mask_value(value) == {"command": "mysql", "args": ["-h", "db", "-p****"], "cwd": "/srv"}
    assert mask_argv(["-h", "db", "-pArgs1"], "mysql") == ["-h", "db", "-p****"]
    # Without the program, -p glued to a word is nobody's password.
    assert mask_value({"args": ["-pArgs1"]}) == {"args": ["-pArgs1"]}


def test_every_text_rule_is_exercised_by_the_corpus() -> None:
    texts = [text.encode() for _, text, _ in SECRETS]
    for compiled in masking._COMPILED:
        assert any(next(compiled.matcher.finditer(t), None) for t in texts), compiled.rule.name


def test_every_argv_rule_is_exercised_by_the_corpus() -> None:
    texts = [text for _, text, _ in SECRETS] + [" ".join(argv) for _, argv, _ in ARGV]
    for rule in ARG_RULES:
        assert any(
            any(f" {p} " in f" {t} " or f"/{p} " in t for p in rule.programs)
            and (not rule.flags or any(f in t for f in rule.flags))
            for t in texts
        ), rule.name


def test_rule_tables_are_well_formed() -> None:
    assert len({r.name for r in TEXT_RULES}) == len(TEXT_RULES)
    assert len({r.name for r in ARG_RULES}) == len(ARG_RULES)
    for rule in TEXT_RULES:
        assert rule.triggers and all(t == t.lower() for t in rule.triggers), rule.name
    with pytest.raises(ValueError, match="group s"):
        masking._build([masking.Rule("broken", r"no group", ("x",))])


SECRET_NAMES = (
    "password", "PASSWORD", "passwd", "pass", "pwd", "pw", "passphrase", "secret", "token",
    "auth", "api_key", "apikey", "APIKey", "x-api-key", "access_key", "private_key",
    "privateKey", "client_secret", "clientSecret", "credentials", "PGPASSWORD", "MYSQL_PWD",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "SECRET_KEY_BASE", "GITHUB_TOKEN",
    "STRIPE_KEY", "_authToken", "_auth", "//registry.npmjs.org/:_authToken", "Authorization",
    "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Amz-Signature", "sig", "AccountKey",
    "SharedAccessKey", "--password", "--api-key", "-storepass", "ansible_become_pass",
    "keyStorePassword2", "password_hash", "secret_id", "wifi-sec.psk", "csrftoken",
    "REDISCLI_AUTH",
)  # fmt: skip
OTHER_NAMES = (
    "password_file", "--password-file", "password-stdin", "PASSWORD_MIN_LENGTH", "token_count",
    "max_tokens", "tokens", "tokenizer", "token_type", "token_endpoint", "auth_type",
    "secret_name", "secretKeyRef", "key", "sort_key", "public_key", "primaryKey", "key_id",
    "aws_access_key_id", "private_key_id", "session_id", "author", "design", "signoff",
    "passwordless", "bypass", "no_password", "--no-password", "use_token", "ask_pass",
    "--with-token", "credential.helper", "OLDPWD", "keyboard", "monkey", "hotkey", "user",
    "name", "",
)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "secret"), [(n, True) for n in SECRET_NAMES] + [(n, False) for n in OTHER_NAMES]
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_unicode_surrogates_and_odd_input() -> None:
    assert mask_text("") == ""
    assert mask_text("😀 PGPASSWORD=пароль😀 psql é") == "😀 PGPASSWORD=**** psql é"
    lone = "token=\ud800abc"  # a lone surrogate, as JSON can carry
    assert mask_text(lone) == "token=****"
    assert mask_text("password=\x00x") == "password=****"
    assert mask_value(["a", 1, None, {"token": "t"}]) == ["a", 1, None, {"token": MASK}]
    assert mask_value(("mysql", "-pTuple1")) == ["mysql", "-p****"]  # tuples, as lists
    assert mask_value({"auth": {1: "x", "type": "basic"}}) == {"auth": {1: MASK, "type": "basic"}}


# --------------------------------------------------------------------------------------------
# Cost: every chat message is masked
# --------------------------------------------------------------------------------------------


WORDS = re.compile(r"\w+")  # the baseline pass timing tests compare against


def best_of(fn: Callable[[], object], runs: int = 3) -> float:
    """The least CPU time of `runs` calls: other processes on a loaded machine do not count."""
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def realistic(size: int) -> str:
    rng = random.Random(7)
    lines = [text for _, text, _ in SECRETS] + [text for _, text, _ in LOOKALIKES]
    lines += ["The quick brown fox jumps over the lazy dog; nothing to see here."] * 40
    out: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(lines)
        out.append(line)
        total += len(line) + 1
    return "\n".join(out)[:size]


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "many assignments": lambda n: ("password=x " * n)[:n],
    "many yaml pairs": lambda n: ("token: abc\n" * n)[:n],
    "many urls": lambda n: ("https://u:p@h/ " * n)[:n],
    "many mysql": lambda n: ("mysql -pX " * n)[:n],
    "unterminated key": lambda n: "-----BEGIN PRIVATE KEY-----\n" + "A" * n,
    "many key headers": lambda n: ("-----BEGIN RSA PRIVATE KEY-----\n" * n)[:n],
    "one long name": lambda n: "a" * (n - 9) + "password=",
    "dashed name": lambda n: ("a-" * n)[: n - 6] + "token:",
    "key runs": lambda n: ("keykeykey" * n)[:n],
    "quotes": lambda n: '"password": "' + "\\" * n,
    "flags": lambda n: ("--password " * n)[:n],
    "bearer words": lambda n: ("Bearer " * n)[:n],
    "base64": lambda n: "".join(random.Random(3).choice("ab+/Z9") for _ in range(n)),
    # The families of issue 21 (9): their rows' worst cases.
    "fish option cluster": lambda n: "set -" + "x" * (n - 5),
    "fish options": lambda n: ("set" + " -x" * n)[:n],
    "xml open tags": lambda n: ("<password " * n)[:n],
    "xml attributes": lambda n: "<add " + ('key="token" ' * n)[: n - 5],
    "xml whitespace": lambda n: '<add a="1" key="token"' + " " * n + "x",
    "pair whitespace": lambda n: '{"Key": "API_TOKEN",' + " " * n + "x",
    "yaml names": lambda n: ("- name: API_TOKEN\n" * n)[:n],
    "name/value fields": lambda n: ('{"Key": "API_TOKEN", ' * n)[:n],
    "echo pipes": lambda n: ("echo pw | " * n)[:n],
    "echo words": lambda n: "echo " + "pw " * (n // 3),
    "here-string starts": lambda n: (";a <<" * n)[:n],
    "calls": lambda n: ("HTTPBasicAuth(" * n)[:n],
    "call arguments": lambda n: "set_password(" + '"a", ' * (n // 5),
    "base64 words": lambda n: ("YWFhYWFhYWFhYWFh " * n)[:n],
    "base64 of text": lambda n: base64.b64encode(
        ("password=x " * n)[: n * 3 // 4].encode()
    ).decode(),
    "argv positions": lambda n: ("htpasswd -b " + "f " * n)[:n],
    "argv within late": lambda n: "net " + "a " * (n // 4) + "user " + "x " * (n // 4),
}


def test_masking_64_kib_is_fast() -> None:
    text = realistic(64 * 1024)
    masked = mask_text(text)
    assert "hunter2" not in masked and "S3cret" not in masked
    # Against a baseline measured in the same run (one regex pass over the same text), so the
    # machine's load cancels out: masking took ~16-20 such passes here (the text holds every
    # corpus row, issue 21's families included; the text of the corpus before them took
    # ~14 before them and ~16 after, docs/security.md); 60 leaves room.
    one_pass = best_of(lambda: WORDS.findall(text))
    elapsed = best_of(lambda: mask_text(text))
    assert elapsed < 60 * one_pass, f"{elapsed * 1000:.1f} ms, one pass {one_pass * 1000:.1f} ms"
    # A text with nothing to mask costs less than one such pass (a quick pre-check).
    prose = ("lorem ipsum dolor sit amet, consectetur adipiscing elit " * 1200)[: 64 * 1024]
    assert best_of(lambda: mask_text(prose)) < best_of(lambda: WORDS.findall(prose))


def test_many_small_strings_are_cheap() -> None:
    value = {f"k{i}": [f"value {i}", "ls -la /tmp", {"n": i}] for i in range(1000)}
    # ~7-10 JSON round trips of the same value here; 40 leaves room (a baseline, not a clock).
    round_trip = best_of(lambda: json.loads(json.dumps(value)))
    assert best_of(lambda: mask_value(value)) < 40 * round_trip


@pytest.mark.parametrize("shape", list(ADVERSARIAL))
def test_adversarial_input_stays_linear(shape: str) -> None:
    make = ADVERSARIAL[shape]
    small, large = make(32 * 1024), make(128 * 1024)
    t_small = best_of(lambda: mask_text(small))
    t_large = best_of(lambda: mask_text(large))
    assert t_large < 8 * t_small + 0.02, (t_small, t_large)  # 4x the input, ~4x the time


@pytest.fixture(scope="module")
def without_re2() -> Iterator[ModuleType]:
    """bot/masking.py loaded as if google-re2 were not installed: the `re` engine."""
    name = "bot_masking_without_re2"
    saved = sys.modules.get("re2")
    sys.modules["re2"] = None  # type: ignore[assignment]  # makes `import re2` fail
    try:
        spec = importlib.util.spec_from_file_location(name, masking.__file__)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules["re2"]
        else:
            sys.modules["re2"] = saved
    yield module
    del sys.modules[name]


def test_the_re_engine_masks_the_same(without_re2: ModuleType) -> None:
    assert masking.ENGINE == "re2" and without_re2.ENGINE == "re"
    for shape, text, shown in SECRETS:
        assert without_re2.mask_text(text) == shown, shape
    for shape, text, _ in LOOKALIKES:
        assert without_re2.mask_text(text) == text, shape
    for shape, value, shown in STRUCTURED:
        assert without_re2.mask_value(value) == shown, shape


@pytest.mark.parametrize("shape", list(ADVERSARIAL))
def test_the_re_engine_does_not_backtrack(without_re2: ModuleType, shape: str) -> None:
    text = ADVERSARIAL[shape](64 * 1024)
    assert best_of(lambda: without_re2.mask_text(text), runs=1) < 1.0


# --------------------------------------------------------------------------------------------
# Every string a card carries to a chat
# --------------------------------------------------------------------------------------------

# One marker per place a card takes text from; each sits in a shape the masker knows.
PLACES = {
    "run title": "deploy PGPASSWORD=TitleSecret1 psql",
    "agent": "ci GH_TOKEN=AgentSecret1",
    "tool": "deploy --token ToolSecret1",
    "command": "mysql -uroot -pCommandSecret1 prod",
    "description": "uses PGPASSWORD=DescriptionSecret1",
    "summary": "restore with curl -u admin:SummarySecret1",
    "target": "postgres://app:TargetSecret1@db/prod",
    "effect": "writes redis://:EffectSecret1@cache",
    "risk": "token=RiskSecret1",
    "profile field": "Cookie: sid=ProfileSecret1",
    "why": "rule 0 (ask) matches password=WhySecret1",
    "rule reason": "X-Api-Key: ReasonSecret1",
    "prompt": "Use api_key=PromptSecret1?",
    "option": "password=OptionSecret1",
    "option (argv)": "mysql -pOptionSecret2 db",
    "deny reason": "leaked Authorization: Bearer DenySecret123",
    "answer": "password=AnswerSecret1",
    "cancel detail": "token=CancelSecret1",
    "who": "alice token=WhoSecret1",
}
MARKERS = [
    "TitleSecret1", "AgentSecret1", "ToolSecret1", "CommandSecret1", "DescriptionSecret1",
    "SummarySecret1", "TargetSecret1", "EffectSecret1", "RiskSecret1", "ProfileSecret1",
    "WhySecret1", "ReasonSecret1", "PromptSecret1", "OptionSecret1", "OptionSecret2",
    "DenySecret123", "AnswerSecret1", "CancelSecret1", "WhoSecret1", "FieldSecret1",
    "LabelSecret", "ghp_LabelSecret",
]  # fmt: skip
LABEL = "ghp_LabelSecretabcdefghijklmnopqrstu1"


def secret_run() -> Run:
    rules: list[dict[str, Any]] = [
        {"tool": "bash", "verdict": "ask", "reason": PLACES["rule reason"]}
    ]
    return Run(
        "run_1",
        "acme",
        "app_1",
        "running",
        "rules",
        rules,
        None,
        {},
        NOW,
        title=PLACES["run title"],
    )


def secret_task(tool_input: Any, **kw: Any) -> Task:
    values: dict[str, Any] = {
        "id": "task_1",
        "run_id": "run_1",
        "workspace_id": "acme",
        "key": "k1",
        "kind": "tool_call",
        "origin": "model",
        "tool_name": PLACES["tool"],
        "tool": PLACES["tool"],
        "tool_input": tool_input,
        "state": "needs_approval",
        "created_at": NOW,
        "deadline": NOW + timedelta(hours=24),
        "why": PLACES["why"],
        "rule_index": 0,
        "appended_by": PLACES["agent"],
        "effect_profile": {
            "summary": PLACES["summary"],
            "targets": [PLACES["target"]],
            "effects": [PLACES["effect"]],
            "risk": PLACES["risk"],
            "notes": PLACES["profile field"],
            LABEL: "x",
        },
    }
    values.update(kw)
    return Task(**values)


def approval_input() -> dict[str, Any]:
    return {
        "command": PLACES["command"],
        "description": PLACES["description"],
        "password": "FieldSecret1",
        LABEL: 1,
    }


def question_input(multi: bool) -> dict[str, Any]:
    options = [PLACES["option"], PLACES["option (argv)"], "keep me"]
    return {"prompt": PLACES["prompt"], "options": options, "multi": multi}


def cards() -> Iterator[tuple[str, Task, Card]]:
    waiting = [
        ("approval", secret_task(approval_input())),
        (
            "edit",
            secret_task({"file_path": "a.env", "old_string": "", "new_string": PLACES["risk"]}),
        ),
        ("raw string input", secret_task(PLACES["command"])),
        ("question", secret_task(question_input(False), kind="ask", state="awaiting_input")),
        ("multi question", secret_task(question_input(True), kind="ask", state="awaiting_input")),
    ]
    ended = [
        (
            "denied",
            secret_task(
                approval_input(),
                state="failed",
                error={"code": "approval_denied", "detail": PLACES["deny reason"]},
                resolved_by=PLACES["who"],
                via="telegram",
                decided_at=NOW,
            ),
        ),
        (
            "answered",
            secret_task(
                question_input(False),
                kind="ask",
                state="resolved",
                resolution={"content": PLACES["answer"]},
                resolved_by=PLACES["who"],
                via="slack",
                decided_at=NOW,
            ),
        ),
        (
            "answered (several)",
            secret_task(
                question_input(True),
                kind="ask",
                state="resolved",
                resolution={"content": [PLACES["answer"], PLACES["option"]]},
                resolved_by=PLACES["who"],
                via="slack",
                decided_at=NOW,
            ),
        ),
        (
            "cancelled",
            secret_task(
                approval_input(),
                state="cancelled",
                error={"code": "cancelled", "detail": PLACES["cancel detail"]},
                decided_at=NOW,
            ),
        ),
    ]
    for name, t in waiting + ended:
        yield name, t, render_decision(t, secret_run(), NOW, "https://x.example/d/run_1/k1")


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from strings(getattr(value, f.name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def leaks(text: str) -> list[str]:
    return [m for m in MARKERS if m in text]


SLACK_IDS: dict[tuple[str, int | None], str] = {
    (action, option): f"cb_{action}_{option}" for action in ACTIONS for option in (None, *range(50))
}


def test_the_markers_are_in_the_raw_tasks() -> None:
    """The test below means something: every marker reaches render_decision unmasked."""
    raw = json.dumps([dataclasses.asdict(t) for _, t, _ in cards()], default=str)
    raw += json.dumps(dataclasses.asdict(secret_run()), default=str)
    assert not [m for m in MARKERS if m not in raw]


@pytest.mark.parametrize("name", [name for name, _, _ in cards()])
def test_no_secret_reaches_a_chat(name: str) -> None:
    _, t, card = next(c for c in cards() if c[0] == name)
    texts = list(strings(card))
    assert texts and not [s for s in texts if leaks(s)], [s for s in texts if leaks(s)]
    assert not leaks(card_html(card))
    text, blocks = decision_blocks(card, SLACK_IDS)
    assert not leaks(text) and not leaks(json.dumps(blocks, ensure_ascii=False))
    assert not leaks(digest_line(t))
    html, _ = digest_html([t], NOW, "https://x.example/inbox")
    assert not leaks(html)
    digest_ids = {(t.id, a): f"d_{a}" for a in ("approve", "deny", "expand")}
    text, blocks = digest_blocks([t], NOW, "https://x.example/inbox", digest_ids, done=False)
    assert not leaks(text) and not leaks(json.dumps(blocks, ensure_ascii=False))


def test_masked_cards_stay_readable() -> None:
    card = next(c for n, _, c in cards() if n == "approval")
    assert card.code is not None and card.code.text == "mysql -uroot -p**** prod"
    assert card.title == "Approve deploy --token ****?"
    assert dict((f.label, f.value) for f in card.context)["Run"] == "deploy PGPASSWORD=**** psql"
    fields = {f.label: f.value for f in card.fields}
    assert fields["Description"] == "uses PGPASSWORD=****"
    assert fields["password"] == MASK and fields["Targets"] == "postgres://app:****@db/prod"
    assert fields["Why"] == "rule 0 (ask) matches password=**** — X-Api-Key: ****"
    assert card.summary == "restore with curl -u admin:****"
    assert "writes redis://:****@cache" in card.badges
    question = next(c for n, _, c in cards() if n == "question")
    labels = [b.label for row in question.buttons for b in row]
    assert labels[:3] == ["password=****", "mysql -p**** db", "keep me"]
    assert question.options == ("password=****", "mysql -p**** db", "keep me")
    assert question.text == "Use api_key=****"  # (a `?` may be part of a password)
    denied = next(c for n, _, c in cards() if n == "denied")
    assert denied.outcome is not None
    assert denied.outcome.detail == "leaked Authorization: Bearer ****"
    assert denied.outcome.who == "alice token=****"
