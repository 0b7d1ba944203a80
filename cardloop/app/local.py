"""The local state a command opens: the data dir and the store (and the card's UI link). Apart from app/stack.py (the
worker, Temporal's SDK, uvicorn) so that `cardloop card show` and the tenant commands open
the store without loading a worker."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from cardloop.app.private import private_dir, private_files
from cardloop.contracts.config import Config
from cardloop.contracts.keyring import KeyRing
from cardloop.store import Store

DATA_DIR_SETTING = "dev.data_dir, CARDLOOP_DEV__DATA_DIR"


def data_dir(config: Config) -> Path:
    return private_dir(Path(config.dev.data_dir).expanduser(), DATA_DIR_SETTING)


def blob_keys(config: Config) -> KeyRing | None:
    """The keys blob contents are encrypted with at rest: the payload codec's, from the variable
    `temporal.codec_keys_env` names; None (blobs in plain text) when it is unset or
    `store.encrypt_blobs` is false. Only configured keys count: the dev stack's own key file
    (app/codec.py) stays the dev Temporal server's, so a store never depends on a file beside it."""
    env = config.temporal.codec_keys_env
    if not config.store.encrypt_blobs or not env:
        return None
    secret = config.secret(env)
    return KeyRing.parse(secret.reveal(), source=env) if secret is not None else None


def open_store(config: Config) -> Store:
    url = config.store_url()
    keys = blob_keys(config)
    if not url.startswith("sqlite:///"):
        return Store.open(url, blob_keys=keys)
    file = Path(url.removeprefix("sqlite:///")).expanduser()
    setting = ("DATABASE_URL" if config.env.get("DATABASE_URL") else
               DATA_DIR_SETTING if file.parent == Path(config.dev.data_dir).expanduser() else "store.url")
    private_dir(file.parent, setting)
    store = Store.open(url, blob_keys=keys)
    private_files(file)
    return store


def card_url(ui_url: str, namespace: str, workflow_id: str) -> str:
    """The card's workflow in the Temporal UI."""
    return f"{ui_url}/namespaces/{namespace}/workflows/{quote(workflow_id, safe='')}"


__all__ = ["blob_keys", "card_url", "data_dir", "open_store"]
