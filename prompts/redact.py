"""Secret redaction: our own rule table in the style of gitleaks.

Every piece of untrusted text (card bodies, comments, chat history, logs, repository files,
tenant prompts) passes through `Redactor.redact` before it reaches an LLM or a log, so this
runs on every prompt and must cost little on text that holds no secret.

How it stays cheap (a few milliseconds per 200 KB of ordinary source or log text):
- Every scanned pattern starts with a literal (`sk-ant-`, `ghp_`, `AIza`, `-----BEGIN`,
  `://` ...), which `re` finds with a fast substring search. The "not glued to a longer word"
  check is a fixed-width lookbehind placed *after* the literal, because a pattern that starts
  with a lookbehind, a character class or a case-insensitive group loses that fast search.
- Rules keyed on a word that must match in any case (`password=`, `Authorization:`,
  `Bearer`, `?access_token=`) have `anchors`: small literal-first patterns run on the
  lowercased text (`token[a-z0-9_.-]*["']? *[=:]`). The rule's own pattern is then tried
  with `match` only at the start of the identifier around each anchor hit. Anchors shared by
  several rules are scanned once per text.
- `keywords` (gitleaks' trick) can still gate a scanned custom rule: it runs only when one of
  them occurs in the lowercased text.
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

import bisect
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

Validator = Callable[[re.Match[str]], bool]


@dataclass(frozen=True)
class RedactionRule:
    """One family of secrets.

    `group` names the part of a match that is the secret (0: the whole match); only that
    span is replaced. `validator` gets each match and returns False to skip it (an entropy
    or shape check).

    How the rule finds candidates:
    - plain: `pattern.finditer` over the text (start the pattern with a literal);
    - `keywords` (lowercase substrings): as plain, but only when one of them occurs in the
      lowercased text;
    - `anchors` (patterns over the LOWERCASED text, each starting with a literal): the rule
      is not scanned; for each anchor hit, `pattern.match` is tried at the start of the
      identifier (`[A-Za-z0-9_.-]+`) that contains the hit, so `pattern` must start there.
    """

    name: str
    pattern: re.Pattern[str]
    group: int | str = 0
    validator: Validator | None = None
    keywords: tuple[str, ...] = ()
    anchors: tuple[re.Pattern[str], ...] = ()

    def __post_init__(self) -> None:
        if any(k != k.lower() or not k for k in self.keywords):
            raise ValueError(f"rule {self.name!r}: keywords are non-empty and lowercase")
        if any(a.flags & re.IGNORECASE for a in self.anchors):
            raise ValueError(f"rule {self.name!r}: anchors run on lowercased text; "
                             "write them in lowercase instead of IGNORECASE")


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


_PLACEHOLDER = re.compile(
    r"""
    \$\{?[A-Za-z_]          # shell / compose variable: $TOKEN, ${TOKEN}
    | \$\(                  # command substitution
    | .*\{\{ | .*\{[\w.$@\[\]\-]*\} | .*%\(\w+\)s | .*%s   # templates, JSONPath, formats
    | <[^<>]*>              # <your-token-here>
    | \*{3,} | (?i:x{4,})   # already masked
    | (?i:(?:your|my)[_-]?(?:api[_-]?)?(?:key|token|secret|password)\w*)
    """,
    re.VERBOSE,
)
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


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value)) or len(set(value)) <= 2


def _looks_random(value: str) -> bool:
    """Letters and digits, or mixed case, with at least moderate entropy."""
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    mixed_case = any(c.isupper() for c in value) and any(c.islower() for c in value)
    if not ((has_digit and has_alpha) or mixed_case):
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


def _generic_value_ok(m: re.Match[str]) -> bool:
    key, value = m.group("key"), m.group("secret")
    if not _GENERIC_KEY.search(key):  # the "key" anchor also finds `monkey`, `keyboard`
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
    words = _words(key)
    strong = bool(words) and words[-1].lower() in _CREDENTIAL_NOUNS
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
    body = m.group(0)[3:]
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body)


def _not_placeholder(min_length: int) -> Validator:
    def check(m: re.Match[str]) -> bool:
        value = m.group("secret")
        return len(value) >= min_length and not _is_placeholder(value)

    return check


# --------------------------------------------------------------------------- the rule table


def _token(prefix: str, width: int, body: str) -> re.Pattern[str]:
    """`prefix` (`width` characters) then `body`, not glued on the left to more token
    characters; on the right the greedy `body` already consumes the rest of the token."""
    return re.compile(prefix + rf"(?<![A-Za-z0-9_\-].{{{width}}})" + body)


# Between a key and its value: an optional closing quote (escaped in JSON-in-JSON), then
# `=`, `:`, `:=` or `=>`, never `==` / `::`.
_ASSIGN = r"\\?[\"']?[ \t]*(?:=>|:=|:(?!:)|=(?!=))[ \t]*\\?[\"']?"


# anchor pattern -> (its literal word, whether its tail starts by consuming the rest of the
# identifier run). Hits are found with str.find (linear); when such a tail fails at one hit, it
# fails at every later hit of the same run (same remainder, same next character), so the
# search skips to the run's end instead of trying every hit: "keykeykey..." stays linear.
_ANCHOR_WORDS: dict[str, tuple[str, bool]] = {}
_RUN_TAIL = r"[a-z0-9_.\-]*+"


def _anchors(*words: str, tail: str) -> tuple[re.Pattern[str], ...]:
    patterns = tuple(re.compile(re.escape(w) + tail) for w in words)
    for w, pattern in zip(words, patterns, strict=True):
        _ANCHOR_WORDS[pattern.pattern] = (w, tail.startswith(_RUN_TAIL))
    return patterns


def _anchor_starts(anchor: re.Pattern[str], lowered: str, runs: list[int], run_ends: list[int]) -> set[int]:
    """Start of the identifier run holding each hit of `anchor` in `lowered`."""
    found: set[int] = set()
    known = _ANCHOR_WORDS.get(anchor.pattern)
    if known is None:  # an anchor made elsewhere: a plain scan
        hits: Iterable[int] = (m.start() for m in anchor.finditer(lowered))
        for h in hits:
            i = bisect.bisect_right(runs, h) - 1
            found.add(runs[i] if i >= 0 and h < run_ends[i] else h)
        return found
    word, skips = known
    pos = lowered.find(word)
    while pos >= 0:
        i = bisect.bisect_right(runs, pos) - 1
        inside = i >= 0 and pos < run_ends[i]
        if anchor.match(lowered, pos):
            found.add(runs[i] if inside else pos)
        nxt = run_ends[i] if inside and skips else pos + 1
        pos = lowered.find(word, max(nxt, pos + 1))
    return found


# A key word, the rest of its identifier, an optional closing quote, `=` or `:`, then six
# value characters (every rule that uses it needs at least that many) or a Python annotation
# followed by `=`. The value check keeps `token_count=12` or `key=foo` in a log from
# costing a `match` each.
_KEY_TAIL = (
    r"[a-z0-9_.\-]*+\\?[\"']?[ \t]*"
    r"(?:(?:=>|:=|[=:])[ \t]*[bru]{0,2}\\?[\"'`]?[^\s\"'`]{6}|:[ \t]*[a-z_][\w.\[\], |]{0,60}?=)"
)
_ASSIGNMENT_ANCHORS = _anchors("key", "secret", "token", "pass", "pwd", "credential",
                               tail=_KEY_TAIL)

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
        anchors=_anchors("secret", tail=_KEY_TAIL),
    ),
    RedactionRule(
        "stripe-api-key",
        re.compile(r"[sr]k_(?:live|test|prod)_[A-Za-z0-9]{16,}"),
        anchors=_anchors("k_", tail=r"(?:live|test|prod)_"),
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
            r"(?<=[?&#])(?i:access_token|refresh_token|id_token|auth_token|token|api_key"
            r"|apikey|api-key|key|sig|signature|x-amz-signature|x-amz-credential"
            r"|x-amz-security-token|x-goog-signature|x-goog-credential|client_secret"
            r"|password|passwd|secret)"
            r"=(?P<secret>[^&\s#'\"<>]+)"
        ),
        group="secret",
        validator=_not_placeholder(6),
        # x-amz-signature, x-goog-credential ... contain "sig", "credential" or "token".
        anchors=_ASSIGNMENT_ANCHORS + _anchors("sig", tail=_KEY_TAIL),
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
        anchors=_anchors("authorization", tail=r"[a-z0-9_.\-]*+\\?[\"']?[ \t]*[=:]"),
    ),
    RedactionRule(
        "bearer-token",
        re.compile(r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)"),
        group="secret",
        validator=_bearer_value_ok,
        anchors=_anchors("bearer", tail=r"[ \t]+[a-z0-9._~+/\-]{16}"),
    ),
    RedactionRule(
        "generic-assignment",
        re.compile(
            r"(?P<key>[A-Za-z0-9_.\-]++)\\?[\"']?[ \t]*"
            # A Python annotation may sit between key and value: `password: str = "..."`.
            r"(?::[ \t]*[A-Za-z_][\w.\[\], |]{0,60}?[ \t]*=(?!=)|=>|:=|:(?!:)|=(?!=))"
            r"[ \t]*(?:[bBrRuU]{1,2}(?=[\"']))?\\?"
            r"(?P<q>[\"'`])?"
            r"(?P<secret>(?(q)[^\"'`\s\\]{1,500}|[^\s\"'`,;&(){}\[\]<>\\]{1,500}+))"
            r"(?(q)\\?(?P=q)|(?![(\[]))"
        ),
        group="secret",
        validator=_generic_value_ok,
        anchors=_ASSIGNMENT_ANCHORS,
    ),
)


# --------------------------------------------------------------------------- the redactor

# Identifier runs, found once per text in one linear scan: an anchor hit maps to the start of
# the run that holds it, so each run is matched at most once per rule however many anchor
# hits it holds ("keykeykey..." used to start a match at every hit: quadratic).
_IDENT_RUN = re.compile(r"[A-Za-z0-9_.\-]+")


def _lower_same_length(text: str) -> str:
    """`text.lower()` with every offset kept: "İ" is the one character whose lowercase is two
    characters long; as "i" it still lets anchors match, and hits map back to `text`."""
    lowered = text.replace("\u0130", "i").lower()
    if len(lowered) != len(text):  # a future Unicode version adds another such character
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered


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

    def _matches(self, rule: RedactionRule, text: str, lowered: str,
                 anchor_hits: dict[tuple[str, int], list[int]]) -> Iterable[re.Match[str]]:
        if rule.keywords and not any(k in lowered for k in rule.keywords):
            return ()
        if not rule.anchors:
            return rule.pattern.finditer(text)
        if ("", 0) not in anchor_hits:
            spans = [m.span() for m in _IDENT_RUN.finditer(lowered)]
            anchor_hits[("", 0)] = [a for a, _ in spans]
            anchor_hits[("", 1)] = [b for _, b in spans]
        runs, run_ends = anchor_hits[("", 0)], anchor_hits[("", 1)]
        starts: set[int] = set()
        for anchor in rule.anchors:
            key = (anchor.pattern, anchor.flags)
            hits = anchor_hits.get(key)
            if hits is None:  # shared anchors are scanned once per text
                hits = anchor_hits[key] = sorted(_anchor_starts(anchor, lowered, runs, run_ends))
            starts.update(hits)
        return filter(None, (rule.pattern.match(text, s) for s in sorted(starts)))

    def find(self, text: str) -> tuple[Finding, ...]:
        """Non-overlapping secret spans in `text`, sorted by start."""
        lowered = _lower_same_length(text)
        anchor_hits: dict[tuple[str, int], list[int]] = {}
        candidates: list[tuple[int, int, int]] = []  # (start, -end, rule index)
        for index, rule in enumerate(self.rules):
            for m in self._matches(rule, text, lowered, anchor_hits):
                start, end = m.span(rule.group)
                if start < end and (rule.validator is None or rule.validator(m)):
                    candidates.append((start, -end, index))
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
