"""Reading the completion signal out of a model reply.

Only a tag outside code fences counts: a reply that quotes the protocol in a code sample
has not finished. The last tag wins (a reply may mention COMPLETE before deciding BLOCKED)."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_PROMISE = re.compile(r"<promise>\s*(COMPLETE|BLOCKED)\s*</promise>", re.IGNORECASE)


def read_promise(text: str) -> tuple[str | None, str]:
    """(None | "COMPLETE" | "BLOCKED", reason). The reason of BLOCKED is the text after the
    tag, else the paragraph before it."""
    outside = _FENCE.sub(lambda m: " " * len(m.group(0)), text)
    matches = list(_PROMISE.finditer(outside))
    if not matches:
        return None, ""
    last = matches[-1]
    kind = last.group(1).upper()
    if kind == "COMPLETE":
        return "COMPLETE", ""
    after = text[last.end():].strip()
    if not after:
        before = text[: last.start()].rstrip()
        after = before.rsplit("\n\n", 1)[-1].strip()
    return "BLOCKED", (after or "no reason given")[:500]
