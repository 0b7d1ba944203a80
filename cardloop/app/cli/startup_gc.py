"""Python's cyclic garbage collector, paused while a command starts.

A card command's start-up creates about 300,000 objects (modules, classes, functions, pydantic
and SQLAlchemy structures) that live as long as the process: the collector found nothing to free
among them, and scanning them again and again (about 200 young, 18 middle and a full collection)
took about 60 ms of `cardloop card show`'s 0.5 s. The console script pauses it before the
imports; `resume` freezes what start-up made (gc.freeze: kept out of every later collection,
which is where it would stay anyway) and turns the collector back on, before the command's own
work: at once for most commands, once its modules are loaded for the card commands (their
`set_defaults(resumes_gc=True)` says they call it themselves). Called from main() without the
console script (tests), the collector was never paused and both are no-ops."""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Idempotent; only undoes `pause` (a collector someone else turned off stays off)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
