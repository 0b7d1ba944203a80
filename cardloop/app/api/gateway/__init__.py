"""The prompt gateway: OpenAI- and Anthropic-shaped chat endpoints for a tenant's other applications.

    POST /v1/chat/completions   OpenAI chat completions request -> chat.completion (or SSE chunks)
    POST /v1/messages           Anthropic Messages request      -> message (or SSE events)

Every call (tenant API token -> tenant: `Authorization: Bearer` on both routes, `x-api-key` on
/v1/messages too; a missing or unknown one is a 401 in the caller's error shape, routes.py):

1. The body is validated by hand, so a malformed one is a 400 in the caller's own error shape
   (FastAPI's validation errors would answer 422 in neither shape), naming the exact param
   (`messages.0.content.1.text`, `messages.2.tool_calls.0.function`), before any call.
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
5. The tenant's spend limits (and the API token's, [limits] per_token) are checked and the call's
   ledger row opened in one transaction (`provider.admit`); over a limit the answer is 429 with
   Retry-After in the caller's shape, a "refused" row is left, and the model is not called.
6. The conversation goes to `config.gateway.profile`'s provider (`ActivityDeps.provider`), rendered in
   that provider's format by the provider itself; the row is settled with usage and cost, or as
   "failed" (no cost) when the provider fails before answering.

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
- What intercept could not carry as sent (an image or document left as a placeholder, a
  thinking block dropped, an unknown block kept as text) is named in the `x-cardloop-warnings`
  response header, whole or streamed answer alike (answers.warnings_header: an RFC 8941 list of
  strings, printable ASCII, bounded), not only in the log: the caller's application would
  otherwise get an answer about an image the model never saw.
- Streaming ("stream": true) is answered as server-sent events in the caller's protocol. When
  the profile's provider can stream (`StreamingProvider`: the anthropic provider), each text delta
  is forwarded as the provider produces it; the response starts once the provider has accepted
  the call, so a failure before that is the plain HTTP error below, and a failure after it ends
  the stream with an error event (Anthropic `event: error`; OpenAI a `data: {"error": ...}` line,
  no `[DONE]`). Usage is recorded from the stream's final event; a stream that ends any other
  way is settled with the usage known so far (the input its start reported, the output counted
  from the text forwarded): "cancelled" when the caller hung up, "failed" when the provider cut
  it, so a caller who leaves early still counts against its tenant's caps (streaming.LiveResponse
  settles it as the request ends, not whenever the generator is collected). Other providers'
  answers are completed first and replayed as events (the first event leaves once the provider
  has answered).
- Status mapping of provider failures: rate limited -> 429; overloaded, 5xx, timeout, connection
  and other retryable failures -> 503; both with `retry-after` (whole seconds) when the provider
  said how long. No key for the profile on this server -> 503 `no_provider_key` (no call made,
  no retry-after: it is the operator's to fix). The provider's 400/422 -> 400 with its message
  (prompt too long too; 413 stays 413). Our own provider key refused, spend limit, unknown
  model -> 502 with a generic message: the caller cannot fix them and must not see our
  account's details.
- The system budget of the layered prompt is widened to the profile's whole prompt budget
  (`budget.total`): a caller's system prompt is its application's, not a card's bounded layer.
- Usage is recorded as card key `<tenant>/gateway/-`, stage "gateway", call key
  `gateway/<id>`, token_id the bearer token's id (the `x-cardloop-call-id` header and the
  response id carry the same id). A
  failure to record is logged and the answer still returned: the tokens were spent either way,
  and a 500 would only make the caller retry and spend them twice.
"""

from cardloop.app.api.gateway.answers import anthropic_stop_reason, error_response, openai_finish_reason
from cardloop.app.api.gateway.layering import OPENER, layered_conversation, prepare, tenant_prompt_for
from cardloop.app.api.gateway.models import STAGE, GatewayCall, GatewayError, LiveStream, Outcome, Prepared, Protocol
from cardloop.app.api.gateway.provider import complete, from_provider_error, open_stream
from cardloop.app.api.gateway.routes import chat_completions, messages, router, too_large
from cardloop.app.api.gateway.streaming import STREAM_CHUNK_CHARS, text_chunks
from cardloop.app.api.gateway.validation import read_request

__all__ = [
    "OPENER",
    "STAGE",
    "STREAM_CHUNK_CHARS",
    "GatewayCall",
    "GatewayError",
    "LiveStream",
    "Outcome",
    "Prepared",
    "Protocol",
    "anthropic_stop_reason",
    "chat_completions",
    "complete",
    "error_response",
    "from_provider_error",
    "layered_conversation",
    "messages",
    "open_stream",
    "openai_finish_reason",
    "prepare",
    "read_request",
    "router",
    "tenant_prompt_for",
    "text_chunks",
    "too_large",
]
