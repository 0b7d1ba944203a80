"""Secret redaction: our own rule table in the style of gitleaks.

Every piece of untrusted text (card bodies, comments, chat history, logs, repository files,
tenant prompts) passes through `Redactor.redact` before it reaches an LLM or a log, so this
runs on every prompt and must cost little on text that holds no secret.

How it stays cheap (a few milliseconds per 200 KB of ordinary source or log text), and
linear on ANY input (red-team finding: "key"*N, "İ"+"a"*N, "token_"*N and "?token="*N were
quadratic and one 200 KB gateway request held the GIL for 18 s):
- Every scanned pattern starts with a literal (`sk-ant-`, `ghp_`, `AIza`, `-----BEGIN`,
  `://` ...), which `re` finds with a fast substring search. The "not glued to a longer word"
  check is a fixed-width lookbehind placed *after* the literal, because a pattern that starts
  with a lookbehind, a character class or a case-insensitive group loses that fast search.
  That lookbehind rejects every start inside a token run the body could have scanned, and no
  body can fail after it has scanned its run except by a bounded backtrack, so each character
  is read by a bounded number of attempts.
- Rules keyed on a word that must match in any case (`password=`, `Authorization:`,
  `Bearer`, `?access_token=`) have `anchors`: small literal-first patterns run on the
  lowercased text (`token` + the rest of its identifier + a lookahead for `["']? *[=:]`),
  run with `finditer`. The text is lowercased with every offset kept ("İ" is the one
  character whose lowercase is longer). An anchor that reads the rest of an identifier can
  only hit at the last occurrence of its word there, so "keykeykey..." is read once, not
  once per "key"; the identifier's bounds are found on demand, once. The rule's own pattern
  is then tried with `match` once per identifier that holds a hit. Anchors shared by several
  rules are scanned once per text.
- Every repetition a rule's pattern can make at such a start is bounded (`{1,500}`
  characters of value) or stops at the next whitespace, so one attempt costs little however
  many attempts overlap. A secret longer than the bound is still replaced whole: `tail` is
  the class of its characters, and the span is extended to the end of that run, remembering
  the run's end so that overlapping candidates do not read it again.
- A candidate whose span lies inside a span already accepted for the same rule is not
  validated (it would change nothing); with `reach`, one whose identifier lies deep inside
  such a span is not even matched ("token=token=token=..." is one value, read once).
- Value checks make a bounded number of linear passes over at most 500 characters, with C
  scans (`in`, `str.count`, ASCII case mapping) rather than a Python loop per character.
- `keywords` (gitleaks' trick) can still gate a scanned custom rule: it runs only when one of
  them occurs in the lowercased text.
`ScanStats` counts this work (hits, attempts, characters matched, validated and extended)
in units that do not depend on the machine; tests hold it to a constant per input
character, and bench/redact.py measures seconds per MB against the bare `re` engine.
Rules are matched separately rather than as one alternation because an alternation returns
only the first branch that matches at a position; separate matches let the longest candidate
win and let a validator reject one candidate without hiding another rule's match.

How it stays safe:
- The whole secret is replaced, never a prefix: token rules consume every character of the
  token's alphabet; a PEM block runs from BEGIN to its END line inclusive, or to the end of
  the text when the END line is missing (a truncated log).
- Overlapping candidates are merged into one span (the union) named after the earliest,
  then longest, then first-listed rule, so spans never overlap and no character of any
  candidate stays visible at an edge.
- Assignments and URLs keep their key name, scheme and user visible and lose only the value
  (`password=[REDACTED:generic-assignment]`, `https://user:[REDACTED:url-credentials]@host`),
  so the model can still reason about *which* credential was there.

Value checks live in prompts/secret_values.py, our rule table in prompts/secret_table.py,
gitleaks' provider formats (loaded from the vendored upstream rules file) in
prompts/secret_rules.py.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cardloop.prompts.lazy_pattern import compiled
from cardloop.prompts.pem_tail import headless_keys
from cardloop.prompts.percent import percent_decoded
from cardloop.prompts.redaction_rule import RedactionRule
from cardloop.prompts.rule_gates import RuleGates, anchor_literals, gate_for
from cardloop.prompts.secret_rules import GitleaksScanner, load_default
from cardloop.prompts.secret_table import _SPACE, DEFAULT_RULES
from cardloop.prompts.secret_values import shannon_entropy
from cardloop.prompts.unicode_escape import unicode_decoded

__all__ = ["DEFAULT_REDACTOR", "DEFAULT_RULES", "_SPACE", "Finding", "RedactionResult", "RedactionRule",
           "Redactor", "ScanStats", "marker", "redact", "shannon_entropy"]

@dataclass(frozen=True)
class Finding:
    """A redacted span, as offsets into the ORIGINAL text."""

    rule: str
    start: int
    end: int


@dataclass(frozen=True)
class RedactionResult:
    text: str
    findings: tuple[Finding, ...]

    def counts(self) -> dict[str, int]:
        """How many secrets each rule redacted (only rules that fired)."""
        return dict(Counter(f.rule for f in self.findings))


def marker(rule: str) -> str:
    return f"[REDACTED:{rule}]"


_RUN_CHARS = re.compile(r"[A-Za-z0-9_.\-]*")

# An escaped newline, carriage return, tab or quote, escaped once (JSON, a JSON log line, a
# Python repr) or again and again (JSON inside JSON: a tool result quoting a .json file, in a
# rendered prompt that is itself JSON): any run of backslashes before one of those characters.
# (The backslash first, then the rest of the run: a pattern that starts with a repeat has no
# literal prefix, and `re` tried it at every character of the text, 45 ms per 4 MB.)
_ESCAPE = re.compile(r"\\\\*[nrt\"']")
_DECODED = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "'": "'"}


def _unescaped_same_length(text: str) -> str:
    """`text` with each escaped newline, tab and quote read as the character it stands for, its
    backslashes as spaces (`\\n` becomes " " + a newline), every offset kept. Rules scan this
    view: in JSON a secret after `\\n` was glued to the `n` and missed, and a value before
    `\\"` took the backslash along, so its marker broke the JSON (a card whose stored prompt
    then never parsed). A backslash before anything else (`\\\\`, `\\/`, a Windows path) stays."""
    if "\\" not in text:
        return text
    return _ESCAPE.sub(lambda m: " " * (len(m[0]) - 1) + _DECODED[m[0][-1]], text)


def _lower_same_length(text: str) -> str:
    """`text.lower()` with every offset kept: "İ" is the one character whose lowercase is two
    characters long; as "i" it still lets anchors match, and hits map back to `text`."""
    lowered = text.replace("\u0130", "i").lower()
    if len(lowered) != len(text):  # a future Unicode version adds another such character
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered


@dataclass
class ScanStats:
    """The work one `Redactor.find` did, in units that do not depend on the machine. Each
    count is at most a constant times the length of the text, whatever the text."""

    hits: int = 0       # anchor hits looked at
    runs: int = 0       # characters of identifier runs read to place those hits
    attempts: int = 0   # candidates: `match` tried at an identifier, or a scanned match
    matched: int = 0    # characters inside matches
    validated: int = 0  # characters of matches handed to validators
    extended: int = 0   # characters read to extend a secret to the end of its run
    skipped: int = 0    # candidates inside a span the same rule already accepted
    keyword_hits: int = 0  # gitleaks keywords found (one Aho-Corasick pass)
    searched: int = 0   # characters gitleaks rules matched or searched around those hits

    @property
    def total(self) -> int:
        return (self.hits + self.runs + self.attempts + self.matched + self.validated
                + self.extended + self.keyword_hits + self.searched)


class _Text:
    """One text being scanned: its same-length lowercase (reversed too, when an anchor hit
    needs the start of its identifier), the anchor hits shared by rules, the work done."""

    __slots__ = ("_reversed", "found", "hits", "lowered", "stats", "text")

    def __init__(self, text: str, stats: ScanStats) -> None:
        self.text = text
        # The gates' literals that occur in `lowered`, by index (None: not known, run every anchor).
        self.found: set[int] | None = None
        self.lowered = _lower_same_length(text)
        self._reversed: str | None = None
        self.hits: dict[tuple[str, int], dict[int, int]] = {}
        self.stats = stats

    @property
    def reversed(self) -> str:
        if self._reversed is None:
            self._reversed = self.lowered[::-1]
        return self._reversed


def _anchor_starts(anchor: re.Pattern[str], t: _Text) -> dict[int, int]:
    """Start -> end of the identifier run of the lowered text that holds each hit of
    `anchor` (start = end = the hit when it is in none). Hits come in order, so a run is
    read once, however many hits it holds."""
    found: dict[int, int] = {}
    lowered, n, run = t.lowered, len(t.lowered), _RUN_CHARS.match
    run_start = run_end = -1
    hits = read = 0
    for m in anchor.finditer(lowered):
        hits += 1
        pos = m.start()
        if run_start <= pos < run_end:
            continue
        run_start, run_end = pos, run(lowered, pos).end()  # type: ignore[union-attr]
        if run_end > pos:
            back = n - pos  # `lowered[pos - 1]` is `reversed[back]`
            run_start -= run(t.reversed, back).end() - back  # type: ignore[union-attr]
            read += run_end - run_start
        found[run_start] = run_end
    t.stats.hits += hits
    t.stats.runs += read
    return found


# A rule's pattern, anchors, tail and tail run (`tail` + "*"), compiled.
_Compiled = tuple[re.Pattern[str], tuple[re.Pattern[str], ...], re.Pattern[str] | None, re.Pattern[str] | None]


class Redactor:
    def __init__(self, rules: Sequence[RedactionRule] = DEFAULT_RULES, *,
                 catalog: GitleaksScanner | None = None, gated: bool = True) -> None:
        """`rules`: our own rules, listed first (an equal span is named after them);
        `catalog`: gitleaks' provider formats (prompts/secret_rules.py), scanned after them;
        `gated`: skip a rule none of whose leading literals occurs in the text
        (prompts/rule_gates.py; False only to check that the gates change no finding)."""
        names = [r.name for r in rules] + ([r.name for r in catalog.rules] if catalog else [])
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate rule names in {names}")
        for r in rules:
            # The name goes into the marker; keep it one plain token.
            if not re.fullmatch(r"[a-z0-9][a-z0-9\-]*", r.name):
                raise ValueError(f"rule name {r.name!r}: use lowercase kebab-case")
        self.rules: tuple[RedactionRule, ...] = tuple(rules)
        self.catalog = catalog
        self._names = tuple(names)
        # Per rule, once a text first opens it: its pattern, anchors, tail and tail run compiled
        # (most rules' patterns are LazyPatterns: a command that redacts a short text, or none,
        # compiles only the few rules its texts open).
        self._compiled: list[_Compiled | None] = [None] * len(self.rules)
        self._gates = RuleGates([gate_for(r) if gated else None for r in self.rules],
                                keywords=catalog.keywords if catalog is not None else ())
        # Per rule gated on its anchors, each anchor's leading literals: an anchor none of whose
        # literals occurs in the text cannot hit, so it is not run.
        self._anchor_literals = tuple(self._literal_indexes(anchor_literals(r)) if gated else None
                                      for r in self.rules)
        # A rule with keywords is gated on exactly them (prompts/rule_gates.py): once the gate
        # opened it, one occurs, and looking again would read a long text a second time for each
        # absent one (`pgpass`, `kind: secret`: 2 ms per 4 MB each).
        self._keywords_checked = tuple(gated and bool(r.keywords) for r in self.rules)
        self._multiline = frozenset(i for i, r in enumerate(self.rules) if r.multiline)
        # The tail of a PEM block cut above its BEGIN line is named (and counted) as the whole one.
        self._pem_tail = names.index("private-key") if "private-key" in names[:len(self.rules)] else None

    def _literal_indexes(self, per_anchor: tuple[tuple[str, ...], ...] | None) -> tuple[frozenset[int], ...] | None:
        """Each anchor's leading literals as the gates' indexes (None when one is not gated on);
        as sets, so that a log line checks each anchor with one `isdisjoint`."""
        if per_anchor is None:
            return None
        found = tuple(frozenset(self._gates.lowered_index(lit) for lit in lits) for lits in per_anchor)
        return None if any(k is None for lits in found for k in lits) else found  # type: ignore[return-value]

    def _compile(self, index: int) -> _Compiled:
        rule = self.rules[index]
        # With `tail_over`, a separator counts as part of the run when a tail character follows it.
        step = f"(?:{rule.tail}|(?:{rule.tail_over})(?={rule.tail}))" if rule.tail_over else rule.tail
        tail = re.compile(step) if rule.tail else None
        tail_run = re.compile(step + "*+") if rule.tail else None
        found = self._compiled[index] = (compiled(rule.pattern), tuple(compiled(a) for a in rule.anchors),
                                         tail, tail_run)
        return found

    def _candidates(self, rule: RedactionRule, pattern: re.Pattern[str], anchors: tuple[re.Pattern[str], ...],
                    t: _Text, *, keywords_checked: bool = False,
                    literals: tuple[frozenset[int], ...] | None = None,
                    ) -> Iterable[tuple[re.Match[str] | None, int, int]]:
        """(match or None when skipped, identifier start, identifier end) in start order."""
        if rule.keywords and not keywords_checked and not any(k in t.lowered for k in rule.keywords):
            return ()
        if not anchors:
            return ((m, m.start(), m.start()) for m in pattern.finditer(t.text))
        starts: dict[int, int] = {}
        found = t.found
        for i, anchor in enumerate(anchors):
            if literals is not None and found is not None and found.isdisjoint(literals[i]):
                continue  # its literal is not in the text: no hit
            key = (anchor.pattern, anchor.flags)
            hits = t.hits.get(key)
            if hits is None:  # shared anchors are scanned once per text
                hits = t.hits[key] = _anchor_starts(anchor, t)
            starts.update(hits)
        return ((None, s, e) for s, e in sorted(starts.items()))

    def _collect(self, index: int, t: _Text, candidates: list[tuple[int, int, int]]) -> None:
        rule, text = self.rules[index], t.text
        if rule.finder is not None:
            if self._keywords_checked[index] or any(k in t.lowered for k in rule.keywords):
                spans, read = rule.finder(text, t.lowered)
                t.stats.searched += read
                candidates.extend((start, -end, index) for start, end in spans if start < end)
            return
        group, validator, reach = rule.group, rule.validator, rule.reach
        pattern, anchors, tail, tail_run = self._compiled[index] or self._compile(index)
        attempts = matched = validated = extended = skipped = 0
        # The accepted span with the furthest end so far, and the last run `tail` extended.
        kept_start = kept_end = ext_from = ext_to = -1
        for m, run_start, run_end in self._candidates(rule, pattern, anchors, t,
                                                         keywords_checked=self._keywords_checked[index],
                                                         literals=self._anchor_literals[index]):
            attempts += 1
            if m is None:
                if reach is not None and kept_start <= run_start and run_end + reach < kept_end:
                    skipped += 1  # inside a value this rule already holds (see `reach`)
                    continue
                m = pattern.match(text, run_start)
                if m is None:
                    continue
            matched += m.end() - m.start()
            start, end = m.span(group)
            if start >= end:
                continue
            if tail is not None and tail.match(text, end):
                # The pattern's bound cut the secret short: take the rest of its run.
                if not ext_from <= end <= ext_to:
                    ext_from, ext_to = end, tail_run.match(text, end).end()  # type: ignore[union-attr]
                    extended += ext_to - ext_from
                end = ext_to
            if kept_start <= start and end <= kept_end:
                skipped += 1  # inside a span this rule already holds: changes nothing
                continue
            if validator is not None:
                validated += m.end() - m.start()
                if not validator(m):
                    continue
            candidates.append((start, -end, index))
            if end > kept_end:
                kept_start, kept_end = start, end
        stats = t.stats
        stats.attempts += attempts
        stats.matched += matched
        stats.validated += validated
        stats.extended += extended
        stats.skipped += skipped

    def find(self, text: str, stats: ScanStats | None = None) -> tuple[Finding, ...]:
        """Non-overlapping secret spans in `text`, sorted by start. `stats`, when given,
        receives the work done."""
        stats = stats if stats is not None else ScanStats()
        candidates: list[tuple[int, int, int]] = []  # (start, -end, rule index)
        # URL-encoded syntax and `\uXXXX`-escaped strings: what the decoded text holds, mapped back.
        for plain, where in percent_decoded(text) + unicode_decoded(text):
            index = {name: i for i, name in enumerate(self._names)}
            for f in self._find(plain, stats, []):
                candidates.append((where[f.start], -where[f.end], index[f.rule]))
        return self._find(text, stats, candidates)

    def _find(self, text: str, stats: ScanStats, candidates: list[tuple[int, int, int]]) -> tuple[Finding, ...]:
        text = _unescaped_same_length(text)  # spans are offsets into the original all the same
        t = _Text(text, stats)
        multiline = self._multiline
        open_rules, t.found, keyword_hits = self._gates.open_rules_and_literals(text, t.lowered)
        for index in open_rules:
            # (The newline is looked for only when such a rule is open: a log line opens few.)
            if index in multiline and text.find("\n", 0, len(text) - 1) < 0:
                continue
            self._collect(index, t, candidates)
        if self._pem_tail is not None:  # a key whose BEGIN line the text does not hold
            spans, read = headless_keys(text)
            t.stats.searched += read
            if spans:
                candidates.extend((start, -end, self._pem_tail) for start, end in spans)
        if self.catalog is not None:
            found, hit_count, searched = self.catalog.scan(text, t.lowered, keyword_hits)
            if hit_count:
                t.stats.keyword_hits += hit_count
                t.stats.searched += searched
                offset = len(self.rules)
                candidates.extend((start, -end, offset + index) for start, end, index in found)
        if not candidates:
            return ()
        # Earliest, then longest, then first-listed rule names the span; anything that
        # overlaps it is folded in, so spans never overlap and nothing leaks at an edge.
        candidates.sort()
        findings: list[Finding] = []
        start, neg_end, index = candidates[0]
        end = -neg_end
        for c_start, c_neg_end, c_index in candidates[1:]:
            if c_start < end:
                end = max(end, -c_neg_end)
                continue
            findings.append(Finding(self._names[index], start, end))
            start, end, index = c_start, -c_neg_end, c_index
        findings.append(Finding(self._names[index], start, end))
        return tuple(findings)

    def redact(self, text: str) -> RedactionResult:
        findings = self.find(text)
        if not findings:
            return RedactionResult(text, ())
        parts: list[str] = []
        pos = 0
        for f in findings:
            parts.append(text[pos:f.start])
            parts.append(marker(f.rule))
            pos = f.end
        parts.append(text[pos:])
        return RedactionResult("".join(parts), findings)


# gitleaks' formats; a rule named like one of ours is renamed `gitleaks-<id>`.
GITLEAKS_RULES, GITLEAKS_SKIPPED = load_default(frozenset(r.name for r in DEFAULT_RULES))
DEFAULT_REDACTOR = Redactor(DEFAULT_RULES, catalog=GitleaksScanner(GITLEAKS_RULES))


def redact(text: str) -> str:
    """`text` with every secret the default rules find replaced by `[REDACTED:<rule>]`."""
    return DEFAULT_REDACTOR.redact(text).text
