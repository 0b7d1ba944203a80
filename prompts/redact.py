"""Secret redaction: our own rule table in the style of gitleaks.

Every piece of untrusted text (card bodies, comments, chat history, logs, repository files,
tenant prompts) passes through `Redactor.redact` before it reaches an LLM or a log, so this
runs on every prompt and must cost little on text that holds no secret.

How it stays cheap (a few milliseconds per 200 KB of ordinary source or log text), and
linear on ANY input (red-team finding: "key"*N, "İ"+"a"*N, "token_"*N and "?token="*N were
quadratic and one 200 KB gateway request held the GIL for 18 s):
- Every scanned pattern starts with a literal (`sk-ant-`, `ghp_`, `AIza`, `-----BEGIN`,
  `://` ...), which `re` finds with a fast substring search. The "not glued to a longer word"
  check is a fixed-width lookbehind placed *after* the literal, because a pattern that starts
  with a lookbehind, a character class or a case-insensitive group loses that fast search.
  That lookbehind rejects every start inside a token run the body could have scanned, and no
  body can fail after it has scanned its run except by a bounded backtrack, so each character
  is read by a bounded number of attempts.
- Rules keyed on a word that must match in any case (`password=`, `Authorization:`,
  `Bearer`, `?access_token=`) have `anchors`: small literal-first patterns run on the
  lowercased text (`token` + the rest of its identifier + a lookahead for `["']? *[=:]`),
  run with `finditer`. The text is lowercased with every offset kept ("İ" is the one
  character whose lowercase is longer). An anchor that reads the rest of an identifier can
  only hit at the last occurrence of its word there, so "keykeykey..." is read once, not
  once per "key"; the identifier's bounds are found on demand, once. The rule's own pattern
  is then tried with `match` once per identifier that holds a hit. Anchors shared by several
  rules are scanned once per text.
- Every repetition a rule's pattern can make at such a start is bounded (`{1,500}`
  characters of value) or stops at the next whitespace, so one attempt costs little however
  many attempts overlap. A secret longer than the bound is still replaced whole: `tail` is
  the class of its characters, and the span is extended to the end of that run, remembering
  the run's end so that overlapping candidates do not read it again.
- A candidate whose span lies inside a span already accepted for the same rule is not
  validated (it would change nothing); with `reach`, one whose identifier lies deep inside
  such a span is not even matched ("token=token=token=..." is one value, read once).
- Value checks make a bounded number of linear passes over at most 500 characters, with C
  scans (`in`, `str.count`, ASCII case mapping) rather than a Python loop per character.
- `keywords` (gitleaks' trick) can still gate a scanned custom rule: it runs only when one of
  them occurs in the lowercased text.
`ScanStats` counts this work (hits, attempts, characters matched, validated and extended)
in units that do not depend on the machine; tests hold it to a constant per input
character, and bench/redact.py measures seconds per MB against the bare `re` engine.
Rules are matched separately rather than as one alternation because an alternation returns
only the first branch that matches at a position; separate matches let the longest candidate
win and let a validator reject one candidate without hiding another rule's match.

How it stays safe:
- The whole secret is replaced, never a prefix: token rules consume every character of the
  token's alphabet; a PEM block runs from BEGIN to its END line inclusive, or to the end of
  the text when the END line is missing (a truncated log).
- Overlapping candidates are merged into one span (the union) named after the earliest,
  then longest, then first-listed rule, so spans never overlap and no character of any
  candidate stays visible at an edge.
- Assignments and URLs keep their key name, scheme and user visible and lose only the value
  (`password=[REDACTED:generic-assignment]`, `https://user:[REDACTED:url-credentials]@host`),
  so the model can still reason about *which* credential was there.

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
  some entropy) and are neither names nor URLs.
Decided: `secret_name = "db-credentials"` is kept (the key names a reference, not a secret,
and the value is word-shaped); `PASSWORD=CorrectHorseBattery` unquoted is kept too, because
an unquoted digit-free identifier cannot be told apart from a variable reference in code
(quoted, `password = "CorrectHorseBattery"` is redacted).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

Validator = Callable[[re.Match[str]], bool]


@dataclass(frozen=True)
class RedactionRule:
    r"""One family of secrets.

    `group` names the part of a match that is the secret (0: the whole match); only that
    span is replaced. `validator` gets each match and returns False to skip it (an entropy
    or shape check).

    How the rule finds candidates:
    - plain: `pattern.finditer` over the text (start the pattern with a literal);
    - `keywords` (lowercase substrings): as plain, but only when one of them occurs in the
      lowercased text;
    - `anchors` (patterns over the LOWERCASED text, run with `finditer`; start each with a
      literal): the rule is not scanned; `pattern.match` is tried once at the start of each
      identifier (`[A-Za-z0-9_.-]+`) that holds an anchor hit, so `pattern` must start
      there (at the hit itself when that is no identifier character). An anchor must cost
      linear time under `finditer` (see `_key_anchor`).

    Keeping it linear when the secret's length is bounded in `pattern` (`{1,500}`):
    - `tail` (a character class such as `[^&\s#]`): the characters the secret is made of.
      When the character right after a matched secret is one of them, the bound cut the
      secret short, and the span is extended to the end of that run, so a longer secret is
      still replaced whole. A validator sees the bounded match.
    - `reach` (anchored rules): a promise that a match starting at an identifier `[s, e)`
      (or at a hit `s = e` outside identifiers) with `a <= s` and `e + reach < b`, where
      `[a, b)` is a secret span this rule accepted, lies inside `[a, b)` too. Such a
      candidate is skipped without matching: "token=token=token=..." is one value, read
      once.
    """

    name: str
    pattern: re.Pattern[str]
    group: int | str = 0
    validator: Validator | None = None
    keywords: tuple[str, ...] = ()
    anchors: tuple[re.Pattern[str], ...] = ()
    tail: str = ""
    reach: int | None = None

    def __post_init__(self) -> None:
        if any(k != k.lower() or not k for k in self.keywords):
            raise ValueError(f"rule {self.name!r}: keywords are non-empty and lowercase")
        if any(a.flags & re.IGNORECASE for a in self.anchors):
            raise ValueError(f"rule {self.name!r}: anchors run on lowercased text; "
                             "write them in lowercase instead of IGNORECASE")
        if self.tail and not _ONE_CLASS.fullmatch(self.tail):
            raise ValueError(f"rule {self.name!r}: tail is one character class, e.g. [^\\s]")
        if self.reach is not None and (self.reach < 0 or not self.anchors):
            raise ValueError(f"rule {self.name!r}: reach is a non-negative distance "
                             "for an anchored rule")


# One bracketed character class with no nested brackets but escaped ones: `[^&\s#'"<>]`.
_ONE_CLASS = re.compile(r"\[\^?\]?(?:[^\[\]\\]|\\.)*\]")


@dataclass(frozen=True)
class Finding:
    """A redacted span, as offsets into the ORIGINAL text."""

    rule: str
    start: int
    end: int


@dataclass(frozen=True)
class RedactionResult:
    text: str
    findings: tuple[Finding, ...]

    def counts(self) -> dict[str, int]:
        """How many secrets each rule redacted (only rules that fired)."""
        return dict(Counter(f.rule for f in self.findings))


def marker(rule: str) -> str:
    return f"[REDACTED:{rule}]"


# --------------------------------------------------------------------------- value checks


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
    | (?i:(?:your|my)[_-]?(?:api[_-]?)?(?:key|token|secret|password)\w*)
    """,
    re.VERBOSE,
)
# Anywhere in the first line: templates, JSONPath, formats.
_PLACEHOLDER_INSIDE = re.compile(r"\{\{|\{[\w.$@\[\]\-]*\}|%\(\w+\)s|%s")
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
_GENERIC_KEY = re.compile(
    r"api[_\-]?key|apikey|secret|token|passw(?:or)?d|pwd|passphrase|credential"
    r"|(?:private|access|signing|encryption|master|auth)[_\-]?key",
    re.IGNORECASE,
)
# The last word of the key decides how sure we are that the value is a credential.
_CREDENTIAL_NOUNS = frozenset({
    "password", "passwd", "pwd", "pass", "passphrase", "secret", "secrets", "token",
    "key", "apikey", "credential", "credentials",
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
    letters = [w.rstrip("0123456789") for w in words if not w.isdigit()]
    return bool(letters) and sum(map(len, letters)) / len(letters) >= 3


def _mentions_credential(value: str) -> bool:
    return any(w.lower() in _CREDENTIAL_NOUNS for w in _words(value))


def _key_strength(key: str) -> int:
    """0: the key names no credential (`monkey`, `keyboard`); 1: it mentions one
    (`secret_name`, `token_type`); 2: its last word is a credential noun (`DB_PASSWORD`)."""
    if not _GENERIC_KEY.search(key):
        return 0
    words = _words(key)
    return 2 if words and words[-1].lower() in _CREDENTIAL_NOUNS else 1


# Keys repeat (`password`, `api_key`, `token`): remember the short ones.
_short_key_strength = functools.lru_cache(maxsize=4096)(_key_strength)


def _generic_value_ok(m: re.Match[str]) -> bool:
    key, value = m.group("key"), m.group("secret")
    strength = _short_key_strength(key) if len(key) <= 64 else _key_strength(key)
    if not strength:
        return False
    before = m.string[max(0, m.start() - 3):m.start()]
    if before.endswith(("://", "@")):
        return False  # a URL's user or host (`https://x-access-token:...@`): url rules decide
    if len(value) < 8 or _is_placeholder(value) or _TYPE_EXPR.fullmatch(value):
        return False
    quoted = m.group("q") is not None
    if not quoted and (_is_code_name(value, dashes=False) or _ATTRIBUTE_PATH.fullmatch(value)):
        # Unquoted, a name is a reference in code: `token = access_token`,
        # `PASSWD_MIN = argon2id.PASSWD_MIN`, `api_key=settings.OPENAI_KEY`.
        return False
    strong = strength == 2
    if _PATH.fullmatch(value) and not (strong and _looks_random(value)):
        return False  # PWD=/home/me/src, TOKEN_ENDPOINT = "/v1/oauth/token"
    if strong:
        if not quoted:
            return True
        # Quoted, a name counts as code only when it is separated (`"ANTHROPIC_API_KEY"`,
        # `"refresh_token"`, `"id-token-data"`) or names a credential itself
        # (`"serviceAccountToken"`): `"password": "CorrectHorse"` is a literal password.
        separated = any(c in value for c in "_.-")
        return not (_is_code_name(value) and (separated or _mentions_credential(value)))
    if "://" in value or _is_code_name(value):
        return False  # token_url = "https://...", "secret_ref": "V1LocalObjectReference"
    return _looks_random(value)


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


# --------------------------------------------------------------------------- the rule table


def _token(prefix: str, width: int, body: str) -> re.Pattern[str]:
    """`prefix` (`width` characters) then `body`, not glued on the left to more token
    characters; on the right the greedy `body` already consumes the rest of the token."""
    return re.compile(prefix + rf"(?<![A-Za-z0-9_\-].{{{width}}})" + body)


# Between a key and its value: an optional closing quote (escaped in JSON-in-JSON), then
# `=`, `:`, `:=` or `=>`, never `==` / `::`.
_ASSIGN = r"\\?[\"']?[ \t]*(?:=>|:=|:(?!:)|=(?!=))[ \t]*\\?[\"']?"


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
        lasts = re.escape("".join(sorted({a.rstrip("_-")[-1] for a in after})))
        w += (rf"(?:(?<=[{lasts}]{w})|(?<=[{lasts}][_\-]{w}))"
              "(?:" + "|".join(f"(?<={re.escape(a + word)})" for a in after) + ")")
    return f"{w}(?!{_RUN}*?{w})"


def _key_anchor(word: str, tail: str, *, after: tuple[str, ...] = ()) -> re.Pattern[str]:
    """An identifier that holds `word`, then `tail` right after the identifier. The tail is a
    lookahead: a hit that took in what follows would hide the next identifier from the scan."""
    return re.compile(f"{_last_word(word, after=after)}{_RUN}*+(?={tail})")


# After the key's identifier: an optional closing quote, `=` or `:`, then six value
# characters (every rule that uses it needs at least that many) or a Python annotation
# followed by `=`. The value check keeps `token_count=12` or `key=foo` in a log from
# costing a `match` each.
_KEY_TAIL = (
    r"\\?[\"']?[ \t]*"
    r"(?:(?:=>|:=|[=:])[ \t]*[bru]{0,2}\\?[\"'`]?[^\s\"'`]{6}|:[ \t]*[a-z_][\w.\[\], |]{0,60}?=)"
)
# What `_GENERIC_KEY` accepts, one literal-first anchor per word (a literal start keeps the
# scan a fast substring search): `key` only after `api`, `private` ...
_KEY_PREFIXES = tuple(p + sep for p in ("api", "private", "access", "signing", "encryption",
                                        "master", "auth") for sep in ("", "_", "-"))
_GENERIC_ANCHORS = (
    *(_key_anchor(w, _KEY_TAIL) for w in ("secret", "token", "pwd", "credential", "passwd",
                                          "password", "passphrase")),
    _key_anchor("key", _KEY_TAIL, after=_KEY_PREFIXES),
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
_QUERY_VALUE = rf"[^{_SPACE}&#'\"<>]"
_GENERIC_REACH = 70

DEFAULT_RULES: tuple[RedactionRule, ...] = (
    RedactionRule(
        "private-key",
        re.compile(
            r"-----BEGIN[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END[ A-Z0-9]{0,40} PRIVATE KEY(?: BLOCK)?-----|.*)",
            re.DOTALL,
        ),
    ),
    RedactionRule("anthropic-api-key", _token("sk-ant-", 7, r"[A-Za-z0-9_\-]{20,}")),
    RedactionRule(
        "openai-api-key",
        _token("sk-", 3, r"(?!ant-)[A-Za-z0-9_\-]{20,}"),
        validator=_letters_and_digits,
    ),
    RedactionRule("github-pat", _token("github_pat_", 11, r"[A-Za-z0-9_]{22,}")),
    RedactionRule("github-token", _token("gh[pousr]_", 4, r"[A-Za-z0-9]{36,}")),
    RedactionRule(
        "aws-access-key-id",
        re.compile(
            r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])(?<![A-Za-z0-9].{4})[A-Z0-9]{16}(?![A-Za-z0-9])"
        ),
    ),
    RedactionRule(
        "aws-secret-access-key",
        re.compile(
            r"(?i:(?:aws[_.\-]?)?secret[_.\-]?access[_.\-]?key|aws[_.\-]?secret[_.\-]?key)"
            + _ASSIGN
            + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        group="secret",
        anchors=(_key_anchor("secret", _KEY_TAIL),),
    ),
    RedactionRule(
        "stripe-api-key",
        re.compile(r"[sr]k_(?:live|test|prod)_[A-Za-z0-9]{16,}"),
        anchors=(re.compile(r"k_(?:live|test|prod)_"),),
    ),
    RedactionRule(
        "slack-webhook-url",
        re.compile(r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+\-]+"),
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
        # The password class allows "@" and backtracks to the last one before the host.
        re.compile(r"://[^\s:/?#@'\"<>]*:(?P<secret>[^\s/?#'\"<>]+)@(?=[A-Za-z0-9\[])"),
        group="secret",
        validator=_not_placeholder(1),
    ),
    RedactionRule(
        "url-query-secret",
        re.compile(
            rf"[?&#](?i:{_QUERY_KEYS})=(?P<secret>{_QUERY_VALUE}{{1,{_QUERY_VALUE_BOUND}}})"
        ),
        group="secret",
        validator=_not_placeholder(6, bound=_QUERY_VALUE_BOUND),
        # A hit is the `?`, `&` or `#` itself, which is where the pattern starts.
        anchors=(re.compile(rf"[?&#](?=(?:{_QUERY_KEYS})={_QUERY_VALUE})"),),
        # `?`, keyword, `=` and value are all `tail` characters, so a match that starts
        # inside an accepted value ends where that value's run ends: inside it.
        tail=_QUERY_VALUE,
        reach=0,
    ),
    RedactionRule(
        "authorization-header",
        re.compile(
            r"(?i:(?:proxy-)?authorization)" + _ASSIGN
            + r"(?i:bearer|basic|token|bot|apikey|api-key|sso-key)[ \t]+"
            r"(?P<secret>[A-Za-z0-9._~+/\-]{6,}=*)"
        ),
        group="secret",
        # Its own tail: the scheme after the colon (`Basic`, `Bot`) is shorter than six.
        anchors=(_key_anchor("authorization", r"\\?[\"']?[ \t]*[=:]"),),
    ),
    RedactionRule(
        "bearer-token",
        re.compile(r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)"),
        group="secret",
        validator=_bearer_value_ok,
        anchors=(re.compile(r"bearer(?=[ \t]+[a-z0-9._~+/\-]{16})"),),
    ),
    RedactionRule(
        "generic-assignment",
        re.compile(
            r"(?P<key>[A-Za-z0-9_.\-]++)\\?[\"']?[ \t]*"
            # A Python annotation may sit between key and value: `password: str = "..."`.
            r"(?::[ \t]*[A-Za-z_][\w.\[\], |]{0,60}?[ \t]*=(?!=)|=>|:=|:(?!:)|=(?!=))"
            r"[ \t]*(?:[bBrRuU]{1,2}(?=[\"']))?\\?"
            r"(?P<q>[\"'`])?"
            rf"(?P<secret>(?(q){_QUOTED_VALUE}{{1,500}}|{_UNQUOTED_VALUE}{{1,500}}+))"
            r"(?(q)\\?(?P=q)|(?![(\[]))"
        ),
        group="secret",
        validator=_generic_value_ok,
        anchors=_GENERIC_ANCHORS,
        # The unquoted value's class: a value longer than 500 characters is replaced whole.
        tail=_UNQUOTED_VALUE,
        # An accepted value (quoted or not) holds no whitespace, quote or backslash and is
        # followed by none of its own characters. A key that ends inside it can only get
        # out through what follows the key: `=`, `:=` or a `: type =` annotation (at most
        # 63 characters without whitespace) and a `b`/`r` string prefix; so a key that ends
        # more than 66 characters before the value's end has its own value inside.
        reach=_GENERIC_REACH,
    ),
)


# --------------------------------------------------------------------------- the redactor

_RUN_CHARS = re.compile(r"[A-Za-z0-9_.\-]*")


def _lower_same_length(text: str) -> str:
    """`text.lower()` with every offset kept: "İ" is the one character whose lowercase is two
    characters long; as "i" it still lets anchors match, and hits map back to `text`."""
    lowered = text.replace("\u0130", "i").lower()
    if len(lowered) != len(text):  # a future Unicode version adds another such character
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered


@dataclass
class ScanStats:
    """The work one `Redactor.find` did, in units that do not depend on the machine. Each
    count is at most a constant times the length of the text, whatever the text."""

    hits: int = 0       # anchor hits looked at
    runs: int = 0       # characters of identifier runs read to place those hits
    attempts: int = 0   # candidates: `match` tried at an identifier, or a scanned match
    matched: int = 0    # characters inside matches
    validated: int = 0  # characters of matches handed to validators
    extended: int = 0   # characters read to extend a secret to the end of its run
    skipped: int = 0    # candidates inside a span the same rule already accepted

    @property
    def total(self) -> int:
        return (self.hits + self.runs + self.attempts + self.matched + self.validated
                + self.extended)


class _Text:
    """One text being scanned: its same-length lowercase (reversed too, when an anchor hit
    needs the start of its identifier), the anchor hits shared by rules, the work done."""

    __slots__ = ("_reversed", "hits", "lowered", "stats", "text")

    def __init__(self, text: str, stats: ScanStats) -> None:
        self.text = text
        self.lowered = _lower_same_length(text)
        self._reversed: str | None = None
        self.hits: dict[tuple[str, int], dict[int, int]] = {}
        self.stats = stats

    @property
    def reversed(self) -> str:
        if self._reversed is None:
            self._reversed = self.lowered[::-1]
        return self._reversed


def _anchor_starts(anchor: re.Pattern[str], t: _Text) -> dict[int, int]:
    """Start -> end of the identifier run of the lowered text that holds each hit of
    `anchor` (start = end = the hit when it is in none). Hits come in order, so a run is
    read once, however many hits it holds."""
    found: dict[int, int] = {}
    lowered, n, run = t.lowered, len(t.lowered), _RUN_CHARS.match
    run_start = run_end = -1
    hits = read = 0
    for m in anchor.finditer(lowered):
        hits += 1
        pos = m.start()
        if run_start <= pos < run_end:
            continue
        run_start, run_end = pos, run(lowered, pos).end()  # type: ignore[union-attr]
        if run_end > pos:
            back = n - pos  # `lowered[pos - 1]` is `reversed[back]`
            run_start -= run(t.reversed, back).end() - back  # type: ignore[union-attr]
            read += run_end - run_start
        found[run_start] = run_end
    t.stats.hits += hits
    t.stats.runs += read
    return found


class Redactor:
    def __init__(self, rules: Sequence[RedactionRule] = DEFAULT_RULES) -> None:
        names = [r.name for r in rules]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate rule names in {names}")
        for r in rules:
            # The name goes into the marker; keep it one plain token.
            if not re.fullmatch(r"[a-z0-9][a-z0-9\-]*", r.name):
                raise ValueError(f"rule name {r.name!r}: use lowercase kebab-case")
        self.rules: tuple[RedactionRule, ...] = tuple(rules)
        self._tails = tuple(re.compile(r.tail) if r.tail else None for r in self.rules)
        self._tail_runs = tuple(re.compile(r.tail + "*") if r.tail else None for r in self.rules)

    def _candidates(self, rule: RedactionRule, t: _Text) -> Iterable[tuple[re.Match[str] | None, int, int]]:
        """(match or None when skipped, identifier start, identifier end) in start order."""
        if rule.keywords and not any(k in t.lowered for k in rule.keywords):
            return ()
        if not rule.anchors:
            return ((m, m.start(), m.start()) for m in rule.pattern.finditer(t.text))
        starts: dict[int, int] = {}
        for anchor in rule.anchors:
            key = (anchor.pattern, anchor.flags)
            hits = t.hits.get(key)
            if hits is None:  # shared anchors are scanned once per text
                hits = t.hits[key] = _anchor_starts(anchor, t)
            starts.update(hits)
        return ((None, s, e) for s, e in sorted(starts.items()))

    def _collect(self, index: int, t: _Text, candidates: list[tuple[int, int, int]]) -> None:
        rule, text = self.rules[index], t.text
        pattern, group, validator, reach = rule.pattern, rule.group, rule.validator, rule.reach
        tail, tail_run = self._tails[index], self._tail_runs[index]
        attempts = matched = validated = extended = skipped = 0
        # The accepted span with the furthest end so far, and the last run `tail` extended.
        kept_start = kept_end = ext_from = ext_to = -1
        for m, run_start, run_end in self._candidates(rule, t):
            attempts += 1
            if m is None:
                if reach is not None and kept_start <= run_start and run_end + reach < kept_end:
                    skipped += 1  # inside a value this rule already holds (see `reach`)
                    continue
                m = pattern.match(text, run_start)
                if m is None:
                    continue
            matched += m.end() - m.start()
            start, end = m.span(group)
            if start >= end:
                continue
            if tail is not None and tail.match(text, end):
                # The pattern's bound cut the secret short: take the rest of its run.
                if not ext_from <= end <= ext_to:
                    ext_from, ext_to = end, tail_run.match(text, end).end()  # type: ignore[union-attr]
                    extended += ext_to - ext_from
                end = ext_to
            if kept_start <= start and end <= kept_end:
                skipped += 1  # inside a span this rule already holds: changes nothing
                continue
            if validator is not None:
                validated += m.end() - m.start()
                if not validator(m):
                    continue
            candidates.append((start, -end, index))
            if end > kept_end:
                kept_start, kept_end = start, end
        stats = t.stats
        stats.attempts += attempts
        stats.matched += matched
        stats.validated += validated
        stats.extended += extended
        stats.skipped += skipped

    def find(self, text: str, stats: ScanStats | None = None) -> tuple[Finding, ...]:
        """Non-overlapping secret spans in `text`, sorted by start. `stats`, when given,
        receives the work done."""
        t = _Text(text, stats if stats is not None else ScanStats())
        candidates: list[tuple[int, int, int]] = []  # (start, -end, rule index)
        for index in range(len(self.rules)):
            self._collect(index, t, candidates)
        if not candidates:
            return ()
        # Earliest, then longest, then first-listed rule names the span; anything that
        # overlaps it is folded in, so spans never overlap and nothing leaks at an edge.
        candidates.sort()
        findings: list[Finding] = []
        start, neg_end, index = candidates[0]
        end = -neg_end
        for c_start, c_neg_end, c_index in candidates[1:]:
            if c_start < end:
                end = max(end, -c_neg_end)
                continue
            findings.append(Finding(self.rules[index].name, start, end))
            start, end, index = c_start, -c_neg_end, c_index
        findings.append(Finding(self.rules[index].name, start, end))
        return tuple(findings)

    def redact(self, text: str) -> RedactionResult:
        findings = self.find(text)
        if not findings:
            return RedactionResult(text, ())
        parts: list[str] = []
        pos = 0
        for f in findings:
            parts.append(text[pos:f.start])
            parts.append(marker(f.rule))
            pos = f.end
        parts.append(text[pos:])
        return RedactionResult("".join(parts), findings)


DEFAULT_REDACTOR = Redactor()


def redact(text: str) -> str:
    """`text` with every secret the default rules find replaced by `[REDACTED:<rule>]`."""
    return DEFAULT_REDACTOR.redact(text).text
