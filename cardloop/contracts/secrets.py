"""Secrets come only from the environment and never print."""

from __future__ import annotations

from collections.abc import Mapping

from cardloop.contracts.errors import ConfigError
from cardloop.prompts.surrogates import undecodable


class Secret:
    """A secret value whose repr and str never show it; call .reveal() at the point of use."""

    __slots__ = ("_name", "_value")

    def __init__(self, value: str, name: str = "secret") -> None:
        self._value = value
        self._name = name

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({self._name}=********)"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._name))

    def __reduce__(self) -> tuple:
        # Pickling would carry the value into places (payloads, caches) it must not reach.
        raise TypeError("Secret values cannot be pickled")


def secret_from_env(env: Mapping[str, str], name: str) -> Secret | None:
    value = env.get(name, "")
    if problem := undecodable(name, value):  # no HTTP header or driver takes it: say so where it is read
        raise ConfigError(problem)
    return Secret(value, name) if value else None


def reveal(value: str | Secret | None) -> str | None:
    """The plain text of a secret (or of a string passed as one) at its point of use; None when unset or empty."""
    if value is None:
        return None
    text = value if isinstance(value, str) else value.reveal()
    return text or None
