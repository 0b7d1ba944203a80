"""[boards.<board>] write settings: the column a stage moves a card to, and clear errors where
the reverse of `columns` is ambiguous or would start another stage."""

from __future__ import annotations

import pytest

from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.errors import ConfigError


def test_the_shipped_config_names_one_column_per_stage_for_every_board() -> None:
    config = load_config(REPO_CONFIG, env={})
    github = config.board("github")
    assert github.write_column("planning") == "Planning"  # "Todo" maps to planning too: write_columns decides
    assert github.write_column("review") == "In Review" and github.write_column("done") == "Done"
    assert config.board("linear").write_column("error_fixing") is None  # no Linear state shows it: no move
    assert config.board("trello").write_column("coding") == "Doing"


def test_two_columns_for_one_stage_need_write_columns() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(REPO_CONFIG, env={"CARDLOOP_BOARDS__GITHUB__WRITE_COLUMNS": "{}"})
    assert "columns 'Todo', 'Planning' all map to planning" in str(err.value)
    assert "write_columns.planning = 'Planning'" in str(err.value)
    # Without a credential variable the board is never written to: nothing to choose.
    load_config(REPO_CONFIG, env={"CARDLOOP_BOARDS__GITHUB__WRITE_COLUMNS": "{}",
                                  "CARDLOOP_BOARDS__GITHUB__WRITE_TOKEN_ENV": '""'})


def test_a_write_column_or_blocked_column_that_starts_another_stage_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(REPO_CONFIG, env={"CARDLOOP_BOARDS__JIRA__WRITE_COLUMNS": '{ coding = "In Review" }'})
    assert "write_columns.coding = 'In Review', but columns maps 'In Review' to review" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config(REPO_CONFIG, env={"CARDLOOP_BOARDS__TRELLO__BLOCKED_COLUMN": '"Doing"'})
    assert "blocked_column 'Doing' is mapped to a stage" in str(err.value)
