"""Redacting text that was redacted before finds nothing: a marker is not a secret. Text passes
the redactor more than once on its way (a tenant prompt stored redacted, then layered into a
gateway call or a card's prompt; a prompt redacted, then stored as a blob), and each pass
counts what it found: a marker counted again was a phantom secret in `x-cardloop-redactions`
and in explain's redaction counts."""

from __future__ import annotations

from cardloop.prompts.redact import DEFAULT_REDACTOR, redact
from tests.prompts.secret_corpus import samples


def test_every_sample_of_the_corpus_once_redacted_holds_no_more_secrets() -> None:
    again = {}
    for sample in samples(11, 2):
        once = redact(sample.text)
        found = DEFAULT_REDACTOR.redact(once).findings
        if found:
            again[f"{sample.family}/{sample.syntax}"] = (once, [f.rule for f in found])
    assert again == {}


def test_a_marker_followed_by_more_of_a_token_is_still_a_secret() -> None:
    # Only the marker itself is a placeholder: a value that merely starts like one is not.
    text = "https://svc:[REDACTED:url-credentials]Zk8mQ2xL9v@db.internal/app"
    assert redact(text) == "https://svc:[REDACTED:url-credentials]@db.internal/app"
