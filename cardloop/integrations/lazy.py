"""A registry lists every member of a family without importing each one's client library
(the kubernetes client, PyGithub, an SDK): an entry's builder is imported on its first call."""

from __future__ import annotations

import importlib
from typing import Any


class Lazy:
    """`module:attribute`, imported when called. Equal when they name the same thing."""

    __slots__ = ("attribute", "module")

    def __init__(self, module: str, attribute: str) -> None:
        self.module = module
        self.attribute = attribute

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.attribute)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{self.module}:{self.attribute}"
