"""Decorrelate ``LATERAL`` subqueries in FROM into ordinary joins: ``FROM t, LATERAL (SELECT ... WHERE u.k = t.k) w``.

Why: a LATERAL subquery is evaluated per row of the FROM items before it; when it only filters and projects its
own FROM, the rows it gives for an outer row are the rows of the uncorrelated subquery that meet its correlated
conjuncts, so those conjuncts move to the join's ON, over the subquery's output columns (the same move
:mod:`~gpu_engine.sql.correlated_derived_tables` makes for a derived table inside a subquery, whose
``pulled_correlation`` this reuses). ``LEFT JOIN LATERAL (...) ON c`` keeps its outer rows that meet nothing, as
a LEFT JOIN with the moved conjuncts in its ON does. The top-N-per-row form, ``LATERAL (SELECT ... WHERE u.k =
t.k ORDER BY u.x DESC LIMIT n [OFFSET m])``, numbers each correlation key's rows instead: ``QUALIFY
row_number() OVER (PARTITION BY u.k ORDER BY u.x DESC)`` between ``m + 1`` and ``m + n`` inside, the equality in
the ON outside. A grouping (GROUP BY, HAVING, DISTINCT) LATERAL groups per correlation key too (the key's groups
are the outer row's); an aggregating one without GROUP BY (one row per outer row) is a correlated scalar subquery
per output.

Refused by name (a SqlError at the LATERAL): a window inside, a LIMIT or a grouping correlated by other than column
equalities, a grouped output reading an outer column, a correlated reference left elsewhere (HAVING, nested
queries), LATERAL over a table function, and Hive's ``LATERAL VIEW``. Runs on the qualified tree (every column names
its table), before projections are pruned.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.sql.correlated_derived_tables import pulled_correlation
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.predicates import conjoined, conjuncts_of, free_columns

__all__ = ["with_lateral_joins_decorrelated", "HAS_LATERAL"]

#: The tree's meta key set where the refusals' walk met a LATERAL subquery (so other queries skip the walk here).
HAS_LATERAL = "lateral_joins.present"

_ALTERNATIVE = ("write it as a join on the correlated columns, or as a correlated subquery in WHERE or SELECT")


def _error(message: str, node: exp.Expression) -> SqlError:
    line, col = position_of(node)
    return SqlError(f"unsupported SQL: {message}; {_ALTERNATIVE}", line=line, col=col, name="LATERAL")


def with_lateral_joins_decorrelated(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` with every ``LATERAL (subquery)`` join item an ordinary joined derived table, in place."""
    laterals = [node for node in tree.find_all(exp.Lateral) if isinstance(node.parent, exp.Join)]
    for lateral in reversed(laterals):  # innermost first: a LATERAL inside another's subquery is done before it
        _decorrelated(lateral)
    return tree


def _decorrelated(lateral: exp.Lateral) -> None:
    join = lateral.parent
    select = join.parent
    if not isinstance(lateral.this, exp.Subquery) or not isinstance(select, exp.Select):
        raise _error(f"LATERAL over {lateral.this.sql(dialect='duckdb')[:60]} (only a LATERAL subquery is "
                     "supported)", lateral)
    if not isinstance(lateral.this.this, exp.Select):
        raise _error(f"a LATERAL {lateral.this.this.key.upper()} (a set operation; a LATERAL SELECT is "
                     "supported)", lateral)
    alias = lateral.alias_or_name
    inner = lateral.this.this.copy()
    outer = _aliases_before(select, join)
    if _reads(inner, outer) and (join.side or "").upper() in ("RIGHT", "FULL"):
        raise _error(f"a {join.side.upper()} JOIN LATERAL reading the FROM items before it (DuckDB: the combining "
                     "JOIN type must be INNER or LEFT)", lateral)
    if _reads(inner, outer) and _one_aggregate_row(inner):
        _as_scalar_subqueries(select, join, lateral, inner, alias)
        return
    pick = _row_pick(inner)
    if pick is not None and pick[0] is not None and _reads(pick[0], outer):
        raise _error("a LATERAL subquery with LIMIT ordered by an outer column (each outer row its own order)",
                     lateral)
    subquery = exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    if not _reads(inner, outer):
        moved = []
    else:
        grouped = bool(inner.args.get("group") or inner.args.get("distinct") or inner.args.get("having"))
        if inner.args.get("qualify") or inner.args.get("windows") or any(p.find(exp.Window)
                                                                          for p in inner.expressions) \
                or (grouped and pick is not None) or (not grouped and any(p.find(exp.AggFunc)
                                                                          for p in inner.expressions)):
            raise _error("a LATERAL subquery that windows, or groups with a LIMIT", lateral)
        written = [c.sql(dialect="duckdb") for c in conjuncts_of(inner.args["where"].this)
                   if _reads(c, outer)] if inner.args.get("where") else []
        outside = _outer_projections(inner, outer, alias)
        if outside and grouped:
            raise _error("a grouping or DISTINCT LATERAL subquery with an output reading an outer column", lateral)
        moved = pulled_correlation(subquery, outer, shaped=grouped)
        left = [c.sql(dialect="duckdb") for c in free_columns(inner) if c.table in outer]
        if left:
            raise _error(f"a LATERAL subquery reading {left[0]} outside its WHERE's conjuncts and SELECT list",
                         lateral)
        _substituted(select, lateral, outside)
        if grouped:  # groups (and DISTINCT rows) per correlation key: the key's rows are the outer row's
            keys = _equality_keys(inner, alias, moved, lateral, written, "GROUP BY or DISTINCT")
            if inner.args.get("group"):
                present = list(inner.args["group"].expressions)
                inner.args["group"].set("expressions", present + [k for k in keys if k not in present])
        if pick is not None:
            inner.set("qualify", exp.Qualify(this=_numbered(inner, alias, moved, pick, lateral, written)))
    if pick is not None and not moved:  # uncorrelated: the LIMIT applies once, as written
        inner.set("order", pick[0])
        inner.set("limit", pick[1])
        inner.set("offset", pick[2])
    on = join.args.get("on")
    conditions = ([] if on is None or on == exp.true() else conjuncts_of(on)) + moved
    lateral.replace(subquery)
    if join.args.get("kind") and join.args["kind"].upper() == "CROSS":
        join.set("kind", None)
    join.set("on", conjoined(conditions) if conditions else (exp.true() if join.side else None))


def _one_aggregate_row(inner: exp.Select) -> bool:
    """Return True where ``inner`` aggregates without grouping: exactly one row, whatever its WHERE keeps."""
    return not any(inner.args.get(key) for key in ("group", "having", "qualify", "distinct", "windows", "limit",
                                                    "offset")) \
        and any(p.find(exp.AggFunc) for p in inner.expressions) \
        and not any(p.find(exp.Window) for p in inner.expressions)


def _as_scalar_subqueries(select: exp.Select, join: exp.Join, lateral: exp.Lateral, inner: exp.Select,
                          alias: str) -> None:
    """Replace an aggregating LATERAL (one row per outer row) by a correlated scalar subquery per output column.

    ``LATERAL (SELECT sum(u.x) AS s, count(*) AS c FROM u WHERE u.k = t.k) w``: ``w.s`` is ``(SELECT sum(u.x)
    FROM u WHERE u.k = t.k)`` wherever the query reads it, and the join, which pairs each outer row with one
    row, goes; decorrelation plans each (a count of no rows is 0, as DuckDB's is).
    """
    on = join.args.get("on")
    if join.side and on is not None and on != exp.true():
        raise _error("a LEFT JOIN LATERAL over an aggregating subquery with an ON condition", lateral)
    outputs = {}
    for projection in inner.expressions:
        value = projection.this if isinstance(projection, exp.Alias) else projection
        scalar = inner.copy()
        scalar.set("expressions", [value.copy()])
        outputs[projection.alias_or_name] = exp.Subquery(this=scalar)
    join.pop()
    _substituted(select, None, {name: value for name, value in outputs.items()}, alias)
    if on is not None and on != exp.true():
        where = select.args["where"].this if select.args.get("where") else None
        select.set("where", exp.Where(this=conjoined(conjuncts_of(where) + [on])))


def _outer_projections(inner: exp.Select, outer: set[str], alias: str) -> dict[str, exp.Expression]:
    """Move ``inner``'s outputs that read outer columns out of it; return each as an expression for the outside.

    ``SELECT u.x + t.n AS y``: ``y`` leaves the subquery, ``u.x`` becomes one of its outputs, and the outside reads
    ``w.y`` as ``(w."$lateral0" + t.n)``.
    """
    own = {name: (p.this if isinstance(p, exp.Alias) else p) for p in inner.expressions
           for name in [p.alias_or_name]}
    moved, kept = {}, []
    added = 0
    for projection in list(inner.expressions):
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if not _reads(value, outer):
            kept.append(projection)
            continue
        replacements = {}
        for column in free_columns(value):
            if column.table in outer or (column.table, column.name) in replacements:
                continue
            existing = next((n for n, v in own.items() if isinstance(v, exp.Column) and v == column
                             and not _reads(v, outer)), None)
            if existing is None:
                existing = f"$lateral{added}"
                added += 1
                kept.append(exp.alias_(column.copy(), existing, quoted=True))
                own[existing] = column
            replacements[(column.table, column.name)] = existing
        moved[projection.alias_or_name] = exp.paren(value.copy().transform(
            lambda node: exp.column(replacements[(node.table, node.name)], table=alias, quoted=True)
            if isinstance(node, exp.Column) and (node.table, node.name) in replacements else node))
    if moved:
        inner.set("expressions", kept or [exp.alias_(exp.Literal.number(1), "$lateral", quoted=True)])
    return moved


def _substituted(select: exp.Select, lateral: exp.Lateral | None, values: dict[str, exp.Expression],
                 alias: str | None = None) -> None:
    """Read ``alias.name`` as ``values[name]`` everywhere in ``select`` but inside the LATERAL itself."""
    if not values:
        return
    alias = alias or lateral.alias_or_name
    inside = lateral.this if lateral is not None else None

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table == alias and node.name in values:
            return values[node.name].copy()
        return node

    for value in list(select.args.values()):
        for child in (value if isinstance(value, list) else [value]):
            if not isinstance(child, exp.Expression) or child is inside:
                continue
            if inside is not None and any(node is inside for node in child.walk()):
                continue  # the join holding the LATERAL: its ON is substituted below
            new = child.transform(replace, copy=False)  # in place: other LATERALs keep their identity
            if new is not child:
                child.replace(new)
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None:
            join.set("on", join.args["on"].transform(replace, copy=False))


def _aliases_before(select: exp.Select, join: exp.Join) -> set[str]:
    """Return the aliases of ``select``'s FROM items before ``join`` (the ones a LATERAL may read)."""
    items = [select.args["from_"].this] if select.args.get("from_") else []
    for other in select.args.get("joins") or []:
        if other is join:
            break
        items.append(other.this)
    return {item.alias_or_name for item in items}


def _reads(inner: exp.Select, outer: set[str]) -> bool:
    return any(column.table in outer for column in free_columns(inner))


def _row_pick(inner: exp.Select):
    """Remove and return ``(order, limit, offset)`` where ``inner`` has a LIMIT or OFFSET, else None."""
    if inner.args.get("limit") is None and inner.args.get("offset") is None:
        return None
    pick = (inner.args.get("order"), inner.args.get("limit"), inner.args.get("offset"))
    for key in ("order", "limit", "offset"):
        inner.set(key, None)
    return pick


def _numbered(inner: exp.Select, alias: str, moved: list[exp.Expression], pick, lateral: exp.Lateral,
              written: list[str]):
    """Return the QUALIFY condition keeping each correlation key's rows ``offset + 1 .. offset + limit``."""
    outputs = {(p.alias_or_name): (p.this if isinstance(p, exp.Alias) else p) for p in inner.expressions}
    keys = _equality_keys(inner, alias, moved, lateral, written, "LIMIT")
    order, limit, offset = pick
    ordered = []
    for key in (order.expressions if order is not None else []):
        value = key.this
        if isinstance(value, exp.Column) and not value.table and value.name in outputs:
            key = key.copy()
            key.set("this", outputs[value.name].copy())
        ordered.append(key.copy())
    window = exp.Window(this=exp.RowNumber(), partition_by=keys,
                        order=exp.Order(expressions=ordered) if ordered else None)
    first = _count(offset, lateral) if offset is not None else 0
    conditions = [exp.GT(this=window.copy(), expression=exp.Literal.number(first))] if first else []
    if limit is not None:
        conditions.append(exp.LTE(this=window.copy(), expression=exp.Literal.number(first + _count(limit, lateral))))
    return conjoined(conditions) if conditions else exp.true()


def _equality_keys(inner: exp.Select, alias: str, moved: list[exp.Expression], lateral: exp.Lateral,
                   written: list[str], what: str) -> list[exp.Expression]:
    """Return the inner expressions the moved conjuncts equate to outer columns; refuse any other correlation."""
    outputs = {(p.alias_or_name): (p.this if isinstance(p, exp.Alias) else p) for p in inner.expressions}
    keys = []
    for conjunct in moved:
        sides = [conjunct.this, conjunct.expression] if isinstance(conjunct, exp.EQ) else []
        own = [s for s in sides if isinstance(s, exp.Column) and s.table == alias]
        if len(own) != 1 or not all(isinstance(s, exp.Column) for s in sides):
            raise _error(f"a LATERAL subquery with {what} correlated by {' AND '.join(written)} (only equalities "
                         "of columns make its rows per outer row)", lateral)
        keys.append(outputs[own[0].name].copy())
    return keys


def _count(clause: exp.Expression, lateral: exp.Lateral) -> int:
    value = clause.expression if isinstance(clause, (exp.Limit, exp.Offset)) else clause
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    raise _error(f"a LATERAL subquery with a computed LIMIT or OFFSET ({value.sql(dialect='duckdb')})", lateral)
