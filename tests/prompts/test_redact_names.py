"""Keys inside file names, paths and kebab-case names (a `list_files` result, a `tar` listing,
an artifact's name in a build log): a `-` or `.` before the key, and a suffix after it, do not
hide it. Names that only look alike stay."""

from __future__ import annotations

import pytest

from cardloop.prompts.redact import redact
from tests.prompts.fake_secrets import ANTHROPIC, GITHUB_PAT, STRIPE_LIVE, STRIPE_RESTRICTED

GHP = "ghp_" + "R8f2kLq9Xz3Vb7Nm1Tc5Wd4Yh6Js0Pa2Ue8G"


@pytest.mark.parametrize("secret", [STRIPE_LIVE, STRIPE_RESTRICTED, ANTHROPIC, GITHUB_PAT, GHP],
                         ids=["stripe", "stripe-restricted", "anthropic", "github-pat", "github-token"])
@pytest.mark.parametrize("name", ["backups/acme-{}.tar.gz", "creds-{}-old.json", "dump.{}.sql", "./{}/config"])
def test_a_key_inside_a_file_name_is_redacted_whole(secret: str, name: str) -> None:
    listing = "src/app.py\n" + name.replace("{}", secret) + "\nREADME.md\n"
    out = redact(listing)
    assert secret[-16:] not in out and secret[:12] not in out
    assert out.startswith("src/app.py\n") and out.endswith("\nREADME.md\n")


@pytest.mark.parametrize("text", [
    "def mask_test_RetriesAreCappedWell(): ...",
    "tests/test_desk_live_UpdatesEveryMinute.py",
    "ask_prod_ConfigurationIsLoadedFirst = True",
])
def test_names_that_only_look_alike_stay(text: str) -> None:
    assert redact(text) == text
