"""The Messages API's shapes the scripted model shares between its parts: answers and error bodies
as the API sends them, ids, and the text inside content blocks."""

from __future__ import annotations

import json
import math
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MESSAGES_PATH = "/v1/messages"
# GET: the models list, which `cardloop demo` and `dev --scripted` call before the first stage.
MODELS_PATH = "/v1/models"
_DEFAULT_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API. "
                           "Please go to Plans & Billing to upgrade or purchase credits."),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "This request would exceed the rate limit for your organization of "
                              "50 requests per minute. Please reduce the prompt length or the maximum "
                              "tokens requested, or try again later."),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}
_ALPHABET = string.ascii_letters + string.digits


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False  # send `body` (a message) as the API's server-sent events
    chunk_delay: float = 0.0


def new_id(prefix: str) -> str:
    return prefix + "01" + "".join(secrets.choice(_ALPHABET) for _ in range(22))


def count_tokens(text: str) -> int:
    # About four characters per token for English and code: good enough for plausible usage.
    return math.ceil(len(text) / 4)


def models_answer() -> Answer:
    """GET /v1/models: the API's list shape, naming the scripted model itself."""
    model = {"type": "model", "id": "scripted-model", "display_name": "cardloop scripted model (test double)",
             "created_at": "2026-01-01T00:00:00Z"}
    return Answer(200, {"data": [model], "has_more": False, "first_id": model["id"], "last_id": model["id"]},
                  {"request-id": new_id("req_")})


def error_answer(status: int, message: str | None = None, error_type: str | None = None) -> Answer:
    default_type, default_message = _DEFAULT_ERRORS.get(
        status, ("api_error" if status >= 500 else "invalid_request_error", "Error")
    )
    request_id = new_id("req_")
    body = {
        "type": "error",
        "error": {"type": error_type or default_type, "message": message or default_message},
        "request_id": request_id,
    }
    return Answer(status, body, {"request-id": request_id,
                                 "x-should-retry": "true" if status in (408, 409, 429) or status >= 500 else "false"})


def invalid_answer(message: str) -> Answer:
    return error_answer(400, message, "invalid_request_error")


def block_text(block: Any) -> str:
    if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return block["text"]
    return json.dumps(block, sort_keys=True)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block_text(b) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return ""


def system_text_blocks(system: Any) -> list[str]:
    if isinstance(system, str):
        return [system]
    if isinstance(system, list):
        return [b.get("text", "") for b in system if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
    return []
