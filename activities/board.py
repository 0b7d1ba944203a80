"""board.comment and board.move: the card's progress back on its board, exactly once.

Each write follows activities/once.py: the result stored under the write's key (the marker,
`<card>/<run>/<kind>`) is returned when there is one; else the board client finds what an
earlier attempt made before it acts (the comment carrying the marker, the card's current
column, its labels), acts, and the result is recorded. So a retried activity, a worker killed
mid-call or a redelivered webhook never posts twice.

A board the worker has no credential for is skipped, with the reason (one line) in the result,
which the card's details show. A rate limit or an outage retries after the wait the board asked
for (Retry-After, GitHub's reset, Jira's 429); a permanent refusal (401, 403, 404, a column the
board does not have) is recorded as the result and never fails the stage. Model text (the plan,
a review, a reason) is redacted before it leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing

from temporalio import activity

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.errors import from_upstream, stored_fields
from cardloop.activities.heartbeat import call_with_heartbeat
from cardloop.activities.once import recorded_once
from cardloop.contracts import names
from cardloop.contracts.payloads import BoardCommentInput, BoardMoveInput, BoardWrite
from cardloop.integrations.board_clients.base import BoardCard, BoardClient, Written
from cardloop.integrations.board_clients.registry import CLIENTS, client_for, unavailable
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card
from cardloop.prompts.redact import DEFAULT_REDACTOR

BOARD_UNAVAILABLE = "BoardUnavailable"  # retryable: the board rate-limits, fails or cannot be reached
QUOTE_CHARS = 6_000
WORDS = {"completed": "completed", "blocked": "is blocked", "budget_exhausted": "ran out of budget",
         "failed": "failed", "cancelled": "was cancelled"}
QUOTED = {"planning": "The plan", "review": "The review"}


def _redacted(text: str) -> str:
    return DEFAULT_REDACTOR.redact(text).text


def started_text(inp: BoardCommentInput) -> str:
    return f"cardloop · {inp.stage} (run {inp.run}) started: the agent is working on this card."


def outcome_text(inp: BoardCommentInput, quoted: str) -> str:
    """What a person on the board needs: the result, the question when blocked, the cause and
    how to retry when failed, the pull request and where the card goes next."""
    lines = [f"cardloop · {inp.stage} (run {inp.run}) {WORDS.get(inp.outcome, inp.outcome)}.", ""]
    reason = _redacted(inp.reason)[:2_000]
    if inp.outcome == "blocked":
        lines += [f"Question for the team: {reason}", "",
                  f"Answer with a comment on this card and cardloop runs {inp.stage} again with your answer, "
                  "or move the card to another column.", ""]
    elif inp.outcome == "failed":
        retry = _redacted(inp.retry) if inp.retry else "move the card to its column again."
        lines += [f"Root cause: {reason}", "", f"How to retry: {retry}", ""]
    elif reason:
        lines += [reason, ""]
    if quoted and inp.outcome == "completed":
        text = _redacted(quoted)
        if len(text) > QUOTE_CHARS:
            text = text[:QUOTE_CHARS] + " […]"
        lines += [f"{QUOTED.get(inp.stage, 'The result')}:", "", text, ""]
    if inp.pull_request:
        lines.append(f"Pull request: {_redacted(inp.pull_request)}")
    if inp.next_stage:
        lines.append(f"Next: {inp.next_stage}.")
    return "\n".join(lines).strip()


class BoardActivities:
    def __init__(self, rt: ActivityDeps) -> None:
        self.rt = rt

    def _card(self, card_key: str) -> Card:
        return stored_fields(self.rt.store, card_key)

    def _write(self, card_key: str, card: Card, key: str, kind: str, what: str, pr: str,
               do: Callable[[BoardClient, BoardCard], Written], *, column: str = "", quote: str = "") -> BoardWrite:
        """The write once per key; a permanent failure is the recorded result, a passing one retries.
        `quote` (a comment's first line) goes into what it did: a start and an end comment on the
        same card read alike otherwise, on `card show` and in the demo."""
        # The card's id on its board now: a card moved to another team or project since it was
        # created (ENG-123, now OPS-45) is written to under its new id (store/aliases.py).
        on_board = BoardCard(board=card.board, card_id=self.rt.store.board_name(card_key), url=card.url,
                             repo=card.repo, pull_request=pr)

        def act() -> BoardWrite:
            try:
                with closing(client_for(self.rt.config, card.board)) as client:
                    done = call_with_heartbeat(lambda: do(client, on_board), detail=f"{card.board}: {what}")
            except UpstreamError as err:
                if err.retryable:
                    raise from_upstream(err, retry_type=BOARD_UNAVAILABLE) from None
                activity.logger.warning("%s %s refused for good: %s", card.board, what, err)
                return BoardWrite(failed=_redacted(str(err))[:1_000])
            except ValueError as err:  # a credential in the wrong shape, a marker we built wrong
                return BoardWrite(failed=str(err)[:1_000])
            said = f"{card.board}: {done.done}" + (f": {quote}" if quote else "")
            return BoardWrite(done=said, target=done.target, column=column)

        return recorded_once(self.rt.store, card_key, key, kind, BoardWrite, act)

    def _turned_off(self, board: str) -> bool:
        """A known board whose writes config turns off (write_token_env = ""): nothing, not even a dry run."""
        return board in CLIENTS and not self.rt.config.board(board).write_token_env

    @activity.defn(name=names.BOARD_COMMENT)
    def comment(self, inp: BoardCommentInput) -> BoardWrite:
        card = self._card(inp.card_key)
        why = unavailable(self.rt.config, card.board)
        if why is not None and self._turned_off(card.board):
            return BoardWrite(skipped=why)
        if inp.kind == "started":
            body = started_text(inp)
        else:
            reply = self.rt.store.last_reply(inp.card_key, inp.stage) if inp.stage in QUOTED else None
            body = outcome_text(inp, reply.content if reply else "")
        if why is not None:
            return BoardWrite(skipped=why, would=f"would comment: {body.splitlines()[0]}")
        return self._write(inp.card_key, card, inp.key, "board_comment", f"comment {inp.kind} of {inp.stage}",
                           inp.pull_request, lambda client, on: client.comment(on, body=body, marker=inp.key),
                           quote=body.splitlines()[0][:200])

    @activity.defn(name=names.BOARD_MOVE)
    def move(self, inp: BoardMoveInput) -> BoardWrite:
        card = self._card(inp.card_key)
        why = unavailable(self.rt.config, card.board)
        cfg = self.rt.config.board(card.board)
        if why is not None:
            if self._turned_off(card.board):
                return BoardWrite(skipped=why)
            if inp.unblock:
                return BoardWrite(skipped=why, would=f"would take the card out of {cfg.blocked_column!r}"
                                  if cfg.blocked_column else f"would remove the label {cfg.blocked_label!r}")
            if inp.blocked:
                where = f"move the card to {cfg.blocked_column!r}" if cfg.blocked_column else \
                    f"label the card {cfg.blocked_label!r}" if cfg.blocked_label else "mark the card blocked"
                return BoardWrite(skipped=why, would=f"would {where}")
            column = cfg.write_column(inp.stage)
            where = repr(column) if column else f"the column of {inp.stage}"
            return BoardWrite(skipped=why, would=f"would move the card to {where}")
        if inp.unblock:
            if cfg.blocked_column:
                back = cfg.write_column(inp.stage)
                if back is None:
                    return BoardWrite(skipped=f"no column of boards.{card.board}.columns shows {inp.stage}")
                return self._write(inp.card_key, card, inp.key, "board_move", f"unblocked: move to {back!r}", "",
                                   lambda client, on: client.move(on, back, key=inp.key), column=back)
            if cfg.blocked_label:
                label = cfg.blocked_label
                return self._write(inp.card_key, card, inp.key, "board_move", f"unblocked: remove {label!r}", "",
                                   lambda client, on: client.unlabel(on, label, key=inp.key))
            return BoardWrite(skipped=f"boards.{card.board} names no blocked_column or blocked_label")
        if inp.blocked:
            if cfg.blocked_column:
                column = cfg.blocked_column
                return self._write(inp.card_key, card, inp.key, "board_move", f"blocked: move to {column!r}", "",
                                   lambda client, on: client.move(on, column, key=inp.key), column=column)
            if cfg.blocked_label:
                label = cfg.blocked_label
                return self._write(inp.card_key, card, inp.key, "board_move", f"blocked: label {label!r}", "",
                                   lambda client, on: client.label(on, label, key=inp.key))
            return BoardWrite(skipped=f"boards.{card.board} names no blocked_column or blocked_label")
        target = cfg.write_column(inp.stage)
        if target is None:
            return BoardWrite(skipped=f"no column of boards.{card.board}.columns shows {inp.stage}")
        return self._write(inp.card_key, card, inp.key, "board_move", f"move to {target!r}", "",
                           lambda client, on: client.move(on, target, key=inp.key), column=target)
