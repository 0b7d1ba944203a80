"""Translation tables: a credential word's key whose value is that word in another language.

An i18n file maps UI string ids to text (`{"password": "Passwort", "forgot": "Passwort
vergessen?"}`, Rails' `de.yml`, a JS `messages` object). Its `password` entry is a label, not a
secret, and a quoted value under a credential noun is otherwise redacted whatever its shape
(`"password": "Sunshine"` in a config is a password). What tells the two apart is the map around
the value: a table of UI strings holds phrases (words apart by spaces) as its other values, and a
config's values (hosts, users, ports, paths) are no phrases. So a value that is one natural-language
word (letters only, a capital at most at its start) stays when at least `_MIN_PHRASES` other entries
within `_WINDOW` characters of it are phrases. A dictionary-word password in a config next to two
prose descriptions is kept too: that is the price, and a random or mixed password never qualifies.
"""

from __future__ import annotations

import re

# How far around the value to look for the table's other entries (bounded: linear per candidate).
_WINDOW = 400
_MIN_PHRASES = 2
# An entry whose value is a phrase: at a line's start or after `,` / `{`, a key (maybe quoted), `:`,
# then two words of letters apart by spaces (`forgot: Passwort vergessen?`, `"title": "Mot de passe"`).
# Blanks may stand before a closing quote: the redactor reads JSON inside a JSON string
# (`{\"forgot\": \"Passwort vergessen?\"}`, a tool result or a stored prompt) with each escaping
# backslash as a space (prompts/redact.py, `_unescaped_same_length`), so `"forgot "` ends its key.
_PHRASE_ENTRY = re.compile(
    r"(?:^|[,{])[ \t]*[\"']?[A-Za-z_][\w.\-]{0,80}(?:[ \t]*[\"'])?[ \t]*:[ \t]*[\"']?"
    "[\u00bf\u00a1\u00ab\u201e\u201c]?"  # a sentence's opening mark: `¿Olvidaste tu contraseña?`
    r"[^\W\d_]{2,}[ \t]+[^\W\d_]{2,}",
    re.MULTILINE,
)
_WORD_MARKS = str.maketrans("", "", "-'\u2019")


def is_natural_word(value: str) -> bool:
    """One word as a language writes it: letters (any script, `-` or an apostrophe inside), a
    capital at most at its start (`Passwort`, `contraseña`, `Kennwort`, `パスワード`)."""
    letters = value.translate(_WORD_MARKS)
    return letters.isalpha() and value[1:] == value[1:].lower()


def in_translation_table(text: str, start: int, end: int) -> bool:
    """The value at `text[start:end]` stands among entries of UI phrases (see the module doc)."""
    lo, hi = max(0, start - _WINDOW), min(len(text), end + _WINDOW)
    phrases = 0
    for m in _PHRASE_ENTRY.finditer(text, lo, hi):
        if m.end() <= start or m.start() >= end:  # another entry, not the value's own
            phrases += 1
            if phrases >= _MIN_PHRASES:
                return True
    return False
