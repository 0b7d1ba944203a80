"""Structural isolation of untrusted text.

Untrusted text (card bodies, comments, logs, files, tool output, summaries) goes into a
tagged block whose provenance sits in attributes:

    <untrusted kind="build_log" source="github-actions run 42">
    ...text...
    </untrusted>

The system prompt says such blocks are data, never instructions. That only holds if the
text cannot end the block early or forge one of our own blocks, so `neutralize` defangs
every tag-like occurrence of a reserved tag name: its "<" becomes "‹" (U+2039), which a
model reads the same way but no longer as our markup. Everything else (`a < b`, `<div>`,
`List<String>`) is left untouched, so code and logs stay readable and byte-identical.

Redaction is a separate step: callers redact the text (and any provenance that could carry
a secret, such as a URL with a token) before wrapping it.
"""

from __future__ import annotations

import re

RESERVED_TAGS: tuple[str, ...] = (
    "untrusted",
    "card",
    "conversation_summary",
    "pinned_facts",
    "promise",
    "context",
    "system",
    "instructions",
    "turn",
    "stage",
    "tool_result",
    "tool_use",
    # The synthesizer's block of analysts' findings (prompts/research/synthesis.py).
    "findings",
    # Turn markers of the chat templates prompts/formats renders (Gemma); ChatML's
    # <|im_start|> family is covered by the special-token pattern below.
    "start_of_turn",
    "end_of_turn",
    "bos",
    "eos",
)

SAFE_LT = "\u2039"  # ‹

# Characters a model may read as "<": ASCII, fullwidth, small form variant.
_LT = "<\uff1c\ufe64"
# Invisible characters that could sit between "<", "/" and the name without changing how
# a model reads the tag: whitespace plus zero-width and other format characters.
# Possessive (`*+`): what follows a gap (a slash, a name) is never a gap character, so giving
# characters back cannot make a match. Backtracking over the two gaps around the optional slash
# was quadratic in a gap's length: "<" and 25,000 spaces took 100 s.
_GAP = r"[\s\u00ad\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]*+"
_SLASH = "/\uff0f\u2044\u2215"  # solidus, fullwidth, fraction slash, division slash

_NAMES = "|".join(sorted((re.escape(t) for t in RESERVED_TAGS if t != "untrusted"),
                         key=len, reverse=True))
_TAG = re.compile(
    rf"[{_LT}](?="
    rf"{_GAP}[{_SLASH}]?{_GAP}"
    # "untrusted" is ours whatever follows, so the text never holds "<untrusted" at all.
    rf"(?:untrusted|(?:{_NAMES})"
    # Other names must end there: "<cardinal>", "<card_id>", "<card-list>", XML's
    # "<card:x>" and JSX's "<Context.Provider>" are not our tags.
    r"(?![\w.:\-]))"
    # ChatML-style special tokens: <|im_start|>, <|endoftext|>.
    r"|\|[A-Za-z_][\w.\-]{0,40}\|)",
    re.IGNORECASE,
)

_ATTR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Escaped in attribute values: markup characters, quotes, and every control or line
# separator, so a value stays one line inside one quoted attribute.
_ATTR_ESCAPE = re.compile(r"[&<>\"'\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}


def neutralize(text: str) -> str:
    """`text` with the "<" of every reserved tag (opening or closing, any case, with
    whitespace or zero-width characters inside, with or without ">") replaced by "‹".

    Idempotent: the replacement is not a "<", so a second pass finds nothing new.
    """
    # Every match starts with one of _LT's characters: a text without any (most chat messages)
    # is returned after three str scans, cheaper than the regex engine's walk over it.
    if "<" not in text and "\uff1c" not in text and "\ufe64" not in text:
        return text
    return _TAG.sub(SAFE_LT, text)


def _escape_attr(value: str) -> str:
    return _ATTR_ESCAPE.sub(lambda m: _NAMED.get(m[0]) or f"&#{ord(m[0])};", value)


def untrusted_frame(*, kind: str, source: str, **attrs: str | None) -> tuple[str, str]:
    """The exact (opening line with its "\\n", "\\n" + closing tag) that `wrap_untrusted`
    puts around the neutralized text, so callers can count their tokens separately.

    Attributes with value None are left out; names must be ASCII identifiers (ValueError
    otherwise). Values are escaped, so provenance cannot break out of the tag.
    """
    pairs: list[tuple[str, object]] = [("kind", kind), ("source", source), *attrs.items()]
    parts = ["<untrusted"]
    for name, value in pairs:
        if not _ATTR_NAME.fullmatch(name):
            raise ValueError(f"attribute name {name!r} is not an identifier")
        if value is None:
            continue
        parts.append(f' {name}="{_escape_attr(str(value))}"')
    return "".join(parts) + ">\n", "\n</untrusted>"


def wrap_untrusted(text: str, *, kind: str, source: str, **attrs: str | None) -> str:
    """`text`, neutralized, inside an <untrusted> block that carries its provenance."""
    opening, closing = untrusted_frame(kind=kind, source=source, **attrs)
    return opening + neutralize(text) + closing
