"""What a step that failed or was cancelled paid for: its calls are in the ledger (billed) under
the key the workflow gave it, but a failed activity or child workflow returns no figures, so
the run reads them back (the kept calls only, as a step that succeeded counts its own)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from cardloop.contracts import names
    from cardloop.contracts.payloads import KeptInput, KeptUsage
    from cardloop.workflows import policies


async def kept_under(card_key: str, key: str, what: str) -> KeptUsage:
    return await workflow.execute_activity(
        names.LEDGER_KEPT, KeptInput(card_key=card_key, key=key), result_type=KeptUsage,
        **policies.STORE, summary=f"what the failed {what} paid for")
