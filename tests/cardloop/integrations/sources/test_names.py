"""File names: a file whose whole name the card spells ("Update README", "fix(res.send): ...")
ranks ahead of files that only share the card's other words; a name many files share boosts
nothing, and a file matching nothing is never brought in."""

from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.integrations.sources.base import SourceRequest
from cardloop.integrations.sources.ranking import BM25Index
from cardloop.integrations.sources.repository import RepositorySource, card_query
from cardloop.integrations.sources.repository.names import MAX_SHARING_FILES, FileNames
from cardloop.prompts.card import Card, ContextKind
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import TokenCounter
from tests.repos import commit_files


def test_a_file_is_named_when_all_its_name_words_are_in_the_card() -> None:
    names = FileNames(["README.md", "test/res.send.js", "lib/response.js", "src/requests/sessions.py",
                       "src/requests/_types.py", "Makefile", "docs/Makefile"])
    assert names.named(["Update README and remove extraneous images"]) == {"README.md"}
    assert names.named(["fix(res.send): add Content-Length"]) == {"test/res.send.js"}
    assert names.named(["fix: res is sent twice"]) == set()  # "send" is missing
    assert names.named(["sessions: fix hooks type"]) == {"src/requests/sessions.py", "src/requests/_types.py"}
    assert names.named(["Update Makefile rules"]) == {"Makefile", "docs/Makefile"}
    assert names.boosts(["Update README"]) == {"README.md": 2.0}
    assert names.boosts(["Update README"], factor=1.0) == {}


def test_a_title_naming_several_files_shares_the_boost_among_them() -> None:
    names = FileNames(["README.md", "Makefile", "docs/Makefile", "src/requests/sessions.py", "src/requests/_types.py",
                       "lib/jira.py", "lib/trello.py", "lib/comments.py"])
    assert names.boosts(["Update README"]) == {"README.md": 2.0}
    assert names.boosts(["Update Makefile rules"]) == pytest.approx({"Makefile": 5 / 3, "docs/Makefile": 5 / 3})
    three = names.boosts(["Jira, Trello: comments carry the marker"])
    assert three == pytest.approx(dict.fromkeys(["lib/jira.py", "lib/trello.py", "lib/comments.py"], 1.5))
    # More names, less each; never below no boost at all.
    assert 1.0 < names.boosts(["README, Makefile, sessions types, Jira, Trello, comments"])["README.md"] < 1.5


def test_a_name_many_files_share_names_none_of_them() -> None:
    paths = [f"examples/{n}/index.js" for n in range(MAX_SHARING_FILES + 1)] + ["lib/router/index.js"]
    assert FileNames(paths).named(["the index page 404s"]) == set()
    assert FileNames(paths[:MAX_SHARING_FILES]).named(["the index page 404s"]) == set(paths[:MAX_SHARING_FILES])


def test_a_source_ranks_the_named_file_first(tmp_path: Path) -> None:
    repo = tmp_path / "remotes" / "acme" / "site"
    files = {
        "README.md": "# Site\n\nRun it with make serve. The images live in docs.\n",
        "docs/assets.md": "Images: the logo and the screenshots.\nUpdate the images when the page changes.\n",
        "docs/build.md": "The build copies images; see the readme.\n",
        "docs/deploy.md": "Deploy with make deploy.\n",
    }
    commit_files(repo, files)
    source = RepositorySource(tmp_path / "cache", clone_url_template=f"file://{tmp_path / 'remotes'}/{{repo}}",
                              counter=TokenCounter().count, depth=20, max_files=1, doc_globs=())
    card = Card(id="S-1", title="Update README and remove extraneous images", repo="acme/site")
    ranked = [i.title for i in source.gather(SourceRequest(card, Stage.CODING)).items
              if i.kind == ContextKind.SOURCE_FILE]
    # By text alone the assets page ranks first (it says most of the card's words); the name decides.
    assert BM25Index(list(files.items())).rank(card_query(card), 1)[0][0] != "README.md"
    assert ranked == ["README.md"]
