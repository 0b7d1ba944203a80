"""Each board client against a loopback fake of its board's API: a comment is found by its
marker before anything is posted, a move reads the card's column first, a blocked label is
added once; refusals are final UpstreamErrors, rate limits retryable with the board's wait."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from cardloop.app.boards.signatures import verify_github
from cardloop.contracts.secrets import Secret
from cardloop.integrations.board_clients.base import BoardCard, BoardClient, is_own_comment
from cardloop.integrations.board_clients.generic import GenericBoard
from cardloop.integrations.board_clients.github import GitHubBoard
from cardloop.integrations.board_clients.jira import JiraBoard, adf, adf_text
from cardloop.integrations.board_clients.linear import LinearBoard
from cardloop.integrations.board_clients.trello import TrelloBoard
from cardloop.integrations.upstream import UpstreamError
from tests.cardloop.integrations.board_clients.fake_boards import CARD_ID, Board, adf_plain, serving

BOARDS = ["github", "linear", "jira", "trello", "generic"]
# The column each board calls the review stage, and a label it knows.
REVIEW = {"github": "In Review", "linear": "In Review", "jira": "In Review", "trello": "Review", "generic": "review"}
LABEL = {"github": "cardloop: blocked", "linear": "cardloop: blocked", "jira": "cardloop-blocked",
         "trello": "cardloop: blocked", "generic": "cardloop: blocked"}


def client(name: str, board: Board, token: str | None = None) -> BoardClient:
    secret = Secret(token or board.token)
    if name == "github":
        return GitHubBoard(board.url, f"{board.url}/graphql", secret, write_interval=None)
    return {"linear": LinearBoard, "jira": JiraBoard, "trello": TrelloBoard}.get(name, GenericBoard)(board.url, secret)


def card(name: str) -> BoardCard:
    return BoardCard(board=name, card_id=CARD_ID[name])


def texts(name: str, board: Board) -> list[str]:
    return [adf_plain(json.loads(c)) for c in board.comments] if name == "jira" else board.comments


@pytest.mark.parametrize("name", BOARDS)
def test_comment_move_and_label_each_happen_once(name: str) -> None:
    with serving(name) as board:
        c = client(name, board)
        try:
            first = c.comment(card(name), body="cardloop · planning (run 1) started.", marker="acme/x/1/started")
            again = c.comment(card(name), body="cardloop · planning (run 1) started.", marker="acme/x/1/started")
            other = c.comment(card(name), body="cardloop · planning (run 1) completed.", marker="acme/x/1/planning")
            moved = c.move(card(name), REVIEW[name], key="acme/x/1/move")
            stays = c.move(card(name), REVIEW[name], key="acme/x/1/move")
            labelled = c.label(card(name), LABEL[name], key="acme/x/1/blocked")
            still = c.label(card(name), LABEL[name], key="acme/x/1/blocked")
            had = list(board.labels)
            removed = c.unlabel(card(name), LABEL[name], key="acme/x/2/resume")
            gone = c.unlabel(card(name), LABEL[name], key="acme/x/2/resume")
        finally:
            c.close()
        said = texts(name, board)
        assert len(said) == 2 and said[0].startswith("cardloop · planning (run 1) started.")
        assert all(is_own_comment(t) for t in said)  # what the inbound adapters recognise as our echo
        assert first.acted and other.acted and moved.acted and labelled.acted
        assert board.column == REVIEW[name] and board.moves == [REVIEW[name]]
        assert had == [LABEL[name]] and board.labels == [] and removed.acted
        if name != "generic":  # a board that can be read: the second write of each found the first
            assert not again.acted or name == "github"
            assert not stays.acted and not still.acted and not gone.acted


@pytest.mark.parametrize("name", ["github", "linear", "jira", "trello"])
def test_a_column_the_board_does_not_have_is_refused_for_good(name: str) -> None:
    with serving(name) as board:
        c = client(name, board)
        with pytest.raises(UpstreamError) as err:
            c.move(card(name), "Limbo")
        c.close()
    assert not err.value.retryable and "'Limbo'" in err.value.message and board.moves == []


@pytest.mark.parametrize("name", BOARDS)
def test_a_wrong_credential_is_final_and_never_printed(name: str) -> None:
    with serving(name) as board:
        wrong = "bot@acme.example:WRONG" if name == "jira" else "k:WRONG" if name == "trello" else "WRONG-" + "x" * 20
        c = client(name, board, token=wrong)
        with pytest.raises(UpstreamError) as err:
            c.comment(card(name), body="hello", marker="acme/x/1/started")
        c.close()
    assert not err.value.retryable and err.value.kind == "auth" and "WRONG" not in err.value.message
    assert board.comments == []


@pytest.mark.parametrize("name", ["linear", "jira", "trello", "generic"])
def test_a_429_asks_for_the_wait_its_retry_after_names(name: str) -> None:
    with serving(name) as board:
        board.fail(".", 429, {"message": "Rate limit exceeded"}, {"Retry-After": "7"})
        c = client(name, board)
        with pytest.raises(UpstreamError) as err:
            c.comment(card(name), body="hello", marker="acme/x/1/started")
        c.close()
    assert err.value.retryable and err.value.kind == "rate_limited" and err.value.retry_after == 7.0


def test_github_rate_limit_waits_for_its_reset_and_linear_for_ratelimited() -> None:
    import time
    with serving("github") as board:
        board.fail("graphql", 403, {"message": "API rate limit exceeded for user ID 9."},
                   {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 120)})
        c = client("github", board)
        with pytest.raises(UpstreamError) as err:
            c.move(card("github"), "Done")
        c.close()
    assert err.value.retryable and 100 <= (err.value.retry_after or 0) <= 121
    with serving("linear") as board:
        board.fail(".", 400, {"errors": [{"message": "Rate limit exceeded", "extensions": {"code": "RATELIMITED"}}]},
                   {"X-RateLimit-Requests-Reset": str(int((time.time() + 30) * 1000))})
        c = client("linear", board)
        with pytest.raises(UpstreamError) as err:
            c.move(card("linear"), "Done")
        c.close()
    assert err.value.retryable and err.value.kind == "rate_limited"


def test_a_write_whose_answer_was_lost_is_found_by_the_next_attempt() -> None:
    # Jira applied the comment, then the answer failed (a 502 from a proxy, a worker killed):
    # the retry reads the comments first and finds the marker.
    with serving("jira") as board:
        board.fail("POST .*/comment", 502, {"message": "Bad Gateway"}, after=True)
        c = client("jira", board)
        with pytest.raises(UpstreamError) as err:
            c.comment(card("jira"), body="cardloop · coding (run 2) completed.", marker="acme/x/2/coding")
        assert err.value.retryable
        retried = c.comment(card("jira"), body="cardloop · coding (run 2) completed.", marker="acme/x/2/coding")
        c.close()
    assert not retried.acted and len(board.comments) == 1
    assert adf_text(json.loads(board.comments[0])).splitlines()[-1] == "cardloop:acme/x/2/coding"


def test_a_persons_jira_reply_quoting_our_comment_is_not_our_comment() -> None:
    # Our comment was deleted; the reply that quoted it (an ADF blockquote, marker line and all)
    # stays. The marker, quoted, says nothing of what we posted: the comment is posted again.
    marker = "cardloop:acme/x/1/ended"
    quoted = {"type": "doc", "version": 1, "content": [
        {"type": "blockquote", "content": [{"type": "paragraph", "content": [{"type": "text", "text": marker}]}]},
        {"type": "paragraph", "content": [{"type": "text", "text": "Use 30 seconds."}]}]}
    with serving("jira") as board:
        board.comments.append(json.dumps(quoted))
        c = client("jira", board)
        written = c.comment(card("jira"), body="cardloop · planning (run 1) is blocked.", marker="acme/x/1/ended")
        c.close()
    assert written.acted and len(board.comments) == 2
    assert adf_text(quoted) == f"> {marker}\nUse 30 seconds.\n"


def as_stored(name: str, text: str) -> str:
    """`text` as the board keeps a comment: Jira's an ADF document."""
    return json.dumps(adf(text)) if name == "jira" else text


@pytest.mark.parametrize("name", ["github", "linear", "jira", "trello"])
def test_another_accounts_comment_carrying_our_marker_is_not_ours(name: str) -> None:
    """A person (or another bot) who pastes our marker neither gets their comment overwritten
    nor stops cardloop's: only a comment by cardloop's own account is found by its marker."""
    marker = "acme/x/1/ended"
    hidden = f"<!-- cardloop:{marker} -->" if name == "github" else f"cardloop:{marker}"
    with serving(name) as board:
        board.add_comment(as_stored(name, f"I copied this.\n\n{hidden}"), author="mallory")
        theirs = board.comments[0]
        c = client(name, board)
        try:
            written = c.comment(card(name), body="cardloop · coding (run 1) completed.", marker=marker)
            again = c.comment(card(name), body="cardloop · coding (run 1) completed.", marker=marker)
        finally:
            c.close()
    assert written.acted and board.comments[0] == theirs and len(board.comments) == 2
    assert texts(name, board)[1].startswith("cardloop · coding (run 1) completed.")
    assert name == "github" or not again.acted  # the retry found cardloop's own comment


@pytest.mark.parametrize("name", BOARDS)
def test_marker_lookalikes_in_a_comment_are_defused(name: str) -> None:
    """A model's reply quoting another run's marker line is posted with the line defused: that
    run's comment is still posted, and the inbound adapters see one marker per comment."""
    reply = "The plan:\ncardloop:acme/x/1/coding\n<!-- cardloop:acme/x/1/coding -->\nDone."
    with serving(name) as board:
        c = client(name, board)
        try:
            c.comment(card(name), body=reply, marker="acme/x/1/planning")
            coding = c.comment(card(name), body="cardloop · coding (run 1) completed.", marker="acme/x/1/coding")
        finally:
            c.close()
        said = texts(name, board)
    assert "cardloop (quoted):acme/x/1/coding" in said[0] and "\ncardloop:acme/x/1/coding" not in said[0]
    assert "<!-- cardloop:acme/x/1/coding" not in said[0]
    assert coding.acted and len(said) == 2


def test_the_generic_webhook_is_signed_like_the_incoming_one_and_keeps_its_delivery_id() -> None:
    with serving("generic") as board:
        c = client("generic", board)
        c.comment(card("generic"), body="done", marker="acme/generic/OPS-7/3/coding")
        c.comment(card("generic"), body="done", marker="acme/generic/OPS-7/3/coding")  # a retry: same delivery
        c.close()
    first, second = board.requests
    verify_github({"x-hub-signature-256": first.headers["x-hub-signature-256"]}, first.raw, board.token)
    sent = json.loads(first.raw)
    assert sent["delivery_id"] == json.loads(second.raw)["delivery_id"] == first.headers["x-cardloop-delivery"]
    assert sent["event"] == "comment" and sent["card_id"] == "OPS-7" and sent["actor"] == "cardloop"
    assert board.comments == ["done\n\ncardloop:acme/generic/OPS-7/3/coding"]  # the receiver applied it once
    expected = hmac.new(board.token.encode(), first.raw, hashlib.sha256).hexdigest()
    assert first.headers["x-hub-signature-256"] == f"sha256={expected}"
