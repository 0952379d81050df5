"""Rewrite a correlated EXISTS / IN subquery's QUALIFY, DISTINCT ON and LIMIT/OFFSET into rows per correlation key.

Why: a correlated ``[NOT] EXISTS`` or ``x IN (SELECT …)`` becomes a semi (anti) join on its correlation
equalities (:mod:`~gpu_engine.sql.decorrelation`), which reads only the subquery's FROM and WHERE. Clauses
that pick among the rows one outer row sees (``QUALIFY row_number() OVER (…) = 1``, ``DISTINCT ON``, ``ORDER
BY … LIMIT n OFFSET m``) were dropped, and every matching row counted (a wrong answer). As DuckDB's general
decorrelation does, the subquery is computed once for every correlation key instead: the correlation
``u.k = t.k`` fixes ``u.k`` per outer row, so each window of the subquery is partitioned by ``u.k`` too (DISTINCT
ON is such a window, :mod:`~gpu_engine.sql.distinct_on`) and LIMIT/OFFSET become a ``row_number()`` per key.
What is left is ``SELECT w.v FROM (<that>) w WHERE w.k0 = t.k``: a correlated subquery without those clauses,
which the semi join plans. A NULL ``u.k`` forms its own partition, which the equality never matches.

Refused by name: a correlation other than column equalities (the rows an outer row sees are then no partition
of the inner rows), a named WINDOW, an outer column in QUALIFY or ORDER BY, a LIMIT that is not a constant.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.distinct_on import with_distinct_on_as_qualify
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.output_names import with_output_names_resolved
from gpu_engine.sql.planning_context import TreeKey
from gpu_engine.sql.predicates import conjoined, defined_aliases, free_columns, own_scope_nodes

__all__ = ["has_row_clauses", "exists_without_limit", "rows_per_correlation_key", "windows_partitioned_per_key"]

#: The clauses that pick among a subquery's rows, by their SQL names.
_ROW_CLAUSES = {"qualify": "QUALIFY", "limit": "LIMIT", "offset": "OFFSET"}
_DERIVED, _NUMBERED = "$keyed", "$numbered"


def has_row_clauses(select: exp.Select) -> bool:
    """Return whether ``select`` picks among its rows (QUALIFY, DISTINCT ON, LIMIT or OFFSET)."""
    distinct = select.args.get("distinct")
    return any(select.args.get(key) is not None for key in _ROW_CLAUSES) or bool(
        distinct is not None and distinct.args.get("on"))


def exists_without_limit(select: exp.Select) -> exp.Select:
    """Return an EXISTS subquery without its ``[ORDER BY ...] LIMIT n`` (n > 0) where that is its only clause picking
    rows: whether any row is does not depend on it. Otherwise ``select`` itself."""
    limit = select.args.get("limit")
    if limit is None or has_row_clauses(_without(select, "limit")) or not isinstance(limit, exp.Limit):
        return select
    count = limit.args.get("expression")
    if not (isinstance(count, exp.Literal) and count.is_int and int(count.this) > 0):
        return select
    return _without(select, "limit", "order")


def _constant(clause: exp.Expression | None, name: str) -> int | None:
    """Return a LIMIT / OFFSET clause's count (a non-negative integer literal), None for no clause."""
    if clause is None:
        return None
    value = clause.args.get("expression") if isinstance(clause, (exp.Limit, exp.Offset)) else None
    if not (isinstance(value, exp.Literal) and value.is_int and int(value.this) >= 0):
        raise unsupported(f"{name} other than a constant count in a correlated EXISTS / IN subquery", clause)
    return int(value.this)


def _order_term(term: exp.Expression, projections: list[exp.Expression]) -> exp.Expression:
    """Return an ORDER BY term with an ordinal or an output name read as the output's expression."""
    if isinstance(term, exp.Literal) and term.is_int:
        n = int(term.this)
        if not 1 <= n <= len(projections):
            raise unsupported(f"ORDER BY {n}: the SELECT list has {len(projections)} columns", term)
        term = projections[n - 1]
        return (term.this if isinstance(term, exp.Alias) else term).copy()
    return with_output_names_resolved(term, projections).copy()


def windows_partitioned_per_key(select: exp.Select, keys: list[tuple[exp.Column, exp.Column]]) -> None:
    """Partition each window of ``select``'s own scope (in place) also by the inner correlation columns of ``keys``
    it is not partitioned by yet: one outer row sees one key's rows. Terms match by
    :class:`~gpu_engine.sql.planning_context.TreeKey` (``U.K`` is ``u.k``; no SQL text rendered per term)."""
    for window in own_scope_nodes(select, (exp.Window,)):
        partition = list(window.args.get("partition_by") or [])
        written = {TreeKey(term) for term in partition}
        window.set("partition_by", partition + [inner.copy() for _, inner in keys if TreeKey(inner) not in written])


def rows_per_correlation_key(select: exp.Select, local: list[exp.Expression],
                             keys: list[tuple[exp.Column, exp.Column]], others: list,
                             value: exp.Expression | None) -> exp.Select:
    """Return ``SELECT w.v FROM (<select per correlation key>) w WHERE w.k<n> = <outer n>`` (``SELECT 1`` when
    ``value`` is None: an EXISTS).

    ``local`` are the conjuncts of ``select``'s WHERE that read no outer column, ``keys`` the (outer, inner
    column) correlation equalities and ``others`` its other correlated conjuncts
    (:func:`~gpu_engine.sql.decorrelation.correlation`); ``value`` is the expression IN compares with, over the
    inner columns.
    """
    clause = next((name for key, name in _ROW_CLAUSES.items() if select.args.get(key) is not None), "DISTINCT ON")
    if value is None and exists_without_limit(select) is not select:
        return exists_without_limit(select)
    if others or not keys:
        raise unsupported(f"{clause} in a correlated EXISTS / IN subquery correlated by other than column "
                          "equalities (u.k = t.k)", select)
    if select.args.get("windows"):
        raise unsupported(f"a named WINDOW with {clause} in a correlated EXISTS / IN subquery (write the window "
                          "in OVER (...))", select.args["windows"][0])
    rows = with_distinct_on_as_qualify(select).copy()
    limit, offset = _constant(rows.args.get("limit"), "LIMIT"), _constant(rows.args.get("offset"), "OFFSET")
    qualify = rows.args.get("qualify")
    inner = defined_aliases(rows)
    if qualify is not None and any(c.table and c.table not in inner for c in free_columns(qualify.this)):
        raise unsupported("an outer column in QUALIFY of a correlated EXISTS / IN subquery", qualify)
    # WHERE without the correlation: the equalities come back over the keyed rows' columns
    rows.set("where", exp.Where(this=conjoined([c.copy() for c in local])) if local else None)
    projections = list(rows.expressions)
    order = rows.args.get("order")
    ordered = []
    for n, term in enumerate(order.expressions if order is not None else []):
        resolved = _order_term(term.this, projections)
        if {c.table for c in free_columns(resolved)} - inner:
            raise unsupported("an outer column in ORDER BY of a correlated EXISTS / IN subquery", term)
        ordered.append((f"$o{n}", term, resolved))
    windows_partitioned_per_key(rows, keys)  # each window sees one key's rows, as one outer row does
    key_names = [f"$k{n}" for n in range(len(keys))]
    added = ([exp.alias_(value.copy(), "$v", quoted=True)] if value is not None else []) + [
        exp.alias_(inner.copy(), name, quoted=True) for name, (_, inner) in zip(key_names, keys)] + [
        exp.alias_(resolved, name, quoted=True) for name, _, resolved in ordered]
    rows.set("expressions", projections + added)
    for key in ("order", "limit", "offset"):
        rows.set(key, None)
    source, alias = rows, _DERIVED
    conditions = []
    if limit is not None or offset is not None:
        window = exp.Window(this=exp.RowNumber(), partition_by=[
            exp.column(name, table=_NUMBERED, quoted=True) for name in key_names], order=exp.Order(expressions=[
                _ordered(term, name) for name, term, _ in ordered]) if ordered else None)
        outputs = (["$v"] if value is not None else []) + key_names
        source = exp.Select(expressions=[exp.column(name, table=_NUMBERED, quoted=True) for name in outputs]
                            + [exp.alias_(window, "$rn", quoted=True)])
        source.set("from_", exp.From(this=_derived(rows, _NUMBERED)))
        rn = exp.column("$rn", table=alias, quoted=True)
        offset = offset or 0
        if offset:
            conditions.append(exp.GT(this=rn, expression=exp.Literal.number(offset)))
        if limit is not None:
            conditions.append(exp.LTE(this=rn.copy(), expression=exp.Literal.number(offset + limit)))
    conditions = [exp.EQ(this=exp.column(name, table=alias, quoted=True), expression=outer.copy())
                  for name, (outer, _) in zip(key_names, keys)] + conditions
    rewritten = exp.Select(expressions=[exp.column("$v", table=alias, quoted=True) if value is not None
                                        else exp.Literal.number(1)])
    rewritten.set("from_", exp.From(this=_derived(source, alias)))
    rewritten.set("where", exp.Where(this=conjoined(conditions)))
    return rewritten


def _ordered(term: exp.Ordered, name: str) -> exp.Ordered:
    """Return ``term`` ordering by the numbered rows' column ``name`` (its direction and NULLS placement kept)."""
    copy = term.copy()
    copy.set("this", exp.column(name, table=_NUMBERED, quoted=True))
    return copy


def _derived(select: exp.Select, alias: str) -> exp.Subquery:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))


def _without(select: exp.Select, *clauses: str) -> exp.Select:
    """Return a copy of ``select`` without ``clauses``."""
    copy = select.copy()
    for clause in clauses:
        copy.set(clause, None)
    return copy
