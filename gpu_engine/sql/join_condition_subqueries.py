"""Compute a subquery in an outer join's ON condition as a column of the one FROM item it reads.

Why: ``t LEFT JOIN u ON u.k = t.k AND u.b > (SELECT min(b) FROM u)`` applies its ON condition to each pair
of rows while the join runs, where no subquery can be planned; the WHERE path and the value planning see
WHERE conditions, SELECT lists and inner joins' ON conditions only. A subquery whose value depends on the
rows of one FROM item (uncorrelated, or correlated with that item only) is that item's column: the item
becomes ``(SELECT <its columns>, <subquery> AS "$on_value0" FROM <item>) AS <its alias>`` (its subquery then
planned as any subquery in a SELECT list), and the ON condition reads the column. The join sees the same
pairs and the same condition. A subquery reading columns of two FROM items is refused by name.

Only queries with an outer join are rewritten so: an inner join's ON condition is a WHERE condition already, and
its conjuncts holding a subquery are moved to WHERE before the subquery rewrites
(:func:`with_inner_join_subqueries_in_where`).
"""

from __future__ import annotations

from typing import Mapping

from sqlglot import exp

from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.predicates import conjoined, conjuncts_of, defined_aliases, free_columns, has_subquery

__all__ = ["with_inner_join_subqueries_in_where", "with_join_condition_subqueries_computed"]


def _subqueries(on: exp.Expression) -> list[exp.Expression]:
    """Return the scalar subqueries, EXISTS and ``x IN (SELECT ...)`` of an ON condition, outermost first."""
    found, stack = [], [on]
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.In) and node.args.get("query")):
            found.append(node)
            continue
        if isinstance(node, (exp.Select, exp.SetOperation)):
            continue
        stack.extend(node.iter_expressions())
    return found


def _reads(node: exp.Expression) -> set[str]:
    """Return the FROM-item aliases ``node`` reads from outside its own subquery."""
    query = node.args.get("query") if isinstance(node, exp.In) else node.this
    while isinstance(query, exp.Subquery):
        query = query.this
    inner = defined_aliases(query) if isinstance(query, exp.Select) else set()
    tables = {c.table for c in free_columns(query)} - inner if query is not None else set()
    if isinstance(node, exp.In):
        tables |= {c.table for c in free_columns(node.this)}
    return tables - {""}


def _columns(item: exp.Expression, catalog: Mapping, ctes: Mapping[str, exp.Expression]) -> list[str] | None:
    """Return the output columns of a FROM item (a table, a CTE or a derived table), or None when unknown."""
    if isinstance(item, exp.Subquery) and isinstance(item.this, (exp.Select, exp.SetOperation)):
        return [e.alias_or_name for e in item.this.selects]
    if isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier):
        if item.name in ctes and isinstance(ctes[item.name], (exp.Select, exp.SetOperation)):
            return [e.alias_or_name for e in ctes[item.name].selects]
        schema = catalog.get(item.name)
        return list(schema.names) if schema is not None else None
    return None


def _outer_joins(joins: list[exp.Join]) -> bool:
    return any(j.side or (j.kind or "").upper() in ("OUTER", "FULL") for j in joins)


def with_inner_join_subqueries_in_where(select: exp.Select) -> exp.Select:
    """Return ``select`` with each conjunct of an inner join's ON condition that holds a subquery moved to its WHERE,
    in a SELECT whose joins are all inner (no outer, semi, anti, ASOF join: the planner pools their ON conditions
    with WHERE's, :func:`~gpu_engine.sql.predicates.where_conjuncts`); the same object where there is none.

    Why: the subquery rewrites read WHERE (a domain or a null-safe split,
    :mod:`~gpu_engine.sql.correlation_domains`; quantified comparisons' facts; NOT IN as a mark join), so ``t JOIN
    u ON u.k = t.k AND u.c > (SELECT min(c) FROM v WHERE v.b < t.a)`` was refused ("a correlated scalar subquery
    other than one value correlated by column equalities") where the same condition in WHERE is answered.
    """
    joins = select.args.get("joins") or []
    if any(j.side or (j.kind or "INNER").upper() not in ("INNER", "CROSS") or j.args.get("method") for j in joins):
        return select  # an outer, semi, anti or ASOF join among them: ON stays with its join
    if not any(j.args.get("on") is not None and has_subquery(j.args["on"]) for j in joins):
        return select
    select = select.copy()
    moved = []
    for join in select.args["joins"]:
        on = join.args.get("on")
        if on is None or not has_subquery(on):
            continue
        parts = conjuncts_of(on)
        moved += [part for part in parts if has_subquery(part)]
        kept = [part for part in parts if not has_subquery(part)]
        join.set("on", conjoined(kept) if kept else exp.true())
    where = select.args.get("where")
    select.set("where", exp.Where(this=conjoined(([where.this] if where is not None else []) + moved)))
    return select


def with_join_condition_subqueries_computed(select: exp.Select, planner, ctes: Mapping[str, exp.Expression]
                                            ) -> exp.Select:
    """Return ``select`` with each subquery of an outer join's ON condition a column of the FROM item it reads."""
    joins = select.args.get("joins") or []
    if not _outer_joins(joins):
        return select
    if not any(j.args.get("on") is not None and _subqueries(j.args["on"]) for j in joins):
        return select
    select = select.copy()
    joins = select.args["joins"]
    items = [select.args["from_"].this] + [join.this for join in joins]
    added: dict[str, list[exp.Expression]] = {}  # alias -> the projections its item gains
    for position, join in enumerate(joins, start=1):
        on = join.args.get("on")
        for node in _subqueries(on) if on is not None else []:
            tables = _reads(node)
            own = items[position].alias_or_name
            if len(tables) > 1:
                raise unsupported("a subquery in a JOIN's ON condition reading columns of several FROM items ("
                                  + ", ".join(sorted(tables)) + ")", node)
            alias = next(iter(tables)) if tables else own
            if not any(item.alias_or_name == alias for item in items[:position + 1]):
                raise unsupported("a subquery in a JOIN's ON condition reading a later FROM item", node)
            name = f"$on_value{sum(len(v) for v in added.values())}"
            # exp.Alias, not exp.alias_ (which names a Subquery by a table alias of its own, lost when it is planned)
            added.setdefault(alias, []).append(exp.Alias(this=node.copy(), alias=exp.to_identifier(name, quoted=True)))
            node.replace(exp.column(exp.to_identifier(name, quoted=True), table=alias))
    for n, item in enumerate(items):
        alias = item.alias_or_name
        if alias not in added:
            continue
        columns = _columns(item, planner.catalog, ctes)
        if columns is None:
            raise unsupported("a subquery in a JOIN's ON condition reading a FROM item other than a table, CTE "
                              "or derived table", item)
        computed = exp.Select(expressions=[exp.alias_(exp.column(exp.to_identifier(c, quoted=True), table=alias),
                                                      exp.to_identifier(c, quoted=True)) for c in columns]
                              + added[alias])
        computed.set("from_", exp.From(this=item.copy()))
        wrapped = exp.Subquery(this=computed, alias=exp.TableAlias(this=exp.to_identifier(alias)))
        if n == 0:
            select.args["from_"].set("this", wrapped)
        else:
            joins[n - 1].set("this", wrapped)
    return select
