"""Value checks: whether the text a rule matched is a secret or ordinary code.

Generic assignments (`api_key=`, `secret:`, `token =`, `password:`, `client_secret` ... in
env files, YAML, JSON, Python, shell) are the only rule that sees ordinary source code, so a
value-shape check decides (`_generic_value_ok`):
- never redacted: values shorter than 8 characters or holding whitespace, calls
  (`get_token()`), attribute paths (`self.api_key`, `settings.SECRET_KEY`), unquoted code
  names (`access_token`, `Ed25519PrivateKey`, `crypto_sign_BYTES`), placeholders
  (`${TOKEN}`, `{{ token }}`, `<your-token>`, `****`), type strings (`"List[V1Secret]"`),
  plain paths (`PWD=/home/me/src`), and a URL's user or host (the URL rules handle those);
- under a key whose last word is a credential noun (`password`, `passwd`, `pwd`, `secret`,
  `token`, `key`, `passphrase`, `credentials`): every other value, quoted or not
  (`DB_PASSWORD="hunter2hunter"`, `password: correct-horse-battery`), except a quoted name
  that is snake/kebab/dotted or itself names a credential (`ENV_KEY = "ANTHROPIC_API_KEY"`,
  `"refresh_token"`, `"serviceAccountToken"`);
- under any other key that mentions a credential (`secret_name`, `token_type`,
  `password_hash`): only values that look random (letters and digits or mixed case, with
  some entropy) and are neither names nor URLs; under a key named only `*_KEY` (`OPENAI_KEY`,
  `SORT_KEY`) only a token-shaped value (`_token_shaped`);
- a quoted natural-language word among UI phrases is a translation (prompts/locale_table.py).
Decided: `secret_name = "db-credentials"` is kept (the key names a reference, not a secret,
and the value is word-shaped); `PASSWORD=CorrectHorseBattery` unquoted is kept too, because
an unquoted digit-free identifier cannot be told apart from a variable reference in code
(quoted, `password = "CorrectHorseBattery"` is redacted).
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
from collections import Counter

from cardloop.prompts.locale_table import in_translation_table, is_natural_word
from cardloop.prompts.redaction_rule import Validator


def shannon_entropy(value: str) -> float:
    """Bits per character; random base64 scores about 5-6, English words about 3."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# A placeholder, not a value. Two patterns rather than one `match` with `.*` branches: `.*`
# reads the whole value once per branch, and `search` finds the inside forms with a quick
# scan for their first character.
_PLACEHOLDER_START = re.compile(
    r"""
    \$\{?[A-Za-z_]          # shell / compose variable: $TOKEN, ${TOKEN}
    | \$\(                  # command substitution
    | <[^<>]*>              # <your-token-here>
    | \*{3,} | (?i:x{4,})   # already masked
    | \[REDACTED:[a-z0-9][a-z0-9\-]*\](?![A-Za-z0-9])  # our own marker: text redacted before
    | (?i:(?:your|my)[_-]?(?:api[_-]?)?(?:key|token|secret|password)\w*)
    """,
    re.VERBOSE,
)
# Anywhere in the first line: templates, JSONPath, formats. A `%s` glued to a letter or digit
# is a generated password's symbol and letter (`ahSsTI708~%sQtVp`), not a format's slot.
_PLACEHOLDER_INSIDE = re.compile(r"\{\{|\{[\w.$@\[\]\-]*\}|%\(\w+\)s|%s(?![A-Za-z0-9])")
# A name a programmer wrote: `access_token`, `self.api_key`, `.models.v1_secret`, `id-token`.
_NAME = re.compile(r"\.?[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*")
_ATTRIBUTE_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# A type expression written as a string: "List[V1LocalObjectReference]".
_TYPE_EXPR = re.compile(r"[A-Za-z_][\w.]*\[[\w.\[\], |]*\]")
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]*)*")
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# A part of a name: a word, a number, or a word with a version or size (`v1`, `Ed25519`).
# Random tokens break into parts such as `T2m` or `8f5f167f`.
_WORDISH = re.compile(r"[A-Za-z]+\d*|\d+")
_DIGIT = re.compile(r"\d")
_DIGIT_RUNS = re.compile(r"\d+")
_LOWER_UPPER = re.compile(r"[a-z][A-Z]")
_SEPARATORS = re.compile(r"[_.\-]")
_GENERIC_KEY = re.compile(
    r"api[_.\-]?key|apikey|secret|token|passw(?:or)?d|pwd|passphrase|credential|creds|psk"
    r"|(?:private|access|signing|encryption|master|auth|shared|subscription)[_.\-]?key",
    re.IGNORECASE,
)
# The last word of the key decides how sure we are that the value is a credential.
_CREDENTIAL_NOUNS = frozenset({
    "password", "passwd", "pwd", "pass", "passphrase", "secret", "secrets", "token",
    "key", "apikey", "credential", "credentials", "creds",
    "psk",  # a pre-shared key: wpa_supplicant's `psk="..."`, NetworkManager's, `WIFI_PSK=`
})


def _is_placeholder(value: str, *, complete: bool = True) -> bool:
    """`complete=False`: `value` is the bounded start of a longer secret, so "at most two
    distinct characters" (`aaaaaaaa`) says nothing about the rest."""
    if _PLACEHOLDER_START.match(value):
        return True
    if "{" in value or "%" in value:  # `in` is a fast scan; most values have neither
        newline = value.find("\n")
        if _PLACEHOLDER_INSIDE.search(value, 0, newline if newline >= 0 else len(value)):
            return True
    return complete and _at_most_two_chars(value)


def _at_most_two_chars(value: str) -> bool:
    """`len(set(value)) <= 2`, with C scans instead of a set built character by character."""
    if not value:
        return True
    rest = value.lstrip(value[0])
    return not rest or value.count(value[0]) + value.count(rest[0]) == len(value)


_DIGIT_BYTES = b"0123456789"


def _char_kinds(value: str) -> tuple[bool, bool, bool, bool]:
    """Whether `value` holds a digit, a letter, an upper- and a lowercase letter (in the sense
    of `str.isdigit` ...): C scans for ASCII, one test per distinct character otherwise."""
    if value.isascii():  # ASCII case changes exactly the letters of that case
        upper, lower = value.lower() != value, value.upper() != value
        digit = len(value.encode("ascii").translate(None, _DIGIT_BYTES)) != len(value)
        return digit, upper or lower, upper, lower
    chars = set(value)
    return (any(c.isdigit() for c in chars), any(c.isalpha() for c in chars),
            any(c.isupper() for c in chars), any(c.islower() for c in chars))


def _looks_random(value: str) -> bool:
    """Letters and digits, or mixed case, with at least moderate entropy."""
    has_digit, has_alpha, has_upper, has_lower = _char_kinds(value)
    if not ((has_digit and has_alpha) or (has_upper and has_lower)):
        return False
    # Short values cannot reach a high per-character entropy, so the bar scales with length.
    return shannon_entropy(value) >= min(3.0, math.log2(len(value)) * 0.8)


def _words(identifier: str) -> list[str]:
    """`ANTHROPIC_API_KEY` -> ANTHROPIC, API, KEY; `imagePullSecrets` -> image, Pull, Secrets."""
    return _WORDS.findall(identifier)


def _is_code_name(value: str, *, dashes: bool = True) -> bool:
    """A name a programmer wrote (`access_token`, `ANTHROPIC_API_KEY`, `imagePullSecrets`,
    `Ed25519PrivateKey`, `not_exists_file_1123`), not a token such as `q8ZxT2mPvL9k`,
    `a8f5f167f44f` or `a50e8400-e29b-41d4`: a name without digits, or a name of two or more
    word-like parts. `dashes=False` for unquoted values: there `a-b` is no identifier, so
    `password: correct-horse-battery` in YAML is a literal."""
    if not _NAME.fullmatch(value) or (not dashes and "-" in value):
        return False
    if not _DIGIT.search(value):
        return True
    words = _words(value)
    if len(words) < 2 or not all(map(_WORDISH.fullmatch, words)):
        return False
    parts = _SEPARATORS.split(value)
    if any(len(_DIGIT_RUNS.findall(part)) > 2 for part in parts):
        return False  # `OP6UAT384CUL0R92`: names carry a version or a size, not digits strewn through a part
    if any(len(part) >= 20 and part.isupper() and _DIGIT.search(part.rstrip("0123456789")) for part in parts):
        return False  # `NRAK-BLSVWUHMCFURT575FNO4YAGSIKP`: no word of a name runs 20 capitals with digits inside
    letters = [w.rstrip("0123456789") for w in words if not w.isdigit()]
    return bool(letters) and sum(map(len, letters)) / len(letters) >= 3


def _mentions_credential(value: str) -> bool:
    return any(w.lower() in _CREDENTIAL_NOUNS for w in _words(value))


def _key_strength(key: str) -> int:
    """0: the key names no credential (`monkey`, `keyboard`); 1: it mentions one
    (`secret_name`, `token_type`); 2: its last word is a credential noun (`DB_PASSWORD`)."""
    if key.lower() in _PUBLIC_NONCE_KEYS:
        return 0
    if not _GENERIC_KEY.search(key):
        # `DB_PASS`, `smtp.pass`, `ansible_ssh_pass`, openssl's `pass:`: "pass" as the key's last
        # word names a password (`bypass`, `passthrough` are words of their own), but also a step
        # ("first_pass", "allPass", prose's "pass `x=1`"): only a random-looking value goes.
        words = _words(key)
        return 1 if words and (words[-1].lower() == "pass" or _bare_key(words)) else 0
    words = _words(key)
    if words and words[0].lower() == "existing":
        return 1  # a Helm chart's `existingSecret: app-db`: the name of a Secret that holds it
    return 2 if words and words[-1].lower() in _CREDENTIAL_NOUNS else 1


# Keys a protocol names for a random value that is public: WebSocket's handshake nonce.
_PUBLIC_NONCE_KEYS = frozenset({"sec-websocket-key"})


def _bare_key(words: list[str]) -> bool:
    """A key named only `*_KEY` (`OPENAI_KEY`, `STRIPE_KEY`, `serviceKey`, an env file's glued
    `OPENAIKEY`): it names a credential as often as a sort, cache, partition or primary key, so
    only a token-shaped value goes (`_token_shaped`). `KEY` alone and words ending in "key"
    (`MONKEY`, `hockey`) name none: a glued one counts only in an all-caps name of a setting."""
    if len(words) >= 2:
        return words[-1].lower() == "key"
    return len(words) == 1 and len(words[0]) > 4 and words[0].endswith("KEY") and words[0].isupper()


def _is_bare_key(key: str) -> bool:
    return not _GENERIC_KEY.search(key) and _bare_key(_words(key))


# What a generated key is made of: base64 (also URL-safe) letters, no dot (`uploads/a.png`), no
# colon (`user:123:profile`).
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_\-]{16,}")


def _token_shaped(value: str) -> bool:
    """Sixteen or more base64 characters that mix digits with both cases at a random's entropy,
    or a random run of letters: a sort key's column (`created_at`), a hex digest or a GPG
    fingerprint (one case), a UUID, a path, a timestamp or an f-string are no such run."""
    if not _TOKEN_CHARS.fullmatch(value) or "//" in value:
        return False
    has_digit, _, has_upper, has_lower = _char_kinds(value)
    return (has_digit and has_upper and has_lower and _looks_random(value)) or _has_random_run(value)


# Keys repeat (`password`, `api_key`, `token`): remember the short ones.
_short_key_strength = functools.lru_cache(maxsize=4096)(_key_strength)


_SHELL_DIRS = frozenset({"PWD", "OLDPWD"})


def _strength(key: str) -> int:
    return _short_key_strength(key) if len(key) <= 64 else _key_strength(key)


# Before a variable's name in a name and value pair: `- name: `, `"name": "`, `name = "`.
_NAME_BEFORE = re.compile(r"name[\"']?[ \t]*[:=][ \t]*[\"']?\Z")


def _generic_value_ok(m: re.Match[str]) -> bool:
    key = m.group("key")
    text, start = m.string, m.start()
    nv, q, tq, sp, bq = m.group("nv", "q", "tq", "sp", "bq")
    if nv is not None and not _NAME_BEFORE.search(text, max(0, start - 24), start):
        return False  # `value:` after a word that names no variable
    before = text[max(0, start - 3):start]
    if before.endswith(("://", "@", "${")):
        # A URL's user or host (`https://x-access-token:...@`): url rules decide; a placeholder's
        # variable and default (`${DB_PASSWORD:-x}`): placeholder-default decides.
        return False
    value = m.group("secret")
    quoted = q is not None or tq is not None
    if bq is not None:
        # ODBC's `{...}` quotes only in a connection string (`;Pwd={...};`); elsewhere braces hold
        # code: an object (`clientSecret:{type:"string"}`), JSX (`token={authToken}`), an f-string.
        if ("." in key or not _after_connection_field(text, start)
                or any(c in value for c in "\"':")):  # no object (`{name:n.name}`), no dotted key
            return False
        quoted = True
    if not quoted:
        between = text[m.end("key"):m.start("secret")]
        if sp is not None and not _properties_line(m, key, between):
            return False
        if value[0] == "*" and ":" in between and _is_code_name(value[1:]):
            return False  # a YAML alias (`password: *default_password`) refers to an anchored value
        # YAML's `!!str` tag makes the value a string as quotes do (`password: !!str s3cr3t`).
        quoted = "!!str" in between
    # In a connection string (`...;Password=Ceslvc083_.Aoash;...`) a value is a literal, as a
    # quoted one is: no code there names a variable, so `Ceslvc083_.Aoash` is no attribute path.
    connection = before.endswith(";") and text.startswith(";", m.end())
    strength = _strength(key)
    if m.group("cell") is not None and not _table_cell(m):
        return False
    if (m.group("arg") is not None or m.group("fb") is not None) and not _key_quoted_whole(m):
        return False  # `"/v1/messages/count_tokens", "..."`: the key is a part of a longer string
    if m.group("arg") is not None or m.group("fb") is not None:
        # `("password", "...")`: more often a list of names than a call that sets a value
        # (`fields = ("password", "passwordless")`), and `token || "anonymous"` a word: only a
        # random-looking literal goes (letters alone too when they are a random run).
        return (_assigned_value_ok(min(strength, 1), key, value, quoted=True)
                or (strength == 2 and _has_random_run(value) and not _is_placeholder(value)))
    if sp is not None and quoted and strength < 2:
        return False  # prose's "pass `strict_roots=False`": a quoted word after a space, no separator
    if tq is not None and strength < 2 and len(value.split()) > 1:
        return False  # `PASSWORD_HELP = """Use 12 characters or more."""`: prose, not a token
    if (quoted and strength == 2 and is_natural_word(value)
            and in_translation_table(text, m.start("secret"), m.end("secret"))):
        return False  # `"password": "Passwort"` in a locale file among `"forgot": "Passwort vergessen?"`
    if m.group("ext"):
        return _value_going_on_ok(m, strength, key, quoted=connection or quoted, connection=connection)
    return _assigned_value_ok(strength, key, value, quoted=connection or quoted,
                              connection=connection)


# A value that is a call in code: a name, `(`, then what starts an argument or the `)` (`get(a,`,
# `f()`, `os.getenv("X"`, `round(3.5,`), not a password's `p(4ssW0rd`.
_CALL = re.compile(r"[A-Za-z_$][\w$.]*\((?:[A-Za-z_$\"'\[{(*&@)\-]|\d+(?:\.\d+)?(?![\w.]))")
# No code glues a name or a number to a call's `)`: `Pa(ss)w0rd99` is a password.
_GLUED_AFTER_CALL = re.compile(r"\)[A-Za-z0-9]")


def _value_going_on_ok(m: re.Match[str], strength: int, key: str, *, quoted: bool, connection: bool) -> bool:
    """An unquoted value that goes on over `,` `;` `(` `)` `<` or `>` (see `_VALUE_GOES_ON` in
    prompts/secret_table.py): all of it is the secret when its first part alone is one (as it was
    taken before the value went on), or when the whole is no code: not a call (`get_token(a,`) and,
    after a name (`e.pw;return`), a random run or digits among both cases (`hunter;xK9pQ7vR2m`).
    A call's shape says nothing on a line that is only `KEY=value` or `key: value` (an env file,
    YAML): there `Abc(123)` is a password (`_literal_line`)."""
    value, ext = m.group("secret"), m.group("ext")
    head = value[:m.start("ext") - m.start("secret")]
    if ext[0] != "(" and _assigned_value_ok(strength, key, head, quoted=quoted, connection=connection):
        return True
    if _CALL.match(value) and not _GLUED_AFTER_CALL.search(value) and not _literal_line(m):
        return False
    if _is_reference(head) or _is_placeholder(head):
        has_digit, _, has_upper, has_lower = _char_kinds(value)
        if not (has_digit and has_upper and has_lower) and not _has_random_run(value):
            return False
    return _assigned_value_ok(strength, key, value, quoted=quoted, connection=connection)


# Before a key that starts a line of settings: indentation, a shell's `export` or `set`, a YAML
# or Compose list item.
_LINE_LEAD = re.compile(r"[ \t]*(?:(?:export|set|SET)[ \t]+|-[ \t]+)?\Z")
# A key of several words (`db_password`, `DB-PASSWORD`, `dbPassword`), not a word prose starts with.
_COMPOUND_KEY = re.compile(r"[A-Za-z0-9][_\-][A-Za-z]|[a-z][A-Z]")
_LINE_END = re.compile(r"[ \t]*(?:#[^\n]*)?(?:\r?\n|\Z)")


# A connection string's field before `;` (`Uid=sa`, `Driver={ODBC Driver 18 for SQL Server}`),
# at the end of the text before a key.
_CONNECTION_FIELD = re.compile(r"(?:^|[;\"'\s])[A-Za-z][\w .\-]{0,60}=(?:\{[^{}\n]{0,200}\}|[^;{}()\"'\n]){0,200};\Z")


def _after_connection_field(text: str, start: int) -> bool:
    """The key at `start` follows a `Key=Value;` field, as in an ODBC connection string (minified
    code's `...};this.apiKey={...}` follows a statement)."""
    return _CONNECTION_FIELD.search(text, max(0, start - 300), start) is not None


def _key_quoted_whole(m: re.Match[str]) -> bool:
    """A key closed by a quote opens with the same quote right before it (`"API_KEY", "..."`)."""
    closing = m.string[m.end("key"):m.start("secret")].lstrip(" \t")[:1]
    return closing not in "\"'" or (m.start() > 0 and m.string[m.start() - 1] == closing)


# After a table cell's value: the cell's end.
_CELL_END = re.compile(r"`?[ \t]*\|")


def _table_cell(m: re.Match[str]) -> bool:
    """`| DB_PASSWORD | value |`: the row starts its line with `|`, and the value is the whole next
    cell (`| password | The user's password |` is a description: its first word is no value)."""
    text, start = m.string, m.start()
    line_start = text.rfind("\n", 0, start) + 1
    lead = text[line_start:start].strip(" \t`")
    return lead.startswith("|") and "|" not in m.group("secret") and _CELL_END.match(text, m.end()) is not None


def _literal_line(m: re.Match[str]) -> bool:
    """The match is a whole line of settings: the key at the line's start, `=` glued to key and
    value (code puts spaces around it) or YAML's `:`, and the value up to the line's end. No
    language calls a function there (`DB_PASSWORD=Abc(123)` in an .env file, `password: Abc(123)`);
    `token: getToken(1),` in a JavaScript object goes on with a comma."""
    text, start = m.string, m.start()
    line_start = text.rfind("\n", 0, start) + 1
    if not _LINE_LEAD.match(text, line_start, start):  # (`\Z` holds at `endpos`)
        return False
    between = text[m.end("key"):m.start("secret")]
    if between not in ("=", ":") and not (between.startswith(":") and not between[1:].strip(" \t")):
        return False
    return _LINE_END.match(text, m.end()) is not None


def _properties_line(m: re.Match[str], key: str, between: str) -> bool:
    """A Java .properties line with a space for its separator (`db.password s3cr3t`): a dotted
    key alone at the line's start, spaces, the value, the line's end. Prose that starts a line
    with a credential word goes on with more words ("password reset link sent"), and its first
    word is no dotted key; a value that is a name stays as in any unquoted assignment.
    Also a Dockerfile's legacy `ENV DB_PASSWORD s3cr3t`, and an undotted key naming a password
    (`password s3cr3tValue9`, as a .properties file or a note of logins has it) when the value is
    random as no word of a sentence is: digits among both cases, or a random run of letters."""
    if between.strip(" \t"):
        return False
    line_start = m.string.rfind("\n", 0, m.start()) + 1
    before = m.string[line_start:m.start()].strip(" \t")
    if before.upper() == "ENV":
        return True
    if before:
        return False
    if "." in key.strip("."):
        return True
    if _strength(key) < 2:
        return False
    if _COMPOUND_KEY.search(key):
        # `db_password s3cr3tvalue9`, `dbPassword ...`: no sentence starts with such a word, so the
        # line is a setting, judged as `db_password=...` is (a digit-free word stays there too:
        # unquoted, it cannot be told from a reference).
        return True
    value = m.group("secret")
    has_digit, has_alpha, has_upper, has_lower = _char_kinds(value)
    # After a plain word (`password`, `Token`), prose may go on ("password reset123",
    # "Password rotation-2024"): digits among both cases, a random run, or digits inside a run of
    # letters as no word with a number after it has them (`s3cr3tvalue9`, `hunter2go`).
    return (has_digit and has_upper and has_lower) or _has_random_run(value) or (
        has_digit and has_alpha and not all(map(_WORDISH.fullmatch, _SEPARATORS.split(value))))


def _xml_value_ok(m: re.Match[str]) -> bool:
    """An element's text or value attribute, named by the element (`<password>`), by its key
    or name attribute (`<add key="ApiKey" value=...>`), whichever names a credential more surely,
    or by a property list's `<key>`: a literal, as a quoted value is."""
    tag, key = m.group("tag"), m.group("pkey") or m.group("key") or m.group("rkey")
    if key is None or _strength(tag) > _strength(key):
        key = tag
    return _assigned_value_ok(_strength(key), key, m.group("secret"), quoted=True)


def _yaml_block_ok(m: re.Match[str]) -> bool:
    """A YAML value on the lines below its key (see the `yaml-block-credential` rule): its text
    must be indented past the key, as YAML reads it (else the key's value is empty). A block
    scalar under a credential noun (`password: |`) is a literal whatever its shape, unless a
    template or variable stands there (`{{ .Values.password }}`); a plain scalar is judged as
    an assignment's unquoted value."""
    key, value = m.group("key"), m.group("secret")
    text = m.string
    if len(m.group("ind")) <= m.start() - text.rfind("\n", 0, m.start()) - 1:
        return False
    strength = _strength(key)
    if m.group("bar") is None:
        return _assigned_value_ok(strength, key, value, quoted=False)
    # An Ansible Vault block (`password: !vault |`) is ciphertext of the secret: it goes too.
    return strength == 2 and (value.startswith("$ANSIBLE_VAULT;") or not _is_placeholder(value, complete=False))


def _assigned_value_ok(strength: int, key: str, value: str, *, quoted: bool, connection: bool = False) -> bool:
    if not strength:
        return False
    if len(value) < 8 or _is_placeholder(value) or _TYPE_EXPR.fullmatch(value):
        return False
    strong = strength == 2
    if not quoted and _is_reference(value) and not (strong and _has_random_run(value)):
        # Unquoted, a name is a reference in code: `token = access_token`,
        # `PASSWD_MIN = argon2id.PASSWD_MIN`, `api_key=settings.OPENAI_KEY`.
        return False
    if _PATH.fullmatch(value) and (key in _SHELL_DIRS or not (strong and _looks_random(value))):
        # PWD=/home/me/src, TOKEN_ENDPOINT = "/v1/oauth/token"; the shell's PWD and OLDPWD hold
        # a directory whatever its name looks like (a workspace named by a hash).
        return False
    if strong:
        if not quoted:
            return True
        if connection and not _is_attribute_path(value) and not _mentions_credential(value):
            # Between a connection string's `;`s only an attribute path is code (`a=1;password=
            # this.props.password;b=2`): an all-caps key such as `NRAK-BRA72235AXUEKLXJIGVXLGW39DS`
            # would pass for a separated name (`"REFRESH_TOKEN"`).
            return True
        # Quoted, a name counts as code only when it is separated (`"ANTHROPIC_API_KEY"`,
        # `"refresh_token"`, `"id-token-data"`) or names a credential itself
        # (`"serviceAccountToken"`): `"password": "CorrectHorse"` is a literal password.
        # A value that mixes digits with both cases (`"oewwkw345_.Cm75L"`) is no such name.
        separated = any(c in value for c in "_.-")
        has_digit, _, has_upper, has_lower = _char_kinds(value)
        if has_digit and has_upper and has_lower and _looks_random(value):
            return True
        if _has_random_run(value):
            return True  # `"hHJpTmdWspnbtgcXZGjmDMsgNkKv-IaREUiN"`: a separator does not make a name
        return not (_is_code_name(value) and (separated or _mentions_credential(value)))
    if "://" in value or _is_code_name(value):
        return False  # token_url = "https://...", "secret_ref": "V1LocalObjectReference"
    if _is_bare_key(key) and not _token_shaped(value):
        return False  # `SORT_KEY=created_at`, `CACHE_KEY=a8f5f167f44f...`, `S3_KEY=uploads/a.png`
    return _looks_random(value)


def _has_random_run(value: str) -> bool:
    """The value, or one of its parts between `_`, `.` and `-`, is a random run of letters."""
    return _random_alnum(value) or (len(value) >= 16 and any(map(_random_alnum, _SEPARATORS.split(value))))


def _random_alnum(value: str) -> bool:
    """Sixteen or more letters (and digits), no separator, both cases mixed through the run as
    random text mixes them (`ESrzfldXWXijgfOboZzOGgvP`, `cxlii59KPsoMPbpDMPMN8`), not as a
    CamelCase name does (`XMLHttpRequestTarget`, `Ed25519PrivateKey`: each capital starts a
    word of lowercase letters)."""
    if len(value) < 16 or not value.isalnum() or not value.isascii():
        return False
    upper = sum(1 for c in value if c.isupper())
    # Capitals next to each other, or a single lowercase letter between two capitals.
    jumbled = len(re.findall(r"(?=[A-Z][A-Z][a-z]|[a-z][A-Z][a-z][A-Z])", value))
    return 0.25 <= upper / len(value) <= 0.75 and jumbled >= 3 and shannon_entropy(value) >= 4.0


# One part of an attribute path as programmers write it: snake_case, UPPER_SNAKE, or camel/Pascal
# case whose capitals start words (`Ed25519PrivateKey`, `XMLHttpRequest`, `V1Secret`, `getAPIKey`),
# after any leading underscores and never starting with a digit.
_CODE_PART = re.compile(
    r"_*(?=[A-Za-z])(?:[a-z][a-z0-9_]*|[A-Z][A-Z0-9_]*"
    r"|[a-z]*(?:[A-Z]{2,}(?=[A-Z][a-z])|[A-Z]+(?=\d|_|$)|[A-Z][a-z]+|\d+)+_?)")
_CASE_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


def _is_code_part(part: str) -> bool:
    """Random text drawn from letters, digits, `_` and `.` rarely has a code name's shape in every
    part: `UHpfxx056_` (one capital glued before a word), `_6PXEE` (a digit where a name starts),
    `INMdBF648` and `_txHsE` (camel case of two-letter words, where names average three or more),
    `hqnYN875` (digits among both cases with no word of four letters: a name with a version or a
    size holds a word, as `CoreV1Api`, `S3Spec`, `Point2D` and `Version24` do; none of 44,000
    dotted names in the installed packages lacks one)."""
    if _CODE_PART.fullmatch(part) is None:
        return False
    if part.islower() or part.isupper() or not any(c.isalpha() for c in part):
        return True
    words = _CASE_WORD.findall(part)
    if _DIGIT.search(part) and max(map(len, words)) < 4:
        return False
    return sum(map(len, words)) / len(words) >= 2.5


def _is_reference(value: str) -> bool:
    """An unquoted value that names something in code. A dotted one is judged part by part
    only: as a whole, `xBsdwf816._6PXEE` would pass for a name of several words."""
    if _ATTRIBUTE_PATH.fullmatch(value):
        return _is_attribute_path(value)
    return _is_code_name(value, dashes=False)


def _is_attribute_path(value: str) -> bool:
    """`settings.SECRET_KEY`, `argon2id.PASSWD_MIN`, `self.settings.password`: dotted names, each
    part shaped as code; `INMdBF648._txHsE`, `UHpfxx056_.YmVKx` and `xBsdwf816._6PXEE` are
    passwords with a dot in them."""
    return bool(_ATTRIBUTE_PATH.fullmatch(value)) and all(map(_is_code_part, value.split(".")))


def _phrase_value_ok(m: re.Match[str]) -> bool:
    """After `API key:` or `client secret is` in prose or a log: a random-looking value."""
    value = m.group("secret")
    has_digit, has_alpha, _, _ = _char_kinds(value)
    # Letters alone qualify when they are a random run (`hSeHZHjwpaFlxsPzbFIInPxbiXsluXzu`).
    return ((has_digit and has_alpha) or _random_alnum(value)) and not _is_placeholder(value) \
        and _looks_random(value)


def _prose_password_ok(m: re.Match[str]) -> bool:
    """After `the password is`: a random-looking value, not a word a sentence goes on with
    ("sha256-hashed", "Base64-encoded"); such words never put a capital right after a lowercase
    letter in a value with digits, as `JalmFw908-_Tuuun` does."""
    value = m.group("secret")
    return _phrase_value_ok(m) and (
        not _is_code_name(value) or bool(_DIGIT.search(value) and _LOWER_UPPER.search(value)))


def _aws_secret_ok(m: re.Match[str]) -> bool:
    """A secret access key mixes cases (a hex digest or a word run after a key id does not)."""
    _, _, has_upper, has_lower = _char_kinds(m.group("secret"))
    return has_upper and has_lower and _looks_random(m.group("secret"))


def _basic_auth_ok(m: re.Match[str]) -> bool:
    """Docker's `auth` is base64 of `user:password`."""
    try:
        decoded = base64.b64decode(m.group("secret"), validate=True)
    except (binascii.Error, ValueError):
        return False
    user, colon, password = decoded.partition(b":")
    return bool(colon and user and password) and decoded.isascii()


def _secret_data_ok(m: re.Match[str]) -> bool:
    """A Kubernetes Secret's `data` value: base64 of text (a password, a URL, a whole .env or
    JSON file). What decodes to bytes that are no text (a hash or a word read as base64, such
    as `resourceVersion: "12345678"`) is metadata, not data."""
    value = m.group("secret")
    if len(value) % 4:
        return False
    try:
        text = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return False
    return bool(text) and (text.isprintable() or all(c.isprintable() or c in "\r\n\t" for c in text))


def _bearer_value_ok(m: re.Match[str]) -> bool:
    value = m.group("secret")
    return not _is_placeholder(value) and _looks_random(value)


def _letters_and_digits(m: re.Match[str]) -> bool:
    # `sk-...` must not catch kebab-case words such as `sk-learn-compatible-estimator`.
    has_digit, has_alpha, _, _ = _char_kinds(m.group(0)[3:])
    return has_digit and has_alpha


def _not_placeholder(min_length: int, *, bound: int | None = None) -> Validator:
    """`bound`: the most characters the rule's pattern takes of a secret (it may be longer)."""
    def check(m: re.Match[str]) -> bool:
        value = m.group("secret")
        complete = bound is None or len(value) < bound
        return len(value) >= min_length and not _is_placeholder(value, complete=complete)

    return check


def _command_password_ok(m: re.Match[str]) -> bool:
    """A password a command line or a .netrc gives after its flag or word (`--db-password X`,
    `docker login -p X`, `mysql -pX`, `machine h login u password X`): not a reference
    (`$DB_PASSWORD`, `${{ secrets.X }}`, `<password>`, `-`, `****`), and not a plain word a
    sentence goes on with: a digit, a capital or a symbol among letters, or random text."""
    value = m.group("secret")
    if len(value) < 6 or value[0] in "$-<%{*(" or _is_placeholder(value):
        return False
    if _is_code_name(value, dashes=False) and not _looks_random(value):
        return False  # `--token-file token_path`, `password secret_name`
    has_digit, has_alpha, has_upper, has_lower = _char_kinds(value)
    symbol = not value.isalnum()
    return has_alpha and (has_digit or (has_upper and has_lower) or symbol)
