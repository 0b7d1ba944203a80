"""Fitting a card's chat history into its token budget.

Within budget the history goes in verbatim. Over budget it is folded:

    [first user request] [summary of the folded middle + pinned facts] [recent tail]

The tail is about half the budget; the first request is kept verbatim unless it is huge.
An assistant message with tool calls and the tool results answering them form one unit
that is kept or folded whole, never split. The folded middle goes to an injected
summarizer (RLM summarization in the service); when there is none, or it fails, the
history is truncated to the most recent units that fit, newest first, and `explain`
says so. Pinned facts (error lines, file paths, commands found in the folded messages)
survive folding verbatim in a small block of their own, in both cases.
"""

from __future__ import annotations

import itertools
import math
import re
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import cast

from cardloop.prompts.card import Message
from cardloop.prompts.conversation import ToolOutput, ToolUse, Turn
from cardloop.prompts.explain import ExplainRow
from cardloop.prompts.isolate import neutralize, wrap_untrusted
from cardloop.prompts.log_errors import may_have_errors
from cardloop.prompts.logs import excerpt_log, excerpt_text, find_error_lines
from cardloop.prompts.scrub import Scrubber, in_item
from cardloop.prompts.settings import HistorySettings
from cardloop.prompts.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class FoldRequest:
    """What a summarizer is asked to condense: history[first:last+1], already redacted."""

    messages: tuple[Message, ...]
    first: int
    last: int
    max_tokens: int


@dataclass(frozen=True, slots=True)
class Fold:
    """A fold the fit needed and could not make: summarize history[first:last+1] into at most
    max_tokens, then assemble again."""

    first: int
    last: int
    max_tokens: int


# The summary text, or None when there is none for this range yet (the service only looks up
# summaries while assembling; a missing one is made by its own activity, then it assembles again).
# Raising is a failure: the fit truncates either way.
Summarizer = Callable[[FoldRequest], str | None]


@dataclass(frozen=True, slots=True)
class HistoryFit:
    turns: tuple[Turn, ...]
    tokens: int
    mode: str  # verbatim | summarized | truncated | empty
    rows: tuple[ExplainRow, ...]
    folded: tuple[int, int] | None = None  # inclusive message index range folded away
    fold_needed: Fold | None = None         # the summarizer had no summary for this fold yet
    # The index of the first message of the verbatim tail: turns[-(n - tail_from):] are
    # messages tail_from..n-1 in order (n = the number of messages fitted).
    tail_from: int = 0
    # Each turn's token count (what the fit charged for it), parallel to `turns`.
    costs: tuple[int, ...] = ()


def render_message(message: Message, text: str) -> Turn:
    """A history message as a provider-neutral turn; people's and tools' text is isolated.

    Tool calls and results stay structural (each provider renders them natively); a result's
    text is still wrapped as untrusted data, inside the provider's tool_result."""
    if message.role == "assistant":
        calls = tuple(ToolUse(c.id, c.name, c.input) for c in message.tool_calls)
        return Turn("assistant", neutralize(text) if text else "", tool_calls=calls)
    if message.role == "tool":
        assert message.tool_call_id is not None  # Message's validator
        wrapped = wrap_untrusted(text, kind="tool_result", source="tool", call=message.tool_call_id, id=message.id)
        return Turn("user", "", tool_results=(ToolOutput(message.tool_call_id, wrapped, message.is_error),))
    return Turn("user", wrap_untrusted(
        text, kind="comment", source="board", author=message.author, id=message.id,
        at=message.created_at.isoformat() if message.created_at else None,
    ))


INTERRUPTED = ("[{name} call {id}: no result: it was interrupted (its stage was cancelled, moved on or failed, "
               "or its worker was lost) and did not finish]")


def has_tools(messages: Sequence[Message]) -> bool:
    """Whether any message calls a tool or holds a tool's result: one pass (not one per question),
    reading the fields from the models' dicts; it runs over every message of every assembly."""
    for m in messages:
        f = m.__dict__
        if f["tool_calls"] or f["role"] == "tool":
            return True
    return False


def settle_tool_calls(messages: Sequence[Message]) -> Sequence[Message]:
    """The history as the providers accept it, index for index: a tool call no result answers (the
    stage was cancelled, moved on or failed while it ran) becomes a line of the assistant's text,
    and a result whose call is not in the history becomes a user message. Either would make every
    later request a 400 ("tool_use ids were found without tool_result blocks"), the card stuck.
    Nothing moves, so message indices (and the fold's ranges over the store) stay as they are."""
    if not has_tools(messages):
        return messages
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    called: set[str] = set()
    out: list[Message] = []
    for m in messages:
        if m.tool_calls:
            lost = [c for c in m.tool_calls if c.id not in answered]
            if lost:
                notes = "\n".join(INTERRUPTED.format(name=c.name, id=c.id) for c in lost)
                m = Message(role="assistant", content=f"{m.content}\n\n{notes}".strip(), id=m.id, author=m.author,
                            created_at=m.created_at, tool_calls=tuple(c for c in m.tool_calls if c.id in answered))
            called.update(c.id for c in m.tool_calls)
        elif m.role == "tool" and m.tool_call_id not in called:
            m = Message(role="user", content=f"[the result of an earlier tool call {m.tool_call_id}]\n{m.content}",
                        id=m.id, author=m.author, created_at=m.created_at)
        out.append(m)
    return out


def results_after_calls(turns: Sequence[Turn], costs: Sequence[int]) -> tuple[list[Turn], list[int]]:
    """Each assistant turn's tool results right after it. A comment stored while a tool ran sits
    between the call and its result; the providers take only the call, then its results. Moves
    turns within a call's unit only (the fold keeps or folds a unit whole), costs with them."""
    if not any(t.tool_calls for t in turns):
        return list(turns), list(costs)
    given = bool(costs)
    turns, costs = list(turns), list(costs) if given else [0] * len(turns)
    out_t: list[Turn] = []
    out_c: list[int] = []
    taken: set[int] = set()
    for i, turn in enumerate(turns):
        if i in taken:
            continue
        out_t.append(turn)
        out_c.append(costs[i])
        waiting = {c.id for c in turn.tool_calls}
        j = i + 1
        while waiting and j < len(turns) and not turns[j].tool_calls:
            ids = {r.call_id for r in turns[j].tool_results}
            if ids and ids <= waiting:
                taken.add(j)
                out_t.append(turns[j])
                out_c.append(costs[j])
                waiting -= ids
            j += 1
    return out_t, out_c if given else []


def group_units(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Inclusive index ranges that must be kept or folded together."""
    if not has_tools(messages):  # the usual chat: every message is its own unit
        return [(i, i) for i in range(len(messages))]
    answer_at: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m.role == "tool" and m.tool_call_id is not None:
            answer_at[m.tool_call_id] = max(i, answer_at.get(m.tool_call_id, i))
    units: list[tuple[int, int]] = []
    i = 0
    while i < len(messages):
        end = i
        j = i
        while j <= end:  # a result inside the span may pull in its own later results
            end = max([end, *(answer_at.get(c.id, j) for c in messages[j].tool_calls)])
            j += 1
        units.append((i, end))
        i = end + 1
    return units


_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}(?::\d+)?(?![\w/])")
# The characters a _PATH match can hold ("\w" is exactly str.isalnum() or "_" in Python's re).
_PATH_CHARS = re.compile(r"[\w.:/-]*")
_PATH_RUN_MAX = 1_000


def find_paths(text: str) -> list[re.Match[str]]:
    """The matches of _PATH in `text`, in order: the regex run only over the runs of path
    characters that hold a slash. A match needs a slash and never crosses a run's edge, so the
    result is the same, and str.find skips the rest many times faster than the regex engine
    trying every position of a chat message."""
    found: list[re.Match[str]] = []
    pos = text.find("/")
    while pos != -1:
        start = pos
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.:/-"):
            start -= 1
            if pos - start > _PATH_RUN_MAX:  # a runaway run (a minified blob): the plain scan
                return list(_PATH.finditer(text))
        end = _PATH_CHARS.match(text, pos).end()  # type: ignore[union-attr]
        # endpos ends the string there: the lookahead then sees what the real next character
        # (not a path character) would give it.
        found.extend(_PATH.finditer(text, start, end))
        pos = text.find("/", end)
    return found


# `^[^\S\n]*`, not `^\s*`: a command's token is never whitespace, so a match can only start
# its token where the whitespace after a line start ends, and the last line start before it
# gives the same groups. `^\s*` crossed newlines: every line start of a run of blank lines
# walked to the run's end (32,000 newlines took 41 s).
_COMMAND = re.compile(
    r"^[^\S\n]*(?:\$|>>>|#\s*run:)\s+(.{3,200})$|"
    r"^[^\S\n]*((?:pytest|python|pip|uv|npm|npx|yarn|pnpm|go|cargo|make|git|kubectl|docker|ruff|mypy|tox|alembic)\s.{1,200})$",
    re.MULTILINE,
)


def extract_pinned_facts(messages: Sequence[Message], texts: Sequence[str]) -> dict[str, list[str]]:
    """Deterministic facts worth keeping verbatim when their messages are folded."""
    errors: dict[str, None] = {}
    paths: dict[str, None] = {}
    commands: dict[str, None] = {}
    for message, text in zip(messages, texts, strict=True):
        # Exact shortcuts: every error rule needs its gate, every path a slash (find_paths).
        if may_have_errors(text):
            lines = text.splitlines()
            for idx in find_error_lines(lines):
                line = lines[idx].strip()
                if 3 < len(line) <= 300:
                    errors[line] = None
        if "/" in text:
            for match in find_paths(text):
                if "://" not in text[max(0, match.start() - 8): match.start()]:
                    paths[match.group(0)] = None
        for match in _COMMAND.finditer(text):
            cmd = (match.group(1) or match.group(2) or "").strip()
            if cmd:
                commands[cmd] = None
        for call in message.tool_calls:
            cmd = call.input.get("command") if isinstance(call.input, dict) else None
            if isinstance(cmd, str) and 0 < len(cmd) <= 200:
                commands[cmd.strip()] = None
    return {"errors": list(errors), "files": list(paths), "commands": list(commands)}


def render_pinned(facts: dict[str, list[str]], first: int, last: int, max_tokens: int,
                  count: Callable[[str], int]) -> str:
    """The pinned-facts block, most recent facts kept when it must shrink."""
    if max_tokens <= 0 or not any(facts.values()):
        return ""
    keep = {k: list(v) for k, v in facts.items()}

    def build() -> str:
        body = []
        for name in ("errors", "files", "commands"):
            if keep[name]:
                body.append(f"{name}:")
                body.extend(f"- {neutralize(item)}" for item in keep[name])
        return (f'<pinned_facts covers="messages {first + 1}-{last + 1}">\n'
                + "\n".join(body) + "\n</pinned_facts>")

    # Drop the oldest fact of the longest list: later facts are likelier to matter. The order
    # of drops is fixed, so the block after k drops is known without making them one by one.
    order: list[str] = []
    sizes = {k: len(v) for k, v in keep.items()}
    for _ in range(sum(sizes.values())):
        longest = max(sizes, key=lambda k: sizes[k])
        sizes[longest] -= 1
        order.append(longest)

    def after(k: int) -> str:
        dropped = Counter(order[:k])
        for name, items in facts.items():
            keep[name] = list(items)[dropped[name]:]
        return build()

    # The fewest drops that fit, by bisection: a drop removes whole lines (and a list's header
    # with its last fact), which never adds tokens. One drop and one recount at a time was
    # quadratic: 2,000 file paths took 11.6 s.
    if count(text := after(0)) <= max_tokens:
        return text
    lo, hi = 0, len(order)  # after(lo) does not fit; after(hi) holds nothing
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(after(mid)) <= max_tokens:
            hi = mid
        else:
            lo = mid
    return "" if hi == len(order) else after(hi)


@dataclass(slots=True)
class _Rendered:
    """One message as it goes into a prompt, cached by the message's fields (`_message_key`)."""

    text: str               # redacted content
    rules: tuple[str, ...]  # redaction rules that fired
    turn: Turn
    raw: int = -1           # tokenizer count of turn.text, -1 until counted
    facts: dict[str, list[str]] | None = None
    message: Message | None = None  # the message with every field redacted (what turn shows)
    serial: int = 0                 # unique per record: a folded range's facts are keyed by these


# What a message renders from, as a tuple: the render cache's key. Each activity call deserializes
# the card afresh, so the key is built for every message of every assembly (the warm path's main
# cost): a tuple of the fields themselves is built and hashed many times faster than a digest of
# them, and the dict compares the fields on a hit, so a hash collision can never return another
# message's rendering. It keeps the raw fields alive as long as the record (which holds the
# redacted ones, the same strings when nothing was redacted).
_MessageKey = tuple[object, ...]
# Record serials: never reused, unlike id(), so a key of serials names one set of records.
_SERIALS = itertools.count(1)
# Histories MessageCache.lookup compares new ones with (a worker's cards take turns).
RECENT_HISTORIES = 4


def _message_key(m: Message) -> _MessageKey:
    f = m.__dict__  # the model's fields: reading them here costs half of attribute access
    at = f["created_at"]
    # Aware datetimes at the same instant compare equal whatever their offset, and a datetime's
    # fold is ignored: both change what isoformat() renders. Its pickled state (protocol 4: the
    # fields and fold in 10 bytes, and the tzinfo) tells them apart, and costs less to hash and
    # compare than the datetime itself or its offset (each a call into the tzinfo).
    when = at.__reduce_ex__(4)[1] if at is not None else None
    # Tool inputs are plain dicts (1 == True == 1.0 in Python, not in JSON): keyed by their JSON.
    calls = f["tool_calls"]
    calls_json = "".join(c.model_dump_json() for c in calls) if calls else ""
    return (f["role"], f["id"], f["author"], when, f["tool_call_id"], calls_json, f["content"], f["is_error"])


class MessageCache:
    """Message fields (`_message_key`) -> rendered message, bounded by entries and by the text it
    holds. An entry keeps the message's own content (in its key), its redacted copy and its
    rendered turn: about three times the message. Bounded by entries alone, a worker that met many
    cards with long tool outputs kept gigabytes; by characters it keeps at most `max_chars` of them
    (about 2 to 4 bytes each), so its memory has a ceiling whatever the cards hold. Oldest first
    out; a message larger than a sixteenth of the bound is rendered every time, not cached (it
    would push out everything else, and one assembly reads it once). `get` is the plain dict's
    own: the warm path looks up every message of every assembly.

    `lookup` first compares the keys with the last few histories fitted, position by position: the
    next turn of a card sends the same messages plus new ones, freshly deserialized, and comparing
    its keys with those kept (a memcmp of each text, stopping at the first difference) costs a
    fraction of hashing every text for the dict (a quarter of a warm assembly). Those histories'
    keys and records are kept besides the bounds: at most RECENT_HISTORIES cards' worth."""

    def __init__(self, max_entries: int = 200_000, max_chars: int = 48_000_000) -> None:
        if max_entries < 1 or max_chars < 0:
            raise ValueError(f"MessageCache: max_entries ({max_entries}) must be >= 1 and max_chars ({max_chars}) >= 0")
        self._entries: dict[_MessageKey, _Rendered] = {}
        self.get = self._entries.get
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.chars = 0
        self.evictions = 0  # entries pushed out by a bound: nonzero once the cache is full
        self._recent: deque[tuple[list[_MessageKey], list[_Rendered]]] = deque(maxlen=RECENT_HISTORIES)

    def lookup(self, keys: list[_MessageKey]) -> list[_Rendered | None]:
        """The record of each key, None when there is none: the prefix a recent history shares
        with `keys` from it, the rest from the dict."""
        get = self._entries.get
        for old_keys, old_recs in self._recent:
            n = min(len(keys), len(old_keys))
            if n and keys[0] == old_keys[0] and keys[:n] == old_keys[:n]:
                return [*old_recs[:n], *map(get, keys[n:])]
        return list(map(get, keys))

    def remember(self, keys: list[_MessageKey], recs: list[_Rendered]) -> None:
        """Keep a fitted history for `lookup`, in place of an older one of the same card (the same
        first message)."""
        for entry in self._recent:
            if entry[0][0] == keys[0]:
                self._recent.remove(entry)
                break
        self._recent.appendleft((keys, recs))

    @staticmethod
    def weight(key: _MessageKey, rec: _Rendered) -> int:
        turn = rec.turn
        return (sum(len(part) for part in key if isinstance(part, str)) + len(rec.text) + len(turn.text)
                + sum(len(r.text) for r in turn.tool_results))

    def put(self, key: _MessageKey, rec: _Rendered) -> None:
        weight = self.weight(key, rec)
        if weight > self.max_chars // 16:
            return
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.chars -= self.weight(key, old)
        entries[key] = rec
        self.chars += weight
        while len(entries) > self.max_entries or self.chars > self.max_chars:
            oldest = next(iter(entries))
            self.chars -= self.weight(oldest, entries.pop(oldest))
            self.evictions += 1

    def __len__(self) -> int:
        return len(self._entries)


class HistoryFitter:
    """Fits one card's history. Counting goes newest first and stops once the budget is
    exceeded, so a long history costs about one budget's worth of tokenizing, not all of it.
    `cache` (message fields -> rendered message) is shared across assemblies, so re-assembling
    after one new message renders, redacts and counts only that message."""

    def __init__(self, counter: TokenCounter, scrubber: Scrubber, settings: HistorySettings,
                 message_overhead: int = 4, cache: MessageCache | None = None,
                 facts_cache: dict[tuple[int, ...], dict[str, list[str]]] | None = None,
                 pinned_cache: dict[tuple[object, ...], str] | None = None) -> None:
        self.counter = counter
        self.scrubber = scrubber
        self.settings = settings
        self.overhead = message_overhead
        self.cache = cache if cache is not None else MessageCache()
        self.facts_cache = facts_cache if facts_cache is not None else {}
        self.pinned_cache = pinned_cache if pinned_cache is not None else {}

    def _cost(self, turn: Turn) -> int:
        return self.counter.count(turn.counted_text()) + self.overhead

    def _render(self, m: Message, found: Counter[str] | None, index: int = 0,
                key: _MessageKey | None = None) -> _Rendered:
        key = _message_key(m) if key is None else key
        rec = self.cache.get(key)
        if rec is None:
            rules: Counter[str] = Counter()
            # Every field the turn shows, not only the content: author, ids, tool names and inputs.
            clean = self.scrubber.scrub_message(m, rules)
            text = clean.content
            rec = _Rendered(text, tuple(rules.elements()), render_message(clean, text), message=clean,
                            serial=next(_SERIALS))
            self.cache.put(key, rec)
        if found is not None and rec.rules:
            shown = rec.message or self.scrubber.scrub_message(m)  # the label is shown: the redacted author
            in_item(found, f"history message {index + 1} ({shown.author or m.role})")
            found.update(rec.rules)
        return rec

    def _rec_cost(self, rec: _Rendered) -> int:
        if rec.raw < 0:
            rec.raw = self.counter.raw(rec.turn.counted_text())  # a hit or miss of the counter's own cache
        else:
            self.counter.stats.hits += 1  # a count served by the rendered-message cache
        cal = self.counter.calibration
        return (rec.raw if cal == 1.0 else math.ceil(rec.raw * cal)) + self.overhead

    def _pinned(self, recs: Sequence[_Rendered], messages: Sequence[Message], first: int, last: int,
                max_tokens: int) -> str:
        """The pinned-facts block of messages[first:last+1] (`recs` and `messages` are that range),
        kept like its facts, by the records' serials, and the block's place and size."""
        serials = tuple(r.serial for r in recs)
        key = (serials, first, last, max_tokens, self.counter.calibration, self.counter.encoding_name)
        hit = self.pinned_cache.get(key)
        if hit is None:
            facts = self._facts(recs, messages, serials)
            hit = self.pinned_cache[key] = render_pinned(facts, first, last, max_tokens, self.counter.count)
            if len(self.pinned_cache) > 256:
                self.pinned_cache.pop(next(iter(self.pinned_cache)))
        return hit

    def _facts(self, recs: Sequence[_Rendered], messages: Sequence[Message],
               key: tuple[int, ...]) -> dict[str, list[str]]:
        # The folded range stays put between fold steps: its merged facts are kept by the range's
        # messages' records (their serials), so a turn between steps does not merge them again.
        hit = self.facts_cache.get(key)
        if hit is None:
            hit = self.facts_cache[key] = self._merge_facts(recs, messages)
            if len(self.facts_cache) > 256:
                self.facts_cache.pop(next(iter(self.facts_cache)))
        return hit

    def _merge_facts(self, recs: Sequence[_Rendered], messages: Sequence[Message]) -> dict[str, list[str]]:
        merged: dict[str, dict[str, None]] = {"errors": {}, "files": {}, "commands": {}}
        for rec, message in zip(recs, messages, strict=True):
            if rec.facts is None:
                rec.facts = extract_pinned_facts((rec.message or message,), (rec.text,))
            for name, items in rec.facts.items():
                merged[name].update(dict.fromkeys(items))
        return {k: list(v) for k, v in merged.items()}

    def fit(self, messages: Sequence[Message], budget: int,
            summarizer: Summarizer | None = None, found: Counter[str] | None = None) -> HistoryFit:
        if not messages:
            row = ExplainRow("history", "chat history", "card", "absent", 0, "no messages")
            return HistoryFit((), 0, "empty", (row,))
        budget = max(0, budget)
        n = len(messages)
        # Every message is looked up on every assembly: a hit without redactions to report (nearly
        # all of them) is served as it is, without a call.
        keys = [_message_key(m) for m in messages]
        recs = cast(list[_Rendered], self.cache.lookup(keys))
        for i, rec in enumerate(recs):
            if rec is None or rec.rules:
                recs[i] = self._render(messages[i], found, i, keys[i])
        self.cache.remember(keys, recs)
        texts = [r.text for r in recs]
        turns: list[Turn] = [r.turn for r in recs]
        # Each message's cost as rendered (before any cut), None until counted; counts the cache
        # already holds are filled in at once (one cache hit each).
        ov, cal = self.overhead, self.counter.calibration
        if cal == 1.0:
            full: list[int | None] = [r.raw + ov if r.raw >= 0 else None for r in recs]
        else:
            full = [math.ceil(r.raw * cal) + ov if r.raw >= 0 else None for r in recs]
        self.counter.stats.hits += n - full.count(None)
        costs = list(full)  # what the fit charges: a cut message's cost replaces its full one

        def full_cost(i: int) -> int:
            c = full[i]
            if c is None:
                c = full[i] = self._rec_cost(recs[i])
                if costs[i] is None:
                    costs[i] = c
            return c

        def cost(i: int) -> int:
            c = costs[i]
            return full_cost(i) if c is None else c

        start, total = _take_newest(costs, n, 0, budget, full_cost)
        if start == 0:
            row = ExplainRow("history", f"{n} messages", "card history", "verbatim", total,
                             f"fits the history budget ({total:,} of {budget:,})")
            return HistoryFit(tuple(turns), total, "verbatim", (row,), costs=tuple(cost(i) for i in range(n)))

        rows: list[ExplainRow] = []
        cut_at: dict[int, int] = {}
        tail_budget = int(budget * self.settings.tail_fraction)
        units = group_units(messages)

        # Each unit's cost by index, None until measured. A message already counted and within
        # the cap needs no measuring when it is a unit of its own (the usual chat): filled in.
        if len(units) == n:
            cap1 = max(0, tail_budget - ov)
            unit_costs: list[int | None] = [c if c is not None and c - ov <= cap1 else None for c in costs]
        else:
            unit_costs = [None] * len(units)

        def unit_cost(k: int) -> int:
            c = unit_costs[k]
            if c is None:
                c = unit_costs[k] = measure_unit(units[k])
            return c

        def units_sum(start: int) -> int:
            """The cost of units[start:]."""
            known = unit_costs[start:]
            if None not in known:  # all measured (the walks that chose `start` measured them)
                return sum(cast(list[int], known))
            return sum(c if c is not None else unit_cost(k) for k, c in enumerate(known, start))

        def measure_unit(u: tuple[int, int]) -> int:
            # A message larger than its share of the tail budget is excerpted so the tail can hold it.
            cap = max(0, tail_budget // (u[1] - u[0] + 1) - ov)
            total = 0
            for i in range(u[0], u[1] + 1):
                c = cost(i)
                if c - ov > cap and i not in cut_at:
                    clean = recs[i].message or messages[i]
                    turns[i] = render_message(clean, self._shrink(clean, texts[i], cap))
                    c = costs[i] = cut_at[i] = self._cost(turns[i])
                total += c
            return total

        def take_newest(end: int, used: int, limit: int) -> tuple[int, int]:
            """The units before `end`, newest first, while their sum stays within `limit`:
            (the first unit taken, the sum)."""
            return _take_newest(unit_costs, end, used, limit, unit_cost)

        # `us` is always a run of consecutive units, so its messages are one slice.
        def kept_turns(us: Sequence[tuple[int, int]]) -> list[Turn]:
            return turns[us[0][0]: us[-1][1] + 1] if us else []

        def kept_costs(us: Sequence[tuple[int, int]]) -> list[int]:
            return [cost(i) for i in range(us[0][0], us[-1][1] + 1)] if us else []

        # Running token counts of the messages as rendered (before any cut), by unit: where the
        # fold's steps fall. Computed once per fit, however many boundaries are looked up.
        running: list[int] = []

        def step_boundary(minimal: int, step: int) -> int:
            if not running:
                every = [full_cost(i) if c is None else c for i, c in enumerate(full)]
                running.extend(accumulate(every) if len(units) == n  # every message its own unit
                               else accumulate(every[a] if a == b else sum(every[a: b + 1]) for a, b in units))
            return _step_boundary(running, minimal, step)

        def cut_rows(us: Sequence[tuple[int, int]]) -> None:
            if not cut_at:
                return
            for u in us:
                for i in range(u[0], u[1] + 1):
                    if i in cut_at:
                        rows.append(ExplainRow("history", f"message {i + 1}", "card history", "cut", cut_at[i],
                                               f"one message larger than its share of the recent tail "
                                               f"({tail_budget:,} tokens)"))

        # Recent tail: newest units while they fit in about half the budget.
        tail_start, used = take_newest(len(units), 0, tail_budget)
        if tail_start == 0:  # after cutting oversized messages, everything fits
            cut_rows(units)
            rows.append(ExplainRow("history", f"{n} messages", "card history", "verbatim", used,
                                   "fits the history budget once oversized messages are cut"))
            return HistoryFit(tuple(kept_turns(units)), used, "verbatim", tuple(rows), costs=tuple(kept_costs(units)))
        # The fold ends on a step boundary at or after the minimal one, so it stays put (and its
        # summary and pinned facts byte-identical) while the tail grows into the room left.
        step_end = step_boundary(tail_start - 1, int(tail_budget * self.settings.fold_step_fraction))
        if step_end >= tail_start:
            tail_start = step_end + 1
            used = units_sum(tail_start)
        head_units: list[tuple[int, int]] = []
        if (messages[units[0][0]].role == "user"
                and unit_cost(0) <= budget * self.settings.first_request_max_fraction):
            head_units = [units[0]]
        fold_units = units[len(head_units): tail_start]
        if not fold_units:  # everything is head or tail yet over budget: fold the head too
            head_units, fold_units = [], units[:tail_start]
        first, last = fold_units[0][0], fold_units[-1][1]
        folded_messages = messages[first: last + 1]
        # The fold's pinned facts go out only with a summary: without a summarizer it truncates.
        pinned = self._pinned(recs[first: last + 1], folded_messages, first, last,
                              int(budget * self.settings.pinned_fraction)) if summarizer is not None else ""
        pinned_cost = self.counter.count(pinned) if pinned else 0
        head_cost = unit_cost(0) if head_units else 0
        tail_cost = used

        summary_text, failure = "", ""
        needed: Fold | None = None
        room = budget - head_cost - tail_cost - pinned_cost - self.overhead
        frame_open = f'<conversation_summary covers="messages {first + 1}-{last + 1}">\n'
        frame_close = "\n</conversation_summary>"
        frame_cost = self.counter.count(frame_open) + self.counter.count(frame_close)
        room -= frame_cost
        if summarizer is None:
            failure = "no summarizer configured"
        elif room < self.settings.min_summary_tokens:
            failure = f"only {max(room, 0):,} tokens left for a summary"
        else:
            redacted = tuple(m.model_copy(update={"content": t})
                             for m, t in zip(folded_messages, texts[first: last + 1], strict=True))
            try:
                found_summary = summarizer(FoldRequest(redacted, first, last, room))
            except Exception as exc:  # the fallback is the contract: any summarizer failure truncates
                failure = f"summarizer failed: {type(exc).__name__}: {exc}"[:300]
            else:
                summary_text = (found_summary or "").strip()
                if found_summary is None:
                    needed = Fold(first, last, room)
                    failure = f"no summary of messages {first + 1}-{last + 1} yet"
                in_item(found, f"summary of history messages {first + 1}-{last + 1}")
                summary_text = self.scrubber.scrub(summary_text, found)
                if not summary_text and not failure:
                    failure = "summarizer returned nothing"
                elif self.counter.count(summary_text) > room:
                    summary_text = truncate_tokens(summary_text, room, self.counter)

        mid: Turn | None = None
        while summary_text:
            block = frame_open + neutralize(summary_text) + frame_close
            if pinned:
                block += "\n" + pinned
            mid = Turn("user", block, cache=True)
            excess = head_cost + self._cost(mid) + tail_cost - budget
            if excess <= 0:
                break
            # Joined text can count a little more than its parts: shrink until it fits.
            room -= excess + 2
            summary_text = truncate_tokens(summary_text, room, self.counter) if room > 0 else ""
            mid = None
        if not summary_text and not failure:
            failure = "the summary did not fit the budget"
        if summary_text and mid is not None:
            out = kept_turns(head_units)
            out.append(mid)
            out.extend(kept_turns(units[tail_start:]))
            cut_rows([*head_units, *units[tail_start:]])
            mid_cost = self._cost(mid)
            total_used = head_cost + mid_cost + tail_cost
            if head_units:
                rows.append(ExplainRow("history", "first request", f"message {units[0][0] + 1}", "verbatim",
                                       head_cost, "the first user request is kept verbatim"))
            rows.append(ExplainRow("history", f"messages {first + 1}-{last + 1}", "summarizer", "summarized",
                                   mid_cost - pinned_cost,
                                   f"{last - first + 1} messages ({sum(len(t) for t in texts[first:last + 1]):,} "
                                   "characters) folded into a summary"))
            if pinned:
                rows.append(ExplainRow("history", "pinned facts", f"messages {first + 1}-{last + 1}", "pinned",
                                       pinned_cost, "error lines, file paths and commands kept verbatim"))
            rows.append(ExplainRow("history", f"messages {units[tail_start][0] + 1}-{len(messages)}"
                                   if tail_start < len(units) else "recent tail", "card history", "verbatim",
                                   tail_cost, f"recent tail, about {self.settings.tail_fraction:.0%} of the budget"))
            return HistoryFit(tuple(out), total_used, "summarized", tuple(rows), (first, last),
                              tail_from=units[tail_start][0] if tail_start < len(units) else n,
                              costs=(*kept_costs(head_units), mid_cost, *kept_costs(units[tail_start:])))

        # Truncation: the newest units that fit, and the pinned facts of what was dropped,
        # in a block whose size is reserved up front so the sum can never exceed the budget.
        pinned_cap = int(budget * self.settings.pinned_fraction)
        room = budget - pinned_cap - self.overhead
        keep_from, kept = take_newest(len(units), 0, room)
        if keep_from == len(units):  # not even the newest unit fits beside the pinned block
            pinned_cap, room = 0, budget
            keep_from, kept = take_newest(keep_from, kept, room)
        elif keep_from > 0:  # truncation moves in the same steps as the fold
            step_end = step_boundary(keep_from - 1, int(room * self.settings.fold_step_fraction))
            if step_end >= keep_from:
                keep_from = step_end + 1
                kept = units_sum(keep_from)
        dropped_last = units[keep_from - 1][1] if keep_from > 0 else -1
        out: list[Turn] = []
        pinned_used = 0
        if dropped_last >= 0 and pinned_cap > 0:
            pinned = self._pinned(recs[: dropped_last + 1], messages[: dropped_last + 1], 0, dropped_last,
                                  pinned_cap)
            if pinned:
                out.append(Turn("user", pinned))
                pinned_used = self._cost(out[0])
        out.extend(kept_turns(units[keep_from:]))
        cut_rows(units[keep_from:])
        rows.append(ExplainRow("history", f"messages 1-{dropped_last + 1}", "card history", "truncated", 0,
                               f"{failure}; kept the {len(messages) - dropped_last - 1} most recent messages that fit"))
        if pinned_used:
            rows.append(ExplainRow("history", "pinned facts", f"messages 1-{dropped_last + 1}", "pinned",
                                   pinned_used, "error lines, file paths and commands kept verbatim"))
        rows.append(ExplainRow("history", f"messages {dropped_last + 2}-{len(messages)}", "card history",
                               "verbatim", kept, "most recent messages, newest first"))
        return HistoryFit(tuple(out), pinned_used + kept, "truncated", tuple(rows), (0, dropped_last), needed,
                          tail_from=dropped_last + 1,
                          costs=(*([pinned_used] if pinned_used else []), *kept_costs(units[keep_from:])))

    def _shrink(self, message: Message, text: str, cap: int) -> str:
        frame = self.counter.count(render_message(message, "").counted_text())
        target = max(0, cap - frame - 2)
        excerpt = (excerpt_log if message.role == "tool" else excerpt_text)(text, target, self.counter.count)
        return excerpt.text


def _take_newest(values: list[int | None], end: int, used: int, limit: int,
                 resolve: Callable[[int], int]) -> tuple[int, int]:
    """Walks values[end-1], values[end-2], ... adding each to `used` while the sum stays within
    `limit`: (the first index taken, the sum). `resolve(i)` computes and stores values[i] when it
    is None (a count not made yet), so the walk costs only what it reaches. A run of known values
    that reaches the start (a warm assembly: all but the new messages) is summed in C and cut by
    bisection, which gives the same answer: the values are never negative (token counts plus a
    non-negative overhead; checked), so the running sums only grow."""
    while end > 0:
        c = values[end - 1]
        if c is None:
            c = resolve(end - 1)
        else:
            known = cast(list[int], values[:end])
            if None not in known and min(known) >= 0:
                sums = list(accumulate(reversed(known), initial=used))
                k = max(0, bisect_right(sums, limit) - 1)
                return end - k, sums[k]
        if used + c > limit:
            break
        end -= 1
        used += c
    return end, used


def _step_boundary(running: Sequence[int], minimal: int, step: int) -> int:
    """The first unit index at or after `minimal` where the history's running token count (of
    the messages as rendered, before any cut; `running[j]` is the count through unit j) crosses
    a multiple of `step`; at most the last unit but one, so a tail stays. Messages are only ever
    appended, so the boundaries of a card's history never move: the fold jumps once per `step`
    tokens of new history."""
    if step <= 0 or minimal >= len(running) - 2:
        return minimal
    before = 0
    for j, total in enumerate(running[:-1]):
        if j >= minimal and total // step > before // step:
            return j
        before = total
    return minimal


def truncate_tokens(text: str, max_tokens: int, counter: TokenCounter,
                    marker: str = "\n[... cut to fit the budget ...]") -> str:
    """The longest prefix of `text` plus `marker` whose count fits `max_tokens`."""
    if counter.count(text) <= max_tokens:
        return text
    if counter.count(marker) > max_tokens:
        return ""
    tokens = counter.encode(text)
    n = int((max_tokens - counter.count(marker)) / counter.calibration)
    while n > 0:
        candidate = counter.decode(tokens[:n]).rstrip("\ufffd") + marker
        if counter.count(candidate) <= max_tokens:
            return candidate
        n -= max(1, n // 20)
    bare = marker.lstrip("\n")
    return bare if counter.count(bare) <= max_tokens else ""
