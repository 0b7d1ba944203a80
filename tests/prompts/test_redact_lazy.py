"""The redaction rules compile on first need (prompts/lazy_pattern.py) and load from their
precomputed form (prompts/rules_precomputed.py): importing the redactor compiles no rule, and a
lazy redactor finds exactly what an eagerly compiled one does."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest

from cardloop.prompts import precompute_rules, rules_precomputed
from cardloop.prompts.lazy_pattern import LazyPattern, compiled
from cardloop.prompts.redact import DEFAULT_RULES, GITLEAKS_RULES, GITLEAKS_SKIPPED, Redactor
from cardloop.prompts.redaction_rule import RedactionRule
from cardloop.prompts.rule_gates import gate_for, leading_literals, parse_leading_literals
from cardloop.prompts.secret_rules import GitleaksRule, GitleaksScanner, _rules_text, load
from tests.prompts.benign_corpus import generated
from tests.prompts.secret_corpus import samples

# Run in a fresh interpreter: other tests in this process have compiled rules already.
_AFTER_IMPORT = """
import json, sys
from cardloop.prompts import redact
from cardloop.prompts.lazy_pattern import LazyPattern
ours = [p for r in redact.DEFAULT_RULES for p in (r.pattern, *r.anchors)]
allow = [p for r in redact.GITLEAKS_RULES for a in r.allowlists for p in a.regexes]
print(json.dumps({
    "lazy": all(isinstance(p, LazyPattern) for p in ours + allow),
    "ours": sum(p.is_compiled for p in ours),
    "allowlists": sum(p.is_compiled for p in allow),
    "gitleaks": sum("pattern" in vars(r) for r in redact.GITLEAKS_RULES),
    "tomllib": "tomllib" in sys.modules,
    "text": redact.redact(sys.argv[1]),
    "rules_after": sum(r.pattern.is_compiled for r in redact.DEFAULT_RULES),
    "rules": len(redact.DEFAULT_RULES),
}))
"""


def test_importing_the_redactor_compiles_no_rule_and_parses_no_toml() -> None:
    card = "Retry webhooks: see ADR-0007, token=Zx9Qm2Lp8Rt4Vw6Yb3Nc and ghp_" + "a1B2" * 9
    out = subprocess.run([sys.executable, "-c", _AFTER_IMPORT, card], capture_output=True, text=True, check=True)
    state = json.loads(out.stdout)
    assert state["lazy"]
    assert (state["ours"], state["allowlists"], state["gitleaks"]) == (0, 0, 0)
    assert not state["tomllib"]  # the precomputed form was current
    # The redaction compiled the rules the text opened (9 of 46), not the table.
    assert "[REDACTED:generic-assignment]" in state["text"] and "[REDACTED:github-token]" in state["text"]
    assert 0 < state["rules_after"] <= 12 < state["rules"]


def _fresh(rule: RedactionRule) -> RedactionRule:
    """`rule` with new lazy patterns: compiled only when this redactor opens the rule."""
    def lazy(p: re.Pattern[str] | LazyPattern) -> LazyPattern:
        return LazyPattern(p.pattern, p.flags)
    return dataclasses.replace(rule, pattern=lazy(rule.pattern), anchors=tuple(lazy(a) for a in rule.anchors))


def _eager(rule: RedactionRule) -> RedactionRule:
    return dataclasses.replace(rule, pattern=compiled(rule.pattern), anchors=tuple(compiled(a) for a in rule.anchors))


def _compiled_catalog(rules: tuple[GitleaksRule, ...]) -> GitleaksScanner:
    for r in rules:
        assert r.pattern.pattern == r.regex  # compiles it now (cached_property)
    return GitleaksScanner(rules)


@pytest.fixture(scope="module")
def redactors() -> tuple[Redactor, Redactor]:
    fresh_catalog, _ = load(_rules_text(), reserved=frozenset(r.name for r in DEFAULT_RULES))
    lazy = Redactor([_fresh(r) for r in DEFAULT_RULES], catalog=GitleaksScanner(fresh_catalog))
    eager = Redactor([_eager(r) for r in DEFAULT_RULES], catalog=_compiled_catalog(GITLEAKS_RULES))
    assert not any(p.is_compiled for r in lazy.rules for p in (r.pattern, *r.anchors))  # type: ignore[union-attr]
    return lazy, eager


def test_a_lazy_redactor_finds_what_an_eager_one_does_on_secrets(redactors: tuple[Redactor, Redactor]) -> None:
    lazy, eager = redactors
    texts = [s.text for s in samples(seed=11)]
    assert [lazy.find(t) for t in texts] == [eager.find(t) for t in texts]
    assert sum(bool(eager.find(t)) for t in texts) > len(texts) * 0.9  # the corpus holds secrets
    # ... and one text at a time opened only some of the rules; the lazy redactor compiled those.
    assert 0 < sum(c is not None for c in lazy._compiled) <= len(lazy.rules)


def test_a_lazy_redactor_finds_what_an_eager_one_does_on_benign_text(redactors: tuple[Redactor, Redactor]) -> None:
    lazy, eager = redactors
    for kind, text in generated(20_000).items():
        assert lazy.find(text) == eager.find(text), kind


def test_the_precomputed_rules_are_current() -> None:
    # If this fails: .venv/bin/python -m cardloop.prompts.precompute_rules
    assert precompute_rules.TARGET.read_text(encoding="utf-8") == precompute_rules.render()


def test_the_precomputed_load_equals_parsing_the_toml() -> None:
    parsed, skipped = load(_rules_text(), reserved=frozenset(r.name for r in DEFAULT_RULES))
    assert parsed == GITLEAKS_RULES
    assert skipped == GITLEAKS_SKIPPED
    # The global allowlist is one object shared by every rule, as when parsed.
    assert len({id(r.allowlists[0]) for r in GITLEAKS_RULES}) == 1


def test_gates_from_the_precomputed_literals_equal_parsed_ones() -> None:
    for rule in DEFAULT_RULES:
        for p in (rule.pattern, *rule.anchors):
            assert (p.pattern, p.flags) in rules_precomputed.LEADING_LITERALS
            assert leading_literals(p) == parse_leading_literals(p) == parse_leading_literals(compiled(p))
        assert gate_for(rule) == gate_for(_eager(rule))


def test_a_pattern_the_precomputed_form_does_not_know_is_parsed() -> None:
    assert leading_literals(LazyPattern(r"zzq_(?:one|two)\d+")) == ("zzq_one", "zzq_two")
    assert leading_literals(LazyPattern(r"(?i)zzq_\d+")) is None  # a global flag, read without compiling


def test_a_lazy_pattern_reads_as_the_compiled_one() -> None:
    for source, flags in ((r"(?i)ab(c)", 0), (r"a.b", re.DOTALL), (r"\w+", re.ASCII), (r"(?s)(?m)^x", 0)):
        lazy, eager = LazyPattern(source, flags), re.compile(source, flags)
        assert (lazy.pattern, lazy.flags) == (eager.pattern, eager.flags)
        assert not lazy.is_compiled
        assert lazy == eager and hash(lazy) == hash(LazyPattern(source, flags))
        assert lazy.groups == eager.groups and lazy.is_compiled
        assert lazy.compiled() is lazy.compiled()
