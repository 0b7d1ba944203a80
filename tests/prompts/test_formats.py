"""Provider formats: golden shapes per renderer, intercept per shape, and round trips."""

from __future__ import annotations

import itertools
import logging
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cardloop.prompts.conversation import Conversation, SystemBlock, Turn
from cardloop.prompts.formats import (
    ALIASES,
    FORMATS,
    clean_system_text,
    detect_format,
    intercept,
    render,
    resolve_format,
    to_anthropic,
    to_chatml,
    to_gemini,
    to_gemma,
    to_human_assistant,
    to_openai,
)

EPHEMERAL = {"type": "ephemeral"}

# Two system blocks (the first a cache breakpoint), three turns (the first flagged).
SMALL = Conversation(
    system=(SystemBlock("You are cardloop.", cache=True), SystemBlock("Stage: coding.")),
    turns=(
        Turn("user", "Fix the bug.", cache=True),
        Turn("assistant", "Done."),
        Turn("user", "Thanks!"),
    ),
)

# Multi-line text, blank lines, unicode, indentation, trailing newline, and the words
# "Human:" / "Assistant:" mid-line (not at a line start): everything must survive.
RICH = Conversation(
    system=(
        SystemBlock("You are cardloop — a coding agent.\nBe terse.", cache=True),
        SystemBlock("Stage: review ✓ (ünïcødé, 日本語)\n\nSecond paragraph: Human: is a word."),
    ),
    turns=(
        Turn("user", "Fix the bug.\n\nThe log says: Human: error at line 3\n  indented"),
        Turn("assistant", "Looking… 🔍\n\n```py\nprint('hi')\n```\n"),
        Turn("user", "Thanks! The label Assistant: appears mid-line.\n\n\nThree newlines above."),
    ),
)

CONVERSATIONS: dict[str, Conversation] = {
    "small": SMALL,
    "rich": RICH,
    "no_system": Conversation(turns=(Turn("user", "Just a question?"),)),
    "system_only": Conversation(system=(SystemBlock("Only instructions."),)),
    "empty": Conversation(),
    # A trailing assistant turn is a prefill: text formats leave it open.
    "prefill": Conversation(
        system=(SystemBlock("Answer in JSON."),),
        turns=(Turn("user", "Give me data."), Turn("assistant", '{"data":')),
    ),
    "same_role_runs": Conversation(
        turns=(
            Turn("user", " leading space"),
            Turn("user", "\nleading newline"),
            Turn("assistant", "a"),
            Turn("assistant", ""),
            Turn("user", "last"),
        )
    ),
}


def flat(conv: Conversation) -> Conversation:
    """conv' : roles and text only, system blocks joined (what every format can carry)."""
    system = (SystemBlock(conv.system_text),) if conv.system_text else ()
    return Conversation(system, tuple(Turn(t.role, t.text) for t in conv.turns))


# --------------------------------------------------------------------------- formats


def test_resolve_format_names_and_aliases() -> None:
    for name in FORMATS:
        assert resolve_format(name) == name
        assert resolve_format(name.upper()) == name
    for alias, target in ALIASES.items():
        assert resolve_format(alias) == target
    assert resolve_format("qwen") == "chatml"
    assert resolve_format("deepseek") == "chatml"


def test_resolve_format_unknown_lists_valid_names() -> None:
    with pytest.raises(ValueError) as info:
        resolve_format("llama-ish")
    message = str(info.value)
    for name in (*FORMATS, *ALIASES):
        assert name in message
    with pytest.raises(ValueError):
        render(SMALL, "nope")


# --------------------------------------------------------------------------- golden shapes


def test_anthropic_golden() -> None:
    got = to_anthropic(SMALL, model="claude-x", max_tokens=1024, temperature=0.2)
    assert got == {
        "model": "claude-x",
        "max_tokens": 1024,
        "temperature": 0.2,
        "system": [
            {"type": "text", "text": "You are cardloop.", "cache_control": EPHEMERAL},
            {"type": "text", "text": "Stage: coding."},
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Fix the bug.", "cache_control": EPHEMERAL}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
        ],
    }
    assert render(SMALL, "claude", model="claude-x", max_tokens=1024, temperature=0.2) == got


def test_anthropic_omits_none_params_and_empty_system() -> None:
    got = to_anthropic(Conversation(turns=(Turn("user", "hi"),)))
    assert got == {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    empty_block = Conversation(system=(SystemBlock(""),), turns=(Turn("user", "hi"),))
    assert "system" not in to_anthropic(empty_block)


def test_openai_golden() -> None:
    assert to_openai(SMALL, model="gpt-x", max_tokens=10, temperature=0.0) == {
        "model": "gpt-x",
        "max_tokens": 10,
        "temperature": 0.0,
        "messages": [
            {"role": "system", "content": "You are cardloop."},
            {"role": "system", "content": "Stage: coding."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Thanks!"},
        ],
    }
    assert render(SMALL, "vllm") == to_openai(SMALL)
    assert "model" not in to_openai(SMALL)


def test_gemini_golden() -> None:
    assert to_gemini(SMALL, max_tokens=64, temperature=0.7) == {
        "system_instruction": {"parts": [{"text": "You are cardloop.\n\nStage: coding."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Fix the bug."}]},
            {"role": "model", "parts": [{"text": "Done."}]},
            {"role": "user", "parts": [{"text": "Thanks!"}]},
        ],
        "generationConfig": {"maxOutputTokens": 64, "temperature": 0.7},
    }
    # model has no place in the body (it is in the URL); no generationConfig without values.
    assert render(SMALL, "gemini", model="gemini-x") == {
        "system_instruction": {"parts": [{"text": "You are cardloop.\n\nStage: coding."}]},
        "contents": to_gemini(SMALL)["contents"],
    }


def test_chatml_golden() -> None:
    assert to_chatml(SMALL) == (
        "<|im_start|>system\nYou are cardloop.<|im_end|>\n"
        "<|im_start|>system\nStage: coding.<|im_end|>\n"
        "<|im_start|>user\nFix the bug.<|im_end|>\n"
        "<|im_start|>assistant\nDone.<|im_end|>\n"
        "<|im_start|>user\nThanks!<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render(SMALL, "qwen", model="ignored", max_tokens=5) == to_chatml(SMALL)


def test_gemma_golden_with_system_turn() -> None:
    assert to_gemma(SMALL) == (
        "<start_of_turn>system\nYou are cardloop.<end_of_turn>\n"
        "<start_of_turn>system\nStage: coding.<end_of_turn>\n"
        "<start_of_turn>user\nFix the bug.<end_of_turn>\n"
        "<start_of_turn>model\nDone.<end_of_turn>\n"
        "<start_of_turn>user\nThanks!<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_gemma_golden_system_in_first_user_turn() -> None:
    assert to_gemma(SMALL, system_turn=False) == (
        "<start_of_turn>user\nYou are cardloop.\n\nStage: coding.\n\nFix the bug.<end_of_turn>\n"
        "<start_of_turn>model\nDone.<end_of_turn>\n"
        "<start_of_turn>user\nThanks!<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    # No leading user turn: the system text gets a user turn of its own, never dropped.
    only_system = Conversation(system=(SystemBlock("Rules."),))
    assert to_gemma(only_system, system_turn=False) == (
        "<start_of_turn>user\nRules.<end_of_turn>\n<start_of_turn>model\n"
    )


def test_gemma_without_system_turn_is_not_round_trippable() -> None:
    # Documented limit: the Gemma 2/3 convention cannot be told apart from user text.
    got = intercept(to_gemma(SMALL, system_turn=False)).conversation
    assert got.system == ()
    assert got.turns[0] == Turn("user", "You are cardloop.\n\nStage: coding.\n\nFix the bug.")
    assert [t.text for t in got.turns[1:]] == ["Done.", "Thanks!"]


def test_human_assistant_golden() -> None:
    assert to_human_assistant(SMALL) == (
        "You are cardloop.\n\nStage: coding."
        "\n\nHuman: Fix the bug.\n\nAssistant: Done.\n\nHuman: Thanks!\n\nAssistant:"
    )
    no_system = Conversation(turns=(Turn("user", "hi"),))
    assert to_human_assistant(no_system) == "\n\nHuman: hi\n\nAssistant:"
    assert render(no_system, "human") == to_human_assistant(no_system)


def test_text_formats_leave_a_trailing_assistant_turn_open_as_prefill() -> None:
    conv = CONVERSATIONS["prefill"]
    assert to_chatml(conv).endswith('<|im_start|>assistant\n{"data":')
    assert to_gemma(conv).endswith('<start_of_turn>model\n{"data":')
    assert to_human_assistant(conv).endswith('\n\nAssistant: {"data":')
    # A blank trailing assistant turn is just the generation prompt.
    blank = Conversation(turns=(Turn("user", "q"), Turn("assistant", " ")))
    assert to_chatml(blank).endswith("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n")
    assert to_human_assistant(blank) == "\n\nHuman: q\n\nAssistant:"


# --------------------------------------------------------------------------- rules


def test_gemini_dedups_and_joins_all_system_text() -> None:
    conv = Conversation(
        system=(
            SystemBlock("Core rules."),
            SystemBlock(""),
            SystemBlock("Agent rules."),
            SystemBlock("Core rules.", cache=True),
        ),
        turns=(Turn("user", "hi"), Turn("assistant", "hello")),
    )
    got = to_gemini(conv)
    assert got["system_instruction"] == {"parts": [{"text": "Core rules.\n\nAgent rules."}]}
    assert [c["role"] for c in got["contents"]] == ["user", "model"]
    # No system message ever inside contents, and no system text leaks into it.
    for content in got["contents"]:
        assert content["role"] in ("user", "model")
        assert all("rules" not in part["text"] for part in content["parts"])
    assert "system_instruction" not in to_gemini(Conversation(turns=(Turn("user", "x"),)))


def test_anthropic_keeps_the_first_four_cache_breakpoints(caplog: Any) -> None:
    conv = Conversation(
        system=tuple(SystemBlock(f"s{i}", cache=True) for i in range(3)),
        turns=tuple(Turn("user", f"t{i}", cache=True) for i in range(3)),
    )
    with caplog.at_level(logging.WARNING, logger="cardloop.prompts.formats.render"):
        got = to_anthropic(conv)
    flagged = [b["text"] for b in got["system"] if "cache_control" in b]
    flagged += [
        m["content"][0]["text"] for m in got["messages"] if "cache_control" in m["content"][0]
    ]
    assert flagged == ["s0", "s1", "s2", "t0"]
    assert "2 later flagged blocks" in caplog.text


def test_anthropic_cache_flags_round_trip_through_anthropic() -> None:
    got = intercept(to_anthropic(SMALL)).conversation
    assert got == SMALL


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ({"system": "Be kind.", "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}, "anthropic"),
        (
            {
                "messages": [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
                    },
                ]
            },
            "anthropic",
        ),
        ({"messages": [{"role": "user", "content": "hi"}]}, "openai"),
        (
            {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]},
            "openai",
        ),
        ({"messages": [{"role": "tool", "tool_call_id": "c1", "content": "42"}]}, "openai"),
        ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, "gemini"),
        ({"systemInstruction": {"parts": [{"text": "s"}]}, "contents": []}, "gemini"),
        ("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "chatml"),
        ("<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "gemma"),
        (
            "<bos><start_of_turn>system\ns<end_of_turn>\n<start_of_turn>user\nhi<end_of_turn>\n",
            "gemma",
        ),
        ("\n\nHuman: hi\n\nAssistant:", "human"),
        ("Be brief.\n\nHuman: hi\n\nAssistant:", "human"),
        ("Human: hi\nAssistant: hello\nHuman: bye", "human"),
        ({"prompt": "\n\nHuman: hi\n\nAssistant:"}, "human"),
        ("just some text with Human: mid-line", "chatml"),
        ({"weird": "shape"}, "chatml"),
    ],
)
def test_detect_format(request_: Any, expected: str) -> None:
    assert detect_format(request_) == expected
    assert intercept(request_).detected_format == expected


# --------------------------------------------------------------------------- intercept shapes


def test_intercept_anthropic_tool_blocks_become_readable_text() -> None:
    request = {
        "system": [{"type": "text", "text": "Core.", "cache_control": EPHEMERAL}],
        "messages": [
            {"role": "user", "content": "List files."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "tu_1", "name": "ls", "input": {"path": "."}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu_1",
                        "content": [{"type": "text", "text": "a.py\nb.py"}],
                    }
                ],
            },
        ],
    }
    got = intercept(request)
    assert got.detected_format == "anthropic"
    assert got.conversation.system == (SystemBlock("Core.", cache=True),)
    assert got.conversation.turns == (
        Turn("user", "List files."),
        Turn("assistant", 'Listing.\n\n[tool_use ls id=tu_1]\n{"path": "."}'),
        Turn("user", "[tool_result id=tu_1]\na.py\nb.py"),
    )
    assert got.warnings == []


def test_intercept_openai_system_anywhere_tool_role_and_parts() -> None:
    request = {
        "messages": [
            {"role": "developer", "content": "First."},
            {"role": "user", "content": [{"type": "text", "text": "Run it."}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "run", "arguments": '{"cmd": "make"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            {"role": "system", "content": "Late system note."},
            {"role": "user", "content": "Next?"},
        ]
    }
    got = intercept(request)
    assert got.detected_format == "openai"
    assert [b.text for b in got.conversation.system] == ["First.", "Late system note."]
    assert got.conversation.normalized()[1] == (
        ("user", "Run it."),
        ("assistant", '[tool_call run id=call_1]\n{"cmd": "make"}'),
        ("user", "[tool result call_1]\nok"),
        ("user", "Next?"),
    )


def test_intercept_gemini_both_casings() -> None:
    for key in ("system_instruction", "systemInstruction"):
        request = {
            key: {"parts": [{"text": "A."}, {"text": "B."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [{"text": "hello"}]},
            ],
        }
        got = intercept(request).conversation
        assert got.normalized() == ("A.\n\nB.", (("user", "hi"), ("assistant", "hello")))


def test_intercept_gemma_without_system_turn_and_bos() -> None:
    text = "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nyo<end_of_turn>\n"
    got = intercept(text + "<start_of_turn>model\n")
    assert got.conversation.normalized() == ("", (("user", "hi"), ("assistant", "yo")))
    assert got.warnings == []


def test_trailing_generation_prompts_make_no_empty_turn() -> None:
    cases = [
        "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n",
        "<start_of_turn>user\nq<end_of_turn>\n<start_of_turn>model\n",
        "\n\nHuman: q\n\nAssistant:",
        "\n\nHuman: q\n\nAssistant: ",
    ]
    for text in cases:
        assert intercept(text).conversation.turns == (Turn("user", "q"),), text


# --------------------------------------------------------------------------- embedded markers


def test_clean_system_text_strips_markers_and_labels() -> None:
    assert clean_system_text("<|im_start|>system\nBe nice.<|im_end|>\n") == "Be nice."
    assert clean_system_text("<bos><start_of_turn>system\nBe nice.<end_of_turn>") == "Be nice."
    assert clean_system_text("Be nice.<|im_end|>") == "Be nice."
    assert (
        clean_system_text("Be nice.\n\nHuman: hi\n\nAssistant: hello") == "Be nice.\n\nhi\n\nhello"
    )
    # No markers (and "Human:" only mid-line, or a lone labelled line): unchanged.
    for plain in ("Plain text.\n\n  spaced  ", "Say Human: mid-line", "Format:\nAssistant: <a>"):
        assert clean_system_text(plain) == plain


@pytest.mark.parametrize(
    "embedded",
    [
        "<start_of_turn>system\nBe terse.<end_of_turn>\n<start_of_turn>user\nhi<end_of_turn>\n"
        "<start_of_turn>model\nhello<end_of_turn>\n<start_of_turn>model\n",
        "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>assistant\n",
        "Be terse.\n\nHuman: hi\n\nAssistant: hello\n\nAssistant:",
        "Be terse.\nHuman: hi\nAssistant: hello",
    ],
)
def test_embedded_transcript_in_system_is_cleaned_and_turns_kept(embedded: str) -> None:
    expected = ("Be terse.", (("user", "hi"), ("assistant", "hello"), ("user", "And now?")))
    openai = {
        "messages": [
            {"role": "system", "content": embedded},
            {"role": "user", "content": "And now?"},
        ]
    }
    anthropic = {"system": embedded, "messages": [{"role": "user", "content": "And now?"}]}
    gemini = {
        "system_instruction": {"parts": [{"text": embedded}]},
        "contents": [{"role": "user", "parts": [{"text": "And now?"}]}],
    }
    for request in (openai, anthropic, gemini):
        got = intercept(request)
        assert got.conversation.normalized() == expected
        assert any("embedded turn" in w for w in got.warnings)


def test_embedded_system_only_keeps_cache_flag() -> None:
    request = {
        "system": [
            {
                "type": "text",
                "text": "<|im_start|>system\nRules<|im_end|>",
                "cache_control": EPHEMERAL,
            }
        ],
        "messages": [{"role": "user", "content": "hi"}],
    }
    got = intercept(request).conversation
    assert got.system == (SystemBlock("Rules", cache=True),)
    assert got.turns == (Turn("user", "hi"),)


# --------------------------------------------------------------------------- fallback


def test_plain_text_falls_back_to_a_user_turn_with_a_warning(caplog: Any) -> None:
    text = "Please fix the login page.\n\nThanks, Human: Bob"
    with caplog.at_level(logging.WARNING, logger="cardloop.prompts.formats.intercept"):
        got = intercept(text)
    assert got.detected_format == "chatml"
    assert got.conversation == Conversation(turns=(Turn("user", text),))
    assert len(got.warnings) == 1 and "plain text" in got.warnings[0]
    assert "plain text" in caplog.text


def test_unknown_dict_keeps_its_text_as_a_user_turn() -> None:
    got = intercept({"input": "fix it", "meta": {"notes": ["one", "two"]}, "n": 3})
    assert got.detected_format == "chatml"
    assert got.conversation.turns == (Turn("user", "fix it\n\none\n\ntwo"),)
    assert got.warnings
    assert intercept({}).conversation == Conversation()


def test_malformed_messages_keep_user_text() -> None:
    got = intercept(
        {"messages": ["loose text", {"content": "no role"}, {"role": "bob", "content": "who"}, 7]}
    )
    texts = [t.text for t in got.conversation.turns]
    assert texts == ["loose text", "no role", "who"]
    assert len(got.warnings) == 3


# --------------------------------------------------------------------------- round trips

PAIRS = list(itertools.product(FORMATS, FORMATS))


@pytest.mark.parametrize("name", list(CONVERSATIONS))
@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_round_trip(name: str, src: str, dst: str) -> None:
    conv = CONVERSATIONS[name]
    got = intercept(render(conv, src))
    assert got.warnings == []
    if conv.turns:
        assert got.detected_format == src
    assert got.conversation.normalized() == conv.normalized()
    assert render(flat(got.conversation), dst) == render(flat(conv), dst)
    # And through the second format back again.
    again = intercept(render(got.conversation, dst)).conversation
    assert again.normalized() == conv.normalized()


# --------------------------------------------------------------------------- known limits


def test_limit_human_text_containing_a_turn_delimiter() -> None:
    conv = Conversation(turns=(Turn("user", "quote:\n\nHuman: hi"),))
    got = intercept(to_human_assistant(conv)).conversation
    assert got.normalized() != conv.normalized()
    assert got.normalized()[1] == (("user", "quote:"), ("user", "hi"))
    # The other formats carry it fine.
    for fmt in ("anthropic", "openai", "gemini", "chatml", "gemma"):
        assert intercept(render(conv, fmt)).conversation.normalized() == conv.normalized()


def test_human_lenient_form_and_mixed_form() -> None:
    lenient = intercept("Be brief.\nHuman: hi\nAssistant: hello\nHuman: bye").conversation
    assert lenient.normalized() == (
        "Be brief.",
        (("user", "hi"), ("assistant", "hello"), ("user", "bye")),
    )
    # Limit: with a blank-line delimiter present, a one-newline label is plain text.
    mixed = intercept("Sys\nHuman: hi\n\nAssistant:").conversation
    assert mixed.normalized() == ("Sys\nHuman: hi", ())


def test_limit_chatml_text_containing_its_own_marker() -> None:
    conv = Conversation(turns=(Turn("user", "a<|im_end|>b"),))
    assert intercept(to_chatml(conv)).conversation.normalized() != conv.normalized()


def test_limit_gemini_collapses_duplicate_system_blocks() -> None:
    conv = Conversation(system=(SystemBlock("same"), SystemBlock("same")))
    assert intercept(to_gemini(conv)).conversation.system_text == "same"
    assert conv.system_text == "same\n\nsame"


def test_limit_trailing_blank_assistant_turn_is_a_generation_prompt() -> None:
    conv = Conversation(turns=(Turn("user", "q"), Turn("assistant", "")))
    for fmt in ("chatml", "gemma", "human"):
        assert intercept(render(conv, fmt)).conversation.turns == (Turn("user", "q"),)
    for fmt in ("anthropic", "openai", "gemini"):
        assert intercept(render(conv, fmt)).conversation.normalized() == conv.normalized()


# --------------------------------------------------------------------------- properties

json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
json_like = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=25,
)
# Keys the parsers look at, so random dicts reach deep into every code path.
known_key = st.sampled_from(
    [
        "messages",
        "system",
        "contents",
        "system_instruction",
        "systemInstruction",
        "prompt",
        "role",
        "content",
        "type",
        "text",
        "parts",
        "tool_calls",
        "function",
        "input",
        "tool_use_id",
        "cache_control",
        "name",
        "arguments",
        "functionCall",
        "functionResponse",
    ]
)
role_value = st.sampled_from(["user", "assistant", "system", "developer", "tool", "model", "x"])
shaped = st.recursive(
    json_leaf | role_value,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(known_key | st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=30,
)
markers = st.sampled_from(
    [
        "<|im_start|>",
        "<|im_end|>",
        "<start_of_turn>",
        "<end_of_turn>",
        "\n\nHuman:",
        "\n\nAssistant:",
        "Human:",
        "Assistant:",
        "\n",
        "system\n",
        "user\n",
        "model\n",
        "assistant\n",
        "<bos>",
        " ",
    ]
)
marked_text = st.lists(markers | st.text(max_size=12), max_size=12).map("".join)
# HYPOTHESIS_EXAMPLES=5000 for a deeper local run; the default keeps CI quick.
_EXAMPLES = int(os.environ.get("HYPOTHESIS_EXAMPLES", "300"))
PROPERTY = settings(
    max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY
@given(st.dictionaries(st.text(max_size=10) | known_key, json_like | shaped, max_size=5))
def test_property_any_dict_never_raises(request_: dict[str, Any]) -> None:
    got = intercept(request_)
    assert got.detected_format in FORMATS
    assert detect_format(request_) in FORMATS
    for turn in got.conversation.turns:
        assert turn.role in ("user", "assistant") and isinstance(turn.text, str)


@PROPERTY
@given(marked_text | st.text())
def test_property_any_text_never_raises(text: str) -> None:
    got = intercept(text)
    assert got.detected_format in FORMATS
    assert all(isinstance(t.text, str) for t in got.conversation.turns)


@PROPERTY
@given(st.text(min_size=1))
def test_property_marker_free_text_is_one_user_turn(text: str) -> None:
    assume(detect_format(text) == "chatml" and "<|im_start|>" not in text)
    got = intercept(text)
    assert got.conversation.turns == (Turn("user", text),)
    assert got.warnings


def _present(text: str, conv: Conversation) -> bool:
    return any(text in t.text for t in conv.turns if t.role == "user")


@PROPERTY
@given(
    st.lists(marked_text.filter(bool) | st.text(min_size=1), min_size=1, max_size=4),
    marked_text | st.text(),
    st.booleans(),
)
def test_property_user_text_is_never_dropped(texts: list[str], system: str, blocks: bool) -> None:
    """Every user text, even one full of markers, is in some user turn of the result."""
    part = (lambda t: [{"type": "text", "text": t}]) if blocks else (lambda t: t)
    openai: list[dict[str, Any]] = [{"role": "system", "content": system}]
    openai += [{"role": "user", "content": part(t)} for t in texts]
    requests: list[dict[str, Any]] = [
        {"messages": openai},
        {"system": system, "messages": [{"role": "user", "content": part(t)} for t in texts]},
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "x", "content": part(t)}],
                }
                for t in texts
            ]
        },
        {"messages": [{"role": "tool", "tool_call_id": "c", "content": part(t)} for t in texts]},
        {
            "system_instruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": t}]} for t in texts],
        },
    ]
    for request in requests:
        got = intercept(request).conversation
        for text in texts:
            assert _present(text, got), (request, text)


# Texts built from the pieces formats care about (labels, markers' neighbours, newlines) and
# arbitrary characters; _round_trippable then excludes only the documented limits.
round_piece = st.sampled_from(
    [
        "Human:",
        "Assistant:",
        "Human: ",
        "\n",
        "\n\n",
        " ",
        "\t",
        "<bos>",
        "system",
        "model",
        "user",
        "<|endoftext|>",
        "✓",
        "日本",
        "🔍",
        "<",
        "|>",
        "_turn>",
    ]
)
round_text = st.lists(round_piece | st.text(max_size=8), max_size=8).map("".join)


def _round_trippable(conv: Conversation) -> bool:
    bad = (
        "<|im_start|>",
        "<|im_end|>",
        "<start_of_turn>",
        "<end_of_turn>",
        "\n\nHuman:",
        "\n\nAssistant:",
    )
    # The joined system text too: joining blocks can form a delimiter ("\n" + "\nHuman:").
    texts = [conv.system_text, *(b.text for b in conv.system), *(t.text for t in conv.turns)]
    if any(m in t for t in texts for m in bad):
        return False
    system = conv.system_text
    if system and (not system.strip() or system.startswith(("Human:", "Assistant:"))):
        return False
    if clean_system_text(system) != system or any(
        b.text and clean_system_text(b.text) != b.text for b in conv.system
    ):
        return False  # an embedded transcript: cleaned by design
    if len({b.text for b in conv.system if b.text}) != len([b for b in conv.system if b.text]):
        return False  # gemini sends identical blocks once
    return not (
        conv.turns and conv.turns[-1].role == "assistant" and not conv.turns[-1].text.strip()
    )


conversations = st.builds(
    Conversation,
    st.lists(st.builds(SystemBlock, round_text, st.booleans()), max_size=3).map(tuple),
    st.lists(
        st.builds(Turn, st.sampled_from(["user", "assistant"]), round_text, st.booleans()),
        max_size=5,
    ).map(tuple),
)


@PROPERTY
@given(conversations, st.sampled_from(PAIRS))
def test_property_round_trip(conv: Conversation, pair: tuple[str, str]) -> None:
    assume(_round_trippable(conv))
    src, dst = pair
    got = intercept(render(conv, src)).conversation
    assert got.normalized() == conv.normalized()
    assert render(flat(got), dst) == render(flat(conv), dst)
