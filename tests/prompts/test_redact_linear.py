"""The redactor's cost grows linearly with its input, whatever the input (red-team finding:
"key"*N, "İ"+"a"*N and "token_"*N were quadratic and stalled the API)."""

from __future__ import annotations

import pytest

from cardloop.prompts.redact import DEFAULT_REDACTOR
from tests.prompts.helpers import cpu_pair

FAMILIES = {
    "key*": lambda n: "key" * (n // 3),
    "dotted İ": lambda n: "İ" + "a" * n,
    "token_*": lambda n: "token_" * (n // 6),
    "password= *": lambda n: "password= " * (n // 10),
    "unterminated quotes": lambda n: 'password="' * (n // 10),
    "credential words": lambda n: "api_key secret token " * (n // 21),
    "PEM END lines": lambda n: "-----END PRIVATE KEY-----" * (n // 25),
    "key body above END lines": lambda n: ("QUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n" * 60 + "-----END PRIVATE KEY-----\n")
    * (n // 2000),
    "escaped quotes": lambda n: '\\"' * (n // 2),
    "login words": lambda n: "login " * (n // 6),
    "mysql words": lambda n: "mysql -u " * (n // 9),
    "password flags": lambda n: "--password " * (n // 11),
    "percent escapes": lambda n: "token%3D%40" * (n // 11),
    "stringData JSON left open": lambda n: '"kind":"Secret",' + '"stringData":{"k":"' * (n // 19) + "x",
    "stringData YAML": lambda n: "kind: Secret\n" + "stringData:\n  k: v1B2c3D4\n" * (n // 26),
    "password: | blocks": lambda n: "password: |\n  a1B2c3D4e5\n" * (n // 25),
    "name/value pairs left open": lambda n: "- name: db_token\n  value: '" * (n // 27),
    "SQL password quotes": lambda n: "password 'identified by '" * (n // 26),
    "quoted backslashes": lambda n: 'token="' + "\\a" * (n // 2),
    # A multi-line string's value is not bounded: each ends at the next delimiter of its kind.
    "multi-line strings left open": lambda n: "password = \"\"\" a\ntoken = ''' b\n" * (n // 31),
    "one multi-line string left open": lambda n: "password = '''" + "a1 " * (n // 3),
    "Secret data blocks nested": lambda n: "kind: Secret\n" + "".join(" " * i + "data:\n" for i in range(int(n**0.5))),
    "Secret data objects left open": lambda n: '"kind":"Secret",' + '{"data":{"k":"aGVsbG8=",' * (n // 25),
    # A value that goes on over `;` `(` `,` (each candidate reads a bounded number of its parts).
    "values going on, rejected": lambda n: "password=a(!password=a(" * (n // 24),
    "values going on, accepted": lambda n: "password=Ab3;xK9pQ7vR2m;" * (n // 24),
    "values going on, one run": lambda n: "password=a" + ";b" * (n // 2),
    "tool words": lambda n: ('htpasswd -b a b echo x | requirepass -storepass variable "pw" { login\n password '
                             "ConvertTo-SecureString '") * (n // 100) + "--password-stdin",
    "variable blocks left open": lambda n: 'variable "db_password" {' * (n // 24),
    # One value over many stop characters, keys inside it: its run is extended once.
    "stop characters, one run": lambda n: "password=Ab3xK9" + ";b!password=x" * (n // 13),
    "cookie lines": lambda n: ("Cookie: sessionid=" + "a1B2c3D4" * 3 + "; " + "x=y; " * 20 + "\n") * (n // 140),
    "tool command words": lambda n: "curl -u a: http -a mongo -p sqlcmd -P -Password smbclient -U " * (n // 62),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_eight_times_the_input_costs_about_eight_times_the_time(family: str) -> None:
    make = FAMILIES[family]
    # CPU time, small and large in turn (a loaded machine slows both): linear is about 8x,
    # quadratic about 64x. A single 4x step failed on a busy CI machine at 8.0-8.6x for
    # families that are linear (3.2-3.6x idle); the floor keeps timer noise on tiny runs out.
    small, large = cpu_pair(DEFAULT_REDACTOR.redact, make(20_000), make(160_000), reps=4)
    assert large <= 24 * max(small, 0.002), f"{family}: {small:.4f}s -> {large:.4f}s"


def test_the_dotted_capital_i_does_not_hide_a_secret() -> None:
    text = "İstanbul config: api_key = 'Zx81kPq0Lm2Rt5Yv7Wn3Bc9Df'"
    assert "Zx81kPq0Lm2Rt5Yv7Wn3Bc9Df" not in DEFAULT_REDACTOR.redact(text).text


def test_lone_surrogates_are_redacted_around_not_raised_on() -> None:
    out = DEFAULT_REDACTOR.redact("hi \ud800 token=ghp_" + "a1B2c3D4" * 5).text
    assert "\ud800" in out and "a1B2c3D4" not in out


class _Reads(str):
    """A text that counts the characters its searches and slices go over: the redactor's helpers
    that walk lines must go over each character a bounded number of times, which timing alone
    shows only at sizes too large for the suite (one line of 1.6 MB of "%3D" escapes took 5.3 s
    to decode, 0.4 MB 0.4 s)."""

    read = 0

    def find(self, sub, start=0, end=None):  # type: ignore[override]
        found = str.find(self, sub, start, end)
        _Reads.read += (found if found >= 0 else len(self) if end is None else end) - start
        return found

    def rfind(self, sub, start=0, end=None):  # type: ignore[override]
        found = str.rfind(self, sub, start, end)
        stop = len(self) if end is None else end
        _Reads.read += stop - (found if found >= 0 else start)
        return found

    def __getitem__(self, key):  # type: ignore[override]
        piece = str.__getitem__(self, key)
        _Reads.read += len(piece)
        return piece


def _reads_per_character(walk, text: str) -> float:
    _Reads.read = 0
    walk(_Reads(text))
    return _Reads.read / len(text)


@pytest.mark.parametrize("size", [20_000, 80_000])
def test_one_long_line_of_end_markers_is_read_a_bounded_number_of_times(size: int) -> None:
    from cardloop.prompts.pem_tail import headless_keys

    # Before: each END marker on the line sliced the text back to the first one walked.
    assert _reads_per_character(headless_keys, "-----END PRIVATE KEY-----" * (size // 25)) < 4


@pytest.mark.parametrize("size", [20_000, 80_000])
def test_one_long_line_of_escapes_is_read_a_bounded_number_of_times(size: int) -> None:
    from cardloop.prompts.percent import percent_decoded
    from cardloop.prompts.unicode_escape import unicode_decoded

    # Before: after each escape the rest of the text was searched for the line's end.
    assert _reads_per_character(percent_decoded, "token%3D%40" * (size // 11)) < 4
    assert _reads_per_character(unicode_decoded, "password\\u003d\\u0040" * (size // 20)) < 4
