"""The text the injection classifier reads: disguises undone, hidden payloads decoded.

An attack in a disguise is the same attack; a classifier trained on plain text only sees it if
the disguise is removed first. In order:

- invisible characters (zero-width, bidi, BOM, soft hyphen, variation selectors) removed and
  Unicode tag characters, which models read but people cannot see, turned back into ASCII;
- NFKC (fullwidth, mathematical letters, ligatures) and casefold;
- look-alike letters (Cyrillic "а", Greek "ο"...) mapped to Latin inside words that also hold
  Latin letters, so a Russian or Greek prompt stays Russian or Greek;
- leetspeak ("1gn0r3", "h4x0r") read as letters inside words that hold both;
- letter spacing ("i g n o r e", "i.g.n.o.r.e") joined;
- the few words after a negation ("never reveal your system prompt", "do not refuse") marked
  with NEGATED, so "reveal" under "never" is a word of its own: a guardrail a tenant adds names
  the attack it forbids, and without the mark the two read alike;
- base64, base32, base85, hex, binary, \\u escapes, Morse and percent-encoding decoded, and ROT13
  and reversed text read back when they turn into more common words than the text had: each
  decoded text is appended after a marker word, so the classifier weighs what is hidden as well
  as the request to decode it. (The encodings are garak's "encoding" probe's common ones.)

Pure: no I/O, no clock; a few regex passes, well under a millisecond for a typical prompt.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
from functools import lru_cache
from urllib.parse import unquote

from cardloop.prompts.lookalikes import LOOKALIKES, UPPER_LOOKALIKES

MAX_DECODED = 8  # hidden payloads decoded per text: enough for any real prompt, bounded for a hostile one
DECODED_MARKER = " zzdecoded "  # a word no language has: the model learns "something was hidden"

_TAGS = range(0xE0020, 0xE007F)
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s",
                       "|": "l", "!": "i", "+": "t"})
_LEET_WORD = re.compile(r"(?<!\S)(?=\S*[a-z])(?=\S*[013457@$|!+])[a-z013457@$|!+]{3,}(?!\S)")
_NAME_NUMBER = re.compile(r"[a-z]+[0-9]+")  # python3, rot13, sha256: a name and a number, not leetspeak
_SPACED = re.compile(r"(?<![^\W_])(?:[^\W\d_][ .\-_*]){3,}[^\W\d_](?![^\W_])")
_LATIN = re.compile(r"[a-z]")
_WORD = re.compile(r"\w+")
_B64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:[0-9a-fA-F]{2}[ :]?){8,}(?![0-9A-Za-z])|(?:\\x[0-9a-fA-F]{2}){6,}")
_BIN = re.compile(r"(?<![01])(?:[01]{8}[ ]?){4,}(?![01])")
_PERCENT = re.compile(r"(?:%[0-9a-fA-F]{2}){3,}")
_B32 = re.compile(r"(?<![A-Z2-7=])[A-Z2-7]{16,}=*(?![A-Za-z0-9=])")
# Ascii85 between its "<~" and "~>" delimiters, or a bare run of its characters. The wrapped
# form is found with str.find (_b85_bodies): as the regex `<~(.{10,}?)~>` every "<~" without a
# "~>" after it scanned to the end of the text (20,000 characters of "<~" took 2.2 s).
_B85_RUN = re.compile(r"(?<!\S)[!-u]{20,}(?!\S)")
_UESC = re.compile(r"(?:\\u[0-9a-fA-F]{4}){4,}")
_MORSE = re.compile(r"(?<![.\-/])(?:[.\-]{1,7}[ /]+){5,}[.\-]{1,7}(?![.\-])")
_MORSE_CODE = {
    ".-": "a", "-...": "b", "-.-.": "c", "-..": "d", ".": "e", "..-.": "f", "--.": "g", "....": "h", "..": "i",
    ".---": "j", "-.-": "k", ".-..": "l", "--": "m", "-.": "n", "---": "o", ".--.": "p", "--.-": "q", ".-.": "r",
    "...": "s", "-": "t", "..-": "u", "...-": "v", ".--": "w", "-..-": "x", "-.--": "y", "--..": "z",
    "-----": "0", ".----": "1", "..---": "2", "...--": "3", "....-": "4", ".....": "5", "-....": "6",
    "--...": "7", "---..": "8", "----.": "9",
}
# The commonest short words of the languages the corpora hold: ROT13 or reversed text that turns
# into more of these than it had is read back; ordinary text never gains any by either.
_COMMON_WORDS = (
    "the and to of a in is you your all this that it for be with on as are do not me my instructions "
    "previous ignore system prompt any what now from der die und das ist nicht du le la les et de vous "
    "el los y que en il di che non")
_COMMON = frozenset(_COMMON_WORDS.split())


def _common(text: str) -> int:
    return sum(w in _COMMON for w in re.findall(r"[a-z]+", text.lower()))


@lru_cache(maxsize=8192)
def _invisible(ch: str) -> bool:
    if ch in "\t\n":
        return False
    cp = ord(ch)
    return unicodedata.category(ch) in ("Cf", "Cc") or 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF


_ASCII_CONTROLS = {c: None for c in [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F]}


def _visible(text: str) -> str:
    if text.isascii():  # the common case: only control characters to drop, in C
        return text.translate(_ASCII_CONTROLS)
    out = []
    for ch in text:
        cp = ord(ch)
        if cp in _TAGS:
            out.append(chr(cp - 0xE0000))
        elif cp < 0x80 or not _invisible(ch):
            if cp < 0x20 and ch not in "\t\n":
                continue
            out.append(ch)
    return "".join(out)


def _delookalike(match: re.Match[str]) -> str:
    word = match.group(0)
    if word.isascii() or not _LATIN.search(word):
        return word  # all Latin, or a word of another script: leave it as written
    return "".join(LOOKALIKES.get(c, c) for c in word)


NEGATED = "¬"
NEGATION_SCOPE = 4  # words: a negation governs its verb phrase, not the rest of the sentence
_NEGATION = re.compile(
    r"(?<!\w)(?:never|not|no|don't|dont|doesn't|didn't|cannot|can't|won't|mustn't|shouldn't|refuse to|refuse"
    r"|decline|avoid|forbidden to|nicht|nie|niemals|kein|keine|ne|n'|jamais|nunca|non|mai|asla|не|никогда)"
    r"(?!\w)")
# `\n?\Z` rather than `$` (the same match, said explicitly): the trained model's features were
# computed with a word's closing punctuation counted before a final newline too.
_SCOPE_END = re.compile(r"[.,;:!?)\]]\n?\Z")


def _mark_negations(text: str) -> str:
    words = text.split(" ")
    out: list[str] = []
    left = 0
    for w in words:
        if left and w:
            out.append(NEGATED + w)
            left = 0 if _SCOPE_END.search(w) else left - 1
            continue
        out.append(w)
        if _NEGATION.fullmatch(w.rstrip(".,;:!?")) and not _SCOPE_END.search(w):
            left = NEGATION_SCOPE
    return " ".join(out)


def _printable(raw: bytes) -> str | None:
    """`raw` as text when it reads as text (decoded base64 of an image does not)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 4:
        return None
    letters = sum(c.isalpha() or c == " " for c in text)
    return text if letters >= 0.7 * len(text) and " " in text.strip() else None


def _b85_bodies(text: str) -> list[str]:
    """What `<~(.{10,}?)~>|(?<!\\S)[!-u]{20,}(?!\\S)` (DOTALL) finds, in order, as finditer's
    group 1 or whole match: at each place the wrapped form first, which needs the first "~>"
    at least 10 characters after its "<~"; the bare run cannot start at a "<~" ("~" is not in
    it). A "<~" without such a "~>" means no later one has one either."""
    bodies: list[str] = []

    def wrapped_from(pos: int) -> tuple[int, int]:
        start = text.find("<~", pos)
        close = text.find("~>", start + 12) if start != -1 else -1
        return (start, close) if close != -1 else (-1, -1)

    wrapped, close = wrapped_from(0)
    run = _B85_RUN.search(text)
    while wrapped != -1 or run is not None:
        if wrapped != -1 and (run is None or wrapped < run.start()):
            bodies.append(text[wrapped + 2:close])
            pos = close + 2
            wrapped, close = wrapped_from(pos)
            if run is not None and run.start() < pos:
                run = _B85_RUN.search(text, pos)
        elif run is not None:
            # A run never holds a "<~": "~" is not one of its characters.
            bodies.append(run.group(0))
            run = _B85_RUN.search(text, run.end())
    return bodies


def _decoded(text: str) -> list[str]:
    found: list[str] = []
    for m in _B64.finditer(text):
        token = m.group(0)
        for alt in (token, token.replace("-", "+").replace("_", "/")):
            try:
                raw = base64.b64decode(alt + "=" * (-len(alt) % 4), validate=True)
            except (binascii.Error, ValueError):
                continue
            plain = _printable(raw)
            if plain:
                found.append(plain)
                break
    for m in _HEX.finditer(text):
        digits = re.sub(r"[^0-9a-fA-F]", "", m.group(0).replace("\\x", ""))
        plain = _printable(bytes.fromhex(digits[: len(digits) // 2 * 2]))
        if plain:
            found.append(plain)
    for m in _BIN.finditer(text):
        bits = m.group(0).replace(" ", "")
        plain = _printable(bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits) - 7, 8)))
        if plain:
            found.append(plain)
    for m in _PERCENT.finditer(text):
        plain = unquote(m.group(0))
        if plain != m.group(0) and len(plain.split()) >= 2:
            found.append(plain)
    for m in _B32.finditer(text):
        try:
            plain = _printable(base64.b32decode(m.group(0) + "=" * (-len(m.group(0)) % 8)))
        except (binascii.Error, ValueError):
            continue
        if plain:
            found.append(plain)
    for body in _b85_bodies(text):
        for decode in (base64.a85decode, base64.b85decode):
            try:
                plain = _printable(decode(body.encode("ascii", "ignore")))
            except (ValueError, binascii.Error):
                continue
            if plain:
                found.append(plain)
                break
    for m in _UESC.finditer(text):
        found.append("".join(chr(int(h, 16)) for h in re.findall(r"[0-9a-fA-F]{4}", m.group(0))))
    for m in _MORSE.finditer(text):
        words = [w.split() for w in re.split(r"\s*/\s*|\s{3,}", m.group(0).strip())]
        plain = " ".join("".join(_MORSE_CODE.get(c, "") for c in w) for w in words)
        if len(plain.replace(" ", "")) >= 4:
            found.append(plain)
    base = _common(text)
    for variant in (codecs.decode(text, "rot13"), text[::-1]):
        if _common(variant) >= max(3, 2 * base + 1):
            found.append(variant)
    return found[:MAX_DECODED]


def _surface(text: str) -> str:
    for upper, lower in UPPER_LOOKALIKES.items():
        text = text.replace(upper, lower)
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _WORD.sub(_delookalike, text)
    if not text.isascii():  # accents off ("é" reads as "e"); ASCII has none to take off
        text = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    text = _LEET_WORD.sub(lambda m: m.group(0) if _NAME_NUMBER.fullmatch(m.group(0)) else m.group(0).translate(_LEET),
                          text)
    text = _SPACED.sub(lambda m: re.sub(r"[ .\-_*]", "", m.group(0)), text)
    return _mark_negations(" ".join(text.split()))


def normalize(text: str) -> str:
    """The classifier's view of `text`: lowercase, one space between words, disguises undone,
    and each decoded hidden payload appended after DECODED_MARKER."""
    visible = _visible(text)
    parts = [_surface(visible)]
    for hidden in _decoded(unicodedata.normalize("NFKC", visible)):
        parts.append(DECODED_MARKER.strip())
        parts.append(_surface(_visible(hidden)))
    return " ".join(parts)
