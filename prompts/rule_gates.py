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


# A keyword hit handed on to another scanner: (keyword index, start, end), as ahocorasick_rs lists it.
Hit = tuple[int, int, int]


class RuleGates:
    """The rules (by index) that can match a text: the ungated ones, and those one of whose
    leading literals occurs in it; in rule order.

    `keywords` (gitleaks' keywords, prompts/secret_rules.py) share the pass over a short text: a
    log line or a chat message used to be read by three automatons (our literals as written,
    lowercased, and gitleaks' keywords), with their Python around them half the time of a line
    that holds no secret. For such a text one automaton of all three on the lowercased text lists
    every hit; a literal as written is then checked where its lowercase form hit (the text and its
    lowercase form have the same length). A long text keeps the separate passes: listing every hit
    of a frequent literal of ours (`<`, `key`: up to two hits per character) would hold a list of
    hits as long as the text, where the windows of `_Side` list each literal once."""

    def __init__(self, gates: list[Gate | None], keywords: tuple[str, ...] = ()) -> None:
        self.always = frozenset(i for i, g in enumerate(gates) if g is None)
        self.count = len(gates)
        sides: dict[bool, dict[str, list[int]]] = {False: {}, True: {}}
        for i, gate in enumerate(gates):
            if gate is not None:
                for lit in gate.literals:
                    sides[gate.lowered].setdefault(lit, []).append(i)
        self._as_written = _Side(sides[False])
        self._lowered = _Side(sides[True])
        # The short texts' automaton: per pattern, what a hit of it means: the lowercased side's
        # literal index (or -1), the literals as written whose lowercase it is, with their rules'
        # indexes, and the keyword index (or -1).
        roles: dict[str, tuple[int, list[tuple[str, tuple[int, ...]]], int]] = {}
        for k, lit in enumerate(self._lowered.literals):
            roles[lit] = (k, [], -1)
        for lit, users in zip(self._as_written.literals, self._as_written.users, strict=True):
            low = lit.lower()
            k, written, ki = roles.get(low, (-1, [], -1))
            roles[low] = (k, [*written, (lit, users)], ki)
        for ki, word in enumerate(keywords):
            k, written, _ = roles.get(word, (-1, [], -1))
            roles[word] = (k, written, ki)
        self._roles = tuple((k, tuple(written), ki) for k, written, ki in roles.values())
        self._short = ahocorasick_rs.AhoCorasick(list(roles)) if roles else None

    def open_rules(self, text: str, lowered: str) -> list[int]:
        return self.open_rules_and_literals(text, lowered)[0]

    def open_rules_and_literals(self, text: str, lowered: str,
                                ) -> tuple[list[int], set[int] | None, list[Hit] | None]:
        """The open rules; the indexes (`lowered_index`) of the lowercased side's literals that
        occur in `lowered`: an anchored rule runs only those of its anchors whose leading literal
        is among them (a rule of eight tools' names opened by one scanned the text eight times);
        and for a short text every hit of `keywords` in `lowered` (None: not looked for)."""
        if len(self.always) == self.count:
            return list(range(self.count)), None, None
        if len(lowered) <= _AUTOMATON_MAX_CHARS and self._short is not None:
            try:
                hits = self._short.find_matches_as_indexes(lowered, overlapping=True)
            except UnicodeEncodeError:  # a lone surrogate: the separate passes take it
                pass
            else:
                return self._from_hits(text, hits)
        rules = set(self.always)
        self._as_written.open_rules(text, rules)
        found = self._lowered.open_rules(lowered, rules)
        return sorted(rules), found, None

    def _from_hits(self, text: str, hits: list[Hit]) -> tuple[list[int], set[int], list[Hit]]:
        rules = set(self.always)
        found: set[int] = set()
        keyword_hits: list[Hit] = []
        roles, users = self._roles, self._lowered.users
        for k, start, end in hits:
            lit, written, ki = roles[k]
            if lit >= 0 and lit not in found:
                found.add(lit)
                rules.update(users[lit])
            for literal, literal_users in written:
                if text.startswith(literal, start):
                    rules.update(literal_users)
            if ki >= 0:
                keyword_hits.append((ki, start, end))
        return sorted(rules), found, keyword_hits

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


# The most alternatives a leading literal is spelled out into (`A(?:KIA|SIA|...)`, `gh[pousr]_`),
# and the most characters of a class spelled out: past them the literal stops where it is.
_MAX_SPELLED = 16
_MAX_CLASS = 8


def _alternatives(items: list[tuple[Any, Any]]) -> list[str] | None:
    found = _spelled(items)
    return found[0] if found else None


def _spelled(items: list[tuple[Any, Any]]) -> tuple[list[str], bool] | None:
    """The literals the matches of `items` start with (each non-empty), and whether they are the
    whole of every match (so what follows the group may be appended); None when a match may
    start with anything else."""
    if len(items) == 1 and items[0][0] is sre_constants.BRANCH:
        out: list[str] = []
        complete = True
        for branch in items[0][1][1]:
            found = _sequence(list(branch))
            if found is None or not all(found[0]):
                return None
            out += found[0]
            complete = complete and found[1]
        return out, complete
    found = _sequence(items)
    return found if found is not None and all(found[0]) else None


def _choices(op: Any, av: Any) -> tuple[list[str], bool] | None:
    """What one item of a sequence may read, spelled out: its strings and whether they are the
    whole item; None when it is no short choice of literals."""
    if op is sre_constants.LITERAL:
        return [chr(av)], True
    if op is sre_constants.IN:
        if any(kind is not sre_constants.LITERAL for kind, _ in av) or len(av) > _MAX_CLASS:
            return None  # a range, a negation, a category, or too many to spell out
        return [chr(c) for _, c in av], True
    if op is sre_constants.BRANCH:
        return _spelled([(op, av)])
    if op is sre_constants.SUBPATTERN:
        _group, add_flags, _del_flags, sub = av
        if add_flags & re.IGNORECASE:
            return None
        return _spelled(list(sub))
    if op is sre_constants.MAX_REPEAT or op is sre_constants.MIN_REPEAT:
        low, high, sub = av
        found = _sequence(list(sub))
        if low == 0 and high == 1 and found is not None and found[1]:
            return ["", *found[0]], True  # `s?`: absent, or there whole
    return None


def _sequence(items: list[tuple[Any, Any]]) -> tuple[list[str], bool] | None:
    """The literals the matches of a sequence start with: the product of its items' choices up to
    the first item that is none (or would spell out too many); None when the first is none."""
    prefixes = [""]
    for op, av in items:
        found = _choices(op, av)
        if found is None or len(prefixes) * len(found[0]) > _MAX_SPELLED:
            return (prefixes, False) if any(prefixes) else None
        prefixes = [p + c for p in prefixes for c in found[0]]
        if not found[1]:
            return prefixes, False
    return prefixes, True


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
