"""BM25F ranking: tokenization, field weights, length normalization, boosts and the cache."""

from __future__ import annotations

import pytest

from cardloop.integrations.sources.ranking import (
    BM25Index,
    BM25Params,
    IndexCache,
    merge_queries,
    path_fields,
    stem,
    term_counts,
    tokenize,
)

DOCS = [
    ("app/webhooks/retry.py", "def compute_backoff(attempt):\n    return min(MAX_DELAY, 2 ** attempt)\n"),
    ("app/webhooks/signing.py", "import hmac\ndef sign(secret, body):\n    return hmac.new(secret, body).digest()\n"),
    ("app/invoices/pdf.py", "CURRENCY_SYMBOLS = {'EUR': '€'}\ndef render_invoice_pdf(invoice):\n    ...\n"),
    ("app/refunds.py", "def refund(payment, amount):\n    raise ValueError('refund exceeds payment')\n"),
    ("README.md", "Payments service: invoices, refunds, webhooks with retries and backoff.\n"),
    ("docs/operations.md", "How to operate the payments service. " * 40),
]


def test_tokenize_splits_identifiers_paths_and_dotted_names() -> None:
    assert tokenize("getHTTPResponse") == ["get", "http", "respons", "gethttpresponse"]
    assert tokenize("compute_backoff") == ["comput", "backoff", "compute_backoff"]
    assert tokenize("app/webhooks/retry.py") == ["app", "webhook", "retry", "py"]
    assert tokenize("app.webhooks.retry") == ["app", "webhook", "retry"]
    assert tokenize("The Retries of the RETRY") == ["retry", "retry"]  # stop words out, lowercased
    assert tokenize("TokenCounter") == ["token", "counter", "tokencounter"]
    assert tokenize("x = 1234567 + 404") == ["404"]  # single letters and long numbers carry nothing


def test_stemming_is_light_and_consistent() -> None:
    assert {stem(w) for w in ("cache", "caches", "cached", "caching")} == {"cach"}
    assert stem("retries") == stem("retry") == "retry"
    assert stem("excerpting") == stem("excerpt") == "excerpt"
    assert stem("running") == stem("run") == "run"
    assert stem("class") == "class" and stem("status") == "status"


def test_term_counts_count_repeats() -> None:
    counts = term_counts("retry retry_delay RetryDelay")
    assert counts["retry"] == 3 and counts["delay"] == 2
    assert counts["retry_delay"] == 1 and counts["retrydelay"] == 1


def test_path_fields_leave_the_extension_out() -> None:
    assert path_fields("app/webhooks/retry.py") == ("app/webhooks", "retry")
    assert path_fields("Makefile") == ("", "Makefile")
    assert path_fields(".github/workflows/ci.yml") == (".github/workflows", "ci")


def test_path_fields_keep_the_dots_before_the_extension() -> None:
    # Express names its tests after what they test: test/res.send.js is about res.send.
    assert path_fields("test/res.send.js") == ("test", "res.send")
    assert path_fields("src/button.test.tsx") == ("src", "button.test")
    assert path_fields(".eslintrc.yml") == ("", ".eslintrc")
    assert path_fields(".npmrc") == ("", ".npmrc")
    docs = [("test/res.send.js", "it('works', function () {})\n"),
            ("test/res.json.js", "it('replies with json', function () {})\n")]
    assert BM25Index(docs).rank("res.send ignores the status", 1)[0][0] == "test/res.send.js"


def test_obviously_relevant_file_ranks_first() -> None:
    index = BM25Index(DOCS)
    assert index.rank("refund larger than the payment", 1)[0][0] == "app/refunds.py"
    assert index.rank("wrong currency symbol on invoice PDFs", 1)[0][0] == "app/invoices/pdf.py"
    assert index.rank("HMAC signature", 1)[0][0] == "app/webhooks/signing.py"
    assert index.rank("compute_backoff is too slow", 1)[0][0] == "app/webhooks/retry.py"


def test_rank_returns_only_matches_best_first_with_stable_ties() -> None:
    index = BM25Index(DOCS)
    ranked = index.rank("payments", 10)
    assert {p for p, _ in ranked} == {"app/refunds.py", "README.md", "docs/operations.md"}
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert index.rank("nothing matches this zzzqqq", 5) == []
    twins = BM25Index([("b.py", "alpha"), ("a.py", "alpha")])
    assert [p for p, _ in twins.rank("alpha")] == ["a.py", "b.py"]


def test_name_and_path_fields_outweigh_a_passing_mention() -> None:
    filler = [(f"app/misc/mod_{i}.py", f"def task_{i}():\n    return {i}\n") for i in range(10)]
    docs = [("app/webhooks/retry.py", "def run():\n    pass\n"),
            ("app/misc/helpers.py", "def run():\n    # retry later\n    pass\n"), *filler]
    assert BM25Index(docs).rank("retry", 1)[0][0] == "app/webhooks/retry.py"
    assert BM25Index(docs).rank("webhooks", 1)[0][0] == "app/webhooks/retry.py"  # the directory counts too
    # The content-only baseline cannot see the name.
    assert [p for p, _ in BM25Index(docs, BM25Params.content_only()).rank("retry")] == ["app/misc/helpers.py"]


def test_a_file_is_scored_by_its_best_passage() -> None:
    # The hub mentions every word once, far apart; the module has them together.
    hub = "\n".join(["invoice"] + ["filler line"] * 100 + ["currency"] + ["filler line"] * 100 + ["symbol"])
    module = "def symbol_for(invoice):\n    return CURRENCY[invoice.currency].symbol\n" + "x = 1\n" * 150
    docs = [("docs/hub.md", hub), ("src/money.py", module)]
    params = BM25Params(path_weight=0.0, name_weight=0.0)
    assert BM25Index(docs, params).rank("invoice currency symbol", 1)[0][0] == "src/money.py"
    index = BM25Index(docs, params)
    assert index.best_lines("src/money.py", "currency symbol") == (1, 60)
    assert index.best_lines("docs/hub.md", "symbol") == (181, 240)
    assert index.best_lines("nowhere.py", "symbol") is None


def test_length_normalization_and_b() -> None:
    short = ("short.md", "webhook retry notes")
    long = ("long.md", "webhook retry notes " + "unrelated words about other things " * 50)
    both = [short, long]
    assert BM25Index(both).rank("webhook", 1)[0][0] == "short.md"
    flat = BM25Index(both, BM25Params(b=0.0, path_weight=0.0, name_weight=0.0, passage_lines=0)).rank("webhook")
    assert flat[0][1] == pytest.approx(flat[1][1])  # b = 0: length does not matter


def test_k1_saturates_repeated_terms() -> None:
    docs = [("once.txt", "timeout"), ("many.txt", "timeout " * 50)]
    index = BM25Index(docs, BM25Params(b=0.0, path_weight=0.0, name_weight=0.0, k1=1.2))
    scores = dict(index.rank("timeout"))
    assert scores["many.txt"] < 2.3 * scores["once.txt"]  # at most (k1 + 1) times, never 50 times


def test_boosts_reorder_but_never_bring_in_a_non_match() -> None:
    index = BM25Index(DOCS)
    plain = [p for p, _ in index.rank("webhooks", 3)]
    boosted = [p for p, _ in index.rank("webhooks", 3, boosts={plain[-1]: 10.0, "app/refunds.py": 10.0})]
    assert boosted[0] == plain[-1]
    assert "app/refunds.py" not in boosted


def test_exclude_and_weighted_queries() -> None:
    index = BM25Index(DOCS)
    ranked = index.rank("webhook", 5, exclude={"app/webhooks/retry.py"})
    assert "app/webhooks/retry.py" not in [p for p, _ in ranked]
    query = merge_queries(("invoice pdf", 2.0), ("refund refund", 0.5))
    assert query["invoic"] == 2.0 and 0.5 < query["refund"] < 1.0  # repeats count sublinearly
    assert index.rank(query, 1)[0][0] == "app/invoices/pdf.py"
    assert index.rank(merge_queries(("invoice pdf", 0.2), ("refund", 2.0)), 1)[0][0] == "app/refunds.py"


def test_long_queries_keep_their_most_telling_terms() -> None:
    index = BM25Index(DOCS, BM25Params(max_query_terms=3))
    weights = index.query_weights("hmac payment service webhooks invoice refund the of operate")
    assert len(weights) == 3
    assert "hmac" in weights  # in one document only: the most telling


def test_scores_touch_only_matching_documents() -> None:
    docs = [(f"pkg/mod_{i}.py", f"value_{i} = {i}\n") for i in range(2000)]
    docs.append(("pkg/special.py", "def rotate_webhook_secret():\n    ...\n"))
    index = BM25Index(docs)
    assert list(index.scores("rotate webhook secret")) == [2000]
    assert len(index) == 2001 and "pkg/special.py" in index


def test_index_cache_is_a_small_lru() -> None:
    cache: IndexCache[str, int] = IndexCache(max_entries=2)
    built: list[str] = []

    def build(key: str) -> int:
        built.append(key)
        return len(built)

    assert cache.get_or_build("a", lambda: build("a")) == 1
    assert cache.get_or_build("a", lambda: build("a")) == 1
    cache.get_or_build("b", lambda: build("b"))
    cache.get_or_build("a", lambda: build("a"))  # a is now the most recent
    cache.get_or_build("c", lambda: build("c"))  # evicts b
    assert cache.get("b") is None and cache.get("a") == 1
    assert built == ["a", "b", "c"]


def test_index_cache_bounded_by_bytes_evicts_the_least_recently_used() -> None:
    cache: IndexCache[str, bytes] = IndexCache(max_entries=10, max_bytes=100, size_of=len)
    cache.put("a", b"x" * 40)
    cache.put("b", b"x" * 40)
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("c", b"x" * 40)  # 120 bytes: b, the least recently used, goes
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert cache.nbytes == 80 and len(cache) == 2
    cache.put("a", b"x" * 10)  # replacing an entry charges its new size only
    assert cache.nbytes == 50
    # One entry over the bound by itself stays (the run using it would rebuild it every
    # activity otherwise), alone.
    cache.put("huge", b"x" * 500)
    assert len(cache) == 1 and cache.get("huge") is not None and cache.nbytes == 500
    cache.put("d", b"x" * 10)
    assert cache.get("huge") is None and cache.nbytes == 10


def test_index_cache_shrinks_when_its_bound_is_lowered() -> None:
    cache: IndexCache[str, bytes] = IndexCache(max_entries=4, size_of=len)
    for key in "abcd":
        cache.put(key, b"x" * 30)
    assert cache.nbytes == 120
    cache.resize(max_bytes=70)
    assert [k for k in "abcd" if cache.get(k) is not None] == ["c", "d"] and cache.nbytes == 60
    with pytest.raises(ValueError):
        IndexCache(max_bytes=1)  # bytes cannot be counted without size_of


def test_index_cache_makes_room_before_a_build() -> None:
    """An old index and the new one are not in memory together when the bound has no room for both."""
    cache: IndexCache[str, bytes] = IndexCache(max_entries=4, max_bytes=100, size_of=len)
    cache.put("a", b"x" * 40)
    cache.put("b", b"x" * 40)
    seen_during_build: list[int] = []

    def build() -> bytes:
        seen_during_build.append(len(cache))
        return b"x" * 50

    cache.get_or_build("c", build, expected_bytes=50)
    assert seen_during_build == [1]  # a (least recent) went before c was built; b stayed
    assert cache.get("a") is None and cache.get("b") is not None and cache.nbytes == 90
