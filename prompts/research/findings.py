"""The analyst's findings: the JSON shape, a lenient reader, and the merge the synthesizer
works from (relevance none dropped, ordered by relevance then chunk id, recurring findings
kept once with how often they recur).

The shape, one object per chunk read:

    {"chunk_id": int, "relevance": "high|medium|low|none", "findings": [str],
     "summary": str|null, "follow_up": [str]}

Lenient because models wrap JSON in prose or code fences, send one object instead of a list,
or a list under a key; strict where it matters: a chunk id the analyst was not given is
dropped (a model must not cite chunks it never read), unknown keys are ignored, and every
string is cut to a bound so one reply cannot flood the synthesizer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Relevance = Literal["high", "medium", "low", "none"]
RELEVANCE_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2, "none": 3}
MAX_FINDING_CHARS = 600
MAX_FINDINGS_PER_CHUNK = 12
MAX_FOLLOW_UPS = 5


def _clip(text: str, limit: int) -> str:
    # Inner whitespace is kept as it is: an exact error string ("FATAL:  remaining ...") must
    # reach the report byte for byte. Only the ends are trimmed.
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ChunkFindings(BaseModel):
    """One analyst verdict on one chunk (validated; extra keys ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    chunk_id: int = Field(ge=0)
    relevance: Relevance
    findings: tuple[str, ...] = ()
    summary: str | None = None
    follow_up: tuple[str, ...] = ()

    @field_validator("relevance", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("findings", "follow_up", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list | tuple):
            # Only strings are findings: a nested object (a forged tool call, say) is dropped.
            return tuple(v for v in value if isinstance(v, str) and v.strip())
        return value

    @field_validator("findings")
    @classmethod
    def _bound_findings(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_clip(v, MAX_FINDING_CHARS) for v in value[:MAX_FINDINGS_PER_CHUNK])

    @field_validator("follow_up")
    @classmethod
    def _bound_follow_ups(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_clip(v, 300) for v in value[:MAX_FOLLOW_UPS])

    @field_validator("summary")
    @classmethod
    def _bound_summary(cls, value: str | None) -> str | None:
        return _clip(value, 1_000) if value and value.strip() else None


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def _json_candidates(text: str) -> Iterable[Any]:
    """Every JSON value the reply may hold: the whole text, fenced blocks, then the widest
    [...] and {...} spans, then one object per line (JSON lines)."""
    stripped = text.strip()
    pieces = [stripped, *(m.group(1) for m in _FENCE.finditer(text))]
    for open_, close in (("[", "]"), ("{", "}")):
        a, b = stripped.find(open_), stripped.rfind(close)
        if 0 <= a < b:
            pieces.append(stripped[a: b + 1])
    for piece in pieces:
        try:
            yield json.loads(piece)
        except ValueError:
            continue
    lines = [json_line for json_line in stripped.splitlines() if json_line.strip().startswith("{")]
    if lines:
        objects = []
        for line in lines:
            try:
                objects.append(json.loads(line))
            except ValueError:
                continue
        if objects:
            yield objects


def _objects(value: Any) -> list[Any]:
    if isinstance(value, dict):
        for key in ("chunks", "results", "findings_by_chunk", "analyses"):
            if isinstance(value.get(key), list):
                return list(value[key])
        return [value]
    if isinstance(value, list):
        return list(value)
    return []


def parse_findings(text: str, chunk_ids: Sequence[int]) -> list[ChunkFindings] | None:
    """The valid verdicts in an analyst reply for the chunks it was given, one per chunk id
    (the first wins); None when the reply holds no valid verdict at all (malformed)."""
    allowed = set(chunk_ids)
    for candidate in _json_candidates(text):
        found: dict[int, ChunkFindings] = {}
        for obj in _objects(candidate):
            if not isinstance(obj, dict):
                continue
            if "chunk_id" not in obj and len(allowed) == 1:
                obj = {**obj, "chunk_id": next(iter(allowed))}
            try:
                verdict = ChunkFindings.model_validate(obj)
            except ValidationError:
                continue
            if verdict.chunk_id in allowed and verdict.chunk_id not in found:
                found[verdict.chunk_id] = verdict
        if found:
            return [found[i] for i in chunk_ids if i in found]
    return None


def parse_queries(text: str, limit: int) -> list[str]:
    """Search queries from the planner's reply: a JSON list (or {"queries": [...]}) when it
    sent one, else one query per non-empty line, bullets and numbering stripped."""
    queries: list[str] = []
    for candidate in _json_candidates(text):
        items = candidate.get("queries") if isinstance(candidate, dict) else candidate
        if isinstance(items, list):
            queries = [q for q in items if isinstance(q, str)]
            break
    if not queries:
        queries = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line) for line in text.splitlines()]
    out: list[str] = []
    for q in queries:
        q = " ".join(q.split())[:200]
        if q and q.lower() not in {o.lower() for o in out}:
            out.append(q)
    return out[:limit]


@dataclass(frozen=True, slots=True)
class MergedFinding:
    """A finding as the synthesizer sees it: its text, how many chunks reported it, the best
    relevance it was given, and the chunks (for provenance; never shown as citations)."""

    text: str
    relevance: str
    count: int
    chunk_ids: tuple[int, ...]


def _norm(text: str) -> str:
    # Recurring = the same words, whatever the case, spacing, or trailing punctuation.
    return re.sub(r"[\s.;,:]+$", "", " ".join(text.lower().split()))


def merge_findings(verdicts: Iterable[ChunkFindings]) -> tuple[list[ChunkFindings], list[MergedFinding]]:
    """(verdicts without `none`, ordered by relevance then chunk id; the findings deduplicated,
    in the order of their first appearance in that ordering, with their frequency)."""
    kept = sorted((v for v in verdicts if v.relevance != "none"),
                  key=lambda v: (RELEVANCE_ORDER[v.relevance], v.chunk_id))
    merged: dict[str, MergedFinding] = {}
    for v in kept:
        for text in v.findings:
            key = _norm(text)
            if not key:
                continue
            seen = merged.get(key)
            if seen is None:
                merged[key] = MergedFinding(text, v.relevance, 1, (v.chunk_id,))
            elif v.chunk_id not in seen.chunk_ids:
                best = min(seen.relevance, v.relevance, key=RELEVANCE_ORDER.__getitem__)
                merged[key] = MergedFinding(seen.text, best, seen.count + 1, (*seen.chunk_ids, v.chunk_id))
    return kept, list(merged.values())
