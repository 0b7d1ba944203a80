"""The ids a board gives a card besides the one its key was made of (table card_aliases).

A board's human id can change under a card: a Linear issue moved to another team (ENG-123 ->
OPS-45), a Jira issue moved to another project (PROJ-1 -> OTHER-7), a GitHub issue transferred
to another repository (acme/api#4 -> acme/web#9). The card keeps the key it was created under
(its history, ledger, notes and Temporal workflow live there); the board's stable id ("uid":
Linear's issue UUID, Jira's numeric issue id, Trello's long card id, GitHub's issue or pull
request node id) and every name the board gave it since ("name", in the key's card id encoding)
lead a delivery, `card show`
or an API call that names it by them to that key. A GitHub project item's node id, which the
item keeps when its issue is transferred, leads to the card too (table card_board_items). A
repository renamed or moved to another owner renames every card the board names under it
(rename_repository), and a card created under a new name before the delivery saying whose name
it is gets merged into that card (merge_card). Rows are keyed by tenant and board: nothing here
leads across tenants or boards (PostgreSQL's row-level security also holds the card key under
the tenant's prefix)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import (
    CompoundSelect,
    Connection,
    and_,
    bindparam,
    func,
    literal_column,
    or_,
    select,
    union_all,
    update,
)

from cardloop.contracts.payloads import card_key_id
from cardloop.prompts.card import Card
from cardloop.store import schema as s
from cardloop.store.base import StoreBase, StoreError, check_text
from cardloop.store.values import check_tenant

MAX_BOARD_UID = 300


@dataclass(frozen=True)
class BoardIds:
    """What the store knows of a card's ids on its board: its stable id, and the names it was
    given after its first (oldest first: the last is what the board shows now)."""

    uid: str | None
    names: tuple[str, ...]


@dataclass(frozen=True)
class AliasMatch:
    """The cards a board's name and stable id lead to (None: none), and the newest name recorded
    for the card a delivery reaches by its own key or by name (card_and_ids; None: none recorded),
    so that a card named back to an id it had before is told so (its board writes follow)."""

    by_name: str | None
    by_uid: str | None
    newest: str | None = None
    by_item: str | None = None   # the card the board's item (a GitHub project item) was recorded for


class CardAliasesMixin(StoreBase):
    card_fields: Callable[[str], Any]   # CardsMixin's, in the Store
    set_gone: Callable[[str, str | None], bool]   # CardsMixin's too

    def remember_board_ids(self, card_key: str, *, uid: str | None = None, name: str | None = None,
                           item: str | None = None) -> None:
        """Record the card's stable board id (the first one recorded stays: a uid never moves to
        another card, and a card never takes a second), a name the board now gives it (its
        `named_at` renewed, so the newest name is the board's current one) and a board item that
        holds it (a GitHub project item: an item stays with the first card it was recorded for;
        a card may be in several). The name is a key's card id part (CardRef.card_id)."""
        tenant = self._card_tenant(card_key)
        board = card_key.split("/", 2)[1]
        check_text("uid", uid, MAX_BOARD_UID)
        check_text("name", name, MAX_BOARD_UID)
        check_text("item", item, MAX_BOARD_UID)
        base = {"tenant": tenant, "board": board, "card_key": card_key}
        with self._db.write(tenant) as conn:
            a = s.card_aliases.c
            if item is not None:
                self._insert_new(conn, s.card_board_items, base | {"item": item, "seen_at": self.clock()})
            if uid is not None and conn.execute(select(a.value).where(
                    a.tenant == tenant, a.card_key == card_key, a.kind == "uid")).first() is None:
                self._insert_new(conn, s.card_aliases, base | {"kind": "uid", "value": uid, "named_at": self.clock()})
            if name is not None:
                conn.execute(self._upsert(s.card_aliases, ("tenant", "board", "kind", "value"), ("named_at",)),
                             base | {"kind": "name", "value": name, "named_at": self.clock()})

    def card_for_board_ids(self, tenant: str, board: str, *, name: str | None = None,
                           uid: str | None = None) -> AliasMatch:
        """The card keys a recorded name and a recorded stable id of `tenant`'s `board` lead to."""
        self._tenant(check_tenant(tenant))
        if not name and not uid:
            return AliasMatch(None, None)
        with self._db.read(tenant) as conn:
            return _match(conn, tenant, board, name, uid)

    def card_and_ids(self, card_key: str, *, uid: str | None = None,
                     item: str | None = None) -> tuple[Card | None, AliasMatch]:
        """In one read: the card stored under `card_key` (its fields, or None), the cards its
        board's `uid`, its board `item` and its card id as a recorded name lead to, and the
        newest name of the card the delivery reaches (by name, else the stored one). What a
        webhook delivery asks on every event (boards/identity.py)."""
        tenant = self._card_tenant(card_key)
        board = card_key.split("/", 2)[1]
        with self._db.read(tenant) as conn:
            fields = conn.execute(select(s.cards.c.fields).where(
                s.cards.c.card_key == card_key, s.cards.c.tenant == tenant)).scalar_one_or_none()
            match = _ids(conn, tenant, board, card_key, uid, item, stored=fields is not None)
        return (None if fields is None else Card.model_validate_json(fields)), match

    def board_ids(self, card_key: str) -> BoardIds:
        """The card's stable board id and the names it was given since its first."""
        tenant = self._card_tenant(card_key)
        a = s.card_aliases.c
        with self._db.read(tenant) as conn:
            rows = conn.execute(select(a.kind, a.value).where(a.tenant == tenant, a.card_key == card_key)
                                .order_by(a.named_at, a.value)).all()
        uid = next((r.value for r in rows if r.kind == "uid"), None)
        return BoardIds(uid, tuple(r.value for r in rows if r.kind == "name"))

    def board_name(self, card_key: str) -> str:
        """The id the board shows for the card now: the newest name recorded for it, else the one
        its key was made of; as the board writes it (a key's ':' is '/', its '%3A' is ':')."""
        names = self.board_ids(card_key).names
        return _as_board_writes(names[-1] if names else card_key.split("/", 2)[2])

    def board_names(self, tenant: str | None = None, board: str | None = None) -> dict[str, str]:
        """The id the board shows now (as board_name says it) of every card of `tenant`'s `board`
        that was given a later name, by card key, in one read: what `card list` shows beside a
        card's key. On PostgreSQL row-level security shows one tenant's: give `tenant` there."""
        if tenant is not None:
            tenant = self._tenant(check_tenant(tenant))
        elif self._scope is not None:
            tenant = self._scope
        a = s.card_aliases.c
        query = select(a.card_key, a.value).where(a.kind == "name")
        if tenant is not None:
            query = query.where(a.tenant == tenant)
        if board is not None:
            query = query.where(a.board == board)
        with self._db.read(tenant) as conn:
            rows = conn.execute(query.order_by(a.named_at, a.value)).all()
        return {row.card_key: _as_board_writes(row.value) for row in rows}   # the newest name last, so it stays

    def rename_repository(self, tenant: str, board: str, old: str, new: str) -> list[str]:
        """A repository of `tenant`'s `board` renamed or moved to another owner ("owner/name"
        `old` is `new` now): every card the board names under `old` now ("old#12", by its key or
        its newest name) is named "new#12" from now on, so deliveries naming the new name reach
        it and its board writes go there; and every card of the tenant (on any board) whose
        repository is `old` works in `new` (its URL follows when it is a page of `old`). One
        transaction, within the tenant (row-level security holds it on PostgreSQL). The keys of
        the cards it changed, in key order."""
        tenant = self._tenant(check_tenant(tenant))
        for name, value in (("old repository", old), ("new repository", new)):
            check_text(name, value, MAX_BOARD_UID, required=True)
            if not _REPO.fullmatch(value):
                raise StoreError(f"{name} {value!r}: expected owner/name")
        # GitHub names are case-insensitive: "Acme/API" and "acme/api" are one repository.
        numbered = re.compile(re.escape(old) + r"#(\d+)", re.IGNORECASE)
        a, c = s.card_aliases.c, s.cards.c
        with self._db.write(tenant) as conn:
            keys = conn.execute(select(c.card_key).where(c.tenant == tenant, c.board == board)).scalars().all()
            newest = {row.card_key: row.value for row in conn.execute(
                select(a.card_key, a.value).where(a.tenant == tenant, a.board == board, a.kind == "name")
                .order_by(a.named_at, a.value)).all()}   # the newest name last, so it stays
            now, names = self.clock(), []
            for key in keys:
                found = numbered.fullmatch(_as_board_writes(newest.get(key) or key.split("/", 2)[2]))
                if found is not None:
                    names.append({"tenant": tenant, "board": board, "card_key": key, "kind": "name",
                                  "value": card_key_id(f"{new}#{found.group(1)}"), "named_at": now})
            if names:
                # The name moves to the card even when another card had it before: the board says
                # whose it is now (a repository renamed onto a name freed earlier).
                conn.execute(self._upsert(s.card_aliases, ("tenant", "board", "kind", "value"),
                                          ("card_key", "named_at")), names)
            # Every board's cards of the tenant that work in it: a Linear or Jira card may too.
            moved = []
            for row in conn.execute(select(c.card_key, c.board, c.fields).where(
                    c.tenant == tenant, func.lower(c.repo) == old.lower())).all():
                card = _in_repository(Card.model_validate_json(row.fields), old, new,
                                      url=row.board == board)   # another board's URL is its own
                moved.append({"key": row.card_key, "new_repo": card.repo,
                              "new_fields": card.model_dump_json(exclude={"history", "context"})})
            if moved:
                conn.execute(update(s.cards).where(c.tenant == tenant, c.card_key == bindparam("key")).values(
                    repo=bindparam("new_repo"), fields=bindparam("new_fields")), moved)
        changed = {row["card_key"] for row in names} | {row["key"] for row in moved}
        return sorted(changed)

    def merge_card(self, duplicate: str, into: str, note: str) -> None:
        """`duplicate` is the card `into` under a name its board gave it before cardloop knew
        (a GitHub issue's project move that arrived before its transfer): its card id is recorded
        as `into`'s newest name (so every later delivery naming it, the one stored under it
        included, reaches `into`, and board writes go to it), and `duplicate` is marked gone with
        `note` (card show and card list say so). Its rows (history, ledger) stay where they are."""
        tenant = self._card_tenant(duplicate)
        board, card_id = duplicate.split("/", 2)[1:]
        if self._card_tenant(into) != tenant or into.split("/", 2)[1] != board or into == duplicate:
            raise StoreError(f"card {duplicate!r} cannot be merged into {into!r}: another tenant, board or itself")
        with self._db.write(tenant) as conn:
            conn.execute(self._upsert(s.card_aliases, ("tenant", "board", "kind", "value"), ("card_key", "named_at")),
                         {"tenant": tenant, "board": board, "card_key": into, "kind": "name", "value": card_id,
                          "named_at": self.clock()})
        self.set_gone(duplicate, note)

    def stored_card_key(self, card_key: str) -> str | None:
        """The key of the stored card `card_key` names: itself, or the card of its tenant and board
        that its card id was recorded for as a later name or as the stable id; None when neither is
        stored. What `card show OPS-45` and the API's card routes reach a renamed card by."""
        if self.card_fields(card_key) is not None:
            return card_key
        tenant, board, card_id = card_key.split("/", 2)
        match = self.card_for_board_ids(tenant, board, name=card_id, uid=card_id)
        return match.by_name or match.by_uid


_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")


def _in_repository(card: Card, old: str, new: str, *, url: bool) -> Card:
    """The card working in `new` instead of `old`: its repository, and (`url`: a card of the
    repository's board) its URL when it is a page of `old` ("https://github.com/<old>/issues/4")."""
    fields: dict[str, Any] = {"repo": new}
    if url and card.url is not None:
        fields["url"] = re.sub(r"(?i)(?<=://)([^/]+/)" + re.escape(old) + r"(?=/|\Z)", lambda m: m.group(1) + new,
                               card.url, count=1)
    try:
        return Card.model_validate(card.model_dump() | fields)
    except ValidationError:   # a URL the new name makes too long: the old one redirects
        return Card.model_validate(card.model_dump() | {"repo": new})


def _as_board_writes(encoded: str) -> str:
    """A key's card id as its board writes it: ':' is '/', '%3A' is ':' (CardRef's encoding undone)."""
    return encoded.replace(":", "/").replace("%3A", ":")


def _ids(conn: Connection, tenant: str, board: str, card_key: str, uid: str | None, item: str | None, *,
         stored: bool) -> AliasMatch:
    """card_and_ids' one statement past the card's own row (every delivery asks it): the cards the
    key's card id as a name, `uid` and `item` lead to, and the names of the card stored under the
    key and of the card its id as a name leads to, for the newest of the one reached. The card
    id is looked up as a name even when the card is stored: a name recorded for another card
    means the board gave that id to it since (identity.py, merge_card)."""
    params = {"tenant": tenant, "board": board, "card_key": card_key, "card_id": card_key.split("/", 2)[2],
              "uid": uid, "item": item}
    rows = conn.execute(_ids_statement(bool(uid), bool(item)), params).all()
    found = {row.kind: row.card_key for row in rows if row.tag == "id"}
    by_name = found.get("name")
    target = by_name or (card_key if stored else None)
    names = sorted((row.named_at, row.value) for row in rows if row.tag == "named" and row.card_key == target)
    by_item = next((row.card_key for row in rows if row.tag == "item"), None)
    return AliasMatch(by_name, found.get("uid"), names[-1][1] if names else None, by_item)


@functools.cache
def _ids_statement(with_uid: bool, with_item: bool) -> CompoundSelect:
    """Built once per shape, run with parameters: building the expression each delivery cost
    more than running it."""
    a, b, named = s.card_aliases.c, s.card_board_items.c, s.card_aliases.alias("named").c
    tenant, board, card_id = bindparam("tenant"), bindparam("board"), bindparam("card_id")
    wanted = [and_(a.kind == "name", a.value == card_id)]
    if with_uid:
        wanted.append(and_(a.kind == "uid", a.value == bindparam("uid")))
    reached = or_(a.card_key == bindparam("card_key"), a.card_key.in_(select(named.card_key).where(
        named.tenant == tenant, named.board == board, named.kind == "name", named.value == card_id)))
    parts = [select(literal_column("'id'").label("tag"), a.kind, a.card_key, a.value, a.named_at)
             .where(a.tenant == tenant, a.board == board, or_(*wanted)),
             select(literal_column("'named'").label("tag"), a.kind, a.card_key, a.value, a.named_at)
             .where(a.tenant == tenant, a.kind == "name", reached)]
    if with_item:
        parts.append(select(literal_column("'item'").label("tag"), literal_column("'item'"), b.card_key, b.item,
                            b.seen_at).where(b.tenant == tenant, b.board == board, b.item == bindparam("item")))
    return union_all(*parts)


def _match(conn: Connection, tenant: str, board: str, name: str | None, uid: str | None) -> AliasMatch:
    a = s.card_aliases.c
    wanted = [and_(a.kind == kind, a.value == value) for kind, value in (("name", name), ("uid", uid)) if value]
    rows = conn.execute(select(a.kind, a.card_key).where(a.tenant == tenant, a.board == board, or_(*wanted))).all()
    found = {row.kind: row.card_key for row in rows}
    return AliasMatch(found.get("name"), found.get("uid"))
