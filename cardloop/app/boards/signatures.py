"""Webhook signature checks, each over the RAW body bytes exactly as received.

Every failure is WebhookError(401) with a message that says which header is missing, malformed
or wrong (never the expected value). Digests are compared with hmac.compare_digest on bytes, so
the time taken says nothing about how much of a forged signature matched. An empty secret is a
configuration error (503): an HMAC keyed with "" is one anybody can compute.

    scheme    header                 value                               signed content
    GitHub    X-Hub-Signature-256    sha256=<hex HMAC-SHA256>            body
    generic   X-Hub-Signature-256    sha256=<hex HMAC-SHA256>            body
    Linear    Linear-Signature       <hex HMAC-SHA256>                   body; webhookTimestamp within 60 s
    Jira      X-Hub-Signature        sha256=<hex HMAC-SHA256> (WebSub)   body
    Trello    X-Trello-Webhook       base64(HMAC-SHA1)                   body text + callback URL
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import string
from collections.abc import Mapping

from cardloop.app.boards.events import SignatureMismatch, WebhookError
from cardloop.app.boards.payload import finite_number, header

LINEAR_TOLERANCE_SECONDS = 60.0


def _unauthorized(message: str) -> WebhookError:
    return WebhookError(401, message)


def _key(secret: str) -> bytes:
    if not secret:
        raise WebhookError(503, "no webhook secret is configured, so no signature can be checked")
    return secret.encode("utf-8")


def _required(headers: Mapping[str, str], name: str) -> str:
    value = header(headers, name)
    if value is None:
        raise _unauthorized(f"missing {name} header")
    return value


def _hex_digest(value: str, name: str, size: int) -> bytes:
    """Exactly `size` bytes written as hex (either case), or 401."""
    value = value.strip()
    if len(value) != 2 * size:
        raise _unauthorized(f"malformed {name} header: expected {2 * size} hex digits")
    # bytes.fromhex would skip spaces; a digest has none.
    if not all(c in string.hexdigits for c in value):
        raise _unauthorized(f"malformed {name} header: not hexadecimal")
    return bytes.fromhex(value)


def _prefixed_sha256(headers: Mapping[str, str], name: str) -> bytes:
    """A `sha256=<hex>` header (GitHub's and the WebSub format Jira uses)."""
    value = _required(headers, name)
    method, sep, digest = value.partition("=")
    if not sep:
        raise _unauthorized(f"malformed {name} header: expected sha256=<hex digest>")
    if method.strip().lower() != "sha256":
        raise _unauthorized(f"unsupported {name} method {method.strip()[:20]!r}: only sha256 is accepted")
    return _hex_digest(digest, name, hashlib.sha256().digest_size)


def _check(expected: bytes, given: bytes, name: str) -> None:
    if not hmac.compare_digest(expected, given):
        raise SignatureMismatch(f"{name} does not match the body: wrong secret or altered payload")


def _hmac_sha256(secret: str, body: bytes) -> bytes:
    return hmac.new(_key(secret), body, hashlib.sha256).digest()


def verify_github(headers: Mapping[str, str], body: bytes, secret: str) -> None:
    """GitHub (and the generic board): `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`."""
    expected = _hmac_sha256(secret, body)
    _check(expected, _prefixed_sha256(headers, "X-Hub-Signature-256"), "X-Hub-Signature-256")


def verify_jira(headers: Mapping[str, str], body: bytes, secret: str) -> None:
    """Jira Cloud admin webhooks with a secret: `X-Hub-Signature: sha256=<hex>` (the WebSub
    `method=signature` form; Atlassian documents sha256 as the only method, so others are refused)."""
    expected = _hmac_sha256(secret, body)
    _check(expected, _prefixed_sha256(headers, "X-Hub-Signature"), "X-Hub-Signature")


def verify_linear(headers: Mapping[str, str], body: bytes, secret: str, now: float,
                  tolerance: float = LINEAR_TOLERANCE_SECONDS) -> None:
    """Linear: `Linear-Signature: <hex HMAC-SHA256 of the body>`, and the body's `webhookTimestamp`
    (ms since the epoch) within `tolerance` seconds of `now`, so a captured delivery cannot be
    replayed later."""
    expected = _hmac_sha256(secret, body)
    _check(expected, _hex_digest(_required(headers, "Linear-Signature"), "Linear-Signature", 32), "Linear-Signature")
    # Parsed only now: before the signature checked out, the body is not worth parsing.
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        # The signature held: the sender is Linear (or has its secret), and the body is malformed.
        raise WebhookError(400, "body is not valid JSON") from None
    stamp = finite_number(data.get("webhookTimestamp")) if isinstance(data, dict) else None
    if stamp is None:
        raise _unauthorized("missing, non-numeric or out-of-range webhookTimestamp: "
                            "cannot rule out a replayed delivery")
    skew = abs(now - stamp / 1000.0)
    if skew > tolerance:
        raise _unauthorized(f"webhookTimestamp is {skew:.0f} s away from now (limit {tolerance:.0f} s): "
                            "a replayed or badly delayed delivery")


def _node_binary(text: str) -> bytes:
    """What Node's legacy "binary" string encoding makes of text: the low byte of each UTF-16 unit."""
    return text.encode("utf-16-le")[::2]


def verify_trello(headers: Mapping[str, str], body: bytes, secret: str, callback_url: str) -> None:
    """Trello: `X-Trello-Webhook: base64(HMAC-SHA1(app secret, body text + callback URL))`, the
    callback URL exactly as registered with Trello (query string included).

    Trello signs text. UTF-8 is what its current docs' example produces; its older docs say the
    signed text is treated as a Node "binary" string (each UTF-16 unit truncated to 8 bits), which
    differs only for non-ASCII bodies (card names with accents, emoji). Both are accepted, since a
    card named "Café" must not be refused."""
    if not callback_url:
        raise WebhookError(503, "boards.trello.callback_url is not set: Trello signs the callback URL, "
                                "so no signature can be checked without it")
    key = _key(secret)
    value = _required(headers, "X-Trello-Webhook")
    try:
        given = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _unauthorized("malformed X-Trello-Webhook header: not base64") from None
    if len(given) != hashlib.sha1().digest_size:
        raise _unauthorized("malformed X-Trello-Webhook header: not an HMAC-SHA1 digest")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _unauthorized("body is not UTF-8 text, so it cannot carry a Trello signature") from None
    utf8 = hmac.new(key, (text + callback_url).encode("utf-8"), hashlib.sha1).digest()
    if hmac.compare_digest(utf8, given):
        return
    if not (text + callback_url).isascii():
        legacy = hmac.new(key, _node_binary(text + callback_url), hashlib.sha1).digest()
        if hmac.compare_digest(legacy, given):
            return
    raise SignatureMismatch("X-Trello-Webhook does not match the body and callback URL: wrong app secret, "
                        "altered payload or a callback URL other than the one registered")
