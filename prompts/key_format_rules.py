"""Private keys in formats other than PEM (prompts/secret_table.py's `private-key` takes those):
- a JSON Web Key's private members (`"d"`, and `"p"`, `"q"`, `"dp"`, `"dq"`, `"qi"` of an RSA key,
  `"k"` of a symmetric one), in text that holds `kty` (a JWKS file, a Keycloak or Auth0 export,
  a `jwk` in a log); the public members (`n`, `e`, `x`, `y`) stay;
- a PuTTY key file's private lines (`Private-Lines: N` and the base64 lines under it); its
  public lines, comment and MAC stay.
"""

from __future__ import annotations

import re

from cardloop.prompts.lazy_pattern import LazyPattern
from cardloop.prompts.redaction_rule import RedactionRule
from cardloop.prompts.secret_values import _is_placeholder

# A quote, maybe with the redactor's gap before it (JSON inside JSON: `\\"d\\"` is read as ` "d "`).
_Q = r"[ \t]{0,16}\""


def _jwk_value_ok(m: re.Match[str]) -> bool:
    return not _is_placeholder(m.group("secret"))


KEY_FORMAT_RULES: tuple[RedactionRule, ...] = (
    RedactionRule(
        "jwk-private-key",
        LazyPattern(r"\"(?:d|p|q|dp|dq|qi|k)" + _Q + r"[ \t]*:[ \t]*" + _Q
                    + r"(?P<secret>[A-Za-z0-9_\-]{16,2000}={0,2})" + _Q),
        group="secret",
        validator=_jwk_value_ok,
        keywords=("kty",),
    ),
    RedactionRule(
        "putty-private-key",
        LazyPattern(r"Private-Lines:[ \t]*\d{1,4}[ \t]*\r?\n"
                    r"(?P<secret>[A-Za-z0-9+/=]{4,200}(?:\r?\n[A-Za-z0-9+/=]{4,200}){0,999})"),
        group="secret",
        keywords=("private-lines",),
    ),
)
