"""What a redaction rule is: the pattern, the part that is the secret, and how the redactor
finds its candidates cheaply (see prompts/redact.py for the scan)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from cardloop.prompts.lazy_pattern import Pattern

Validator = Callable[[re.Match[str]], bool]
# Spans of secrets in a text, and how many characters finding them read; called with the text
# and its same-length lowercase, which the redactor has made already for its anchors.
Finder = Callable[[str, str], tuple[list[tuple[int, int]], int]]


@dataclass(frozen=True)
class RedactionRule:
    r"""One family of secrets.

    `group` names the part of a match that is the secret (0: the whole match); only that
    span is replaced. `validator` gets each match and returns False to skip it (an entropy
    or shape check).

    How the rule finds candidates:
    - plain: `pattern.finditer` over the text (start the pattern with a literal);
    - `keywords` (lowercase substrings): as plain, but only when one of them occurs in the
      lowercased text;
    - `anchors` (patterns over the LOWERCASED text, run with `finditer`; start each with a
      literal): the rule is not scanned; `pattern.match` is tried once at the start of each
      identifier (`[A-Za-z0-9_.-]+`) that holds an anchor hit, so `pattern` must start
      there (at the hit itself when that is no identifier character). An anchor must cost
      linear time under `finditer` (see `_key_anchor`).

    Keeping it linear when the secret's length is bounded in `pattern` (`{1,500}`):
    - `tail` (a character class such as `[^&\s#]`): the characters the secret is made of.
      When the character right after a matched secret is one of them, the bound cut the
      secret short, and the span is extended to the end of that run, so a longer secret is
      still replaced whole. A validator sees the bounded match.
    - `tail_over` (with `tail`): a pattern of one separator the secret's run may go on over when a
      `tail` character follows it (an unquoted password's `;` or `(`), each step bounded (a
      lookahead of at most a constant number of characters): the run is then `tail` characters
      and such separators.
    - `reach` (anchored rules): a promise that a match starting at an identifier `[s, e)`
      (or at a hit `s = e` outside identifiers) with `a <= s` and `e + reach < b`, where
      `[a, b)` is a secret span this rule accepted, lies inside `[a, b)` too. Such a
      candidate is skipped without matching: "token=token=token=..." is one value, read
      once.

    `finder` (with `keywords`): a function that finds the rule's spans itself, for secrets that
    only their place in a structure tells (a Kubernetes Secret's `stringData` values, under any
    key, over several lines), which one match cannot hold; `pattern` then only documents it.
    """

    name: str
    pattern: Pattern  # compiled, or a LazyPattern the redactor compiles when a text first opens the rule
    group: int | str = 0
    validator: Validator | None = None
    keywords: tuple[str, ...] = ()
    anchors: tuple[Pattern, ...] = ()
    tail: str = ""
    tail_over: str = ""
    reach: int | None = None
    finder: Finder | None = None
    # Its matches span lines (a YAML block under its key): skipped on a text without a newline
    # before its last character, such as one log line, where it could only cost time.
    multiline: bool = False

    def __post_init__(self) -> None:
        if any(k != k.lower() or not k for k in self.keywords):
            raise ValueError(f"rule {self.name!r}: keywords are non-empty and lowercase")
        if any(a.flags & re.IGNORECASE for a in self.anchors):
            raise ValueError(f"rule {self.name!r}: anchors run on lowercased text; "
                             "write them in lowercase instead of IGNORECASE")
        if self.tail and not _ONE_CLASS.fullmatch(self.tail):
            raise ValueError(f"rule {self.name!r}: tail is one character class, e.g. [^\\s]")
        if self.tail_over and not self.tail:
            raise ValueError(f"rule {self.name!r}: tail_over goes with a tail")
        if self.finder is not None and (not self.keywords or self.anchors or self.validator):
            raise ValueError(f"rule {self.name!r}: a finder is gated by keywords, and takes "
                             "no anchors or validator")
        if self.reach is not None and (self.reach < 0 or not self.anchors):
            raise ValueError(f"rule {self.name!r}: reach is a non-negative distance "
                             "for an anchored rule")


# One bracketed character class with no nested brackets but escaped ones: `[^&\s#'"<>]`.
_ONE_CLASS = re.compile(r"\[\^?\]?(?:[^\[\]\\]|\\.)*\]")
