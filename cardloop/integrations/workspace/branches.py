"""The branch a card without one of its own works on: `cardloop/<card id>`, one per card.

git refuses some characters in a ref name (`#`, `:`, spaces, `..`), so they are replaced. Two
ids that differ only there (`PAY#142` and `PAY-142` on one repository) would then share a
branch: the second card's worktree could not be made while the first's was open ("cannot force
update the branch"), and after it, the second card built on the first card's pushed work. A name
that had to change carries a short digest of the id, so every id keeps a branch of its own.

Cards whose work was pushed under the name without the digest (before this rule) keep working
on it: `legacy_branch_name` is that name, and `checkpoint_owner` reads which card's checkpoint a
branch's commits carry (`cardloop: <card key> run R turn T`, written by the manager's checkpoint),
so a card continues on the old branch only when the work there is its own.
"""

from __future__ import annotations

import hashlib
import re

BRANCH_PREFIX = "cardloop/"
_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]+")
CHECKPOINT_SUBJECT = re.compile(r"\Acardloop: (\S+) run \S+ turn \d+\Z")


def legacy_branch_name(card_id: str) -> str:
    """`cardloop/<card id>` with what git refuses in a ref name replaced (`PAY#142` -> `PAY-142`)."""
    name = _UNSAFE.sub("-", card_id)
    name = re.sub(r"\.{2,}", ".", re.sub(r"/{2,}", "/", name))
    parts = [p.strip(".").removesuffix(".lock") or "x" for p in name.strip("/").split("/")]
    return BRANCH_PREFIX + "/".join(parts)


def default_branch_name(card_id: str) -> str:
    """The legacy name when the id is kept as it is; else that name and 8 hex digits of the
    id's SHA-256 (`PAY#142` -> `cardloop/PAY-142-3c2a9f1b`), so no two ids share a branch."""
    name = legacy_branch_name(card_id)
    if name == BRANCH_PREFIX + card_id:
        return name
    return f"{name}-{hashlib.sha256(card_id.encode()).hexdigest()[:8]}"


def checkpoint_owner(subjects: list[str]) -> str | None:
    """The card key of the newest cardloop checkpoint among commit subjects (newest first)."""
    for subject in subjects:
        found = CHECKPOINT_SUBJECT.match(subject.strip())
        if found:
            return found.group(1)
    return None
