from __future__ import annotations

from pathlib import Path

import pytest

from cardloop.prompts.stages import Stage
from cardloop.prompts.templates import PACKAGED_DIR, TemplateError, TemplateStore


def test_every_stage_has_an_agent_template_with_both_completion_signals() -> None:
    store = TemplateStore()
    for stage in [*(s.value for s in Stage), "default"]:
        text = store.load(f"agents/{stage}").text
        assert "<promise>COMPLETE</promise>" in text
        assert "<promise>BLOCKED</promise>" in text


def test_override_directory_wins_file_by_file(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "coding.md").write_text("Team coding prompt ${iteration}")
    store = TemplateStore([tmp_path])
    path, origin = store.resolve("agents/coding")
    assert (path, origin) == (tmp_path / "agents" / "coding.md", "override")
    assert store.load("agents/coding").render({"iteration": 3}) == "Team coding prompt 3"
    assert store.resolve("agents/review") == (PACKAGED_DIR / "agents" / "review.md", "packaged")


def test_names_that_escape_the_directory_are_refused(tmp_path: Path) -> None:
    store = TemplateStore([tmp_path])
    for bad in ("../secrets", "/etc/passwd", "agents/../../x"):
        with pytest.raises(TemplateError, match="invalid template name"):
            store.resolve(bad)


def test_missing_template_names_every_place_looked(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match=str(tmp_path)):
        TemplateStore([tmp_path]).resolve("nope")


def test_placeholders_leave_code_braces_alone() -> None:
    from cardloop.prompts.templates import LoadedTemplate

    t = LoadedTemplate("x", "stage ${stage}: {'a': 1} and $notaplaceholder", Path("x"), "packaged")
    assert t.render({"stage": "review"}) == "stage review: {'a': 1} and $notaplaceholder"
