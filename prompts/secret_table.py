"""Our own rule table: the families gitleaks' formats do not cover the way we need (whole
PEM blocks, URL credentials and query values, authorization headers, generic assignments
with a value-shape check) and the context rules (a key id followed by its secret, Docker
config auths, connection strings). prompts/secret_rules.py adds gitleaks' provider formats.
"""

from __future__ import annotations

import re

from cardloop.prompts.csv_credentials import csv_credentials
from cardloop.prompts.key_format_rules import KEY_FORMAT_RULES
from cardloop.prompts.kube_secret_data import secret_data_values
from cardloop.prompts.kube_string_data import string_data_values
from cardloop.prompts.lazy_pattern import LazyPattern, compiled
from cardloop.prompts.redaction_rule import RedactionRule
from cardloop.prompts.secret_values import (
    _aws_secret_ok,
    _basic_auth_ok,
    _bearer_value_ok,
    _command_password_ok,
    _generic_value_ok,
    _letters_and_digits,
    _looks_random,
    _not_placeholder,
    _phrase_value_ok,
    _prose_password_ok,
    _secret_data_ok,
    _xml_value_ok,
    _yaml_block_ok,
)
from cardloop.prompts.syntax_values import _html_password_ok, _placeholder_default_ok, _terraform_default_ok
from cardloop.prompts.tool_secret_rules import TOOL_RULES, _url_secret_ok


def _token(prefix: str, width: int, body: str, *, after_dash: bool = False) -> LazyPattern:
    """`prefix` (`width` characters) then `body`, not glued on the left to more token
    characters; on the right the greedy `body` already consumes the rest of the token.
    `after_dash`: a `-` before the prefix is a separator (`backup-sk-ant-....json`, a file
    name or a kebab-case name around the token), for prefixes long or odd enough that no
    base64url or kebab-case run holds them by chance."""
    glue = "A-Za-z0-9_" if after_dash else "A-Za-z0-9_\\-"
    return LazyPattern(prefix + rf"(?<![{glue}].{{{width}}})" + body)


# Between a key and its value: an optional closing quote, then `=`, `:`, `:=` or `=>`, never
# `==` / `::`. Rules scan text whose escaped quotes are read as quotes with their backslashes
# as spaces before them (prompts/redact.py), so in JSON inside JSON (`{\\"password\\": ...}`) a
# space stands between a key and its closing quote: `_QUOTE_GAP` lets it, and `_KEY_CLOSE` is
# the closing quote with that gap, then spaces. (Not `_QUOTE_GAP` + `["']?[ \t]*`: with the quote
# optional, the two runs of spaces could split a run of spaces k ways, k^2 steps per failed try.)
_QUOTE_GAP = r"[ \t]{0,16}"
_KEY_CLOSE = rf"(?:{_QUOTE_GAP}[\"'])?[ \t]*"
_ASSIGN = _KEY_CLOSE + r"(?:=>|:=|:(?!:)|=(?!=))[ \t]*[\"']?"


# Anchors run with `finditer` over the lowercased text, so each must cost linear time there:
# bounded, or, when it reads the rest of an identifier, able to start only at the last
# occurrence of its word in that identifier (an earlier one sees the next ahead and stops,
# after reading just the gap), so "keykeykey..." is read once, not once per "key". A hit
# must not take in text after its identifier (check that with a lookahead), or the scan
# would resume past the next identifier and miss it.
_RUN = r"[a-z0-9_.\-]"


def _last_word(word: str, *, after: tuple[str, ...] = ()) -> str:
    """`word` (lowercase), optionally only right after one of `after`; then the check that no
    such word follows in the same identifier."""
    w = re.escape(word)
    if after:
        # First a quick look at the character before (or the one before a separator), so
        # that "keykeykey..." fails each hit in two tests, not one per prefix.
        lasts = re.escape("".join(sorted({a.rstrip("_-.")[-1] for a in after})))
        w += (rf"(?:(?<=[{lasts}]{w})|(?<=[{lasts}][_.\-]{w}))"
              "(?:" + "|".join(f"(?<={re.escape(a + word)})" for a in after) + ")")
    return f"{w}(?!{_RUN}*?{w})"


def _key_anchor(word: str, tail: str, *, after: tuple[str, ...] = ()) -> LazyPattern:
    """An identifier that holds `word`, then `tail` right after the identifier. The tail is a
    lookahead: a hit that took in what follows would hide the next identifier from the scan."""
    return LazyPattern(f"{_last_word(word, after=after)}{_RUN}*+(?={tail})")


# From the end of a variable's name to its value's `:` or `=`, in a name and value pair.
_NAME_VALUE = r",?[ \t]*(?:\r?\n[ \t]{0,80}(?:-[ \t]+)?)?[\"']?value[\"']?[ \t]*[:=](?!=)"
# A YAML node's anchor or tag before its value (`&pw`, `!!str`, `!vault`), after the `:`.
_YAML_PROPS = r"(?:[ \t]+[&!][^\s]{0,100}+)"
# After the key's identifier: an optional closing quote, `=` or `:`, then six value
# characters (every rule that uses it needs at least that many) or a Python annotation
# followed by `=`. The value check keeps `token_count=12` or `key=foo` in a log from
# costing a `match` each.
_KEY_TAIL = (
    _KEY_CLOSE
    + r"(?:(?:=>|:=|[=:])[ \t]*[bru]{0,2}\\?[\"'`]?[^\s\"'`]{6}|:[ \t]*[a-z_][\w.\[\], |]{0,60}?="
    # A YAML key whose value starts on the next line (a block scalar `password: |`, or a plain
    # scalar indented below its key): `yaml-block-credential` tries these hits.
    + r"|:[ \t]*(?:[|>][1-9+\-]{0,2}[ \t]*)?(?:#[^\n]*)?\r?\n"
    # The name of a name and value pair (`generic-assignment`).
    + r"|" + _NAME_VALUE
    # A .properties line whose key and value are apart by spaces alone (`db.password s3cr3t`).
    + r"|(?<=[ \t])[^\s]{6,500}+[ \t]*(?![^\r\n])"
    # A multi-line string (`password = """`), its value maybe on the next line.
    + r"|=[ \t]*(?:\"\"\"|''')"
    # A YAML value after an anchor or a tag (`password: &pw s3cr3t`, `token: !vault |`).
    + r"|:" + _YAML_PROPS + r"{1,2}[ \t\r\n]"
    # A quoted key as a subscript (`os.environ["API_KEY"] = ...`, `ENV["X"] ||= ...`) or as a call's
    # first argument before its value (`define("AUTH_KEY", "...")`, `os.Setenv("TOKEN", "...")`).
    + r"|\][ \t]*(?:\|\||\?\?)?=(?!=)|,[ \t]*[\"'][^\s\"'`]{6}"
    # A literal as a lookup's fallback: `getenv("API_KEY") ?? "..."`, `... || '...'`, `... or "..."`.
    + r"|[)\]]?[ \t]*(?:\?\?|\|\||\?:|or[ \t])[ \t]*[\"'][^\s\"'`]{6}"
    # A Markdown table's row: `| DB_PASSWORD | s3cr3t |`.
    + r"|`?[ \t]*\|[ \t]*`?[^\s|`]{6}"
    + ")"
)
# What `_GENERIC_KEY` accepts, one literal-first anchor per word (a literal start keeps the
# scan a fast substring search).
_GENERIC_ANCHORS = (
    *(_key_anchor(w, _KEY_TAIL) for w in ("secret", "token", "pwd", "credential", "passwd",
                                          "password", "passphrase", "creds", "psk")),
    # `key` as the last word of a longer identifier (`api_key`, `OPENAI_KEY`, `serviceKey`, an
    # env file's `OPENAIKEY`), not alone (`key=`, `for key in`): `_key_strength` tells a credential's
    # name (`private_key`) from a bare `*_KEY`, whose value must be token-shaped.
    LazyPattern(rf"key(?<=[a-z0-9_.\-]key)(?!{_RUN}*?key){_RUN}*+(?={_KEY_TAIL})"),
    # `pass` as a word of its own (`DB_PASS`, `pass:`): the `pass` of `password`, `passwd` and
    # `passphrase` fails at once, their own anchors hit there (one tail check per key, not two).
    LazyPattern(f"pass(?!w|phrase){_last_word('pass')[4:]}{_RUN}*+(?={_KEY_TAIL})"),
)
_QUERY_KEYS = (
    r"access_token|refresh_token|id_token|auth_token|token|api_key"
    r"|apikey|api-key|key|sig|signature|x-amz-signature|x-amz-credential"
    r"|x-amz-security-token|x-goog-signature|x-goog-credential|client_secret"
    r"|password|passwd|secret"
)

# The most characters of a query value the pattern reads; a longer one is extended whole.
_QUERY_VALUE_BOUND = 64
# `\s` spelled out: `re` tests a class of plain characters faster than a Unicode category,
# and these classes read up to 500 characters per candidate (tests check the list).
_SPACE = "\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_UNQUOTED_VALUE = rf"[^{_SPACE}\"'`,;&(){{}}\[\]<>\\]"
_QUOTED_VALUE = rf"[^{_SPACE}\"'`\\]"
# An element's text that can be one secret: no whitespace, markup or quote.
_XML_TEXT = rf"[^{_SPACE}<>\"'`]"
_QUERY_VALUE = rf"[^{_SPACE}&#'\"<>]"
_GENERIC_REACH = 70
# An unquoted value's characters stop at `,` `;` `(` `)` `<` `>`, where code and connection strings
# end a value (`f(password=pw, user=u)`, `Password=x;Database=y`, `<td>token=...</td>`); a password
# may hold them too (`password=Ab3;xK9pQ7vR2m`, `DB_PASSWORD=p(4ssW0rd,xyz`), and the part after
# one was left readable (or the whole value, its first part being too short to judge). So the
# value goes on over such a character when more of the value follows it: no whitespace, quote or
# other stop, no `key=` or `key:` pair (the next field of a connection string, list or call),
# no tag (`</td>`, `<br/>`). `_generic_value_ok` then judges the whole value, a call or a
# statement that follows a name being code. At most 16 parts of 64 characters: bounded work per
# candidate; a value with more parts, or a longer part, is extended whole (`tail` and
# `_STOP_GOES_ON` as the rule's `tail_over`: a password with 17 `;` in it lost only its head).
# A lone `)` or `>` that ends the value (`p<4ssW0rd>`, `Abc(123)`) is its last character too
# (`close`): it was left after the marker. Only after a part that went on (`ext`), and only
# before whitespace, a quote or the end: `f(password=pw)` keeps its `)`.
_STOP_GOES_ON = (
    r"(?:[,;()>]|<(?![/!?]|[A-Za-z][\w.:\-]{0,60}+(?:/?>|[ \t]+[\w:\-]+=)))"
    r"(?![\w.\- ]{1,100}+[=:])"
)
_VALUE_GOES_ON = (
    rf"(?P<ext>(?:{_STOP_GOES_ON}[^{_SPACE}\"'`,;&(){{}}\[\]<>\\]{{1,64}}+){{1,16}}+)?"
    rf"(?P<close>(?(ext)[)>](?=[{_SPACE}\"'`]|\Z)|(?!)))?"
)
# Text that declares a Kubernetes Secret: a manifest, kubectl's YAML or JSON, compact JSON (the
# `last-applied-configuration` annotation kubectl apply leaves on the object).
# Inside a JSON string (a tool result quoting it), in the redactor's view of escaped quotes:
# `"kind ":  "secret`, `"kind ": "secret` (prompts/redact.py, `_unescaped_same_length`).
_SECRET_KIND = ("kind: secret", '"kind": "secret"', '"kind":"secret"', '"kind ":  "secret', '"kind ": "secret')

# One value of a `data` block: a YAML line (`  key: base64`) or a JSON pair (`"key": "base64"`).
_SECRET_DATA_PAIR = LazyPattern(
    r"(?:^[ \t]+[\w.\-]{1,253}[ \t]*:|\"[\w.\-]{1,253}" + _QUOTE_GAP + r"\"[ \t]*:)[ \t]*(?P<q>[\"']?)"
    r"(?P<secret>[A-Za-z0-9+/]{4,}={0,2})(?(q)" + _QUOTE_GAP + r"(?P=q))(?=[ \t]*(?:[,}\r\n]|$))",
    re.MULTILINE,
)

DEFAULT_RULES: tuple[RedactionRule, ...] = (
    RedactionRule(
        "private-key",
        LazyPattern(
            r"-----BEGIN[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----|.*)",
            re.DOTALL,
        ),
    ),
    # JSON Web Keys' private members, PuTTY key files (prompts/key_format_rules.py).
    *KEY_FORMAT_RULES,
    RedactionRule("anthropic-api-key", _token("sk-ant-", 7, r"[A-Za-z0-9_\-]{20,}", after_dash=True)),
    RedactionRule(
        "openai-api-key",
        _token("sk-", 3, r"(?!ant-)[A-Za-z0-9_\-]{20,}"),
        validator=_letters_and_digits,
    ),
    RedactionRule("github-pat", _token("github_pat_", 11, r"[A-Za-z0-9_]{22,}", after_dash=True)),
    RedactionRule("github-token", _token("gh[pousr]_", 4, r"[A-Za-z0-9]{36,}", after_dash=True)),
    RedactionRule(
        "aws-access-key-id",
        LazyPattern(
            r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])(?<![A-Za-z0-9].{4})[A-Z0-9]{16}(?![A-Za-z0-9])"
        ),
    ),
    RedactionRule(
        "aws-secret-access-key",
        LazyPattern(
            r"(?i:(?:aws[_.\-]?)?secret[_.\-]?access[_.\-]?key|aws[_.\-]?secret[_.\-]?key)"
            + _ASSIGN
            + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        group="secret",
        anchors=(_key_anchor("secret", _KEY_TAIL),),
    ),
    # A key id with its secret right after it, no label between (pasted from a console): both
    # go, as one span.
    RedactionRule(
        "aws-credentials",
        LazyPattern(
            r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])(?<![A-Za-z0-9].{4})[A-Z0-9]{16}"
            r"(?:[\s,;:|=\"'`]|\\[nrt]){1,12}"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        validator=_aws_secret_ok,
    ),
    # The console's and the CLI's own labels, with no `=` or `:` after them: "Secret access key
    # <secret>" (the console's key page, pasted), `aws configure set aws_secret_access_key <secret>`.
    RedactionRule(
        "aws-secret-labelled",
        LazyPattern(
            r"(?i:(?:aws[_.\- ]?)?secret[_.\- ]?access[_.\- ]?key)[\"'`]?(?:[ \t]+|[ \t]*\r?\n[ \t]*)[\"'`]?"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        group="secret",
        validator=_aws_secret_ok,
        anchors=(LazyPattern(r"secret[_.\- ]?access[_.\- ]?key(?=[\"'`]?\s+[\"'`]?[a-z0-9/+]{40})"),),
    ),
    # A key id, then its secret within a line or two of prose ("key AKIA... with secret ...",
    # "Access key ID ... / Secret access key ..."): the first 40-character run after the id that
    # mixes cases like a secret (a commit SHA or a word does not). The id has its own rule.
    RedactionRule(
        "aws-secret-near-key-id",
        LazyPattern(
            r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])(?<![A-Za-z0-9].{4})[A-Z0-9]{16}(?![A-Za-z0-9])"
            r"(?:[^\n]|\n(?![ \t]*\n)){1,160}?"
            r"(?<![A-Za-z0-9/+])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        group="secret",
        validator=_aws_secret_ok,
    ),
    # Azure storage and service bus connection strings: `...;AccountKey=<base64>;...`.
    RedactionRule(
        "azure-connection-key",
        LazyPattern(r"(?i:AccountKey|SharedAccessKey)[ \t]*=[ \t]*(?P<secret>[A-Za-z0-9+/]{20,}={0,2})"),
        group="secret",
        # One literal-first anchor per word: a scan for a literal is fast, an alternation is not.
        anchors=tuple(LazyPattern(w + r"(?=[ \t]*=[ \t]*[a-z0-9+/]{20})") for w in ("accountkey", "sharedaccesskey")),
    ),
    # A Docker config.json's `"auth": "<base64 of user:password>"`.
    RedactionRule(
        "docker-config-auth",
        LazyPattern(r'"auth"[ \t]*:[ \t]*"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})"'),
        group="secret",
        validator=_basic_auth_ok,
    ),
    # An .npmrc's `_auth=<base64 of user:password>` (`//registry.acme.com/:_auth=...` too).
    RedactionRule(
        "npmrc-auth",
        LazyPattern(r"_auth(?<![A-Za-z0-9_.\-]_auth)[ \t]*=[ \t]*[\"']?"
                   r"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
        group="secret",
        validator=_basic_auth_ok,
    ),
    # Prose and log lines: `API key: ...`, `client secret is ...`, `auth token = ...`.
    RedactionRule(
        "credential-phrase",
        LazyPattern(
            r"(?i:api|access|secret|private|client|auth)[ \t]+(?i:keys?|secrets?|tokens?)"
            r"[ \t]*(?:(?i:is)[ \t]+|[:=][ \t]*)[\"'`]?"
            r"(?P<secret>[A-Za-z0-9+/_.~\-]{12,200}={0,2})(?![A-Za-z0-9+/_.~\-])"
        ),
        group="secret",
        validator=_phrase_value_ok,
        anchors=tuple(LazyPattern(w + r"[ \t]+(?:keys?|secrets?|tokens?)(?=[ \t]*(?:is[ \t]|[:=]))")
                      for w in ("api", "access", "secret", "private", "client", "auth")),
    ),
    # One credential word in prose: "the secret is <value>", "my token was <value>", "the creds are <value>".
    # One literal-first anchor per word: a scan for a literal is fast, an alternation is not.
    RedactionRule(
        "credential-is",
        LazyPattern(
            r"(?i:secret|token|keys?|credentials?|creds)[ \t]+(?i:is|was|are|were)[ \t]+[\"'`]?"
            # A sentence's full stop after the value is not part of it.
            r"(?P<secret>[A-Za-z0-9+/_.~\-]{11,199}[A-Za-z0-9+/_~\-]={0,2})(?![A-Za-z0-9+/_~\-]|\.[A-Za-z0-9])"
        ),
        group="secret",
        validator=_phrase_value_ok,
        anchors=tuple(LazyPattern(w + r"[ \t]+(?:is|was|are|were)[ \t]+[\"'`]?[a-z0-9+/_.~\-]{12}")
                      for w in ("secret", "token", "keys?", "credentials?", "creds")),
    ),
    # A password in prose may hold any visible character: "the password is FOHcqW595##cuQlE."
    RedactionRule(
        "password-is",
        LazyPattern(
            r"(?i:password|passwd|passphrase|pwd)[ \t]+(?i:is|was)[ \t]+[\"'`]?"
            r"(?P<secret>[^\s\"'`<>]{7,199}[^\s\"'`<>.,;:!?)\]])(?=[.,;:!?)\]]*(?:[\s\"'`<>]|$))"
        ),
        group="secret",
        validator=_prose_password_ok,
        anchors=tuple(LazyPattern(w + r"[ \t]+(?:is|was)[ \t]+[\"'`]?[^\s\"'`<>]{8}")
                      for w in ("passw(?:or)?d", "passphrase", "pwd")),
    ),
    RedactionRule(
        "stripe-api-key",
        # Tried at the start of the identifier run that holds the anchor's hit, which may begin
        # with a name before the key (`backup-sk_live_....tar.gz`, `acme.rk_test_...`).
        LazyPattern(r"(?:[A-Za-z0-9_.\-]{0,200}?[.\-])?(?P<secret>[sr]k_(?:live|test|prod)_[A-Za-z0-9]{16,})"),
        group="secret",
        anchors=(LazyPattern(r"k_(?:live|test|prod)_"),),
    ),
    RedactionRule(
        "slack-webhook-url",
        LazyPattern(r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+\-]+"),
    ),
    RedactionRule("slack-token", _token("x(?:ox[abeoprs]|app)-", 5, r"[A-Za-z0-9\-]{10,}")),
    RedactionRule("google-api-key", _token("AIza", 4, r"[A-Za-z0-9_\-]{35}")),
    # cardloop's own tenant API tokens: "cl_" + 43 URL-safe characters (secrets.token_urlsafe(32)).
    RedactionRule("cardloop-api-token", _token("cl_", 3, r"[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])"),
                  validator=lambda m: _looks_random(m.group(0)[3:])),
    RedactionRule(
        "jwt",
        _token("eyJ", 3, r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
    ),
    RedactionRule(
        "url-credentials",
        # Starts at "://" so the scan is a fast literal search; scheme and user stay visible.
        # The password class allows "@" and backtracks to the last one before the host; and "#",
        # which a URL should escape but a password typed into one holds as it is (`ci:ab#cd@host`).
        # A user with no password is a token when it looks random (`https://<token>@github.com/`,
        # as GitHub and Bitbucket take one): `_url_secret_ok`. (One rule, one scan of `://`.)
        LazyPattern(r"://(?P<user>[^\s:/?#@'\"<>]*:)?(?P<secret>[^\s/?'\"<>]+)@(?=[A-Za-z0-9\[])"),
        group="secret",
        validator=_url_secret_ok,
    ),
    RedactionRule(
        "url-query-secret",
        LazyPattern(
            rf"[?&#](?i:{_QUERY_KEYS})=(?P<secret>{_QUERY_VALUE}{{1,{_QUERY_VALUE_BOUND}}})"
        ),
        group="secret",
        validator=_not_placeholder(6, bound=_QUERY_VALUE_BOUND),
        # A hit is the `?`, `&` or `#` itself, which is where the pattern starts.
        anchors=(LazyPattern(rf"[?&#](?=(?:{_QUERY_KEYS})={_QUERY_VALUE})"),),
        # Every query key above holds one of these: the rule is skipped for a text with none
        # (its anchor starts with a class, which gives prompts/rule_gates.py no literal).
        keywords=("token", "key", "sig", "credential", "secret", "passw"),
        # `?`, keyword, `=` and value are all `tail` characters, so a match that starts
        # inside an accepted value ends where that value's run ends: inside it.
        tail=_QUERY_VALUE,
        reach=0,
    ),
    RedactionRule(
        "authorization-header",
        LazyPattern(
            r"(?i:(?:proxy-)?authorization)" + _ASSIGN
            + r"(?i:bearer|basic|token|bot|apikey|api-key|sso-key)[ \t]+"
            r"(?P<secret>[A-Za-z0-9._~+/\-]{6,}=*)"
        ),
        group="secret",
        # Its own tail: the scheme after the colon (`Basic`, `Bot`) is shorter than six.
        anchors=(_key_anchor("authorization", _KEY_CLOSE + r"[=:]"),),
    ),
    RedactionRule(
        "bearer-token",
        LazyPattern(r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)"),
        group="secret",
        validator=_bearer_value_ok,
        anchors=(LazyPattern(r"bearer(?=[ \t]+[a-z0-9._~+/\-]{16})"),),
    ),
    # Command lines (CI logs, a tool's output, a script in the repository) and .netrc: the
    # password after its flag or word, where no `=` or `:` marks it as a value.
    RedactionRule(
        "command-line-password",
        LazyPattern(r"--[A-Za-z0-9\-]{0,40}?(?i:password|passwd|token|secret|api-?key|access-key)[ \t]+"
                   r"(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        keywords=("password", "passwd", "token", "secret", "apikey", "api-key", "access-key"),
        tail=r"[^\s\"'`]",
    ),
    RedactionRule(
        "command-login-password",
        # docker / podman / helm registry / oc / cf login ... -p X; .netrc's login U password X,
        # on one line or on the line after the login's (`machine h` / `  login u` / `  password X`).
        LazyPattern(r"login\b[^\n]{0,200}?(?:[ \t]-p|[ \t]--password|(?:[ \t]|\n[ \t]*)password)[ \t]+"
                   r"(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        tail=r"[^\s\"'`]",
    ),
    RedactionRule(
        "mysql-password-flag",
        # mysql, mysqldump, mysqladmin ... -pSECRET (glued: `-p SECRET` makes mysql prompt).
        LazyPattern(r"mysql[a-z]{0,6}[ \t][^\n]{0,200}?[ \t]-p(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        tail=r"[^\s\"'`]",
    ),
    RedactionRule(
        "sshpass-password",
        LazyPattern(r"sshpass[ \t]+-p[ \t]*(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        tail=r"[^\s\"'`]",
    ),
    RedactionRule(
        "redis-cli-password",
        LazyPattern(r"redis-cli[ \t](?:[^\n]{0,200}?[ \t])?-a[ \t]+(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        tail=r"[^\s\"'`]",
    ),
    # Redis's own configuration and command line: `requirepass X`, `masterauth X` (redis.conf,
    # `redis-server --requirepass X`, `CONFIG SET requirepass X`).
    RedactionRule(
        "redis-config-password",
        LazyPattern(r"(?:requirepass(?<![A-Za-z0-9_].{11})|masterauth(?<![A-Za-z0-9_].{10}))[ \t]+"
                   r"(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        keywords=("requirepass", "masterauth"),
        tail=r"[^\s\"'`]",
    ),
    # Java's keytool and jarsigner: `-storepass X`, `-keypass X`, `-srcstorepass X`, `-deststorepass X`,
    # `-new X` after them (`-storepass:env VAR` and `:file` name no literal).
    RedactionRule(
        "keytool-password",
        LazyPattern(r"-(?:src|dest)?(?:store|key)pass[ \t]+(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        keywords=("storepass", "keypass"),
        tail=r"[^\s\"'`]",
    ),
    # htpasswd's batch mode (`-b`): the password is the last argument, after the file and the user
    # (`htpasswd -bc .htpasswd admin X`), or after the user alone with `-n` (`htpasswd -nb admin X`).
    RedactionRule(
        "htpasswd-password",
        LazyPattern(r"htpasswd[ \t]+(?:-[A-Za-mo-z]*b[A-Za-mo-z]*[ \t]+[^\s\-][^\s]*"
                   r"|-[A-Za-z]*(?:n[A-Za-z]*b|b[A-Za-z]*n)[A-Za-z]*)"
                   r"[ \t]+[^\s\-][^\s]*[ \t]+(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        tail=r"[^\s\"'`]",
    ),
    # A password piped into a login that reads it from its input: `echo X | docker login -u u
    # --password-stdin`, `printf %s X | ...` (a variable there, `echo "$TOKEN" | ...`, stays).
    RedactionRule(
        "piped-password",
        LazyPattern(r"(?:echo(?<![A-Za-z0-9_\-].{4})|printf(?<![A-Za-z0-9_\-].{6}))[ \t]+"
                   r"(?:-[neE]{1,3}[ \t]+|[\"']?%s(?:\\n)?[\"']?[ \t]+)?"
                   r"(?P<q>[\"'])?(?P<secret>[^\s\"'`|;&]{1,500})(?(q)(?P=q))[ \t]*\|[^\n|]{0,200}?--password-stdin"),
        group="secret",
        validator=_command_password_ok,
        keywords=("password-stdin",),
        # Literal-first anchors: a scan for `echo|printf` as an alternation reads every character.
        anchors=(LazyPattern(r"echo(?=[ \t])"), LazyPattern(r"printf(?=[ \t])")),
    ),
    # Tools' own syntaxes beyond these (prompts/tool_secret_rules.py): single-dash parameters, short
    # flags, `user%X`, positional passwords, `config set`, here-strings, basic-auth calls,
    # ipsec.secrets, chat webhooks, session cookies.
    *TOOL_RULES,
    # PowerShell: `ConvertTo-SecureString "X" -AsPlainText -Force` (any case, as PowerShell reads it).
    RedactionRule(
        "powershell-secure-string",
        LazyPattern(r"(?i:convertto-securestring)[ \t]+(?:-(?i:string)[ \t]+)?"
                   r"(?P<q>[\"'])(?P<secret>[^\"'\r\n]{1,500})(?P=q)"),
        group="secret",
        validator=_command_password_ok,
        anchors=(LazyPattern(r"convertto-securestring(?=[ \t])"),),
    ),
    # XML and HTML-like configuration, in one pass over the `<`s of a text (one rule, not one per
    # form: each would scan every `<` again; and no keyword such as `</`: a substring check for
    # it costs more than the scan it would spare):
    # - an element named for a credential: `<password>s3cr3t</password>` (Maven's settings.xml
    #   servers, Spring and Tomcat files, SOAP bodies), with or without a namespace, attributes
    #   (`<password encrypted="false">`), indentation around the text or a CDATA section;
    # - an element whose key or name attribute names one: .NET's `<add key="ApiKey"
    #   value="..."/>`, Spring's `<property name="password" value="..."/>`, Java properties'
    #   `<entry key="db.password">...</entry>`; also with the value first (`<add value="..." key="ApiKey"/>`);
    # - a macOS or iOS property list's `<key>Password</key>` and the `<string>` after it.
    # The text or value is a literal as a quoted value is; the assignments' value check decides.
    RedactionRule(
        "xml-credential",
        LazyPattern(
            r"<(?P<tag>[A-Za-z_][\w.:\-]{0,60})(?:"
            r"(?<=<key)>(?P<pkey>[A-Za-z0-9_.:\-]{1,80})</key>[ \t\r\n]{0,80}<string>"
            r"|[ \t\r\n]+(?:key|name)[ \t]*=[ \t]*(?P<kq>[\"'])(?P<key>[A-Za-z0-9_.:\-]{1,80})" + _QUOTE_GAP
            + r"(?P=kq)(?:[ \t\r\n]+value[ \t]*=[ \t]*(?P<q>[\"'])|[^<>]{0,200}?(?<!/)>[ \t\r\n]{0,80})"
            # The value first, its key or name after it: `<add value="..." key="ApiKey"/>`.
            r"|[ \t\r\n]+value[ \t]*=[ \t]*(?P<rq>[\"'])"
            r"|(?:[ \t\r\n][^<>]{0,200}?)?(?<!/)>[ \t\r\n]{0,80}(?:<!\[CDATA\[)?)"
            # .NET's applicationSettings: `<setting name="ApiKey" ...><value>...</value></setting>`.
            r"(?P<vt><value>[ \t\r\n]{0,80})?"
            rf"(?P<secret>(?(q){_QUOTED_VALUE}{{1,500}}|(?(rq){_QUOTED_VALUE}{{1,500}}|{_XML_TEXT}{{1,500}})))"
            r"(?(q)" + _QUOTE_GAP + r"(?P=q)|(?(rq)" + _QUOTE_GAP + r"(?P=rq)[ \t\r\n]+(?:key|name)[ \t]*=[ \t]*"
            r"(?P<rkq>[\"'])(?P<rkey>[A-Za-z0-9_.:\-]{1,80})" + _QUOTE_GAP + r"(?P=rkq)"
            r"|(?(pkey)</string>|(?:\]\]>)?[ \t\r\n]{0,80}(?(vt)</value>[ \t\r\n]{0,80})</(?P=tag)>)))"
        ),
        group="secret",
        validator=_xml_value_ok,
    ),
    # An HTML password field filled in by the page: `<input type="password" value="...">`, the
    # attributes in any order (a saved page, a test fixture, a rendered form in a log), in any
    # case (HTML's names are: `<INPUT TYPE="PASSWORD" VALUE=...>` from an old page or generator).
    # The anchor, `<input` in the lowercased text, gates the rule to texts that hold one; each
    # attempt reads one tag (at most 500 characters, no `<` or `>` inside).
    RedactionRule(
        "html-password-input",
        LazyPattern(
            r"<(?i:input)(?=[^<>]{0,500}?[ \t\r\n](?i:type)[ \t]*=[ \t]*[\"']?(?i:password)(?![\w\-]))"
            r"[^<>]{0,500}?[ \t\r\n](?i:value)[ \t]*=[ \t]*(?P<q>[\"'])?"
            r"(?P<secret>(?(q)(?:(?!(?P=q))[^<>\r\n]){1,500}|[^\s\"'<>`=]{1,500}))(?(q)(?P=q)|(?![^\s/>]))"
        ),
        group="secret",
        validator=_html_password_ok,
        anchors=(LazyPattern(r"<input(?=[ \t\r\n])"),),
    ),
    # A PostgreSQL password file's line, `host:port:database:user:password` (`*` for any
    # field), in text that names .pgpass or PGPASSFILE: elsewhere, colon-separated lines are
    # ordinary (timestamps, /etc/passwd, log prefixes). A line starts at a line's or a word's
    # start (`echo "h:5432:db:u:pw" > ~/.pgpass`), so attempts never start inside a word.
    RedactionRule(
        "pgpass-password",
        LazyPattern(
            # A colon in a field is escaped (`\:`), as the file's format asks: an IPv6 host is
            # `\:\:1`, a password may hold `\:`.
            r"(?<![^\s\"'`])(?:[^:\\\s#\"'`]|\\.){1,255}:(?:\d{1,5}|\*)"
            r":(?:[^:\\\s\"'`]|\\.){1,255}:(?:[^:\\\s\"'`]|\\.){1,255}:"
            r"(?P<secret>(?:[^:\\\s\"'`]|\\.){1,500})(?![^\s\"'`])"
        ),
        group="secret",
        validator=_not_placeholder(4),
        keywords=("pgpass",),
    ),
    # A Kubernetes Secret's `data` (kubectl get secret -o yaml / -o json, a manifest in the
    # repository): every value is base64 of a secret, under any key (`DATABASE_URL`, `.env`,
    # `config.json`), so the key's name cannot tell it, nor the value's shape once encoded. Only
    # under the `data` key of an object of that kind (prompts/kube_secret_data.py finds the
    # blocks); elsewhere base64 values are images, hashes, sourcemaps and a ConfigMap's data.
    RedactionRule(
        "kubernetes-secret-data",
        _SECRET_DATA_PAIR,
        keywords=_SECRET_KIND,
        finder=lambda text, _lowered: secret_data_values(text, compiled(_SECRET_DATA_PAIR), _secret_data_ok),
    ),
    # Its `stringData`: plain text under any key (prompts/kube_string_data.py finds the values).
    RedactionRule(
        "kubernetes-secret-string-data",
        LazyPattern(r"stringData"),
        keywords=_SECRET_KIND,
        finder=lambda text, _lowered: string_data_values(text),
    ),
    # Delimited text (prompts/csv_credentials.py): the credential columns of a CSV under its header
    # (`username,password` then `bob,...`) and a `db_password,...` line; unquoted, no `=` or `:`.
    RedactionRule(
        "csv-credential",
        LazyPattern(r"(?:password|secret|token|key)[,;\t]"),
        keywords=tuple(w + d for w in ("passwd", "password", "pwd", "pass", "secret", "token", "phrase",
                                       "credential", "credentials", "creds", "psk", "key")
                       for d in (",", ";", "\t", "\r", "\n", "\"", "'")),
        finder=csv_credentials,
    ),
    # A YAML value that starts on the line below its credential key: a block scalar (`password: |`,
    # `private_key: >-`, `token: |-`) loses every line of its text, as one span; a plain scalar
    # indented below the key (`password:` then `  s3cr3t`) is judged as an assignment's value. The
    # text is the lines indented like its first line (blank lines between them too); a key in a
    # list item (`- password: |`) needs its text indented past the key, as YAML does.
    RedactionRule(
        "yaml-block-credential",
        LazyPattern(
            r"(?P<key>[A-Za-z0-9_.\-]++)" + _KEY_CLOSE
            + r":" + _YAML_PROPS + r"{0,2}"
            r"[ \t]*(?:(?P<bar>[|>])[1-9+\-]{0,2}[ \t]*)?(?:#[^\n]*)?\r?\n(?:[ \t]*\r?\n){0,20}"
            r"(?P<ind>[ ]{1,200})(?P<secret>(?(bar)[^\s][^\n]*(?:(?:\n[ \t]*)*\n(?P=ind)[^\n]*)*"
            # A plain scalar: one word, not a mapping's key, a list item, an anchor, alias or tag.
            r"|(?![\-?:,\[\]{}#&*!|>%@`'\"])[^\s]{1,500}(?<!:)(?=[ \t]*(?:#[^\n]*)?(?:\r?\n|\Z))))"
        ),
        group="secret",
        validator=_yaml_block_ok,
        anchors=_GENERIC_ANCHORS,
        multiline=True,
        # The text of a block holds only lines indented like its first: a key inside it opens a
        # block of its own inside it (more indented, ending no later); a plain value has no `:`
        # before its end.
        reach=0,
    ),
    # SQL that sets a password: `CREATE ROLE app WITH LOGIN PASSWORD '...'`, `ALTER USER app
    # PASSWORD '...'` (PostgreSQL), `IDENTIFIED BY '...'` (MySQL, Oracle), in migrations and logs.
    RedactionRule(
        "sql-password",
        LazyPattern(
            r"(?i:password|identified[ \t]+(?:with[ \t]+[A-Za-z0-9_]{1,40}[ \t]+)?by)[ \t]+'"
            r"(?P<secret>(?:[^'\n\\]|''){1,500})'"
        ),
        group="secret",
        validator=_not_placeholder(6),
        anchors=(LazyPattern(r"password(?=[ \t]+'(?:[^'\n]|''){6})"),
                 LazyPattern(r"identified(?=[ \t]+(?:with[ \t]+[a-z0-9_]{1,40}[ \t]+)?by[ \t]+'(?:[^'\n]|''){6})")),
    ),
    # A default inside a placeholder: `${DB_PASSWORD:-s3cr3t}`, `${API_TOKEN-s3cr3t}`, `${VAR:=...}`
    # (shell, Compose) or Spring's `${db.password:s3cr3t}`, and the shell's alternate value
    # (`${DB_PASSWORD:+s3cr3t}`, `${DB_PASSWORD+s3cr3t}`: a literal too, used when the variable is
    # set); the variable's name and the operator stay, and a placeholder with no default
    # (`${DB_PASSWORD}`) is no candidate, nor is the message of `${DB_PASSWORD:?must be set}`.
    # A default holds no brace: in `${A:-${B:-x}}` the inner placeholder is a candidate of its own.
    RedactionRule(
        "placeholder-default",
        LazyPattern(
            r"\$\{(?:(?P<key>[A-Za-z_][A-Za-z0-9_]{0,100})(?::?(?P<op>[\-=+])|:(?!\?))"
            r"|(?P<skey>[A-Za-z_][\w.\-]{0,100}):(?![?+]))"
            # Eight characters at least, as every assignment's value check asks: `${PORT:-8080}`
            # and `${LOG_LEVEL:-info}` fail here, in C, and cost no validator call.
            rf"(?P<secret>[^{_SPACE}{{}}]{{8,500}})\}}"
        ),
        group="secret",
        validator=_placeholder_default_ok,
    ),
    # A Terraform variable's default (`variable "db_password" {` ... `default = "..."`): the name is
    # in the block's header, the value's key is `default`. The block's text up to it holds no brace.
    RedactionRule(
        "terraform-variable-default",
        LazyPattern(r"variable[ \t]+\"(?P<key>[A-Za-z0-9_\-]{1,100})\"[ \t]*\{[^{}]{0,1000}?(?<![\w])default"
                   r"[ \t]*=[ \t]*\"(?P<secret>[^\"\\\r\n]{1,500})\""),
        group="secret",
        validator=_terraform_default_ok,
    ),
    RedactionRule(
        "generic-assignment",
        LazyPattern(
            r"(?P<key>[A-Za-z0-9_.\-]++)" + _KEY_CLOSE +
            # A Python annotation may sit between key and value: `password: str = "..."`.
            r"(?::[ \t]*[A-Za-z_][\w.\[\], |]{0,60}?[ \t]*=(?!=)|=>|:="
            # YAML: an anchor or a tag may stand before the value (`password: &pw !!str ...`).
            r"|:(?!:)(?:" + _YAML_PROPS + r"(?=[ \t])){0,2}|=(?!=)"
            # An environment variable given as a name and a value (a Kubernetes container's `env`,
            # an ECS task definition, Terraform): `- name: DB_PASSWORD` then `value: ...` on the
            # next line, `{"name": "DB_PASSWORD", "value": "..."}`; the name is the key.
            r"|(?P<nv>" + _NAME_VALUE + r")"
            # A quoted key in a subscript (`os.environ["API_KEY"] = "..."`, PHP's `$_ENV['DB_PASSWORD']
            # = ...`, Ruby's `ENV["TOKEN"] ||= ...`), or a call's first argument with the value as
            # its second (`define('AUTH_KEY', '...')`, `os.Setenv("API_TOKEN", "...")`,
            # `System.setProperty("javax.net.ssl.keyStorePassword", "...")`, `getenv("X", "default")`):
            # then the value is quoted too, and judged strictly (`arg`: a list of names is no pair).
            r"|(?<=[\"'])\][ \t]*(?:\|\||\?\?)?=(?!=)|(?<=[\"'])[ \t]*(?P<arg>,)[ \t]*(?=[\"'])"
            # A literal as the fallback of a lookup (`GetEnvironmentVariable("API_KEY") ?? "..."`,
            # `process.env.API_TOKEN || '...'`, `os.getenv("SECRET_KEY") or "..."`), judged as `arg`.
            r"|[)\]]?[ \t]*(?P<fb>\?\?|\|\||\?:|or(?=[ \t]))[ \t]*(?=[\"'])"
            # A Markdown table's row: `| DB_PASSWORD | s3cr3t |`, the key maybe in backticks.
            r"|`?[ \t]*(?P<cell>\|)(?!\|)"
            # A Java .properties line may separate its key and value by spaces alone
            # (`db.password s3cr3t`); the value is then the rest of the line (`_generic_value_ok`
            # asks for a dotted key alone on its line, as properties files write them).
            r"|(?<=[ \t])(?P<sp>))"
            r"[ \t]*(?:[bBrRuU]{1,2}(?=[\"']))?\\?"
            # A TOML (or Python) multi-line string: `password = """..."""`, `'''...'''`; the
            # newline right after the opening delimiter is no part of the value. Its length is not
            # bounded (a 6 KB `credentials = """{...}"""` went whole into a prompt when it was): the
            # value stops at the next delimiter of its kind, so the values all candidates read are
            # apart, each part of the text read at most once per kind of delimiter. Runs without a
            # quote, held (possessive): a backtracking point per character made 200 KB cost 6x
            # what 100 KB did (no closing delimiter can start inside a run already passed).
            r"(?:(?P<tq>\"\"\"|''')(?:\r?\n)?|(?P<q>[\"'`])"
            # ODBC's braces quote a value that holds `;` or spaces (`Pwd={p;w d};`).
            r"|(?P<bq>\{)(?=[^{}\r\n]{1,500}\}))?"
            # A shell line continuation (`export API_TOKEN=abc\` and `def` on the next line)
            # goes on with the value: the shell joins the two lines into one word.
            # A quoted value may hold escapes: `"ab\\cd"` in JSON, `"ab\$cd"` in a shell.
            # (A run of the class first, not an alternation per character: that is the fast path.)
            r"(?P<secret>(?(tq)(?:[^\"']++|(?!(?P=tq))[\"'])++"
            rf"|(?(q){_QUOTED_VALUE}{{1,500}}(?:\\(?:[^{_SPACE}]|\r?\n[ \t]*){_QUOTED_VALUE}{{0,500}})*"
            r"|(?(bq)[^{}\r\n]{1,500}"
            rf"|(?(sp)[^{_SPACE}]{{1,500}}+"
            rf"|{_UNQUOTED_VALUE}{{1,500}}+(?:\\\r?\n{_UNQUOTED_VALUE}{{1,500}}+)*" + _VALUE_GOES_ON + ")))))"
            r"(?(tq)(?P=tq)|(?(q)" + _QUOTE_GAP + r"(?P=q)|(?(bq)\}|(?(sp)[ \t]*(?![^\r\n])|(?![(\[])))))"
        ),
        group="secret",
        validator=_generic_value_ok,
        anchors=_GENERIC_ANCHORS,
        # The unquoted value's class: a value longer than 500 characters is replaced whole.
        tail=_UNQUOTED_VALUE,
        tail_over=_STOP_GOES_ON,
        # (A multi-line string's value may hold whitespace and the other kind of quote; a
        # candidate inside it ends at its closing delimiter all the same, but for one that
        # opens a multi-line string of the other kind inside it: never seen outside a test.)
        # An accepted value (quoted or not) holds no whitespace, quote or lone backslash (only
        # an escape pair, or one before a newline that the value goes on after) and is
        # followed by none of its own characters. A key that ends inside it can only get
        # out through what follows the key: `=`, `:=`, `,value=` or a `: type =` annotation (at
        # most 63 characters without whitespace) and a `b`/`r` string prefix; so a key that ends
        # more than 66 characters before the value's end has its own value inside.
        reach=_GENERIC_REACH,
    ),
)
