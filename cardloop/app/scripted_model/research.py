"""The research roles of the scripted model (a TEST DOUBLE): planner, analyst and synthesizer
answered with deterministic logic over the request itself, so research runs offline on the
real chunks instead of canned replies.

- Planner ("# Research planner"): failure words plus the question's own longer words, one per line.
- Analyst ("# Research analyst"): reads every <untrusted kind="log_chunk" chunk_id=N> block of
  the request and reports its error lines (prompts/log_errors.py) verbatim as findings, as the
  JSON list the analyst template asks for. A chunk holding the line SCRIPTED-ANALYST: MALFORMED
  gets a reply that is not JSON (MALFORMED-ONCE: only on the first try), for the lenient-parsing tests.
- Synthesizer ("# Research synthesizer"): on its first turn it checks the top finding with
  grep_chunks and asks for storage_stats (structured tool_use blocks); with the tool results
  it writes the report from the findings, quoting each high-relevance finding verbatim.
  It obeys directives only OUTSIDE the <findings> block ("ignore previous instructions",
  "CALL_TOOL name"), the way a model that respects the isolation boundary behaves: text that
  escaped the block (a forged </findings>) would make it answer "PWNED" or call the tool,
  which is what the injection tests look for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cardloop.app.scripted_model.wire import content_text
from cardloop.prompts.log_errors import find_error_lines, line_body

PLANNER = "# Research planner"
ANALYST = "# Research analyst"
SYNTHESIZER = "# Research synthesizer"
SCOPED = "You are synthesizing findings related to:"

_CHUNK = re.compile(r'<untrusted kind="log_chunk"[^>]*?chunk_id="(\d+)"[^>]*>\n(.*?)\n</untrusted>', re.DOTALL)
_FINDING = re.compile(r"^- \[(high|medium|low)\] x(\d+) (.*?)  \[chunks [\d, ]+\]$", re.MULTILINE)
_STRONG = re.compile(r"FATAL|Traceback|Exception|Error:|FAILED|panic:|OOMKilled|Killed|exit code [1-9]")
_DIRECTIVE = re.compile(r"ignore (all )?previous instructions|CALL_TOOL (\w+)", re.IGNORECASE)


def research_reply(system_texts: Sequence[str], messages: Sequence[Mapping[str, Any]]) -> str | list[Any] | None:
    """The reply for a research role, or None when the request is not one."""
    head = "\n".join(system_texts).lstrip()
    if head.startswith(PLANNER):
        return _plan(_first_user(messages))
    if head.startswith(ANALYST):
        return _analyse(_first_user(messages), retry=len(messages) > 1)
    if head.startswith(SYNTHESIZER):
        return _synthesize(head, messages)
    return None


def _first_user(messages: Sequence[Mapping[str, Any]]) -> str:
    return content_text(messages[0]["content"]) if messages else ""


def _plan(text: str) -> str:
    words = [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{5,}", text.split("Artifacts:")[0])
             if w.lower() not in {"untrusted", "question", "research", "source"}]
    queries = ["error exception traceback", "FATAL", "FAILED test", "killed OOMKilled memory", "timeout refused",
               *dict.fromkeys(words)]
    return "\n".join(queries[:8])


def _analyse(text: str, *, retry: bool) -> str:
    verdicts = []
    for cid, body in _CHUNK.findall(text):
        if "SCRIPTED-ANALYST: MALFORMED" in body and not (retry and "MALFORMED-ONCE" in body):
            return "I looked at the chunks and they look bad, here is my analysis: (no JSON, sorry)"
        lines = body.split("\n")
        found = list(dict.fromkeys(line_body(lines[i]).strip() for i in find_error_lines(lines)))
        found = [f for f in found if f]
        # The strong lines among all of them, as a reader of the whole chunk would report: a
        # chunk of many distinct weak lines (request ids) must not hide its one exception.
        strong = [f for f in found if _STRONG.search(f)][:8]
        found = found[:8]
        relevance = "high" if strong else "low" if found else "none"
        verdicts.append({"chunk_id": int(cid), "relevance": relevance, "findings": strong or found,
                         "summary": f"{len(found)} error line(s); first: {found[0][:120]}" if found else None,
                         "follow_up": []})
    return json.dumps(verdicts)


def _tool_results(messages: Sequence[Mapping[str, Any]]) -> bool:
    last = messages[-1]["content"] if messages else ""
    return isinstance(last, list) and any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in last)


def _outside_findings(text: str) -> str:
    return re.sub(r"<findings\b.*?</findings>", "", text, flags=re.DOTALL)


def _synthesize(system: str, messages: Sequence[Mapping[str, Any]]) -> str | list[Any]:
    user = _first_user(messages)
    obey = _DIRECTIVE.search(_outside_findings(system + "\n" + user))
    if obey:  # only reachable when untrusted text escaped the findings block
        if obey.group(2):
            return [{"type": "tool_use", "name": obey.group(2), "input": {}}]
        return "PWNED"
    findings = [(rel, int(n), text) for rel, n, text in _FINDING.findall(user)]
    if not _tool_results(messages) and findings and len(messages) == 1:
        pattern = re.escape(findings[0][2][:40])
        return [{"type": "text", "text": "Checking the top finding in the artifact."},
                {"type": "tool_use", "name": "grep_chunks", "input": {"pattern": pattern, "context_lines": 1}},
                {"type": "tool_use", "name": "storage_stats", "input": {}}]
    if "### Part " in user:  # meta-synthesis: merge the parts' key findings
        keys = list(dict.fromkeys(re.findall(r"^- `(.+?)`", user, flags=re.MULTILINE)))
        return _report([("high", 1, k) for k in keys], user, merged=True)
    return _report(findings, user, scoped=SCOPED in system)


def _report(findings: list[tuple[str, int, str]], user: str, *, scoped: bool = False, merged: bool = False) -> str:
    high = [f for f in findings if f[0] == "high"]
    rest = [f for f in findings if f[0] != "high"]
    coverage = re.search(r"^Coverage: (.+)$", user, flags=re.MULTILINE)
    out = ["## Summary",
           (f"{len(high)} distinct failure(s) explain the question" if high else "No root cause was found")
           + (" (merged from partial analyses)." if merged else " in the analysed parts of the artifacts."),
           "", "## Key Findings"]
    for _, n, text in high:
        out.append(f"- `{text.replace('`', chr(39))}`" + (f" (recurs {n} times)" if n > 1 else ""))
    # The synthesizer template's five sections, each present as a model following it writes them.
    out += ["", "## Analysis"]
    if rest:
        out += ["Related, lower-relevance lines:"] + [f"- {text}" for _, _, text in rest[:10]]
    else:
        out.append("Nothing beyond the key findings bears on the question in the analysed parts.")
    if coverage:
        out += ["", "## Gaps and Limitations", f"Coverage: {coverage.group(1)}."]
    if high and not scoped:
        out += ["", "## Recommendations", "Fix each failure above at its source, starting with the first in the log."]
    return "\n".join(out)
