"""Store.card_rows, what `cardloop card list` reads: filters, order, saved state, tenant views."""

from __future__ import annotations

import pytest

from cardloop.prompts.card import Card
from cardloop.store import Store, TenantScopeError


def _card(tenant: str, board: str, card_id: str, title: str) -> Card:
    return Card(id=card_id, title=title, tenant=tenant, board=board)


def test_card_rows_filter_by_tenant_and_board_and_carry_the_saved_state(store: Store) -> None:
    for tenant, board, card_id in (("acme", "github", "A-1"), ("acme", "linear", "A-2"), ("globex", "github", "G-1")):
        store.upsert_card(f"{tenant}/{board}/{card_id}", _card(tenant, board, card_id, f"title {card_id}"))
    store.save_workflow_state("acme/github/A-1", '{"stage": "done", "status": "done"}')
    acme = store.card_rows("acme")
    assert sorted(r["card"] for r in acme) == ["acme/github/A-1", "acme/linear/A-2"]
    by_key = {r["card"]: r for r in acme}
    assert by_key["acme/github/A-1"]["workflow_state"] == '{"stage": "done", "status": "done"}'
    assert by_key["acme/linear/A-2"]["workflow_state"] is None and by_key["acme/linear/A-2"]["title"] == "title A-2"
    assert [r["card"] for r in store.card_rows("acme", "linear")] == ["acme/linear/A-2"]
    if store.dialect == "sqlite":  # one database, no row-level security: every tenant at once
        assert len(store.card_rows()) == 3 and len(store.card_rows(board="github")) == 2
    view = store.for_tenant("globex")
    assert [r["card"] for r in view.card_rows()] == ["globex/github/G-1"]
    with pytest.raises(TenantScopeError):
        view.card_rows("acme")
