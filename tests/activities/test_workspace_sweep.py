"""The worker's workspace sweep: a done card's worktree goes, a running card's stays, and the
age limit removes what nothing uses any more (real git worktrees, real SQLite store)."""

from __future__ import annotations

import json
from pathlib import Path

from cardloop.activities.deps import ActivityDeps
from cardloop.activities.workspace import WorkspaceActivities
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.payloads import CardState
from cardloop.store import Store
from tests.sample_remote import push_sample_repo
from tests.stack import small_card


def test_sweep_removes_done_cards_and_old_workspaces_only(tmp_path: Path) -> None:
    remote = push_sample_repo(tmp_path / "remotes")
    config = load_config(REPO_CONFIG, env={
        "CARDLOOP_WORKSPACE__ENABLED": "true", "CARDLOOP_WORKSPACE__ROOT": str(tmp_path / "ws"),
        "CARDLOOP_WORKSPACE__MAX_AGE_HOURS": "1", "CARDLOOP_SOURCES__REPOSITORY__CLONE_URL": remote.url_template})
    with Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}") as store:
        deps = ActivityDeps.build(config, store)
        cards = {name: small_card(name, branch=f"card/{name}") for name in ("DONE-1", "RUN-1", "OLD-1", "GONE-1")}
        spaces = {}
        for name, card in cards.items():
            key = f"{card.tenant}/{card.board}/{card.id}"
            if name != "GONE-1":
                store.upsert_card(key, card)
            spaces[name] = deps.workspaces(card.tenant, card.repo or "").open(card)
        store.save_workflow_state("acme/github/DONE-1", CardState(status="done").model_dump_json())
        store.save_workflow_state("acme/github/RUN-1", CardState(status="running").model_dump_json())
        old = spaces["OLD-1"].path.with_name(spaces["OLD-1"].path.name + ".json")
        meta = json.loads(old.read_text())
        meta["last_used"] -= 2 * 3600
        old.write_text(json.dumps(meta))

        removed = WorkspaceActivities(deps).sweep()

        assert sorted(removed) == ["acme/github/DONE-1", "acme/github/GONE-1", "acme/github/OLD-1"]
        assert spaces["RUN-1"].path.is_dir() and (spaces["RUN-1"].path / "app" / "webhooks" / "retry.py").is_file()
        assert not any(spaces[n].path.exists() for n in ("DONE-1", "OLD-1", "GONE-1"))
        assert WorkspaceActivities(deps).sweep() == []  # nothing left to remove: a second sweep is a no-op
        # The sweep's git rewrote the clone's config with the remote the clone was made from.
        (config_file,) = (tmp_path / "ws" / "clones").glob("*/*/.git/config")
        repo = "/".join(config_file.parts[-4:-2])
        assert f'url = "{remote.url_template.format(repo=repo)}"' in config_file.read_text()


def test_a_reopened_workspace_is_back_at_its_last_checkpoint(tmp_path: Path) -> None:
    """The worker that held the worktree died mid-command; a worker on the same machine reopens
    it. The half-done changes are discarded (the model is told they are gone); commits stay."""
    from temporalio.testing import ActivityEnvironment

    from cardloop.contracts.payloads import WorkspaceInput

    remote = push_sample_repo(tmp_path / "remotes")
    config = load_config(REPO_CONFIG, env={
        "CARDLOOP_WORKSPACE__ENABLED": "true", "CARDLOOP_WORKSPACE__ROOT": str(tmp_path / "ws"),
        "CARDLOOP_SOURCES__REPOSITORY__CLONE_URL": remote.url_template})
    with Store.open(f"sqlite:///{tmp_path / 'store.sqlite'}") as store:
        deps = ActivityDeps.build(config, store)
        card = small_card("REOPEN-1", branch="card/REOPEN-1")
        key = f"{card.tenant}/{card.board}/{card.id}"
        store.upsert_card(key, card)
        env = ActivityEnvironment()
        first = WorkspaceActivities(deps)
        env.run(first.open, WorkspaceInput(card_key=key, stage="coding", run=1))
        ws = deps.workspaces(card.tenant, card.repo or "").open(card)
        retry = ws.path / "app" / "webhooks" / "retry.py"
        kept = retry.read_text()
        retry.write_text(kept + "# half-done edit\n")
        (ws.path / "half.txt").write_text("written before the worker died\n")
        same_machine = WorkspaceActivities(deps)  # a new worker process: nothing open in memory
        env.run(same_machine.open, WorkspaceInput(card_key=key, stage="coding", run=1))
        assert retry.read_text().endswith("# half-done edit\n")  # a stage's ordinary open keeps the worktree
        env.run(same_machine.open, WorkspaceInput(card_key=key, stage="coding", run=1, reopen=True))
        assert retry.read_text() == kept and not (ws.path / "half.txt").exists()
