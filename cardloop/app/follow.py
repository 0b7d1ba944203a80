"""Following one stage run of a card until it ends (`cardloop card move --wait/--follow`):
its turns, the agent's tool calls and their results as they join the history, a model call
waiting for its next attempt, then the outcome, which becomes the command's exit code.

Polling, not a stream from Temporal: the card's state query and the store answer what a
person wants to see, and neither needs a worker of the follower's own."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable

from temporalio.service import RPCError

from cardloop.app.cards import QUERY_TIMEOUT, CardService, NoWorkerAnswered
from cardloop.contracts import names
from cardloop.contracts.errors import CardloopError
from cardloop.contracts.payloads import CardRef, CardState, StageProgress, StageRun, tokens_spent
from cardloop.prompts.card import Message
from cardloop.prompts.scrub import redact_text

# The command's exit code per outcome: scripts tell a finished stage from one that needs a person.
OUTCOME_EXIT = {"completed": 0, "failed": 1, "blocked": 3, "budget_exhausted": 4, "cancelled": 5}
MARKS = {"completed": "✓", "blocked": "⏸", "cancelled": "↷"}


class StoppedWaiting(CardloopError):
    """--timeout passed before the run ended; the run goes on (as timeout(1) says it: 124)."""

    exit_code = 124


def followed_run(before: CardState | None, to: str) -> int:
    """The stage run a move to `to` leads to: the running one when the card already runs that
    stage (the move leaves it running), else the next one."""
    if before is None:
        return 1
    if before.status == "running" and before.stage == to:
        return before.stage_runs
    return before.stage_runs + 1


def agent_lines(messages: list[Message], *, replies: bool = False) -> list[str]:
    """The agent's tool calls of a stage and the first line of what each returned (with
    `replies`, also each reply's first line: stages without tools show their answers)."""
    lines: list[str] = []
    for m in messages:
        # Redacted before anything is cut: half a secret is no longer recognized as one.
        content = redact_text(m.content)
        if replies and m.role == "assistant" and content.strip():
            lines.append(f"    ◆ {next(ln for ln in content.splitlines() if ln.strip())[:110]}")
        for call in m.tool_calls:
            arg = next((str(call.input[k]) for k in ("command", "path", "pattern") if k in call.input), "")
            lines.append(f"    ⚙ {call.name} {redact_text(arg)[:100]}".rstrip())
        if m.role == "tool":
            first = next((ln for ln in content.splitlines() if ln.strip()), "")
            tail = [ln for ln in content.splitlines() if " passed" in ln or " failed" in ln]
            lines.append(f"      {'✗' if m.is_error else '→'} {(tail[-1] if tail else first)[:110]}")
        elif m.author == "cardloop" and content:
            lines.append(f"    ☑ {content.splitlines()[0][:110]}")
    return lines


def redacting(out: Callable[[str], None]) -> Callable[[str], None]:
    """`out` with every line redacted first: the history and the runs' reasons are kept as the
    model and the board sent them (README, Secrets), so a terminal is a way out of the store too."""
    return lambda line: out(redact_text(line))


def say_unavailable(unavailable: Iterable[str], said: set[str], out: Callable[[str], None]) -> None:
    """Each context source the run goes without, once (`said` keeps what was said)."""
    for missing in unavailable:
        if missing not in said:
            said.add(missing)
            out(f"  ⚠ going on without {missing}")


def cached_said(read: int, written: int) -> str:
    """The prompt tokens the provider's cache served or stored, as card show's usage line says them."""
    return ", ".join(part for part in (f"{read:,} read from the cache" if read else "",
                                       f"{written:,} written to it" if written else "") if part)


def tokens_said(r: StageRun | StageProgress) -> str:
    """The run's tokens as its cost counts them: the turns', the summarizer's and its research's,
    the prompt tokens its cache served or stored included (each priced on its own, all paid for)."""
    summary = r.summary_input_tokens + r.summary_output_tokens
    research = r.research_input_tokens + r.research_output_tokens
    total = tokens_spent(r)
    notes = [f"{summary:,} of them the summarizer's" if summary else "",
             f"{research:,} its research's" if research else "",
             cached_said(r.cache_read_tokens, r.cache_write_tokens)]
    said = "; ".join(n for n in notes if n)
    return f"{total:,} tokens" + (f" ({said})" if said else "")


def outcome_line(r: StageRun) -> str:
    return (f"  {MARKS.get(r.outcome, '✗')} {r.stage} run {r.run}: {r.outcome} after {r.iterations} turn(s), "
            f"{tokens_said(r)}, ${r.cost_usd:.4f}: {r.reason}")


# The notes a stage run's reason ends with when its result did not reach GitHub (workflows/stage.py).
_PR_NOTES = ("the pull request could not be opened: ", "no pull request: ")
_REVIEW_NOTES = ("the review could not be posted: ", "review not posted: ")


def result_lines(r: StageRun, *, limit: int = 160) -> list[str]:
    """Where the run's work is on GitHub: its pull request or review link; else, when opening or
    posting it failed, why (the note at the end of a reason a one-line view cuts)."""
    lines = []
    if r.pull_request:
        lines.append(f"pull request: {r.pull_request}")
    elif (why := _note(r.reason, _PR_NOTES)) is not None:
        lines.append(f"pull request: not opened: {_clip(why, limit)}")
    if r.review:
        lines.append(f"review: {r.review}")
    elif (why := _note(r.reason, _REVIEW_NOTES)) is not None:
        lines.append(f"review: not posted: {_clip(why, limit)}")
    return lines


def _note(reason: str, openers: tuple[str, ...]) -> str | None:
    """The text of the last "(<opener>...)" in `reason`, its own parentheses kept."""
    found = max(((reason.rfind(f"({o}"), o) for o in openers), default=(-1, ""))
    at, opener = found
    if at < 0:
        return None
    start = at + 1 + len(opener)
    depth = 1
    for i in range(start, len(reason)):
        depth += {"(": 1, ")": -1}.get(reason[i], 0)
        if depth == 0:
            return reason[start:i].strip()
    return reason[start:].strip()


def _clip(text: str, limit: int) -> str:
    """The why, short: not what was being done (the line says it), GitHub's answer kept."""
    text = re.sub(r"^(?:pull request|review) for \S+: ", "", text)
    text = re.sub(r" while [^()]*?(?= \()", "", text, count=1)
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _progress(svc: CardService, ref: CardRef, stage: str, run: int) -> StageProgress | None:
    handle = svc.client.get_workflow_handle(f"{ref.workflow_id}/{run}-{stage}")
    try:
        return await handle.query(names.QUERY_PROGRESS, result_type=StageProgress)
    except RPCError:  # not started yet, or closed with no worker to replay it
        return None


def _this_run_on(keyed: list[tuple[str | None, Message]], ref: CardRef, run: int) -> list[Message]:
    """The messages up to the first one a later stage run wrote (its dedup key names it): an
    auto-advanced next stage may have written before this poll saw the followed run end, and
    its lines must not show under this run (nor before its outcome line)."""
    prefix = f"{ref.workflow_id}/"
    kept = []
    for key, message in keyed:
        if key and key.startswith(prefix):
            number = key[len(prefix):].split("-", 1)[0]
            if number.isdigit() and int(number) > run:
                break
        kept.append(message)
    return kept


async def follow(svc: CardService, ref: CardRef, stage: str, run: int, *, out: Callable[[str], None],
                 verbose: bool, timeout: float | None, messages_from: int, poll: float = 0.25) -> StageRun:
    """Until run `run` of `stage` is in the card's history: its record. With `verbose`, what it
    does meanwhile, line by line. StoppedWaiting after `timeout` seconds (None: no limit)."""
    out = redacting(out)
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    shown_messages, turn, retry = messages_from, 0, ""
    missed: set[str] = set()
    waiting_for_worker = False
    while True:
        try:  # bounded, so --timeout holds while no worker answers (the move waits in Temporal)
            state = await svc.state(ref, timeout=QUERY_TIMEOUT if deadline is None
                                    else max(1.0, min(QUERY_TIMEOUT, deadline - loop.time())))
        except NoWorkerAnswered as err:
            if not waiting_for_worker:
                out(f"  … {err}; waiting for one (the card takes the move up when a worker runs)")
            waiting_for_worker, state = True, None
        ended = next((r for r in reversed(state.history) if r.run == run), None) if state else None
        if verbose:
            fresh = _this_run_on(svc.store.keyed_messages(ref.key, start=shown_messages), ref, run)
            shown_messages += len(fresh)
            for line in agent_lines(fresh, replies=True):
                out(line)
        if ended is not None:
            if verbose:  # a quick run may end between two polls
                say_unavailable(ended.unavailable, missed, out)
            out(outcome_line(ended))
            for line in result_lines(ended):
                out(f"  ↗ {line}")
            if ended.commits:
                out(f"  ⎇ {ended.commits} commit(s) pushed to the card's branch, last {ended.last_commit[:12]}")
            return ended
        if verbose and state is not None and state.status == "running" and state.stage_runs == run:
            progress = await _progress(svc, ref, stage, run)
            if progress is not None:
                say_unavailable(progress.unavailable, missed, out)
            if progress is not None and progress.iteration != turn:
                turn = progress.iteration
                out(f"  … turn {turn}: asking the model ({tokens_said(progress)}, ${progress.cost_usd:.4f} so far)")
            said = await svc.retrying(ref, state)
            if said and said.split(" [attempt")[0] != retry:
                retry = said.split(" [attempt")[0]
                out(f"  ⟳ {retry}")
        if deadline is not None and loop.time() > deadline:
            raise StoppedWaiting(f"stopped waiting after {timeout:g} s: {stage} run {run} of card {ref.key} "
                                 f"goes on (`cardloop card show {ref.key}`)")
        await asyncio.sleep(poll)


async def until_done(svc: CardService, ref: CardRef, *, timeout: float | None, poll: float = 0.25) -> CardState:
    """A move to done: until the card says so."""
    try:
        return await svc.wait_for(ref, lambda s: s.status == "done", timeout=timeout or float("inf"), poll=poll)
    except TimeoutError:
        raise StoppedWaiting(f"stopped waiting after {timeout:g} s: card {ref.key} is not done yet") from None
