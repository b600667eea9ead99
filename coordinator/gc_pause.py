"""Pausing Python's cyclic garbage collector while a load allocates millions of objects.

A load allocates an object per offset and frees almost none: each collection would rescan the
growing heap for nothing (it tripled the time of a 1M-offset load), so collections wait until
the load is over. Nesting is fine: only the outermost pause re-enables the collector.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
