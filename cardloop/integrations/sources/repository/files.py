"""Which files of a repository count: not vendored, generated, locked or binary; manifests;
globs as the config writes them."""

from __future__ import annotations

import re

DEFAULT_ADR_GLOBS: tuple[str, ...] = ("docs/adr/**/*.md", "doc/architecture/decisions/**/*.md")
DEFAULT_DOC_GLOBS: tuple[str, ...] = ("docs/vendor/**/*.md", "docs/libraries/**/*.md")

MANIFEST_NAMES: frozenset[str] = frozenset(
    {"pyproject.toml", "package.json", "go.mod", "Cargo.toml", "Gemfile", "setup.cfg", "Pipfile"}
)
_REQUIREMENTS = re.compile(r"^requirements[\w.-]*\.(?:txt|in)\Z")

# Directories whose files are someone else's code or build output: never ranked.
SKIP_DIRS: frozenset[str] = frozenset({
    ".git", "node_modules", ".venv", "venv", "dist", "build", "vendor", "third_party",
    "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages",
    ".next", ".nuxt", "coverage", "htmlcov", "bower_components", ".gradle", ".idea", ".terraform",
})
LOCK_FILES: frozenset[str] = frozenset({
    "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "Pipfile.lock", "Cargo.lock",
    "Gemfile.lock", "go.sum", "composer.lock", "uv.lock", "pdm.lock", "bun.lockb", "flake.lock",
})
# Generated, minified or binary by name; content is checked for NUL bytes as well.
SKIP_SUFFIXES: tuple[str, ...] = (
    ".min.js", ".min.css", ".map", ".lock", ".pyc", ".pyo", ".so", ".dylib", ".dll", ".exe", ".o", ".a",
    ".class", ".jar", ".war", ".whl", ".egg", ".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".tar", ".rar",
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".svg", ".pdf", ".psd", ".mp3", ".mp4",
    ".wav", ".ogg", ".mov", ".avi", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".bin", ".dat", ".db",
    ".sqlite", ".sqlite3", ".parquet", ".npy", ".pkl", ".pb", ".onnx", ".pt", ".ckpt", ".h5",
)
_GENERATED = re.compile(r"(?:^|/)[^/]*(?:_pb2(?:_grpc)?\.py|\.pb\.go|\.generated\.\w+|\.g\.dart)\Z")


def indexable(path: str) -> bool:
    """Whether a tracked file may be ranked at all: not vendored, generated, a lock file or
    binary by its name. Size and content are checked when it is read."""
    parts = path.split("/")
    if any(part in SKIP_DIRS for part in parts[:-1]):
        return False
    name = parts[-1]
    if name in LOCK_FILES:
        return False
    lowered = name.lower()
    return not (lowered.endswith(SKIP_SUFFIXES) or _GENERATED.search(path))


def decode_text(data: bytes) -> str | None:
    """The text of a file, or None when it is binary (a NUL byte early on, as git judges)."""
    if b"\0" in data[:8000]:
        return None
    return data.decode("utf-8", errors="replace")


def is_manifest(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in MANIFEST_NAMES or bool(_REQUIREMENTS.match(name))


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A repository-relative glob as a regex: `**/` is any number of directories (none
    included), `*` and `?` stay within one path component."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def split_lines(text: str) -> list[str]:
    # "\n" only, as in prompts/logs.py: line numbers must agree with editors and tracebacks.
    return (text[:-1] if text.endswith("\n") else text).split("\n")
