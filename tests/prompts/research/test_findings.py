"""The analysts' findings: lenient reading of what models really send, strict about what the
pipeline relies on; the merge the synthesizer reads."""

from __future__ import annotations

import json

from cardloop.prompts.research.findings import (
    ChunkFindings,
    merge_findings,
    parse_findings,
    parse_queries,
)

ONE = {"chunk_id": 3, "relevance": "high", "findings": ["FATAL:  remaining connection slots"], "summary": "db",
       "follow_up": ["first OperationalError"]}


def test_plain_list_fenced_prose_single_object_and_json_lines() -> None:
    assert parse_findings(json.dumps([ONE]), [3])[0].findings == ("FATAL:  remaining connection slots",)
    fenced = "Here you go:\n```json\n" + json.dumps([ONE]) + "\n```\nHope it helps."
    assert parse_findings(fenced, [3])[0].relevance == "high"
    assert parse_findings("Sure! " + json.dumps(ONE) + " done", [3])[0].chunk_id == 3
    assert parse_findings(json.dumps({"chunks": [ONE]}), [3])[0].summary == "db"
    lines = json.dumps(ONE) + "\n" + json.dumps({**ONE, "chunk_id": 4, "relevance": "None"})
    got = parse_findings(lines, [3, 4])
    assert [v.chunk_id for v in got] == [3, 4] and got[1].relevance == "none"


def test_strict_where_it_matters() -> None:
    # A chunk the analyst was not given, a bad relevance and non-string findings are dropped.
    reply = json.dumps([{**ONE, "chunk_id": 99}, {**ONE, "chunk_id": 4, "relevance": "critical"},
                        {**ONE, "chunk_id": 5, "findings": ["kept", {"tool": "get_buffer"}, 7],
                         "tool_call": {"name": "get_buffer"}}])
    got = parse_findings(reply, [3, 4, 5])
    assert [v.chunk_id for v in got] == [5]
    assert got[0].findings == ("kept",)
    assert not hasattr(got[0], "tool_call")
    assert parse_findings("I could not find JSON here", [3]) is None
    assert parse_findings("[1, 2, 3]", [3]) is None
    # A lone object without chunk_id for a one-chunk batch is that chunk's.
    assert parse_findings(json.dumps({k: v for k, v in ONE.items() if k != "chunk_id"}), [7])[0].chunk_id == 7


def test_exact_strings_survive_and_sizes_are_bounded() -> None:
    long = "x" * 5_000
    v = ChunkFindings.model_validate({"chunk_id": 1, "relevance": "low",
                                      "findings": ["  E   assert 1 == 2  ", long] * 10})
    assert v.findings[0] == "E   assert 1 == 2"  # inner spacing kept, ends trimmed
    assert len(v.findings) == 12 and all(len(f) <= 600 for f in v.findings)


def test_merge_drops_none_orders_and_counts_recurring_findings() -> None:
    vs = [ChunkFindings(chunk_id=9, relevance="low", findings=("retrying after a transient error",)),
          ChunkFindings(chunk_id=5, relevance="none", findings=("ignored",)),
          ChunkFindings(chunk_id=7, relevance="high", findings=("OOMKilled: limit 512Mi",)),
          ChunkFindings(chunk_id=2, relevance="medium", findings=("Retrying after a transient error.",)),
          ChunkFindings(chunk_id=8, relevance="high", findings=("OOMKilled:  limit 512Mi", "exit code 137"))]
    kept, merged = merge_findings(vs)
    assert [v.chunk_id for v in kept] == [7, 8, 2, 9]
    assert [(m.text, m.count, m.relevance) for m in merged] == [
        ("OOMKilled: limit 512Mi", 2, "high"), ("exit code 137", 1, "high"),
        ("Retrying after a transient error.", 2, "medium")]
    assert merged[0].chunk_ids == (7, 8)


def test_queries_from_json_or_lines() -> None:
    assert parse_queries('["FATAL", "OOMKilled", "fatal"]', 8) == ["FATAL", "OOMKilled"]
    assert parse_queries("1. Traceback\n- exit code 137\n\n* FAILED test", 2) == ["Traceback", "exit code 137"]
