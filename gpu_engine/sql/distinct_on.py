"""Plan ``SELECT DISTINCT ON (keys) ... ORDER BY ...``: the first row of each key in the ORDER BY's order.

Why a rewrite: DuckDB keeps, per distinct value of the keys, the row the
ORDER BY puts first (an arbitrary one without an ORDER BY). That is
``QUALIFY row_number() OVER (PARTITION BY keys ORDER BY <the ORDER BY>) = 1``,
which the planner already plans as a window, and the window filter pass as a
TopNRowNumber of one row per key (Velox's TopNRowNumber); the ORDER BY and
LIMIT then apply to the kept rows, as they follow DISTINCT in DuckDB. Names
of the SELECT list in the keys or the ORDER BY read the outputs' expressions
(DuckDB binds them to the SELECT list first), and ``ORDER BY <n>`` the n-th
output. Refused by name: DISTINCT ON beside a QUALIFY (the row numbering
would have to follow the QUALIFY).
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.output_names import with_output_names_resolved

__all__ = ["with_distinct_on_as_qualify"]


def _resolved(tree: exp.Expression, projections: list[exp.Expression]) -> exp.Expression:
    """Return ``tree`` with the SELECT list's output names (and an ordinal) read as the outputs' expressions."""
    if isinstance(tree, exp.Literal) and not tree.is_string and tree.this.isdigit():
        n = int(tree.this)
        if not 1 <= n <= len(projections):
            raise unsupported(f"ORDER BY {n}: the SELECT list has {len(projections)} columns", tree)
        projection = projections[n - 1]
        return (projection.this if isinstance(projection, exp.Alias) else projection).copy()
    return with_output_names_resolved(tree, projections).copy()


def with_distinct_on_as_qualify(select: exp.Select) -> exp.Select:
    """Return ``select`` with its ``DISTINCT ON (keys)`` written as a QUALIFY on ``row_number() = 1``."""
    distinct = select.args.get("distinct")
    if distinct is None or not distinct.args.get("on"):
        return select
    if select.args.get("qualify") is not None:
        raise unsupported("DISTINCT ON with QUALIFY (filter the rows in a derived table first)", distinct)
    on = distinct.args["on"]
    keys = list(on.expressions) if isinstance(on, exp.Tuple) else [on]
    projections = list(select.expressions)
    for projection in projections:
        if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column)
                                                and isinstance(projection.this, exp.Star)):
            raise unsupported("DISTINCT ON with a * that could not be expanded", projection)
    order = select.args.get("order")
    ordered = []
    for key in (order.expressions if order is not None else []):
        copy = key.copy()
        copy.set("this", _resolved(key.this, projections))
        ordered.append(copy)
    window = exp.Window(this=exp.RowNumber(), partition_by=[_resolved(key, projections) for key in keys],
                        order=exp.Order(expressions=ordered) if ordered else None)
    select = select.copy()
    select.set("distinct", None)
    select.set("qualify", exp.Qualify(this=exp.EQ(this=window, expression=exp.Literal.number(1))))
    return select
