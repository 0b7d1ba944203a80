"""A Kubernetes Secret's `data`: every value is base64 of a secret, under any key, so neither the
key's name nor the value's shape tells it; only where it stands does: under the `data` key of an
object whose `kind` is `Secret`. Not anywhere in a text that mentions `kind: Secret` (a ConfigMap's
base64 `data` in the same `kubectl get -o yaml` list, a chart's logo, a comment that names the kind
kept their values then).

Which object a `data` block belongs to:
- YAML: the block mapping under a `data:` key, in the mapping that holds the key (a list item of
  kubectl's `items:` too); that mapping's own `kind:` decides;
- JSON (kubectl's `-o json`, the last-applied annotation, JSON quoted in JSON in the redactor's
  view, where escaped quotes read as quotes): the object holding `"data": {...}`, by brace depth
  (base64 holds no brace, and a JSON string holding a whole object holds balanced ones);
- a `data` block whose object names no kind (an excerpt) counts as a Secret's when its YAML
  document (between `---` lines) or its JSON text declares `kind: Secret` and no other kind.
The values in a Secret's blocks are then the rule's candidates (`pairs`, validated as base64 of
text). Linear: one pass over the lines and one over the braces, each `data` block read once more.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Spans = list[tuple[int, int]]

# A YAML key line: its column, key and the rest of the line (a value, a block indicator, nothing).
_YAML_KEY = re.compile(
    r"[ ]*(?:-[ \t]+)*(?P<key>[\w.\-/]+|\"[^\"\n]*\"|'[^'\n]*')[ \t]*:(?:[ \t]+(?P<rest>[^\n]*))?\r?\Z")
# YAML quoted in JSON, in the redactor's view: its first line follows the string's opening quote
# (`{"content": "kind: Secret `), its later lines start at their lines' start.
_QUOTED_FIRST_KEY = re.compile(r"[^\n]*?\"(?=[A-Za-z_][\w.\-/]*:[ \t][^\"\n]*\Z)")
_COMMENT = re.compile(r"[ \t]*#[^\n]*\Z")
# JSON: a `"kind": "..."` pair and a `"data": {` head (escaped quotes read `"kind ": "Secret "`).
_JSON_KIND = re.compile(r"\"kind {0,16}\"[ \t]*:[ \t]*\"([\w.\-]{0,63}) {0,16}\"")
_JSON_DATA = re.compile(r"\"data {0,16}\"[ \t]*:[ \t\r\n]*\{")
_BRACES = re.compile(r"[{}]")
# Whether a text holds a YAML `data:` key with its block below it at all (most do not: one C scan
# spares the pass over every line).
_YAML_DATA = re.compile(r"^[ ]*(?:-[ \t]+)*data[ \t]*:[ \t]*(?:#[^\n]*)?\r?$", re.MULTILINE)


def _scalar(rest: str | None) -> str:
    """A YAML value without its comment and quotes ("" when none stands on the key's line)."""
    if not rest:
        return ""
    rest = _COMMENT.sub("", rest).strip()
    if len(rest) >= 2 and rest[0] == rest[-1] and rest[0] in "\"'":
        rest = rest[1:-1]
    return rest


class _Mapping:
    __slots__ = ("blocks", "column", "kind", "open_block")

    def __init__(self, column: int) -> None:
        self.column = column
        self.kind: str | None = None
        self.blocks: Spans = []
        self.open_block = -1  # where the lines of a `data:` block being read start


def _yaml_blocks(text: str) -> Spans:
    """The `data:` blocks of YAML Secrets in `text` (from the line after `data:` to the block's end)."""
    if not _YAML_DATA.search(text):
        return []
    blocks: Spans = []
    stack: list[_Mapping] = []
    unnamed: Spans = []  # blocks of mappings without a kind, in the current document
    kinds: set[str] = set()

    def close(m: _Mapping, at: int) -> None:
        if m.open_block >= 0:
            m.blocks.append((m.open_block, at))
            m.open_block = -1
        if m.kind == "Secret":
            blocks.extend(m.blocks)
        elif m.kind is None:
            unnamed.extend(m.blocks)

    def end_document(at: int) -> None:
        while stack:
            close(stack.pop(), at)
        if kinds == {"Secret"}:
            blocks.extend(unnamed)
        unnamed.clear()
        kinds.clear()

    pos, n = 0, len(text)
    while pos < n:
        end = text.find("\n", pos)
        end = n if end < 0 else end
        line = text[pos:end]
        stripped = line.strip()
        if not stripped or stripped[0] == "#":
            pos = end + 1
            continue
        if line.startswith(("---", "...")) and line[3:].strip() == "":
            end_document(pos)
            pos = end + 1
            continue
        m = _YAML_KEY.match(line)
        offset = 0
        if m is None and (q := _QUOTED_FIRST_KEY.match(line)) is not None:
            offset = q.end()
            m = _YAML_KEY.match(line, offset)
        # The column a line's content starts at (after a list item's `- `) is its mapping's.
        column = (m.start("key") - offset) if m else len(line) - len(line.lstrip(" "))
        dash = m is not None and "-" in line[offset:m.start("key")]
        while stack and (stack[-1].column > column or (dash and stack[-1].column == column)):
            close(stack.pop(), pos)
        if stack and stack[-1].column == column and stack[-1].open_block >= 0:
            stack[-1].blocks.append((stack[-1].open_block, pos))  # a sibling key ends the block
            stack[-1].open_block = -1
        if m is None:
            pos = end + 1
            continue
        if not stack or stack[-1].column != column:
            stack.append(_Mapping(column))
        top = stack[-1]
        key, value = m.group("key").strip("\"'"), _scalar(m.group("rest"))
        if key == "kind" and value:
            top.kind = value
            kinds.add(value)
        elif key == "data" and not value:
            top.open_block = end + 1
        pos = end + 1
    end_document(n)
    return blocks


def _json_blocks(text: str) -> Spans:
    """The `"data": {...}` objects of JSON Secrets in `text` (inside their braces)."""
    kinds = {m.start(): m.group(1) for m in _JSON_KIND.finditer(text)}
    heads = {m.end() - 1: m.start() for m in _JSON_DATA.finditer(text)}  # its `{` -> the key
    if not heads:
        return []
    blocks: Spans = []
    unnamed: Spans = []
    # Per open object: its kind, its data objects, and whether it is a data object itself. The
    # first is the text around every object (an excerpt whose outer braces were cut off).
    stack: list[tuple[list[str | None], Spans, bool]] = [([None], [], False)]
    starts: list[int] = [-1]
    kind_at = sorted(kinds)
    k = 0

    def close(kind: str | None, inner: Spans) -> None:
        if kind == "Secret":
            blocks.extend(inner)
        elif kind is None:
            unnamed.extend(inner)

    for b in _BRACES.finditer(text):
        i = b.start()
        while k < len(kind_at) and kind_at[k] < i:  # a kind pair before this brace: the open object's
            stack[-1][0][0] = kinds[kind_at[k]]
            k += 1
        if b.group() == "{":
            stack.append(([None], [], i in heads))
            starts.append(i)
            continue
        if len(stack) == 1:
            continue  # a brace that closes nothing this text opened
        (kind,), inner, is_data = stack.pop()
        start = starts.pop()
        if is_data:
            stack[-1][1].append((start + 1, i))
        close(kind, inner)
    while k < len(kind_at):
        stack[-1][0][0] = kinds[kind_at[k]]
        k += 1
    while stack:  # objects left open by the text's end (a truncated log) end there
        (kind,), inner, is_data = stack.pop()
        start = starts.pop()
        if is_data and stack:
            stack[-1][1].append((start + 1, len(text)))
        close(kind, inner)
    if set(kinds.values()) == {"Secret"}:
        blocks.extend(unnamed)
    return blocks


def secret_data_values(text: str, pairs: re.Pattern[str], ok: Callable[[re.Match[str]], bool]) -> tuple[Spans, int]:
    """The spans of the values `pairs` finds (its `secret` group) and `ok` accepts inside the
    `data` blocks of Secrets in `text`, and how many characters were read."""
    spans: Spans = []
    read = len(text)
    merged: Spans = []  # blocks inside blocks (`data:` nested in a `data:` block) are read once
    for start, end in sorted(_yaml_blocks(text) + _json_blocks(text)):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    for start, end in merged:
        read += end - start
        spans.extend(m.span("secret") for m in pairs.finditer(text, start, end) if ok(m))
    return spans, read
