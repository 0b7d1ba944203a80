"""The stack fixtures live in tests/conftest.py; helpers in tests/stack.py."""

from tests.stack import HISTORIES, TRANSCRIPT, Stack, make_config, replay_all

__all__ = ["HISTORIES", "TRANSCRIPT", "Stack", "make_config", "replay_all"]
