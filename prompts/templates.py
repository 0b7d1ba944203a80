"""Prompt templates as files, overridable from a user directory at run time.

A deployed team tweaks a prompt by dropping a file with the same relative name into the
override directory (default ~/.config/cardloop/prompts/, set by the caller): the first
directory that has the file wins. Templates use `string.Template` placeholders
(`${stage}`), which leave the braces of code samples in a template alone.
"""

from __future__ import annotations

import functools
import os
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PACKAGED_DIR = Path(__file__).resolve().parent / "templates"


class TemplateError(LookupError):
    """A template name that is invalid or exists in no search directory."""


@dataclass(frozen=True, slots=True)
class LoadedTemplate:
    name: str
    text: str
    path: Path
    origin: str  # "override" or "packaged"

    def render(self, values: Mapping[str, object]) -> str:
        return string.Template(self.text).safe_substitute(
            {k: str(v) for k, v in values.items()}
        ).strip()


@functools.lru_cache(maxsize=1024)
def _normalize_name(name: str) -> str:
    # Cached: every assembly looks up the same few names, and a PurePosixPath costs far more
    # than the lookup it guards. A bad name raises every time (lru_cache keeps no exceptions).
    name = name.strip()
    if not name:  # would look for '.md', and say that was not found
        raise TemplateError("empty template name: use a relative name like 'agents/coding'")
    if len(name) > 255:  # not echoed whole: the message stays one readable line
        raise TemplateError(f"template name {name[:40]!r}… of {len(name):,} characters: use a relative name "
                            "like 'agents/coding'")
    if not name.endswith(".md"):
        name += ".md"
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise TemplateError(f"invalid template name {name!r}: use a relative name like 'agents/coding'")
    return str(pure)


class TemplateStore:
    """Looks templates up in override directories first, then the packaged ones."""

    def __init__(self, override_dirs: Sequence[Path] = (), packaged_dir: Path = PACKAGED_DIR) -> None:
        self.override_dirs = tuple(Path(d).expanduser() for d in override_dirs)
        self.packaged_dir = packaged_dir
        self._cache: dict[str, LoadedTemplate] = {}

    def search_path(self) -> tuple[tuple[Path, str], ...]:
        return (*((d, "override") for d in self.override_dirs), (self.packaged_dir, "packaged"))

    def candidates(self, name: str) -> list[tuple[Path, str, bool]]:
        """Every place `name` is looked for, in order, and whether a file is there."""
        rel = _normalize_name(name)
        # os.path.isfile: Path.is_file raises on a name too long for the file system.
        return [(d / rel, origin, os.path.isfile(d / rel)) for d, origin in self.search_path()]

    def resolve(self, name: str) -> tuple[Path, str]:
        for path, origin, exists in self.candidates(name):
            if exists:
                return path, origin
        raise TemplateError(
            f"template {_normalize_name(name)!r} not found in: "
            + ", ".join(str(d) for d, _ in self.search_path())
        )

    def load(self, name: str) -> LoadedTemplate:
        rel = _normalize_name(name)
        cached = self._cache.get(rel)
        if cached is not None:
            return cached
        path, origin = self.resolve(rel)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:  # an override saved in another encoding
            raise TemplateError(f"template {path}: not UTF-8 text: {exc}") from None
        except OSError as exc:  # no permission, removed since resolve ...
            raise TemplateError(f"template {path}: cannot read: {exc.strerror or exc}") from None
        loaded = LoadedTemplate(rel, text, path, origin)
        self._cache[rel] = loaded
        return loaded

    def exists(self, name: str) -> bool:
        # Asked twice per assembly. A loaded template exists from then on: load() serves it from
        # its cache, whatever happens on disk. Any other name costs one stat per directory (on
        # plain strings, no Path objects), so a template dropped into an override directory
        # counts from the next assembly.
        rel = _normalize_name(name)
        if rel in self._cache:
            return True
        return any(os.path.isfile(os.path.join(d, rel)) for d, _ in self.search_path())

    def names(self) -> list[str]:
        found: set[str] = set()
        for d, _ in self.search_path():
            if d.is_dir():
                found.update(str(p.relative_to(d)) for p in d.rglob("*.md"))
        return sorted(found)
