"""Compute a CTE that only IN / EXISTS subqueries read as the distinct rows of the columns they read.

Why: a CTE read twice is computed once into a temporary table
(:mod:`gpu_engine.sql.shared_ctes`). When every reader is the query of an
``IN (SELECT ...)`` or ``EXISTS (SELECT ...)``, only which values it holds
counts, not how often: TPC-DS q95's ``ws_wh`` (web_sales joined to itself on
the order number, 6.6M pairs at SF1) is read as ``ws_order_number IN (SELECT
ws_order_number FROM ws_wh)``; its 42k distinct order numbers answer both
readers, where the table held and both semi joins read the 6.6M pairs.

A reader counts when the SELECT whose FROM list (comma or inner joins) holds
the reference is that of an IN or EXISTS subquery, has no aggregate, GROUP BY,
HAVING, window, DISTINCT ON, LIMIT, OFFSET or ``*``; the columns it reads of
the CTE are those qualified by the reference's alias and the unqualified ones
the CTE outputs (a superset is safe: more columns only keep more rows).
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.cte_reader_filters import _ancestors, _inner_item

__all__ = ["with_set_readers_distinct"]

_MULTIPLICITY_CLAUSES = ("group", "having", "limit", "offset", "qualify", "windows", "fetch")


def _set_reader_columns(reference: exp.Table, outputs: set[str]) -> set[str] | None:
    """Return the CTE columns an IN/EXISTS reader reads through ``reference``; None when it is no such reader."""
    select = _inner_item(reference)
    if select is None or any(select.args.get(key) for key in _MULTIPLICITY_CLAUSES):
        return None
    distinct = select.args.get("distinct")
    if distinct is not None and distinct.args.get("on"):
        return None
    parent = select.parent
    if isinstance(parent, exp.Subquery):
        parent = parent.parent
    if not (isinstance(parent, exp.In) and parent.args.get("query") is not None) and not isinstance(parent, exp.Exists):
        return None
    if any(isinstance(node, (exp.AggFunc, exp.Window, exp.Star)) for node in select.walk()):
        return None
    alias = reference.alias_or_name
    read = set()
    for column in select.find_all(exp.Column):
        name = column.name.lower()
        if column.table == alias or (not column.table and name in outputs):
            if name not in outputs:
                return None
            read.add(name)
    return read


def with_set_readers_distinct(body: exp.Expression, name: str, tree: exp.Expression,
                              definition: exp.CTE) -> exp.Expression:
    """Return the query computing CTE ``name`` (``body``) as DISTINCT over the columns its readers read, when
    every reader in ``tree`` is an IN / EXISTS subquery (see the module docstring); else ``body``."""
    alias = definition.args.get("alias")
    query = definition.this
    if (alias is not None and alias.columns) or not isinstance(query, exp.Select):
        return body
    if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
           for p in query.expressions):
        return body
    outputs = [p.alias_or_name.lower() for p in query.expressions]
    if len(set(outputs)) != len(outputs):
        return body
    references = [t for t in tree.find_all(exp.Table) if t.name == name and not t.args.get("db")
                  and not any(node is definition for node in _ancestors(t))]
    read: set[str] = set()
    for reference in references:
        columns = _set_reader_columns(reference, set(outputs))
        if columns is None:
            return body
        read |= columns
    if not references or not read:
        return body
    columns = [exp.column(c, table=name) for c in outputs if c in read]
    source = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(name)))
    return exp.select(*columns).from_(source, copy=False).distinct(copy=False)
