"""`cardloop context CARD --stage STAGE`: run the stage's context sources for a card and show
what each found, its tokens, and what the prompt's budget kept."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from cardloop.contracts.errors import InputError

if TYPE_CHECKING:
    from cardloop.contracts.config import Config
    from cardloop.prompts.card import Card, ContextItem
    from cardloop.prompts.stages import Stage


def gather_all(card: Card, stage: Stage, config: Config, names: list[str]) -> list[dict[str, Any]]:
    from cardloop.activities.context import status_item
    from cardloop.activities.deps import ActivityDeps
    from cardloop.integrations.sources.base import SourceRequest
    from cardloop.integrations.upstream import UpstreamError
    from cardloop.store import Store

    runtime = ActivityDeps.build(config, Store.open("sqlite://"))
    counter = runtime.assembler.counter
    out = []
    for name in names:
        try:
            result = runtime.source(name).gather(SourceRequest(card, stage))
        except UpstreamError as err:
            out.append({"source": name, "status": "unavailable", "reason": err.message,
                        "retryable": err.retryable, "items": [status_item(name, f"unavailable: {err.message}")]})
            continue
        except Exception as err:  # a bad configuration names itself; the rest still runs
            out.append({"source": name, "status": "error", "reason": f"{type(err).__name__}: {err}", "items": []})
            continue
        # Run once, as the activity's last attempt would: a partial result is kept, never retried.
        out.append({"source": name, "status": "partial" if result.partial else "ok",
                    **({"reason": "not read: " + "; ".join(result.missing)} if result.partial else {}),
                    "missing": list(result.missing), "notes": list(result.notes), "items": list(result.items),
                    "blobs": {k: counter.count(v) for k, v in result.blobs.items()}})
    return out


def cmd_context(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.cli.service import load_card_arg
    from cardloop.prompts.assemble import AssemblyRequest, PromptAssembler
    from cardloop.prompts.scrub import Scrubber, redact_text

    if args.source:  # a name no source has ran as "[unavailable]", exit 0: a typo looked like an outage
        from cardloop.integrations.sources.registry import SOURCES

        known = tuple(SOURCES)
        unknown = [name for name in args.source if name not in known]
        if unknown:
            raise InputError(f"--source {unknown[0]!r}: no such context source (known: {', '.join(known)})")
    card = load_card_arg(args.card, config)
    names = args.source or config.sources_for(args.stage)
    found = gather_all(card, args.stage, config, names)
    new: list[ContextItem] = [item for f in found for item in f["items"]]
    replaced = {item.source for item in new}
    merged = card.model_copy(update={"context": (*[c for c in card.context if c.source not in replaced], *new)})
    assembler = PromptAssembler(config.template_store(), config.token_counter(), Scrubber())
    settings = config.assembly_settings(args.stage)
    prompt = assembler.assemble(AssemblyRequest(card=merged, stage=args.stage), settings)
    counter = assembler.counter.with_calibration(settings.calibration)
    rows = [r for r in prompt.rows if r.section == "context"]
    if args.json:
        print(json.dumps({
            "card": card.id, "stage": args.stage.value,
            "sources": [{**{k: v for k, v in f.items() if k != "items"},
                         "items": [{"kind": i.kind.value, "source": redact_text(i.source),
                                    "title": redact_text(i.title) if i.title else None,
                                    "tokens": counter.count(i.content)} for i in f["items"]]} for f in found],
            "context": [r.to_dict() for r in rows],
            "context_tokens": prompt.sections["context"], "context_budget": settings.budget.context,
        }, indent=2, ensure_ascii=False))
        return 0
    print(f"card {card.id} · stage {args.stage.value} · sources: {', '.join(names) or 'none configured'}\n")
    for f in found:
        print(f"[{f['status']}] {f['source']}" + (f": {f['reason']}" if f.get("reason") else ""))
        for note in f.get("notes", []):
            print(f"    note: {note}")
        for item in f["items"]:
            label = redact_text(item.title or item.source)
            print(f"    {item.kind.value:<15} {counter.count(item.content):>7,} tokens  {label}")
        for label, tokens in f.get("blobs", {}).items():
            print(f"    kept whole in the store: {label} ({tokens:,} tokens)")
    print(f"\nwhat the context budget kept ({prompt.sections['context']:,} of {settings.budget.context:,} tokens):")
    for r in rows:
        print(f"  {r.status:<9} {r.tokens:>7,}  {r.name}" + (f"  ({r.reason})" if r.reason else ""))
    if not names:
        raise InputError(f"no context sources configured for stage {args.stage.value} ([context.sources])")
    return 0


def add_context_command(sub: argparse._SubParsersAction, stage_type: Any) -> None:
    p = sub.add_parser("context", help="run a stage's context sources for a card and show what the budget kept",
                       description="Run the context sources of STAGE ([context.sources] in config.toml) for a "
                                   "card, show what each found with its tokens, and what the prompt kept.")
    p.add_argument("card", help="a card file or a card key in the store (TENANT/BOARD/CARD)")
    p.add_argument("--stage", required=True, type=stage_type, metavar="STAGE",
                   help="the stage whose sources run: planning, coding, review, testing or error_fixing")
    p.add_argument("--source", action="append", help="only this source (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_context)
