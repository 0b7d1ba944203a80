"""gitleaks' patterns are Go (RE2) regular expressions: their translation to Python's `re`, and
what a pattern says about where its matches start (used to try a rule only at its keywords).

Go's syntax differs from Python's in a few places: `(?i)` in the middle of a pattern (scoped
to the rest of its group, alternatives after it included), `\\z`, `$` (Go: the end of the text
only, never before a final newline), `[` inside a class and POSIX classes. Compile the result
with re.ASCII: Go's `\\w`, `\\s`, `\\d` and `\\b` are ASCII.
"""

from __future__ import annotations

import re

_POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "lower": "a-z", "upper": "A-Z",
          "space": r"\t\n\v\f\r ", "xdigit": "0-9A-Fa-f", "word": r"\w", "punct": r"!-/:-@\[-`{-~"}
_FLAGS_AT = re.compile(r"\(\?([a-zA-Z]+)\)")


def translate(go: str) -> str:
    """A Go (RE2) pattern as a Python `re` pattern with the same meaning (compile with re.ASCII)."""
    out: list[str] = []
    # Per open group: how many scoped-flag groups `(?i:` we opened inside it (closed with it).
    depth_scoped: list[int] = [0]
    pending: list[list[str]] = [[]]  # per open group: the flags of those scoped groups, to reopen
    i, n = 0, len(go)
    while i < n:
        c = go[i]
        if c == "\\":
            esc = go[i:i + 2]
            out.append(r"\Z" if esc == r"\z" else esc)
            i += 2
            continue
        if c == "[":
            j, cls = i + 1, ["["]
            if j < n and go[j] == "^":
                cls.append("^")
                j += 1
            if j < n and go[j] == "]":
                cls.append(r"\]")
                j += 1
            while j < n and go[j] != "]":
                if go[j] == "\\":
                    cls.append(go[j:j + 2])
                    j += 2
                elif go.startswith("[:", j):
                    end = go.index(":]", j)
                    cls.append(_POSIX[go[j + 2:end]])
                    j = end + 2
                elif go[j] in "[&~|":
                    cls.append("\\" + go[j])
                    j += 1
                else:
                    cls.append(go[j])
                    j += 1
            cls.append("]")
            out.append("".join(cls))
            i = j + 1
            continue
        flags = _FLAGS_AT.match(go, i)
        if flags:
            if i == 0:
                out.append(flags.group(0))
            else:  # scoped to the rest of the enclosing group, as in Go
                out.append(f"(?{flags.group(1)}:")
                depth_scoped[-1] += 1
                pending[-1].append(flags.group(1))
            i = flags.end()
            continue
        if c == "(":
            depth_scoped.append(0)
            pending.append([])
            out.append(c)
        elif c == ")":
            out.append(")" * depth_scoped.pop())
            pending.pop()
            out.append(c)
        elif c == "|":
            # Go's flags hold for the later alternatives too: close and reopen around `|`.
            out.append(")" * depth_scoped[-1] + "|" + "".join(f"(?{f}:" for f in pending[-1]))
        elif c == "$":
            out.append(r"\Z")
        else:
            out.append(c)
        i += 1
    out.append(")" * depth_scoped[0])
    return "".join(out)


# Where a match of the pattern can only start at its keyword: optional flags, `\b`, group
# openings and gitleaks' lazy identifier prefix `[\w.-]{0,50}?`, then a literal or a group of
# literal alternatives that begins with the keyword.
_SKIP = re.compile(r"(?:\(\?i\)|\\b|\(\?:|\(\?-?i:|\((?!\?)|\[\\w\.-\]\{0,50\}\?)*")
# `[Ee]`: one letter in either case, a literal letter to a keyword search (which is lowercase).
_CASE_PAIR = re.compile(r"\[([A-Za-z])([A-Za-z])\]")
_LITERAL = re.compile(r"(?:[A-Za-z0-9_~\-]|\\[.\-_~])+")


def _literal(fragment: str) -> str:
    """The literal text a fragment must start with (lowercase); a character made optional or
    repeated by a quantifier right after it is not part of it."""
    fragment = _CASE_PAIR.sub(lambda m: m.group(1) if m.group(1).lower() == m.group(2).lower() else m.group(0),
                              fragment)
    m = _LITERAL.match(fragment)
    if not m:
        return ""
    literal = m.group(0)
    if fragment[m.end():m.end() + 1] in ("?", "*", "{"):
        literal = literal[:-2] if literal.endswith(("\\.", "\\-", "\\_", "\\~")) else literal[:-1]
    return literal.replace("\\", "").lower()


def _alternatives(rest: str) -> list[str]:
    """The top-level alternatives of the group `rest` starts inside of (up to its `)`)."""
    alts, depth, start, i = [], 0, 0, 0
    while i < len(rest):
        c = rest[i]
        if c == "\\":
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                break
            depth -= 1
        elif c == "|" and depth == 0:
            alts.append(rest[start:i])
            start = i + 1
        i += 1
    alts.append(rest[start:i])
    return alts


# gitleaks' generic rules start with a lazy identifier prefix, `[\w.-]{0,50}?`, sometimes twice
# (`[\w.-]{0,50}?(?i:[\w.-]{0,50}?(?:okta)...`). It may match nothing, so it changes where a
# match starts, never whether there is one nor its secret; dropped, a search tries one thing
# per position instead of fifty.
_LAZY_PREFIX = re.compile(r"^((?:\(\?i\))?)((?:\[\\w\.-\]\{0,50\}\?)+)(\(\?i:)?((?:\[\\w\.-\]\{0,50\}\?)*)")


def drop_lazy_prefix(go: str) -> str:
    m = _LAZY_PREFIX.match(go)
    return go if m is None else m.group(1) + (m.group(3) or "") + go[m.end():]


def anchored_keywords(go: str, keywords: tuple[str, ...]) -> frozenset[str]:
    """The rule's keywords when every match starts with one of them (so one `match` at each
    keyword hit finds every match); empty when some match may start elsewhere."""
    rest = go[_SKIP.match(go).end():]  # type: ignore[union-attr]
    heads = [_literal(a) for a in _alternatives(rest)]
    # A keyword may be longer than the literal (`linked[_-]?in`: `linked`, keyword `linkedin`).
    if heads and all(h and any(h.startswith(k) or k.startswith(h) for k in keywords) for h in heads):
        return frozenset(keywords)
    return frozenset()
