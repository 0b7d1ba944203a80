"""The history prior: among the files that match a card, those the checkout's recent commits
changed most rank higher; a file that matches nothing is never brought in; weight 0 is off."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cardloop.integrations.sources.base import SourceRequest
from cardloop.integrations.sources.repository import RepositorySource
from cardloop.integrations.sources.repository.history_prior import (
    RecentHistory,
    change_counts,
    co_change_boosts,
    combine,
    parse_name_log,
    prior_boosts,
)
from cardloop.prompts.card import Card, ContextKind
from cardloop.prompts.stages import Stage
from cardloop.prompts.tokens import TokenCounter

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=T", "-c", "init.defaultBranch=main"]
TEXT = "def settle(invoice):\n    # settle the invoice ledger entry\n    return invoice\n"


def test_counts_and_boosts_from_a_name_log() -> None:
    log = "\0\nCHANGES.rst\nsrc/a.py\n\0\nCHANGES.rst\n\0\nCHANGES.rst\nCHANGES.rst\nsrc/b.py\n"
    commits = parse_name_log(log)
    assert commits == [["CHANGES.rst", "src/a.py"], ["CHANGES.rst"], ["CHANGES.rst", "CHANGES.rst", "src/b.py"]]
    counts = change_counts(commits)
    assert counts == {"CHANGES.rst": 3, "src/a.py": 1, "src/b.py": 1}  # once per commit
    boosts = prior_boosts(counts, 1.0)
    assert boosts["CHANGES.rst"] == pytest.approx(2.0)
    assert 1.0 < boosts["src/a.py"] == boosts["src/b.py"] < boosts["CHANGES.rst"]
    assert prior_boosts(counts, 0.0) == {} and prior_boosts({}, 1.0) == {}
    assert combine({"a": 2.0}, None, {"a": 1.5, "b": 3.0}) == {"a": 3.0, "b": 3.0}
    assert combine(None, {}) is None


def test_co_change_boosts_what_changed_with_the_best_matches() -> None:
    commits = [["src/core.py", "tests/test_core.py", "CHANGES.rst"], ["src/core.py", "tests/test_core.py"],
               ["docs/index.rst"], ["src/other.py", "CHANGES.rst"]]
    boosts = co_change_boosts(commits, ["src/core.py"], 1.0)
    assert boosts == {"tests/test_core.py": 2.0, "CHANGES.rst": 1.5}  # 2 and 1 of core's 2 commits
    assert co_change_boosts(commits, ["nowhere.py"], 1.0) == {}
    assert co_change_boosts(commits, ["src/core.py"], 0.0) == {}
    history = RecentHistory(tuple(tuple(c) for c in commits), 1.0)
    both = history.with_anchors(["src/core.py"])
    assert both is not None and both["tests/test_core.py"] == pytest.approx(history.boosts["tests/test_core.py"] * 2.0)
    assert RecentHistory((), 1.0).with_anchors(["src/core.py"]) is None


def _repo(root: Path) -> Path:
    repo = root / "acme" / "ledger"
    repo.mkdir(parents=True)
    run = lambda *a: subprocess.run([*GIT, "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    for name in ("billing/settle.py", "billing/settle_old.py", "docs/unrelated.md"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(TEXT if name.endswith(".py") else "Nothing about that here.\n")
    run("add", "-A")
    run("commit", "-qm", "initial")
    for n in range(6):  # settle_old.py is the file every recent change touched; docs too
        (repo / "billing" / "settle_old.py").write_text(TEXT + f"# change {n}\n")
        (repo / "docs" / "unrelated.md").write_text(f"Nothing about that here ({n}).\n")
        run("commit", "-qam", f"change {n}")
    return repo


@pytest.mark.parametrize("weight", [1.0, 0.0])
def test_a_source_ranks_recently_changed_matches_higher(tmp_path: Path, weight: float) -> None:
    _repo(tmp_path / "remotes")
    source = RepositorySource(tmp_path / "cache", clone_url_template=f"file://{tmp_path / 'remotes'}/{{repo}}",
                              counter=TokenCounter().count, depth=20, history_weight=weight, max_files=2)
    # The title spells neither file's whole name (names.py would decide for settle.py).
    card = Card(id="L-1", title="The invoice ledger entry is wrong", repo="acme/ledger")
    result = source.gather(SourceRequest(card, Stage.CODING))
    ranked = [i.title for i in result.items if i.kind == ContextKind.SOURCE_FILE]
    # Both .py files match equally (one more comment line in the hot one); docs match nothing.
    assert "docs/unrelated.md" not in ranked
    assert ranked[0] == ("billing/settle_old.py" if weight else "billing/settle.py")
