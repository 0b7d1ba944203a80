"""Both sides of redaction on generated corpora: every family of fake credential, in every
syntax, is caught whole; text full of look-alikes (SHAs, UUIDs, lock-file hashes, base64
images, sourcemaps, minified JS, fixture hashes, real installed sources) loses nothing."""

from __future__ import annotations

import pytest

from cardloop.prompts.redact import DEFAULT_REDACTOR
from tests.prompts.benign_corpus import generated, installed
from tests.prompts.secret_corpus import FAMILIES, SYNTAXES, leaked, samples

SAMPLES = samples(seed=11)


def test_the_corpus_is_broad() -> None:
    assert len(FAMILIES) >= 40
    assert {s.syntax for s in SAMPLES} >= set(SYNTAXES)
    # The twelve kinds issue 11 saw reach the model are all here.
    assert {"aws-key-pair", "yaml-password", "sendgrid", "npm", "gitlab-pat", "huggingface", "vault-service",
            "shopify-access", "pypi-upload", "twilio-api-key", "azure-storage-connection",
            "docker-config-auth"} <= {f.name for f in FAMILIES}


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_every_family_is_caught_whole_in_every_syntax(family: str) -> None:
    leaks = []
    for sample in (s for s in SAMPLES if s.family == family):
        out = DEFAULT_REDACTOR.redact(sample.text).text
        leaks += [(sample.syntax, run) for part in sample.parts if (run := leaked(out, part))]
    assert not leaks


def test_a_second_draw_of_every_family_is_caught_too() -> None:
    # Other random bodies of the same shapes: the rules hold on the shape, not on one fake.
    misses = [(s.family, s.syntax) for s in samples(seed=12)
              if any(leaked(DEFAULT_REDACTOR.redact(s.text).text, p) for p in s.parts)]
    assert not misses


@pytest.mark.parametrize("kind", sorted(generated(1)))
def test_generated_look_alikes_are_not_redacted(kind: str) -> None:
    text = generated(60_000)[kind]
    found = DEFAULT_REDACTOR.find(text)
    assert not found, [(f.rule, text[max(0, f.start - 40):f.end + 5]) for f in found[:5]]


def test_installed_sources_and_record_hashes_are_not_redacted() -> None:
    for kind, text in installed(300_000).items():
        assert len(text) == 300_000, kind  # the venv has them: this test cannot pass on nothing
        found = DEFAULT_REDACTOR.find(text)
        assert not found, (kind, [(f.rule, text[max(0, f.start - 40):f.end + 5]) for f in found[:5]])


def test_the_issue_11_aws_pair_without_a_label_loses_both_halves() -> None:
    key_id, secret = "AK" + "IA" + "Q3EGRXTZ7VN2KL4P", "kP9vT2xQ7mZ4bN8cR1yW6sD3fG5hJ0aL" + "uE7iO2tY"
    for text in (f"{key_id} {secret}", f"creds: {key_id}:{secret}", f"{key_id},{secret}\n"):
        out = DEFAULT_REDACTOR.redact(text).text
        assert key_id not in out and not leaked(out, secret), out


def test_a_docker_auth_that_is_no_user_password_pair_is_kept() -> None:
    # A JSON "auth" holding base64 of something without `user:` is not Docker's credential.
    text = '{"auth": "aGVsbG8gd29ybGQ="}'
    assert DEFAULT_REDACTOR.redact(text).text == text
