"""The prompt gateway: OpenAI- and Anthropic-shaped chat endpoints for a tenant's other applications.

    POST /v1/chat/completions   OpenAI chat completions request -> chat.completion (or SSE chunks)
    POST /v1/messages           Anthropic Messages request      -> message (or SSE events)

Every call (bearer token -> tenant, `require_tenant`):

1. The body is validated by hand, so a malformed one is a 400 in the caller's own error shape
   (FastAPI's validation errors would answer 422 in neither shape).
2. `cardloop.prompts.formats.intercept` reads the request in whatever form its system prompt comes
   (OpenAI system/developer messages, Anthropic `system`, Gemma/ChatML markers or
   Human:/Assistant: text inside a system text): system text is cleaned, embedded turns are
   kept as turns in their place.
3. The prompt core layers the system prompt (`PromptAssembler`, an empty card of the tenant, no
   stage): core guardrails first, the request's system text as the request-level behaviour layer
   (the highest: it overrides the profile/global prompts and a tenant prompt in
   `replace_behavior` mode), the tenant's prompt appended in `append` mode. Only that first
   system block is sent: the stage's agent prompt and the card context the assembler also
   builds are card-stage concepts, and a gateway caller is not running a card stage.
4. The caller's turns follow in order, each through the prompt core's secret redactor; none is
   dropped. A conversation that opens with an assistant turn gets a short user opener first
   (providers want the user to speak first), as the assembler does for card history.
5. The conversation goes to `config.gateway.profile`'s provider (`ActivityDeps.provider`), rendered in
   that provider's format by the provider itself; usage and cost are recorded per call.

Decisions callers and operators should know:

- `model` in the request is a label: the profile's model always answers (a tenant must not pick
  a costlier model than the operator configured). The response echoes the caller's label.
- max_tokens: OpenAI `max_completion_tokens` or `max_tokens` (optional, default the profile's),
  Anthropic `max_tokens` (required, as in the API); always capped at the profile's max_tokens.
  temperature: the caller's when given (range checked as its API does), else the profile's;
  the Anthropic provider drops it when its SDK's API version has no temperature.
- Parameters with no place in `Provider.complete` (tools, stop sequences, top_p, ...) are
  ignored and named in the `x-cardloop-ignored-params` response header; tool calls and tool
  results in the history are carried as readable text (intercept's rules). `n` other than 1 is
  refused.
- Streaming ("stream": true) is answered as server-sent events in the caller's protocol. When
  the profile's provider can stream (`StreamingProvider`: the anthropic provider), each text delta
  is forwarded as the provider produces it; the response starts once the provider has accepted
  the call, so a failure before that is the plain HTTP error below, and a failure after it ends
  the stream with an error event (Anthropic `event: error`; OpenAI a `data: {"error": ...}` line,
  no `[DONE]`). Usage is recorded from the stream's final event. Other providers' answers are
  completed first and replayed as events (the first event leaves once the provider has answered).
- Status mapping of provider failures: rate limited -> 429; overloaded, 5xx, timeout, connection
  and other retryable failures -> 503; both with `retry-after` (whole seconds) when the provider
  said how long. The provider's 400/422 -> 400 with its message (prompt too long too; 413 stays
  413). Our own provider key refused, spend limit, unknown model -> 502 with a generic message:
  the caller cannot fix them and must not see our account's details.
- The system budget of the layered prompt is widened to the profile's whole prompt budget
  (`budget.total`): a caller's system prompt is its application's, not a card's bounded layer.
- Usage is recorded as card key `<tenant>/gateway/-`, stage "gateway", call key
  `gateway/<id>` (the `x-cardloop-call-id` header and the response id carry the same id). A
  failure to record is logged and the answer still returned: the tokens were spent either way,
  and a 500 would only make the caller retry and spend them twice.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from cardloop.app.api.auth import require_tenant
from cardloop.app.api.services import Services, services
from cardloop.integrations.providers import Completion, ProviderError, StreamingProvider, StreamStart, TextDelta
from cardloop.prompts.assemble import AssemblyError, AssemblyRequest
from cardloop.prompts.card import Card, TenantPrompt
from cardloop.prompts.conversation import Conversation, SystemBlock, Turn
from cardloop.prompts.formats import intercept
from cardloop.store import UsageRecord

logger = logging.getLogger(__name__)

Protocol = Literal["openai", "anthropic"]

router = APIRouter(tags=["gateway"])

STAGE = "gateway"
# Sent first when the caller's conversation opens with the assistant (see the module docstring).
OPENER = "(The conversation continues.)"
# Characters per streamed delta, at most (cut at whitespace): small enough to look like a stream.
STREAM_CHUNK_CHARS = 48

_CARD_TENANT = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_ANTHROPIC_ROLES = frozenset({"user", "assistant"})
# Request parameters the gateway knows and cannot honour: named back to the caller in a header.
_IGNORED = {
    "openai": ("tools", "tool_choice", "functions", "function_call", "parallel_tool_calls", "stop", "top_p",
               "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "seed",
               "response_format", "reasoning_effort", "modalities", "audio", "prediction", "user", "metadata",
               "store", "service_tier"),
    "anthropic": ("tools", "tool_choice", "stop_sequences", "top_p", "top_k", "thinking", "metadata",
                  "service_tier", "container", "mcp_servers", "output_config"),
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error", 504: "timeout_error",
}
# Completion.stop_reason speaks Anthropic's words; OpenAI-compatible words are accepted too.
_TO_OPENAI_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "content_filter",
                     "stop": "stop", "length": "length", "content_filter": "content_filter"}
_TO_ANTHROPIC_STOP = {"end_turn": "end_turn", "stop_sequence": "stop_sequence", "max_tokens": "max_tokens",
                      "refusal": "refusal", "stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}

# The assembler's and scrubber's caches are plain dicts (see PromptActivities): one at a time.
_PROMPT_LOCK = threading.Lock()


class GatewayError(Exception):
    """A request the gateway answers with an error in the caller's shape."""

    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.retry_after = retry_after


def _invalid(message: str, param: str | None = None) -> GatewayError:
    return GatewayError(400, message, code="invalid_request", param=param)


@dataclass(frozen=True)
class GatewayCall:
    """A validated request, whatever its protocol."""

    protocol: Protocol
    body: Mapping[str, Any]  # what intercept reads: "messages" (and Anthropic "system") only
    model_label: str | None
    max_tokens: int | None
    temperature: float | None
    stream: bool
    include_usage: bool  # OpenAI stream_options.include_usage
    ignored: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    completion: Completion
    call_id: str
    model: str  # what the response says: the caller's label, else the profile's model
    redactions: int
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- routes

TenantDep = Annotated[str, Depends(require_tenant)]
ServicesDep = Annotated[Services, Depends(services)]


@router.post("/v1/chat/completions", summary="OpenAI-compatible chat completions through the prompt gateway")
async def chat_completions(request: Request, tenant: TenantDep, svc: ServicesDep) -> Response:
    return await _serve(request, tenant, svc, "openai")


@router.post("/v1/messages", summary="Anthropic-compatible messages through the prompt gateway")
async def messages(request: Request, tenant: TenantDep, svc: ServicesDep) -> Response:
    return await _serve(request, tenant, svc, "anthropic")


async def _serve(request: Request, tenant: str, svc: Services, protocol: Protocol) -> Response:
    call_id = uuid.uuid4().hex
    try:
        raw = await request.body()
        if len(raw) > svc.config.api.max_body_bytes:
            raise GatewayError(413, f"request body larger than {svc.config.api.max_body_bytes} bytes",
                               code="too_large")
        call = read_request(raw, protocol)
        # Store, prompt assembly and the provider call all block: keep them off the event loop.
        prepared = await run_in_threadpool(prepare, svc, tenant, call)
        live = await run_in_threadpool(open_stream, svc, tenant, call, call_id, prepared) if call.stream else None
        outcome = None if live else await run_in_threadpool(complete, svc, tenant, call, call_id, prepared)
    except GatewayError as exc:
        return error_response(protocol, exc, call_id)
    headers = {"x-cardloop-call-id": f"gateway/{call_id}"}
    if call.ignored:
        headers["x-cardloop-ignored-params"] = ", ".join(call.ignored)
    if prepared.redactions:
        headers["x-cardloop-redactions"] = str(prepared.redactions)
    created = int(svc.clock())
    if live is not None:
        # A sync iterator: Starlette pulls each event in a worker thread, so the blocking provider
        # read and the usage write stay off the event loop.
        events = (_live_openai_events(live, created, call.include_usage) if protocol == "openai"
                  else _live_anthropic_events(live))
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={**headers, "cache-control": "no-cache"})
    assert outcome is not None
    if call.stream:
        events = (_openai_events(outcome, created, call.include_usage) if protocol == "openai"
                  else _anthropic_events(outcome))
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={**headers, "cache-control": "no-cache"})
    body = _openai_body(outcome, created) if protocol == "openai" else _anthropic_body(outcome)
    return JSONResponse(body, headers=headers)


# --------------------------------------------------------------------------- reading requests


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_request(raw: bytes, protocol: Protocol) -> GatewayCall:
    """Parse and validate a request body; GatewayError(400) names the first problem."""
    try:
        # NaN/Infinity are not JSON, and a NaN temperature would slip past every range check.
        body = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _invalid("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _invalid("request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _invalid("model: must be a string", "model")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise _invalid("stream: must be a boolean", "stream")
    messages = body.get("messages")
    if messages is None:
        raise _invalid("messages: field required", "messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid("messages: must be a non-empty list", "messages")
    ignored = tuple(k for k in _IGNORED[protocol] if body.get(k) is not None)
    if protocol == "openai":
        return _read_openai(body, messages, model, bool(stream), ignored)
    return _read_anthropic(body, messages, model, bool(stream), ignored)


def _int_field(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _invalid(f"{name}: must be an integer >= 1", name)
    return value


def _temperature(body: Mapping[str, Any], top: float) -> float | None:
    value = body.get("temperature")
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= top:
        raise _invalid(f"temperature: must be a number between 0 and {top:g}", "temperature")
    return float(value)


def _check_parts(content: list[Any], where: str) -> None:
    for j, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _invalid(f"{where}.{j}: must be an object with a string 'type'", where)


def _read_openai(body: dict[str, Any], messages: list[Any], model: str | None, stream: bool,
                 ignored: tuple[str, ...]) -> GatewayCall:
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise _invalid(f"{where}: must be an object", where)
        role = message.get("role")
        if role not in _OPENAI_ROLES:
            raise _invalid(f"{where}.role: must be one of {', '.join(sorted(_OPENAI_ROLES))}", f"{where}.role")
        content = message.get("content")
        if isinstance(content, list):
            _check_parts(content, f"{where}.content")
        elif not isinstance(content, str) and not (content is None and role == "assistant"):
            raise _invalid(f"{where}.content: must be a string or a list of content parts", f"{where}.content")
    n = body.get("n")
    if n is not None and n != 1:
        raise _invalid("n: only 1 is supported by this gateway", "n")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _invalid("stream_options: must be an object", "stream_options")
    # max_completion_tokens is the current name, max_tokens the deprecated one: the newer wins.
    newer, older = _int_field(body, "max_completion_tokens"), _int_field(body, "max_tokens")
    max_tokens = newer or older
    return GatewayCall("openai", {"messages": messages}, model, max_tokens, _temperature(body, 2.0), stream,
                       bool(options and options.get("include_usage") is True), ignored)


def _read_anthropic(body: dict[str, Any], messages: list[Any], model: str | None, stream: bool,
                    ignored: tuple[str, ...]) -> GatewayCall:
    max_tokens = _int_field(body, "max_tokens")
    if max_tokens is None:
        raise _invalid("max_tokens: Field required", "max_tokens")  # required by the Messages API too
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise _invalid("system: must be a string or a list of text blocks", "system")
        for j, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise _invalid(f"system.{j}: must be a text block", "system")
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise _invalid(f"{where}: must be an object", where)
        if message.get("role") not in _ANTHROPIC_ROLES:
            raise _invalid(f"{where}.role: must be 'user' or 'assistant'", f"{where}.role")
        content = message.get("content")
        if isinstance(content, list):
            _check_parts(content, f"{where}.content")
        elif not isinstance(content, str):
            raise _invalid(f"{where}.content: must be a string or a list of content blocks", f"{where}.content")
    # Only what intercept should read: a stray "contents" key must not make it a Gemini request.
    parsed: dict[str, Any] = {"messages": messages}
    if system is not None:
        parsed["system"] = system
    return GatewayCall("anthropic", parsed, model, max_tokens, _temperature(body, 1.0), stream, False, ignored)


# --------------------------------------------------------------------------- the call


def tenant_prompt_for(store: Any, tenant: str) -> TenantPrompt | None:
    """The tenant's current prompt, when the store can say.

    `current_tenant_prompt(tenant)` is looked up with getattr because the store gains it with
    tenant prompt management; until then (or on a store without it) there is no tenant layer.
    It may answer a TenantPrompt, a mapping of its fields, or a record holding one as `.prompt`.
    An answer that does not read as a TenantPrompt is logged and left out, as the prompt core
    leaves out a prompt that fails validation.
    """
    lookup = getattr(store, "current_tenant_prompt", None)
    if lookup is None:
        return None
    found = lookup(tenant)
    if found is None or isinstance(found, TenantPrompt):
        return found
    if isinstance(getattr(found, "prompt", None), TenantPrompt):
        return found.prompt
    if not isinstance(found, Mapping):
        fields = TenantPrompt.model_fields
        found = {name: getattr(found, name) for name in fields if hasattr(found, name)}
    try:
        return TenantPrompt.model_validate({k: v for k, v in found.items() if k in TenantPrompt.model_fields})
    except ValidationError as exc:
        logger.error("tenant %s: stored prompt unreadable, left out: %s", tenant, exc)
        return None


def layered_conversation(svc: Services, tenant: str, call: GatewayCall) -> tuple[Conversation, int, list[str]]:
    """The conversation to send: the prompt core's layered system block + the caller's turns.

    Returns it with the number of secrets redacted and intercept's warnings.
    """
    parsed = intercept(dict(call.body))
    if not parsed.conversation.turns:
        raise _invalid("messages: at least one user or assistant message is required", "messages")
    config = svc.config
    settings = config.assembly_settings(None, config.gateway.profile)
    # The caller's system prompt is its application's: cut only past the whole prompt budget.
    settings = dataclasses.replace(settings, budget=dataclasses.replace(settings.budget,
                                                                       system=settings.budget.total))
    # The card's tenant field is stricter than the store's tenant rule; it only labels explain rows.
    card = Card(id="gateway", tenant=tenant if _CARD_TENANT.match(tenant) else "gateway", board=STAGE,
                title="prompt gateway request")
    tenant_prompt = tenant_prompt_for(svc.store, tenant)
    assembler = svc.runtime.assembler
    found: Counter[str] = Counter()
    with _PROMPT_LOCK:
        try:
            prompt = assembler.assemble(AssemblyRequest(
                card=card, stage=None, request_system=parsed.conversation.system_text or None, turn="",
                tenant_prompt=tenant_prompt), settings)
        except AssemblyError as exc:
            raise GatewayError(500, f"gateway prompt configuration: {exc}", code="configuration") from None
        turns = [Turn(t.role, assembler.scrubber.scrub(t.text, found), t.cache) for t in parsed.conversation.turns]
    # The first block is guardrails + behaviour layers; the agent block after it is for card stages.
    system: SystemBlock = prompt.conversation.system[0]
    if turns[0].role == "assistant":
        turns.insert(0, Turn("user", OPENER))
    redactions = sum(found.values()) + sum(prompt.redactions.values())
    return Conversation(system=(system,), turns=tuple(turns)), redactions, parsed.warnings


@dataclass(frozen=True)
class Prepared:
    """A call ready for the provider: the layered, redacted conversation and the profile's limits."""

    conversation: Conversation
    redactions: int
    warnings: list[str]
    profile: str
    max_tokens: int
    temperature: float | None


def prepare(svc: Services, tenant: str, call: GatewayCall) -> Prepared:
    conversation, redactions, warnings = layered_conversation(svc, tenant, call)
    profile_name = svc.config.gateway.profile
    profile = svc.config.profiles[profile_name]
    max_tokens = min(call.max_tokens or profile.max_tokens, profile.max_tokens)
    temperature = call.temperature if call.temperature is not None else profile.temperature
    return Prepared(conversation, redactions, warnings, profile_name, max_tokens, temperature)


def _provider_failed(call_id: str, tenant: str, err: ProviderError) -> None:
    logger.warning("gateway/%s tenant %s: provider failed (%s, status %s): %s", call_id, tenant, err.kind,
                   err.status, err)


def complete(svc: Services, tenant: str, call: GatewayCall, call_id: str,
             prepared: Prepared | None = None) -> Outcome:
    """Layer, forward, record: the blocking part of one gateway call."""
    p = prepared or prepare(svc, tenant, call)
    profile = svc.config.profiles[p.profile]
    try:
        provider = svc.runtime.provider(p.profile)
        done = provider.complete(p.conversation, model=profile.model, max_tokens=p.max_tokens,
                                 temperature=p.temperature)
    except ProviderError as err:
        _provider_failed(call_id, tenant, err)
        raise from_provider_error(err) from None
    _record_usage(svc, tenant, call_id, p.profile, profile.provider, profile.model, done)
    return Outcome(done, call_id, call.model_label or profile.model, p.redactions, p.warnings)


@dataclass
class LiveStream:
    """A provider stream that has started (its StreamStart is in hand), to be forwarded."""

    events: Iterator[Any]  # the rest of the provider's StreamEvents
    start: StreamStart
    finish: Any  # Callable[[Completion], None]: records usage once the final event arrives
    fail: Any  # Callable[[ProviderError], GatewayError]: logs a mid-stream failure
    call_id: str
    model: str  # the caller's label, else the profile's model


def open_stream(svc: Services, tenant: str, call: GatewayCall, call_id: str, p: Prepared) -> LiveStream | None:
    """Start the provider's stream and wait for it to accept the call; None when it cannot stream.

    Waiting for the first event (StreamStart) here, before any byte of the response, is what lets
    a refusal (429, 529, 400...) still answer with the plain HTTP error the caller expects.
    """
    profile = svc.config.profiles[p.profile]
    try:
        provider = svc.runtime.provider(p.profile)
        if not isinstance(provider, StreamingProvider):
            return None
        events = iter(provider.stream(p.conversation, model=profile.model, max_tokens=p.max_tokens,
                                      temperature=p.temperature))
        first = next(events, None)
    except ProviderError as err:
        _provider_failed(call_id, tenant, err)
        raise from_provider_error(err) from None
    if not isinstance(first, StreamStart):
        close = getattr(events, "close", None)
        if close is not None:
            close()
        logger.warning("gateway/%s: provider stream opened with %r", call_id, type(first).__name__)
        raise from_provider_error(ProviderError("stream did not start", kind="bad_response", retryable=True))

    def finish(done: Completion) -> None:
        _record_usage(svc, tenant, call_id, p.profile, profile.provider, profile.model, done)

    def fail(err: ProviderError) -> GatewayError:
        _provider_failed(call_id, tenant, err)
        return from_provider_error(err)

    return LiveStream(events, first, finish, fail, call_id, call.model_label or profile.model)


def _live_events(live: LiveStream) -> Iterator[str | Completion | GatewayError]:
    """The provider's stream as text deltas, then its Completion (usage recorded) or a GatewayError."""
    try:
        for event in live.events:
            if isinstance(event, TextDelta):
                if event.text:
                    yield event.text
            elif isinstance(event, Completion):
                live.finish(event)
                yield event
                return
        # The provider's iterator ended without its final event: a cut stream, never a silent end.
        yield live.fail(ProviderError("provider stream ended before its final event", kind="bad_response",
                                      retryable=True))
    except ProviderError as err:
        yield live.fail(err)
    finally:
        close = getattr(live.events, "close", None)
        if close is not None:
            close()  # a caller that hung up: release the provider's connection now


def _record_usage(svc: Services, tenant: str, call_id: str, profile: str, provider: str, model: str,
                  done: Completion) -> None:
    u = done.usage
    try:
        svc.store.record_usage(UsageRecord(
            call_key=f"gateway/{call_id}", card_key=f"{tenant}/gateway/-", tenant=tenant, stage=STAGE,
            profile=profile, provider=provider, model=done.model or model, purpose="turn",
            input_tokens=u.input_tokens, output_tokens=u.output_tokens, cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens, cost_usd=svc.runtime.cost(model, u),
            created_at=datetime.fromtimestamp(svc.clock(), UTC)))
    except Exception:
        logger.exception("gateway/%s tenant %s: usage not recorded (%s)", call_id, tenant, u)


def from_provider_error(err: ProviderError) -> GatewayError:
    """A provider failure as the caller's status (see the module docstring)."""
    if err.kind == "rate_limited":
        return GatewayError(429, "the model provider is rate limiting this gateway; retry later",
                            code="rate_limited", retry_after=err.retry_after)
    if err.retryable:
        return GatewayError(503, f"the model provider is unavailable ({err.kind}); retry later", code=err.kind,
                            retry_after=err.retry_after)
    if err.kind in ("invalid_request", "blocked"):
        return GatewayError(400, err.message, code=err.kind)
    if err.kind == "too_large":
        return GatewayError(413 if err.status == 413 else 400, err.message, code="too_large")
    # auth (our key), spend_limit (our account), not_found (our configured model), anything new:
    # the caller can do nothing about these, and the provider's words are about our account.
    return GatewayError(502, f"the gateway's model provider refused the call ({err.kind}); "
                             "the operator has been told", code="upstream_" + err.kind)


# --------------------------------------------------------------------------- answers


def error_response(protocol: Protocol, exc: GatewayError, call_id: str) -> JSONResponse:
    headers = {"x-cardloop-call-id": f"gateway/{call_id}"}
    if exc.retry_after is not None:
        headers["retry-after"] = str(max(math.ceil(exc.retry_after), 0))
    if protocol == "openai":
        kind = ("invalid_request_error" if exc.status < 500 and exc.status != 429
                else "rate_limit_error" if exc.status == 429 else "server_error")
        body: dict[str, Any] = {"error": {"message": exc.message, "type": kind, "param": exc.param,
                                          "code": exc.code}}
    else:
        kind = _ANTHROPIC_ERROR_TYPES.get(exc.status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": exc.message},
                "request_id": f"gateway/{call_id}"}
    return JSONResponse(body, status_code=exc.status, headers=headers)


def openai_finish_reason(stop_reason: str | None) -> str:
    # Tool calls come back as text (the providers' rule), so "tool_calls" would promise a field we never send.
    return _TO_OPENAI_FINISH.get(stop_reason or "", "stop")


def anthropic_stop_reason(stop_reason: str | None) -> str:
    # tool_use likewise: the answer holds no tool_use block, so the turn simply ended.
    return _TO_ANTHROPIC_STOP.get(stop_reason or "", "end_turn")


def _openai_usage(outcome: Outcome) -> dict[str, Any]:
    u = outcome.completion.usage
    # prompt_tokens counts cached input too (OpenAI's meaning); Usage.input_tokens does not.
    prompt = u.total_input_tokens
    return {"prompt_tokens": prompt, "completion_tokens": u.output_tokens, "total_tokens": prompt + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens}}


def _anthropic_usage(outcome: Outcome) -> dict[str, Any]:
    u = outcome.completion.usage
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cache_read_tokens, "cache_creation_input_tokens": u.cache_write_tokens}


def _openai_body(outcome: Outcome, created: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{outcome.call_id}", "object": "chat.completion", "created": created, "model": outcome.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": outcome.completion.text},
                     "finish_reason": openai_finish_reason(outcome.completion.stop_reason)}],
        "usage": _openai_usage(outcome),
    }


def _anthropic_body(outcome: Outcome) -> dict[str, Any]:
    text = outcome.completion.text
    return {
        "id": f"msg_{outcome.call_id}", "type": "message", "role": "assistant", "model": outcome.model,
        # The API sends no empty text block; an empty answer is an empty content list.
        "content": [{"type": "text", "text": text}] if text else [],
        "stop_reason": anthropic_stop_reason(outcome.completion.stop_reason), "stop_sequence": None,
        "usage": _anthropic_usage(outcome),
    }


def text_chunks(text: str, size: int = STREAM_CHUNK_CHARS) -> list[str]:
    """`text` in pieces of about `size` characters, cut after whitespace where possible; joined, the same text."""
    chunks: list[str] = []
    current = ""
    for word in re.findall(r"\S+\s*|\s+", text):
        if current and len(current) + len(word) > size:
            chunks.append(current)
            current = ""
        while len(word) > size:  # one very long word (current is empty here): cut it into deltas too
            chunks.append(word[:size])
            word = word[size:]
        current += word
    if current:
        chunks.append(current)
    return chunks


def _data(payload: Any) -> str:
    return "data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "\n\n"


def _openai_events(outcome: Outcome, created: int, include_usage: bool) -> Iterator[str]:
    base = {"id": f"chatcmpl-{outcome.call_id}", "object": "chat.completion.chunk", "created": created,
            "model": outcome.model}
    # With include_usage, OpenAI puts "usage": null on every chunk and the totals on one last chunk.
    extra: dict[str, Any] = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    yield chunk({"role": "assistant", "content": ""})
    for piece in text_chunks(outcome.completion.text):
        yield chunk({"content": piece})
    yield chunk({}, openai_finish_reason(outcome.completion.stop_reason))
    if include_usage:
        yield _data({**base, "choices": [], "usage": _openai_usage(outcome)})
    yield "data: [DONE]\n\n"


def _event(name: str, payload: dict[str, Any]) -> str:
    return f"event: {name}\n" + _data({"type": name, **payload})


def _anthropic_events(outcome: Outcome) -> Iterator[str]:
    usage = _anthropic_usage(outcome)
    message = _anthropic_body(outcome)
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 0}}
    yield _event("message_start", {"message": start})
    yield _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    yield _event("ping", {})
    for piece in text_chunks(outcome.completion.text):
        yield _event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
    yield _event("content_block_stop", {"index": 0})
    yield _event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                   "usage": usage})
    yield _event("message_stop", {})


def _live_openai_events(live: LiveStream, created: int, include_usage: bool) -> Iterator[str]:
    base = {"id": f"chatcmpl-{live.call_id}", "object": "chat.completion.chunk", "created": created,
            "model": live.model}
    extra: dict[str, Any] = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _data({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    yield chunk({"role": "assistant", "content": ""})
    for item in _live_events(live):
        if isinstance(item, str):
            yield chunk({"content": item})
        elif isinstance(item, Completion):
            yield chunk({}, openai_finish_reason(item.stop_reason))
            if include_usage:
                outcome = Outcome(item, live.call_id, live.model, 0)
                yield _data({**base, "choices": [], "usage": _openai_usage(outcome)})
            yield "data: [DONE]\n\n"
        else:
            # OpenAI's own mid-stream failure: an error object on a data line, and no [DONE].
            yield _data({"error": {"message": item.message, "type": "server_error", "param": None,
                                   "code": item.code}})


def _live_anthropic_events(live: LiveStream) -> Iterator[str]:
    started = Completion("", live.start.usage, None, live.start.model, live.start.response_id)
    usage = _anthropic_usage(Outcome(started, live.call_id, live.model, 0))
    yield _event("message_start", {"message": {
        "id": f"msg_{live.call_id}", "type": "message", "role": "assistant", "model": live.model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 0}}})
    yield _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    yield _event("ping", {})
    for item in _live_events(live):
        if isinstance(item, str):
            yield _event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": item}})
        elif isinstance(item, Completion):
            yield _event("content_block_stop", {"index": 0})
            yield _event("message_delta", {
                "delta": {"stop_reason": anthropic_stop_reason(item.stop_reason), "stop_sequence": None},
                "usage": _anthropic_usage(Outcome(item, live.call_id, live.model, 0))})
            yield _event("message_stop", {})
        else:
            # The API's own mid-stream failure event; the SDK raises it as an APIStatusError.
            yield _event("error", {"error": {"type": _ANTHROPIC_ERROR_TYPES.get(item.status, "api_error"),
                                             "message": item.message}})
