"""Rules for credentials that tools and libraries take in their own syntax, where no credential
word with `=` or `:` marks the value (prompts/secret_table.py holds the rest of our table and
lists these among its command-line rules):
- command lines: a single-dash parameter (`-Password X`, PowerShell and NuGet), a tool's short
  password flag (`mongosh -p X`, `sqlcmd -P X`, `ldapsearch -w X`; `az login -p X` is
  `command-login-password`'s), a user and
  password in one argument (`smbclient -U user%X`, `lftp -u user,X`, `xfreerdp /p:X`), a
  positional password (`rabbitmqctl add_user u X`, `net user u X`), `config set KEY VALUE`
  (npm, yarn, pnpm, git), a here-string into a login (`--with-token <<< X`), `user:X` piped
  into base64 (a Basic header built in a script);
- code: a library's basic-auth call (`HTTPBasicAuth("u", "X")`, `auth=("u", "X")`,
  `NetworkCredential("u", "X")`, `DriverManager.getConnection(url, "u", "X")`);
- strongSwan's and Libreswan's `ipsec.secrets` (`: PSK "X"`, `: EAP "X"`, `: XAUTH "X"`);
- chat webhooks whose URL is the credential (Discord, Microsoft Teams);
- session cookies in `Cookie:` and `Set-Cookie:` headers (and curl's `-b` / `--cookie`).
Each value passes the same checks as a command line's password (`_command_password_ok`):
references (`$PW`, `${{ secrets.X }}`), prompts, placeholders and plain words stay.
"""

from __future__ import annotations

import re

from cardloop.prompts.lazy_pattern import LazyPattern
from cardloop.prompts.redaction_rule import RedactionRule
from cardloop.prompts.secret_values import (
    _assigned_value_ok,
    _char_kinds,
    _command_password_ok,
    _has_random_run,
    _is_placeholder,
    _looks_random,
    _strength,
)

# A command's argument: a password, maybe quoted; the class stops at whitespace and quotes.
_ARG = r"(?P<q>[\"'])?(?P<secret>[^\s\"'`]{1,500})"
_ARG_TAIL = r"[^\s\"'`]"


def _random_token(value: str) -> bool:
    """Digits among both cases with a random's entropy, or a random run of letters."""
    has_digit, _, has_upper, has_lower = _char_kinds(value)
    return (has_digit and has_upper and has_lower and _looks_random(value)) or _has_random_run(value)


# A URL's user that can be a token: letters, digits, `_` and `-`, 20 to 200 of them.
_TOKEN_USER = re.compile(r"[A-Za-z0-9_\-]{20,200}")


def _url_secret_ok(m: re.Match[str]) -> bool:
    """`url-credentials`: a password after `user:` that is no placeholder; or, with no password, a
    user that is a token (random-looking: `git@`, `ci-bot-user-name-here@` stay)."""
    value = m.group("secret")
    if m.group("user") is not None:
        return not _is_placeholder(value)
    return _TOKEN_USER.fullmatch(value) is not None and _random_token(value)


def _webhook_ok(m: re.Match[str]) -> bool:
    value = m.group("secret")
    return _char_kinds(value)[0] and not _is_placeholder(value)


def _encoded_password_ok(m: re.Match[str]) -> bool:
    """`user:X` piped into base64: X holds a digit or both cases (`content-type:text/plain` is a
    header being encoded, not a login)."""
    has_digit, _, has_upper, has_lower = _char_kinds(m.group("secret"))
    return (has_digit or (has_upper and has_lower)) and _command_password_ok(m)


def _positional_ok(m: re.Match[str]) -> bool:
    """A password given as an argument, not an option that follows in its place (`net user u
    /delete`, `-p 27017`)."""
    return m.group("secret")[0] not in "/" and _command_password_ok(m)


# The key of `npm config set //registry.example.com/:_authToken X`: its last word names it.
_CONFIG_KEY_WORD = re.compile(r"[A-Za-z0-9_.\-]*\Z")


def _config_value_ok(m: re.Match[str]) -> bool:
    """`config set KEY VALUE`: a credential when the key's last part names one, judged as a
    quoted value under that key (a literal: no code reads a command's argument)."""
    key = _CONFIG_KEY_WORD.search(m.group("key")).group(0)  # type: ignore[union-attr]
    return _assigned_value_ok(_strength(key), key, m.group("secret"), quoted=True)


# Where a line's cookies start: a Cookie or Set-Cookie header's colon, curl's `-b` / `--cookie`.
_COOKIE_START = re.compile(r"(?i:(?:set-)?cookie)[ \t]*:[ \t]*|(?:-b|--cookie)[ \t=]+[\"']?")
_COOKIE_PAIR = re.compile(r"(?P<name>[A-Za-z0-9_.\-]{1,100})=(?P<value>[^\s;,\"'`]{1,500})")
# A cookie that signs its holder in: `sessionid`, `JSESSIONID`, `PHPSESSID`, `connect.sid`,
# `_app_session`, `remember_user_token`, `auth`, `.AspNetCore.Identity.Application`, `laravel_session`.
_SESSION_NAME = re.compile(r"(?i)sess|sid\b|sid[_.\-]|remember|auth|login|identity|jwt")
_COOKIE_LINE_READ = 4000


def session_cookies(text: str) -> tuple[list[tuple[int, int]], int]:
    """Spans of session cookies' values (see `session-cookie`), and how many characters were
    read: the cookies after each header, up to its line's end (at most 4,000 characters), once."""
    hits: list[int] = []
    for word in ("ookie", "OOKIE", "-b "):  # C scans; no lowercased copy of the text
        pos = text.find(word)
        while pos >= 0:
            hits.append(pos)
            pos = text.find(word, pos + 1)
    spans: list[tuple[int, int]] = []
    read = done = 0
    for pos in sorted(hits):
        if pos < done:
            continue  # in cookies already read
        head = None
        for back in (5, 3, 1, 0):  # `set-cookie:`, `--cookie`, `cookie:`, `-b `
            head = _COOKIE_START.match(text, pos - back) if pos >= back else None
            if head is not None:
                break
        if head is None:
            continue
        start, limit = head.end(), min(len(text), head.end() + _COOKIE_LINE_READ)
        end = text.find("\n", start, limit)
        end = limit if end < 0 else end
        for m in _COOKIE_PAIR.finditer(text, start, end):
            value = m.group("value")
            if (_SESSION_NAME.search(m.group("name")) and len(value) >= 16
                    and not _is_placeholder(value) and _looks_random(value)):
                spans.append(m.span("value"))
        read += end - start
        done = end
    return spans, read + len(hits)


# The tools whose short flag gives a password: an anchor for the name (on the lowercased text),
# the name, the flag (`dotnet nuget ...` is tried at `nuget`, where the anchor hits).
# `-p` is a port for ldap and mosquitto, `-w` a width for sqlcmd: a number, which
# `_command_password_ok` refuses.
_SHORT_FLAG_TOOLS = (
    (r"mongo(?=[a-z]{0,8}[ \t])", r"mongo(?:sh|dump|restore|import|export|stat|top|files)?", "-p"),
    (r"sqlcmd(?=[ \t])", r"sqlcmd", "-P"),
    (r"bcp(?=[ \t])", r"bcp", "-P"),
    (r"mssql-cli(?=[ \t])", r"mssql-cli", "-P"),
    (r"ldap(?=[a-z]{0,8}[ \t])", r"ldap(?:search|add|modify|delete|passwd|whoami|compare|modrdn|exop)", "-w"),
    (r"nuget(?=[ \t])", r"nuget", "-p"),
    (r"mosquitto_(?=[a-z]{2}[ \t])", r"mosquitto_(?:pub|sub|rr)", "-P"),
    (r"influx(?=[ \t])", r"influx", "-p"),
)

TOOL_RULES: tuple[RedactionRule, ...] = (
    # HTTP clients' user and password in one argument: `curl -u user:X`, `curl --user "user:X"`,
    # `curl -su user:X`, HTTPie's `http -a user:X` / `--auth user:X` (gitleaks' curl rule stops at
    # a password's `^` or `!`). `-u user` alone makes curl prompt: no candidate.
    RedactionRule(
        "http-client-user-password",
        LazyPattern(r"(?:curl|https?)(?=[ \t])[^\n]{0,300}?[ \t](?:-[A-Za-z]{0,4}u|--user|-a|--auth)(?:=|[ \t]+)"
                   r"(?P<q>[\"'])?[^\s:\"'$]{1,100}:(?P<secret>[^\s\"'`]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        # Literals with their space (`http ` is rarer than `http`, which every URL holds): a line
        # without one does not open the rule.
        anchors=(LazyPattern(r"curl "), LazyPattern(r"http "), LazyPattern(r"https ")),
        tail=_ARG_TAIL,
    ),
    # A single-dash parameter that names a credential: PowerShell (`-Password X`, `-ClientSecret X`,
    # `-AccessToken X`), NuGet (`nuget sources add ... -Password X`), Java tools (`-password X`).
    # The candidate starts at the identifier that holds the word, so `one-time-password X` (a
    # word glued before the dash) is none; `--x-password` is `command-line-password`'s.
    RedactionRule(
        "parameter-password",
        LazyPattern(r"-(?!-)[A-Za-z0-9]{0,24}?(?i:password|passwd|token|secret|apikey|accesskey)[ \t]+" + _ARG),
        group="secret",
        validator=_command_password_ok,
        # Gated on the words (one Aho-Corasick pass shared by all rules), then one scan of the
        # dashes: four scans of frequent words cost more. A dash inside a word (`one-time-password
        # X`) is tried at that word's start, where the pattern finds no dash.
        keywords=("password", "passwd", "token", "secret", "apikey", "accesskey"),
        anchors=(LazyPattern(r"-(?=[a-z0-9]{0,24}?(?:password|passwd|token|secret|apikey|accesskey)"
                             r"[ \t]+[^\s\-$(=:])"),),
        tail=_ARG_TAIL,
    ),
    # A tool's short password flag, after the tool's name on the same line.
    RedactionRule(
        "tool-password-flag",
        LazyPattern(r"(?:" + "|".join(f"{tool}(?=[ \\t])[^\\n]{{0,200}}?[ \\t]{flag}"
                                       for _, tool, flag in _SHORT_FLAG_TOOLS)
                    + r")[ \t]+" + _ARG),
        group="secret",
        validator=_positional_ok,
        # Literal-first anchors (a scan for an alternation of names reads every character), tried
        # at the identifier that holds the name.
        anchors=tuple(LazyPattern(anchor) for anchor, _, _ in _SHORT_FLAG_TOOLS),
        tail=_ARG_TAIL,
    ),
    # A user and its password in one argument: Samba's `-U user%X` (smbclient, rpcclient,
    # `net rpc`), lftp's `-u user,X`, FreeRDP's `/p:X`.
    RedactionRule(
        "user-password-argument",
        LazyPattern(
            r"(?:(?:smbclient|rpcclient|smbcacls|smbget|net[ \t]+(?:rpc|ads))(?=[ \t])[^\n]{0,200}?"
            r"(?:[ \t]-U[ \t]*|[ \t]--user(?:=|[ \t]+))[\"']?[^\s%\"']{1,100}%"
            r"|lftp(?=[ \t])[^\n]{0,200}?[ \t]-u[ \t]+[\"']?[^\s,\"']{1,100},"
            r"|[xw]freerdp3?(?=[ \t])[^\n]{0,200}?[ \t][/\-]p:)"
            r"(?P<secret>[^\s\"'`]{1,500})"
        ),
        group="secret",
        validator=_command_password_ok,
        anchors=(*(LazyPattern(w + r"(?=[ \t])") for w in ("smbclient", "rpcclient", "smbcacls", "smbget", "lftp")),
                 LazyPattern(r"net rpc "), LazyPattern(r"net ads "), LazyPattern(r"freerdp(?=3?[ \t])")),
        tail=_ARG_TAIL,
    ),
    # A password as a positional argument: `rabbitmqctl add_user u X`, `change_password u X`,
    # Windows' `net user u X /add`.
    RedactionRule(
        "positional-password",
        LazyPattern(r"(?:rabbitmqctl[ \t]+(?:add_user|change_password)|net[ \t]+user)[ \t]+"
                   r"[\"']?[^\s\"'/]{1,100}[\"']?[ \t]+" + _ARG),
        group="secret",
        validator=_positional_ok,
        anchors=(LazyPattern(r"rabbitmqctl(?=[ \t])"), LazyPattern(r"net user ")),
        tail=_ARG_TAIL,
    ),
    # `npm config set //registry.example.com/:_authToken X`, `yarn config set npmAuthToken X`,
    # `git config --global sendemail.smtppass X`: the key names the value.
    RedactionRule(
        "config-set-value",
        LazyPattern(r"config[ \t]+set[ \t]+(?:--?[\w\-]+[ \t]+){0,4}(?P<key>[^\s=\"']{1,200})[ \t]+" + _ARG),
        group="secret",
        validator=_config_value_ok,
        keywords=("config set",),
        tail=_ARG_TAIL,
    ),
    # A here-string into a login that reads its secret from its input: `gh auth login --with-token
    # <<< X`, `docker login -u u --password-stdin <<< X` (a variable there stays).
    RedactionRule(
        "here-string-password",
        LazyPattern(r"(?:--password-stdin|--with-token|--token-stdin)[^\n|;&]{0,200}?<<<[ \t]*" + _ARG),
        group="secret",
        validator=_command_password_ok,
        keywords=("<<<",),
        tail=_ARG_TAIL,
    ),
    # A Basic authorization header built in a script: `echo -n 'user:X' | base64`.
    RedactionRule(
        "basic-auth-encode",
        LazyPattern(r"(?:echo|printf)(?=[ \t])(?:[ \t]+-[neE]{1,3})?[ \t]+[\"']?[^\s:\"'$|]{1,100}:"
                   r"(?P<secret>[^\s\"'`|]{1,500})[\"']?[ \t]*\|[ \t]*(?:base64|openssl[ \t]+(?:base64|enc))"),
        group="secret",
        validator=_encoded_password_ok,
        # The same anchors as `piped-password`'s: scanned once per text for both.
        anchors=(LazyPattern(r"echo(?=[ \t])"), LazyPattern(r"printf(?=[ \t])")),
    ),
    # A library's basic-auth call, the password a literal after the user's: `HTTPBasicAuth("u",
    # "X")`, `aiohttp.BasicAuth("u", "X")`, `auth=("u", "X")`, .NET's `NetworkCredential("u", "X")`,
    # Java's `DriverManager.getConnection(url, "u", "X")` and `PasswordAuthentication("u", "X"...`.
    # Tried at the identifier that holds the hit (`requests.auth.HTTPBasicAuth`).
    RedactionRule(
        "basic-auth-call",
        LazyPattern(
            r"[A-Za-z0-9_.\-]{0,200}?(?:(?i:basicauth|digestauth|networkcredential|passwordauthentication"
            r"|usernamepasswordcredentials?|passwordcredential)[ \t]*\("
            r"|(?i:auth)[ \t]*[=:][ \t]*[(\[]|(?i:getconnection)[ \t]*\([^,()\n]{1,200},)"
            r"[ \t]*(?P<uq>[\"'])[^\"'\n]{1,100}(?P=uq)[ \t]*,[ \t]*(?P<q>[\"'])(?P<secret>[^\"'\n]{1,500})(?P=q)"
        ),
        group="secret",
        validator=_command_password_ok,
        anchors=(*(LazyPattern(w + r"(?=[ \t]*\()") for w in (
            "basicauth", "digestauth", "networkcredential", "passwordauthentication", "passwordcredential",
            "passwordcredentials", "getconnection")),
                 # `auth=(`, `auth = (` (keyword arguments as written), not every `auth` of a text.
                 LazyPattern(r"auth=(?=[(\[][ \t]*[\"'])"), LazyPattern(r"auth = (?=[(\[][ \t]*[\"'])")),
    ),
    # strongSwan's and Libreswan's ipsec.secrets: `[ids] : PSK "X"` (also `0x` hex or `0s` base64,
    # unquoted), `: EAP "X"`, `: XAUTH "X"`, `: NTLM "X"`; key files (`: RSA key.pem`) stay.
    RedactionRule(
        "ipsec-secret",
        LazyPattern(r":[ \t]*(?:PSK|EAP|XAUTH|NTLM)[ \t]+"
                   r"(?P<q>\")?(?P<secret>(?(q)[^\"\r\n]{1,500}|[^\s\"]{1,500}))(?(q)\")"),
        group="secret",
        # As a command line's password: a plain word (`"secret"`, a sample file's) stays.
        validator=_command_password_ok,
        keywords=(": psk", ": eap", ": xauth", ": ntlm", ":psk"),
    ),
    # A chat webhook whose URL is the credential (anyone holding it can post): Discord's
    # `/api/webhooks/<id>/<token>` and Microsoft Teams' `*.webhook.office.com/webhookb2/...`. The
    # host stays. Tried at the host's identifier, where the anchor hits.
    RedactionRule(
        "chat-webhook-url",
        LazyPattern(
            r"(?:(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/"
            r"|(?:[A-Za-z0-9\-]{1,63}\.)?webhook\.office\.com/webhookb2/"
            r"|outlook\.office(?:365)?\.com/webhook/)"
            r"(?P<secret>[^\s\"'<>`]{20,500})"
        ),
        group="secret",
        # Real ones hold digits (the id, hex); `YOUR_WEBHOOK_ID/YOUR_WEBHOOK_TOKEN` does not.
        validator=_webhook_ok,
        anchors=(LazyPattern(r"discord(?:app)?\.com/api/webhooks/"), LazyPattern(r"webhook\.office\.com/webhookb2/"),
                 LazyPattern(r"outlook\.office(?:365)?\.com/webhook/")),
        tail=r"[^\s\"'<>`]",
    ),
    # A Sentry DSN: `https://<public key>[:<secret key>]@o123.ingest.sentry.io/456` (also self-hosted
    # hosts): the key (32 hex digits) and the legacy secret go, the host and project stay. The key
    # lets anyone send events to the project. A 32-hex user before a host and a numeric project
    # path is that shape only.
    RedactionRule(
        "sentry-dsn",
        LazyPattern(r"://(?P<secret>[0-9a-fA-F]{32}(?::[0-9a-fA-F]{32})?)@[A-Za-z0-9.\-]{1,253}(?::\d{1,5})?"
                   r"/(?:[\w\-]{1,100}/){0,4}\d{1,20}(?![\w.\-])"),
        group="secret",
        keywords=("sentry", "dsn"),
    ),
    # Git's prompt for a password over HTTPS, answered on its line, as a log or a pasted terminal
    # holds it: `Password for 'https://bob@github.com': <answer>`, or on the line below when the
    # answer was typed or piped after a newline (an `expect` script's log, a terminal that echoes):
    # then that line is the answer alone. As a command line's password: a word git goes on with
    # (`...': terminal prompts disabled`) stays, and so does a next line of words (`fatal: ...`).
    RedactionRule(
        "git-password-prompt",
        LazyPattern(r"(?i:password) for '[^'\r\n]{1,300}':"
                    r"(?:[ \t]*\r?\n[ \t]*(?=[^\s]{1,500}+[ \t]*(?:\r?\n|\Z)))?"
                    r"[ \t]*(?P<secret>[^\s]{1,500})"),
        group="secret",
        validator=_command_password_ok,
        keywords=("password for '",),
        tail=r"[^\s]",
    ),
    # A session cookie: `Cookie: sessionid=X; csrftoken=...`, `Set-Cookie: JSESSIONID=X; Path=/`,
    # `curl -b 'connect.sid=X'`: a cookie whose name holds a session or login word, with a
    # random-looking value, on a cookie header's line (`session_cookies`).
    RedactionRule(
        "session-cookie",
        LazyPattern(r"(?i:(?:set-)?cookie)[ \t]*:"),
        keywords=("cookie", "-b "),
        finder=lambda text, _lowered: session_cookies(text),
    ),
)
