"""An unquoted value holding a character where code and connection strings end a value (`,` `;`
`(` `)` `<` `>`): the whole password goes, never the part before that character; connection
strings, calls, statements and markup around a value stay as they were."""

from __future__ import annotations

import pytest

from cardloop.prompts.redact import redact

MARK = "[REDACTED:generic-assignment]"


@pytest.mark.parametrize(("text", "kept"), [
    ("password=Ab3;xK9pQ7vR2m\n", "password="),
    ("DB_PASSWORD=p(4ssW0rd,xyz\n", "DB_PASSWORD="),
    ("password=Ab3,xK9pQ7vR2m\n", "password="),
    ("password=Ab3<xK9pQ7vR2m\n", "password="),
    ("api_token: Zr8)Tu3Wq2Lk7Vb\n", "api_token: "),
    ("export API_TOKEN=Ab3xK9;pQ7vR2m\n", "export API_TOKEN="),
    ("password=Pa(ss)w0rd99\n", "password="),
    # Its first part alone was taken already; now the part after the `;` goes with it.
    ("password=abcdefgh12;7vR2mQ\n", "password="),
    # A connection string's next field stays, its password goes whole.
    ("Server=db;User ID=svc;Password=Ab3;xK9pQ7;Database=app\n", ";Database=app\n"),
    ("mount -o username=bob,password=Xk9;pQ7v,vers=3.0 //srv/share /mnt\n", ",vers=3.0 //srv/share /mnt\n"),
], ids=["semicolon", "paren-comma", "comma", "angle", "closing-paren", "export", "parens-inside",
        "long-first-part", "connection-string", "mount-options"])
def test_the_whole_value_goes_over_a_stop_character(text: str, kept: str) -> None:
    out = redact(text)
    assert out.startswith(kept) or out.endswith(kept), out
    assert MARK in out
    for part in ("xK9p", "4ssW0", "Tu3Wq", "w0rd99", "7vR2m", "pQ7"):
        assert part not in out, out


@pytest.mark.parametrize("text", [
    "password=e.pw;return x\n",
    "    token=get_token(a,\n        b)\n",
    "a.password=b;c.f2()\n",
    "self.token=jwt.encode(payload,\n",
    "token=base64.b64encode(data,\n",
    "password=hash(pw2,salt)\n",
    "f(password=pw,user=u)\nf(password=pw,timeout)\n",
    "{password:e,token:t}\n",
    "<td>password=abc</td>\n<p>token=ab12<br/>cd</p>\n",
    "password = row[0];\nPASSWORD=CorrectHorse;\ntoken=x;y=2\n",
    "secret_name=db,creds\ntoken_type=bearer,expires=3600\npasswords=a;b;c\n",
    "Server=db;Password=x;Database=y\n",
    "if(password=null,token)\n",
], ids=["statement", "call-over-lines", "minified", "call-first-argument", "digits-in-name", "call-digits",
        "keyword-arguments", "object", "markup", "code", "names", "short-connection", "condition"])
def test_code_and_fields_after_a_stop_character_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [
    # More than 16 stop characters: the tail past the pattern's bound went along (it was left).
    "password=Xk9v" + "".join(f";{c}" for c in "abcdefghijklmnopqr") + ";sTailXyz9\n",
    "DB_PASSWORD=Zr8)Tu3Wq2" + ",k9" * 40 + "\n",
    # A part longer than 64 characters, then more.
    "password=Ab" + "c" * 70 + ";Xk9vQ2mZ7pLw\n",
], ids=["seventeen-stops", "forty-stops", "long-part"])
def test_a_value_with_many_stop_characters_goes_whole(text: str) -> None:
    key = text.split("=")[0]
    assert redact(text) == f"{key}={MARK}\n"


@pytest.mark.parametrize(("text", "expected"), [
    # A lone closing `>` or `)` ends the value: it was left after the marker.
    ("password=p<4ssW0rd>\n", f"password={MARK}\n"),
    ("password=p<4ssW0rd> next\n", f"password={MARK} next\n"),
    # Parentheses inside a password on a line of settings (an .env file, YAML): no call there.
    ("DB_PASSWORD=Abc(123)\n", f"DB_PASSWORD={MARK}\n"),
    ("export DB_PASSWORD=Abc(123)\n", f"export DB_PASSWORD={MARK}\n"),
    ("  password: Abc(123)\n", f"  password: {MARK}\n"),
    ("password=Abc(123)", f"password={MARK}"),
], ids=["angle", "angle-then-word", "env", "export", "yaml", "end-of-text"])
def test_a_closing_character_and_parentheses_go_with_the_password(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    "password = hash(123)\n",  # spaces around `=`: code
    "f(password=pw)\nf(password=get(1))\n",
    "  token: getToken(1),\n",  # a JavaScript object goes on with a comma
    "return Token(42)\npassword=Abc(\n",
    "if(token=get(12)){x()}\n",
], ids=["call-spaced", "keyword-argument", "js-object", "constructor", "condition"])
def test_calls_stay(text: str) -> None:
    assert redact(text) == text
