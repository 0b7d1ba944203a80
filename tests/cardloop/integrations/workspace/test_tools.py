"""The agent's tools in a real worktree of the sample repository: results, refusals (never
exceptions), confinement, stage tool sets and excerpts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cardloop.contracts.config import TOOL_NAMES, WRITE_TOOLS, Config, check_config, load_config
from cardloop.integrations.workspace import Sandbox, SandboxLimits
from cardloop.integrations.workspace.manager import Workspace, WorkspaceManager
from cardloop.integrations.workspace.tools import READ_ONLY, TOOLS, Toolbox, ToolContext
from cardloop.prompts.stages import Stage
from tests.cardloop.integrations.workspace.conftest import make_card
from tests.stack import SAMPLE_REPO_ENV_ALLOW

ALL = tuple(TOOLS)
RETRY = "app/webhooks/retry.py"


@pytest.fixture
def ws(manager: WorkspaceManager) -> Workspace:
    return manager.open(make_card())


@pytest.fixture
def box(ws: Workspace) -> Toolbox:
    sandbox = Sandbox(SandboxLimits(timeout=60, env_allow=SAMPLE_REPO_ENV_ALLOW))
    return Toolbox(ToolContext(ws.path, ws.home, sandbox), ALL)


def test_read_file_whole_and_by_line_range(box: Toolbox) -> None:
    whole = box.execute("read_file", {"path": RETRY})
    assert not whole.is_error and whole.text.startswith(f"{RETRY} (lines 1-")
    part = box.execute("read_file", {"path": RETRY, "start_line": 21, "end_line": 22})
    assert part.text.splitlines() == [f"{RETRY} (lines 21-22 of 31)",
                                      "21 |         raw = self.base_delay * self.factor ** (attempt - 1)",
                                      "22 |         if self.jitter:"]
    missing = box.execute("read_file", {"path": "nope.py"})
    assert missing.is_error and "no such file" in missing.text


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "app/../../x", "~/.netrc", ".git/config",
                                  "app/\0x"])
def test_paths_outside_the_workspace_are_refused(box: Toolbox, path: str) -> None:
    for name, args in (("read_file", {"path": path}), ("write_file", {"path": path, "content": "x"}),
                       ("list_files", {"path": path}), ("search", {"pattern": "x", "path": path})):
        result = box.execute(name, args)
        assert result.is_error, (name, path, result.text)


def test_a_symlink_escape_is_refused(box: Toolbox, ws: Workspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    os.symlink(secret, ws.path / "link.txt")
    os.symlink(tmp_path, ws.path / "linkdir")
    read = box.execute("read_file", {"path": "link.txt"})
    assert read.is_error and "outside the workspace" in read.text and "TOP SECRET" not in read.text
    write = box.execute("write_file", {"path": "linkdir/planted.txt", "content": "x"})
    assert write.is_error and not (tmp_path / "planted.txt").exists()
    edit = box.execute("edit_file", {"path": "link.txt", "old_text": "TOP", "new_text": "x"})
    assert edit.is_error and secret.read_text() == "TOP SECRET\n"
    found = box.execute("search", {"pattern": "TOP SECRET"})
    assert found.text == "no matches for 'TOP SECRET' under ."
    os.symlink("app/webhooks/retry.py", ws.path / "inside.py")  # a link within the workspace is fine
    assert not box.execute("read_file", {"path": "inside.py"}).is_error


def test_write_file_under_a_file_is_refused_in_the_workspaces_terms(box: Toolbox, ws: Workspace) -> None:
    # It was "FileExistsError: [Errno 17] File exists: '/abs/worker/path/...'".
    (ws.path / "notes.md").write_text("notes\n")
    for path in ("notes.md/child.txt", "notes.md/deeper/child.txt"):
        result = box.execute("write_file", {"path": path, "content": "x"})
        assert result.is_error and "notes.md is a file, not a directory" in result.text, result.text
        assert str(ws.path) not in result.text and "Errno" not in result.text
    assert (ws.path / "notes.md").read_text() == "notes\n"


def test_edit_file_needs_unique_existing_text(box: Toolbox, ws: Workspace) -> None:
    box.execute("write_file", {"path": "notes/x.py", "content": "a = 1\nb = 1\na = 1\n"})
    missing = box.execute("edit_file", {"path": "notes/x.py", "old_text": "c = 1", "new_text": "c = 2"})
    assert missing.is_error and "old_text not found in notes/x.py" in missing.text
    twice = box.execute("edit_file", {"path": "notes/x.py", "old_text": "a = 1", "new_text": "a = 2"})
    assert twice.is_error and "occurs 2 times" in twice.text and "lines 1, 3" in twice.text
    assert (ws.path / "notes/x.py").read_text() == "a = 1\nb = 1\na = 1\n"  # nothing changed
    (ws.path / "latin1.txt").write_bytes(b"caf\xe9 = 1\n")
    latin = box.execute("edit_file", {"path": "latin1.txt", "old_text": "= 1", "new_text": "= 2"})
    assert latin.is_error and "not valid UTF-8" in latin.text
    assert (ws.path / "latin1.txt").read_bytes() == b"caf\xe9 = 1\n"
    ok = box.execute("edit_file", {"path": "notes/x.py", "old_text": "b = 1", "new_text": "b = 2"})
    assert not ok.is_error and "at line 2" in ok.text
    assert (ws.path / "notes/x.py").read_text() == "a = 1\nb = 2\na = 1\n"


def test_list_and_search_respect_gitignore(box: Toolbox, ws: Workspace) -> None:
    (ws.path / "app" / "__pycache__").mkdir()
    (ws.path / "app" / "__pycache__" / "retry.cpython-311.pyc").write_text("max_delay")
    (ws.path / "new_module.py").write_text("MAX_DELAY = 30\n")
    listed = box.execute("list_files", {}).text.splitlines()
    assert RETRY in listed and "new_module.py" in listed and not any("__pycache__" in p for p in listed)
    assert box.execute("list_files", {"glob": "test_*.py"}).text.splitlines()[1:] == ["tests/test_retry.py"]
    found = box.execute("search", {"pattern": r"max_delay\b", "ignore_case": True})
    lines = found.text.splitlines()
    assert f"{RETRY}:15:     max_delay: float = 3600.0" in lines
    assert "new_module.py:1: MAX_DELAY = 30" in lines and not any("pycache" in ln for ln in lines)
    bad = box.execute("search", {"pattern": "("})
    assert bad.is_error and "invalid regular expression" in bad.text


def test_run_command_git_diff_and_status(box: Toolbox) -> None:
    failing = box.execute("run_command", {"command": "python -m pytest -q -p no:cacheprovider"})
    assert failing.is_error and "exit code 1" in failing.text
    assert "test_backoff_schedule_caps_at_max_delay" in failing.text
    fix = box.execute("edit_file", {"path": RETRY, "old_text": "        return raw\n",
                                    "new_text": "        return min(raw, self.max_delay)\n"})
    assert not fix.is_error
    passing = box.execute("run_command", {"command": "python -m pytest -q -p no:cacheprovider"})
    assert not passing.is_error and "4 passed" in passing.text
    diff = box.execute("git_diff", {}).text
    assert "-        return raw" in diff and "+        return min(raw, self.max_delay)" in diff
    assert " M app/webhooks/retry.py" in box.execute("git_status", {}).text


def test_large_results_are_excerpted_keeping_errors(ws: Workspace) -> None:
    box = Toolbox(ToolContext(ws.path, ws.home, Sandbox(), max_result_chars=2_000), ALL)
    script = "for i in range(5000): print('ok line', i)\nprint('ERROR: the real failure')\n" \
             "for i in range(5000): print('more', i)\n"
    (ws.path / "noisy.py").write_text(script)
    out = box.execute("run_command", {"command": "python noisy.py"}).text
    assert len(out) < 4_000 and "ERROR: the real failure" in out and "ok line 0" in out and "more 4999" in out
    assert "lines cut" in out


def test_stage_tool_sets_refuse_what_is_not_offered(ws: Workspace) -> None:
    config = load_config()
    review = Toolbox(ToolContext(ws.path, ws.home, Sandbox()), config.workspace.tools_for(Stage.REVIEW))
    refused = review.execute("write_file", {"path": "x.txt", "content": "x"})
    assert refused.is_error and "not offered in this stage" in refused.text and not (ws.path / "x.txt").exists()
    assert review.execute("run_command", {"command": "touch y"}).is_error and not (ws.path / "y").exists()
    assert "is not a tool" in review.execute("rm_rf", {}).text
    assert [s.name for s in review.specs()] == config.workspace.tools_for(Stage.REVIEW)
    coding = config.workspace.tools_for(Stage.CODING)
    assert set(coding) >= WRITE_TOOLS


def test_bad_input_is_an_error_result(box: Toolbox) -> None:
    assert "missing required field 'path'" in box.execute("read_file", {}).text
    assert "must be of type integer" in box.execute("read_file", {"path": RETRY, "start_line": "3"}).text
    assert "unknown field" in box.execute("git_status", {"force": True}).text
    assert box.execute("read_file", ["not", "an", "object"]).is_error


def test_finish_and_block_carry_their_control(box: Toolbox) -> None:
    assert box.execute("finish", {"summary": "capped"}).control == "finish"
    assert box.execute("block", {"reason": "need access"}).control == "block"


def test_the_registry_and_the_config_name_the_same_tools() -> None:
    assert set(TOOLS) == set(TOOL_NAMES)
    assert {n for n, t in TOOLS.items() if t.writes} == WRITE_TOOLS
    assert set(READ_ONLY) == set(TOOL_NAMES) - WRITE_TOOLS
    for tool in TOOLS.values():
        assert tool.description and tool.input_schema["type"] == "object"


def test_a_write_tool_in_a_read_only_stage_is_a_config_error() -> None:
    config = load_config()
    data = config.model_dump()
    data["workspace"]["tools"]["review"] = ["read_file", "edit_file"]
    bad = Config.model_validate(data)
    assert "workspace.tools.review: review is read only; remove edit_file" in check_config(bad)
    data["workspace"]["tools"]["review"] = ["read_file", "teleport"]
    with pytest.raises(ValueError):
        Config.model_validate(data)
