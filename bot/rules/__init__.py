"""The rule engine (SPEC 2): validation, anchored byte globs, evaluation, tightening.

Pure: no I/O, no framework imports. Declare with `compile_policy`, decide with
`Policy.evaluate`, narrow per request with `tighten`.
"""

from bot.rules.engine import (
    MODES,
    REASON_MAX_BYTES,
    Mode,
    Origin,
    Outcome,
    Policy,
    Verdict,
    compile_policy,
    cut_reason,
    member_denial_detail,
    strip_runner_suffix,
)
from bot.rules.globs import Glob, MultiGlob, glob_match, glob_match_reference
from bot.rules.paths import text_at
from bot.rules.tighten import at_least_as_strict, strictness, tighten
from bot.rules.validate import (
    MAX_RULES_BYTES,
    ORIGINS,
    RULE_KEYS,
    VERDICTS,
    RulesInvalid,
    validate_rules,
)

__all__ = [
    "MAX_RULES_BYTES",
    "MODES",
    "ORIGINS",
    "REASON_MAX_BYTES",
    "RULE_KEYS",
    "VERDICTS",
    "Glob",
    "Mode",
    "MultiGlob",
    "Origin",
    "Outcome",
    "Policy",
    "RulesInvalid",
    "Verdict",
    "at_least_as_strict",
    "compile_policy",
    "cut_reason",
    "glob_match",
    "glob_match_reference",
    "member_denial_detail",
    "strictness",
    "strip_runner_suffix",
    "text_at",
    "tighten",
    "validate_rules",
]
