"""Faster assembly must send the same bytes: every case of assembly_cases.py (sample card, the
benchmark's 200-message card, the fixture logs excerpted at several caps; cold, warm after one
more message, and cold again) against the digests recorded before the speed work."""

from __future__ import annotations

import json

import pytest

from tests.prompts.assembly_cases import GOLDEN, cases, digest

GOLDEN_DIGESTS: dict[str, list[str]] = json.loads(GOLDEN.read_text())
CASES = dict(cases())


def test_every_recorded_case_is_still_run() -> None:
    assert sorted(CASES) == sorted(GOLDEN_DIGESTS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_prompt_bytes_unchanged(name: str) -> None:
    assert [digest(p) for p in CASES[name]()] == GOLDEN_DIGESTS[name]
