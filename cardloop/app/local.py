"""The local state a command opens: the data dir and the store (and the card's UI link). Apart from app/stack.py (the
worker, Temporal's SDK, uvicorn) so that `cardloop card show` and the tenant commands open
the store without loading a worker."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from cardloop.app.private import private_dir, private_files
from cardloop.contracts.config import Config
from cardloop.store import Store


def data_dir(config: Config) -> Path:
    return private_dir(Path(config.dev.data_dir).expanduser())


def open_store(config: Config) -> Store:
    url = config.store_url()
    if not url.startswith("sqlite:///"):
        return Store.open(url)
    file = Path(url.removeprefix("sqlite:///")).expanduser()
    private_dir(file.parent)
    store = Store.open(url)
    private_files(file)
    return store


def card_url(ui_url: str, namespace: str, workflow_id: str) -> str:
    """The card's workflow in the Temporal UI."""
    return f"{ui_url}/namespaces/{namespace}/workflows/{quote(workflow_id, safe='')}"


__all__ = ["card_url", "data_dir", "open_store"]
