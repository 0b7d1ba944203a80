"""Reading a file a user named on the command line: every command says the same of a missing
file, a directory, a file too large or a file that is not UTF-8 text, in one line naming it
(exit 2). `-` is standard input where a command says so (`prompt validate -`)."""

from __future__ import annotations

import sys

from cardloop.contracts.errors import InputError

# A card file with a long history is a few MB (examples/card.json: 200 KB). The cap is what
# keeps /dev/zero, or a log named by mistake, from filling the memory before anything is said.
MAX_BYTES = 64 * 2**20
STDIN = "-"


def read_bytes(path: str, *, limit: int = MAX_BYTES, stdin: bool = False) -> bytes:
    """At most `limit` bytes of `path` (a pipe or /dev/fd/N too: `<(kubectl logs ...)`)."""
    name = display_name(path, stdin=stdin)
    if not path.strip():  # `cardloop card check "$UNSET"`: ": no such file" named nothing
        raise InputError("empty file name")
    try:
        if stdin and path == STDIN:
            if sys.stdin is None:  # the shell closed it (`<&-`): there is nothing to read
                raise InputError(f"{name}: closed; give a file, or pipe the text in")
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as file:
                data = file.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as exc:  # a directory, no permission, a name too long ...
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{name}: larger than {limit / 2**20:g} MB")
    return data


def read_text(path: str, *, limit: int = MAX_BYTES, stdin: bool = False) -> str:
    data = read_bytes(path, limit=limit, stdin=stdin)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{display_name(path, stdin=stdin)}: not UTF-8 text: {exc}") from None


def display_name(path: str, *, stdin: bool = False) -> str:
    return "stdin" if stdin and path == STDIN else path
