"""The `cardloop` command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cardloop.app.cli import startup_gc
from cardloop.app.cli.argtypes import file_arg
from cardloop.app.cli.context import add_context_command
from cardloop.app.cli.doctor import add_doctor_command
from cardloop.app.cli.files import display_name, read_text
from cardloop.app.cli.operate import add_operate_commands
from cardloop.app.cli.research import add_research_command
from cardloop.app.cli.service import add_service_commands
from cardloop.app.cli.tenant import add_tenant_commands
from cardloop.contracts.errors import CardloopError, ConfigError, InputError, RejectedError
from cardloop.prompts.formats import ALIASES, FORMATS, resolve_format
from cardloop.prompts.stages import STAGE_NAMES, Stage, parse_stage
from cardloop.prompts.surrogates import describe, lone_surrogate, printable
from cardloop.prompts.templates import TemplateError

if TYPE_CHECKING:
    from cardloop.contracts.config import Config
    from cardloop.prompts.card import Card

# `cardloop --help`, `card show` and the other quick commands must start in well under a second:
# the prompt core's heavier modules (assembly, validation, the card model) load in the commands
# that use them (bench/cli_startup.py measures it).

EPILOG = """\
examples:
  cardloop demo                      # the sample card through every stage on the embedded stack
  cardloop dev                       # Temporal dev server + worker (UI on dev.ui_port, 8233 by default)
  cardloop card move examples/card.json --to planning
  cardloop card say acme/github-projects/PAY-142 "Use a 30 second cap" --author priya
  cardloop card show acme/github-projects/PAY-142
  cardloop prompt explain --card examples/card.json --stage error_fixing
  cardloop prompt explain --card examples/card.json --stage review --provider gemini --json
  cardloop prompt path agents/coding
  cardloop prompt validate my-tenant-prompt.txt
  cardloop card schema > card.schema.json
  cardloop config check
  cardloop research build.log --question "why did the build fail?"
  cardloop tenant set-prompt acme prompt.txt --mode append --language German
  cardloop tenant versions acme

exit codes: 0 ok, 1 input refused (e.g. a rejected tenant prompt), 2 bad usage, config or input.
"""


def load_card_file(path: str) -> Card:
    from cardloop.prompts.card import CardError, parse_card

    try:
        return parse_card(read_text(path), origin=path)
    except CardError as exc:
        raise InputError(str(exc)) from None


class _Version(argparse.Action):
    """--version: looked up only when asked (importlib.metadata is not free at start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print cardloop's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("cardloop")
        except PackageNotFoundError:  # run from a source tree that was never installed
            number = "unknown (not installed)"
        print(f"cardloop {number} (Python {sys.version.split()[0]}, {Path(__file__).resolve().parents[2]})")
        parser.exit()


def _stage(name: str) -> Stage:
    try:
        return parse_stage(name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _format_name(name: str) -> str:
    if name == "all":
        return name
    try:
        return resolve_format(name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None



def cmd_prompt_explain(args: argparse.Namespace, config: Config) -> int:
    from cardloop.prompts.assemble import AssemblyError, AssemblyRequest, PromptAssembler
    from cardloop.prompts.card import TenantPrompt
    from cardloop.prompts.explain import format_rows

    card = load_card_file(args.card)
    tenant = None
    if args.tenant_prompt:
        tenant = TenantPrompt(custom_system_prompt=read_text(args.tenant_prompt),
                              override_mode=args.tenant_mode)
    from cardloop.app.startup import startup_check

    assembler = PromptAssembler(config.template_store(), config.token_counter())
    startup_check(config, assembler)
    if args.profile and args.profile not in config.profiles:
        raise InputError(f"unknown profile {args.profile!r}; configured: {', '.join(config.profiles)}")
    settings = config.assembly_settings(args.stage, args.profile)
    most = config.stage(args.stage).max_iterations
    if not 1 <= args.iteration <= most:  # the prompt would say "iteration -1 of at most 12"
        raise InputError(f"--iteration {args.iteration}: {args.stage.value} runs iterations 1 to {most} "
                         f"(stages.{args.stage.value}.max_iterations)")
    try:
        prompt = assembler.assemble(
            AssemblyRequest(card=card, stage=args.stage, iteration=args.iteration,
                            request_system=args.request_system, tenant_prompt=tenant,
                            # What a stage run's first turn sends (the context before the run's turns).
                            run_start=len(card.history) if args.stage is not None else None),
            settings)
    except AssemblyError as exc:
        raise ConfigError(str(exc)) from None
    formats = list(FORMATS) if args.provider == "all" else [args.provider or settings.format]
    payloads = {f: prompt.render(f) for f in formats} if args.payload else {}
    # The card's own id and title are untrusted text like the rest: redacted before they print.
    scrub = assembler.scrubber.scrub
    if args.json:
        json.dump({"card": scrub(card.id), "explain": prompt.explain(), "payload": payloads},
                  sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    out = sys.stdout
    e = prompt.explain()
    out.write(f"card {scrub(card.id)}: {scrub(card.title)}\n")
    out.write(f"stage {e['stage']} · profile {e['profile']} · provider {e['provider']} · "
              f"model {e['model']} · history {e['history_mode']}\n")
    out.write(f"token counts: {settings.calibration}x cl100k_base ({config.tokens.encoding}) "
              "for this model's tokenizer\n\n")
    out.write(format_rows(list(prompt.rows)) + "\n\n")
    out.write("section   tokens    budget\n")
    for name in ("system", "agent", "history", "context", "turn"):
        limit = e["budget"].get(name)
        out.write(f"{name:<8} {e['tokens'][name]:>7,}   {limit:>7,}\n" if limit is not None
                  else f"{name:<8} {e['tokens'][name]:>7,}         -\n")
    out.write(f"{'total':<8} {e['tokens']['total']:>7,}   {e['budget']['total']:>7,}\n")
    if e["cache_breakpoints"]:
        out.write("\ncache breakpoints (a provider caches the exact prefix up to each):\n")
        for m in e["cache_breakpoints"]:
            out.write(f"  {m['kind']:<9} {m['block']:<12} {m['prefix_tokens']:>7,} tokens  {m['status']:<14} "
                      f"stable: {m['stable_for']}\n")
    if e["redactions"]:
        found = ", ".join(f"{k} x{v}" for k, v in sorted(e["redactions"].items()))
        out.write(f"\nsecrets redacted before assembly: {found}\n")
        for hit in e["redacted_in"]:  # which item held each: where to clean it up at the source
            out.write(f"  {hit['rule']} x{hit['count']} in {hit['item']}\n")
    for fmt, payload in payloads.items():
        out.write(f"\n=== rendered payload: {fmt} ===\n")
        out.write(payload if isinstance(payload, str) else json.dumps(payload, indent=2, ensure_ascii=False))
        out.write("\n")
    return 0


def cmd_prompt_path(args: argparse.Namespace, config: Config) -> int:
    from cardloop.prompts.templates import TemplateError

    store = config.template_store()
    try:
        candidates = store.candidates(args.name)
        path, _ = store.resolve(args.name)
    except TemplateError as exc:
        raise InputError(str(exc)) from None
    print(path)
    if args.all:
        for cand, cand_origin, exists in candidates:
            mark = "wins" if cand == path else ("present, shadowed" if exists else "absent")
            print(f"  {cand_origin:<9} {cand}  ({mark})", file=sys.stderr)
    return 0


def cmd_prompt_list(args: argparse.Namespace, config: Config) -> int:
    store = config.template_store()
    for name in store.names():
        path, origin = store.resolve(name)
        print(f"{name:<28} {origin:<9} {path}")
    return 0


def cmd_prompt_validate(args: argparse.Namespace, config: Config) -> int:
    from cardloop.prompts.validate import ValidationStatus, validate_tenant_prompt

    text = read_text(args.file, stdin=True)
    result = validate_tenant_prompt(text)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(f"status: {result.status.value}")
        for issue in result.issues:
            print(f"  {issue.category} [{issue.start}:{issue.end}] {issue.message}")
        if result.status == ValidationStatus.SANITIZED:
            print("sanitized prompt:\n" + result.sanitized_prompt)
    if result.status == ValidationStatus.REJECTED:
        raise RejectedError(f"{display_name(args.file, stdin=True)}: tenant prompt rejected "
                            f"({len(result.issues)} issue(s))")
    return 0


def cmd_card_schema(args: argparse.Namespace, config: Config | None) -> int:
    from cardloop.prompts.card import card_json_schema

    print(json.dumps(card_json_schema(), indent=2))
    return 0


def cmd_card_check(args: argparse.Namespace, config: Config | None) -> int:
    from cardloop.app.cli.argtypes import said
    from cardloop.contracts.payloads import CardRef

    card = load_card_file(args.file)
    try:  # a card `card move FILE` would refuse is no valid card: its board or id cannot be a key
        CardRef.for_board(card.tenant, card.board, card.id)
    except ValueError as exc:
        raise InputError(f"{args.file}: {said(exc)}") from None
    print(f"{args.file}: valid card {card.id!r}: {len(card.history)} messages, "
          f"{len(card.context)} context items")
    return 0


def cmd_config_check(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.cli.configview import missing_key_warnings, secret_uses
    from cardloop.app.startup import startup_check
    from cardloop.prompts.assemble import PromptAssembler
    from cardloop.prompts.surrogates import undecodable

    startup_check(config, PromptAssembler(config.template_store(), config.token_counter()))
    for env_name in secret_uses(config):  # a key that is not text fails the first call that sends it
        if problem := undecodable(env_name, config.env.get(env_name, "")):
            raise ConfigError(problem)
    codec_keys = config.secret(config.temporal.codec_keys_env) if config.temporal.codec_keys_env else None
    if codec_keys is not None:  # malformed keys stop every worker and the API: say so here (exit 2)
        from cardloop.contracts.keyring import KeyRing

        KeyRing.parse(codec_keys.reveal(), source=config.temporal.codec_keys_env)
    warnings = missing_key_warnings(config)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    note = f"; {len(warnings)} warning{'s' if len(warnings) > 1 else ''}" if warnings else ""
    print(f"{config.source}: ok ({len(config.profiles)} profiles, {len(config.stages)} stages{note})")
    return 0  # a warning is not a failure: the offline paths still run


def cmd_config_show(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.cli.configview import masked_url, secrets_view, store_view

    data: dict[str, Any] = config.model_dump(mode="json")
    data["store"] = {**data["store"], "effective": store_view(config)}
    data["store"]["url"] = masked_url(data["store"]["url"])
    data["secrets"] = secrets_view(config)  # names and set/unset only, never a value
    print(json.dumps(data, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="cardloop", formatter_class=fmt, epilog=EPILOG,
        description="cardloop: durable LLM agent stages for the cards on your board.\n\n"
                    f"Stages: {', '.join(STAGE_NAMES)}.")
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--config", metavar="FILE", type=file_arg,
                        help="config file (default: $CARDLOOP_CONFIG, ./config.toml, the bundled one)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    prompt = sub.add_parser("prompt", help="assemble, explain and validate prompts",
                            description="Work with the prompt core on card files.")
    psub = prompt.add_subparsers(dest="prompt_command", required=True, metavar="SUBCOMMAND")
    p = psub.add_parser("explain", formatter_class=fmt,
                        help="show every layer, section and item of a stage prompt, with tokens",
                        description="Assemble the prompt for a card and stage, show each layer and "
                                    "section (source, used/overridden/cut/dropped and why, tokens) "
                                    "and print the rendered payload.")
    p.add_argument("--card", required=True, metavar="FILE", type=file_arg,
                   help="card JSON file (see `cardloop card schema`)")
    p.add_argument("--stage", required=True, type=_stage, metavar="STAGE", help=" | ".join(STAGE_NAMES))
    p.add_argument("--provider", type=_format_name, metavar="FORMAT",
                   help=f"payload format: {', '.join(FORMATS)}, all (aliases: {', '.join(ALIASES)}); "
                        "default: the stage profile's provider")
    p.add_argument("--profile", help="profile from config.toml instead of the stage's")
    p.add_argument("--iteration", type=int, default=1, help="loop iteration to assemble for (default 1)")
    p.add_argument("--tenant-prompt", metavar="FILE", type=file_arg,
                   help="tenant custom prompt file (overrides the card's)")
    p.add_argument("--tenant-mode", choices=("append", "replace_behavior"), default="append",
                   help="how the tenant prompt layers: after the behaviour prompts (append, default) or "
                        "instead of them (replace_behavior)")
    p.add_argument("--request-system", metavar="TEXT", help="a request-level system message")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-payload", dest="payload", action="store_false", help="omit the rendered payload")
    p.set_defaults(func=cmd_prompt_explain)

    p = psub.add_parser("path", help="show which template file wins for NAME",
                        description="Print the file used for template NAME (override directory first, "
                                    "then the packaged templates).")
    p.add_argument("name", help="template name, e.g. guardrails, agents/coding, summarize")
    p.add_argument("--all", action="store_true", help="also list every place looked at")
    p.set_defaults(func=cmd_prompt_path)

    p = psub.add_parser("list", help="list templates and where each comes from")
    p.set_defaults(func=cmd_prompt_list)

    p = psub.add_parser("validate", help="validate a tenant custom prompt (exit 1 when rejected)")
    p.add_argument("file", type=file_arg, help="text file with the prompt, or - for stdin")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_prompt_validate)

    card = sub.add_parser("card", help="card files")
    csub = card.add_subparsers(dest="card_command", required=True, metavar="SUBCOMMAND")
    p = csub.add_parser("schema", help="print the card file JSON Schema")
    p.set_defaults(func=cmd_card_schema, needs_config=False)
    p = csub.add_parser("check", help="validate a card file")
    p.add_argument("file", type=file_arg, help="card JSON file")
    p.set_defaults(func=cmd_card_check, needs_config=False)
    add_service_commands(sub, csub)
    add_tenant_commands(sub)
    add_context_command(sub, _stage)
    add_operate_commands(sub)
    add_doctor_command(sub)
    add_research_command(sub)

    conf = sub.add_parser("config", help="configuration")
    fsub = conf.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    p = fsub.add_parser("check", help="validate config.toml and environment overrides")
    p.set_defaults(func=cmd_config_check)
    p = fsub.add_parser("show", help="print the effective configuration (secrets masked)")
    p.set_defaults(func=cmd_config_show)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for number, arg in enumerate(argv, 1):
        # Undecodable bytes arrive as lone surrogates (surrogateescape): no store, log or API takes them.
        if (index := lone_surrogate(arg)) is not None:
            print(f"cardloop: error: argument {number} ({printable(arg)!r}) is not UTF-8 text: "
                  f"{describe(arg, index)}", file=sys.stderr)
            return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if sys.stdout is None:  # `>&-`: print() would drop every line, a token shown once included, and exit 0
        print("cardloop: error: stdout is closed: the command's output would be lost; redirect it to a file "
              "or /dev/null instead", file=sys.stderr)
        return 2
    from cardloop.app.startup import load_config  # the config's models: not for --help

    try:
        config = load_config(args.config) if getattr(args, "needs_config", True) else None
        if not getattr(args, "resumes_gc", False):
            startup_gc.resume()
        return int(args.func(args, config) or 0)
    except CardloopError as exc:
        print(f"cardloop: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except TemplateError as exc:  # a template that cannot be read, met by a command that loads it (exit 2)
        print(f"cardloop: error: {exc}", file=sys.stderr)
        return ConfigError.exit_code
    except BrokenPipeError:
        _drop_stdout()
        return 0


def _drop_stdout() -> None:
    """The reader went away (`cardloop card schema | head -1`): what is still buffered goes to
    /dev/null, or the flush at exit fails again ("Exception ignored ... BrokenPipeError", exit 120)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _flush_stdout() -> None:
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()


def exit_code(argv: Sequence[str] | None = None) -> int:
    """main()'s exit code on every path, as the console script exits with it (tests that run a
    command in their own process use this too, tests/cardloop/app/cli/inproc.py)."""
    try:
        return main(argv)
    except KeyboardInterrupt:  # Ctrl-C before a command took over the signals: nothing to stop yet
        return 130
    except SystemExit as exc:  # argparse's usage errors (its message is printed already)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # a bug: its traceback, then the same exit as every other path
        traceback.print_exc()
        return 1


def run() -> None:
    """The console script. Once a Temporal client has run, exit without interpreter
    finalization, on every path (a result, an error, an exception nobody expected):

    The SDK's Rust runtime completes RPCs on its own threads and calls back into Python to hand
    over the result. An RPC still in flight when the command ends (one whose wait timed out on
    a busy server, `temporal.rpc_timeout`; or one abandoned by an exception) completes while
    the interpreter finalizes, and CPython aborts: "Fatal Python error: PyGILState_Release:
    thread state ... must be current when releasing", exit -6, after the command's work was
    done (with the bare SDK, RPCs in flight at sys.exit abort about 1 exit in 15; with os._exit
    none). tests/cardloop/app/cli/test_exit.py runs the CLI against a busy stack with calls left
    in flight. Everything the command owns is closed before main returns; the streams are
    flushed here."""
    startup_gc.pause()
    code = exit_code()
    _flush_stdout()  # here, where a reader that went away can still be told from a failure
    if "temporalio.bridge.temporal_sdk_bridge" not in sys.modules:
        sys.exit(code)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
