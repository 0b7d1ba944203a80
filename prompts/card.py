"""The card file format: a card's fields, its chat history and its context items.

This is the unit the prompt core works on. A card file (JSON) validates against the
JSON Schema generated from `Card` (`cardloop card schema`), so the prompt core runs on
a file without any service. Everything in a card is untrusted text: it is redacted and
isolated before it reaches a prompt.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cardloop.prompts.stages import Stage
from cardloop.prompts.surrogates import refuse_surrogates
from cardloop.prompts.tenant_id import MAX_TENANT_CHARS, TENANT_PATTERN

CARD_SCHEMA_VERSION = 1

# A card's field limits, defined once: the Card model and what creates cards from board deliveries
# (the generic webhook's schema, the webhook route) use these, so a value a webhook accepted is
# never refused later, when the card is created, with the board's move lost.
MAX_TITLE = 1000
MAX_URL = 2000
MAX_REPO = 200   # GitHub's own: a 39-character owner, a 100-character name
MAX_BRANCH = 255
REPO_PATTERN = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"
# What a repository that does not match REPO_PATTERN is told, in words rather than the regex.
REPO_RULE = 'must be "owner/name": letters, digits, ".", "_" and "-" on each side of one "/"'

class CardError(ValueError):
    """A card file that cannot be used: bad JSON or a field that fails validation."""


class ContextKind(StrEnum):
    """What a context item is; config.toml gives each kind its priority."""

    NOTES = "notes"
    BUILD_LOG = "build_log"
    POD_LOG = "pod_log"
    REVIEW_COMMENT = "review_comment"
    SOURCE_FILE = "source_file"
    TEST_RESULT = "test_result"
    ADR = "adr"
    LIBRARY_DOC = "library_doc"
    # A context source that could not answer, and why: the agent must know what it is missing.
    SOURCE_STATUS = "source_status"
    # A research report over artifacts too large for any prompt (analysts + synthesizer), with provenance.
    RESEARCH = "research"


# Kinds whose text is a log: cut by keeping head, tail and the lines around errors.
LOG_KINDS: frozenset[ContextKind] = frozenset(
    {ContextKind.BUILD_LOG, ContextKind.POD_LOG, ContextKind.TEST_RESULT}
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        # A lone surrogate (JSON's unpaired "\ud800" escape) is not text: nothing could store,
        # send or log it, so a card holding one is refused here, naming the field.
        return refuse_surrogates(data)


class ToolCall(_Strict):
    """An assistant's request to run a tool; its result is a later `tool` message."""

    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    input: dict[str, Any] = Field(default_factory=dict)


class Message(_Strict):
    """One entry of a card's chat history."""

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    id: str | None = Field(default=None, max_length=200)
    author: str | None = Field(default=None, max_length=200)
    created_at: datetime | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = Field(
        default=None, description="For role 'tool': the id of the ToolCall this answers."
    )
    is_error: bool = Field(default=False, description="For role 'tool': the call was refused or failed.")

    @model_validator(mode="after")
    def _roles_match_fields(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages may carry tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id")
        if self.role != "tool" and self.tool_call_id:
            raise ValueError("tool_call_id is only allowed on tool messages")
        if self.role != "tool" and self.is_error:
            raise ValueError("is_error is only allowed on tool messages")
        return self


class ContextItem(_Strict):
    """A piece of context with provenance: where it came from, when."""

    kind: ContextKind
    source: str = Field(
        min_length=1,
        max_length=500,
        description="Provenance: a repo path, URL, workflow run or pod name.",
    )
    content: str
    title: str | None = Field(default=None, max_length=500)
    created_at: datetime | None = None


class ChecklistItem(_Strict):
    text: str
    done: bool = False


class TenantPrompt(_Strict):
    """A tenant's custom system prompt, as stored after validation."""

    custom_system_prompt: str = ""
    override_mode: Literal["append", "replace_behavior"] = "append"
    language_preference: str = Field(default="auto", max_length=64)
    tone_profile: dict[str, str] = Field(default_factory=dict)


class Card(_Strict):
    """A coding card: fields, chat history and context items."""

    schema_version: Literal[1] = CARD_SCHEMA_VERSION
    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:#/-]*$")
    tenant: str = Field(default="default", min_length=1, max_length=MAX_TENANT_CHARS, pattern=TENANT_PATTERN)
    board: str = Field(default="generic", min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=MAX_TITLE)
    body: str = ""
    url: str | None = Field(default=None, max_length=MAX_URL)
    repo: str | None = Field(default=None, max_length=MAX_REPO, pattern=REPO_PATTERN, description="owner/name")
    branch: str | None = Field(default=None, max_length=MAX_BRANCH)
    stage: Stage | None = None
    notes: str = ""
    checklist: tuple[ChecklistItem, ...] = ()
    history: tuple[Message, ...] = ()
    context: tuple[ContextItem, ...] = ()
    tenant_prompt: TenantPrompt | None = None

    @model_validator(mode="after")
    def _tool_results_follow_calls(self) -> Card:
        seen: set[str] = set()
        for index, message in enumerate(self.history):
            for call in message.tool_calls:
                seen.add(call.id)
            if message.role == "tool" and message.tool_call_id not in seen:
                raise ValueError(
                    f"history[{index}]: tool result {message.tool_call_id!r} has no earlier "
                    "assistant tool call with that id"
                )
        return self


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json_type(value: object) -> str:
    """What the JSON text held, in JSON's words (Python's 'NoneType' or 'list' say nothing to a user)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"


def parse_card(text: str, *, origin: str = "card") -> Card:
    """Parse card JSON; raise CardError naming the field and the problem."""
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise CardError(f"{origin}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except _DuplicateKey as exc:
        raise CardError(f"{origin}: key {exc.args[0]!r} appears twice in one object: JSON keeps only the last, "
                        "so the first would be lost; give it once") from None
    except RecursionError:  # the parser recurses per level: 100,000 '[' exhaust the stack
        raise CardError(f"{origin}: not valid JSON for a card: nested too deeply") from None
    if not isinstance(data, dict):
        raise CardError(f"{origin}: a card must be a JSON object, got {_json_type(data)}")
    try:
        return Card.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(card)"
            problems.append(f"  {where}: {err['msg']}")
        raise CardError(f"{origin}: invalid card:\n" + "\n".join(problems)) from None


def card_json_schema() -> dict[str, Any]:
    schema = Card.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://cardloop.dev/schema/card-v1.json"
    return schema
