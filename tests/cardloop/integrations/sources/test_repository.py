"""RepositorySource against real git repositories in tmp dirs, cloned over file:// (and one
loopback HTTP server that asks for credentials). Nothing here reaches the internet."""

from __future__ import annotations

import base64
import fcntl
import os
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cardloop.integrations.sources.base import SourceRequest, SourceResult
from cardloop.integrations.sources.repository import (
    PathResolver,
    RepositorySource,
    card_texts,
    find_mentions,
    glob_regex,
    indexable,
    render_file,
)
from cardloop.integrations.upstream import UpstreamError
from cardloop.prompts.card import Card, ContextItem, ContextKind, Message, ToolCall
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import TokenCounter
from tests.prompts.helpers import cpu_best

REPO = "acme/payments"
TOKEN = "ghs_S3cretT0kenValue0123456789abcdef"

RETRY_PY = '''"""Webhook delivery retries."""

import random
import time

MAX_DELAY = 300


def compute_backoff(attempt: int, base: float = 1.0) -> float:
    """Exponential backoff with jitter for webhook redelivery."""
    delay = base * 2 ** attempt
    return min(MAX_DELAY, delay) + random.random()


def deliver_with_retry(send, payload, attempts: int = 5):
    for attempt in range(attempts):
        if send(payload):
            return True
        time.sleep(compute_backoff(attempt))
    return False
'''

FILES: dict[str, str] = {
    "README.md": "# Payments\n\nInvoices, refunds and webhooks for the shop.\n",
    "services/billing/app/__init__.py": "",
    "services/billing/app/webhooks/__init__.py": "",
    "services/billing/app/webhooks/retry.py": RETRY_PY,
    "services/billing/app/webhooks/signing.py": (
        "import hmac\n\n\ndef sign(secret: bytes, body: bytes) -> str:\n"
        "    return hmac.new(secret, body, 'sha256').hexdigest()\n"
    ),
    "services/billing/app/invoices/pdf.py": (
        "from decimal import Decimal\n\nCURRENCY_SYMBOLS = {'EUR': '€', 'USD': '$', 'GBP': '£'}\n\n\n"
        "def render_invoice_pdf(invoice) -> bytes:\n"
        "    symbol = CURRENCY_SYMBOLS[invoice.currency]\n"
        "    total = f'{symbol}{invoice.total:.2f}'\n"
        "    return draw_pdf(invoice.lines, total, currency_symbol=symbol)\n"
    ),
    "services/billing/app/refunds.py": (
        "def refund(payment, amount):\n    if amount > payment.amount:\n"
        "        raise ValueError('refund exceeds payment')\n    return payment.refund(amount)\n"
    ),
    "tests/webhooks/test_retry.py": (
        "from app.webhooks.retry import compute_backoff\n\n\n"
        "def test_backoff_is_capped():\n    assert compute_backoff(20) <= 301\n\n\n"
        "def test_backoff_grows():\n    assert compute_backoff(3) > compute_backoff(1)\n"
    ),
    "docs/adr/0001-record-decisions.md": "# 1. Record architecture decisions\n\nStatus: Accepted\n",
    "docs/adr/0002-use-celery.md": "# 2. Use Celery for webhooks\n\nStatus: Superseded by 0004\n",
    "docs/adr/0003-money-as-decimal.md": "# 3. Money as Decimal\n\nStatus: Accepted\n\nNever floats.\n",
    "docs/adr/0004-temporal-for-webhooks.md": "# 4. Temporal for webhook delivery\n\nStatus: Accepted\n",
    "docs/vendor/stripe.md": "# Stripe notes\n\nWebhook signatures use HMAC SHA-256; retries for 3 days.\n",
    "pyproject.toml": '[project]\nname = "payments"\ndependencies = ["httpx>=0.27,<1", "temporalio>=1.35"]\n',
    "web/package.json": '{"name": "web", "dependencies": {"react": "^18.2.0"}}\n',
    "web/package-lock.json": '{"lockfileVersion": 3, "packages": {"retry": "webhook backoff retry"}}\n',
    "node_modules/retry/index.js": "// webhook retry backoff compute_backoff retry retry\n",
    "web/dist/app.min.js": "function retry(){/* webhook backoff */}\n",
}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.email=test@example.com", "-c", "user.name=Test", "-c", "init.defaultBranch=main",
         "-c", "protocol.file.allow=always", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    )
    return proc.stdout


@dataclass
class Remote:
    """A repository served over file:// as <root>/<owner>/<name>."""

    root: Path
    path: Path

    @property
    def url_template(self) -> str:
        return f"file://{self.root}/{{repo}}"

    def commit(self, files: dict[str, str], message: str, branch: str = "main") -> str:
        if git(self.path, "symbolic-ref", "--short", "HEAD").strip() != branch:
            git(self.path, "checkout", "-q", branch)
        for rel, text in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD").strip()


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    root = tmp_path / "remotes"
    path = root / REPO
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    r = Remote(root, path)
    r.commit(FILES, "Initial payments service")
    (path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0binary webhook retry")
    r.commit({"services/billing/app/refunds.py": FILES["services/billing/app/refunds.py"] + "\n# partial refunds\n"},
             "Partial refunds")
    git(path, "checkout", "-q", "-b", "feature/retry-cap")
    r.commit({"services/billing/app/webhooks/retry.py": RETRY_PY.replace("MAX_DELAY = 300", "MAX_DELAY = 60")},
             "Lower the webhook retry cap", branch="feature/retry-cap")
    git(path, "checkout", "-q", "main")
    return r


@pytest.fixture
def source(tmp_path: Path, remote: Remote, counter: TokenCounter) -> RepositorySource:
    return RepositorySource(tmp_path / "cache", clone_url_template=remote.url_template, counter=counter.count,
                            depth=10, git_timeout=30)


def card(**fields: object) -> Card:
    defaults: dict[str, object] = {"id": "PAY-1", "title": "Something", "repo": REPO, "branch": "main"}
    defaults.update(fields)
    return Card.model_validate(defaults)


def gather(source: RepositorySource, c: Card) -> SourceResult:
    return source.gather(SourceRequest(c, Stage.CODING))


def files_of(result: SourceResult) -> list[ContextItem]:
    return [i for i in result.items if i.kind == ContextKind.SOURCE_FILE]


def paths_of(result: SourceResult, kind: ContextKind = ContextKind.SOURCE_FILE) -> list[str]:
    return [i.title or "" for i in result.items if i.kind == kind]


# --- checkout ------------------------------------------------------------------------------


def test_clone_then_cached_fetch_sees_a_new_commit(remote: Remote, tmp_path: Path, counter: TokenCounter) -> None:
    source = RepositorySource(tmp_path / "cache", clone_url_template=remote.url_template, counter=counter.count,
                              depth=1)
    c = card(title="Webhook retry backoff", body="compute_backoff delays are too long")
    first = gather(source, c)
    retry = next(i for i in files_of(first) if i.title == "services/billing/app/webhooks/retry.py")
    sha1 = git(remote.path, "rev-parse", "main").strip()
    assert retry.source == f"{REPO}@{sha1[:12]}:services/billing/app/webhooks/retry.py"
    assert "   6 | MAX_DELAY = 300" in retry.content
    assert retry.created_at is not None
    checkout = tmp_path / "cache" / REPO
    assert (checkout / ".git" / "shallow").exists()  # a shallow clone: one commit of three
    assert git(checkout, "rev-list", "--count", "HEAD").strip() == "1"

    sha2 = remote.commit({"services/billing/app/webhooks/retry.py": RETRY_PY.replace("300", "120")}, "Cap at 120")
    second = gather(source, c)
    retry = next(i for i in files_of(second) if i.title == "services/billing/app/webhooks/retry.py")
    assert retry.source.startswith(f"{REPO}@{sha2[:12]}:")
    assert "   6 | MAX_DELAY = 120" in retry.content
    # The same cache directory was updated in place, not cloned next to the old one.
    assert sorted(p.name for p in (tmp_path / "cache" / "acme").iterdir()) == ["payments"]
    assert (tmp_path / "cache" / ".locks" / "acme" / "payments.lock").is_file()
    assert git(checkout, "remote", "get-url", "origin").strip() == f"file://{remote.root}/{REPO}"


def test_every_repository_has_its_own_checkout_and_lock(remote: Remote, source: RepositorySource) -> None:
    # "acme/payments.lock" once cloned where "acme/payments" kept its lock: one of the two then
    # failed with IsADirectoryError on every gather, whichever came first.
    twin = remote.root / f"{REPO}.lock"
    twin.mkdir(parents=True)
    git(twin, "init", "-q", "-b", "main")
    Remote(remote.root, twin).commit({"TWIN.md": "the other repository\n"}, "Twin")
    for repo in (f"{REPO}.lock", REPO, f"{REPO}.lock"):
        checkout = source.checkout(repo, "main")
        assert (checkout.path / ("TWIN.md" if repo.endswith(".lock") else "README.md")).is_file()
    paths = {source.checkouts.path(r) for r in (REPO, f"{REPO}.lock")}
    locks = {source.checkouts.lock_path(r) for r in (REPO, f"{REPO}.lock")}
    assert len(paths) == 2 and len(locks) == 2 and not paths & locks


def test_branches_share_one_checkout(source: RepositorySource) -> None:
    feature = source.checkout(REPO, "feature/retry-cap")
    assert "MAX_DELAY = 60" in (feature.path / "services/billing/app/webhooks/retry.py").read_text()
    main = source.checkout(REPO, "main")
    assert main.path == feature.path and main.sha != feature.sha
    assert "MAX_DELAY = 300" in (main.path / "services/billing/app/webhooks/retry.py").read_text()
    default = source.checkout(REPO, None)  # the remote's default branch
    assert default.sha == main.sha


def test_missing_branch_is_not_retryable(source: RepositorySource, tmp_path: Path) -> None:
    with pytest.raises(UpstreamError) as err:  # on the first clone
        gather(source, card(branch="no-such-branch"))
    assert not err.value.retryable
    assert err.value.message == f"branch no-such-branch not found in {REPO}"
    assert not (tmp_path / "cache" / REPO).exists()  # no half clone left behind

    gather(source, card())
    with pytest.raises(UpstreamError) as err:  # on a fetch into the cached checkout
        gather(source, card(branch="gone"))
    assert not err.value.retryable
    assert err.value.message == f"branch gone not found in {REPO}"


def test_missing_repository_is_not_retryable(source: RepositorySource) -> None:
    with pytest.raises(UpstreamError) as err:
        gather(source, card(repo="acme/nothing-here"))
    assert not err.value.retryable


def test_card_without_repository_gives_a_note(source: RepositorySource) -> None:
    result = gather(source, Card(id="X-1", title="No repo"))
    assert result.items == ()
    assert result.notes and "no repository" in result.notes[0]


@pytest.mark.parametrize(("repo", "branch"), [("acme/..", "main"), ("../etc", "main"),
                                              (REPO, "--upload-pack=touch /tmp/pwned"), (REPO, "a..b"),
                                              # `$` once let a trailing newline through
                                              (REPO, "main\n"), (REPO + "\n", "main"), ("acme\n/api", "main")])
def test_unsafe_names_are_refused(source: RepositorySource, repo: str, branch: str) -> None:
    with pytest.raises(UpstreamError) as err:
        source.checkout(repo, branch)
    assert not err.value.retryable
    assert "invalid" in err.value.message  # refused by name, before git ever ran


def test_token_never_appears_in_errors(tmp_path: Path, counter: TokenCounter) -> None:
    # Nothing listens on port 9: git fails fast, and its message names the URL it tried.
    source = RepositorySource(tmp_path / "cache", clone_url_template="https://127.0.0.1:9/{repo}.git",
                              token=TOKEN, counter=counter.count, git_timeout=30)
    with pytest.raises(UpstreamError) as err:
        gather(source, card())
    assert err.value.retryable  # a connection failure may pass
    for text in (str(err.value), err.value.message, repr(err.value), repr(source)):
        assert TOKEN not in text
        assert "x-access-token:" not in text.replace("x-access-token:***", "")
    assert "127.0.0.1" in err.value.message


class _AuthServer(ThreadingHTTPServer):
    seen: list[str]


class _AuthHandler(BaseHTTPRequestHandler):
    server: _AuthServer

    def do_GET(self) -> None:
        auth = self.headers.get("Authorization")
        if auth is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.server.seen.append(auth)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def auth_server() -> Iterator[_AuthServer]:
    server = _AuthServer(("127.0.0.1", 0), _AuthHandler)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_token_is_sent_as_x_access_token_and_scrubbed(
    tmp_path: Path, counter: TokenCounter, auth_server: _AuthServer
) -> None:
    port = auth_server.server_address[1]
    source = RepositorySource(tmp_path / "cache", clone_url_template=f"http://127.0.0.1:{port}/{{repo}}.git",
                              token=TOKEN, counter=counter.count, git_timeout=30)
    with pytest.raises(UpstreamError) as err:
        gather(source, card())
    assert auth_server.seen, "git never sent credentials"
    scheme, _, value = auth_server.seen[0].partition(" ")
    assert scheme == "Basic" and base64.b64decode(value).decode() == f"x-access-token:{TOKEN}"
    assert not err.value.retryable  # 404: the repository is not there (or not for this token)
    assert TOKEN not in str(err.value) and TOKEN not in err.value.message


def test_lock_serializes_checkouts(source: RepositorySource, tmp_path: Path) -> None:
    source.checkout(REPO, "main")  # the lock file exists from here on
    lock_path = tmp_path / "cache" / ".locks" / "acme" / "payments.lock"
    done = threading.Event()
    results: list[SourceResult] = []

    def run() -> None:
        results.append(gather(source, card(branch="feature/retry-cap", title="retry cap")))
        done.set()

    # Another holder (as another worker process would) keeps the checkout busy.
    with open(lock_path, "r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        thread = threading.Thread(target=run)
        thread.start()
        assert not done.wait(0.5), "gather ran while another holder had the lock"
        fcntl.flock(held, fcntl.LOCK_UN)
    thread.join(30)
    assert done.is_set() and results


def test_concurrent_gathers_on_two_branches_each_see_their_own_tree(source: RepositorySource) -> None:
    results: dict[str, str] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def run(branch: str) -> None:
        try:
            start.wait()
            for _ in range(3):
                result = gather(source, card(branch=branch, title="webhook retry backoff MAX_DELAY"))
                retry = next(i for i in files_of(result) if i.title.endswith("webhooks/retry.py"))
                results.setdefault(branch, retry.content)
                assert retry.content == results[branch]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(b,)) for b in ("main", "feature/retry-cap") * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert "MAX_DELAY = 300" in results["main"]
    assert "MAX_DELAY = 60" in results["feature/retry-cap"]


def test_unusable_cache_is_replaced_by_a_fresh_clone(source: RepositorySource, tmp_path: Path) -> None:
    checkout = source.checkout(REPO, "main")
    (checkout.path / ".git" / "index.lock").write_text("")  # a crash in the middle of a checkout
    again = source.checkout(REPO, "feature/retry-cap")
    assert "MAX_DELAY = 60" in (again.path / "services/billing/app/webhooks/retry.py").read_text()


# --- what gets chosen ----------------------------------------------------------------------


def test_mentioned_files_come_first_most_recent_first(source: RepositorySource) -> None:
    traceback = (
        "CI failed:\nTraceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/site-packages/celery/app/task.py", line 411, in __call__\n'
        '  File "/srv/app/services/billing/app/webhooks/retry.py", line 12, in compute_backoff\n'
        "    return min(MAX_DELAY, delay) + random.random()\n"
        "TypeError: unsupported operand type(s)\n"
    )
    c = card(
        title="Invoice totals",
        body="Invoices show the wrong currency symbol.",
        history=(
            Message(role="user", content=traceback),
            Message(role="assistant", content="Looking at refunds too: services.billing.app.refunds"),
            Message(role="user", content="Now FAILED tests/webhooks/test_retry.py::test_backoff_is_capped - assert"),
        ),
    )
    result = gather(source, c)
    paths = paths_of(result)
    assert paths[:3] == [
        "tests/webhooks/test_retry.py",            # the latest message
        "services/billing/app/refunds.py",        # a dotted module path, one message earlier
        "services/billing/app/webhooks/retry.py",  # the traceback's frame, deep in the tree
    ]
    # Then the ranked files: the invoice PDF module matches the card's words best.
    assert paths[3] == "services/billing/app/invoices/pdf.py"
    assert len(paths) == len(set(paths))
    assert any("named in the card" in n for n in result.notes)


def test_mentions_resolve_paths_as_tools_write_them() -> None:
    files = ["services/billing/app/webhooks/retry.py", "services/billing/app/refunds.py",
             "web/src/components/Cart.tsx", "tests/webhooks/test_retry.py", "a/util.py", "b/util.py", "c/util.py",
             "main.go"]
    resolver = PathResolver(files)
    texts = [
        "see https://github.com/acme/payments/blob/main/services/billing/app/refunds.py#L3",
        "at Cart (/build/web/src/components/Cart.tsx:88:13)\nutil.py broke",
        "panic: nil map\n\t/go/src/app/main.go:42 +0x1d",
    ]
    mentions = find_mentions(texts, resolver)
    by_path = {m.path: m for m in mentions}
    assert [m.path for m in mentions] == ["main.go", "web/src/components/Cart.tsx", "services/billing/app/refunds.py"]
    assert by_path["main.go"].lines == [42]
    assert by_path["web/src/components/Cart.tsx"].lines == [88]
    assert by_path["services/billing/app/refunds.py"].lines == [3]
    # "util.py" names three files: a guess, not a mention.
    assert not any(p.endswith("util.py") for p in by_path)
    assert resolver.resolve_module("app.webhooks.retry.compute_backoff") == ["services/billing/app/webhooks/retry.py"]
    assert resolver.resolve_module("retry.compute_backoff") == []
    # A unique bare name is a mention; a library's frame is not, however its path ends.
    assert resolver.resolve("refunds.py") == ["services/billing/app/refunds.py"]
    assert PathResolver(["app/task.py"]).resolve("/usr/lib/python3.11/site-packages/celery/app/task.py") == []
    assert PathResolver(["app/task.py"]).resolve("/srv/app/task.py") == ["app/task.py"]
    assert PathResolver(["src/app/task.py"]).resolve("/other/task.py") == []  # only the name agrees


def test_tool_call_inputs_count_as_mentions() -> None:
    call = ToolCall(id="t1", name="read_file", input={"path": "services/billing/app/refunds.py"})
    c = card(history=(
        Message(role="assistant", content="", tool_calls=(call,)),
        Message(role="tool", tool_call_id="t1", content="def refund(...)"),
    ))
    mentions = find_mentions(card_texts(c), PathResolver(list(FILES)))
    assert [m.path for m in mentions] == ["services/billing/app/refunds.py"]


def test_bm25_ranks_the_obviously_relevant_file_first(source: RepositorySource) -> None:
    result = gather(source, card(title="Refund exceeds payment error", body="Refunds larger than the payment fail"))
    assert paths_of(result)[0] == "services/billing/app/refunds.py"
    result = gather(source, card(title="Wrong currency symbol on invoice PDFs"))
    assert paths_of(result)[0] == "services/billing/app/invoices/pdf.py"


def test_the_latest_turn_steers_the_ranking(source: RepositorySource) -> None:
    earlier = Message(role="user", content="Are the retry delays right?")
    c = card(title="Webhook problems", history=(earlier,))
    assert paths_of(gather(source, c))[0] == "services/billing/app/webhooks/retry.py"
    later = Message(role="user", content="Delays are fine. But outgoing webhooks are signed with the wrong HMAC secret")
    c = card(title="Webhook problems", history=(earlier, later))
    assert paths_of(gather(source, c))[0] == "services/billing/app/webhooks/signing.py"


def test_files_changed_on_the_branch_are_boosted(tmp_path: Path, remote: Remote, counter: TokenCounter) -> None:
    source = RepositorySource(tmp_path / "c6", clone_url_template=remote.url_template, counter=counter.count,
                              branch_boost=50.0)
    query = {"title": "webhooks: sign with the HMAC secret"}
    on_main = gather(source, card(**query))
    assert paths_of(on_main)[0] == "services/billing/app/webhooks/signing.py"
    assert any("main is the base branch" in n for n in on_main.notes)
    on_feature = gather(source, card(branch="feature/retry-cap", **query))
    # The branch changed retry.py (found as main's merge base through a shallow fetch of main).
    assert paths_of(on_feature)[0] == "services/billing/app/webhooks/retry.py"
    assert any(n == "changed on feature/retry-cap since main (boosted): services/billing/app/webhooks/retry.py"
               for n in on_feature.notes), on_feature.notes
    # A boost reorders; it never brings in a file that matches nothing.
    assert "services/billing/app/refunds.py" not in paths_of(on_feature)


def test_vendored_generated_lock_and_binary_files_are_never_ranked(source: RepositorySource) -> None:
    result = gather(source, card(title="webhook retry backoff retry", body="retry retry logo png binary"))
    paths = paths_of(result)
    for bad in ("node_modules/retry/index.js", "web/dist/app.min.js", "web/package-lock.json", "logo.png"):
        assert bad not in paths
    assert indexable("services/app.py") and not indexable("vendor/x/y.go") and not indexable("a/b/c.min.js")
    assert not indexable("yarn.lock") and not indexable("pkg/api_pb2.py")


def test_max_files_limits_source_files(tmp_path: Path, remote: Remote, counter: TokenCounter) -> None:
    source = RepositorySource(tmp_path / "c2", clone_url_template=remote.url_template, counter=counter.count,
                              max_files=2)
    result = gather(source, card(title="webhook retry invoices refunds signing payments"))
    assert len(files_of(result)) == 2


def test_long_file_is_excerpted_around_the_mentioned_line(
    tmp_path: Path, remote: Remote, counter: TokenCounter
) -> None:
    body = [f"def helper_{i}(value):\n    return value + {i}\n" for i in range(600)]
    body[450] = "def reconcile_ledger(entries):\n    raise LedgerMismatch('ledger totals differ')\n"
    text = '"""Ledger reconciliation."""\nimport decimal\n\n' + "".join(body)
    remote.commit({"services/billing/app/ledger.py": text}, "Ledger helpers")
    line = text.split("\n").index("    raise LedgerMismatch('ledger totals differ')") + 1
    source = RepositorySource(tmp_path / "c3", clone_url_template=remote.url_template, counter=counter.count,
                              max_file_tokens=400)
    c = card(title="Ledger mismatch", history=(Message(role="user", content=(
        f'Traceback (most recent call last):\n  File "/app/services/billing/app/ledger.py", line {line}, '
        "in reconcile_ledger\nLedgerMismatch: ledger totals differ")),))
    result = gather(source, c)
    item = files_of(result)[0]
    assert item.title == "services/billing/app/ledger.py"
    assert counter.count(item.content) <= 400
    lines = item.content.split("\n")
    assert lines[0] == '   1 | """Ledger reconciliation."""'  # the head
    assert f"{line:>4} |     raise LedgerMismatch('ledger totals differ')" in lines
    assert f"{line - 1:>4} | def reconcile_ledger(entries):" in lines  # its enclosing function
    assert any(ln.startswith("[... ") and ln.endswith(" lines cut ...]") for ln in lines)
    assert any(n.startswith("excerpted to 400 tokens: services/billing/app/ledger.py") for n in result.notes)


def test_render_file_without_anchors_keeps_query_matches(counter: TokenCounter) -> None:
    text = "\n".join(f"x_{i} = {i}" for i in range(3000)) + "\nWEBHOOK_SECRET_ROTATION = True\n" + \
        "\n".join(f"y_{i} = {i}" for i in range(3000))
    out, cut = render_file(text, 300, counter.count, query={"webhook": 1.0, "rotation": 1.0})
    assert cut and counter.count(out) <= 300
    assert "3001 | WEBHOOK_SECRET_ROTATION = True" in out
    short, cut = render_file("a = 1\nb = 2\n", 300, counter.count)
    assert not cut and short == "   1 | a = 1\n   2 | b = 2"


def test_adrs_newest_first_superseded_last_and_limited(source: RepositorySource, tmp_path: Path,
                                                       remote: Remote, counter: TokenCounter) -> None:
    result = gather(source, card(title="anything"))
    assert paths_of(result, ContextKind.ADR) == [
        "docs/adr/0004-temporal-for-webhooks.md", "docs/adr/0003-money-as-decimal.md",
        "docs/adr/0001-record-decisions.md",
    ]
    adr = next(i for i in result.items if i.kind == ContextKind.ADR)
    assert adr.content.startswith("# 4. Temporal for webhook delivery")
    assert adr.source.startswith(f"{REPO}@")
    wide = RepositorySource(tmp_path / "c4", clone_url_template=remote.url_template, counter=counter.count,
                            max_adrs=10, adr_globs=["docs/adr/*.md"])
    assert paths_of(gather(wide, card(title="x")), ContextKind.ADR)[-1] == "docs/adr/0002-use-celery.md"
    # ADRs are not repeated as source files, even when the card is all about them.
    assert not any(p.startswith("docs/adr/") for p in paths_of(gather(source, card(title="Temporal webhook ADR"))))


def test_manifests_and_vendor_docs_are_library_docs(source: RepositorySource) -> None:
    result = gather(source, card(title="Stripe webhook signature"))
    docs = paths_of(result, ContextKind.LIBRARY_DOC)
    assert docs == ["pyproject.toml", "web/package.json", "docs/vendor/stripe.md"]
    pyproject = next(i for i in result.items if i.title == "pyproject.toml")
    assert '"httpx>=0.27,<1"' in pyproject.content
    assert "docs/vendor/stripe.md" not in paths_of(result)


def test_glob_semantics() -> None:
    assert glob_regex("docs/adr/**/*.md").match("docs/adr/0001-x.md")
    assert glob_regex("docs/adr/**/*.md").match("docs/adr/old/0001-x.md")
    assert not glob_regex("docs/adr/*.md").match("docs/adr/old/0001-x.md")
    assert not glob_regex("docs/adr/**/*.md").match("src/docs/adr/0001-x.md")


def test_index_is_built_once_per_sha(source: RepositorySource, remote: Remote) -> None:
    gather(source, card(title="retry"))
    snapshots = source._snapshots
    assert len(snapshots) == 1
    gather(source, card(title="refund"))
    assert len(snapshots) == 1  # same sha: reused
    remote.commit({"NEW.md": "new"}, "New file")
    gather(source, card(title="refund"))
    assert len(snapshots) == 2


def test_git_is_never_prompting(tmp_path: Path, counter: TokenCounter, monkeypatch: pytest.MonkeyPatch) -> None:
    # A worker's own askpass or credential setup must not hang or leak into a clone.
    monkeypatch.setenv("GIT_ASKPASS", "/bin/false")
    source = RepositorySource(tmp_path / "c5", clone_url_template="https://127.0.0.1:9/{repo}.git",
                              counter=counter.count, git_timeout=30)
    env = source.checkouts.env()
    assert "GIT_ASKPASS" not in env and env["GIT_TERMINAL_PROMPT"] == "0"
    assert os.environ["GIT_ASKPASS"] == "/bin/false"


def fake_git(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-git"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_a_hung_git_times_out_as_retryable(tmp_path: Path, counter: TokenCounter) -> None:
    # The fake git starts a child that would outlive it: the whole process group is killed.
    git_bin = fake_git(tmp_path, f"sleep 30 &\necho $! > {tmp_path}/child.pid\nsleep 30\n")
    source = RepositorySource(tmp_path / "cache", git=git_bin, git_timeout=0.5, counter=counter.count)
    started = time.monotonic()
    with pytest.raises(UpstreamError) as err:
        source.checkout(REPO, "main")
    assert err.value.retryable and "timed out" in err.value.message
    assert time.monotonic() - started < 10
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("git's child process survived the timeout")


def test_git_missing_is_not_retryable(tmp_path: Path, counter: TokenCounter) -> None:
    source = RepositorySource(tmp_path / "cache", git=str(tmp_path / "no-git-here"), counter=counter.count)
    with pytest.raises(UpstreamError) as err:
        source.checkout(REPO, "main")
    assert not err.value.retryable


def test_the_token_is_never_on_the_command_line(tmp_path: Path, counter: TokenCounter) -> None:
    record = tmp_path / "argv"
    git_bin = fake_git(tmp_path, f'printf "%s\\n" "$@" >> {record}\necho "fatal: nope" >&2\nexit 128\n')
    source = RepositorySource(tmp_path / "cache", git=git_bin, token=TOKEN, counter=counter.count)
    with pytest.raises(UpstreamError):
        source.checkout(REPO, "main")
    argv = record.read_text()
    assert "https://github.com/acme/payments.git" in argv and TOKEN not in argv
    env = source.checkouts.env()  # git gets it as a URL rewrite through its environment
    keys = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))}
    assert keys[f"url.https://x-access-token:{TOKEN}@github.com/.insteadOf"] == "https://github.com/"
    assert keys["credential.helper"] == ""
    assert source.checkouts.scrub(f"fatal: unable to access 'https://x-access-token:{TOKEN}@github.com/a/b.git/'") == (
        "fatal: unable to access 'https://***@github.com/a/b.git/'")


# --- mentions on adversarial texts: linear, not quadratic -------------------------------------


@pytest.mark.parametrize("family", ["one run", "base64", "segments"])
def test_a_long_run_of_path_characters_costs_mentions_about_its_length(family: str) -> None:
    """_NODE_ID has nothing to anchor it: finditer matched from each position of a run of path
    characters to the run's end (16,000 characters of "a": 2.4 s; 16,000 of base64: 1.2 s);
    _PATH from each segment of "a/a/a/..." to the chain's end (16,000 characters: 3.8 s)."""
    from cardloop.integrations.sources.repository.mentions import PathResolver, find_mentions

    rng = random.Random(7)
    size = 12_000
    text = {"one run": "a" * size, "segments": "a/" * (size // 2),
            "base64": base64.b64encode(rng.randbytes(size * 3 // 4)).decode()}[family]
    plain = ("lorem ipsum " * size)[:size]
    resolver = PathResolver(["tests/test_x.py"])
    took = cpu_best(lambda t: find_mentions([t], resolver), text, reps=3)
    # Same length: linear, about the same time; before, hundreds of times more.
    assert took <= 10 * max(cpu_best(lambda t: find_mentions([t], resolver), plain, reps=3), 0.002)
    found = find_mentions([text + " tests/test_x.py::test_y"], resolver)
    assert [(m.path, m.names) for m in found] == [("tests/test_x.py", ["test_y"])]


def test_node_ids_and_paths_are_found_as_finditer_finds_them() -> None:
    from cardloop.integrations.sources.repository.mentions import _NODE_ID, _PATH, _node_ids, _paths

    for text in ("a.py::t/b.py::u", "x//tests/a.py::T::t[1] and c/d.py::e", "a.py::t@b.py::u", "/a/b.py::c"):
        assert [m.span() for m in _node_ids(text)] == [m.span() for m in _NODE_ID.finditer(text)]
    rng = random.Random(3)
    for _ in range(3_000):  # the shapes the skips reason about: chains, drives, "//", line suffixes
        text = "".join(rng.choice(["a", "/", "//", "C:", ":", ".py", ".", "-", " ", "(", ":12", "#L3"])
                       for _ in range(rng.randint(0, 16)))
        assert [(m.span(), m.groups()) for m in _paths(text)] == [(m.span(), m.groups()) for m in _PATH.finditer(text)]
