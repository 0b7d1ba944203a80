"""Definitions: the file that defines a name the card writes as code ranks ahead of files that
only use it; plain words and names defined everywhere boost nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.integrations.sources.base import SourceRequest
from cardloop.integrations.sources.ranking import BM25Index
from cardloop.integrations.sources.repository import RepositorySource, card_query
from cardloop.integrations.sources.repository.definitions import (
    MAX_DEFINING_FILES,
    Definitions,
    card_identifiers,
    definition_boosts,
)
from cardloop.prompts.card import Card, ContextKind
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import TokenCounter
from tests.repos import commit_files


def test_names_written_as_code_are_identifiers_and_plain_words_are_not() -> None:
    names = card_identifiers(["Session.verify ignores REQUESTS_CA_BUNDLE in compute_backoff",
                              "the retry policy caps RetryPolicy at getMaxDelay"])
    assert {"Session", "verify", "REQUESTS_CA_BUNDLE", "compute_backoff", "RetryPolicy", "getMaxDelay"} <= names
    assert not {"ignores", "retry", "policy", "caps", "the"} & names
    assert card_identifiers([""]) == set()


@pytest.mark.parametrize(("source", "name"), [
    ("class RetryPolicy:\n    pass\n", "RetryPolicy"),
    ("    async def compute_backoff(self):\n", "compute_backoff"),
    ("export function computeBackoff(n) {}\n", "computeBackoff"),
    ("func (s *Session) Verify() error {\n", "Verify"),
    ("pub(crate) fn verify_chain() {}\n", "verify_chain"),
    ("export interface DeliveryOptions {}\n", "DeliveryOptions"),
])
def test_definitions_in_several_languages(source: str, name: str) -> None:
    assert Definitions.of([("f", source)]).defining(name) == {"f"}


def test_a_use_is_not_a_definition_and_a_name_defined_everywhere_boosts_nothing() -> None:
    docs = [("a.py", "policy = RetryPolicy()\n"), ("b.py", "class RetryPolicy:\n    def run(self): ...\n")]
    docs += [(f"m{i}.py", "def run():\n    pass\n") for i in range(MAX_DEFINING_FILES)]
    defs = Definitions.of(docs)
    assert definition_boosts(defs, ["RetryPolicy.run is slow"]) == {"b.py": 2.0}  # `run`: in 4 files
    assert definition_boosts(defs, ["RetryPolicy"], weight=0.0) == {}


def test_a_source_ranks_the_defining_file_first(tmp_path: Path) -> None:
    repo = tmp_path / "remotes" / "acme" / "hooks"
    files = {"app/limits.py": "class RetryPolicy:\n    # caps the retry delay\n    max_delay = 3600\n"}
    for name in ("sender", "worker", "scheduler"):
        files[f"app/{name}.py"] = ("from app.limits import RetryPolicy\n\n"
                                   "policy = RetryPolicy()  # caps the retry delay, RetryPolicy\n")
    commit_files(repo, files)
    source = RepositorySource(tmp_path / "cache", clone_url_template=f"file://{tmp_path / 'remotes'}/{{repo}}",
                              counter=TokenCounter().count, depth=20, max_files=2)
    card = Card(id="H-1", title="RetryPolicy caps the retry delay too late", repo="acme/hooks")
    ranked = [i.title for i in source.gather(SourceRequest(card, Stage.CODING)).items
              if i.kind == ContextKind.SOURCE_FILE]
    # By text alone a user ranks first (it says RetryPolicy three times); the definition decides.
    assert BM25Index(list(files.items())).rank(card_query(card), 1)[0][0] != "app/limits.py"
    assert ranked[0] == "app/limits.py"
