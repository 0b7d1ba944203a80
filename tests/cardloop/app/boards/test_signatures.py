"""Signature checks per scheme: valid, wrong, missing, malformed; Linear's timestamp window."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import httpx
import pytest

from cardloop.app.boards.adapters import build_adapters
from cardloop.app.boards.events import WebhookError
from cardloop.app.boards.signatures import verify_github, verify_jira, verify_linear, verify_trello

from .conftest import fixture_bytes, make_config

SECRET = "s3cr3t-for-tests"
CALLBACK = "https://cardloop.acme.dev/webhooks/trello"


def sha256_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def trello_sig(secret: str, content: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


def refused(fn, *args, status: int = 401) -> str:
    with pytest.raises(WebhookError) as info:
        fn(*args)
    assert info.value.status == status
    return info.value.message


# -- GitHub (and generic) -------------------------------------------------------------------------

def test_github_published_test_vector() -> None:
    # docs.github.com "Validating webhook deliveries": the example secret, payload and signature.
    secret, body = "It's a Secret to Everybody", b"Hello, World!"
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert "sha256=" + sha256_hex(secret, body) == expected
    verify_github(httpx.Headers({"X-Hub-Signature-256": expected}), body, secret)


def test_github_valid_on_a_real_payload_with_case_insensitive_headers() -> None:
    body = fixture_bytes("github/issue_comment.created.json")
    verify_github(httpx.Headers({"X-HUB-SIGNATURE-256": "sha256=" + sha256_hex(SECRET, body)}), body, SECRET)
    # upper-case hex is still the same digest
    verify_github(httpx.Headers({"x-hub-signature-256": "sha256=" + sha256_hex(SECRET, body).upper()}), body, SECRET)


@pytest.mark.parametrize(("value", "needle"), [
    (None, "missing X-Hub-Signature-256"),
    ("", "missing X-Hub-Signature-256"),
    ("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "expected sha256=<hex digest>"),
    ("sha1=0123456789abcdef0123456789abcdef01234567", "only sha256"),
    ("sha256=abc", "expected 64 hex digits"),
    ("sha256=" + "zz" * 32, "not hexadecimal"),
    ("sha256=" + "ab " * 21 + "a", "not hexadecimal"),
    ("sha256=" + "00" * 32, "does not match"),
])
def test_github_refusals(value: str | None, needle: str) -> None:
    headers = httpx.Headers({} if value is None else {"X-Hub-Signature-256": value})
    assert needle in refused(verify_github, headers, b"Hello, World!", "It's a Secret to Everybody")


def test_github_wrong_secret_and_altered_body() -> None:
    body = b'{"action":"created"}'
    good = httpx.Headers({"X-Hub-Signature-256": "sha256=" + sha256_hex(SECRET, body)})
    assert "does not match" in refused(verify_github, good, body, "another-secret")
    assert "does not match" in refused(verify_github, good, body + b" ", SECRET)


def test_an_empty_secret_is_a_configuration_error_not_a_pass() -> None:
    body = b"{}"
    headers = httpx.Headers({"X-Hub-Signature-256": "sha256=" + sha256_hex("", body)})
    assert "no webhook secret" in refused(verify_github, headers, body, "", status=503)


# -- Linear ---------------------------------------------------------------------------------------

def linear_body(timestamp: float | None) -> bytes:
    data = json.loads(fixture_bytes("linear/issue_update_state.json"))
    if timestamp is None:
        del data["webhookTimestamp"]
    else:
        data["webhookTimestamp"] = timestamp
    return json.dumps(data).encode()


def linear_headers(body: bytes, secret: str = SECRET) -> httpx.Headers:
    return httpx.Headers({"Linear-Signature": sha256_hex(secret, body)})


def test_linear_valid_fixture_within_the_window() -> None:
    body = fixture_bytes("linear/issue_update_state.json")
    stamp = json.loads(body)["webhookTimestamp"] / 1000
    verify_linear(linear_headers(body), body, SECRET, now=stamp)
    verify_linear(linear_headers(body), body, SECRET, now=stamp + 59.9)
    verify_linear(linear_headers(body), body, SECRET, now=stamp - 59.9)


@pytest.mark.parametrize("offset", [61.0, -61.0, 3600.0])
def test_linear_timestamp_outside_the_window_is_refused(offset: float) -> None:
    now = 1_741_083_330.456
    body = linear_body(now * 1000)
    message = refused(verify_linear, linear_headers(body), body, SECRET, now + offset)
    assert "webhookTimestamp" in message and "limit 60 s" in message


@pytest.mark.parametrize("stamp", [None, "1741083330456", True, float("nan"), 10 ** 400, -(10 ** 400)])
def test_linear_missing_or_non_numeric_timestamp_is_refused(stamp: object) -> None:
    data = json.loads(fixture_bytes("linear/issue_update_state.json"))
    data["webhookTimestamp"] = stamp
    body = json.dumps(data).encode()  # NaN serializes as the non-standard NaN literal, which json reads back
    assert "webhookTimestamp" in refused(verify_linear, linear_headers(body), body, SECRET, 1_741_083_330.0)


@pytest.mark.parametrize("body", [b'{"card_id":"X', b"", b"[" * 100_000, b"\xff\xfe not json"])
def test_linear_signed_body_that_is_not_json_is_a_400(body: bytes) -> None:
    # The signature held, so the sender has the secret: a malformed body is a bad request, not
    # a reason to go and check the secret.
    with pytest.raises(WebhookError) as info:
        verify_linear(linear_headers(body), body, SECRET, 1_741_083_330.0)
    assert info.value.status == 400 and "not valid JSON" in info.value.message


def test_linear_checks_the_signature_before_reading_the_body() -> None:
    # A forged, unparseable body is refused for its signature; the body is never parsed.
    body = b"not json at all"
    headers = httpx.Headers({"Linear-Signature": "ab" * 32})
    assert "does not match" in refused(verify_linear, headers, body, SECRET, 0.0)
    # Same with a valid-looking but stale body: the signature message, not the timestamp one.
    stale = linear_body(0)
    assert "does not match" in refused(verify_linear, linear_headers(stale, "other"), stale, SECRET, 1e9)


@pytest.mark.parametrize(("value", "needle"), [
    (None, "missing Linear-Signature"),
    ("sha256=" + "ab" * 32, "expected 64 hex digits"),
    ("xy" * 32, "not hexadecimal"),
])
def test_linear_malformed_or_missing_header(value: str | None, needle: str) -> None:
    body = linear_body(0)
    headers = httpx.Headers({} if value is None else {"Linear-Signature": value})
    assert needle in refused(verify_linear, headers, body, SECRET, 0.0)


# -- Jira -----------------------------------------------------------------------------------------

def test_jira_valid_and_wrong() -> None:
    body = fixture_bytes("jira/issue_updated_status.json")
    verify_jira(httpx.Headers({"X-Hub-Signature": "sha256=" + sha256_hex(SECRET, body)}), body, SECRET)
    wrong = httpx.Headers({"X-Hub-Signature": "sha256=" + sha256_hex("nope", body)})
    assert "X-Hub-Signature does not match" in refused(verify_jira, wrong, body, SECRET)


@pytest.mark.parametrize(("value", "needle"), [
    (None, "missing X-Hub-Signature header"),
    ("sha1=0123456789abcdef0123456789abcdef01234567", "only sha256"),
    ("sha512=" + "ab" * 64, "only sha256"),
    ("signature", "expected sha256=<hex digest>"),
    ("sha256=" + "ab" * 31, "expected 64 hex digits"),
])
def test_jira_refusals(value: str | None, needle: str) -> None:
    headers = httpx.Headers({} if value is None else {"X-Hub-Signature": value})
    assert needle in refused(verify_jira, headers, b"{}", SECRET)


def test_jira_does_not_read_githubs_header() -> None:
    body = b"{}"
    headers = httpx.Headers({"X-Hub-Signature-256": "sha256=" + sha256_hex(SECRET, body)})
    assert "missing X-Hub-Signature header" in refused(verify_jira, headers, body, SECRET)


# -- Trello ---------------------------------------------------------------------------------------

def test_trello_valid_signs_body_plus_callback_url() -> None:
    body = fixture_bytes("trello/update_card_move.json")
    verify_trello(httpx.Headers({"X-Trello-Webhook": trello_sig(SECRET, body + CALLBACK.encode())}),
                  body, SECRET, CALLBACK)


def test_trello_non_ascii_body_utf8_and_legacy_node_binary_signatures() -> None:
    body = fixture_bytes("trello/comment_card.json")   # carries an en dash
    text = body.decode() + CALLBACK
    assert not text.isascii()
    verify_trello(httpx.Headers({"X-Trello-Webhook": trello_sig(SECRET, text.encode())}), body, SECRET, CALLBACK)
    # Trello's older docs: the signed text is a Node "binary" string (low byte of each UTF-16 unit).
    legacy = bytes(ord(c) & 0xFF for c in text)   # every character here is one UTF-16 unit
    verify_trello(httpx.Headers({"X-Trello-Webhook": trello_sig(SECRET, legacy)}), body, SECRET, CALLBACK)


def test_trello_wrong_callback_url_or_secret() -> None:
    body = fixture_bytes("trello/update_card_move.json")
    signed_for_other_url = trello_sig(SECRET, body + b"https://elsewhere.example/hook")
    message = refused(verify_trello, httpx.Headers({"X-Trello-Webhook": signed_for_other_url}), body, SECRET, CALLBACK)
    assert "callback URL" in message
    wrong_secret = trello_sig("other", body + CALLBACK.encode())
    refused(verify_trello, httpx.Headers({"X-Trello-Webhook": wrong_secret}), body, SECRET, CALLBACK)


@pytest.mark.parametrize(("value", "needle"), [
    (None, "missing X-Trello-Webhook"),
    ("not base64!", "not base64"),
    (base64.b64encode(b"short").decode(), "not an HMAC-SHA1 digest"),
    ("ab" * 20, "not an HMAC-SHA1 digest"),   # hex is not what Trello sends
])
def test_trello_malformed_or_missing(value: str | None, needle: str) -> None:
    headers = httpx.Headers({} if value is None else {"X-Trello-Webhook": value})
    assert needle in refused(verify_trello, headers, b"{}", SECRET, CALLBACK)


def test_trello_without_callback_url_cannot_verify() -> None:
    body = b"{}"
    headers = httpx.Headers({"X-Trello-Webhook": trello_sig(SECRET, body)})
    assert "callback_url" in refused(verify_trello, headers, body, SECRET, "", status=503)


def test_trello_body_that_is_not_utf8() -> None:
    body = b"\xff{}"
    headers = httpx.Headers({"X-Trello-Webhook": trello_sig(SECRET, body + CALLBACK.encode())})
    assert "not UTF-8" in refused(verify_trello, headers, body, SECRET, CALLBACK)


# -- through the adapters (what the route calls) --------------------------------------------------

async def test_each_adapter_verifies_with_its_scheme() -> None:
    config = make_config()
    async with httpx.AsyncClient() as http:
        adapters = build_adapters(config, http)
    body = fixture_bytes("linear/issue_update_state.json")
    now = json.loads(body)["webhookTimestamp"] / 1000
    signed = {
        "github": {"X-Hub-Signature-256": "sha256=" + sha256_hex(SECRET, body)},
        "generic": {"X-Hub-Signature-256": "sha256=" + sha256_hex(SECRET, body)},
        "linear": {"Linear-Signature": sha256_hex(SECRET, body)},
        "jira": {"X-Hub-Signature": "sha256=" + sha256_hex(SECRET, body)},
        "trello": {"X-Trello-Webhook": trello_sig(SECRET, body + CALLBACK.encode())},
    }
    assert set(adapters) == set(signed)
    for name, headers in signed.items():
        adapters[name].verify(httpx.Headers(headers), body, SECRET, now)
        with pytest.raises(WebhookError) as info:
            adapters[name].verify(httpx.Headers(headers), body + b"\n", SECRET, now)
        assert info.value.status == 401, name
    assert {a.secret_env for a in adapters.values()} == {
        "CARDLOOP_GITHUB_WEBHOOK_SECRET", "CARDLOOP_LINEAR_WEBHOOK_SECRET", "CARDLOOP_JIRA_WEBHOOK_SECRET",
        "CARDLOOP_TRELLO_SECRET", "CARDLOOP_GENERIC_WEBHOOK_SECRET"}
