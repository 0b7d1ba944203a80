"""The claim-check store: what is too large for a Temporal payload lives here, keyed by card.

Activities put cards, chat history, context items, blobs (assembled prompts, logs), history
summaries and LLM usage here and pass references (card keys, seqs, blob refs) through Temporal.
SQLite by default (`sqlite:///path/to/file.sqlite`, `sqlite://` in memory for tests),
PostgreSQL when the URL says so (`postgresql://...`, driven by psycopg 3).

    engine.py   URL rules, engine settings, read/write transactions
    schema.py   tables and the versioned migrations (table `cardloop_schema`)
    values.py   StoreError, value objects, card key and blob ref rules
    core.py     Store, the API

`Store.open(url)` creates the engine and migrates; one Store is shared by all threads.
"""

from cardloop.store.core import Store
from cardloop.store.schema import MIGRATIONS, Migration
from cardloop.store.values import (
    NotFoundError,
    StoreError,
    Summary,
    UsageRecord,
    UsageSum,
    UsageTotals,
    blob_ref,
    card_key_for,
    tenant_of,
)

__all__ = [
    "MIGRATIONS",
    "Migration",
    "NotFoundError",
    "Store",
    "StoreError",
    "Summary",
    "UsageRecord",
    "UsageSum",
    "UsageTotals",
    "blob_ref",
    "card_key_for",
    "tenant_of",
]
