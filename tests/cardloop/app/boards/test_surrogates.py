"""A lone surrogate in a board's delivery is a 400 naming the field, on every board.

JSON's unpaired "\\ud800" escape parses into a lone surrogate, which nothing downstream can
encode (the store, Temporal's payload converter, a log): before, such a delivery failed late,
as a 500 or as a 503 that asked the board to redeliver it forever."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from cardloop.app.boards.adapters import BoardAdapter, build_adapters
from cardloop.app.boards.events import WebhookError

from .conftest import fixture_bytes, make_config

# (board, fixture, a JSON string of that fixture to break, headers the adapter reads)
CASES = [
    ("linear", "linear/issue_update_state.json", b'"Retry failed payouts with exponential backoff"',
     {"Linear-Event": "Issue"}),
    ("jira", "jira/issue_updated_status.json", b'"Retry failed payouts with exponential backoff"', {}),
    ("trello", "trello/update_card_move.json", b'"Retry failed payouts with exponential backoff"', {}),
    ("github", "github/issue_comment.created.json", b'"You are totally right! I\'ll get this fixed right away."',
     {"X-GitHub-Event": "issue_comment"}),
]


@pytest.fixture
async def adapters() -> AsyncIterator[dict[str, BoardAdapter]]:
    async with httpx.AsyncClient() as http:
        yield build_adapters(make_config(), http)


@pytest.mark.parametrize(("board", "fixture", "target", "headers"), CASES)
@pytest.mark.parametrize("escape", [b"\\ud800", b"\\udfff", b"\\ud83d"])
async def test_board_payloads_with_a_lone_surrogate_are_400(adapters: dict[str, BoardAdapter], board: str,
                                                            fixture: str, target: bytes, headers: dict[str, str],
                                                            escape: bytes) -> None:
    raw = fixture_bytes(fixture)
    assert target in raw, f"{fixture} no longer holds {target!r}"
    body = raw.replace(target, target[:-1] + escape + b'"', 1)
    with pytest.raises(WebhookError) as info:
        await adapters[board].parse(httpx.Headers(headers), body)
    assert info.value.status == 400
    assert "lone surrogate U+D" in info.value.message and info.value.message.startswith("body.")
    info.value.message.encode("utf-8")  # the answer itself can be sent


async def test_generic_payload_names_the_field_and_a_key(adapters: dict[str, BoardAdapter]) -> None:
    body = b'{"card_id": "OPS-7", "to_column": "planning", "delivery_id": "d1", "title": "hi \\ud800"}'
    with pytest.raises(WebhookError) as info:
        await adapters["generic"].parse(httpx.Headers(), body)
    assert info.value.status == 400 and info.value.message.startswith("body.title: lone surrogate U+D800")
    body = b'{"card_id": "OPS-7", "to_column": "planning", "delivery_id": "d1", "\\udc00": "x"}'
    with pytest.raises(WebhookError) as info:
        await adapters["generic"].parse(httpx.Headers(), body)
    assert "body.\\udc00 (a key): lone surrogate U+DC00" in info.value.message


async def test_a_valid_surrogate_pair_is_text(adapters: dict[str, BoardAdapter]) -> None:
    body = b'{"card_id": "OPS-7", "to_column": "planning", "delivery_id": "d1", "title": "ship it \\ud83d\\ude80"}'
    [event] = await adapters["generic"].parse(httpx.Headers(), body)  # type: ignore[misc]
    assert event.title == "ship it \U0001f680"
