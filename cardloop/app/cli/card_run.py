"""Card commands about the running stage: `card cancel` (stop it, keep its work) and
`card move --follow` (watch it until it ends). Both talk to the card's workflow through
CardService; the slow imports happen inside the commands, as in service.py."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cardloop.app.cli.service import _card_command

if TYPE_CHECKING:
    from cardloop.app.cards import CardService
    from cardloop.contracts.config import Config
    from cardloop.contracts.payloads import CardRef, CardState, StageRun


def cmd_card_cancel(args: argparse.Namespace, config: Config) -> int:
    async def action(svc: CardService, ref: CardRef) -> int:
        run = await svc.cancel(ref, actor=args.actor)
        print(cancelled_line(svc, ref, run))
        return 0

    return _card_command(args, config, action, imports=False)


async def watch(svc: CardService, ref: CardRef, args: argparse.Namespace, before: CardState | None,
                messages_from: int) -> int:
    """`card move --wait/--follow`: the moved-to stage's run until it ends; its outcome's exit code."""
    from cardloop.app.follow import OUTCOME_EXIT, follow, followed_run, until_done

    if args.to == "done":
        await until_done(svc, ref, timeout=args.timeout)
        print(f"  ✓ card {ref.key} is done")
        return 0
    run = followed_run(before, args.to)
    print(f"following {args.to} run {run} until it ends (Ctrl-C stops following, not the stage)", flush=True)
    ended = await follow(svc, ref, args.to, run, out=lambda line: print(line, flush=True), verbose=args.follow,
                         timeout=args.timeout, messages_from=messages_from)
    return OUTCOME_EXIT.get(ended.outcome, 1)


def cancelled_line(svc: CardService, ref: CardRef, run: StageRun) -> str:
    """What stopped and what stayed: a cancel must never look like lost work."""
    if run.outcome != "cancelled":  # it ended on its own before the cancel reached it
        return (f"card {ref.key}: {run.stage} run {run.run} had already ended {run.outcome}: {run.reason}; "
                f"nothing runs on by itself: the card waits for its next move")
    messages = len(svc.store.messages(ref.key))
    # This run's calls only (its turns' and its research's keys start with its workflow id), not
    # every run of the stage's: the summarizer's, shared by the card's runs, are not counted.
    run_id = f"{ref.workflow_id}/{run.run}-{run.stage}/"
    calls = sum(1 for r in svc.store.ledger(ref.key) if r.call_key.startswith(run_id))
    commits = f"{run.commits} commit(s) pushed" + (f" (last {run.last_commit[:12]})" if run.last_commit else "")
    return (f"card {ref.key}: cancelled {run.stage} run {run.run} after {run.iterations} turn(s); kept: "
            f"{messages} message(s) in its history, {calls} call(s) of this run in the "
            f"ledger, {commits}. `cardloop card move {ref.key} --to STAGE` runs a stage again.")
