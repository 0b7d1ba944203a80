"""Redaction with a digest-keyed cache: every untrusted string passes here on its way
into a prompt, and a warm re-assembly should not rescan text it has already seen."""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Any

from cardloop.prompts.card import Message
from cardloop.prompts.redact import DEFAULT_REDACTOR, Redactor
from cardloop.prompts.tokens import digest


def redact_text(text: str) -> str:
    """One text through the default redactor, without a cache: for the odd title or URL that
    goes to a terminal, a log or the Temporal UI rather than into a prompt."""
    return DEFAULT_REDACTOR.redact(text).text if text else text


class Found(Counter[str]):
    """The redaction rules that fired, counted, and the item each fired in (`where`: item ->
    rule -> count), for explain's "which item held each secret". Callers name the item they
    are about to scrub with `in_item`; a plain Counter still works and just keeps no items."""

    def __init__(self) -> None:
        dict.__init__(self)  # empty: Counter.__init__ would go through update() to add nothing
        self.item = "other"
        self.where: dict[str, Counter[str]] = {}

    def update(self, iterable: Any = None, /, **kwds: int) -> None:  # type: ignore[override]
        fired = Counter(iterable or ()) if not isinstance(iterable, Found) else Counter(dict(iterable))
        super().update(fired, **kwds)
        if isinstance(iterable, Found):  # a cached sub-result that named its own items
            for item, rules in iterable.where.items():
                self.where.setdefault(item, Counter()).update(rules)
        elif fired:
            self.where.setdefault(self.item, Counter()).update(fired)

    def items_list(self) -> list[dict[str, Any]]:
        """[{"item", "rule", "count"}], in the order the items were met."""
        return [{"item": item, "rule": rule, "count": n} for item, rules in self.where.items()
                for rule, n in sorted(rules.items())]


def in_item(found: Counter[str] | None, item: str) -> None:
    """Name the item the next redactions belong to (no-op unless `found` is a Found)."""
    if isinstance(found, Found):
        found.item = item


class Scrubber:
    """Redacts with a cache of the redacted texts, keyed by digest, least recently used out first.

    Bounded by entries and by the characters it holds: by entries alone, a worker that redacted
    many cards' build logs kept every log's redacted copy (50,000 of them). A text larger than a
    sixteenth of `max_chars` is redacted every time, not cached: it would push out everything
    else, and a log is redacted once per context fit, which has its own cache."""

    def __init__(self, redactor: Redactor = DEFAULT_REDACTOR, *, max_entries: int = 50_000,
                 max_chars: int = 32_000_000) -> None:
        if max_entries < 1 or max_chars < 0:
            raise ValueError(f"Scrubber: max_entries ({max_entries}) must be >= 1 and max_chars ({max_chars}) >= 0")
        self._redactor = redactor
        self._cache: OrderedDict[bytes, tuple[str, tuple[str, ...]]] = OrderedDict()
        self._max_entries = max_entries
        self._max_chars = max_chars
        self._max_cached = max_chars // 16
        self.chars = 0  # the redacted texts' characters the cache holds
        self.evictions = 0  # entries pushed out by a bound: nonzero once the cache is full

    def scrub(self, text: str, found: Counter[str] | None = None) -> str:
        """Redacted text; rules that fired are added to `found`."""
        if not text:
            return text
        if len(text) > self._max_cached:
            result = self._redactor.redact(text)
            if found is not None:
                found.update(f.rule for f in result.findings)
            return result.text
        key = digest(text)
        hit = self._cache.get(key)
        if hit is None:
            result = self._redactor.redact(text)
            hit = (result.text, tuple(f.rule for f in result.findings))
            self._cache[key] = hit
            self.chars += len(hit[0])
            cache = self._cache
            while len(cache) > self._max_entries or self.chars > self._max_chars:
                self.chars -= len(cache.popitem(last=False)[1][0])
                self.evictions += 1
        else:
            self._cache.move_to_end(key)
        if found is not None:
            found.update(hit[1])
        return hit[0]

    def scrub_value(self, value: Any, found: Counter[str] | None = None) -> Any:
        """A JSON-like value (a tool call's input) with every string redacted, keys included."""
        if isinstance(value, str):
            return self.scrub(value, found)
        if isinstance(value, dict):
            return {self.scrub(str(k), found): self.scrub_value(v, found) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub_value(v, found) for v in value]
        return value

    def scrub_message(self, message: Message, found: Counter[str] | None = None) -> Message:
        """`message` with every text a prompt or transcript shows redacted: content, author, ids,
        tool names and tool inputs (a secret passed to a tool is still a secret)."""
        # Tool calls first: the order the rules are met in is the order explain lists them.
        calls = tuple(call.model_copy(update={"id": self.scrub(call.id, found), "name": self.scrub(call.name, found),
                                              "input": self.scrub_value(call.input, found)})
                      for call in message.tool_calls)
        content = self.scrub(message.content, found)
        author = self.scrub(message.author, found) if message.author else message.author
        id_ = self.scrub(message.id, found) if message.id else message.id
        call_id = self.scrub(message.tool_call_id, found) if message.tool_call_id else message.tool_call_id
        if (not calls and content == message.content and author == message.author and id_ == message.id
                and call_id == message.tool_call_id):
            return message  # nothing redacted (nearly always): the model is frozen, a copy would be equal
        return message.model_copy(update={
            "content": content, "author": author, "id": id_, "tool_call_id": call_id, "tool_calls": calls,
        })
