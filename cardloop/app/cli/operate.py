"""Operator commands for running cardloop for real: the codec server, codec keys, the Temporal
namespace setup (deploy/temporal/README.md) and sealing stored blobs again after a key rotation."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import socket
import sys
from typing import TYPE_CHECKING

from cardloop.app.cli.argtypes import port_arg
from cardloop.contracts.errors import ConfigError

if TYPE_CHECKING:
    from cardloop.contracts.config import Config


def cmd_codec_server(args: argparse.Namespace, config: Config) -> int:
    import uvicorn

    from cardloop.app.codec import AesGcmCodec, keyring
    from cardloop.app.codec_server import codec_app_for

    host = args.host or config.codec_server.host
    port = args.port or config.codec_server.port
    ring = keyring(config)
    if ring is None:
        raise ConfigError("temporal.encrypt_payloads is off: there is nothing for a codec server to decode")
    app = codec_app_for(config, AesGcmCodec(ring), host=host)
    sock = _listen(host, port)  # before the banner: the URL it prints is one that answers
    print(f"codec server on http://{host}:{port} (keys {', '.join(ring.ids)}); Temporal UI: set its codec "
          f"endpoint to this URL; CLI: temporal workflow show --codec-endpoint http://{host}:{port}", flush=True)
    # uvicorn stops gracefully on Ctrl-C, then raises the signal again; that re-raise did not always
    # surface (one test run in many exited 0, not 130). A graceful stop is exit 0, as `cardloop
    # dev`'s is, whichever way uvicorn ends.
    with sock, contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run(sockets=[sock])
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or a clear error (uvicorn would exit 3 with a log line)."""
    from cardloop.app.devserver import DevStackError

    try:
        return socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as err:
        raise DevStackError(f"the codec server cannot listen on {host}:{port}: {err.strerror or err}; "
                            "pass --port or set CARDLOOP_CODEC_SERVER__PORT") from None


def cmd_codec_key(args: argparse.Namespace, config: Config | None) -> int:
    from cardloop.app.codec import KeyRing

    kid = f"k{secrets.token_hex(4)}" if args.kid is None else args.kid  # --kid "" is refused, not replaced
    print(KeyRing.generate(kid).to_text())
    print("# put it first in CARDLOOP_CODEC_KEYS to encrypt with it; keep the old keys after it until no "
          "open workflow holds payloads written with them", file=sys.stderr)
    return 0


def cmd_temporal_setup(args: argparse.Namespace, config: Config) -> int:
    from cardloop.app.temporal_setup import parse_retention, setup_temporal

    retention = parse_retention(args.retention or config.dev.retention)
    asyncio.run(setup_temporal(config, retention=retention, out=lambda s: print(s, flush=True)))
    return 0


def cmd_store_reseal(args: argparse.Namespace, config: Config) -> int:
    """Exit 0 when every blob of the tenants is under the first key, 1 when some could not be
    opened (left as they were, listed), 2 on bad input (no keys, a bad tenant, no store)."""
    from cardloop.app.local import blob_keys, open_store
    from cardloop.store.reseal import tenants_to_reseal

    if blob_keys(config) is None:
        raise ConfigError(f"no blob keys: set {config.temporal.codec_keys_env} (new key first, the old ones after "
                          "it) and leave store.encrypt_blobs on; there is nothing to seal with")
    with open_store(config) as store:
        tenants = tenants_to_reseal(store, args.tenant or ())
        current = store.blob_key_ids[0]
        if not tenants:
            print("no blobs visible: the store is empty, or row-level security hides every tenant from this role "
                  "(PostgreSQL): name them with --tenant, or connect as a BYPASSRLS role", file=sys.stderr)
            return 0
        unreadable = 0
        for tenant in tenants:
            done = store.reseal_blobs(tenant, batch=args.batch)
            former = ", ".join(f"{n} {'in ' if kid == 'plain text' else 'under '}{kid}"
                               for kid, n in sorted(done.resealed.items()))
            print(f"{tenant}: {done.total_resealed} blob(s) sealed under {current}" + (f" ({former})" if former else "")
                  + f", {done.current} already under it, {len(done.unreadable)} unreadable", flush=True)
            for line in done.unreadable[:20]:
                print(f"  unreadable, left as it is: {line}", file=sys.stderr)
            unreadable += len(done.unreadable)
    if unreadable:
        print(f"{unreadable} blob(s) could not be opened with the configured keys: keep the keys they name until "
              "they are read or removed", file=sys.stderr)
        return 1
    print(f"every blob of {len(tenants)} tenant(s) is sealed under {current}: keys after it in the ring "
          "are no longer needed for blobs", flush=True)
    return 0


def _batch(text: str) -> int:
    try:
        value = int(text)
    except ValueError:  # argparse would say "invalid _batch value"
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError("a batch is 1 to 10000 blobs")
    return value


def add_operate_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("codec-server", help="decode encrypted payloads for the Temporal UI and CLI",
                       description="Serve Temporal's remote codec protocol (POST /encode, /decode) with the keys in "
                                   "CARDLOOP_CODEC_KEYS. With CARDLOOP_CODEC_SERVER_TOKEN set, requests need "
                                   "'Authorization: Bearer <token>'; without it only a loopback host is allowed. "
                                   "CORS admits codec_server.cors_origins (the Temporal UI).")
    p.add_argument("--host", help="default: codec_server.host (127.0.0.1)")
    p.add_argument("--port", type=port_arg, help="default: codec_server.port (8089)")
    p.set_defaults(func=cmd_codec_server)
    p = sub.add_parser("codec-key", help="print a new payload encryption key as 'kid:base64key'")
    p.add_argument("--kid", help="key id (default: k + 8 hex digits)")
    p.set_defaults(func=cmd_codec_key, needs_config=False)
    p = sub.add_parser("temporal-setup", help="create the Temporal namespace and cardloop's search attributes",
                       description="Idempotent: registers temporal.namespace when it does not exist and adds the "
                                   "search attributes CardId, CardStage, Repo, Tenant, CardStatus and "
                                   "StageOutcome (Keyword) that are missing.")
    p.add_argument("--retention", help="closed workflows are kept this long (default: dev.retention, 720h)")
    p.set_defaults(func=cmd_temporal_setup)
    store = sub.add_parser("store", help="operations on the store")
    ssub = store.add_subparsers(dest="store_command", required=True, metavar="COMMAND")
    p = ssub.add_parser("reseal", help="seal every stored blob under the first codec key (after a key rotation)",
                        description="Blobs are stored by content and never written twice, so one sealed under an "
                                    "older key stays under it. This opens each blob not under the first key of "
                                    "the codec keys (or stored in plain text before encryption was on) and seals "
                                    "it under that key, a batch per transaction: safe beside running workers, "
                                    "resumed by running it again. Exit 1 when some blob cannot be opened (its key "
                                    "is not in the ring): it is left as it is. On PostgreSQL with row-level "
                                    "security, the application role sees no tenant unless named with --tenant.")
    p.add_argument("--tenant", action="append", metavar="TENANT",
                   help="only this tenant (repeatable; default: every tenant with blobs this role can see)")
    p.add_argument("--batch", type=_batch, default=200, help="blobs per transaction (default 200)")
    p.set_defaults(func=cmd_store_reseal)


__all__ = ["add_operate_commands"]
