"""Letters that render like Latin ones, shared by the pattern validator (validate.fold) and the
injection classifier's normalizer: one table, so both layers undo the same disguises."""

from __future__ import annotations

# Letters that render like Latin ones. Applied after NFKD and casefold, so one lowercase
# entry covers both cases; Greek capitals whose lowercase looks different come first.
UPPER_LOOKALIKES = {
    "Α": "a", "Β": "b", "Ε": "e", "Ζ": "z", "Η": "h", "Ι": "i", "Κ": "k", "Μ": "m",
    "Ν": "n", "Ο": "o", "Ρ": "p", "Τ": "t", "Υ": "y", "Χ": "x",
}
LOOKALIKES = {
    # Cyrillic
    "а": "a", "в": "b", "г": "r", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o",
    "п": "n", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ь": "b",
    # Greek
    "α": "a", "β": "b", "γ": "y", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v",
    "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ϲ": "c", "ϳ": "j",
    # Armenian
    "օ": "o", "ս": "u", "ո": "n", "հ": "h", "ց": "g", "զ": "q",
    # Latin variants NFKD leaves alone: dotless i, small capitals, script a / g
    "ı": "i", "ȷ": "j", "ɑ": "a", "ɡ": "g", "ɪ": "i", "ʟ": "l", "ʀ": "r", "ᴀ": "a",
    "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ɢ": "g", "ʜ": "h", "ᴊ": "j", "ᴋ": "k",
    "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ꜱ": "s", "ᴛ": "t", "ᴜ": "u", "ᴠ": "v",
    "ᴡ": "w", "ʏ": "y", "ᴢ": "z",
}
