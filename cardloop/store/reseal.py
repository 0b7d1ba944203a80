"""Sealing every stored blob again under the current blob key: the last step of a key rotation.

Blobs are stored by content and never written twice, so a blob sealed under a key stays under it
(store/sealing.py); dropping that key from the ring would make it unreadable. `reseal_blobs`
opens each blob of a tenant that is not under the ring's first key (sealed under an older one, or
stored in plain text before encryption was on) and writes it back sealed under the first, one
batch per transaction, so a run that stops is resumed by running it again (what is done stays
done). A blob that cannot be opened (a key missing from the ring, altered bytes) is left as it is
and reported. Concurrent writers are safe: blobs are only ever inserted, and a row is replaced
only if it still holds the bytes that were read.

On PostgreSQL with row-level security, a role sees a tenant's rows only in a transaction scoped
to it: without a tenant list the store finds the tenants among the rows it can see (all of them
on SQLite or as a BYPASSRLS role; none as the application role, which must name them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import select, update

from cardloop.store import schema as s
from cardloop.store.base import StoreBase
from cardloop.store.sealing import open_blob, sealed_key_id
from cardloop.store.values import StoreError, check_tenant

BATCH = 200


@dataclass
class TenantReseal:
    tenant: str
    resealed: Counter[str] = field(default_factory=Counter)  # former key id ("plain text") -> count
    current: int = 0                                        # already under the first key
    unreadable: list[str] = field(default_factory=list)     # "ref: why", left as they were

    @property
    def total_resealed(self) -> int:
        return sum(self.resealed.values())


class ResealMixin(StoreBase):
    def blob_tenants(self) -> list[str]:
        """The tenants among the blob rows this connection can see (unscoped: on PostgreSQL with
        row-level security, only a BYPASSRLS role sees any)."""
        with self._db.read() as conn:
            return sorted(conn.execute(select(s.blobs.c.tenant).distinct()).scalars())

    def reseal_blobs(self, tenant: str, *, batch: int = BATCH) -> TenantReseal:
        """Seal every blob of `tenant` that is not under the ring's first key with that key."""
        if self._sealer is None:
            raise StoreError("no blob keys are configured (the codec keys, temporal.codec_keys_env): "
                             "nothing to seal with")
        tenant = self._tenant(check_tenant(tenant))
        current = self._sealer.ring.ids[0]
        report = TenantReseal(tenant)
        after = ""
        while True:
            with self._db.write(tenant) as conn:
                rows = conn.execute(
                    select(s.blobs.c.ref, s.blobs.c.data)
                    .where(s.blobs.c.tenant == tenant, s.blobs.c.ref > after)
                    .order_by(s.blobs.c.ref).limit(batch)).all()
                for row in rows:
                    data = bytes(row.data)
                    kid = sealed_key_id(data)
                    if kid == current:
                        report.current += 1
                        continue
                    try:
                        plain = open_blob(self._sealer, tenant, row.ref, data)
                    except StoreError as err:
                        report.unreadable.append(f"{row.ref}: {err}")
                        continue
                    conn.execute(update(s.blobs)
                                 .where(s.blobs.c.tenant == tenant, s.blobs.c.ref == row.ref, s.blobs.c.data == data)
                                 .values(data=self._sealer.seal(tenant, row.ref, plain)))
                    report.resealed[kid or "plain text"] += 1
            if len(rows) < batch:
                return report
            after = rows[-1].ref


def tenants_to_reseal(store: ResealMixin, named: Iterable[str]) -> list[str]:
    named = list(named)
    return [check_tenant(t) for t in named] if named else store.blob_tenants()
