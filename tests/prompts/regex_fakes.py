"""Strings generated from a regular expression: a fake secret of exactly the shape a rule
describes, for every gitleaks rule, without writing a single one by hand."""

from __future__ import annotations

import random
import re
import string
from re import _constants as c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

# Characters a class or category may yield; a class also takes what it lists itself.
_ASCII = [chr(i) for i in range(32, 127)]
_CATEGORIES = {
    c.CATEGORY_DIGIT: string.digits,
    c.CATEGORY_NOT_DIGIT: string.ascii_letters,
    c.CATEGORY_SPACE: " ",
    c.CATEGORY_NOT_SPACE: string.ascii_letters + string.digits,
    c.CATEGORY_WORD: string.ascii_letters + string.digits + "_",
    c.CATEGORY_NOT_WORD: " ",
}
# How many times an unbounded repeat repeats (past its minimum).
_UNBOUNDED_EXTRA = 8


def _class_chars(items: list[tuple[object, object]], rng: random.Random) -> list[str]:
    negate = any(op is c.NEGATE for op, _ in items)
    chars: set[str] = set()
    for op, av in items:
        if op is c.LITERAL:
            chars.add(chr(av))  # type: ignore[arg-type]
        elif op is c.RANGE:
            lo, hi = av  # type: ignore[misc]
            chars.update(chr(i) for i in range(lo, min(hi, 126) + 1))
        elif op is c.CATEGORY:
            chars.update(_CATEGORIES[av])
    if negate:
        chars = {ch for ch in string.ascii_letters + string.digits + " ,;:/" if ch not in chars}
    return sorted(chars)


def _emit(tokens: sre_parse.SubPattern, rng: random.Random, out: list[str], groups: dict[int, str],
          *, ignorecase: bool) -> None:
    for op, av in tokens:
        if op is c.LITERAL:
            out.append(chr(av))
        elif op is c.NOT_LITERAL:
            out.append(rng.choice([ch for ch in string.ascii_letters + string.digits if ch != chr(av)]))
        elif op is c.ANY:  # in these rules mostly an unescaped dot in a host name
            out.append(".")
        elif op is c.IN:
            chars = _class_chars(av, rng)
            # A class that allows a space is a separator in these rules: keep it readable.
            out.append(" " if " " in chars else rng.choice(chars))
        elif op is c.CATEGORY:
            out.append(rng.choice(_CATEGORIES[av]))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            lo, hi, body = av
            if hi is c.MAXREPEAT:
                hi = lo + _UNBOUNDED_EXTRA
            # A lazy repeat in front of a keyword is a prefix: none. Otherwise a length in range.
            count = lo if op is c.MIN_REPEAT else rng.randint(lo, max(lo, min(hi, lo + 3)))
            for _ in range(count):
                _emit(body, rng, out, groups, ignorecase=ignorecase)
        elif op is c.SUBPATTERN:
            group, add_flags, _del_flags, body = av
            start = len("".join(out))
            _emit(body, rng, out, groups, ignorecase=ignorecase or bool(add_flags & re.IGNORECASE))
            if group:
                groups[group] = "".join(out)[start:]
        elif op is c.BRANCH:
            _, branches = av
            # The first branch that does not end the text (`$`, `\z`) and consumes something.
            choices = [b for b in branches if not (len(b) == 1 and b[0][0] is c.AT)] or branches
            _emit(rng.choice(choices), rng, out, groups, ignorecase=ignorecase)
        elif op is c.GROUPREF:
            out.append(groups.get(av, ""))
        elif op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            continue
        else:
            raise ValueError(f"cannot generate from {op}")


def generate(pattern: re.Pattern[str], seed: int) -> str:
    """A string that `pattern` may match (check with the pattern: lookarounds are not honoured)."""
    rng = random.Random(seed)
    out: list[str] = []
    _emit(sre_parse.parse(pattern.pattern, pattern.flags), rng, out, {}, ignorecase=False)
    return "".join(out)
