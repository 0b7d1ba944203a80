"""Log lines that a sender cannot forge.

What the API logs often carries a sender's text (a field name in a validation message, a
column, a delivery id, a request path). A newline in it would start what looks like a log line
of its own; a bidi control would reorder what an operator reads. Every record of a logger made
here has its message escaped once it is formatted: control and format characters (C0, C1, DEL,
bidi, zero-width, surrogates, line and paragraph separators) and the backslash become Python
escapes, so one call is one line and an escape in the text cannot pass for one made here."""

from __future__ import annotations

import logging
import unicodedata

_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _escape(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape_controls(text: str) -> str:
    """`text` with every control/format character and backslash written as an escape."""
    if text.isprintable() and "\\" not in text:
        return text  # the common case: nothing to do
    return "".join(_escape(ch) if ch == "\\" or unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch
                   for ch in text)


class EscapeControls(logging.Filter):
    """Rewrites each record's message, arguments merged, with escape_controls. The traceback of
    an exception is left alone: its frames are ours, and it is rendered by the handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = escape_controls(message)
        if escaped != message:
            record.msg, record.args = escaped, None
        return True


def safe_logger(name: str) -> logging.Logger:
    """logging.getLogger(name) with EscapeControls on it (once)."""
    log = logging.getLogger(name)
    if not any(isinstance(f, EscapeControls) for f in log.filters):
        log.addFilter(EscapeControls())
    return log
