"""Pausing Python's cyclic garbage collector while a load allocates millions of objects.

A load allocates an object per offset and frees almost none: each collection would rescan the
growing heap for nothing (it tripled the time of a 1M-offset load), so collections wait until
the load is over. Nesting is fine: only the outermost pause re-enables the collector.

`freeze=True` also moves every object alive at the end into the permanent generation
(gc.freeze) before collections resume. Loaded groups and offsets live until their group goes:
without it, the first full collection after a 1M-offset load would walk all of them (~0.7 s on a
loaded machine) just as serving starts, and again at every later full collection. The cost: a
reference cycle among frozen objects is never collected (the loaded tables hold none).
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(freeze: bool = False) -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()
