"""A card's stable board id and the names its board gave it later (store/aliases.py), on SQLite
and the machine's PostgreSQL: what they lead to, never across tenants or boards, and migration 12
on a database that already holds cards."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from cardloop.prompts.card import Card, Message
from cardloop.store import MIGRATIONS, Store, StoreError, TenantScopeError
from cardloop.store import migrations as store_migrations

ENG = "acme/linear/ENG-123"
UUID = "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"


def _card(key: str) -> Card:
    tenant, board, card_id = key.split("/")
    return Card(id=card_id, title=f"card {card_id}", tenant=tenant, board=board)


def test_a_name_and_a_stable_id_lead_to_the_card_they_were_recorded_for(store: Store) -> None:
    store.upsert_card(ENG, _card(ENG))
    assert store.board_name(ENG) == "ENG-123"   # nothing recorded: the id its key was made of
    store.remember_board_ids(ENG, uid=UUID)
    store.remember_board_ids(ENG, name="OPS-45")
    match = store.card_for_board_ids("acme", "linear", name="OPS-45", uid=UUID)
    assert (match.by_name, match.by_uid) == (ENG, ENG)
    assert store.stored_card_key("acme/linear/OPS-45") == ENG
    assert store.stored_card_key(f"acme/linear/{UUID}") == ENG     # `card show <uuid>` too
    assert store.stored_card_key(ENG) == ENG
    assert store.stored_card_key("acme/linear/OPS-46") is None
    # What a delivery asks in one read: the card under its own key, else where its id leads.
    stored, match = store.card_and_ids(ENG, uid=UUID)
    assert stored is not None and stored.id == "ENG-123" and (match.by_name, match.by_uid) == (None, ENG)
    stored, match = store.card_and_ids("acme/linear/OPS-45", uid=None)
    assert stored is None and (match.by_name, match.by_uid) == (ENG, None)
    assert store.card_and_ids("globex/linear/OPS-45", uid=UUID)[1] == match.__class__(None, None)
    # Moved once more: the newest name is the board's, the older ones still lead to the card.
    store.remember_board_ids(ENG, name="WEB-7")
    assert store.board_ids(ENG).names == ("OPS-45", "WEB-7") and store.board_name(ENG) == "WEB-7"
    assert store.stored_card_key("acme/linear/OPS-45") == ENG


def test_a_stable_id_stays_with_its_first_card_and_a_card_takes_one(store: Store) -> None:
    other = "acme/linear/ENG-124"
    store.remember_board_ids(ENG, uid=UUID)
    store.remember_board_ids(other, uid=UUID)           # the id is ENG-123's: nothing changes
    store.remember_board_ids(ENG, uid="another-uuid")   # ENG-123 has one already
    assert store.card_for_board_ids("acme", "linear", uid=UUID).by_uid == ENG
    assert store.card_for_board_ids("acme", "linear", uid="another-uuid").by_uid is None
    assert (store.board_ids(ENG).uid, store.board_ids(other).uid) == (UUID, None)


def test_ids_never_lead_across_tenants_or_boards(store: Store) -> None:
    store.remember_board_ids(ENG, uid=UUID, name="OPS-45")
    for tenant, board in (("globex", "linear"), ("acme", "jira"), ("acme", "trello")):
        match = store.card_for_board_ids(tenant, board, name="OPS-45", uid=UUID)
        assert (match.by_name, match.by_uid) == (None, None), (tenant, board)
        assert store.stored_card_key(f"{tenant}/{board}/OPS-45") is None
    globex = store.for_tenant("globex")
    assert globex.card_for_board_ids("globex", "linear", uid=UUID).by_uid is None
    with pytest.raises(TenantScopeError):
        globex.card_for_board_ids("acme", "linear", uid=UUID)
    with pytest.raises(TenantScopeError):
        globex.remember_board_ids(ENG, name="OPS-46")


def test_bad_ids_are_refused_with_what_is_wrong(store: Store) -> None:
    with pytest.raises(StoreError, match="uid"):
        store.remember_board_ids(ENG, uid="x" * 301)
    with pytest.raises(StoreError, match="name"):
        store.remember_board_ids(ENG, name="")
    with pytest.raises(StoreError, match="card key"):
        store.remember_board_ids("no-board", uid=UUID)


def test_migration_12_on_a_database_that_holds_cards(db_url: str) -> None:
    old = Store(db_url)
    try:
        store_migrations.migrate(old._db, MIGRATIONS[:11])
        old.upsert_card(ENG, _card(ENG))
        old.append_message(ENG, Message(role="user", content="keep this history"), dedup_key="d0")
        assert store_migrations.migrate(old._db) == list(range(12, len(MIGRATIONS) + 1))
    finally:
        old.close()
    with Store.open(db_url) as store:
        assert store.schema_version() == len(MIGRATIONS)
        store.remember_board_ids(ENG, uid=UUID, name="OPS-45")
        found = store.stored_card_key("acme/linear/OPS-45")
        assert found == ENG
        card = store.get_card(found)
        assert card is not None and [m.content for m in card.history] == ["keep this history"]
        if store.dialect == "postgresql":
            with store.engine.connect() as conn:
                forced = conn.execute(text("SELECT relforcerowsecurity FROM pg_class WHERE relname = 'card_aliases' "
                                           "AND relnamespace = current_schema()::regnamespace")).scalar_one()
            assert forced is True


def test_board_names_are_each_cards_newest_name_in_one_read(store: Store) -> None:
    issue = "acme/github/octo-org:octo-repo#1"
    store.upsert_card(ENG, _card(ENG))
    store.remember_board_ids(ENG, uid=UUID, name="OPS-45")
    store.remember_board_ids(ENG, name="WEB-7")
    store.remember_board_ids(issue, uid="I_kwDOM0_enM6qMbTe", name="Codertocat:Hello-World#1")
    store.remember_board_ids("acme/linear/ENG-9", uid="0b7e1a2c-uuid")      # a stable id is no name
    store.remember_board_ids("globex/linear/ENG-123", name="GLX-1")
    names = store.board_names("acme")
    assert names == {ENG: "WEB-7", issue: "Codertocat/Hello-World#1"}   # as the board writes it
    assert names[ENG] == store.board_name(ENG)
    assert store.board_names("acme", "github") == {issue: "Codertocat/Hello-World#1"}
    assert store.board_names("acme", "jira") == {}
    assert store.board_names("globex") == {"globex/linear/ENG-123": "GLX-1"}
    # Named back (OPS-45 again, its named_at renewed): that is the newest.
    store.remember_board_ids(ENG, name="OPS-45")
    assert store.board_names("acme", "linear") == {ENG: "OPS-45"} and store.board_name(ENG) == "OPS-45"
    with pytest.raises(TenantScopeError):
        store.for_tenant("acme").board_names("globex")
    assert store.for_tenant("acme").board_names() == store.board_names("acme")


def _gh(key: str, repo: str | None, url: str | None = None) -> Card:
    tenant, board, card_id = key.split("/", 2)
    return Card(id=card_id.replace(":", "/"), title=f"card {card_id}", tenant=tenant, board=board, repo=repo, url=url)


def test_a_renamed_repository_renames_its_cards_of_that_tenant_only(store: Store) -> None:
    issue, pull, other = "acme/github/acme:api#4", "acme/github/acme:api#7", "acme/github/acme:web#1"
    store.upsert_card(issue, _gh(issue, "acme/api", "https://github.com/acme/api/issues/4"))
    store.upsert_card(pull, _gh(pull, "acme/api"))
    store.upsert_card(other, _gh(other, "acme/web"))
    # A card of the repository under a name its issue got later (transferred into acme/api).
    moved = "acme/github/acme:old#2"
    store.upsert_card(moved, _gh(moved, "acme/api"))
    store.remember_board_ids(moved, name="acme:api#9")
    # Tenant globex holds a card under the very same name: another tenant's rename never touches it.
    theirs = "globex/github/acme:api#4"
    store.upsert_card(theirs, _gh(theirs, "acme/api"))
    # A Linear card of acme that works in the repository: its repository follows, its name is Linear's.
    linear = "acme/linear/ENG-9"
    store.upsert_card(linear, _gh(linear, "acme/api", "https://linear.app/acme/api/ENG-9"))
    renamed = store.rename_repository("acme", "github", "acme/api", "acme/core")
    assert renamed == sorted([issue, pull, moved, linear])
    assert store.board_name(linear) == "ENG-9"
    linear_card = store.card_fields(linear)
    assert linear_card is not None and linear_card.repo == "acme/core"
    assert linear_card.url == "https://linear.app/acme/api/ENG-9"   # Linear's page, not the repository's
    assert [store.board_name(k) for k in (issue, pull, moved, other)] == [
        "acme/core#4", "acme/core#7", "acme/core#9", "acme/web#1"]
    assert store.card_for_board_ids("acme", "github", name="acme:core#4").by_name == issue
    card = store.card_fields(issue)
    assert card is not None and (card.repo, card.url) == ("acme/core", "https://github.com/acme/core/issues/4")
    assert store.board_name(theirs) == "acme/api#4" and store.card_fields(theirs).repo == "acme/api"  # type: ignore[union-attr]
    assert store.card_for_board_ids("globex", "github", name="acme:core#4").by_name is None
    # Renamed again, its owner too (transferred; case differs from what the cards say): they follow.
    assert store.rename_repository("acme", "github", "ACME/Core", "acme-labs/core") == sorted(
        [issue, pull, moved, linear])
    assert store.board_name(issue) == "acme-labs/core#4"
    # A scoped store cannot rename another tenant's repository; bad names say what is wrong.
    with pytest.raises(TenantScopeError):
        store.for_tenant("globex").rename_repository("acme", "github", "acme-labs/core", "x/y")
    with pytest.raises(StoreError, match="owner/name"):
        store.rename_repository("acme", "github", "acme-labs/core", "no-owner")
    assert store.rename_repository("acme", "github", "nobody/here", "nobody/there") == []


def test_a_repository_renamed_onto_a_freed_name_takes_it_from_the_card_stored_under_it(store: Store) -> None:
    first, second = "acme/github/acme:b#1", "acme/github/acme:a#1"
    store.upsert_card(first, _gh(first, "acme/b"))
    store.upsert_card(second, _gh(second, "acme/a"))
    store.rename_repository("acme", "github", "acme/b", "acme/c")   # b's name is free now
    store.rename_repository("acme", "github", "acme/a", "acme/b")   # and a takes it
    stored, match = store.card_and_ids(first)
    assert stored is not None and match.by_name == second and match.newest == "acme:b#1"
    assert (store.board_name(first), store.board_name(second)) == ("acme/c#1", "acme/b#1")


def test_a_duplicate_merged_into_its_card_leads_to_it(store: Store) -> None:
    old, dup = "acme/github/octo-org:octo-repo#1", "acme/github/Codertocat:Hello-World#1"
    store.upsert_card(old, _gh(old, "octo-org/octo-repo"))
    store.upsert_card(dup, _gh(dup, "Codertocat/Hello-World"))
    store.remember_board_ids(dup, uid="MDU6SXNzdWU0NDQ1MDAwNDE=")
    store.merge_card(dup, old, "merged into it")
    stored, match = store.card_and_ids(dup, uid="MDU6SXNzdWU0NDQ1MDAwNDE=")
    assert stored is not None and (match.by_name, match.by_uid, match.newest) == (old, dup, "Codertocat:Hello-World#1")
    assert store.board_name(old) == "Codertocat/Hello-World#1"
    gone = store.card_gone(dup)
    assert gone is not None and gone[0] == "merged into it"
    with pytest.raises(StoreError, match="cannot be merged"):
        store.merge_card(dup, "globex/github/octo-org:octo-repo#1", "no")
    with pytest.raises(StoreError, match="cannot be merged"):
        store.merge_card(dup, dup, "no")


def test_a_card_named_back_says_so_in_its_newest_name(store: Store) -> None:
    store.upsert_card(ENG, _card(ENG))
    store.remember_board_ids(ENG, name="OPS-45")
    assert store.card_and_ids(ENG)[1].newest == "OPS-45"
    store.remember_board_ids(ENG, name="ENG-123")
    assert store.card_and_ids(ENG)[1].newest == "ENG-123" and store.board_name(ENG) == "ENG-123"
    assert store.card_and_ids("acme/linear/OPS-45")[1] == store.card_and_ids("acme/linear/OPS-45")[1].__class__(
        ENG, None, "ENG-123")


def test_a_board_item_leads_to_the_first_card_it_was_recorded_for(store: Store) -> None:
    issue, other = "acme/github/octo-org:octo-repo#1", "acme/github/octo-org:octo-repo#2"
    store.upsert_card(issue, _gh(issue, "octo-org/octo-repo"))
    store.remember_board_ids(issue, uid="I_old", item="PVTI_a")
    store.remember_board_ids(issue, item="PVTI_b")      # the issue is on a second project too
    store.remember_board_ids(other, item="PVTI_a")      # the item is #1's: nothing changes
    # The transferred issue's own key is stored nowhere; its item leads to the card.
    stored, match = store.card_and_ids("acme/github/Codertocat:Hello-World#1", uid="I_new", item="PVTI_a")
    assert stored is None and (match.by_name, match.by_uid, match.by_item) == (None, None, issue)
    assert store.card_and_ids("acme/github/x:y#3", item="PVTI_b")[1].by_item == issue
    assert store.card_and_ids("globex/github/x:y#3", item="PVTI_a")[1].by_item is None   # another tenant's
    assert store.card_and_ids("acme/jira/X-3", item="PVTI_a")[1].by_item is None          # another board's
    with pytest.raises(StoreError, match="item"):
        store.remember_board_ids(issue, item="x" * 301)
    with pytest.raises(TenantScopeError):
        store.for_tenant("globex").remember_board_ids(issue, item="PVTI_c")


def test_migration_13_on_a_database_that_holds_aliases(db_url: str) -> None:
    old = Store(db_url)
    try:
        store_migrations.migrate(old._db, MIGRATIONS[:12])
        old.upsert_card(ENG, _card(ENG))
        old.remember_board_ids(ENG, uid=UUID, name="OPS-45")
        assert store_migrations.migrate(old._db) == [13]
    finally:
        old.close()
    with Store.open(db_url) as store:
        assert store.schema_version() == 13 == len(MIGRATIONS)
        assert store.stored_card_key("acme/linear/OPS-45") == ENG   # what migration 12 held is kept
        store.remember_board_ids(ENG, item="item-1")
        assert store.card_and_ids("acme/linear/OPS-46", item="item-1")[1].by_item == ENG
        if store.dialect == "postgresql":
            with store.engine.connect() as conn:
                forced = conn.execute(text("SELECT relforcerowsecurity FROM pg_class WHERE relname = "
                                           "'card_board_items' AND relnamespace = current_schema()::regnamespace"
                                           )).scalar_one()
            assert forced is True
