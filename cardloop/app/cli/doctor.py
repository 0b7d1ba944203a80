"""`cardloop doctor`: what this machine can and cannot do for a worker, checked for real.

Each check says ok, warn or fail with one line of why: the configuration, the store, the model
keys, Temporal (its port, then the namespace and cardloop's search attributes, changing nothing),
the payload codec's keys (parsed, never printed), GitHub and Kubernetes access for the configured
context sources (GitHub's rate limit with the token; listing each service's pods), git, the
coding agent's workspace and sandbox (which protections `run_command` really gets here:
process-group kill, rlimits, network and PID namespaces), and which boards get the cards'
progress back (a board without its credential is skipped).
Exit 1 when a check fails, 0 otherwise (warnings included)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cardloop.contracts.errors import CardloopError

if TYPE_CHECKING:
    from cardloop.contracts.config import Config

Status = Literal["ok", "warn", "fail"]
MARK = {"ok": "✓", "warn": "!", "fail": "✗"}


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str


def _config(config: Config) -> Check:
    try:
        from cardloop.app.startup import startup_check
        from cardloop.prompts.assemble import PromptAssembler

        startup_check(config, PromptAssembler(config.template_store(), config.token_counter()))
    except CardloopError as exc:
        return Check("config", "fail", str(exc))
    return Check("config", "ok", f"{config.source}: {len(config.profiles)} profiles, {len(config.stages)} stages")


def _store(config: Config) -> Check:
    try:
        from cardloop.app.local import open_store

        store = open_store(config)
    except Exception as exc:  # any driver error is the answer here
        return Check("store", "fail", f"{type(exc).__name__}: {exc}"[:300])
    ids = store.blob_key_ids
    store.close()
    if ids:
        blobs = f"blobs encrypted at rest (AES-GCM, key ids {', '.join(ids)} from {config.temporal.codec_keys_env})"
    elif not config.store.encrypt_blobs:
        blobs = "blobs in plain text (store.encrypt_blobs = false)"
    else:
        blobs = f"blobs in plain text ({config.temporal.codec_keys_env or 'temporal.codec_keys_env'} is not set)"
    return Check("store", "ok", "opened and migrated: " + config.store_url().split("://")[0] + "; " + blobs)


def _keys(config: Config) -> list[Check]:
    used = {config.stage(s).profile for s in config.stages_enum()} | {config.summarizer.profile}
    checks = []
    for name in sorted(used):
        prof = config.profiles[name]
        if config.api_key(name) is not None or prof.provider == "openai":
            checks.append(Check(f"model {name}", "ok", f"{prof.provider} {prof.model}: key set"))
        else:
            checks.append(Check(f"model {name}", "warn", f"{prof.provider} {prof.model}: {prof.api_key_env} is not set"
                                                          " (cardloop demo falls back to the scripted model)"))
    return checks


def _temporal(config: Config) -> Check:
    host, _, port = config.temporal.address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=2.0):
            pass
    except (OSError, ValueError) as exc:
        if _dev_address(config):  # the dev stack's, not started yet: `cardloop dev` is the answer
            return Check("temporal", "warn", f"{config.temporal.address} does not answer ({exc}); "
                                             "`cardloop dev` starts a local one")
        # A configured server (a cluster, Temporal Cloud) that does not answer is a failure.
        return Check("temporal", "fail", f"{config.temporal.address} does not answer ({exc})")
    return _namespace(config)


def _dev_address(config: Config) -> bool:
    return config.temporal.address == f"127.0.0.1:{config.dev.temporal_port}"


def _namespace(config: Config) -> Check:
    """The namespace exists and has cardloop's search attributes, with the right types (the
    Temporal UI's card filters and `card list` need them)."""
    import asyncio

    from cardloop.app.temporal_setup import missing_setup

    t = config.temporal
    try:
        problems = asyncio.run(asyncio.wait_for(missing_setup(config), 10))
    except Exception as exc:  # an unreachable or refusing server: say what, never a traceback
        return Check("temporal", "warn" if _dev_address(config) else "fail",
                     f"{t.address} accepts connections but did not answer: "
                                         f"{type(exc).__name__}: {exc}"[:300])
    if problems:
        return Check("temporal", "fail", f"{t.address} namespace {t.namespace}: {'; '.join(problems)}; "
                                         "run `cardloop temporal-setup`")
    return Check("temporal", "ok", f"{t.address} namespace {t.namespace} with cardloop's search attributes")


def _codec(config: Config) -> Check:
    """The payload codec's keys parse (never printed); off only when configured off."""
    from cardloop.app.codec import DEV_KEYS_FILE, KeyRing, is_loopback

    t = config.temporal
    if not t.encrypt_payloads:
        return Check("codec", "warn", "temporal.encrypt_payloads = false: card text and prompts sit in plain text "
                                      "in Temporal's database")
    secret = config.secret(t.codec_keys_env) if t.codec_keys_env else None
    try:
        if secret is not None:
            ring, where = KeyRing.parse(secret.reveal(), source=t.codec_keys_env), t.codec_keys_env
        elif is_loopback(t.address):
            # The embedded stack makes its key on first use: doctor only looks, it creates nothing.
            path = Path(config.dev.data_dir).expanduser() / DEV_KEYS_FILE
            if not path.is_file():
                return Check("codec", "ok", f"payloads encrypted; the dev stack creates its key in {path} on start")
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = getattr(exc, "strerror", None) or "not UTF-8 text"
                return Check("codec", "fail", f"{path}: cannot read: {reason}")
            ring, where = KeyRing.parse(text, source=str(path)), str(path)
        else:
            return Check("codec", "fail", f"{t.codec_keys_env} is not set: payloads to {t.address} are encrypted "
                                          "and need the workers' keys (`cardloop codec-key` makes one)")
    except CardloopError as exc:
        return Check("codec", "fail", str(exc)[:300])
    return Check("codec", "ok", f"payloads encrypted (AES-GCM) with key ids {', '.join(ring.ids)} from {where}")


def _git() -> Check:
    git = shutil.which("git")
    if git is None:
        return Check("git", "fail", "git is not on PATH: the repository source and the workspace need it")
    out = subprocess.run([git, "--version"], capture_output=True, text=True, timeout=10)
    version = re.search(r"(\d+)\.(\d+)", out.stdout)
    if version and (int(version.group(1)), int(version.group(2))) < (2, 32):
        # Older git ignores GIT_CONFIG_GLOBAL: the worker's git would read ~/.gitconfig, which
        # the agent's commands can write.
        return Check("git", "warn", f"{out.stdout.strip()}: 2.32 or newer is needed to keep ~/.gitconfig "
                                    "out of the worker's git")
    return Check("git", "ok", out.stdout.strip() or git)


def _workspace(config: Config) -> list[Check]:
    ws = config.workspace
    checks = []
    if not ws.enabled:
        checks.append(Check("workspace", "warn", "[workspace] enabled = false: stages answer in text, no tools"))
    root = Path(ws.root).expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".doctor-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
        checks.append(Check("workspace root", "ok", f"{root} is writable"))
    except OSError as exc:
        checks.append(Check("workspace root", "fail", f"{root}: {exc}"))
    from cardloop.integrations.workspace import Sandbox, hidden_paths, sandbox_limits

    sandbox = Sandbox(sandbox_limits(ws.sandbox, hidden_paths(config)))
    weak = ("NOT isolated", "no PID namespace", "no resource limits", "no mount namespace")
    for line in sandbox.describe():
        checks.append(Check("sandbox", "warn" if any(w in line for w in weak) else "ok", line))
    return checks


def _boards(config: Config) -> list[Check]:
    """Whether each board gets the cards' progress back (comments, columns): its credential is
    only looked at, never sent; a board without one is skipped by the workers, not an error."""
    from cardloop.integrations.board_clients.registry import CLIENTS, unavailable  # httpx, config

    checks = []
    for board in CLIENTS:
        why = unavailable(config, board)
        cfg = config.board(board)
        if why is None:
            checks.append(Check(f"board {board}", "ok", f"writes back with {cfg.write_token_env}"
                                + (f" to {cfg.api_url}" if cfg.api_url else "")))
        else:
            checks.append(Check(f"board {board}", "warn", f"{why}: cards on {board} get no comments or moves"))
    return checks


def _uses(config: Config, *sources: str) -> bool:
    return any(name in sources for names in config.context.sources.values() for name in names)


def _github(config: Config) -> list[Check]:
    """The GitHub sources' API answers with the configured token (a request to its rate limit,
    which costs nothing against it)."""
    if not _uses(config, "github_actions", "github_reviews", "github_tests"):
        return []
    import httpx

    g = config.sources.github
    token = config.secret(g.token_env) if g.token_env else None
    headers = {"Accept": "application/vnd.github+json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token.reveal()}"
    try:
        answer = httpx.get(g.api_url.rstrip("/") + "/rate_limit", headers=headers, timeout=5.0)
    except httpx.HTTPError as exc:
        return [Check("github", "warn", f"{g.api_url} did not answer ({type(exc).__name__}): CI logs, reviews and "
                                        "test reports come back as 'unavailable' notes")]
    if answer.status_code == 401:
        return [Check("github", "fail", f"{g.api_url} refused {g.token_env} (401): renew the token")]
    if answer.status_code != 200:
        return [Check("github", "warn", f"{g.api_url}/rate_limit answered {answer.status_code}")]
    try:
        left = answer.json()["resources"]["core"]["remaining"]
    except (ValueError, KeyError, TypeError):
        left = "?"
    if token is None:
        return [Check("github", "warn", f"{g.token_env} is not set: public repositories only, "
                                        f"{left} requests left this hour")]
    return [Check("github", "ok", f"{g.api_url} accepts {g.token_env}: {left} requests left this hour")]


def _kubernetes(config: Config) -> list[Check]:
    """The pod-log source's account reaches the API server and may make each request the source
    makes for each service: list pods, list events, get pods/log."""
    if not _uses(config, "kubernetes"):
        return []
    from cardloop.integrations.sources.kubernetes.config import from_config
    from cardloop.integrations.upstream import UpstreamError

    try:
        source = from_config("kubernetes", config)
    except UpstreamError as exc:
        return [Check("kubernetes", "warn", f"{exc}: error_fixing gets no pod logs")]
    if not config.sources.kubernetes.services:
        return [Check("kubernetes", "warn", "no [sources.kubernetes.services]: no repository has pods to read")]
    problems, unchecked = source.probe()
    if problems:
        return [Check("kubernetes", "warn", "; ".join(problems)[:600])]
    detail = f"pods, pods/log and events of {len(config.sources.kubernetes.services)} service(s) readable"
    if unchecked:
        detail += "; not checked: " + "; ".join(unchecked)
    return [Check("kubernetes", "ok", detail[:600])]


def run_checks(config: Config) -> list[Check]:
    return [_config(config), _store(config), *_keys(config), _temporal(config), _codec(config), _git(),
            *_github(config), *_kubernetes(config), *_workspace(config), *_boards(config)]


def cmd_doctor(args: argparse.Namespace, config: Config) -> int:
    checks = run_checks(config)
    if args.json:
        print(json.dumps([asdict(c) for c in checks], indent=2, ensure_ascii=False))
    else:
        for c in checks:
            print(f"{MARK[c.status]} {c.name:<16} {c.detail}")
    return 1 if any(c.status == "fail" for c in checks) else 0


def add_doctor_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("doctor", help="check what this machine can do for a worker (exit 1 on a failure)")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.set_defaults(func=cmd_doctor)
