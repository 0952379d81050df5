"""Rewrite a correlated scalar subquery with GROUP BY, HAVING, DISTINCT or LIMIT/OFFSET into rows per correlation key.

Why: ``(SELECT sum(b) FROM u WHERE u.k = t.k GROUP BY u.c ORDER BY 1 LIMIT 1)`` is more than one aggregate
per outer row, which :mod:`~gpu_engine.sql.subquery_values` plans only as a join per key. As DuckDB's general
decorrelation does, the subquery is computed once for every correlation key: its own grouping keys plus the
inner correlation columns (``u.k = t.k`` fixes ``u.k`` per outer row, so grouping by ``u.k`` too splits
nothing an outer row sees), its HAVING and DISTINCT as written, its ORDER BY ... LIMIT n OFFSET m as a
``row_number()`` per key. What is left is ``SELECT q.v FROM (<that>) q WHERE q.k0 = t.k``: a correlated
subquery without aggregate, which the value planning joins per key and checks for more than one row per outer
row at run time (DuckDB's "More than one row returned by a subquery used as an expression").

A key without rows has no group: NULL, except where the subquery aggregates without GROUP BY (one row over
no rows: COUNT's 0) and its HAVING holds for that row (HAVING there keeps the key's row, NULL where it fails,
so "no inner rows" and "HAVING failed" stay apart). Refused by name: a correlation other than column
equalities (``u.d < t.d`` with GROUP BY would need the per-value domain grouped further).
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.decorrelation import correlation, empty_group_value, split_correlated
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.planning_context import same_tree
from gpu_engine.sql.predicates import conjoined, constant_truth

__all__ = ["is_shaped", "rows_per_key"]

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
#: The clauses this rewrite plans, by their SQL names.
_CLAUSES = {"group": "GROUP BY", "having": "HAVING", "distinct": "DISTINCT", "limit": "LIMIT", "offset": "OFFSET"}


def is_shaped(query: exp.Select, count) -> bool:
    """Return whether ``query`` (a one-column scalar subquery) is more than one aggregate or one first row per key.

    ``count`` reads a LIMIT/OFFSET clause (the planner's ``_count``). ``ORDER BY ... LIMIT 1 [OFFSET n]``
    without aggregate is left to the value planning's first-row path.
    """
    if any(query.args.get(key) for key in ("group", "having", "distinct")):
        return True
    if query.args.get("limit") is None:
        return query.args.get("offset") is not None
    value = query.expressions[0]
    return value.find(*SQL_AGGREGATES) is not None or count(query.args["limit"], "LIMIT") != 1


def rows_per_key(query: exp.Select, outer_aliases: set[str], alias: str, count) -> tuple[exp.Select, exp.Expression]:
    """Return ``SELECT <alias>.v FROM (<query per correlation key>) <alias> WHERE <alias>.k<n> = <outer n>``.

    Also returns the value an outer row whose key has no rows gets (NULL, or the aggregate over no rows).
    """
    shaping = next(_CLAUSES[key] for key in _CLAUSES if query.args.get(key))
    inner, local, correlated = split_correlated(query, outer_aliases)
    keys, others = correlation(correlated, inner)
    if others or not keys:
        raise unsupported(f"{shaping} in a correlated scalar subquery correlated by other than column equalities "
                          "(u.k = t.k)", query)
    projection = query.expressions[0]
    value = projection.this if isinstance(projection, exp.Alias) else projection
    aggregates = value.find(*SQL_AGGREGATES) is not None or query.args.get("having") is not None
    grouped = query.args.get("group")
    if grouped is not None and any(grouped.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
        raise unsupported("ROLLUP, CUBE or GROUPING SETS in a correlated scalar subquery", query)

    rows = query.copy()
    for key in ("where", "order", "limit", "offset"):
        rows.set(key, None)
    if local:
        rows.set("where", exp.Where(this=conjoined([c.copy() for c in local])))
    key_names = [f"k{n}" for n in range(len(keys))]
    order, order_outputs = _order(query, value, projection.alias_or_name)
    having = query.args.get("having")
    computed = value.copy()
    if grouped is None and having is not None:  # one row per key, kept as NULL where HAVING fails: no row is NULL
        rows.set("having", None)  # too, but a key without inner rows gets the row over no rows (COUNT's 0)
        computed = exp.Case(ifs=[exp.If(this=having.this.copy(), true=computed)])
    rows.set("expressions", [exp.alias_(computed, "v")]
             + [exp.alias_(i.copy(), name) for name, (_, i) in zip(key_names, keys)] + order_outputs)
    if grouped is not None or aggregates:
        rows.set("group", exp.Group(expressions=([e.copy() for e in grouped.expressions] if grouped else [])
                                    + [i.copy() for _, i in keys]))

    limit = count(query.args.get("limit"), "LIMIT")
    offset = count(query.args.get("offset"), "OFFSET") or 0
    conditions = [exp.EQ(this=exp.column(name, table=alias), expression=outer.copy())
                  for name, (outer, _) in zip(key_names, keys)]
    if limit is not None or offset:
        numbered = "$numbered"
        for ordered in order:
            ordered.this.set("table", exp.to_identifier(numbered, quoted=True))
        window = exp.Window(this=exp.RowNumber(), partition_by=[exp.column(n, table=numbered, quoted=True)
                                                                for n in key_names],
                            order=exp.Order(expressions=order) if order else None)
        layer = exp.Select(expressions=[exp.column(e.alias, table=numbered, quoted=True) for e in rows.expressions]
                           + [exp.alias_(window, "rn")])
        layer.set("from_", exp.From(this=exp.Subquery(this=rows, alias=exp.TableAlias(
            this=exp.to_identifier(numbered, quoted=True)))))
        rows = layer
        rn = exp.column("rn", table=alias)
        conditions.append(exp.GT(this=rn, expression=exp.Literal.number(offset)))
        if limit is not None:
            conditions.append(exp.LTE(this=rn.copy(), expression=exp.Literal.number(offset + limit)))

    rewritten = exp.Select(expressions=[exp.alias_(exp.column("v", table=alias), projection.alias_or_name or "v")])
    rewritten.set("from_", exp.From(this=exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier(alias)))))
    rewritten.set("where", exp.Where(this=conjoined(conditions)))
    return rewritten, _empty_key_value(query, value, grouped is not None, limit, offset)


def _order(query: exp.Select, value: exp.Expression, output: str) -> tuple[list[exp.Ordered], list[exp.Expression]]:
    """Return the ORDER BY over the numbered rows' columns (``v`` or ``o<n>``) and the outputs it adds."""
    order, outputs = [], []
    for ordered in query.args["order"].expressions if query.args.get("order") else []:
        term = ordered.this
        if isinstance(term, exp.Literal) and term.is_int:
            if int(term.this) != 1:
                raise unsupported(f"ORDER BY {term.this} in a one-column scalar subquery", ordered)
            term = value
        elif isinstance(term, exp.Column) and not term.table and term.name == output:
            term = value
        if same_tree(term, value):
            name = "v"
        elif query.args.get("distinct"):
            raise unsupported("ORDER BY a term outside the SELECT list of a DISTINCT subquery", ordered)
        else:
            name = f"o{len(outputs)}"
            outputs.append(exp.alias_(term.copy(), name))
        order.append(exp.Ordered(this=exp.column(name), desc=ordered.args.get("desc"),
                                 nulls_first=ordered.args.get("nulls_first")))
    return order, outputs


def _empty_key_value(query: exp.Select, value: exp.Expression, grouped: bool, limit, offset: int) -> exp.Expression:
    """Return what the subquery gives an outer row whose key has no inner rows."""
    having = query.args.get("having")
    if grouped or (value.find(*SQL_AGGREGATES) is None and having is None):
        return exp.Null()  # no group, no row
    if limit == 0 or offset:
        return exp.Null()  # the one row over no rows is cut
    if having is None:
        return empty_group_value(value)
    empty = empty_group_value(value)
    empty_having = empty_group_value(having.this)  # HAVING over the row of no rows: count(*) < 3 is TRUE
    truth = constant_truth(empty_having)
    if isinstance(empty_having, _COMPARISONS) and any(isinstance(side, exp.Null) for side in (
            empty_having.this, empty_having.expression)):
        truth = False  # sum(b) > 12 over no rows: NULL > 12 (simplify keeps it)
    if isinstance(empty, exp.Null):
        return empty
    if truth is not None:
        return empty if truth else exp.Null()
    return exp.Case(ifs=[exp.If(this=empty_having, true=empty)])
