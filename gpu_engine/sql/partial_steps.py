"""Plan a GROUP BY without a partial step where one key alone is about as distinct as the rows.

Why: with several drivers, a SINGLE aggregation runs as PARTIAL -> LocalPartition(keys) -> FINAL
(:mod:`gpu_engine.planning.local_exchanges`), so each driver's partial step shrinks its rows before they
cross the exchange. Where the groups are about as many as the rows, the partial step shrinks nothing: it
hashes every row into a table as large as its input, emits it, and the final step hashes every row again.
With string keys that is a second interning of every string (TPC-H Q10 groups the ~38K customers of its
joined rows by seven customer columns, four of them strings: the partial step cost ~20% of the query's
CPU). A running partial step abandons grouping when it sees this (``partial_aggregation_abandon_percent``
of its rows become groups), but only after ``partial_aggregation_abandon_rows`` rows, which such a join's
output per driver never reaches. Presto's ``partial_aggregation_strategy=AUTOMATIC`` makes the same
choice from its estimates.

The rule: the estimates (:mod:`gpu_engine.sql.statistics`) know a grouping key's distinct count (an
integer or date column's range, capped by the rows after each filter and join) and it is at least
:data:`GROUPS_PER_ROW` of the estimated input rows: the groups are at least that key's distinct values, so
the partial step could keep at most ``1 - GROUPS_PER_ROW`` of its rows out of the exchange. Unknown
distinct counts (strings, expressions) never refuse the partial step. A wrong estimate costs time, never
correctness: either plan computes the same groups.

Only above :data:`MIN_ESTIMATED_ROWS`: below it a partial step costs a millisecond or two either way, and a
choice made from estimates would make the plan, and so its generated kernels, depend on a query's constants
(``WHERE v > 20`` against ``WHERE v > 99999``: a selective filter caps the key's distinct count at the few rows
it keeps), which the compilation issue forbids (``tests/codegen/test_kernel_parameters.py``: a new constant
generates no kernel). Above it a new constant may still flip the choice; each plan's kernels compile once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpu_engine.sql.planning_context import Relation

#: The share of its input rows a partial step keeps as groups at which it stops paying: the default of
#: ``QueryConfig.partial_aggregation_abandon_percent`` (80), the running step's own threshold.
GROUPS_PER_ROW = 0.8

#: The estimated input rows below which the partial step is always kept (see the module docstring).
MIN_ESTIMATED_ROWS = 10_000


def partial_step_pays(relation: "Relation", key_names: list[str]) -> bool:
    """Return False when a grouping key of ``relation`` is estimated to have about a distinct value per row.

    ``key_names`` are the aggregation's grouping columns of ``relation`` (a key computed by an expression
    has no statistics, so it never decides). A global aggregation always keeps its partial step (one row).
    """
    if not key_names or relation.rows < max(1, MIN_ESTIMATED_ROWS):
        return True
    known = [relation.stats[k].ndv for k in key_names if k in relation.stats and relation.stats[k].ndv > 0]
    return not known or max(known) < GROUPS_PER_ROW * relation.rows
