"""Tenant prompts: each tenant's custom system prompt, kept as immutable versions.

Versions are rows of tenant_prompts; tenant_prompt_heads hands out the numbers and points at
the active one. PUT, rollback and DELETE each append a version (a deletion is a version marked
deleted), so the history says who changed what, when, even after a deletion."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Row, select, update

from cardloop.prompts.card import TenantPrompt
from cardloop.store import schema as s
from cardloop.store.base import StoreBase, check_text
from cardloop.store.values import NotFoundError, StoreError, TenantPromptVersion, check_tenant, encode_text

if TYPE_CHECKING:
    # The validator compiles its rules on import (about 12 ms): every command that opens the
    # store would pay for it; only the one that stores a prompt needs it, and has it loaded.
    from cardloop.prompts.validate import ValidationResult

# The version column is an INTEGER: 4 bytes on PostgreSQL, 8 on SQLite. No version above the
# smaller bound can exist on either, and asking for one is a driver error (PostgreSQL "integer
# out of range", SQLite OverflowError past 2**63 - 1), so such a number is simply not found.
MAX_PROMPT_VERSION = 2**31 - 1


@dataclass(frozen=True)
class GuardRecord:
    """What the guard model said about a prompt at PUT time (prompts/injection/guard.py)."""

    verdict: str  # "allow"; "reject" is refused by put_tenant_prompt
    reason: str
    model: str


class TenantPromptsMixin(StoreBase):
    def put_tenant_prompt(
        self, tenant: str, prompt: TenantPrompt, validation: ValidationResult, created_by: str,
        guard: GuardRecord | None = None,
    ) -> TenantPromptVersion:
        """Store `prompt` as the tenant's new current version and return it.

        `validation` is `validate_tenant_prompt(prompt.custom_system_prompt)`: REJECTED is refused
        (StoreError, nothing stored; the database refuses it too); what is stored and used is its
        sanitized prompt. `created_by` says who did it (an API token id, "cli", ...). `guard` is the
        guard model's reading when one was asked; a "reject" is refused like a REJECTED prompt.
        """
        from cardloop.prompts.validate import ValidationStatus

        self._tenant(check_tenant(tenant))
        if validation.status == ValidationStatus.REJECTED:
            raise StoreError(f"tenant {tenant!r}: a REJECTED prompt is never stored")
        check_text("created_by", created_by, 200, required=True)
        if guard is not None:
            if guard.verdict != "allow":
                raise StoreError(f"tenant {tenant!r}: a prompt the guard model rejected is never stored")
            check_text("guard reason", guard.reason, 500, required=True)
            check_text("guard model", guard.model, 200, required=True)
        values = {
            "deleted": False,
            "custom_system_prompt": validation.sanitized_prompt,
            "override_mode": prompt.override_mode,
            "language_preference": prompt.language_preference,
            "tone_profile": json.dumps(dict(prompt.tone_profile), ensure_ascii=False, sort_keys=True),
            "validation_status": validation.status.value,
            "issues": json.dumps(validation.to_dict()["issues"], ensure_ascii=False),
            "submitted_sha256": hashlib.sha256(encode_text(prompt.custom_system_prompt)).hexdigest(),
            "restored_from": None,
            "guard_verdict": guard.verdict if guard else None,
            "guard_reason": guard.reason if guard else None,
            "guard_model": guard.model if guard else None,
            "created_by": created_by,
        }
        with self._db.write(tenant) as conn:
            return self._append_prompt_version(conn, tenant, values, active=True)

    def current_tenant_prompt(self, tenant: str) -> TenantPromptVersion | None:
        """The active version (None when the tenant never had one or deleted it); `.prompt` is
        what the prompt core takes as `AssemblyRequest.tenant_prompt`."""
        self._tenant(check_tenant(tenant))
        h, v = s.tenant_prompt_heads.c, s.tenant_prompts.c
        query = (
            select(s.tenant_prompts)
            .join_from(s.tenant_prompts, s.tenant_prompt_heads,
                       (h.tenant == v.tenant) & (h.current_version == v.version))
            .where(v.tenant == tenant)
        )
        with self._db.read(tenant) as conn:
            row = conn.execute(query).one_or_none()
        return None if row is None else _prompt_version(row._mapping)

    def tenant_prompt_versions(self, tenant: str) -> list[TenantPromptVersion]:
        """Every version, deletions included, oldest first."""
        self._tenant(check_tenant(tenant))
        v = s.tenant_prompts.c
        with self._db.read(tenant) as conn:
            rows = conn.execute(select(s.tenant_prompts).where(v.tenant == tenant).order_by(v.version)).all()
        return [_prompt_version(row._mapping) for row in rows]

    def tenant_prompt_version(self, tenant: str, version: int) -> TenantPromptVersion | None:
        self._tenant(check_tenant(tenant))
        if not _storable(version):
            return None
        with self._db.read(tenant) as conn:
            row = conn.execute(_version_query(tenant, version)).one_or_none()
        return None if row is None else _prompt_version(row._mapping)

    def delete_tenant_prompt(self, tenant: str, created_by: str = "system") -> bool:
        """Leave the tenant without an active prompt (a new version marked deleted records it).
        False, and nothing written, when there is no active prompt."""
        self._tenant(check_tenant(tenant))
        check_text("created_by", created_by, 200, required=True)
        values = {
            "deleted": True,
            "custom_system_prompt": "",
            "override_mode": "append",
            "language_preference": "auto",
            "tone_profile": "{}",
            "validation_status": None,
            "issues": "[]",
            "submitted_sha256": None,
            "restored_from": None,
            "guard_verdict": None,
            "guard_reason": None,
            "guard_model": None,
            "created_by": created_by,
        }
        with self._db.write(tenant) as conn:
            head = self._prompt_head(conn, tenant)
            if head is None or head.current_version is None:
                return False
            self._append_prompt_version(conn, tenant, values, active=False)
        return True

    def rollback_tenant_prompt(self, tenant: str, version: int, created_by: str = "system") -> TenantPromptVersion:
        """Make a copy of `version` the new current version (history is never rewritten).

        NotFoundError when the version does not exist; StoreError when it is a deletion.
        """
        self._tenant(check_tenant(tenant))
        check_text("created_by", created_by, 200, required=True)
        with self._db.write(tenant) as conn:
            # The head first: rollbacks and PUTs of one tenant queue on it in one order.
            self._prompt_head(conn, tenant)
            row = conn.execute(_version_query(tenant, version)).one_or_none() if _storable(version) else None
            if row is None:
                raise NotFoundError(f"tenant {tenant!r} has no prompt version {version}")
            source = row._mapping
            if source["deleted"]:
                raise StoreError(f"tenant {tenant!r}: version {version} records a deletion; it holds no prompt")
            copied = ("custom_system_prompt", "override_mode", "language_preference", "tone_profile",
                      "validation_status", "issues", "submitted_sha256",
                      # The copied text is the text that guard read: its verdict goes with it.
                      "guard_verdict", "guard_reason", "guard_model")
            values = {name: source[name] for name in copied} | {
                "deleted": False, "restored_from": version, "created_by": created_by,
            }
            return self._append_prompt_version(conn, tenant, values, active=True)

    def _prompt_head(self, conn: Connection, tenant: str) -> Row[Any] | None:
        h = s.tenant_prompt_heads.c
        return conn.execute(
            select(h.latest_version, h.current_version).where(h.tenant == tenant).with_for_update()
        ).one_or_none()

    def _append_prompt_version(
        self, conn: Connection, tenant: str, values: Mapping[str, Any], *, active: bool
    ) -> TenantPromptVersion:
        now = self.clock()
        h = s.tenant_prompt_heads.c
        conn.execute(
            self._insert(s.tenant_prompt_heads)
            .values(tenant=tenant, latest_version=0, current_version=None, updated_at=now)
            .on_conflict_do_nothing(index_elements=[h.tenant])
        )
        # Locked: two concurrent PUTs get consecutive versions instead of one failing on the key.
        head = self._prompt_head(conn, tenant)
        assert head is not None  # inserted above, or already there
        version = int(head.latest_version) + 1
        row = {**values, "tenant": tenant, "version": version, "created_at": now}
        conn.execute(s.tenant_prompts.insert().values(**row))
        conn.execute(
            update(s.tenant_prompt_heads)
            .where(h.tenant == tenant)
            .values(latest_version=version, current_version=version if active else None, updated_at=now)
        )
        return _prompt_version(row)


def _storable(version: int) -> bool:
    return 1 <= version <= MAX_PROMPT_VERSION


def _version_query(tenant: str, version: int) -> Any:
    v = s.tenant_prompts.c
    return select(s.tenant_prompts).where(v.tenant == tenant, v.version == version)


def _prompt_version(row: Mapping[str, Any]) -> TenantPromptVersion:
    return TenantPromptVersion(
        tenant=row["tenant"],
        version=row["version"],
        deleted=bool(row["deleted"]),
        custom_system_prompt=row["custom_system_prompt"],
        override_mode=row["override_mode"],
        language_preference=row["language_preference"],
        tone_profile=json.loads(row["tone_profile"]),
        validation_status=row["validation_status"],
        issues=tuple(json.loads(row["issues"])),
        submitted_sha256=row["submitted_sha256"],
        restored_from=row["restored_from"],
        guard_verdict=row.get("guard_verdict"),
        guard_reason=row.get("guard_reason"),
        guard_model=row.get("guard_model"),
        created_by=row["created_by"],
        created_at=row["created_at"],
    )
