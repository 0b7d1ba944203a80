"""`cardloop demo`: the sample card through every stage on the embedded stack.

With an API key for the configured profiles it uses the real model. Without one it says so
and runs the offline scripted model: a documented test double (cardloop/app/scripted_model/)
that serves the Anthropic Messages API on 127.0.0.1 and replays examples/transcript.json, so
a newcomer sees the whole flow. It is never used silently when a key exists."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from temporalio.service import RPCError

from cardloop.app.cards import CardService
from cardloop.app.follow import agent_lines, cached_said, redacting, say_unavailable, tokens_said
from cardloop.app.lifecycle import StackLock, data_dir_lock
from cardloop.app.local import card_url
from cardloop.app.logs import log_to_data_dir
from cardloop.app.preflight import check_models
from cardloop.app.sample_remote import Remote, push_sample_repo
from cardloop.app.scripted_model import ScriptedModel, load_transcript
from cardloop.app.stack import data_dir, dev_stack, wait_for_ctrl_c
from cardloop.app.startup import load_config
from cardloop.contracts import names
from cardloop.contracts.config import Config
from cardloop.contracts.errors import ConfigError
from cardloop.contracts.payloads import CardRef, CardState, StageProgress
from cardloop.integrations.workspace import default_branch_name
from cardloop.prompts.card import Card
from cardloop.prompts.stages import STAGE_NAMES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTED_KEY = "scripted-model-offline"


def needs_scripted_model(config: Config) -> bool:
    profiles = {config.stage(s).profile for s in config.stages_enum()} | {config.summarizer.profile}
    return any(config.api_key(p) is None for p in profiles)


SCRIPTED_BANNER = """\
******************************************************************************************
*  SCRIPTED MODEL: every model call goes to the OFFLINE SCRIPTED MODEL on {url},
*  a test double that replays {transcript}; it is NOT a language model.
*  API keys are ignored. Run `cardloop dev` without --scripted for the configured model.
******************************************************************************************"""


def start_scripted_model(config: Config, transcript: Mapping[str, list] | None = None) -> ScriptedModel:
    """The offline scripted model on 127.0.0.1:`dev.model_port` (0: a free port); a taken port is
    one line naming the setting, not a traceback."""
    from cardloop.app.devserver import DevStackError

    port = config.dev.model_port
    try:
        return ScriptedModel(transcript, port=port).start()
    except OSError as exc:
        raise DevStackError(f"the scripted model cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}; set "
                            "dev.model_port / CARDLOOP_DEV__MODEL_PORT (0: a free port)") from None


def scripted_config(config_path: str | None, env: Mapping[str, str] | None = None) -> Config:
    """The configuration with every model call on the scripted model (`cardloop dev --scripted`):
    each profile a stage or the summarizer uses gets a placeholder key; all must be Anthropic's."""
    env = dict(os.environ if env is None else env)
    probe = load_config(config_path, env)
    for name in {probe.stage(s).profile for s in probe.stages_enum()} | {probe.summarizer.profile}:
        profile = probe.profiles[name]
        if profile.provider != "anthropic":
            raise ConfigError(f"profile {name!r} uses provider {profile.provider!r}; the offline scripted model "
                              "only speaks the Anthropic API")
        if profile.api_key_env:
            env[profile.api_key_env] = SCRIPTED_KEY
    return load_config(config_path, env)


def demo_remote(data_dir: Path) -> Remote:
    """examples/sample-repo pushed to a fresh bare repository: the sample card's remote."""
    root = data_dir / "demo-remote"
    shutil.rmtree(root, ignore_errors=True)
    return push_sample_repo(root)


def demo_config(config_path: str | None, env: Mapping[str, str], scripted: bool,
                remote: Remote | None = None) -> Config:
    env = dict(env)
    if remote is not None:
        # The coding agent works in a worktree of the sample repository, cloned from and pushed
        # to the local bare remote: no GitHub needed.
        env["CARDLOOP_WORKSPACE__ENABLED"] = "true"
        env["CARDLOOP_WORKSPACE__ROOT"] = str(remote.root.parent / "demo-workspaces")
        env["CARDLOOP_SOURCES__REPOSITORY__CLONE_URL"] = remote.url_template
    # The demo moves the card column by column, as a board does: no auto-advance. The sample
    # card carries its own context (logs, files, ADR); its repository does not exist, so the
    # live context sources are off.
    for stage in STAGE_NAMES:
        env[f"CARDLOOP_STAGES__{stage.upper()}__AUTO_ADVANCE"] = "false"
        env[f"CARDLOOP_CONTEXT__SOURCES__{stage.upper()}"] = "[]"
    if scripted:
        env["ANTHROPIC_API_KEY"] = SCRIPTED_KEY
    config = load_config(config_path, env)
    if scripted:
        for name in {config.stage(s).profile for s in config.stages_enum()} | {config.summarizer.profile}:
            if config.profiles[name].provider != "anthropic":
                raise ConfigError(f"profile {name!r} uses provider {config.profiles[name].provider!r} and has no "
                                  "API key; the offline scripted model only speaks the Anthropic API")
    return config


async def _progress(svc: CardService, ref: CardRef, stage: str, run: int) -> StageProgress | None:
    handle = svc.client.get_workflow_handle(f"{ref.workflow_id}/{run}-{stage}")
    try:
        return await handle.query(names.QUERY_PROGRESS, result_type=StageProgress)
    except RPCError:
        return None


_SKIPPED = re.compile(r" \(skipped: (?P<why>[^()]*(?:\([^()]*\)[^()]*)*)\)\Z")


def _board_lines(state: CardState | None, shown: str, out, said: set[str]) -> str:
    """What the card's board was told (the demo has no board: what it would have been told),
    once per change; returns what is now shown. Why a write was skipped is said the first time
    only (`said` keeps the reasons given): the same sentence on every line reads like an error."""
    if state is None or not state.board or state.board == shown:
        return shown
    for part in state.board.split("; "):
        skipped = _SKIPPED.search(part)
        if skipped is not None and skipped["why"] in said:
            part = part[:skipped.start()] + " (skipped, as above)"
        elif skipped is not None:
            said.add(skipped["why"])
        out(f"  board: {part}")
    return state.board


async def run_stage(svc: CardService, ref: CardRef, stage: str, timeout: float, out,
                    said: set[str] | None = None) -> CardState:
    said = set() if said is None else said
    before = await svc.state(ref)
    seen = len(before.history) if before else 0
    run = (before.stage_runs if before else 0) + 1
    seen_messages = len(svc.store.messages(ref.key))
    await svc.move(ref, stage, delivery_id=f"demo/{ref.card_id}/{stage}", actor="demo")
    out(f"\n▶ moved to {stage}")
    last_iter = 0
    last_retry: str | None = None
    board = before.board if before else ""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        state = await svc.state(ref)
        board = _board_lines(state, board, out, said)
        if state and len(state.history) > seen:
            # The board hears of the outcome right after the run ends (a comment, the next column):
            # written in the task that records the run (a dry run's local writes), it is here
            # already; written by an activity after it, wait for it (board_told says when it is
            # done), a few seconds at most. The board text alone cannot say it: the run's start
            # and its end may both be new in one poll.
            r = state.history[-1]
            settle = loop.time() + 5
            while state.board_told < r.run and loop.time() < settle:
                await asyncio.sleep(0.1)
                state = await svc.state(ref) or state
            _board_lines(state, board, out, said)
            say_unavailable(r.unavailable, said, out)  # a quick run may end between two polls
            mark = {"completed": "✓", "blocked": "⏸", "cancelled": "↷"}.get(r.outcome, "✗")
            for line in agent_lines(svc.store.messages(ref.key)[seen_messages:]):
                out(line)
            out(f"  {mark} {stage}: {r.outcome} after {r.iterations} turn(s), "
                f"{tokens_said(r)}, ${r.cost_usd:.4f}: {r.reason}")
            if r.commits:
                out(f"  ⎇ {r.commits} commit(s) pushed to the card's branch, last {r.last_commit[:12]}")
            return state
        progress = await _progress(svc, ref, stage, run)
        if progress is not None:
            say_unavailable(progress.unavailable, said, out)
        if progress and progress.iteration > last_iter:
            # Quick turns (the scripted model's) pass between two polls: each is said, none skipped.
            for turn in range(last_iter + 1, progress.iteration + 1):
                out(f"  … turn {turn}: assembling the prompt and asking the model")
            last_iter = progress.iteration
        # A model call waiting for its next attempt: say why, once per attempt.
        retrying = await svc.retrying(ref, state) if state is not None else None
        if retrying and retrying.split(" [attempt")[0] != last_retry:
            last_retry = retrying.split(" [attempt")[0]
            out(f"  ⟳ {last_retry}")
        if loop.time() > deadline:
            raise TimeoutError(f"stage {stage} did not finish within {timeout:.0f}s")
        await asyncio.sleep(0.2)


async def run_demo(config_path: str | None, *, keep_running: bool | None, out=print) -> int:
    env = dict(os.environ)
    probe = load_config(config_path, env)
    scripted = needs_scripted_model(probe)
    root = data_dir(probe)
    # The data dir first: with `cardloop dev` running on it, nothing here may touch its files.
    with data_dir_lock(root, "demo") as lock:
        log_file = log_to_data_dir(root, console_level=logging.ERROR)
        config = demo_config(config_path, env, scripted)
        if not scripted:
            # Seconds, not the retry schedule's minutes per stage: is the model there, is the key good?
            out(f"Using the real model: profile {config.stage(config.stages_enum()[0]).profile}.")
            await asyncio.to_thread(check_models, config, None, out)
            out("  the model answered and took the key.")
        remote = demo_remote(root)
        config = demo_config(config_path, env, scripted, remote)
        model: ScriptedModel | None = None
        try:
            base_urls: dict[str, str] = {}
            if scripted:
                out("No API key for the configured model (ANTHROPIC_API_KEY is not set).\n"
                    "This demo therefore runs the OFFLINE SCRIPTED MODEL: a test double that serves the Anthropic\n"
                    "Messages API on 127.0.0.1 and replays examples/agent-transcript.json. Everything else is real:\n"
                    "Temporal, the workflows, prompt assembly, RLM summarization, the store, the anthropic client,\n"
                    "and the agent's tools: a git worktree of examples/sample-repo, its tests run in the sandbox,\n"
                    "commits pushed to a local bare remote. Set ANTHROPIC_API_KEY to run the real model.")
                model = start_scripted_model(config, load_transcript(EXAMPLES / "agent-transcript.json"))
                base_urls = {name: model.url for name, p in config.profiles.items() if p.provider == "anthropic"}
            return await _demo(config, lock, remote, scripted, base_urls, keep_running, log_file, out)
        finally:
            if model is not None:
                model.stop()


async def _demo(config: Config, lock: StackLock, remote: Remote, scripted: bool, base_urls: dict[str, str],
                keep_running: bool | None, log_file: Path, out) -> int:
    out = redacting(out)  # the agent's lines and the runs' reasons are untrusted text
    sample = Card.model_validate_json((EXAMPLES / "card.json").read_text(encoding="utf-8"))
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    # A branch of its own per run (cardloop/<card id>), so a second demo starts from main again.
    card = sample.model_copy(update={"id": f"{sample.id}-demo-{stamp}", "branch": None})
    timeout = 120.0 if scripted else 1800.0
    out("\nstarting the dev stack: temporal server start-dev (SQLite), worker, store …")
    async with dev_stack(config, base_urls=base_urls, pick_free_ports=True, lock=lock) as stack:
        svc = CardService(stack.client, stack.store, config)
        ref = svc.import_card(card)
        link = card_url(stack.ui_url or config.temporal.ui_url, config.temporal.namespace, ref.workflow_id)
        out(f"card {ref.key}: {card.title}\n  Temporal UI: {link}")
        board_reasons: set[str] = set()
        for stage in STAGE_NAMES:
            state = await run_stage(svc, ref, stage, timeout, out, board_reasons)
            last = state.history[-1]
            if last.outcome != "completed":
                out(f"\n✗ the demo stops: {stage} ended {last.outcome}: {last.reason}\n"
                    f"  The card's stage runs: {link}\n  Log (with tracebacks): {log_file}")
                return 1
        await svc.move(ref, "done", delivery_id=f"demo/{ref.card_id}/done", actor="demo")
        state = await svc.wait_for(ref, lambda s: s.status == "done", timeout=60)
        totals = stack.store.usage_totals(ref.key)
        # Tokens as each stage's closing line and the token budget count them: the prompt tokens
        # the cache served or stored too (priced lower, still sent), so the total is never less
        # than a stage's own figure above.
        t = totals.total
        cached = cached_said(t.cache_read_tokens, t.cache_write_tokens)
        out(f"\n■ done: {len(state.history)} stage runs, {t.calls} model calls, "
            f"{t.input_tokens + t.output_tokens + t.cache_read_tokens + t.cache_write_tokens:,} tokens"
            f"{f' ({cached})' if cached else ''}, ${float(t.cost_usd):.4f}")
        for stage, s in totals.by_stage.items():
            out(f"    {stage:<13} {s.calls} call(s)  {s.input_tokens:>8,} in  {s.output_tokens:>6,} out  "
                f"{s.cache_read_tokens + s.cache_write_tokens:>8,} cached  ${float(s.cost_usd):.4f}")
        branch = default_branch_name(card.id)
        log = remote.commits(branch) if remote.head(branch) else []
        out(f"\n⎇ {remote.url_template.format(repo=card.repo)} branch {branch}: "
            f"{len(log)} commit(s), newest first:")
        for subject in log[:4]:
            out(f"    {subject}")
        out("  See the fix: git -C " + str(remote.bare) + f" show {branch} -- app/webhooks/retry.py")
        out("  With GitHub configured ([sources.repository] clone_url on github.com, CARDLOOP_GITHUB_TOKEN), the\n"
            "  checkpoints go to the card's branch on GitHub, coding opens one pull request for it, and each\n"
            "  stage run comments its outcome on the card's issue or pull request.")
        out(f"\nFrom the command line: .venv/bin/cardloop card show {ref.key}  (live with `cardloop dev` "
            "running; without it, what the store kept)")
        out(f"\nSee the card in the Temporal UI: {link}\n"
            f"Search there for: CardStage = 'done' AND Repo = '{card.repo}'")
        if keep_running is None:
            keep_running = sys.stdin.isatty() and sys.stdout.isatty()
        if keep_running:
            out("\nThe stack keeps running so you can open the UI. Press Ctrl-C to stop.")
            await wait_for_ctrl_c()
        else:
            out(f"(The stack stops now; `cardloop dev` brings the UI back with this card: its history is "
                f"kept in {config.dev.data_dir}.)")
    return 0
