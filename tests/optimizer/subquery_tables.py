"""The small tables the scalar-subquery tests (WHERE and SELECT forms) share, and their column types.

``t`` has duplicate and NULL keys; ``u`` has keys ``t`` lacks, a NULL key and a key (1) of several rows; ``e`` is
empty; ``s`` has keys of another integer width (int32 against ``t``'s int64).

No integer column is unique: ``t``, ``u`` and ``s`` each end with a copy of one of their rows. Why: a GROUP BY over
an in-memory column read and found unique is a projection (:mod:`~gpu_engine.optimizer.unique_groupings`), so with
``t.v``, ``u.w`` and ``s.w`` unique the per-domain DISTINCT of a decorrelated subquery (``SELECT DISTINCT t.v``) and
the per-value counts of IN / ANY / ALL (``GROUP BY w``) were projections in 30 of these tests' queries and plans,
which then no longer ran the aggregations they were written for (bench/rule_firing_probe.py logs where it fires).
"""

from __future__ import annotations

import pyarrow as pa

from gpu_engine.plans.plan_builder import PlanBuilder, PlanNodeIdGenerator

BOOL, I64, I32 = pa.bool_(), pa.int64(), pa.int32()
TABLES = {
    "t": pa.table({"k": pa.array([1, 1, 2, None, 3, 5, 6, 6], I64),
                   "v": pa.array([10, 20, 30, 40, None, 60, 70, 70], I64)}),
    "u": pa.table({"k": pa.array([1, 3, 3, 4, None, 6, 1, 4], I64), "w": pa.array([15, 5, 50, 1, 2, None, 3, 1], I64)}),
    "e": pa.table({"k": pa.array([], I64), "w": pa.array([], I64)}),
    "s": pa.table({"k": pa.array([1, 3, 2, None, None], I32), "w": pa.array([1, 2, 3, 4, 4], I32)}),
}


class HandPlans:
    """The hand-built plan shapes the typed-subquery tests put their predicates in, with one id generator.

    ``scan`` reads a table (filtered when given a predicate: a subquery's input), ``where`` filters ``t`` and keeps
    ``k, v``, ``select`` adds a column ``m`` to ``t``'s: the three positions a subquery predicate takes.
    """

    def __init__(self, catalog):
        self._catalog = catalog
        self._ids = PlanNodeIdGenerator()

    def _builder(self):
        return PlanBuilder(self._catalog, id_generator=self._ids)

    def scan(self, table, predicate=None):
        builder = self._builder().table_scan(table)
        return (builder.filter(predicate) if predicate is not None else builder).plan()

    def where(self, predicate):
        return self._builder().table_scan("t").filter(predicate).project(["k", "v"]).plan()

    def select(self, expr):
        return self._builder().table_scan("t").project(["k", "v", ("m", expr)]).plan()
