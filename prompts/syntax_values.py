"""Value checks for credentials written in a config syntax's own forms, beyond `key = value`:
a default inside a placeholder (`${DB_PASSWORD:-s3cr3t}`), a Java .properties line that
separates key and value by a space, an HTML password input. The shape checks themselves are
prompts/secret_values.py's; these decide which key names the value and how sure it is."""

from __future__ import annotations

import re

from cardloop.prompts.secret_values import (
    _PATH,
    _TYPE_EXPR,
    _assigned_value_ok,
    _is_code_name,
    _is_placeholder,
    _strength,
)

_NOT_KEY = re.compile(r"[^A-Za-z0-9_.\-]")


def _outer_key(text: str, end: int) -> str:
    """The key a placeholder ending its line's text at `end` is assigned to: `password: `,
    `- DB_PASSWORD=`, `"password": "`, `--db-password=`; "" when none. String scans, no
    regex search from every position of the line."""
    line = text[max(text.rfind("\n", 0, end) + 1, end - 200):end].rstrip(" \t\"'")
    if not line.endswith((":", "=")):
        return ""
    return _NOT_KEY.split(line[-101:-1].rstrip(" \t\"':"))[-1]


def _placeholder_default_ok(m: re.Match[str]) -> bool:
    """The default of `${VAR:-default}` (shell, Compose), `${VAR-default}`, `${VAR:=default}` or
    Spring's `${name:default}`: what the program uses when the variable is unset, so a literal,
    never a reference; so is the alternate of `${VAR:+alt}` (used when it is set). It is a
    credential when the variable names one (`${DB_PASSWORD:...}`) or the key it is assigned to
    does (`spring.datasource.password=${DB_PASS:...}`)."""
    key = m.group("key") or m.group("skey")
    value = m.group("secret")
    if m.group("op") == "+" and ("$" in value or (value[0] == "-" and _is_code_name(value.lstrip("-")))):
        # An alternate value is often built from the variable itself or is a flag that says it
        # is set (`${DB_PASSWORD:+-p"$DB_PASSWORD"}`, `${API_TOKEN:+--with-token}`): no literal.
        return False
    strength = max(_strength(key), _strength(_outer_key(m.string, m.start())))
    if strength == 2:
        # Under a credential noun a default is the credential, whatever its shape, once it is
        # no placeholder, type or path (`${DB_PASSWORD:-postgres}` is the password when unset);
        # no code reads a default, so a dotted one (`SG.x.y`) is no attribute path either.
        return not (len(value) < 8 or _is_placeholder(value) or _TYPE_EXPR.fullmatch(value)
                    or _PATH.fullmatch(value))
    return _assigned_value_ok(strength, key, value, quoted=True)


def _terraform_default_ok(m: re.Match[str]) -> bool:
    """The default of a Terraform variable, named in the block's header (`variable "db_password"
    { default = "..." }`): judged as a quoted value under that name."""
    key = m.group("key")
    return _assigned_value_ok(_strength(key), key, m.group("secret"), quoted=True)


def _html_password_ok(m: re.Match[str]) -> bool:
    """The value of an `<input type="password">`: a literal the page fills the field with, unless
    a template or a mask stands there (`{{ form.password }}`, `********`)."""
    value = m.group("secret").strip()
    return len(value) >= 4 and not _is_placeholder(value)
