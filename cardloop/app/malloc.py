"""Large blocks go back to the operating system when freed (glibc), so a worker's memory levels off.

A worker handles build logs and prompts of hundreds of KB, made and dropped every turn. glibc's
malloc serves a block over 128 KB from its own mmap, returned to the system when freed, but each
such free raises that threshold to the block's size (up to 32 MB): after the first log, every later
one comes from the heap, where freed space is kept and fragments. bench/assemble_memory.py showed
it: with every cache at its bound (Python's live memory flat under tracemalloc), the process still
grew by about 2 to 3 MB per 100 cards, in steps; with the threshold fixed, it levels off.
Fixing the threshold (which also stops its dynamic adjustment) is `mallopt(M_MMAP_THRESHOLD)`;
`MALLOC_MMAP_THRESHOLD_` in the environment does the same and wins (glibc reads it at start).
Elsewhere (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value, kept fixed


def return_large_blocks() -> bool:
    """Fix glibc's mmap threshold at 128 KB; True when it was set here (or by the environment)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return True  # the operator chose: glibc already applied it
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError):  # no glibc (musl has no mallopt to set it with)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
