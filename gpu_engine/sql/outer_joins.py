"""Turn a LEFT JOIN into an inner join when a WHERE condition rejects the rows it NULL-extends.

Why: the planner joins a query with outer joins in the written order
(:func:`~gpu_engine.sql.join_ordering.join_in_order`), because outer joins do
not commute. But a LEFT JOIN whose NULL-extended rows a later condition
throws away anyway is an inner join: in TPC-DS q93, ``store_sales LEFT JOIN
store_returns ... , reason WHERE sr_reason_sk = r_reason_sk AND r_reason_desc
= '...'`` keeps no row whose ``store_returns`` columns are NULL, so the
query is ``store_sales ⋈ store_returns ⋈ reason``, which the greedy order
starts at the one selected reason instead of probing every sale into the
returns. Textbook optimizers call this outer-join simplification (PostgreSQL's
``reduce_outer_joins``, DuckDB's filter pushdown into LEFT joins).

A condition *rejects* an alias when it cannot be TRUE on a row whose columns
of that alias are all NULL: a comparison (``=``, ``<>``, ``<``, ``LIKE``,
``BETWEEN``, ``IN (list)``, ...) one of whose operands is NULL-strict in the
alias (a column of it, or arithmetic and casts over one), ``x IS NOT NULL``
of such an operand, an AND with a rejecting operand, an OR whose every
branch rejects. Anything else (``IS NULL``, ``coalesce``, ``CASE``, function
calls, subqueries) is assumed to keep such rows. The conditions that count
are the WHERE's conjuncts and the ON conditions of inner joins (both apply to
the joined rows); a query with a RIGHT or FULL join is left as written.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.predicates import conjuncts_of, has_subquery

__all__ = ["rejects_nulls_of", "with_rejected_left_joins_inner"]

#: Expressions that are NULL when one of their operands is (casts included: TRY_CAST of NULL is NULL too).
_NULL_STRICT = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg, exp.Paren, exp.Cast, exp.Mod)

#: Predicates that are NULL (never TRUE) when one of their operands is NULL.
_STRICT_PREDICATES = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Like, exp.ILike, exp.Between)


def _strict_in(tree: exp.Expression, alias: str) -> bool:
    """Return whether ``tree`` is NULL whenever the columns of ``alias`` are."""
    if isinstance(tree, exp.Column):
        return tree.table == alias
    if isinstance(tree, _NULL_STRICT):
        return any(_strict_in(child, alias) for child in tree.iter_expressions()
                   if not isinstance(child, exp.DataType))
    return False


def rejects_nulls_of(tree: exp.Expression, alias: str) -> bool:
    """Return whether condition ``tree`` cannot be TRUE on a row whose ``alias`` columns are all NULL."""
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if has_subquery(tree):
        return False
    if isinstance(tree, exp.And):
        return rejects_nulls_of(tree.this, alias) or rejects_nulls_of(tree.expression, alias)
    if isinstance(tree, exp.Or):
        return rejects_nulls_of(tree.this, alias) and rejects_nulls_of(tree.expression, alias)
    if isinstance(tree, exp.Not):
        inner = tree.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):  # x IS NOT NULL
            return _strict_in(inner.this, alias)
        # NOT p is NULL where p is: p strict in the alias (a comparison, not an AND/OR, which NOT may make TRUE)
        return isinstance(inner, _STRICT_PREDICATES + (exp.In,)) and rejects_nulls_of(inner, alias)
    if isinstance(tree, exp.Is):  # x IS NULL, x IS TRUE...: TRUE on NULLs (IS NOT NULL is negated: above)
        return False
    if isinstance(tree, exp.In):  # x [NOT] IN (list): NULL when x is NULL
        return not tree.args.get("query") and _strict_in(tree.this, alias)
    if isinstance(tree, _STRICT_PREDICATES):
        return any(_strict_in(child, alias) for child in tree.iter_expressions())
    return False


def with_rejected_left_joins_inner(select: exp.Select) -> exp.Select:
    """Return ``select`` with each LEFT JOIN whose NULL-extended rows a condition rejects made an inner join.

    The SELECT comes back as it was (not copied) when nothing changes; else a copy.
    """
    joins = select.args.get("joins") or []
    sides = [(join.side or "").upper() for join in joins]
    if "LEFT" not in sides or any(side in ("RIGHT", "FULL") or (join.kind or "").upper() == "FULL"
                                  for side, join in zip(sides, joins)):
        return select
    where = select.args.get("where")
    conditions = conjuncts_of(where.this) if where is not None else []
    inner = {n for n, side in enumerate(sides) if not side}
    while True:  # a LEFT JOIN made inner filters with its ON condition: it may reject an earlier LEFT JOIN's rows
        found = conditions + [c for n in sorted(inner) for c in conjuncts_of(joins[n].args.get("on"))]
        rejected = {n for n, side in enumerate(sides) if side == "LEFT" and n not in inner
                    and any(rejects_nulls_of(c, joins[n].this.alias_or_name) for c in found)}
        if not rejected:
            break
        inner |= rejected
    made_inner = sorted(n for n in inner if sides[n] == "LEFT")
    if not made_inner:
        return select
    select = select.copy()  # the caller's tree stays as it was
    for n in made_inner:
        join = select.args["joins"][n]
        join.set("side", None)
        join.set("kind", None)
    return select
