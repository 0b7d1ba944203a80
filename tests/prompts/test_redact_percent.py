"""URL-encoded credentials (a redirect parameter, an access log line, a callback URL): the
redactor reads the text with its escaped `:`, `/`, `@`, `=` and `&` decoded as well, and
replaces what it finds there in the original, escapes included."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from cardloop.prompts.redact import redact

PW = "Zx9Qm2Lk" + "8Wt4Rv"
GHP = "ghp_" + "R8f2kLq9Xz3Vb7Nm1Tc5Wd4Yh6Js0Pa2Ue8Gi"


@pytest.mark.parametrize("text", [
    "GET /login?next=" + quote(f"https://bob:{PW}@db.internal/app", safe="") + " 302",
    "redirect_uri=" + quote(f"https://app.example/cb?token={PW}&x=1", safe=""),
    "GET /hook?state=" + quote(f"password={PW}", safe="") + " HTTP/1.1",
    "next=" + quote(f"token={GHP}&x=1", safe=""),
])
def test_a_url_encoded_credential_is_redacted_whole(text: str) -> None:
    out = redact(text)
    assert PW not in out and GHP[4:] not in out and GHP[-8:] not in out
    assert "[REDACTED:" in out


def test_encoded_text_without_a_credential_stays() -> None:
    text = ("GET /search?q=" + quote("a=b & c:d @home", safe="")
            + "&next=" + quote("https://docs.example.com/a/b?page=2", safe="") + " 200")
    assert redact(text) == text


def test_only_the_lines_with_escapes_are_decoded_again() -> None:
    # One redirect in a long log must not make the redactor read the whole log twice.
    from cardloop.prompts.percent import percent_decoded

    line = "GET /login?next=https%3A%2F%2Fbob%3Apw%40db%2F"
    text = "ordinary line\n" * 2000 + line + "\n" + "more\n" * 2000
    [(plain, where)] = percent_decoded(text)
    assert plain == "GET /login?next=https://bob:pw@db/"
    assert text[where[0]:where[-1]] == line and len(where) == len(plain) + 1
    assert percent_decoded("no escapes here\n" * 10) == []
