"""The replay window's answer (cardloop/app/boards/replay.py)."""

from __future__ import annotations

import pytest

from cardloop.app.boards.events import WebhookError
from cardloop.app.boards.replay import check_window

NOW = 1_795_000_000.0


def refusal(sent: float) -> str:
    with pytest.raises(WebhookError) as caught:
        check_window(sent, NOW, 300, "generic")
    assert caught.value.status == 401
    return str(caught.value)


def test_an_event_time_out_of_the_window_is_refused_with_its_distance() -> None:
    assert "the signed event time is 3600 s away from now (boards.generic.replay_window_seconds is 300)" \
        in refusal(NOW - 3600)
    check_window(NOW - 299, NOW, 300, "generic")  # within: no answer


def test_an_absurd_event_time_is_refused_in_one_short_line() -> None:
    # A generic sender's "timestamp": 1e308 is a finite number; the answer used to print it whole.
    for sent in (1e308, -1e308, NOW + 11 * 365 * 86400):
        message = refusal(sent)
        assert "more than ten years away from now" in message and len(message) < 200, message
