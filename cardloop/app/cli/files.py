"""Reading a file a user named on the command line: every command says the same of a missing
file, a directory or a file that is not UTF-8 text, in one line naming it (exit 2)."""

from __future__ import annotations

from pathlib import Path

from cardloop.contracts.errors import InputError


def read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:  # a directory, no permission ...
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text: {exc}") from None
