"""Keep sqlglot's simplifier away from constant arithmetic, whose result type and errors the engine decides.

sqlglot folds constant arithmetic with Python numbers: ``1.0 / 4.0`` becomes
the decimal ``0.25`` (DuckDB: the DOUBLE 0.25), ``2147483647 + 1`` the BIGINT
``2147483648`` (DuckDB: an INT32 overflow error). The engine's translator
types arithmetic as DuckDB does (:mod:`gpu_engine.plans.type_coercion`) and
computes it with DuckDB's overflow checks, so arithmetic is marked final
(sqlglot's own mark for what its simplifier must leave alone) while the query
is simplified; the other rules still apply: boolean logic, comparisons of
constants, DATE +/- INTERVAL (folded to the date, which the planner's
selectivity estimates read), BETWEEN, and moving a constant across a
comparison (``a + 1 = 3`` is ``a = 2``, as DuckDB's optimizer moves it too).
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp
from sqlglot.optimizer.simplify import FINAL

__all__ = ["simplify_keeping_arithmetic"]

_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod)


def simplify_keeping_arithmetic(tree: exp.Expression,
                                simplify: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """Return ``simplify(tree)`` with every arithmetic operation left as written, and ``date_trunc`` of a DATE
    left a TIMESTAMP (sqlglot reads it as its DateTrunc and folds a constant one to a DATE; DuckDB types it
    TIMESTAMP)."""
    for node in list(tree.walk()):
        if isinstance(node, _ARITHMETIC) and not any(isinstance(side, exp.Interval) for side in node.iter_expressions()):
            node.meta[FINAL] = True
        elif isinstance(node, exp.DateTrunc):  # date_trunc of a DATE: a TIMESTAMP, as the translator types it
            truncation = exp.TimestampTrunc(this=node.this, unit=node.args.get("unit"))
            truncation.meta[FINAL] = True
            if node is tree:
                tree = truncation
            else:
                node.replace(truncation)
    simplified = simplify(tree)
    for node in simplified.walk():
        if node.meta_get(FINAL):
            node.meta.pop(FINAL)
    return simplified
