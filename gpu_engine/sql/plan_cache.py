"""Keep the plans of recent SQL texts, so a text run again skips parsing and planning.

Why: at a small scale factor planning is most of a query's time (TPC-H Q19
at SF 0.01: ~100 ms to parse, qualify and plan, ~40 ms to run), and a
dashboard or an application runs the same texts over and over. A plan is a
frozen tree of frozen nodes (nothing in it changes when it runs), so one plan
can run any number of times, on several threads at once.

What a plan depends on: the text, the dialect, and the registered tables it
was planned over (their schemas resolve names and types, their statistics
order joins). An entry therefore remembers the registered table objects of
the whole catalog at planning time, by weak reference, and is used only
while the session's catalog holds exactly those objects under the same
names: registering any table again, adding one or dropping one makes older
entries miss (the Session leaves out of the key the temporary tables of
shared CTEs, :mod:`gpu_engine.sql.shared_ctes`, which come and go with one
call: the texts over them name them by the whole text's hash and a slot, so
a kept plan over them is used only by a later run of the same text, whose
tables of those names hold the same CTEs). A table object that was freed
never matches (weak references,
so the cache keeps no table's data alive). Only successful plans are kept;
an error is raised again by planning the text again.

Bounded: the ``entries`` most recently used texts up to ``max_text_chars``
characters each (a text with a 100,000-value IN list is planned each time
rather than kept). A text whose shared CTEs run first keeps one entry per CTE
and one for the query over them besides its own: TPC-DS's 99 texts take 142.
Texts run in turn that need more entries than the bound never hit (the least
recently used one is always the next asked for): with 128 entries every warm
run of the 99 parsed and planned again (53% of their wall time at SF 0.01 in
``bench/fixed_cost.py --workload tpcds``). Hence 512 (a TPC-DS plan holds ~50 KB).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Callable, Mapping

from gpu_engine.plans.nodes import PlanNode

__all__ = ["PlanCache", "DEFAULT_PLAN_CACHE_ENTRIES", "DEFAULT_MAX_TEXT_CHARS"]

#: Plans a session keeps by default (and prepared forms of them, :mod:`gpu_engine.planning.prepared_plans`).
DEFAULT_PLAN_CACHE_ENTRIES = 512
#: Longer texts are not kept (their plans hold their literal lists).
DEFAULT_MAX_TEXT_CHARS = 100_000

#: The catalog an entry was planned over: (table name, weak reference to the registered table object), sorted.
_Snapshot = tuple[tuple[str, "weakref.ref"], ...]


class PlanCache:
    """Map (SQL text, dialect) to its plan while the registered tables it was planned over are unchanged.

    Thread-safe: lookups and insertions take a lock for the dictionary
    operations only; planning happens outside it, so threads planning
    different texts never wait on each other.
    """

    def __init__(self, entries: int = DEFAULT_PLAN_CACHE_ENTRIES, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS):
        if isinstance(entries, bool) or not isinstance(entries, int) or entries < 0:
            raise ValueError(f"entries must be a non-negative integer (0: keep no plans), got {entries!r}")
        self.entries = entries
        self.max_text_chars = max_text_chars
        self._lock = threading.Lock()
        self._plans: OrderedDict[tuple[str, str], tuple[_Snapshot, PlanNode]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        """Forget every plan."""
        with self._lock:
            self._plans.clear()

    def plan(self, text: str, dialect: str, tables: Mapping[str, object], planner: Callable[[], PlanNode]) -> PlanNode:
        """Return the kept plan of ``text`` over ``tables``, or call ``planner()`` and keep what it returns.

        ``tables`` is the session's registered-table mapping (name -> table
        object); the snapshot is taken before planning, so a table registered
        while the planner runs makes the new entry miss rather than match a
        catalog it was not planned over.
        """
        if self.entries == 0 or not isinstance(text, str) or len(text) > self.max_text_chars:
            return planner()
        key = (text, dialect)
        with self._lock:
            entry = self._plans.get(key)
            if entry is not None and _matches(entry[0], tables):
                self._plans.move_to_end(key)
                self.hits += 1
                return entry[1]
            self.misses += 1
        snapshot = _snapshot(tables)
        plan = planner()
        with self._lock:
            self._plans[key] = (snapshot, plan)
            self._plans.move_to_end(key)
            while len(self._plans) > self.entries:
                self._plans.popitem(last=False)
        return plan


def _snapshot(tables: Mapping[str, object]) -> _Snapshot:
    return tuple(sorted((name, weakref.ref(table)) for name, table in dict(tables).items()))  # dict(): one atomic copy


def _matches(snapshot: _Snapshot, tables: Mapping[str, object]) -> bool:
    """Return whether ``tables`` holds exactly the snapshot's table objects under the same names."""
    if len(snapshot) != len(tables):
        return False
    for name, reference in snapshot:
        table = reference()
        if table is None or tables.get(name) is not table:
            return False
    return True
