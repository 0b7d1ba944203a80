"""Which of our redaction rules can match a text at all, decided by substring checks.

The redactor runs on every message and every log line, and most of them hold no secret. For a
short line the cost is not the regular expressions but the Python work around them, once per
rule (22 rules: about 60 µs per log line, 1.5 MB/s line by line). Every rule's candidates
start with a literal (prompts/redact.py says why): a plain rule's matches begin with one of the
leading literals of its pattern's alternatives, an anchored rule's candidates hold a hit of one
of its anchors, which begin with their own leading literals on the lowercased text. A rule none
of whose leading literals occurs in the text cannot yield a candidate, so it is skipped before
any of that work. The gate is derived from the patterns themselves (nothing to keep in sync by
hand) and only ever skips work that would have found nothing: a rule whose leading literal
cannot be read (a character class first, a lookbehind, case-insensitive letters) is not gated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parser  # type: ignore[attr-defined]
from typing import Any

import ahocorasick_rs

from cardloop.prompts import rules_precomputed
from cardloop.prompts.lazy_pattern import Pattern
from cardloop.prompts.redaction_rule import RedactionRule

# Up to this length, one Aho-Corasick pass over the whole text says which literals occur.
_AUTOMATON_MAX_CHARS = 4096
# Past it, one pass over a window at a time, the window doubling (64 KB, 128 KB, ...): a
# literal found leaves the automaton, so a frequent one (an "A" per line of a long log) is
# listed in the first window only, not once per line; and the literals that never occur share
# one pass over the text. (A C substring search per literal read a long text once for each
# absent one: 2 ms per 4 MB apiece, 57 ms of a 320 ms scan of the benchmark's benign text.)
_FIRST_WINDOW = 1 << 16


@dataclass(frozen=True)
class Gate:
    """A rule runs only when one of `literals` occurs in the text (`lowered`: in its
    same-length lowercase form, where anchors run)."""

    literals: tuple[str, ...]
    lowered: bool


class _Side:
    """The gate literals checked against one form of the text (as written, or lowercased)."""

    def __init__(self, users: dict[str, list[int]]) -> None:
        self.literals = tuple(users)
        self.users = tuple(tuple(users[lit]) for lit in self.literals)
        self.index = {lit: k for k, lit in enumerate(self.literals)}
        self.automaton = ahocorasick_rs.AhoCorasick(self.literals) if self.literals else None
        # A literal across a window's end is in both windows (see `_found_in_windows`).
        self._overlap = max(map(len, self.literals), default=1) - 1

    def open_rules(self, hay: str, into: set[int]) -> set[int]:
        """Adds the rules the literals found in `hay` open to `into`; returns those literals'
        indexes."""
        if self.automaton is None:
            return set()
        if len(hay) <= _AUTOMATON_MAX_CHARS:
            try:
                found = {k for k, _s, _e in self.automaton.find_matches_as_indexes(hay, overlapping=True)}
            except UnicodeEncodeError:  # a lone surrogate: the substring checks below take it
                found = {k for k, lit in enumerate(self.literals) if lit in hay}
        else:
            found = self._found_in_windows(hay)
        for k in found:
            into.update(self.users[k])
        return found

    def _found_in_windows(self, hay: str) -> set[int]:
        """The indexes of the literals that occur in a long `hay` (see `_FIRST_WINDOW`)."""
        found: set[int] = set()
        left = list(range(len(self.literals)))  # the literals not found yet, by index
        automaton = self.automaton
        overlap = self._overlap
        pos, window = 0, _FIRST_WINDOW
        while left and pos < len(hay):
            part = hay[pos:pos + window + overlap]
            try:
                hits = {left[k] for k, _s, _e in automaton.find_matches_as_indexes(part, overlapping=True)}
            except UnicodeEncodeError:  # a lone surrogate in this window: substring checks from here
                return found | {k for k in left if self.literals[k] in hay[pos:]}
            pos, window = pos + window, window * 2
            if hits:
                found |= hits
                left = [k for k in left if k not in hits]
                if left:
                    automaton = ahocorasick_rs.AhoCorasick([self.literals[k] for k in left])
        return found


class RuleGates:
    """The rules (by index) that can match a text: the ungated ones, and those one of whose
    leading literals occurs in it; in rule order."""

    def __init__(self, gates: list[Gate | None]) -> None:
        self.always = frozenset(i for i, g in enumerate(gates) if g is None)
        self.count = len(gates)
        sides: dict[bool, dict[str, list[int]]] = {False: {}, True: {}}
        for i, gate in enumerate(gates):
            if gate is not None:
                for lit in gate.literals:
                    sides[gate.lowered].setdefault(lit, []).append(i)
        self._as_written = _Side(sides[False])
        self._lowered = _Side(sides[True])

    def open_rules(self, text: str, lowered: str) -> list[int]:
        return self.open_rules_and_literals(text, lowered)[0]

    def open_rules_and_literals(self, text: str, lowered: str) -> tuple[list[int], set[int] | None]:
        """The open rules, and the indexes (`lowered_index`) of the lowercased side's literals that
        occur in `lowered`: an anchored rule runs only those of its anchors whose leading literal
        is among them (a rule of eight tools' names opened by one scanned the text eight times)."""
        if len(self.always) == self.count:
            return list(range(self.count)), None
        rules = set(self.always)
        self._as_written.open_rules(text, rules)
        found = self._lowered.open_rules(lowered, rules)
        return sorted(rules), found

    def lowered_index(self, literal: str) -> int | None:
        """The index `open_rules_and_literals` reports `literal` (of the lowercased side) by."""
        return self._lowered.index.get(literal)


_UNKNOWN = object()


def leading_literals(pattern: Pattern) -> tuple[str, ...] | None:
    """The literal each top-level alternative of `pattern` starts with, or None when one of
    them starts with anything else or matches letters regardless of case. Our rules' answers
    are computed ahead (prompts/precompute_rules.py: parsing them cost every import 8 ms); the
    answer depends on the source and flags alone, so another pattern is parsed here."""
    known = rules_precomputed.LEADING_LITERALS.get((pattern.pattern, pattern.flags), _UNKNOWN)
    if known is not _UNKNOWN:
        return known  # type: ignore[return-value]
    return parse_leading_literals(pattern)


def parse_leading_literals(pattern: Pattern) -> tuple[str, ...] | None:
    """`leading_literals`, parsed from the pattern (without compiling it)."""
    if pattern.flags & re.IGNORECASE:
        return None
    try:
        tree = sre_parser.parse(pattern.pattern, pattern.flags)
    except re.error:  # pragma: no cover - the pattern compiled, so it parses
        return None
    if tree.state.flags & re.IGNORECASE:  # a global `(?i)` the flags did not show
        return None
    found = _alternatives(list(tree))
    return tuple(dict.fromkeys(found)) if found else None


def _alternatives(items: list[tuple[Any, Any]]) -> list[str] | None:
    if len(items) == 1 and items[0][0] is sre_constants.BRANCH:
        out: list[str] = []
        for branch in items[0][1][1]:
            found = _sequence(list(branch))
            if not found:
                return None
            out += found
        return out
    return _sequence(items)


def _sequence(items: list[tuple[Any, Any]]) -> list[str] | None:
    literal: list[str] = []
    for op, av in items:
        if op is sre_constants.LITERAL:
            literal.append(chr(av))
            continue
        if op is sre_constants.SUBPATTERN and not literal:
            _group, add_flags, _del_flags, sub = av
            if add_flags & re.IGNORECASE:
                return None
            return _alternatives(list(sub))  # a group first: its alternatives' literals
        break
    return ["".join(literal)] if literal else None


def anchor_literals(rule: RedactionRule) -> tuple[tuple[str, ...], ...] | None:
    """Per anchor, the leading literals its hits start with, when the rule is gated on them
    (no keywords, every anchor's literals known); None otherwise."""
    if rule.keywords or not rule.anchors:
        return None
    found = tuple(leading_literals(a) for a in rule.anchors)
    return None if any(f is None for f in found) else found  # type: ignore[return-value]


def gate_for(rule: RedactionRule) -> Gate | None:
    """The rule's gate, or None when it must always run."""
    if rule.keywords:  # the rule's own gate (prompts/redaction_rule.py): one must occur, lowercased
        return Gate(rule.keywords, lowered=True)
    if rule.anchors:
        literals: list[str] = []
        for anchor in rule.anchors:
            found = leading_literals(anchor)
            if found is None:
                return None
            literals += found
        return Gate(tuple(dict.fromkeys(literals)), lowered=True)
    found = leading_literals(rule.pattern)
    return None if found is None else Gate(found, lowered=False)
