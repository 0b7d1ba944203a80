"""A fold without a summary yet comes back as a plain value, not an exception."""

from __future__ import annotations

from cardloop.prompts.card import Message
from cardloop.prompts.conversation import Conversation
from cardloop.prompts.history import Fold, FoldRequest, HistoryFitter
from cardloop.prompts.scrub import Scrubber
from cardloop.prompts.settings import HistorySettings
from cardloop.prompts.tokens import TokenCounter
from tests.prompts.helpers import assemble, card, chat


def test_a_summarizer_without_a_summary_truncates_and_reports_the_fold_it_needs(counter: TokenCounter) -> None:
    asked: list[FoldRequest] = []

    def lookup_only(req: FoldRequest) -> str | None:
        asked.append(req)
        return None

    fit = HistoryFitter(counter, Scrubber(), HistorySettings()).fit(chat(80), 2_000, lookup_only)
    assert fit.mode == "truncated" and fit.tokens <= 2_000
    assert fit.fold_needed == Fold(asked[0].first, asked[0].last, asked[0].max_tokens)
    assert any(f"no summary of messages {asked[0].first + 1}-{asked[0].last + 1} yet" in r.reason for r in fit.rows)

    # The same range, summarized: the fit folds it and needs nothing more.
    done = HistoryFitter(counter, Scrubber(), HistorySettings()).fit(
        chat(80), 2_000, lambda req: f"Summary of messages {req.first + 1}-{req.last + 1}.")
    assert done.mode == "summarized" and done.fold_needed is None


def test_a_failing_summarizer_needs_no_fold(counter: TokenCounter) -> None:
    def broken(req: FoldRequest) -> str | None:
        raise TimeoutError("model timed out")

    fit = HistoryFitter(counter, Scrubber(), HistorySettings()).fit(chat(80), 2_000, broken)
    assert fit.mode == "truncated" and fit.fold_needed is None


def test_the_assembled_prompt_carries_the_fold_and_round_trips_its_conversation() -> None:
    messages: tuple[Message, ...] = chat(300)
    prompt = assemble(card(history=list(messages)), summarizer=lambda req: None)
    assert prompt.history_mode == "truncated" and prompt.fold_needed is not None
    payload = prompt.payload()
    assert Conversation.from_payload(payload) == prompt.conversation
    assert payload["model"] == prompt.settings.model and payload["tokens"] == prompt.sections
