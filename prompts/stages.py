"""The stage identifiers used everywhere: CLI, config.toml, API, workflows."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    PLANNING = "planning"
    CODING = "coding"
    REVIEW = "review"
    TESTING = "testing"
    ERROR_FIXING = "error_fixing"


STAGE_NAMES: tuple[str, ...] = tuple(s.value for s in Stage)


def parse_stage(name: str) -> Stage:
    """Return the Stage for `name`, or raise ValueError listing the valid names."""
    try:
        return Stage(name)
    except ValueError:
        raise ValueError(
            f"unknown stage {name!r}; expected one of: {', '.join(STAGE_NAMES)}"
        ) from None
