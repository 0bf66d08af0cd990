"""How long judging a shell line takes (issue 20), against the plain evaluation in the same run.

Prints, as medians over many calls:

- a typical command line (100-300 bytes, every one distinct, so every one is parsed): judged by
  `bot/rules/compound.judge` with the parse; target <= 50 µs;
- the same lines again (their parses cached);
- a 64 KiB line (about 4,000 commands), parsed and judged; target <= 20 ms;
- a call without `shell_commands`: `Policy.evaluate` alone (the baseline, the code of
  docs/performance.md's rule-engine figures) and through `judge` as the service runs it (the
  difference is what `shell_commands` costs a run that does not declare it; target <= 5%).

    .venv/bin/python bench/shell_bench.py [--quick]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bot.profiles import with_builtins
from bot.rules import Verdict, compile_policy
from bot.rules.compound import compile_shell, judge
from bot.rules.shell import clear_cache, read_line

QUICK = "--quick" in sys.argv
PROFILE = with_builtins({})["claude-code"]
POLICY = compile_policy(PROFILE.approval_rules, PROFILE.aliases)
SHELL = compile_shell(PROFILE.shell_commands)

# Lines as coding agents write them, 100-300 bytes each: searches, git, builds, pipelines.
TEMPLATES = [
    "git log --oneline -20 --author=alice{n} | grep -i fix && git status --short 2>/dev/null"
    " && git diff --stat HEAD~1",
    "cd src/app{n} && grep -rn 'TODO' --include='*.py' . | head -50; ls -la tests/ | wc -l",
    "find . -name '*.py{n}' -not -path './.venv/*' -not -path './node_modules/*' | xargs wc -l"
    " | sort -n | tail -20",
    'git diff HEAD~{n} -- src/ tests/ && git show --stat HEAD && echo "done with {n}" && git'
    " log -3 --format='%h %s'",
    "cat README.md | head -40 && rg -n 'def main' src/cli{n}.py || echo 'missing main in"
    " src/cli{n}.py'",
    "npm run build --workspace=packages/web{n} && npm test -- --run src/components && git push"
    " origin feature/x{n}",
    "ls -la src/app{n} && cat src/app{n}/config.toml | grep -v '^#' | head -20 && git status",
    "python -m pytest tests/test_api{n}.py -x -q 2>&1 | tail -30 && git add -A && git commit"
    ' -m "fix the api test {n}"',
]


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _decide(mode: str = "ask") -> Callable[[Any], Verdict]:
    def decide(tool_input: Any) -> Verdict:
        return POLICY.evaluate(tool_name="Bash", tool_input=tool_input, origin="model", mode=mode)  # type: ignore[arg-type]

    return decide


def typical(count: int) -> tuple[float, float, int]:
    lines = [TEMPLATES[i % len(TEMPLATES)].format(n=i) for i in range(count)]
    sizes = [len(line.encode()) for line in lines]
    decide = _decide()
    clear_cache()
    cold: list[float] = []
    for line in lines:
        start = time.perf_counter()
        judge(decide, {"command": line}, SHELL, mode="ask", origin="model")
        cold.append(time.perf_counter() - start)
    warm: list[float] = []
    for line in lines[-2000:]:  # still in the parse cache (4,096 lines)
        start = time.perf_counter()
        judge(decide, {"command": line}, SHELL, mode="ask", origin="model")
        warm.append(time.perf_counter() - start)
    return _median_us(cold), _median_us(warm), int(statistics.mean(sizes))


# Lines with no quote, expansion or redirection: read without the parser (the fast path).
PLAIN = [
    "git status && git diff --stat HEAD~{n} && ls -la src/app{n} | head -20 && npm test --"
    " --run src/components/{n}",
    "cd packages/web{n} && npm run build && npm run lint -- --fix && git add -A && git status"
    " --short | wc -l",
]


def plain_lines(count: int) -> tuple[float, int]:
    lines = [PLAIN[i % len(PLAIN)].format(n=i) for i in range(count)]
    decide = _decide()
    clear_cache()
    times: list[float] = []
    for line in lines:
        start = time.perf_counter()
        judge(decide, {"command": line}, SHELL, mode="ask", origin="model")
        times.append(time.perf_counter() - start)
    return _median_us(times), int(statistics.mean(len(line.encode()) for line in lines))


def parse_alone(count: int) -> float:
    """The baseline: tree-sitter's parse of the same lines, nothing else."""
    from bot.rules.shell import _PARSER

    lines = [TEMPLATES[i % len(TEMPLATES)].format(n=i).encode() for i in range(count)]
    times: list[float] = []
    for line in lines:
        start = time.perf_counter()
        _PARSER.parse(line)
        times.append(time.perf_counter() - start)
    return _median_us(times)


def _huge_lines(round_: int) -> dict[str, str]:
    """64 KiB lines of two shapes: many commands (the reader's worst kind), and a file
    written through a heredoc (how agents write a big file with Bash: one command, data)."""
    unit = f"grep -rn 'TODO {round_}' src/app{round_} && ls -la build/{round_} | head && "
    commands = unit * ((65_536 - 10) // len(unit)) + "ls -la"
    body = "".join(f"line {i} of the generated module, round {round_}\n" for i in range(1600))
    heredoc = f"cat > src/generated_{round_}.py <<'EOF'\n{body}EOF"[:65_530] + "\nEOF"
    distinct = "".join(
        f"grep -rn 'TODO {i}' src/app{i} && ls -la build/{i} | head -{i} && " for i in range(1200)
    )[: 65_536 - 10].rsplit(" && ", 1)[0]
    return {"many commands": commands, "distinct commands": distinct, "one heredoc": heredoc}


def huge(rounds: int) -> dict[str, tuple[float, int, int]]:
    decide = _decide()
    times: dict[str, list[float]] = {}
    shape: dict[str, tuple[int, int]] = {}
    for round_ in range(rounds):
        for name, line in _huge_lines(round_).items():
            clear_cache()
            start = time.perf_counter()
            judge(decide, {"command": line}, SHELL, mode="ask", origin="model")
            times.setdefault(name, []).append(time.perf_counter() - start)
            shape[name] = (len(line.encode()), len(read_line(line).commands))
    return {n: (statistics.median(t) * 1e3, *shape[n]) for n, t in times.items()}


def plain(count: int) -> tuple[float, float]:
    """A call on a run without shell paths: the engine alone, and as the service decides it."""
    policy = compile_policy(
        [{"tool": f"tool{i}", "verdict": "allow"} for i in range(90)]
        + [{"tool": "bash", "path": "command", "match": f"cmd{i} *", "verdict": "ask"}
           for i in range(10)]
    )  # fmt: skip
    call = {"command": "something else entirely --flag value"}

    def decide(tool_input: Any) -> Verdict:
        return policy.evaluate(tool_name="bash", tool_input=tool_input, mode="ask")

    engine: list[float] = []
    service: list[float] = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(count):
            decide(call)
        engine.append((time.perf_counter() - start) / count)
        start = time.perf_counter()
        for _ in range(count):
            judge(decide, call, None, mode="ask", origin="model")
        service.append((time.perf_counter() - start) / count)
    return _median_us(engine), _median_us(service)


def main() -> None:
    count = 3000 if QUICK else 20000
    cold, warm, size = typical(count)
    print(f"typical line ({size} bytes on average), judged with its parse: {cold:.1f} µs median"
          f"  (target <= 50 µs: {'met' if cold <= 50 else 'MISSED'})")  # fmt: skip
    print(f"typical line, parse cached: {warm:.1f} µs median")
    print(f"baseline, the same lines parsed by tree-sitter alone: {parse_alone(count):.1f} µs")
    plain_us, plain_size = plain_lines(count)
    met = "met" if plain_us <= 50 else "MISSED"
    print(f"plain line ({plain_size} bytes: no quotes, expansions or redirections), judged:"
          f" {plain_us:.1f} µs median  (target <= 50 µs: {met})")  # fmt: skip
    for name, (ms, bytes_, commands) in huge(5 if QUICK else 15).items():
        met = "met" if ms <= 20 else "MISSED"
        print(f"64 KiB line, {name} ({bytes_} bytes, {commands} distinct commands), parsed and"
              f" judged: {ms:.1f} ms median  (target <= 20 ms: {met})")  # fmt: skip
    engine, service = plain(20000 if QUICK else 200000)
    overhead = (service - engine) / engine * 100
    print(f"no shell_commands: engine alone {engine:.2f} µs, as the service decides it "
          f"{service:.2f} µs (+{overhead:.1f}%)")  # fmt: skip


if __name__ == "__main__":
    main()
