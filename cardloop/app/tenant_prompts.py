"""A tenant prompt's validation, effective system prompt and limits report, without HTTP.

The API's tenant routes (app/api/tenants.py) and `cardloop tenant ...` (app/cli/tenant.py) both
use these, so an operator's command and a tenant's PUT validate alike. It lives outside the API
package because the CLI must not import FastAPI, the API's services and Temporal's worker SDK to
show a prompt: that made every `cardloop tenant` command take seconds to start.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cardloop.contracts.limits import limits_for, windows
from cardloop.prompts.assemble import AssemblyRequest
from cardloop.prompts.card import Card, TenantPrompt
from cardloop.prompts.layers import tenant_text
from cardloop.prompts.surrogates import refuse_surrogates
from cardloop.prompts.validate import (
    MAX_TENANT_PROMPT_CHARS,
    ValidationIssue,
    ValidationResult,
    ValidationStatus,
    sanitize,
    validate_tenant_prompt,
)

if TYPE_CHECKING:
    from cardloop.contracts.config import Config
    from cardloop.prompts.assemble import PromptAssembler
    from cardloop.store import Store

# Bodies far beyond the validator's limit are refused by the model (422/400) before any
# validation work; up to this size the validator answers, naming the "length" issue.
HARD_MAX_CHARS = MAX_TENANT_PROMPT_CHARS * 4
MAX_TONE_ENTRIES = 20


class StrictBody(BaseModel):
    # strict: a number is not a string, a string is not a number; extra: a typo is an error.
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        # An unpaired "\ud800" escape is no text the store (or an answer) could encode: 400 naming it.
        return refuse_surrogates(data)


class PromptIn(StrictBody):
    custom_system_prompt: str = Field(
        max_length=HARD_MAX_CHARS,
        description=f"The tenant's system prompt; REJECTED (400) over {MAX_TENANT_PROMPT_CHARS:,} characters "
                    "or when it tries to override the guardrails.",
    )
    override_mode: Literal["append", "replace_behavior"] = Field(
        default="append",
        description="append: added after the profile's behaviour prompt; replace_behavior: used instead of it. "
                    "The core guardrails always come first either way.",
    )
    language_preference: str = Field(default="auto", min_length=1, max_length=64,
                                     description='"auto", or the language answers should be in.')
    tone_profile: dict[str, str] = Field(default_factory=dict, max_length=MAX_TONE_ENTRIES,
                                         description='Tone settings, e.g. {"style": "terse"}.')

    @field_validator("tone_profile")
    @classmethod
    def _tone_sizes(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not 1 <= len(key) <= 64 or len(item) > 500:
                raise ValueError("tone_profile keys are 1-64 characters, values at most 500")
        problems = _tone_key_problems(value)
        if problems:
            raise ValueError("; ".join(problems) + f" ({CLEANUP}): send each key once, as the text it is")
        return value


CLEANUP = "invisible characters removed, compatibility forms normalized (NFKC), spaces trimmed"


def _tone_key_problems(tone: dict[str, str]) -> list[str]:
    """Tone keys are stored cleaned up as every tenant text is (`sanitize`): keys that become one
    key would silently keep only the last value, and a key that becomes empty names nothing."""
    by_clean: dict[str, list[str]] = {}
    for key in tone:
        by_clean.setdefault(sanitize(key), []).append(key)
    problems = []
    for clean, keys in by_clean.items():
        if len(keys) > 1:
            named = f"keys {', '.join(map(repr, keys[:-1]))} and {keys[-1]!r}"
            problems.append(f"tone_profile {named} are " + (f"one key, {clean!r}," if clean else "empty")
                            + " once cleaned up")
        elif not clean:
            problems.append(f"tone_profile key {keys[0]!r} is empty once cleaned up")
    return problems


class Issue(BaseModel):
    field: str = Field(description="custom_system_prompt, language_preference, tone_profile.<key>, or "
                                   "combined (the prompt with its language and tone, as the prompt core sees it)")
    category: str = Field(description="length, meta_override, safety_bypass, system_prompt_disclosure, "
                                      "role_reassignment, guardrail_impersonation, encoding, classifier "
                                      "(the trained injection classifier), empty (nothing to store: no text, "
                                      "language or tone) or guard_model (the guard model, when one is "
                                      "configured)")
    message: str
    start: int = Field(description="Offset of the issue in the field's text (end exclusive).")
    end: int


def _shown(text: str) -> str:
    """`text` with what does not print escaped (zero-width, soft hyphen, a lone surrogate), so a
    field named after a tone key says which key it was."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _issues(field: str, result: ValidationResult) -> list[Issue]:
    return [Issue(field=_shown(field), category=i.category, message=i.message, start=i.start, end=i.end)
            for i in result.issues]


EMPTY_MESSAGE = ("the prompt is empty once cleaned up and sets no language or tone: there is nothing to store "
                 "(DELETE /tenants/{tenant}/prompt, or `cardloop tenant delete-prompt TENANT`, removes the "
                 "current prompt)")


def _sets_nothing(prompt: TenantPrompt) -> bool:
    """Whether `prompt` would add nothing to a card's system prompt. replace_behavior with no text
    is not nothing: it leaves the cards the guardrails and the agent prompt without the profile's
    behaviour layer, which a tenant may mean."""
    return (not prompt.custom_system_prompt.strip() and prompt.override_mode == "append"
            and prompt.language_preference == "auto" and not prompt.tone_profile)


def check_prompt(body: PromptIn) -> tuple[TenantPrompt, ValidationResult, list[Issue]]:
    """(the prompt to store, the verdict for the store, the issues): every text the tenant sends
    lands in the system prompt, so each is validated, then their combination as the core sees it."""
    issues: list[Issue] = []
    main = validate_tenant_prompt(body.custom_system_prompt)
    issues += _issues("custom_system_prompt", main)
    verdicts = [main]
    language = validate_tenant_prompt(body.language_preference, max_chars=64)
    issues += _issues("language_preference", language)
    verdicts.append(language)
    tone: dict[str, str] = {}
    for key, value in body.tone_profile.items():
        key_verdict = validate_tenant_prompt(key, max_chars=64)
        value_verdict = validate_tenant_prompt(value, max_chars=500)
        issues += _issues(f"tone_profile.{key} (key)", key_verdict) + _issues(f"tone_profile.{key}", value_verdict)
        verdicts += [key_verdict, value_verdict]
        tone[key_verdict.sanitized_prompt] = value_verdict.sanitized_prompt
    prompt = TenantPrompt(custom_system_prompt=main.sanitized_prompt, override_mode=body.override_mode,
                          language_preference=language.sanitized_prompt or "auto", tone_profile=tone)
    if _sets_nothing(prompt) and not any(v.status == ValidationStatus.REJECTED for v in verdicts):
        # Stored, it would be a version that changes no card's prompt yet reads as "the tenant has
        # a prompt": most likely a client that meant to remove the prompt, which DELETE does.
        issues.append(Issue(field="custom_system_prompt", category="empty", start=0, end=len(body.custom_system_prompt),
                            message=EMPTY_MESSAGE))
        verdicts.append(ValidationResult(ValidationStatus.REJECTED, "", ()))
    if not issues:
        combined = validate_tenant_prompt(tenant_text(prompt))
        issues += _issues("combined", combined)
        verdicts.append(combined)
    if any(v.status == ValidationStatus.REJECTED for v in verdicts):
        status = ValidationStatus.REJECTED
    elif any(v.status == ValidationStatus.SANITIZED for v in verdicts):
        status = ValidationStatus.SANITIZED
    else:
        status = ValidationStatus.VALID
    verdict = ValidationResult(status, main.sanitized_prompt,
                               tuple(ValidationIssue(i.category, i.message, i.start, i.end, i.field) for i in issues))
    return prompt, verdict, issues


def effective_prompt(assembler: PromptAssembler, config: Config, tenant: str, prompt: TenantPrompt | None) -> str:
    """The first system block a card of `tenant` gets with the default profile and no stage:
    assembled by the prompt core itself, so it is exactly what the layering produces. An
    AssemblyError is raised as it is (a configuration problem: the API answers 500, the CLI exits 2)."""
    card = Card(id="effective-prompt", tenant=tenant, board="api", title="Effective system prompt")
    assembled = assembler.assemble(
        AssemblyRequest(card=card, stage=None, tenant_prompt=prompt), config.assembly_settings(None))
    return assembled.conversation.system[0].text


def limits_report(config: Config, store: Store, tenant: str, now: datetime) -> dict[str, Any]:
    """The tenant's spend limits (config) and what it used in each window (the ledger): the
    answer of GET /tenants/{t}/limits and of `cardloop tenant show`. None: no limit. The
    tokens and cost include what running calls reserve, as the caps count them; the
    `reserved_*` fields say how much of them that is."""
    effective = limits_for(config, tenant)
    whole, tokens = store.for_tenant(tenant).limit_usage(tenant, now)
    w = windows(now)
    return {"tenant": tenant, "limits": effective.tenant.as_dict(), "per_token_limits": effective.token.as_dict(),
            "usage": whole.as_dict(), "tokens": {token_id: u.as_dict() for token_id, u in tokens.items()},
            "day_resets_at": w.day_end.isoformat(), "month_resets_at": w.month_end.isoformat()}
