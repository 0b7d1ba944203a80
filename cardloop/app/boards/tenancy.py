"""Which tenant a delivery belongs to: the one whose secret signed it.

Each board has one secret per tenant: the board's own variable (CARDLOOP_GENERIC_WEBHOOK_SECRET,
...) belongs to the board's default tenant (`boards.<board>.tenant`), and `boards.<board>.secrets`
names a variable for each further tenant. A delivery is checked against each of them; the one
that verifies it decides the tenant. What the body says about a tenant (an org mapped through
`boards.<board>.tenants`, the generic body's `tenant`) is only a claim: one that differs from the
verified tenant is refused (403), so a sender holding one tenant's secret can never reach another
tenant's cards. A single-tenant setup keeps working with the board's variable alone.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from typing import Protocol

from cardloop.app.boards.events import BoardEvent, SignatureMismatch, WebhookError
from cardloop.contracts.config import Config
from cardloop.contracts.secrets import Secret


class _Verifier(Protocol):
    name: str
    secret_env: str

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str, now: float) -> None: ...


def board_secrets(config: Config, adapter: _Verifier) -> list[tuple[str, Secret]]:
    """(tenant, secret) for every tenant whose secret for this board is set; 503 when none is,
    or when two tenants share one secret (the signature could not tell them apart)."""
    board = config.board(adapter.name)
    names = {board.tenant: adapter.secret_env, **board.secrets}
    found = [(tenant, secret) for tenant, env in names.items() if (secret := config.secret(env)) is not None]
    if not found:
        raise WebhookError(503, f"webhooks from {adapter.name} are refused: {adapter.secret_env} is not set"
                                + (f" (nor {', '.join(sorted(set(board.secrets.values())))})" if board.secrets else ""))
    for i, (tenant, secret) in enumerate(found):
        for other, other_secret in found[:i]:
            if hmac.compare_digest(secret.reveal().encode(), other_secret.reveal().encode()):
                raise WebhookError(503, f"webhooks from {adapter.name} are refused: tenants {other!r} and "
                                        f"{tenant!r} have the same secret; give each tenant its own")
    return found


def verified_tenant(adapter: _Verifier, headers: Mapping[str, str], body: bytes,
                    secrets: Sequence[tuple[str, Secret]], now: float) -> str:
    """The tenant whose secret signed the body. A signature made with another secret moves on
    to the next tenant's; any other refusal (a missing or malformed header, a stale Linear
    timestamp) is the same for every secret and is raised at once. 401 when none matches."""
    mismatch: SignatureMismatch | None = None
    for tenant, secret in secrets:
        try:
            adapter.verify(headers, body, secret.reveal(), now)
        except SignatureMismatch as err:
            mismatch = err
            continue
        return tenant
    if mismatch is None:  # board_secrets never returns an empty list
        raise WebhookError(503, f"webhooks from {adapter.name} are refused: no secret is set")
    raise mismatch


def claim_matches(event: BoardEvent, tenant: str) -> BoardEvent:
    """The event as the verified tenant's; 403 when its body names another tenant."""
    if event.tenant is not None and event.tenant != tenant:
        raise WebhookError(403, f"the delivery names tenant {ascii(event.tenant)[:120]} (boards.{event.board}."
                                f"tenants) but was signed with the secret of tenant {tenant!r}: a tenant's "
                                "secret acts on that tenant's cards only")
    return event.model_copy(update={"tenant": tenant})
