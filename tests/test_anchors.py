"""Validators anchor at the very end of the text.

Python's `$` also matches before a trailing newline, so `re.match(r"^[a-z]+$", "acme\\n")`
accepts "acme\\n": a tenant, branch or key with a newline would slip through every check written
that way. Our validators use `\\Z` (or fullmatch); pydantic's `pattern=` runs on the Rust regex
engine, where `$` is the end of the text, and is checked here too so a change of engine shows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from cardloop.app.boards.github import _repo_from_api_url
from cardloop.contracts.config import REPO_CONFIG, load_config
from cardloop.contracts.payloads import CardRef
from cardloop.integrations.sources.github import parse_pr_ref
from cardloop.integrations.sources.kubernetes.source import _selectors
from cardloop.prompts.card import Card
from cardloop.prompts.tenant_id import is_tenant_id
from cardloop.store import StoreError, blob_ref
from cardloop.store.values import check_blob_ref, check_tenant, tenant_of

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for folder in ("cardloop", "prompts", "activities", "workflows")
           for p in (ROOT / folder).rglob("*.py")]


def _dollar_anchored_patterns(path: Path) -> list[str]:
    """Regex literals given to re.compile/match/search/fullmatch that end in `$` without
    re.MULTILINE (where `$` means "end of a line", which is then what the caller wants)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                and node.func.attr in ("compile", "match", "search", "fullmatch") and node.args):
            continue
        pattern = node.args[0]
        if not (isinstance(pattern, ast.Constant) and isinstance(pattern.value, str)):
            continue
        flags = "".join(ast.unparse(a) for a in node.args[1:])
        flags += "".join(ast.unparse(k.value) for k in node.keywords if k.arg == "flags")
        if pattern.value.endswith("$") and not pattern.value.endswith("\\$") and "MULTILINE" not in flags:
            found.append(f"{path.name}:{node.lineno}: {pattern.value!r}")
    return found


def test_no_regex_in_the_tree_ends_with_a_dollar_anchor() -> None:
    offenders = [hit for path in SOURCES for hit in _dollar_anchored_patterns(path)]
    assert offenders == [], "use \\Z (or fullmatch): `$` accepts a trailing newline\n" + "\n".join(offenders)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('import re\nA = re.compile(r"^[a-z]+$")\nB = re.compile(r"^x$", re.MULTILINE)\n'
                      'C = re.compile(r"^[a-z]+\\Z")\n')
    found = _dollar_anchored_patterns(sample)
    assert len(found) == 1 and ":2:" in found[0]


@pytest.mark.parametrize("tenant", ["acme\n", "acme\r\n", "acme\n\n", " acme"])
def test_store_refuses_a_tenant_with_a_trailing_newline(tenant: str) -> None:
    with pytest.raises(StoreError):
        check_tenant(tenant)
    with pytest.raises(StoreError):
        tenant_of(f"{tenant}/github/PAY-1")
    assert check_tenant("acme") == "acme"


def test_blob_refs_and_card_refs_are_anchored() -> None:
    ref = blob_ref("x")
    assert check_blob_ref(ref) == ref
    with pytest.raises(StoreError):
        check_blob_ref(ref + "\n")
    with pytest.raises(ValidationError):
        CardRef(tenant="acme", board="github", card_id="PAY-1\n")
    with pytest.raises(ValidationError):
        CardRef(tenant="acme\n", board="github", card_id="PAY-1")


def test_the_card_tenant_rule_and_board_repo_urls_are_anchored() -> None:
    # The rule the gateway's card label, the tenant routes and `cardloop tenant` share.
    assert not is_tenant_id("acme\n") and is_tenant_id("acme")
    assert _repo_from_api_url("https://api.github.com/repos/acme/api") == "acme/api"
    assert _repo_from_api_url("https://api.github.com/repos/acme/api\n") is None


def test_kubernetes_namespace_and_pr_ids_are_anchored() -> None:
    with pytest.raises(ValueError, match="is not a namespace name"):
        _selectors({"acme/api": ("payments\n", "app=api")})
    assert _selectors({"acme/api": ("payments", "app=api")})
    ref = parse_pr_ref(Card(id="acme:api#12", title="t"))
    assert ref is not None and ref.number == 12


@pytest.mark.parametrize(("field", "value"), [("tenant", "acme\n"), ("repo", "acme/api\n"), ("id", "PAY-1\n")])
def test_card_patterns_refuse_a_trailing_newline(field: str, value: str) -> None:
    fields = {"id": "PAY-1", "title": "t", field: value}
    with pytest.raises(ValidationError):
        Card.model_validate(fields)


def test_config_tenant_pattern_refuses_a_trailing_newline(tmp_path: Path) -> None:
    from cardloop.contracts.errors import ConfigError

    with pytest.raises(ConfigError):
        load_config(REPO_CONFIG, env={"CARDLOOP_PATHS__PROMPT_OVERRIDES": str(tmp_path),
                                      "CARDLOOP_BOARDS__GENERIC__TENANT": '"acme\\n"'})
