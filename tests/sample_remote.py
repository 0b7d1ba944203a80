"""The sample repository pushed to a bare repository that tests use as the card's remote
(cardloop/app/sample_remote.py, which `cardloop demo` uses too)."""

from cardloop.app.sample_remote import SAMPLE_REPO, SAMPLE_REPO_NAME, Remote, git, push_sample_repo

__all__ = ["SAMPLE_REPO", "SAMPLE_REPO_NAME", "Remote", "git", "push_sample_repo"]
