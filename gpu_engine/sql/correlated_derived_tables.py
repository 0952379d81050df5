"""Pull a subquery's correlation out of the derived tables in its FROM: ``FROM (SELECT * FROM u WHERE u.k = t.k) w``.

Why: decorrelation (:mod:`~gpu_engine.sql.decorrelation`) reads a subquery's correlation from its own WHERE;
written one derived table further in (``EXISTS (SELECT 1 FROM (SELECT * FROM u WHERE u.k = t.k) w)``, as a
generated or a layered query writes it) the subquery looked uncorrelated in its WHERE ("EXISTS without an equality
between a subquery column and an outer column"), which DuckDB answers. A derived table that only filters and
projects its FROM gives the same rows whether its correlated conjuncts filter it inside or its output outside, so
each such conjunct moves to the enclosing subquery's WHERE, over the derived table's output columns (``w.k =
t.k``). Left where they are (the planner then refuses by name): derived tables that group, aggregate, window,
are DISTINCT or pick rows (a filter before them is not one after them) and an outer join's side. A column the
derived table does not output (pruned, or never selected) becomes one of its outputs.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.predicates import conjoined, conjuncts_of, defined_aliases, free_columns, in_nested_query

__all__ = ["with_correlation_pulled_up", "with_subquery_correlations_pulled_up", "pulled_correlation"]

#: Clauses after which a filter inside a derived table is not the same filter outside it.
_SHAPING = ("group", "having", "qualify", "limit", "offset", "distinct", "windows")


def with_correlation_pulled_up(select: exp.Expression, outer_aliases: set[str]) -> exp.Expression:
    """Return ``select`` (a subquery) with the correlated conjuncts of its plain derived tables in its WHERE.

    ``select`` itself comes back when nothing moves; a copy otherwise.
    """
    if not isinstance(select, exp.Select) or not _derived_items(select):
        return select
    copy = select.copy()
    moved = []
    for subquery in _derived_items(copy):
        moved += _pulled(subquery, outer_aliases)
    if not moved:
        return select
    where = copy.args["where"].this if copy.args.get("where") else None
    copy.set("where", exp.Where(this=conjoined(conjuncts_of(where) + moved)))
    return copy


def with_subquery_correlations_pulled_up(select: exp.Select) -> exp.Select:
    """Return ``select`` with :func:`with_correlation_pulled_up` applied to each subquery of its own clauses
    (scalar, EXISTS, IN / ANY / ALL; not its FROM items); ``select`` itself where nothing moves.

    Why once for every kind, before the planner's subquery rewrites: the scalar paths (WHERE comparisons, SELECT
    values, the null-safe and domain splits) each read a subquery's correlation from its own WHERE, and a scalar
    subquery correlated one derived table further in (``(SELECT count(*) FROM (SELECT * FROM u WHERE u.b < t.a)
    s)``) looked uncorrelated there: refused "a correlated reference inside a derived table", which DuckDB answers.
    The EXISTS / IN binders pulled it up themselves; this does it for all of them.
    """
    if not any(isinstance(query, exp.Select) and _derived_items(query) for query in _own_subqueries(select)):
        return select
    outer_aliases = defined_aliases(select)
    copy, changed = select.copy(), False
    for holder in [node.parent for node in _own_subqueries(copy)]:
        query = holder.this
        if isinstance(query, exp.Select) and _derived_items(query):
            pulled = with_correlation_pulled_up(query, outer_aliases)
            if pulled is not query:
                holder.set("this", pulled)
                changed = True
    return copy if changed else select


def _own_subqueries(select: exp.Select) -> list[exp.Expression]:
    """Return the query of each subquery of ``select``'s own clauses (not nested in another, not a FROM item)."""
    stack = [node for key, value in select.args.items() if key not in ("with_", "with", "from_", "joins")
             for node in (value if isinstance(value, list) else [value]) if isinstance(node, exp.Expression)]
    stack += [join.args["on"] for join in select.args.get("joins") or [] if join.args.get("on") is not None]
    found = []
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Subquery, exp.Exists)) and isinstance(node.this, (exp.Select, exp.SetOperation)):
            found.append(node.this)
        elif not isinstance(node, (exp.Select, exp.SetOperation)):
            stack.extend(node.iter_expressions())
    return found


def _derived_items(select: exp.Select) -> list[exp.Subquery]:
    """Return the derived tables of ``select``'s FROM and its inner joins."""
    items = [select.args["from_"].this] if select.args.get("from_") else []
    items += [join.this for join in select.args.get("joins") or []
              if not join.side and (join.kind or "").upper() in ("", "INNER", "CROSS")]
    return [item for item in items if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select)
            and item.alias]


def pulled_correlation(subquery: exp.Subquery, outer_aliases: set[str], shaped: bool = False) -> list[exp.Expression]:
    """Remove ``subquery``'s correlated conjuncts from its WHERE (in place) and return them over its outputs.

    Nothing moves where the subquery groups, aggregates, windows, is DISTINCT or picks rows, unless ``shaped``
    (the caller then makes the shape per correlation key itself). Also used by
    :mod:`~gpu_engine.sql.lateral_joins` for a LATERAL subquery, whose outer aliases are the FROM items before it.
    """
    return _pulled(subquery, outer_aliases, shaped)


def _pulled(subquery: exp.Subquery, outer_aliases: set[str], shaped: bool = False) -> list[exp.Expression]:
    """Remove the movable correlated conjuncts from ``subquery``'s WHERE (in place) and return them rewritten
    over its output columns."""
    inner = subquery.this
    if not shaped and (any(inner.args.get(key) for key in _SHAPING) or any(
            node.find(exp.AggFunc, exp.Window) for node in inner.expressions)):
        return []
    nested = [conjunct for item in _derived_items(inner) for conjunct in _pulled(item, outer_aliases)]
    if nested:  # a deeper derived table's correlation, now in this one's WHERE
        where = inner.args["where"].this if inner.args.get("where") else None
        inner.set("where", exp.Where(this=conjoined(conjuncts_of(where) + nested)))
    if inner.args.get("where") is None:
        return []
    own = defined_aliases(inner)
    outputs = {}
    for projection in inner.expressions:
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(value, exp.Column) and value.table in own:
            outputs.setdefault((value.table, value.name), projection.alias_or_name)
    kept, moved = [], []
    for conjunct in conjuncts_of(inner.args["where"].this):
        tables = {column.table for column in free_columns(conjunct)}
        if not tables - own or tables - own - outer_aliases:  # local, or reading further out than the subquery
            kept.append(conjunct)
            continue
        for column in free_columns(conjunct):  # a column it does not output (pruned, or never selected): added
            if column.table in own and (column.table, column.name) not in outputs and not in_nested_query(column, conjunct):
                outputs[(column.table, column.name)] = name = f"$correlated{len(outputs)}"
                inner.append("expressions", exp.alias_(exp.column(column.name, table=column.table), name,
                                                       quoted=True))
        moved.append(conjunct.copy().transform(
            lambda node: exp.column(outputs[(node.table, node.name)], table=subquery.alias, quoted=True)
            if isinstance(node, exp.Column) and node.table in own and (node.table, node.name) in outputs
            and not in_nested_query(node, conjunct) else node))
    if moved:
        inner.set("where", exp.Where(this=conjoined(kept)) if kept else None)
    return moved

