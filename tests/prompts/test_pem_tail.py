"""A private key's tail without its BEGIN line (a log tail, an excerpt or a chunk that starts
inside the key) is redacted from its first body line through its END line, and named as the
whole block is; text around it stays."""

from __future__ import annotations

from cardloop.prompts.redact import redact
from tests.prompts.fake_secrets import PEM_BODY

BODY = PEM_BODY.splitlines()


def test_the_body_lines_above_an_end_line_go_with_it() -> None:
    text = "\n".join(BODY[1:]) + "\n-----END RSA PRIVATE KEY-----\nlistening on :8080\n"
    assert redact(text) == "[REDACTED:private-key]\nlistening on :8080\n"


def test_log_prefixes_before_each_line_stay_and_the_key_goes() -> None:
    lines = [*BODY[1:], "-----END PRIVATE KEY-----"]
    text = "".join(f"2026-05-12T10:00:0{i}Z {line}\n" for i, line in enumerate(lines)) + "2026-05-12T10:00:09Z ready\n"
    out = redact(text)
    assert out == "2026-05-12T10:00:00Z [REDACTED:private-key]\n2026-05-12T10:00:09Z ready\n"


def test_an_encrypted_keys_headers_are_walked_past() -> None:
    text = ("Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,2A1B3C4D5E6F708192A3B4C5D6E7F801\n\n"
            + "\n".join(BODY) + "\n-----END RSA PRIVATE KEY-----\n")
    out = redact(text)
    assert all(line not in out for line in BODY) and out.endswith("[REDACTED:private-key]\n")


def test_a_whole_block_is_one_finding_and_a_lone_end_line_none() -> None:
    whole = "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "-----END RSA PRIVATE KEY-----"
    assert redact(f"a\n{whole}\nb") == "a\n[REDACTED:private-key]\nb"
    # No body above it: a line quoting the marker (docs, a grep pattern) is not a secret.
    text = "grep -n 'END PRIVATE KEY' *.pem\n-----END PRIVATE KEY-----\n"
    assert redact(text) == text
