"""The end of a private key whose BEGIN line is not in the text: a log's tail (`kubectl logs
--tail`, the last bytes of a build log), an excerpt window or a chunk that starts inside the
key. The private-key rule starts at `-----BEGIN`, so such a text kept every line of the key's
body; here each `-----END ... PRIVATE KEY-----` line takes with it the lines of base64 right
above it (each line's last field, so a timestamp or a log prefix before it does not stop the
walk), up to the first line that is not one."""

from __future__ import annotations

import re

PEM_END = re.compile(r"-----END[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----")
# A key body line's last field: 16 or more base64 characters (PEM lines are 64).
_BODY = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
# Encrypted PEM headers between BEGIN and the body ("Proc-Type: 4,ENCRYPTED", "DEK-Info: ...").
_HEADER = re.compile(r"[ \t]*(?:Proc-Type|DEK-Info):")
MAX_LINES = 200  # an 8192-bit RSA key is about 100 lines of 64


def _body_start(line: str) -> int:
    """Where the line's last field starts when it is a run of base64 (a body line), else -1."""
    stripped = line.rstrip()
    field = stripped.rsplit(None, 1)[-1] if stripped else ""
    return len(stripped) - len(field) if _BODY.fullmatch(field) else -1


def headless_keys(text: str) -> tuple[list[tuple[int, int]], int]:
    """(start, end) of each END line with the key body above it when no BEGIN line opens it
    (a block with its BEGIN is the private-key rule's), and the characters read. Linear: the
    walk up from an END stops at the first line that is not a body line (an END line is not),
    and a second END on a line already walked is not walked again."""
    spans: list[tuple[int, int]] = []
    read = 0
    if "PRIVATE KEY" not in text:
        return spans, read
    line_end = -1  # where the line of the last END walked from ends
    for m in PEM_END.finditer(text):
        if m.start() < line_end:
            continue  # the line of the last END: walked already
        # Found once for the line (not by looking back from each END on it, which read the line
        # again for every END on it: quadratic on a line of many END markers).
        line_end = text.find("\n", m.end())
        line_end = len(text) if line_end < 0 else line_end
        line_start = text.rfind("\n", 0, m.start()) + 1
        read += m.start() - line_start
        if "-----BEGIN" in text[line_start:m.start()]:
            continue  # BEGIN and END on one line: the private-key rule's
        start, pos = -1, line_start
        for _ in range(MAX_LINES):
            if pos == 0:
                break
            prev = text.rfind("\n", 0, pos - 1) + 1
            line = text[prev:pos - 1]
            read += len(line) + 1
            if "-----BEGIN" in line:
                start = -1  # the private-key rule covers this block whole
                break
            body = _body_start(line)
            if body >= 0:
                start = prev + body
            elif start < 0 or not _HEADER.match(line):
                break
            pos = prev
        if start >= 0:
            spans.append((start, m.end()))
    return spans, read
