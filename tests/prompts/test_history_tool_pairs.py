"""settle_tool_calls and results_after_calls: the stored history made one the providers take,
without moving a message (the fold's ranges are over the store's order)."""

from __future__ import annotations

from cardloop.prompts.card import Message, ToolCall
from cardloop.prompts.conversation import ToolOutput, ToolUse, Turn
from cardloop.prompts.history import results_after_calls, settle_tool_calls


def test_a_call_without_a_result_becomes_text_and_an_orphan_result_a_user_message() -> None:
    history = [
        Message(role="user", content="Fix it."),
        Message(role="assistant", content="Two checks.", tool_calls=(
            ToolCall(id="a", name="run_command", input={"command": "pytest"}),
            ToolCall(id="b", name="read_file", input={"path": "x.py"}))),
        Message(role="tool", tool_call_id="b", content="print(1)"),
        Message(role="tool", tool_call_id="zz", content="from a call folded away"),
    ]
    settled = settle_tool_calls(history)
    assert len(settled) == len(history)  # index for index
    assert [c.id for c in settled[1].tool_calls] == ["b"]
    assert "run_command call a: no result: it was interrupted" in settled[1].content
    assert settled[1].content.startswith("Two checks.")
    assert settled[2] is history[2]
    assert settled[3].role == "user" and "earlier tool call zz" in settled[3].content
    plain = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    assert settle_tool_calls(plain) is plain  # the usual chat: untouched, no copy


def test_results_follow_their_call_and_a_comment_in_between_moves_after_them() -> None:
    call = Turn("assistant", "", tool_calls=(ToolUse("a", "run_command", {}), ToolUse("b", "read_file", {})))
    comment = Turn("user", "Keep the cap at 30 s.")
    result_a = Turn("user", "", tool_results=(ToolOutput("a", "ok", False),))
    result_b = Turn("user", "", tool_results=(ToolOutput("b", "text", False),))
    later = Turn("assistant", "Done.")
    turns, costs = results_after_calls([call, comment, result_a, result_b, later], [5, 4, 3, 2, 1])
    assert turns == [call, result_a, result_b, comment, later] and costs == [5, 3, 2, 4, 1]
    same, no_costs = results_after_calls([call, result_a, result_b], ())
    assert same == [call, result_a, result_b] and no_costs == []
