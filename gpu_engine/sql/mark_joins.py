"""Plan [correlated] EXISTS and IN subqueries under OR as mark joins: a LEFT JOIN to the distinct matching keys.

Why: TPC-DS q10 and q35 filter ``EXISTS (web sales of c) OR EXISTS (catalog
sales of c)``, q45 ``zip IN (...) OR i_item_id IN (SELECT ...)``. Standing
alone in the WHERE, such a predicate is a semi join, which drops rows; under
OR the row must stay and only the predicate's truth is wanted: a match flag
per outer row (Velox's left semi project, DuckDB's mark join). Here the flag
is a LEFT JOIN to the subquery's distinct keys (at most one partner per outer
row, so no row is repeated), and the predicate becomes ``mark.k0 IS NOT NULL``.

For EXISTS that is exact. For ``x IN (SELECT y ...)`` it is exact except that
SQL says NULL (not FALSE) when there is no match and ``x`` or some ``y`` is
NULL; both keep no row in a WHERE as long as nothing negates the predicate,
so only predicates reached through AND, OR and parentheses (never NOT) are
rewritten. An uncorrelated IN subquery that groups, aggregates, is a set
operation or picks rows is read as written (its distinct non-NULL values); a
correlated one's QUALIFY, DISTINCT ON and LIMIT/OFFSET are computed per
correlation key first (:mod:`~gpu_engine.sql.correlated_row_clauses`).
Subqueries whose correlation is not column equalities, that aggregate, or that
the planner would refuse anyway are left as they were (the planner then
refuses them, naming the construct).
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.plans.scalar_translation import membership_equality
from gpu_engine.sql.correlated_derived_tables import with_correlation_pulled_up
from gpu_engine.sql.correlated_row_clauses import has_row_clauses, rows_per_correlation_key
from gpu_engine.sql.decorrelation import (
    correlation, own_aggregates, select_over, split_correlated, subquery_select,
)
from gpu_engine.sql.predicates import conjuncts_of, defined_aliases, factor_or, free_columns, has_subquery

__all__ = ["with_mark_joins"]


def _subquery_under_or(where: exp.Expression) -> bool:
    """Return whether some EXISTS / IN subquery in ``where`` has an OR above it (then it may become a mark join).

    Each found predicate climbs its parents to ``where``: the tree's depth, not its size, so a long chain of
    ANDed conjuncts is not walked once per subquery.
    """
    for node in where.walk():
        if isinstance(node, exp.Exists) or (isinstance(node, exp.In) and node.args.get("query") is not None):
            parent = node.parent
            while parent is not None and parent is not where:
                if isinstance(parent, exp.Or):
                    return True
                parent = parent.parent
    return False


def _positive_marks(tree: exp.Expression) -> list[exp.Expression] | None:
    """Return the EXISTS / IN-subquery predicates of ``tree`` if each is reached through AND/OR/parens only.

    None when some subquery sits elsewhere (under NOT, inside a comparison or a function).
    """
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, (exp.And, exp.Or)):
        left, right = _positive_marks(tree.this), _positive_marks(tree.expression)
        return None if left is None or right is None else left + right
    if isinstance(tree, exp.Exists) or (isinstance(tree, exp.In) and tree.args.get("query") is not None):
        return [tree]
    return None if has_subquery(tree) else []


def _mark_join(mark: exp.Expression, outer_aliases: set[str], planner) -> tuple[exp.Join, exp.Expression] | None:
    """Return (the LEFT JOIN to the distinct keys, the flag predicate) for one EXISTS / IN, or None to leave it."""
    if isinstance(mark, exp.Exists):
        select, value = subquery_select(mark.this), None
    else:
        select, value = subquery_select(mark.args["query"]), mark.this
        if not isinstance(value, exp.Column):
            return None
    select = with_correlation_pulled_up(select, outer_aliases)  # FROM (SELECT ... WHERE u.k = t.k) w
    if value is not None and _whole_query_values(select):
        return _uncorrelated_mark(select, value, planner)
    if not isinstance(select, exp.Select) or any(select.args.get(k) for k in ("group", "having", "windows")) \
            or own_aggregates(select):
        return None
    if value is not None and (len(select.expressions) != 1 or any(
            node.find(exp.AggFunc, exp.Window) for node in select.expressions)):
        return None
    inner, local, correlated = split_correlated(select, outer_aliases)
    keys, others = correlation(correlated, inner)
    if others or (value is None and not keys):
        return None  # an uncorrelated EXISTS under OR: a count, not a key match
    if has_row_clauses(select):  # QUALIFY, DISTINCT ON, LIMIT/OFFSET: computed per correlation key first
        select = rows_per_correlation_key(select, local, keys, others, _unaliased(select.expressions[0])
                                          if value is not None else None)
        inner, local, correlated = split_correlated(select, outer_aliases)
        keys, others = correlation(correlated, inner)
    alias = planner._synthetic_alias()
    outputs, on = [], []
    if value is not None:
        produced = select.expressions[0]
        produced = produced.this if isinstance(produced, exp.Alias) else produced
        outputs.append(exp.alias_(produced.copy(), "v"))
        local = local + [exp.Not(this=exp.Is(this=produced.copy(), expression=exp.Null()))]
        on.append(membership_equality(value.copy(), exp.column("v", table=alias)))
    for n, (outer, inner_column) in enumerate(keys):
        outputs.append(exp.alias_(inner_column.copy(), f"k{n}"))
        on.append(exp.EQ(this=outer.copy(), expression=exp.column(f"k{n}", table=alias)))
    distinct = select_over(select, outputs, local)
    distinct.set("distinct", exp.Distinct())
    join = exp.Join(this=exp.Subquery(this=distinct, alias=exp.TableAlias(this=exp.to_identifier(alias))),
                    side="LEFT", on=exp.and_(*on))
    flag = exp.Not(this=exp.Is(this=exp.column("v" if value is not None else "k0", table=alias),
                               expression=exp.Null()))
    return join, flag


def _unaliased(projection: exp.Expression) -> exp.Expression:
    return projection.this if isinstance(projection, exp.Alias) else projection


def _whole_query_values(select: exp.Expression) -> bool:
    """Return whether ``select`` is an uncorrelated one-column query that is more than a filter of its FROM: a set
    operation, or a SELECT that groups, aggregates, windows, is DISTINCT or picks rows (its values are read from
    it as written)."""
    if not isinstance(select, (exp.Select, exp.SetOperation)) or len(select.selects) != 1 \
            or any(column.table for column in free_columns(select)):
        return False
    return isinstance(select, exp.SetOperation) or own_aggregates(select) or any(
        select.args.get(key) for key in ("group", "having", "limit", "offset", "distinct", "qualify", "windows")) \
        or select.selects[0].find(exp.Window) is not None


def _uncorrelated_mark(select: exp.Expression, value: exp.Column, planner) -> tuple[exp.Join, exp.Expression]:
    """Return the mark join of ``value IN (<select>)``, an uncorrelated query read as written: a LEFT JOIN to
    ``SELECT DISTINCT v FROM (<select>) AS m(v) WHERE v IS NOT NULL``."""
    alias, inner = planner._synthetic_alias(), "$marked"
    select = select.copy()
    first = select
    while isinstance(first, (exp.SetOperation, exp.Subquery)):  # the leftmost SELECT names a set operation's columns
        first = first.this
    projection = first.expressions[0]
    if not isinstance(projection, (exp.Alias, exp.Column)):  # an unnamed expression: named here
        projection.replace(exp.alias_(projection.copy(), "v"))
    produced = exp.column(first.expressions[0].alias_or_name, table=inner, quoted=True)
    values = exp.Select(expressions=[exp.alias_(produced, "v")])
    values.set("distinct", exp.Distinct())
    values.set("from_", exp.From(this=exp.Subquery(this=select, alias=exp.TableAlias(
        this=exp.to_identifier(inner, quoted=True)))))
    values.set("where", exp.Where(this=exp.Not(this=exp.Is(this=produced.copy(), expression=exp.Null()))))
    join = exp.Join(this=exp.Subquery(this=values, alias=exp.TableAlias(this=exp.to_identifier(alias))),
                    side="LEFT", on=membership_equality(value.copy(), exp.column("v", table=alias)))
    return join, exp.Not(this=exp.Is(this=exp.column("v", table=alias), expression=exp.Null()))


def with_mark_joins(select: exp.Select, planner) -> exp.Select:
    """Return ``select`` with each EXISTS / IN subquery under an OR of its WHERE planned as a mark join.

    ``planner`` is the planning state (:class:`~gpu_engine.sql.planning_context.PlanningContext`: its subquery aliases).
    The SELECT comes back unchanged when it has no such predicate or one of them cannot be rewritten.
    """
    where = select.args.get("where")
    if where is None or select.args.get("joins") and any(
            j.side or (j.kind or "").upper() in ("OUTER", "FULL") for j in select.args["joins"]):
        return select
    if not _subquery_under_or(where):
        # No EXISTS / IN subquery under an OR: nothing to copy (a 2000-term WHERE took a tenth of a second; a
        # WHERE with only ANDed EXISTS, TPC-H Q4/Q21/Q22's, copied the whole query to return it unchanged).
        return select
    select = select.copy()  # rewritten in place below; the caller's tree stays as it was
    conjuncts = [part for conjunct in conjuncts_of(select.args["where"].this) for part in factor_or(conjunct)]
    marks = []
    for conjunct in conjuncts:
        stripped = conjunct
        while isinstance(stripped, exp.Paren):
            stripped = stripped.this
        if isinstance(stripped, exp.Or):
            found = _positive_marks(stripped)
            if found:
                marks.append((conjunct, found))
    if not marks:
        return select
    outer_aliases = defined_aliases(select)
    joins, replaced = [], {}
    for _, found in marks:
        for mark in found:
            planned = _mark_join(mark, outer_aliases, planner)
            if planned is None:
                return select
            joins.append(planned[0])
            replaced[id(mark)] = planned[1]
    kept = [conjunct.transform(lambda node: replaced[id(node)].copy() if id(node) in replaced else node, copy=False)
            for conjunct in conjuncts]
    select.set("joins", list(select.args.get("joins") or []) + joins)
    select.set("where", exp.Where(this=exp.and_(*kept)))
    return select
