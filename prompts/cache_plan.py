"""Where a prompt's cache breakpoints go, and why: the provider caches exact prefixes.

Anthropic reads from its cache only at a `cache_control` breakpoint whose exact prefix (tools,
system, messages up to that block) was written before, caches nothing shorter than the model's
minimum, and takes at most four breakpoints. Prefix caching elsewhere (OpenAI-compatible
servers, Gemini) is automatic but needs the same thing: an unchanged prefix from turn to turn.
The assembler therefore keeps everything that changes per turn at the end, and marks:

    system    the end of system + agent: the same for every turn and run of a stage
    fold      the folded-history block: unchanged until the history passes its budget again
    context   a stage run's context: unchanged for the whole run
    previous  the end of what the previous turn sent: read from the cache
    last      the end of the history: written for the next turn

A mark whose prefix is under the minimum is dropped (it would only use a slot); over four,
the least useful go first (context, then fold: a hit on `previous` covers them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from cardloop.prompts.conversation import SystemBlock, Turn
from cardloop.prompts.tokens import TokenCounter

MAX_BREAKPOINTS = 4
# Which marks survive when there are more than MAX_BREAKPOINTS, best first.
PRIORITY = ("system", "previous", "last", "fold", "context")
STABLE_FOR = {
    "system": "every turn and run of the stage",
    "fold": "until the history passes its budget again (the next fold step)",
    "context": "the whole stage run",
    "previous": "read: the prefix the previous turn wrote",
    "last": "written: the prefix the next turn starts with",
}


@dataclass(frozen=True, slots=True)
class CacheMark:
    kind: str            # one of PRIORITY
    block: str           # "system" or "message N" (1-based, as sent)
    prefix_tokens: int   # tokens up to and including the block
    status: str          # breakpoint | below minimum | over the limit

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "block": self.block, "prefix_tokens": self.prefix_tokens,
                "status": self.status, "stable_for": STABLE_FOR[self.kind]}


def plan_cache(system: tuple[SystemBlock, ...], turns: list[Turn], costs: Sequence[int], marks: dict[int, str], *,
               prefix_tokens: int, counter: TokenCounter, overhead: int, min_tokens: int,
               system_costs: Sequence[int] | None = None,
               ) -> tuple[tuple[SystemBlock, ...], list[Turn], tuple[CacheMark, ...]]:
    """Set the cache flags: `marks` maps turn indexes to a kind; the end of `system` is always a
    candidate. `costs` are the turns' token counts (as the assembly charged them); `prefix_tokens`
    is what precedes the system blocks (tool definitions); `system_costs`, when the caller has
    them, each system block's count with its overhead (0 for an empty one), as counted here."""
    candidates: list[tuple[str, int | None, int]] = []  # (kind, turn index or None, prefix tokens)
    if system_costs is None:
        system_costs = [counter.count(b.text) + overhead if b.text else 0 for b in system]
    total = prefix_tokens + sum(system_costs)
    if any(b.text for b in system):
        candidates.append(("system", None, total))
    for i in range(max(marks, default=-1) + 1):
        total += costs[i]
        if i in marks:
            candidates.append((marks[i], i, total))
    usable = [c for c in candidates if c[2] >= min_tokens]
    kept = {c[1] if c[1] is not None else -1
            for c in sorted(usable, key=lambda c: PRIORITY.index(c[0]))[:MAX_BREAKPOINTS]}
    report: list[CacheMark] = []
    for kind, index, tokens in candidates:
        where = -1 if index is None else index
        status = ("breakpoint" if where in kept
                  else "below minimum" if tokens < min_tokens else "over the limit")
        report.append(CacheMark(kind, "system" if index is None else f"message {index + 1}", tokens, status))
    # Only the last non-empty system block carries the system breakpoint.
    last_system = max((i for i, b in enumerate(system) if b.text), default=-1)
    system = tuple(b if b.cache == (i == last_system and -1 in kept)
                   else dataclasses.replace(b, cache=(i == last_system and -1 in kept)) for i, b in enumerate(system))
    turns = [t if t.cache == (i in kept) else dataclasses.replace(t, cache=i in kept) for i, t in enumerate(turns)]
    return system, turns, tuple(report)

