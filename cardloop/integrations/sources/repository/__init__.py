"""Repository context: ADRs, library docs and the source files a card is about (source.py),
from a cached shallow checkout (git.py); which files count (files.py), which ones the card
names or ranks highest (mentions.py), and how a file is shown (render.py)."""

from __future__ import annotations

from cardloop.integrations.sources.repository.files import (
    DEFAULT_ADR_GLOBS,
    DEFAULT_DOC_GLOBS,
    decode_text,
    glob_regex,
    indexable,
    is_manifest,
)
from cardloop.integrations.sources.repository.git import DEFAULT_CLONE_URL_TEMPLATE, Checkout, GitCheckouts
from cardloop.integrations.sources.repository.mentions import (
    Choice,
    Mention,
    PathResolver,
    card_query,
    card_texts,
    choose_files,
    find_mentions,
)
from cardloop.integrations.sources.repository.render import render_file
from cardloop.integrations.sources.repository.source import RepositorySource

__all__ = [
    "DEFAULT_ADR_GLOBS",
    "DEFAULT_CLONE_URL_TEMPLATE",
    "DEFAULT_DOC_GLOBS",
    "Checkout",
    "Choice",
    "GitCheckouts",
    "Mention",
    "PathResolver",
    "RepositorySource",
    "card_query",
    "card_texts",
    "choose_files",
    "decode_text",
    "find_mentions",
    "glob_regex",
    "indexable",
    "is_manifest",
    "render_file",
]
