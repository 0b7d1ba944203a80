"""The literal gates skip our rules only where they would have found nothing: the gated
redactor finds exactly what the ungated one finds, secret by secret and on benign text, in
whole texts and line by line, and a rule whose first characters are not a plain literal
always runs."""

from __future__ import annotations

import re

import pytest

from cardloop.prompts.redact import DEFAULT_REDACTOR, DEFAULT_RULES, Redactor
from cardloop.prompts.redaction_rule import RedactionRule
from cardloop.prompts.rule_gates import RuleGates, gate_for, leading_literals
from tests.prompts.benign_corpus import generated
from tests.prompts.redteam_corpus import samples as redteam_samples
from tests.prompts.secret_corpus import samples

UNGATED = Redactor(DEFAULT_RULES, catalog=DEFAULT_REDACTOR.catalog, gated=False)

# Texts where a rule's literal sits at an edge, in another case, next to a lone surrogate,
# or past the length where the gates switch from one automaton pass to substring checks.
EDGES = [
    "", "A", "x", "sk-", "Sk-ant-abc", "SECRET=hunter2hunter2", "Bearer abcdefghijklmnop1234",
    "authorization: Basic dXNlcjpwYXNzd29yZDEyMzQ1Ng==", "https://u:p4ssw0rdp4ssw0rd@host/x",
    "GET /cb?Access_Token=Zx81kPq0Lm2Rt5Yv7Wn3 HTTP/1.1", "İ password = 'Zx81kPq0Lm2Rt5Yv7Wn3'",
    "\ud800 token=Zx81kPq0Lm2Rt5Yv7Wn3Bc9Df \udfff", "AKIA" + "Z" * 16,
    "log line\n" * 600 + "export GITHUB_TOKEN=ghp_" + "a1B2c3D4e5" * 4 + "\n",
]


def test_each_sample_secret_is_found_the_same_with_and_without_gates() -> None:
    for sample in samples(seed=3, per_family=2):
        assert DEFAULT_REDACTOR.find(sample.text) == UNGATED.find(sample.text), (sample.family, sample.syntax)


def test_the_red_team_corpus_is_found_the_same_with_and_without_gates() -> None:
    """Also with only some anchors of a rule run (those whose literal occurs in the text):
    each sample alone opens few, all of them joined open most."""
    corpus = redteam_samples(seed=5)
    for sample in corpus:
        assert DEFAULT_REDACTOR.find(sample.text) == UNGATED.find(sample.text), sample.family
    joined = "\n".join(s.text for s in corpus)
    assert DEFAULT_REDACTOR.find(joined) == UNGATED.find(joined)


@pytest.mark.parametrize("text", EDGES)
def test_edge_texts_are_found_the_same(text: str) -> None:
    assert DEFAULT_REDACTOR.find(text) == UNGATED.find(text)


def test_benign_text_is_found_the_same_whole_and_line_by_line() -> None:
    for name, text in generated(200_000).items():
        assert DEFAULT_REDACTOR.find(text) == UNGATED.find(text), name
        for line in text.splitlines()[:400]:
            assert DEFAULT_REDACTOR.find(line) == UNGATED.find(line), (name, line)


def test_a_line_without_any_literal_runs_no_rule_of_ours() -> None:
    line = "2026-11-20T10:01:02Z INFO worker started processing job 42 for queue default"
    assert DEFAULT_REDACTOR._gates.open_rules(line, line.lower()) == []


@pytest.mark.parametrize(("pattern", "expected"), [
    (r"sk-ant-[a-z]+", ("sk-ant-",)),
    (r"xa|yb", ("xa", "yb")),
    # `re` factors a common prefix out of the alternatives; they are spelled out again.
    (r"ghp_x|gho_y", ("ghp_x", "gho_y")),
    (r"(?:AKIA|ASIA)[A-Z0-9]{16}", ("AKIA", "ASIA")),  # a group of literals, then a range: it stops
    (r"A(?:KIA|3T[A-Z0-9])", ("AKIA", "A3T")),  # an alternative cut short ends them all
    (r"x(?:ox[abp]|app)-", ("xoxa-", "xoxb-", "xoxp-", "xapp-")),  # a short class is spelled out
    (r"https?://h", ("http://h", "https://h")),  # an optional literal: both
    (r"[?&]token=", ("?token=", "&token=")),
    (r"[a-z]token=", None),  # a range first
    (r"[^?]token=", None),  # a negated class first
    (r"a?[xy]", ("x", "y", "ax", "ay")),
    (r"a?[^x]", None),  # an empty prefix where a class follows
    (r"[abcdefghij]x", None),  # more than _MAX_CLASS characters
    (r"xy|[ab][cd]", ("xy", "ac", "ad", "bc", "bd")),
    (r"(?<![a-z])key", None),  # a lookbehind first
    (r"(?i:secret)=", None),  # case-insensitive letters
    (r"abc|[x-z]", None),  # one alternative without a literal
])
def test_leading_literals(pattern: str, expected: tuple[str, ...] | None) -> None:
    assert leading_literals(re.compile(pattern)) == expected


def test_spelling_out_stops_before_more_than_max_spelled_literals() -> None:
    # Four classes of two make 16 literals; a fifth would make 32: they stop at four characters.
    found = leading_literals(re.compile(r"[ab][cd][ef][gh][ij]"))
    assert found is not None and len(found) == 16 and {len(lit) for lit in found} == {4}
    assert "aceg" in found and "bdfh" in found


def test_a_case_insensitive_rule_is_never_gated() -> None:
    rule = RedactionRule("loud", re.compile(r"secret=\S+", re.IGNORECASE))
    assert gate_for(rule) is None
    gates = RuleGates([gate_for(rule)])
    assert gates.open_rules("nothing here", "nothing here") == [0]


# Past _AUTOMATON_MAX_CHARS the gates scan windows of 64 KB, 128 KB, ... (prompts/rule_gates.py).
FILLER = "2026-11-20T10:01:02Z INFO worker 42 done\n"


def _long(size: int, at: dict[int, str]) -> str:
    text = list((FILLER * (size // len(FILLER) + 1))[:size])
    for pos, literal in at.items():
        text[pos:pos + len(literal)] = literal
    return "".join(text)


LITERALS = ("sk-ant-", "AKIA", "ghp_", "-----BEGIN", "://")
# One rule per literal, each gated on it as written (a class after the literal ends it).
GATES = RuleGates([gate_for(RedactionRule(f"r{i}", re.compile(re.escape(lit) + r"\w")))
                   for i, lit in enumerate(LITERALS)])


@pytest.mark.parametrize("at", [
    {},
    {65536 - 3: "-----BEGIN"},  # across the first window's end
    {65536 + 131072 - 1: "sk-ant-"},  # across the second's
    {10: "://", 300_000: "AKIA"},  # one found early leaves the automaton; one found late still counts
    {5: "ghp_", 50: "ghp_", 400_000 - 4: "ghp_"},  # a frequent one, and one at the very end
    {399_990: "AKIA"},
])
def test_a_long_text_opens_exactly_the_rules_whose_literal_occurs(at: dict[int, str]) -> None:
    text = _long(400_000, at)
    expected = sorted(i for i, lit in enumerate(LITERALS) if lit in text)
    assert GATES.open_rules(text, text.lower()) == expected


def test_a_lone_surrogate_in_a_later_window_still_finds_the_literals_after_it() -> None:
    text = _long(300_000, {200_000: "\ud800", 250_000: "AKIA", 20: "://"})
    assert GATES.open_rules(text, text.lower()) == [LITERALS.index("AKIA"), LITERALS.index("://")]


class _Counted(str):
    """A text that counts the substring searches made in it (`literal in text`)."""

    searches = 0

    def __contains__(self, literal: object) -> bool:
        type(self).searches += 1
        return super().__contains__(literal)  # type: ignore[operator]


def test_a_long_text_is_read_once_for_all_literals_not_once_for_each() -> None:
    # Every literal absent: a substring search apiece would read the text once per literal
    # (2 ms per 4 MB each, most of the gates' cost on long texts).
    text = _Counted(_long(1_000_000, {}))
    _Counted.searches = 0
    assert DEFAULT_REDACTOR._gates.open_rules(text, _Counted(text.lower())) == []
    assert _Counted.searches == 0


def test_long_benign_and_secret_texts_are_found_the_same_with_and_without_gates() -> None:
    benign = "\n".join(generated(100_000).values())
    assert len(benign) > 4 * 65536
    assert DEFAULT_REDACTOR.find(benign) == UNGATED.find(benign)
    secrets = "\n".join(s.text for s in samples(seed=5, per_family=2))
    assert len(secrets) > 65536 + 4096, len(secrets)  # past the first window
    assert DEFAULT_REDACTOR.find(secrets) == UNGATED.find(secrets)


def test_a_short_texts_single_pass_checks_literals_as_written_in_their_case() -> None:
    """One automaton on the lowercased text finds `akia` in both; only `AKIA` opens the AWS rules."""
    names = DEFAULT_REDACTOR._names
    for text, opened in (("id AKIA" + "Z" * 16, True), ("id akia" + "z" * 16, False)):
        rules, _found, _hits = DEFAULT_REDACTOR._gates.open_rules_and_literals(text, text.lower())
        assert ("aws-access-key-id" in [names[i] for i in rules]) is opened


def test_a_short_texts_keyword_hits_are_those_gitleaks_own_pass_finds() -> None:
    """The hits the gates hand to the gitleaks scanner equal the ones its own automaton lists,
    and so do the secrets it finds from them."""
    catalog = DEFAULT_REDACTOR.catalog
    assert catalog is not None
    texts = [s.text for s in samples(seed=4, per_family=1)] + [s.text for s in redteam_samples(seed=6)]
    short = [t for t in texts if len(t) <= 4096]
    assert len(short) > 100
    for text in short:
        lowered = text.lower()
        _rules, _found, hits = DEFAULT_REDACTOR._gates.open_rules_and_literals(text, lowered)
        assert hits is not None
        own = catalog._ac.find_matches_as_indexes(lowered, overlapping=True)  # type: ignore[union-attr]
        assert sorted(hits) == sorted(own)
        assert catalog.scan(text, lowered, hits) == catalog.scan(text, lowered)
