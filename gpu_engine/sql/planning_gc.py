"""Collect the interpreter's garbage less often while a SQL text is planned.

Why: planning a text builds and drops sqlglot trees by the hundred thousand
nodes, and every node links to its parent, so none is freed by reference
counting: each waits for the cyclic collector. At CPython's default youngest-
generation threshold (700 allocations) a collection runs every few
microseconds of planning and finds the tree being rewritten still alive, so it
is promoted, dies in an older generation, and has to be found there: planning
TPC-DS's 99 texts ran ~700 young, ~64 middle and 3-4 full collections (a full
one walks every object of the process, the engine's and the application's);
at 20,000 it runs ~96, 8 and 0-1, and the texts plan in ~3% less CPU in a
planning-only process (more where the process holds more objects for a full
collection to walk; ``bench/results/2026-11-28-firstrun-lowest-tier-and-planning.md``).
Every first run plans its text, and so does every new ad-hoc query.

The threshold is raised only while some thread plans (the last one to finish
puts it back) and only upwards: a process that turned collection off
(threshold 0) or set a higher threshold keeps its own, and one that changes
the threshold while a text is planned keeps its change.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

__all__ = ["PLANNING_THRESHOLD", "fewer_collections"]

#: The youngest generation's collection threshold while a text is planned (CPython's default: 700). Far higher
#: (100,000) each young collection walks so many objects that planning is no faster than at the default.
PLANNING_THRESHOLD = 20_000

_lock = threading.Lock()
_planning = 0  # threads inside fewer_collections()
_saved: tuple[int, ...] | None = None  # the thresholds to put back, when this module raised them


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the block with the youngest generation's threshold at :data:`PLANNING_THRESHOLD` (see the module)."""
    global _planning, _saved
    with _lock:
        if _planning == 0:
            current = gc.get_threshold()
            _saved = None
            if 0 < current[0] < PLANNING_THRESHOLD:
                _saved = current
                gc.set_threshold(PLANNING_THRESHOLD, *current[1:])
        _planning += 1
    try:
        yield
    finally:
        with _lock:
            _planning -= 1
            if _planning == 0 and _saved is not None:
                if gc.get_threshold()[0] == PLANNING_THRESHOLD:  # not changed by the application meanwhile
                    gc.set_threshold(*_saved)
                _saved = None
