"""What `explain` reports: one row per layer, section or item, in assembly order."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal[
    "used", "overridden", "absent", "rejected", "cut", "dropped",
    "verbatim", "folded", "summarized", "truncated", "pinned", "excluded",
]


@dataclass(frozen=True, slots=True)
class ExplainRow:
    section: str  # system | agent | tools | history | context | turn
    name: str
    source: str
    status: Status
    tokens: int
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def format_rows(rows: list[ExplainRow], *, width: int = 100) -> str:
    """A plain-text table, long reasons wrapped under their row."""
    headers = ("section", "layer / item", "status", "tokens", "source")
    table = [(r.section, r.name, r.status, f"{r.tokens:,}", r.source) for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(headers)]
    widths[1] = min(widths[1], 40)
    widths[4] = min(widths[4], 60)

    def line(cells: tuple[str, ...]) -> str:
        out = []
        for i, cell in enumerate(cells):
            text = cell if len(cell) <= widths[i] else cell[: widths[i] - 1] + "…"
            out.append(text.rjust(widths[i]) if i == 3 else text.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [line(headers), line(tuple("-" * w for w in widths))]
    for row, cells in zip(rows, table, strict=True):
        lines.append(line(cells))
        if row.reason:
            lines.append(" " * (widths[0] + 2) + "↳ " + row.reason)
    return "\n".join(lines)
