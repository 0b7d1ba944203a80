"""gitleaks' provider formats (about 200 of them) as redaction rules.

Source: gitleaks' default configuration, vendored unchanged in prompts/gitleaks.toml (its
header names the upstream version, where the copy came from and the license). It is loaded
at import from its translated form computed ahead (prompts/rules_precomputed.py, written by
prompts/precompute_rules.py; parsed again when the file no longer matches it), and each pattern
is compiled when a text first holds its keyword; nothing here reads the network, the clock or
the environment.

How a gitleaks rule is used, as gitleaks uses it:
- the rule is tried only where one of its `keywords` occurs in the lowercased text;
- the secret is the rule's `secretGroup`, else the first non-empty group, else the match; only
  that span is replaced, and gitleaks' formats consume the whole token;
- `entropy`: a secret whose Shannon entropy is at most this is skipped;
- the global allowlist (placeholders such as `${VAR}`, `true`, paths) and each rule's own
  allowlists (regexes on the secret, the match or the line; stopwords) drop a finding.
Not used: rules that need a file path (we redact text, not files) and `generic-api-key`, whose
job our own generic-assignment and context rules do with a value-shape check tuned for source
code (SKIPPED_BY_DESIGN; the skipped rules and why: redact.GITLEAKS_SKIPPED).

Patterns are Go (RE2) regular expressions, translated to Python's `re` by prompts/go_regex.py.

How it stays fast: one Aho-Corasick pass over the lowercased text finds every keyword at once
(`ahocorasick_rs`, in C speed); a rule whose pattern starts at its keyword (most of them:
`ghp_...`, `(?:sendgrid)...` once gitleaks' lazy `[\\w.-]{0,50}?` prefix is dropped) is tried
with one `match` at each keyword hit; the others are searched in a window around each hit
(merged windows, each character read once per rule). A match that reaches a window's end is
matched again against the whole text, so a window never cuts a secret short. A rule that reads
on through a line (gitleaks' curl rules) is tried once per line of hits, or `curl curl ...`
would be read once per hit: quadratic.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources

import ahocorasick_rs

from cardloop.prompts import rules_precomputed
from cardloop.prompts.go_regex import anchored_keywords, drop_lazy_prefix, translate
from cardloop.prompts.lazy_pattern import LazyPattern, Pattern, compiled
from cardloop.prompts.secret_values import shannon_entropy

GITLEAKS_VERSION = "8.30.1"
RULES_FILE = "gitleaks.toml"

# The most characters a match of a windowed rule may start before its keyword, and how far
# after the keyword a window reaches (a match reaching that end is matched again in full).
WINDOW_BEFORE = 256
WINDOW_AFTER = 1024
# A rule with more than one keyword hit per this many characters is scanned whole instead.
DENSE_HITS = 32

SKIPPED_BY_DESIGN = {
    "generic-api-key": "values next to credential words are decided by our generic-assignment "
                       "and context rules (prompts/secret_table.py), tuned against source code",
}


@dataclass(frozen=True)
class Allowlist:
    """One of gitleaks' allowlists: drops a finding whose target matches (OR) or matches on every
    given check (AND). Paths are never known here, so an AND list with paths never drops."""

    target: str  # "secret", "match" or "line"
    regexes: tuple[Pattern, ...]
    stopwords: tuple[str, ...]
    require_all: bool
    has_paths: bool

    @functools.cached_property
    def _compiled(self) -> tuple[re.Pattern[str], ...]:
        return tuple(compiled(r) for r in self.regexes)  # on the first finding checked against them

    def allows(self, secret: str, match: str, line: str) -> bool:
        subject = {"secret": secret, "match": match, "line": line}[self.target]
        checks: list[bool] = []
        if self.regexes:
            checks.append(any(r.search(subject) for r in self._compiled))
        if self.stopwords:
            low = secret.lower()
            checks.append(any(w in low for w in self.stopwords))
        if self.require_all:
            return bool(checks) and not self.has_paths and all(checks)
        return any(checks)


@dataclass(frozen=True)
class GitleaksRule:
    name: str           # our marker name: the gitleaks id, prefixed when it collides with ours
    upstream_id: str
    regex: str          # translated to Python's syntax; compiled on first use (`pattern`)
    secret_group: int   # 0: the first non-empty group, else the whole match
    entropy: float
    keywords: tuple[str, ...]
    anchored: frozenset[str]  # keywords where a match starts (tried with one `match`)
    # The pattern reads on through a line (`.*`): a failed try at a hit fails at every later hit
    # of that line too, which are then skipped (`curl curl curl ...` is read once, not once per hit).
    per_line: bool
    allowlists: tuple[Allowlist, ...]

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        # Most rules never see their keyword in a given process: compiling all 200 at import
        # would cost every command line start 25 ms.
        return re.compile(self.regex, re.ASCII)

    def secret_span(self, m: re.Match[str]) -> tuple[int, int]:
        if self.secret_group:
            return m.span(self.secret_group)
        for i in range(1, (m.re.groups or 0) + 1):
            if m.group(i):
                return m.span(i)
        return m.span()


# --------------------------------------------------------------------------- loading

def _allowlist(spec: dict[str, object]) -> Allowlist:
    # Compiled on first use: only a finding is checked against them.
    regexes = tuple(LazyPattern(translate(r), re.ASCII) for r in spec.get("regexes", ()))  # type: ignore[union-attr]
    return Allowlist(
        target=str(spec.get("regexTarget", "secret")),
        regexes=regexes,
        stopwords=tuple(w.lower() for w in spec.get("stopwords", ())),  # type: ignore[union-attr]
        require_all=str(spec.get("condition", "OR")).upper() == "AND",
        has_paths=bool(spec.get("paths")),
    )


def load(toml_text: str, *, reserved: frozenset[str] = frozenset()) -> tuple[tuple[GitleaksRule, ...], dict[str, str]]:
    """The usable rules of a gitleaks config, and the skipped ones with the reason. A rule id in
    `reserved` (one of our own rule names) becomes `gitleaks-<id>`."""
    import tomllib  # only when the rules are not precomputed: 2 ms of every import

    config = tomllib.loads(toml_text)
    global_allow = _allowlist(config.get("allowlist", {}))
    rules: list[GitleaksRule] = []
    skipped: dict[str, str] = {}
    for spec in config["rules"]:
        rid = spec["id"]
        if rid in SKIPPED_BY_DESIGN:
            skipped[rid] = SKIPPED_BY_DESIGN[rid]
            continue
        if "path" in spec or "regex" not in spec:
            skipped[rid] = "needs a file path: we redact text, not files"
            continue
        keywords = tuple(dict.fromkeys(k.lower() for k in spec.get("keywords", ())))
        if not keywords:
            skipped[rid] = "no keywords to find it by"
            continue
        rules.append(GitleaksRule(
            name=f"gitleaks-{rid}" if rid in reserved else rid,
            upstream_id=rid,
            regex=translate(drop_lazy_prefix(_markup_ends_a_token(spec["regex"]))),
            secret_group=int(spec.get("secretGroup", 0)),
            entropy=float(spec.get("entropy", 0.0)),
            keywords=keywords,
            anchored=anchored_keywords(drop_lazy_prefix(_markup_ends_a_token(spec["regex"])), keywords),
            per_line=".*" in spec["regex"],
            allowlists=(global_allow, *(_allowlist(a) for a in spec.get("allowlists", ()))),
        ))
    return tuple(rules), skipped


# gitleaks' usual end of a token: a quote, whitespace, `;`, an escaped newline or the end. In
# XML and HTML a token's text ends at the next tag (`<token>hf_...</token>`), which upstream's
# class leaves out, so a provider token in a settings.xml or a SOAP body was missed: `<` ends
# a token too; so does `}`, the end of a placeholder whose default it is (`${KEY:-LTAI...}`).
# The token's own body is unchanged (the formats consume the whole token).
_GITLEAKS_END = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
_OUR_END = r"""(?:[\x60'"\s;<}]|\\[nr]|$)"""


def _markup_ends_a_token(regex: str) -> str:
    return regex.replace(_GITLEAKS_END, _OUR_END)


# --------------------------------------------------------------------------- scanning

_SURROGATE = re.compile("[\ud800-\udfff]")


class GitleaksScanner:
    """Every rule's secrets in a text: (start, end, rule index) with offsets into the text."""

    def __init__(self, rules: tuple[GitleaksRule, ...]) -> None:
        self.rules = rules
        keywords = sorted({k for r in rules for k in r.keywords})
        self._keywords = keywords
        self.keywords = tuple(keywords)
        index = {k: i for i, k in enumerate(keywords)}
        # keyword index -> ((rule index, anchored), ...)
        users: list[list[tuple[int, bool]]] = [[] for _ in keywords]
        for ri, r in enumerate(rules):
            for k in r.keywords:
                users[index[k]].append((ri, k in r.anchored))
        self._users = tuple(tuple(u) for u in users)
        self._ac = ahocorasick_rs.AhoCorasick(keywords) if keywords else None

    def scan(self, text: str, lowered: str, hits: list[tuple[int, int, int]] | None = None,
             ) -> tuple[list[tuple[int, int, int]], int, int]:
        """(candidates, keyword hits, characters matched or searched). `hits`: every hit of
        `keywords` in `lowered` (index, start, end), when another pass listed them already
        (prompts/rule_gates.py does for a short text)."""
        if self._ac is None or not text:
            return [], 0, 0
        if hits is None:
            try:
                hits = self._ac.find_matches_as_indexes(lowered, overlapping=True)
            except UnicodeEncodeError:  # lone surrogates: same length, no keyword inside them
                hits = self._ac.find_matches_as_indexes(_SURROGATE.sub("\ufffd", lowered), overlapping=True)
        if not hits:
            return [], 0, 0
        # Positions by keyword first (one append per hit), then handed to the keyword's rules a
        # list at a time: a step per hit and rule cost twice as much on text dense with keywords
        # ("keykeykey...": 280,000 hits). Rules and their positions come out in the same order.
        by_keyword: defaultdict[int, list[int]] = defaultdict(list)
        for ki, s, _e in hits:
            by_keyword[ki].append(s)
        starts: dict[int, list[int]] = {}
        windows: dict[int, list[int]] = {}
        users = self._users
        for ki, positions in by_keyword.items():
            for ri, anchored in users[ki]:
                into = starts if anchored else windows
                if ri in into:
                    into[ri].extend(positions)
                else:
                    into[ri] = list(positions)
        found: list[tuple[int, int, int]] = []
        work = 0
        for ri, positions in starts.items():
            work += self._at(ri, text, positions, found)
        for ri, positions in windows.items():
            work += self._around(ri, text, positions, found)
        return found, len(hits), work

    def _accept(self, ri: int, m: re.Match[str], found: list[tuple[int, int, int]]) -> None:
        rule = self.rules[ri]
        start, end = rule.secret_span(m)
        if start >= end:
            return
        secret = m.string[start:end]
        if rule.entropy and shannon_entropy(secret) <= rule.entropy:
            return
        text = m.string
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line = text[line_start:line_end if line_end >= 0 else len(text)]
        if any(a.allows(secret, m.group(0), line) for a in rule.allowlists):
            return
        found.append((start, end, ri))

    def _at(self, ri: int, text: str, positions: list[int], found: list[tuple[int, int, int]]) -> int:
        rule = self.rules[ri]
        if len(positions) * DENSE_HITS > len(text) and not rule.per_line:
            # Hits everywhere (`ey` in "keykeykey...", `s.` in prose): one scan in C costs less
            # than a Python step per hit, and finds the same matches, as each starts at a hit.
            work = len(text)
            for m in rule.pattern.finditer(text):
                if m.end() > m.start():
                    work += m.end() - m.start()
                    self._accept(ri, m, found)
            return work
        match = rule.pattern.match
        covered = -1
        work = 0
        for p in sorted(set(positions)):
            if p < covered:
                continue
            m = match(text, p)
            work += 1
            if m is not None and m.end() > m.start():
                work += m.end() - m.start()
                self._accept(ri, m, found)
                covered = m.end()
            elif rule.per_line:
                line_end = text.find("\n", p)
                covered = line_end if line_end >= 0 else len(text)
                work += covered - p
        return work

    def _around(self, ri: int, text: str, positions: list[int], found: list[tuple[int, int, int]]) -> int:
        pattern = self.rules[ri].pattern
        n = len(text)
        work = 0
        merged: list[list[int]] = []
        for p in sorted(positions):
            lo, hi = max(0, p - WINDOW_BEFORE), min(n, p + WINDOW_AFTER)
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        resume = 0
        for lo, hi in merged:
            pos = max(lo, resume)
            work += max(0, hi - pos)
            while pos < hi:
                m = pattern.search(text, pos, hi)
                if m is None:
                    break
                if m.end() >= hi and hi < n:
                    m = pattern.match(text, m.start())  # the window may have cut it short
                    if m is None:
                        pos += 1
                        continue
                if m.end() > m.start():
                    work += m.end() - m.start()
                    self._accept(ri, m, found)
                pos = max(m.end(), pos + 1)
                resume = max(resume, m.end())
        return work


def rules_bytes() -> bytes:
    return resources.files("cardloop.prompts").joinpath(RULES_FILE).read_bytes()


def _rules_text() -> str:
    return rules_bytes().decode("utf-8")


def load_default(reserved: frozenset[str]) -> tuple[tuple[GitleaksRule, ...], dict[str, str]]:
    """`load` of the vendored rules: from their form computed ahead (prompts/rules_precomputed.py,
    no TOML parse or Go translation at import) while it was made from this very file for these
    reserved names, else parsed."""
    data = rules_bytes()
    pre = rules_precomputed
    if zlib.crc32(data) != pre.GITLEAKS_CRC or reserved != frozenset(pre.RESERVED):
        return load(data.decode("utf-8"), reserved=reserved)
    allowlists = [Allowlist(target, tuple(LazyPattern(r, re.ASCII) for r in regexes), stopwords, require_all,
                            has_paths)
                  for target, regexes, stopwords, require_all, has_paths in pre.ALLOWLISTS]
    rules = tuple(
        GitleaksRule(name, upstream_id, regex, secret_group, entropy, keywords, frozenset(anchored), per_line,
                     tuple(allowlists[i] for i in indexes))
        for name, upstream_id, regex, secret_group, entropy, keywords, anchored, per_line, indexes in pre.RULES)
    return rules, dict(pre.SKIPPED)
