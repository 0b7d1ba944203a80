from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from cardloop.prompts.tokens import TokenCounter, TokenizerError, load_encoding


def test_counts_text_containing_endoftext_instead_of_crashing(counter: TokenCounter) -> None:
    text = "before <|endoftext|> after <|fim_prefix|>"
    assert counter.raw(text) == len(load_encoding("cl100k_base").encode_ordinary(text))
    assert counter.raw(text) > 5


def test_cache_recounts_only_the_new_message() -> None:
    counter = TokenCounter()
    messages = [f"message number {i} with some words" for i in range(50)]
    for m in messages:
        counter.count(m)
    counter.reset_stats()
    for m in [*messages, "one new message"]:
        counter.count(m)
    assert counter.stats.misses == 1
    assert counter.stats.hits == 50


def test_the_cache_holds_at_most_its_entries_and_counts_what_it_pushed_out() -> None:
    counter = TokenCounter(max_entries=3)
    texts = [f"text {i}" for i in range(5)]
    for t in texts:
        counter.count(t)
    assert counter.entries == 3 and counter.stats.evictions == 2
    counter.reset_stats()
    assert counter.count(texts[0]) == counter.raw(texts[0])  # pushed out: counted again, same figure
    assert counter.stats.misses == 1 and counter.stats.evictions == 1


def test_calibration_scales_counts_up_and_shares_the_cache() -> None:
    base = TokenCounter()
    claude = base.with_calibration(1.3)
    text = "def handler(event):\n    return retry(event, attempts=5)\n"
    raw = base.count(text)
    assert claude.count(text) == -(-raw * 13 // 10)
    assert base.stats.hits >= 1  # the calibrated view hit the base counter's cache


def test_calibration_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="safety margin"):
        TokenCounter(calibration=0.9)


def test_encoding_without_bundled_vocabulary_is_refused_not_downloaded() -> None:
    with pytest.raises(TokenizerError, match="no bundled vocabulary"):
        load_encoding("o200k_base")
    with pytest.raises(TokenizerError, match="unknown token encoding"):
        load_encoding("no_such_encoding")


def test_vocabulary_loads_with_the_network_unreachable(tmp_path) -> None:
    """A fresh interpreter whose sockets all fail, with an empty tiktoken cache dir."""
    script = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise OSError("network disabled by test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from cardloop.prompts.tokens import TokenCounter
        print(TokenCounter("cl100k_base").raw("hello world, offline"))
    """)
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"),
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == TokenCounter().raw("hello world, offline") == 4
