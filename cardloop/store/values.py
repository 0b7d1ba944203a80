"""The store's errors, value objects and key rules.

    StoreError (CardloopError, RuntimeError)   the store refused input or found bad state
    ├── NotFoundError (+ KeyError)             a blob ref or prompt version that is not stored
    ├── TenantScopeError                       a tenant-scoped store asked about another tenant
    └── StoreUnavailable                       the database cannot answer now (SQLite locked past
                                               its busy timeout, PostgreSQL unreachable): transient

Other database driver errors (serialization failure) are left as SQLAlchemy raises them:
they are transient too, and Temporal retries the activity.
"""

from __future__ import annotations

import hashlib
import re
from decimal import Decimal
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from cardloop.contracts.errors import CardloopError
from cardloop.contracts.payloads import CardRef
from cardloop.prompts.card import Card, Message, TenantPrompt
from cardloop.prompts.tenant_id import TENANT_RULE, is_tenant_id

_BLOB_REF = re.compile(r"^sha256:[0-9a-f]{64}\Z")
MAX_KEY = 500


class StoreError(CardloopError, RuntimeError):
    """The store refused its input or found the database in a state it cannot use."""

    exit_code = 2


class NotFoundError(StoreError, KeyError):
    """Something looked up by key is not stored (a KeyError too, for `except KeyError`)."""

    def __str__(self) -> str:
        # KeyError's own __str__ would print the message quoted, like a repr.
        return RuntimeError.__str__(self)


class TenantScopeError(StoreError):
    """A store scoped to one tenant (`Store.for_tenant`) was asked to touch another tenant's data."""


class StoreUnavailable(StoreError):
    """The database could not answer in time: "store unavailable: database is locked". Retrying
    later can succeed; activities report it as the ApplicationError type "StoreUnavailable"."""


def check_tenant(tenant: str) -> str:
    """The card's own rule (prompts/card.py): a tenant the store keeps is one a card can name,
    so no row is written under a tenant that no card, token or policy could then address."""
    if not is_tenant_id(tenant):
        raise StoreError(f"tenant {tenant!r}: {TENANT_RULE}")
    return tenant


def tenant_of(card_key: str) -> str:
    """The tenant segment of a card key 'tenant/board/card id'; StoreError when malformed."""
    if not isinstance(card_key, str) or len(card_key) > MAX_KEY:
        raise StoreError(f"card key {card_key!r}: expected a string 'tenant/board/card id' of at most {MAX_KEY}")
    tenant, _, rest = card_key.partition("/")
    board, _, card_id = rest.partition("/")
    if not (tenant and board and card_id) or any(ch.isspace() for ch in card_key):
        raise StoreError(f"card key {card_key!r}: expected 'tenant/board/card id' without spaces")
    return check_tenant(tenant)


def card_key_for(card: Card) -> str:
    """The canonical key of a card: 'tenant/board/card id', its id encoded by the one rule
    (CardRef.for_board) that the API, the CLI and the workflow ids use."""
    try:
        return CardRef.for_board(card.tenant, card.board, card.id).key
    except ValueError as exc:
        raise StoreError(str(exc)) from None


def blob_ref(text: str) -> str:
    """The content address of `text`, as put_blob returns it."""
    return "sha256:" + hashlib.sha256(encode_text(text)).hexdigest()


def check_blob_ref(ref: str) -> str:
    if not isinstance(ref, str) or not _BLOB_REF.match(ref):
        raise StoreError(f"blob ref {ref!r}: expected 'sha256:' and 64 lowercase hex digits")
    return ref


def encode_text(text: str) -> bytes:
    # surrogatepass: text decoded from JSON may hold lone surrogates; they must round-trip, not crash.
    return text.encode("utf-8", "surrogatepass")


def decode_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Summary(_Value):
    """A cached summary of history messages first..last (inclusive seqs) made by `model`."""

    card_key: str
    first: int = Field(ge=0)
    last: int = Field(ge=0)
    model: str
    text: str
    tokens: int = Field(ge=0)
    method: str


# The note of a "failed" attempt that got no answer in time: the provider may have run it and
# billed it, so it counts with the calls whose usage is unknown (card show), not as billed $0.
TIMED_OUT = "timed out waiting for the answer: the provider may have billed it; usage unknown"


class UsageRecord(_Value):
    """One provider call attempt in the ledger, keyed by (card, `call_key`, `attempt`): a retried
    activity adds a row for its own call, and a row recorded again is recorded once.

    `retry`: the attempt is not the first, or its reply arrived after another attempt's reply
    was stored. `kept`: its result is the one the store holds (the turn's own usage).
    `status`: "calling" while the call runs (a row left so belongs to a worker that died
    mid-call: billed by the provider, usage unknown; either way the reservation `admit_call`
    stored beside it counts against the spend caps, not this record's usage), "done", "failed" (an error answer; a
    stream the provider cut keeps the usage known so far), "cancelled" (a gateway stream its
    caller left before the end: the usage known so far, `note` says so), or "refused" (a
    spend limit refused it before the request left: `note` says which; nothing was billed).
    `token_id`: the API token of a prompt gateway call."""

    call_key: str = Field(min_length=1, max_length=MAX_KEY)
    attempt: int = Field(default=1, ge=1)
    retry: bool = False
    kept: bool = True
    status: Literal["calling", "done", "failed", "cancelled", "refused"] = "done"
    card_key: str = Field(min_length=1, max_length=MAX_KEY)
    tenant: str = Field(min_length=1, max_length=100)
    stage: str = Field(min_length=1, max_length=64)
    profile: str = Field(default="", max_length=100)
    provider: str = Field(default="", max_length=64)
    model: str = Field(default="", max_length=200)
    purpose: Literal["turn", "summary", "research"] = "turn"
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    # Decimal so sums are exact; a float is taken by its shortest repr (0.1 -> Decimal('0.1')).
    cost_usd: Decimal = Field(default=Decimal(0), ge=0)
    created_at: AwareDatetime
    token_id: str | None = Field(default=None, max_length=40)
    note: str | None = Field(default=None, max_length=500)

    @model_validator(mode="after")
    def _tenant_matches_card(self) -> UsageRecord:
        try:
            key_tenant = tenant_of(self.card_key)
        except StoreError as exc:
            raise ValueError(str(exc)) from None
        if key_tenant != self.tenant:
            raise ValueError(f"tenant {self.tenant!r} does not match card key {self.card_key!r}")
        return self


class UsageSum(_Value):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: Decimal = Decimal(0)


class UsageTotals(_Value):
    """A card's LLM usage: every provider call (`total`, what the provider bills) and per stage;
    `own` the calls whose result the card kept, `extra` the rest (retries whose reply came too
    late, error answers, calls lost with their worker); `retries` rows marked retry; `unknown`
    calls without usage (still running, lost with their worker, or timed out waiting for the
    answer: the provider may bill those)."""

    card_key: str
    total: UsageSum
    by_stage: dict[str, UsageSum]
    own: UsageSum = UsageSum()
    extra: UsageSum = UsageSum()
    retries: int = 0
    unknown: int = 0


class StoredReply(_Value):
    """A model reply as the chat history holds it, with the usage of the call that produced it."""

    seq: int
    message: Message
    usage: UsageRecord | None = None


class StoredEffect(_Value):
    """A side effect's recorded result, with the usage of the model call that produced it (if any)."""

    key: str
    result: str
    usage: UsageRecord | None = None


class LatestEffect(_Value):
    """The newest effect of a kind on a card: its key, its result and when it was recorded."""

    key: str
    result: str
    at: AwareDatetime


class TenantPromptVersion(_Value):
    """One immutable version of a tenant's custom prompt; `deleted` marks a deletion.

    `custom_system_prompt` is the sanitized text the prompt core uses (the submitted text is
    not stored; `submitted_sha256` is its digest). `restored_from` names the version a rollback
    copied. `issues` is empty for every stored version under the reject policy, kept for audit.
    """

    tenant: str
    version: int = Field(ge=1)
    deleted: bool = False
    custom_system_prompt: str = ""
    override_mode: Literal["append", "replace_behavior"] = "append"
    language_preference: str = "auto"
    tone_profile: dict[str, str] = Field(default_factory=dict)
    validation_status: Literal["VALID", "SANITIZED"] | None = None
    issues: tuple[dict[str, Any], ...] = ()
    submitted_sha256: str | None = None
    restored_from: int | None = None
    # The guard model's verdict ("allow"; a rejected prompt is never stored), its reason and the
    # model; None when no guard profile was configured for the PUT.
    guard_verdict: Literal["allow"] | None = None
    guard_reason: str | None = None
    guard_model: str | None = None
    created_by: str
    created_at: AwareDatetime

    @property
    def prompt(self) -> TenantPrompt:
        """The version as the prompt core takes it (`AssemblyRequest.tenant_prompt`)."""
        return TenantPrompt(
            custom_system_prompt=self.custom_system_prompt,
            override_mode=self.override_mode,
            language_preference=self.language_preference,
            tone_profile=dict(self.tone_profile),
        )


class ApiToken(_Value):
    """What the store keeps about a bearer token: never the token, only its SHA-256 (not shown here)."""

    id: str
    tenant: str
    name: str
    created_at: AwareDatetime
    revoked_at: AwareDatetime | None = None
    last_used_at: AwareDatetime | None = None


class IssuedApiToken(_Value):
    """A token just created: the only moment its plaintext exists outside the caller's hands."""

    info: ApiToken
    token: str = Field(repr=False)  # a repr in a log must not carry it

    @property
    def id(self) -> str:
        return self.info.id
