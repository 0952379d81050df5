"""Plan subqueries used as values (in SELECT, ORDER BY, HAVING, CASE, under NOT/OR in WHERE) as LEFT JOINs.

Why: a user writes ``SELECT a, (SELECT v FROM u WHERE u.k = t.k LIMIT 1) FROM t``
or ``EXISTS (...) AS flag``; the WHERE path (:mod:`~gpu_engine.sql.decorrelation`)
plans a subquery only where it filters rows, and the typed path
(:func:`~gpu_engine.sql.aggregate_planning.typed_scalar_subqueries`) a scalar subquery correlated by column
equalities, of any shape (:mod:`~gpu_engine.sql.correlated_scalar_rows` binds it), in the SELECT list, ORDER BY,
HAVING or an aggregate's argument (outside windows; a GROUP BY holding no subquery) and in a WHERE conjunct holding
no other subquery, and HAVING's top-level ``[NOT]
EXISTS`` / ``x [NOT] IN (SELECT …)`` conjuncts (:func:`~gpu_engine.sql.aggregate_planning.post_filter`). Here
each other subquery becomes
a derived table LEFT joined to the row, and the subquery is replaced by its
column, so the rest of the planner sees only joins and columns:

* a correlated aggregate correlated by column equalities is the aggregate
  grouped by the inner correlation columns, joined on them; a key without
  inner rows gets the aggregate's value over no rows (COUNT's 0 — the "COUNT
  bug" of decorrelation — else NULL, through the arithmetic around it) by a
  CASE on a match flag ``m``;
* correlated otherwise it was rewritten before (:mod:`~gpu_engine.sql.correlation_domains`: over its domain, the
  distinct outer values, into an equality-correlated subquery; a null-safe one split on its outer column), and the
  typed path binds it; one whose outer FROM item that module cannot read a domain of (a derived table reading
  another item) is refused by name here (the per-domain derived table this module built went: every form that
  reached it is typed);
* a correlated ``(SELECT v ... ORDER BY x LIMIT 1 [OFFSET n])`` is the first (n+1-th) row of each key's
  partition in that order (a row_number() window), NULL for a key without rows;
* a correlated ``(SELECT w ...)`` whose value is a window (``sum(x) OVER (...)``) is first its rows per
  correlation key, every window also partitioned by the key (one outer row sees its own rows), then a value
  as below;
* a correlated ``(SELECT v ...)`` without aggregate or LIMIT is ``any_value(v)`` and the row count per key;
  a WHERE condition raises DuckDB's "More than one row returned by a subquery used as an expression" for
  every outer row that meets more than one (DuckDB checks eagerly, so a CASE branch not taken fails too);
* an uncorrelated aggregate without GROUP BY (one row, always) is cross joined;
* ``EXISTS (S)`` is ``(SELECT count(*) FROM S) > 0``, and ``x [NOT] IN (S)``
  outside WHERE's own forms is ``x = ANY (S)`` (its three-valued logic is
  :mod:`~gpu_engine.sql.quantified_comparisons`'s), but where :func:`typed_value_mark` leaves one to the Project
  as a typed predicate (SELECT list and ORDER BY, correlated by column equalities or an uncorrelated IN / EXISTS:
  the optimizer rule's mark join).

In an aggregating query the joined columns are grouping keys where the
subquery stands outside the aggregate calls: they depend only on the outer
columns of the correlation, which must be grouping keys themselves.
A correlated subquery with GROUP BY, HAVING, DISTINCT or a LIMIT other than 1 is
first rewritten into its rows per correlation key
(:mod:`~gpu_engine.sql.shaped_subqueries`), then planned as one without aggregate.
Left to the WHERE path: a WHERE conjunct that is [NOT] IN or a [NOT] EXISTS
with a correlation equality (semi and anti joins), a comparison with a scalar
subquery it plans (uncorrelated, or correlated by column equalities in any shape, COUNT's 0
included: a typed ScalarSubquery the optimizer's decorrelation rule joins), and
EXISTS / IN under OR, NOT or inside an expression (mark joins). What is left here of a subquery correlated by
column equalities: one in a GROUP BY key (and so every subquery of that SELECT), in a window's inputs, or beside
an EXISTS / IN in one WHERE conjunct (several scalar subqueries of one conjunct are one typed Filter:
:func:`~gpu_engine.sql.correlated_scalar_rows.conjunct_scalars`).
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from gpu_engine.plans.functions import SCALAR_SUBQUERY_VALUE
from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.aggregate_planning import aggregates_of, filter_subquery_predicate
from gpu_engine.sql.correlated_scalar_rows import binds, conjunct_scalars, windowed_value, windows_per_key
from gpu_engine.sql.correlated_row_clauses import exists_without_limit, has_row_clauses, rows_per_correlation_key
from gpu_engine.sql.decorrelation import (
    correlation, empty_group_value, mark_planned, mark_predicates,
    own_aggregates, quantified_parts, select_over, split_correlated, strict_subquery, subquery_select,
)
from gpu_engine.sql.errors import SqlError, unsupported
from gpu_engine.sql.planning_context import TreeKey
from gpu_engine.sql.predicates import (
    conjuncts_of, defined_aliases, free_columns, has_subquery, reached_through_and_or)
from gpu_engine.sql.shaped_subqueries import is_shaped, rows_per_key

__all__ = ["typed_value_mark", "with_subquery_values_as_comparisons", "with_subquery_values_joined"]

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
#: Clauses of a correlated scalar subquery that make it more than one aggregate per outer row.
_SHAPING = {"group": "GROUP BY", "having": "HAVING", "limit": "LIMIT", "offset": "OFFSET", "distinct": "DISTINCT",
            "qualify": "QUALIFY", "windows": "WINDOW"}


def _is_in_query(node: exp.Expression) -> bool:
    return isinstance(node, exp.In) and node.args.get("query") is not None


def _own_subqueries(tree: exp.Expression | None) -> list[exp.Expression]:
    """Return the scalar subqueries, EXISTS and IN (SELECT ...) of ``tree``'s own scope, outermost first."""
    found, stack = [], [tree] if tree is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Exists, exp.Subquery)) or _is_in_query(node):
            found.append(node)
            if _is_in_query(node):
                stack.append(node.this)  # the left operand is of this scope
            continue
        if isinstance(node, (exp.Select, exp.SetOperation, exp.Any, exp.All)):
            continue
        stack.extend(node.iter_expressions())
    return found


def _stripped(tree: exp.Expression, through_not: bool) -> exp.Expression:
    while isinstance(tree, exp.Paren) or (through_not and isinstance(tree, exp.Not)):
        tree = tree.this
    return tree


def _outer_tables(select: exp.Expression) -> set[str]:
    """Return the aliases a subquery reads from outside itself (its correlation)."""
    tables = {c.table for c in free_columns(select)} - {""}  # "": an output name in its ORDER BY
    return tables - defined_aliases(select) if isinstance(select, exp.Select) else tables


def _at_most_one_row(select: exp.Select) -> bool:
    """Return whether ``select`` (no aggregate of its own) keeps at most one row: ``LIMIT 0`` or ``LIMIT 1``."""
    limit = select.args.get("limit")
    count = limit.expression if isinstance(limit, exp.Limit) else None
    return (isinstance(count, exp.Literal) and not count.is_string and count.this in ("0", "1")
            and not own_aggregates(select))


def _one_row_aggregate(select: exp.Select) -> exp.Select:
    """Return ``SELECT any_value(v) FROM (<select>)`` for an uncorrelated subquery of at most one row: its value,
    or NULL without a row, as one aggregate row.

    Why: ``x = (SELECT y.i FROM u y ORDER BY y.id LIMIT 1) OR ...`` in WHERE was refused ("a subquery inside
    OR, NOT or an expression"); one aggregate row is what WHERE cross joins (the compose fuzz's LIMIT forms).
    """
    inner = select.copy()
    value = inner.expressions[0]
    inner.set("expressions", [exp.alias_(value.this if isinstance(value, exp.Alias) else value, "$v", quoted=True)])
    return exp.Select(expressions=[exp.alias_(exp.AnyValue(this=exp.column("$v", table="$one", quoted=True)), "v")]
                      ).from_(_derived(inner, "$one"))


def _left_to_where_path(conjunct: exp.Expression, node: exp.Expression, marks_planned: bool,
                        outer_aliases: set[str]) -> bool:
    """Return whether the WHERE path plans ``node`` of this WHERE conjunct (a semi join, a mark join, a join).

    ``marks_planned``: the pass after the IN rewrites (an EXISTS under OR it does not plan as typed mark predicates,
    :func:`~gpu_engine.sql.decorrelation.mark_predicates`, is a subquery value here).
    """
    if isinstance(node, exp.Exists) or _is_in_query(node):
        if _stripped(conjunct, True) is node:  # a semi or anti join, on the correlation's equalities
            if _is_in_query(node):  # NOT IN over a correlated subquery: a NULL-aware mark join, else a value (<> ALL)
                return not (_negated(conjunct) and _outer_tables(subquery_select(node.args["query"]))) or \
                    mark_predicates(conjunct, outer_aliases) is not None
            return not _correlated_without_equalities(node, outer_aliases)
        if mark_predicates(conjunct, outer_aliases) is not None:  # under AND / OR / NOT: typed mark predicates
            return True
        return reached_through_and_or(_stripped(conjunct, False), node) and (_is_in_query(node) or not marks_planned)
    if any(copy is node for copies in conjunct_scalars(conjunct, outer_aliases) or () for copy in copies):
        return True  # a typed ScalarSubquery of the WHERE Filter
    if mark_predicates(conjunct, outer_aliases) is not None:  # beside typed mark predicates: a ScalarSubquery there
        return True
    comparison = _stripped(conjunct, False)
    if not isinstance(comparison, _COMPARISONS):
        return False
    sides = (comparison.this, comparison.expression)
    if not any(strict_subquery(side) is node for side in sides) or sum(has_subquery(side) for side in sides) != 1:
        return False
    select = subquery_select(node.this)
    if not isinstance(select, exp.Select) or not _outer_tables(select) or len(select.expressions) != 1:
        return True
    if binds(select, outer_aliases):  # correlated by column equalities, any shape: a typed ScalarSubquery there
        return True
    try:  # another correlation: computed per distinct outer value here
        split_correlated(select, outer_aliases)
    except SqlError:
        return True  # refused there, by name
    return False


def _negated(conjunct: exp.Expression) -> bool:
    """Return whether ``conjunct`` is an odd number of NOTs (through parentheses) over what it holds."""
    negated = False
    while isinstance(conjunct, (exp.Paren, exp.Not)):
        negated ^= isinstance(conjunct, exp.Not)
        conjunct = conjunct.this
    return negated


def _correlated_without_equalities(exists: exp.Exists, outer_aliases: set[str]) -> bool:
    """Return whether an EXISTS is correlated by no column equality (no semi join key: a count per outer value)."""
    select = subquery_select(exists.this)
    if not isinstance(select, exp.Select) or not _outer_tables(select):
        return False
    try:
        inner, _local, correlated = split_correlated(select, outer_aliases)
    except SqlError:
        return False  # refused there, by name
    keys, _others = correlation(correlated, inner)
    return bool(correlated) and not keys


def typed_value_mark(select: exp.Select, node: exp.Expression, clause: str, catalog=None) -> bool:
    """Return whether an EXISTS / ``x IN (SELECT …)`` used as a value of ``select`` (its SELECT list or ORDER BY,
    outside aggregate calls and windows) is a typed predicate of the Project
    (:func:`~gpu_engine.sql.aggregate_planning.typed_scalar_subqueries`), which the optimizer rule makes a mark
    join's flag (IN's NULL-aware): one :func:`~gpu_engine.sql.decorrelation.mark_predicates` would plan under OR
    in WHERE (correlated by column equalities, or an uncorrelated IN), in a query whose GROUP BY holds no subquery.

    Why: ``EXISTS (...) AS flag`` was a LEFT-joined ``count(*)`` per key and ``x IN (...)`` a ``x = ANY`` rewrite
    of the sqlglot tree; a typed predicate is joined by the rule for every plan, hand-built and JSON ones too.
    """
    if clause not in ("expressions", "order") or not (isinstance(node, exp.Exists) or _is_in_query(node)
                                                      or quantified_parts(node) is not None):
        return False
    if node.find_ancestor(*SQL_AGGREGATES, exp.Window, exp.Select) is not select:
        return False
    group = select.args.get("group")
    if group is not None and any(has_subquery(key) for key in group.expressions):
        return False
    if catalog is not None and isinstance(node, exp.Exists) and _compares_text_with_other(select, node, catalog):
        return False
    if _is_in_query(node) and not isinstance(node.this, exp.Column):  # x + 1 IN (...): typed as the WHERE path does
        if has_subquery(node.this) or isinstance(node.this, exp.Tuple):
            return False
        node = exp.In(this=exp.column("$value"), query=node.args["query"].copy())
    return mark_planned(node, defined_aliases(select))


def _compares_text_with_other(select: exp.Select, exists: exp.Exists, catalog) -> bool:
    """Return whether an EXISTS' correlation equates a text column of a table with a column of another type.

    Why: DuckDB casts the text side to the other type there, and the typed mark join casts an outer text key
    over every outer row (an unconvertible text raises), where DuckDB answers over an empty subquery; the
    LEFT-joined count of the sqlglot tree answers as DuckDB does, so those stay there.
    """
    inner = subquery_select(exists.this)
    if not isinstance(inner, exp.Select):
        return False

    def column_type(column: exp.Column):
        for scope in (inner, select):
            items = [scope.args["from_"].this] if scope.args.get("from_") else []
            items += [join.this for join in scope.args.get("joins") or []]
            for item in items:
                if item.alias_or_name == column.table:
                    if not isinstance(item, exp.Table):
                        return None
                    schema = catalog.get(item.name) or next(
                        (catalog[name] for name in catalog if name.lower() == item.name.lower()), None)
                    names = [name.lower() for name in schema.names] if schema is not None else []
                    return schema.field(names.index(column.name.lower())).type if column.name.lower() in names \
                        else None
        return None

    where = inner.args.get("where")
    for eq in (where.this.find_all(exp.EQ) if where is not None else ()):
        if isinstance(eq.this, exp.Column) and isinstance(eq.expression, exp.Column):
            types = [column_type(eq.this), column_type(eq.expression)]
            text = [t is not None and (pa.types.is_string(t) or pa.types.is_large_string(t)) for t in types]
            if None not in types and text[0] != text[1]:
                return True
    return False


def with_subquery_values_as_comparisons(select: exp.Select) -> exp.Select:
    """Return ``select`` with each ``x [NOT] IN (subquery)`` used as a value written ``x = ANY (subquery)`` (but
    those :func:`typed_value_mark` leaves to the Project, typed).

    Run before :func:`~gpu_engine.sql.quantified_comparisons.with_quantified_comparisons`, which plans the
    comparison with SQL's three-valued logic (NULL where ``x`` or a value is NULL and nothing matched).
    """
    found = [node for node, clause in _value_positions(select, False) if _is_in_query(node)
             and not typed_value_mark(select, node, clause)]
    if not found:
        return select
    select = select.copy()
    for node, clause in _value_positions(select, False):
        if _is_in_query(node) and not typed_value_mark(select, node, clause):
            node.replace(exp.EQ(this=node.this.copy(), expression=exp.Any(this=node.args["query"].copy())))
    return select


def _value_positions(select: exp.Select, marks_planned: bool) -> list[tuple[exp.Expression, str]]:
    """Return (subquery, clause) for each subquery of ``select`` used as a value, not planned by the WHERE path."""
    out = []
    outer_aliases = defined_aliases(select)
    for key in ("group", "expressions", "order", "having"):  # GROUP BY first: a key the others may repeat
        value = select.args.get(key)
        trees = value.expressions if isinstance(value, (exp.Order, exp.Group)) else value if isinstance(value, list) \
            else [value] if value is not None else []
        for tree in trees:
            if key == "having":  # a top-level [NOT] EXISTS / IN conjunct: a typed predicate of the HAVING Filter
                out.extend((node, key) for conjunct in conjuncts_of(tree.this) for node in _own_subqueries(conjunct)
                           if filter_subquery_predicate(conjunct, outer_aliases) is None)
                continue
            out.extend((node, key) for node in _own_subqueries(tree))
    where = select.args.get("where")
    for conjunct in conjuncts_of(where.this if where is not None else None):
        out.extend((node, "where") for node in _own_subqueries(conjunct)
                   if not _left_to_where_path(conjunct, node, marks_planned, outer_aliases))
    return out


def _aggregating(select: exp.Select) -> bool:
    if select.args.get("group") or select.args.get("having"):
        return True
    return any(call.find_ancestor(exp.Window) is None for node in select.expressions
               for call in aggregates_of(node))


def _derived(query: exp.Select, alias: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))


class _Joined:
    """The derived tables a SELECT's subquery values are joined from, and the grouping keys they add."""

    def __init__(self, select: exp.Select, planner):
        self.select, self.planner = select, planner
        self.outer_aliases = defined_aliases(select)
        self.joins: list[exp.Join] = []
        self.group_keys: list[exp.Expression] = []
        self.aggregating = _aggregating(select)
        self.done: dict[TreeKey, exp.Expression] = {}  # a subquery -> its replacement: written twice, joined once
        self.checks: list[exp.Expression] = []  # WHERE conditions failing where an outer row meets several rows

    def replacement(self, node: exp.Expression, clause: str) -> exp.Expression:
        """Join what ``node`` (a scalar subquery or an EXISTS) needs; return the expression replacing it.

        The same subquery written again (a GROUP BY key repeated in the SELECT list) gets the same expression,
        which is how the SELECT list finds its grouping key.
        """
        key = TreeKey(node)  # (quoted or cased apart, one subquery: DuckDB's binder reads it so)
        if key not in self.done:
            self.done[key] = self._joined(node, clause)
        return self.done[key].copy()

    def _joined(self, node: exp.Expression, clause: str) -> exp.Expression:
        if isinstance(node, exp.Exists):
            query = subquery_select(node.this)
            if not isinstance(query, exp.Select):
                raise unsupported("EXISTS over a set operation used as a value", node)
            if not _outer_tables(query) and (own_aggregates(query) or any(query.args.get(key) for key in (
                    "group", "having", "limit", "offset", "qualify", "windows"))):  # its rows counted as written
                counted = exp.Select(expressions=[exp.alias_(exp.Count(this=exp.Star()), "n")]).from_(
                    _derived(query.copy(), "$exists"))
                return exp.Paren(this=exp.GT(this=self._scalar(counted, node, clause),
                                             expression=exp.Literal.number(0)))
            query = exists_without_limit(query)
            if has_row_clauses(query) and not query.args.get("having") and not own_aggregates(query):
                inner, local, correlated = split_correlated(query, self.outer_aliases)
                keys, others = correlation(correlated, inner)
                if keys and not others:  # QUALIFY, DISTINCT ON, LIMIT/OFFSET: computed per correlation key first
                    query = rows_per_correlation_key(query, local, keys, others, None)
            for key in ("having", "limit", "offset", "qualify", "windows"):
                if query.args.get(key):
                    raise unsupported(f"{_SHAPING.get(key, key.upper())} inside an EXISTS used as a value", node)
            if any(e.find(*SQL_AGGREGATES) for e in query.expressions):
                raise unsupported("EXISTS over an aggregating subquery used as a value", node)
            counted = query.copy()
            counted.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "n")])
            for key in ("group", "distinct", "order"):
                counted.set(key, None)
            value = self._scalar(counted, node, clause)
            return exp.Paren(this=exp.GT(this=value, expression=exp.Literal.number(0)))
        query = subquery_select(node.this)
        return self._scalar(query, node, clause)

    def _scalar(self, query: exp.Expression, node: exp.Expression, clause: str) -> exp.Expression:
        if not isinstance(query, exp.Select):
            raise unsupported(f"a subquery over {query.key.upper()} used as a value (only an uncorrelated one)", node)
        if len(query.expressions) != 1:
            raise unsupported(f"a scalar subquery with {len(query.expressions)} columns", node)
        if not _outer_tables(query) and _at_most_one_row(query):
            query = _one_row_aggregate(query)
        empty = None
        if _outer_tables(query) and windowed_value(query):
            query = windows_per_key(query, self.outer_aliases, node)
        if _outer_tables(query) and is_shaped(query, self.planner._count):  # GROUP BY, HAVING, DISTINCT, LIMIT n
            query, empty = rows_per_key(query, self.outer_aliases, self.planner._synthetic_alias(), self.planner._count)
        value = query.expressions[0]
        value = value.this if isinstance(value, exp.Alias) else value
        aggregates = value.find(*SQL_AGGREGATES) is not None
        top = self._kept_row_number(query, node) if not aggregates and query.args.get("limit") else None
        checked = not aggregates and top is None  # any rows: more than one for an outer row fails at run time
        grouped = [exp.alias_(exp.AnyValue(this=value.copy()) if checked else value.copy(), "v"),
                   exp.alias_(exp.true(), "m")] + ([exp.alias_(exp.Count(this=exp.Star()), "n")] if checked else [])
        for key, name in _SHAPING.items():
            if query.args.get(key) and not (top is not None and key in ("limit", "offset")):
                raise unsupported(f"{name} in a correlated scalar subquery", query.args[key]
                                  if isinstance(query.args[key], exp.Expression) else node)
        alias = self.planner._synthetic_alias()
        outer = _outer_tables(query)
        if not outer:  # one aggregate row, always: a cross join
            self.joins.append(exp.Join(this=_derived(select_over(query, [exp.alias_(value.copy(), "v")], [
                query.args["where"].this] if query.args.get("where") else []), alias)))
            self._group_by([], node, clause, [exp.column("v", table=alias)])
            return exp.column("v", table=alias)
        inner, local, correlated = split_correlated(query, self.outer_aliases)
        if not correlated:
            raise unsupported("a correlated reference inside a derived table or a nested subquery", node)
        keys, others = correlation(correlated, inner)
        if others or not keys:  # correlation_domains rewrote every other outer item's (domain / null-safe split)
            raise unsupported("a subquery correlated by other than column equalities (u.k = t.k) with a column of "
                              "a FROM item that is neither a table, a derived table reading no other item, a VALUES "
                              "list nor a series over such items (make that item a derived table joined to the "
                              "others, or correlate by equalities)", node)
        projections = [exp.alias_(i.copy(), f"k{n}") for n, (_, i) in enumerate(keys)]
        if top is None:
            derived = select_over(query, projections + grouped, local)
            derived.set("group", exp.Group(expressions=[i.copy() for _, i in keys]))
        else:
            derived = self._one_row_per_key(select_over(query, projections + [exp.alias_(value.copy(), "v")],
                                                        local), query, [i for _, i in keys], top)
        on = [exp.EQ(this=o.copy(), expression=exp.column(f"k{n}", table=alias)) for n, (o, _) in enumerate(keys)]
        outer_columns = [o for o, _ in keys]
        self.joins.append(exp.Join(this=_derived(derived, alias), side="LEFT", on=exp.and_(*on)))
        if empty is None:
            empty = empty_group_value(value) if aggregates else exp.Null()  # no row: NULL
        joined = exp.column("v", table=alias)
        if checked:  # every joined row is checked, as DuckDB does, wherever the value is read (a CASE branch too)
            self.checks.append(exp.Anonymous(this=SCALAR_SUBQUERY_VALUE, expressions=[
                exp.true(), exp.column("n", table=alias)]))
        if not isinstance(empty, exp.Null):
            joined = exp.Paren(this=exp.Case(ifs=[exp.If(this=exp.Is(this=exp.column("m", table=alias),
                                                                      expression=exp.Null()), true=empty)],
                                             default=joined))
        self._group_by(outer_columns, node, clause, [exp.column(name, table=alias) for name in "vm"])
        return joined

    def _kept_row_number(self, query: exp.Select, node: exp.Expression) -> int:
        """Return which row (1-based) a correlated subquery that does not aggregate keeps: ``LIMIT 1 [OFFSET n]``."""
        if self.planner._count(query.args.get("limit"), "LIMIT") != 1:
            raise unsupported("LIMIT other than 1 in a correlated scalar subquery that does not aggregate (it may "
                              "return more than one row per outer row)", node)
        return (self.planner._count(query.args.get("offset"), "OFFSET") or 0) + 1

    def _one_row_per_key(self, numbered: exp.Select, query: exp.Select, partition: list[exp.Expression],
                         top: int) -> exp.Select:
        """Return ``numbered`` (keys ``k<n>`` and ``v``) cut to its ``top``-th row per key in the query's order.

        Why: ``(SELECT v ... ORDER BY x LIMIT 1)`` per outer row is the first row of each correlation key's
        partition, a row_number() over it (Velox's TopNRowNumber), as a window the planner already plans.
        """
        output = query.expressions[0].alias_or_name
        order = [ordered.copy() for ordered in (query.args["order"].expressions if query.args.get("order") else [])]
        for ordered in order:  # ORDER BY the subquery's own output name: its expression
            if isinstance(ordered.this, exp.Column) and not ordered.this.table and ordered.this.name == output:
                projection = query.expressions[0]
                ordered.set("this", (projection.this if isinstance(projection, exp.Alias) else projection).copy())
        window = exp.Window(this=exp.RowNumber(), partition_by=[p.copy() for p in partition],
                            order=exp.Order(expressions=order) if order else None)
        numbered.set("expressions", list(numbered.expressions) + [exp.alias_(window, "rn")])
        inner_alias = self.planner._synthetic_alias()
        keys = [e.alias_or_name for e in numbered.expressions if e.alias_or_name.startswith("k")]
        cut = exp.Select(expressions=[exp.alias_(exp.column(name, table=inner_alias), name) for name in keys + ["v"]]
                         + [exp.alias_(exp.true(), "m")])
        cut.set("from_", exp.From(this=_derived(numbered, inner_alias)))
        cut.set("where", exp.Where(this=exp.EQ(this=exp.column("rn", table=inner_alias),
                                               expression=exp.Literal.number(top))))
        return cut

    def _group_by(self, outer_columns: list[exp.Column], node: exp.Expression, clause: str,
                  joined: list[exp.Column]) -> None:
        """Make the joined columns grouping keys where ``node`` stands beside the aggregates of an aggregating query."""
        if clause in ("where", "group") or not self.aggregating or node.find_ancestor(*SQL_AGGREGATES) is not None:
            return
        group = self.select.args.get("group")
        keys = list(group.expressions) if group is not None else []
        if group is None or any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")) or any(
                isinstance(k, (exp.Rollup, exp.Cube, exp.GroupingSets)) for k in keys):
            raise unsupported("a correlated subquery beside the aggregates of a query without plain GROUP BY "
                              "keys", node)
        grouped = {(k.table, k.name) for k in keys if isinstance(k, exp.Column)}
        for column in outer_columns:
            if (column.table, column.name) not in grouped:
                raise unsupported(f"a correlated subquery reading {column.sql()}, which is not a GROUP BY key", node)
        self.group_keys.extend(joined)


def with_subquery_values_joined(select: exp.Select, planner) -> exp.Select:
    """Return ``select`` with its scalar subqueries and EXISTS used as values read from LEFT-joined derived tables.

    ``planner`` is the planning state (its synthetic aliases). Subqueries the WHERE path plans are left as
    they are, and so are uncorrelated scalar subqueries outside WHERE (a one-row build, EnforceSingleRow).
    """
    def wanted(node, clause):
        if isinstance(node, exp.Exists):
            return not (typed_in_select and typed_value_mark(select, node, clause, planner.catalog))
        if not isinstance(node, exp.Subquery):
            return False
        query = subquery_select(node.this)
        if _outer_tables(query):
            # one aggregate correlated by column equalities, in the SELECT list, ORDER BY or HAVING outside
            # aggregate calls and windows: a typed ScalarSubquery of the Project or of the Filter above the
            # aggregation (aggregate_planning.typed_scalar_subqueries)
            if clause == "group":
                return not typed_key(node)
            return not (clause in ("expressions", "order", "having") and typed_in_select
                        and (node.find_ancestor(*SQL_AGGREGATES, exp.Window, exp.Select) is select
                             or in_aggregate_argument(node) or in_window_input(node))
                        and binds(query, outer_aliases))
        # Uncorrelated: outside WHERE a one-row build (EnforceSingleRow); in WHERE one aggregate row, cross joined
        # (a LIMIT 0 or 1 one too: at most one row, :func:`_one_row_aggregate`).
        return clause == "where" and isinstance(query, exp.Select) and len(query.expressions) == 1 and (
            _at_most_one_row(query) or not any(query.args.get(key) for key in _SHAPING)
            and query.expressions[0].find(*SQL_AGGREGATES) is not None)

    def in_window_input(node):  # sum((SELECT …)) OVER (PARTITION BY (SELECT …)): typed by plan_windows
        call = node.find_ancestor(*SQL_AGGREGATES, exp.Window, exp.Select)
        if isinstance(call, SQL_AGGREGATES) and isinstance(call.parent, exp.Window) and call.parent.this is call:
            call = call.parent
        return isinstance(call, exp.Window) and call.find_ancestor(*SQL_AGGREGATES, exp.Window, exp.Select) is select

    def in_aggregate_argument(node):  # sum(CASE WHEN (SELECT …)): per input row, below the aggregation
        call = node.find_ancestor(*SQL_AGGREGATES, exp.Window, exp.Select)
        return isinstance(call, SQL_AGGREGATES) and call.find_ancestor(
            *SQL_AGGREGATES, exp.Window, exp.Select) is select

    def typed_key(node):  # a plain GROUP BY key's scalar subquery: typed by aggregate_planning.plan_aggregation
        group = select.args.get("group")
        return isinstance(node, exp.Subquery) and not any(group.args.get(k) for k in (
            "rollup", "cube", "grouping_sets")) and not any(isinstance(k, (exp.Rollup, exp.Cube, exp.GroupingSets))
                                                            for k in group.expressions) and (
            not _outer_tables(subquery_select(node.this)) or binds(subquery_select(node.this), outer_aliases))

    outer_aliases = defined_aliases(select)
    # a GROUP BY key holding a subquery joined here: the SELECT list finds it by its text, all here then
    typed_in_select = all(typed_key(node) for node, clause in _value_positions(select, True) if clause == "group")
    if not any(wanted(node, clause) for node, clause in _value_positions(select, True)):
        return select
    select = select.copy()
    joined = _Joined(select, planner)
    for node, clause in _value_positions(select, True):
        if wanted(node, clause):
            node.replace(joined.replacement(node, clause))
    select.set("joins", list(select.args.get("joins") or []) + joined.joins)
    if joined.checks:
        where = select.args.get("where")
        select.set("where", exp.Where(this=exp.and_(*([where.this] if where is not None else []), *joined.checks)))
    if joined.group_keys:
        select.args["group"].set("expressions", list(select.args["group"].expressions)
                                 + [key.copy() for key in joined.group_keys])
    return select
