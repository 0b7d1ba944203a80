"""PyGithub's logger, quieted to warnings and routed through the process's own handlers.

On import PyGithub sets its `github` logger to INFO and gives it a stderr handler of its own,
whatever the application configured: every redirect it follows ("Following Github server
redirection from /repos/old to /repos/new") then lands on the terminal of `cardloop context`
and `cardloop dev`, around cardloop's own output. Setting the level before PyGithub is
imported does not hold (its import sets INFO again), so every cardloop module that imports
PyGithub calls `quiet_pygithub()` right after: idempotent, and PyGithub runs its import once.
Warnings and errors keep reaching the root logger's handlers (redacted text or JSON lines, the
data dir's log file), or Python's last-resort stderr handler where nothing is configured."""

from __future__ import annotations

import logging

import github  # noqa: F401  imported first, so that its import cannot undo what follows

LOGGER = "github"


def quiet_pygithub() -> None:
    log = logging.getLogger(LOGGER)
    log.setLevel(logging.WARNING)
    for handler in list(log.handlers):
        if type(handler) is logging.StreamHandler:  # PyGithub's own, added by its import
            log.removeHandler(handler)
