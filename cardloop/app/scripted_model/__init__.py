"""ScriptedModel: a TEST DOUBLE that speaks the Anthropic Messages API on 127.0.0.1.

It is a real HTTP server (standard library only, starts in milliseconds) so the real `anthropic` client,
its headers, its error classes and our error classification are all exercised. It is not a
language model: it answers from a script. Three uses:

1. Offline demo: ``ScriptedModel(load_transcript("examples/transcript.json"))``. A transcript
   maps a stage to its replies. The stage comes from the agent block of the system prompt
   ("# Stage: planning" | coding | code review | testing | error fixing); the n-th request of a
   stage gets the n-th reply and the last reply repeats. A stage with no replies falls back to
   the "default" entry, else gets a reply ending in <promise>BLOCKED</promise> that says so.
   A request whose system prompt begins with "# Summarize a card's conversation" gets a
   deterministic extractive summary of the request's messages under the six headings the
   summarize template asks for.
2. Fault injection for tests: ``server.inject(status=529)``, ``inject(status=429, retry_after=7)``,
   ``inject(delay=2.0)``... queue faults that the next requests consume, one each, before any
   normal reply. Error bodies, error types and the request-id header are the API's own.
3. Benchmarks: ``ScriptedModel(latency=0.05)`` sleeps that long before every answer.
   ``ScriptedModel(unique=True)`` starts every text reply with "[call N] " (chaos runs).

It validates requests the way the API does where our code could get it wrong (model,
max_tokens, messages, roles, first role user, system shape, at most 4 cache_control blocks,
temperature range, unknown fields, the anthropic-version and x-api-key headers) and answers
400 invalid_request_error otherwise. Usage numbers are plausible: about one token per four
characters, and a prompt-cache model (a prefix up to a cache_control breakpoint, at least
`min_cache_tokens` long, is written once and read by later requests with the same prefix
within `cache_ttl`). ``"stream": true`` is answered with the API's server-sent events
(message_start, content_block_start, ping, content_block_delta..., content_block_stop,
message_delta, message_stop), the reply text cut into several text deltas; `latency` (and an
injected delay) passes before the first event, `chunk_delay` (constructor, attribute or
``inject(chunk_delay=...)``) between deltas, so tests can watch a stream arrive piece by piece.
An injected error status is a plain JSON error response, as the API answers before a stream.

Run it alone: ``python -m cardloop.app.scripted_model examples/transcript.json --port 8765``.
"""

from cardloop.app.scripted_model.cli import main
from cardloop.app.scripted_model.model import Fault, RecordedRequest, ScriptedModel
from cardloop.app.scripted_model.streaming import STREAM_CHUNK_CHARS, stream_events, text_deltas
from cardloop.app.scripted_model.summary import SUMMARY_HEADING, summarize
from cardloop.app.scripted_model.transcript import (
    STAGES,
    TRANSCRIPT_KEYS,
    TranscriptError,
    load_transcript,
    normalize_stage,
)
from cardloop.app.scripted_model.validation import MAX_CACHE_CONTROL, SAMPLING_REMOVED_IN, validate_request
from cardloop.app.scripted_model.wire import MESSAGES_PATH

__all__ = [
    "MAX_CACHE_CONTROL",
    "MESSAGES_PATH",
    "SAMPLING_REMOVED_IN",
    "STAGES",
    "STREAM_CHUNK_CHARS",
    "SUMMARY_HEADING",
    "TRANSCRIPT_KEYS",
    "Fault",
    "RecordedRequest",
    "ScriptedModel",
    "TranscriptError",
    "load_transcript",
    "main",
    "normalize_stage",
    "stream_events",
    "summarize",
    "text_deltas",
    "validate_request",
]
