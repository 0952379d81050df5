"""Filter the NULL-extended side of a LEFT JOIN by what the WHERE keeps of the key it must equal.

Why: TPC-DS q78 left-joins its store-sales CTE to the web and catalog ones
``ON ws_sold_year = ss_sold_year AND ...`` and keeps ``ss_sold_year = 2000``
in the WHERE; the planner computed the web and catalog CTEs for every year
(all of web_sales and catalog_sales scanned, joined, grouped, then hashed
into the join) although a row of theirs with another year can match no row
the WHERE keeps. Deriving ``ws_sold_year = 2000`` for the NULL-extended side
is the transitive filter DuckDB's filter pushdown and PostgreSQL's
equivalence classes derive; it then goes into the CTE like any filter on it
(:mod:`~gpu_engine.optimizer.predicate_pushdown`: below its GROUP BY, to date_dim).

The rule: a WHERE conjunct that filters one FROM item ``a`` no outer join
NULL-extends, and compares one column ``a.y`` with constants (``=``, ``<>``,
``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN (list)``), and a LEFT JOIN
of item ``r`` whose ON condition has the conjunct ``r.x = a.y``: then the
conjunct over ``r.x`` filters ``r`` before the join. Why it is correct: the
WHERE drops every joined row whose ``a`` row fails the condition, and a row
of ``r`` failing it can only match such rows (its ``x`` equals their ``y``,
and a comparison with constants gives equal values the same answer; NULLs
match nothing), so removing it changes only rows the WHERE drops. Filters
derived for ``r`` are passed on through ``r``'s own LEFT JOIN equalities
(``a ⟕ r ⟕ s ON s.z = r.x``): ``r``'s rows are then a subset that keeps every
match of a row the WHERE keeps. RIGHT and FULL joins are left alone.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.planning_context import conjunct_key
from gpu_engine.sql.predicates import conjuncts_of, free_columns, has_subquery

__all__ = ["with_filters_through_left_joins"]

#: Comparisons whose answer depends only on the column's value when every other operand is a constant.
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between, exp.In)
#: Constant operands: literals, casts and arithmetic of literals, a list of them (no column, no call).
_CONSTANT_PARTS = (exp.Literal, exp.Cast, exp.DataType, exp.Neg, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Div,
                   exp.Boolean, exp.Tuple)


def _constant(tree: exp.Expression) -> bool:
    return all(isinstance(node, _CONSTANT_PARTS) for node in tree.walk())


def _compared_column(conjunct: exp.Expression) -> exp.Column | None:
    """Return the one column ``conjunct`` compares with constants, None for any other shape."""
    while isinstance(conjunct, exp.Paren):
        conjunct = conjunct.this
    if not isinstance(conjunct, _COMPARISONS) or has_subquery(conjunct):
        return None
    if isinstance(conjunct, exp.In) and conjunct.args.get("query") is not None:
        return None
    operands = [child for child in conjunct.iter_expressions()]
    columns = [operand for operand in operands if isinstance(operand, exp.Column)]
    if len(columns) != 1 or not all(_constant(operand) for operand in operands if operand is not columns[0]):
        return None
    if isinstance(conjunct, (exp.Between, exp.In)) and conjunct.this is not columns[0]:
        return None
    return columns[0]


def _left_join_equalities(items: list[tuple[exp.Expression, exp.Join | None]]
                          ) -> list[tuple[str, str, exp.Column]]:
    """Return (from alias, from column, to column) for each ON equality ``to.x = from.y`` of a LEFT JOIN whose
    NULL-extended item is ``to``."""
    edges = []
    for item, join in items[1:]:
        if (join.side or "").upper() != "LEFT" or (join.kind or "").upper() == "FULL":
            continue
        target = item.alias_or_name
        for conjunct in conjuncts_of(join.args.get("on")):
            if not (isinstance(conjunct, exp.EQ) and isinstance(conjunct.this, exp.Column)
                    and isinstance(conjunct.expression, exp.Column)):
                continue
            left, right = conjunct.this, conjunct.expression
            if right.table == target and left.table != target:
                left, right = right, left
            if left.table == target and right.table != target and right.table:
                edges.append((right.table, right.name, left))
    return edges


def with_filters_through_left_joins(pushed: dict[str, list[exp.Expression]],
                                    items: list[tuple[exp.Expression, exp.Join | None]],
                                    null_supplying: set[str]) -> None:
    """Add to ``pushed`` (the conjuncts filtering each FROM item, by alias) the filters LEFT JOIN equalities
    carry from an item the WHERE filters to the item the join NULL-extends (see the module docstring)."""
    edges = _left_join_equalities(items)
    if not edges:
        return
    sources = {alias: list(conjuncts) for alias, conjuncts in pushed.items() if alias not in null_supplying}
    # what filters each item already, by conjunct_key: a filter derived again, written apart (quoted, parenthesized,
    # turned round), is not added twice (its selectivity would count twice in the estimates)
    seen = {alias: {conjunct_key(c) for c in conjuncts} for alias, conjuncts in pushed.items()}
    for _ in range(len(edges)):  # a chain of LEFT JOINs passes filters on, one edge a round
        added = False
        for source, column, target_column in edges:
            target = target_column.table
            for conjunct in sources.get(source, []):
                compared = _compared_column(conjunct)
                if compared is None or compared.table != source or compared.name != column:
                    continue
                if any(c.table != source or c.name != column for c in free_columns(conjunct)):
                    continue
                derived = conjunct.copy().transform(
                    lambda node: target_column.copy() if isinstance(node, exp.Column) else node, copy=False)
                key = conjunct_key(derived)
                if key in seen.setdefault(target, set()) or target not in pushed:
                    continue
                seen[target].add(key)
                pushed[target].append(derived)
                sources.setdefault(target, []).append(derived)
                added = True
        if not added:
            return
