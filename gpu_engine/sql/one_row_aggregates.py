"""Compute sibling one-row aggregates over the same FROM list in one pass, each keeping its own WHERE as a FILTER.

Why: a query often asks several questions of one table, each a one-row
aggregate with its own filter: TPC-DS q9 has fifteen scalar subqueries over
``store_sales`` in its SELECT list, q28 six derived tables over it, q88 eight
over the same four-table join, differing only in a range of one column. Planned
as written, each is a scan (and join) of its own: the same rows are decoded and
joined up to fifteen times. Here the siblings become one aggregate over the
FROM list they share, filtered by the conditions every one of them has and by
the OR of the rest; each aggregate keeps its own conditions as a FILTER
(``agg(x) FILTER (WHERE p)`` is ``agg(CASE WHEN p THEN x END)``, as the
FILTER rewrite of :mod:`gpu_engine.sql.rewrite` writes it). The merged query
still returns one row, so a derived table cross joined or a scalar subquery
read from it gives what the siblings gave.

Siblings are merged when they are

* derived tables of one SELECT's comma-joined FROM list (no outer joins), or
  scalar subqueries of one SELECT list that neither groups nor aggregates
  (the merged row is cross joined into the FROM list, whose row count it
  keeps, and the subqueries read its columns);
* each a SELECT of aggregates without GROUP BY, HAVING, DISTINCT, ORDER BY,
  LIMIT, windows or subqueries, over comma-joined tables (or CTEs) spelled
  alike, every column inside an aggregate;
* aggregates whose result over the rows a FILTER keeps is what they give over
  the same rows alone: count, sum, avg, min, max (DISTINCT too), whose
  arguments are columns, constants and arithmetic that cannot fail (``+``,
  ``-``, ``*``, comparisons, CASE), since the merged query computes them on
  rows another sibling's conditions keep too.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from sqlglot import exp

from gpu_engine.sql.decorrelation import select_over, subquery_select
from gpu_engine.sql.planning_context import TreeKey, conjunct_key
from gpu_engine.sql.predicates import conjoined, conjuncts_of, defined_aliases, disjoined, in_nested_query

if TYPE_CHECKING:
    from gpu_engine.sql.planning_context import PlanningContext

__all__ = ["with_one_row_aggregates_merged"]

#: Aggregates that give over the rows a FILTER keeps what they give over those rows alone.
_MERGEABLE = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
#: Argument nodes that cannot fail on a row another sibling's conditions keep (no division, cast, function call).
_SAFE_ARGUMENT_NODES = (exp.Column, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.Add,
                        exp.Sub, exp.Mul, exp.Neg, exp.Case, exp.If, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT,
                        exp.LTE, exp.And, exp.Or, exp.Not, exp.Is, exp.Between)
#: The SELECT clauses a sibling may have.
_SIBLING_CLAUSES = {"expressions", "from_", "joins", "where", "hint"}


def _safe_argument(tree: exp.Expression) -> bool:
    return all(isinstance(node, _SAFE_ARGUMENT_NODES) for node in tree.walk())


def _plain_joins(select: exp.Select) -> bool:
    """Return whether every JOIN of ``select`` is a comma (or CROSS) join without a condition."""
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None or join.args.get("using") or join.side or join.args.get("method"):
            return False
        if (join.kind or "").upper() not in ("", "CROSS"):
            return False
    return True


def _items(select: exp.Select) -> list[exp.Expression]:
    from_ = select.args.get("from_")
    return ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]


def _aggregates(tree: exp.Expression) -> list[exp.Expression] | None:
    """Return the aggregate calls of projection ``tree``; None when it is no mergeable aggregate expression."""
    calls = [node for node in tree.walk() if isinstance(node, exp.AggFunc)]
    if not calls or any(not isinstance(call, _MERGEABLE) for call in calls):
        return None
    inside = {id(node) for call in calls for node in call.walk()}
    if any(isinstance(node, exp.Column) and id(node) not in inside for node in tree.walk()):
        return None  # a column outside every aggregate
    for call in calls:
        if any(value for key, value in call.args.items() if key not in ("this", "big_int")):
            return None
        argument = call.this
        if isinstance(argument, exp.Star):
            if not isinstance(call, exp.Count):
                return None
        elif isinstance(argument, exp.Distinct):
            if len(argument.expressions) != 1 or not _safe_argument(argument.expressions[0]):
                return None
        elif argument is None or not _safe_argument(argument):
            return None
    return calls


def _sibling_signature(query: exp.Expression) -> frozenset | None:
    """Return what a mergeable sibling's FROM list is keyed by (its items, each a :class:`TreeKey`: tables and
    aliases named alike whether quoted or not), or None for no sibling. (Items of one FROM list have distinct
    aliases, so the set of their keys is the list up to order.)"""
    select = subquery_select(query)
    if not isinstance(select, exp.Select):
        return None
    if any(value for key, value in select.args.items() if key not in _SIBLING_CLAUSES):
        return None
    if not _plain_joins(select):
        return None
    items = _items(select)
    if not items or not all(isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier) for item in items):
        return None
    where = select.args.get("where")
    if where is not None and any(isinstance(node, (exp.Subquery, exp.Exists, exp.Select, exp.Window))
                                 for node in where.this.walk()):
        return None
    for projection in select.expressions:
        if any(isinstance(node, (exp.Subquery, exp.Exists, exp.Select, exp.Window)) for node in projection.walk()):
            return None
        if _aggregates(projection.this if isinstance(projection, exp.Alias) else projection) is None:
            return None
    aliases = defined_aliases(select)
    if any(column.table not in aliases for column in select.find_all(exp.Column)):
        return None  # correlated (or unqualified): not a sibling
    return frozenset(TreeKey(item) for item in items)


def _filtered_aggregates(tree: exp.Expression, condition: exp.Expression | None) -> exp.Expression:
    """Return a copy of ``tree`` whose aggregates read only the rows where ``condition`` holds (FILTER)."""
    tree = tree.copy()
    if condition is None:
        return tree
    for call in [node for node in tree.walk() if isinstance(node, _MERGEABLE)]:
        argument = call.this
        if isinstance(argument, exp.Star):
            call.set("this", exp.Case(ifs=[exp.If(this=condition.copy(), true=exp.Literal.number(1))]))
        elif isinstance(argument, exp.Distinct):
            argument.set("expressions", [exp.Case(ifs=[exp.If(this=condition.copy(), true=e)])
                                         for e in argument.expressions])
        else:
            call.set("this", exp.Case(ifs=[exp.If(this=condition.copy(), true=argument)]))
    return tree


def _merged(siblings: list[exp.Select], names: list[list[str]]) -> exp.Select:
    """Return one SELECT computing every sibling's projections (named ``names``) over their shared FROM list."""
    conjuncts = [conjuncts_of(s.args["where"].this) if s.args.get("where") else [] for s in siblings]
    keys = [[conjunct_key(c) for c in parts] for parts in conjuncts]  # alike however quoted, parenthesized, turned
    common_keys = set.intersection(*[set(parts) for parts in keys])
    common = [c for c, key in zip(conjuncts[0], keys[0]) if key in common_keys]
    own = []
    for parts, part_keys in zip(conjuncts, keys):
        rest = [c for c, key in zip(parts, part_keys) if key not in common_keys]
        own.append(conjoined(rest) if rest else None)
    where = list(common)
    if all(condition is not None for condition in own):
        distinct = list({conjunct_key(condition): condition for condition in own}.values())
        where.append(disjoined(distinct))
    projections = []
    for sibling, condition, sibling_names in zip(siblings, own, names):
        for projection, name in zip(sibling.expressions, sibling_names):
            tree = projection.this if isinstance(projection, exp.Alias) else projection
            projections.append(exp.alias_(_filtered_aggregates(tree, condition), exp.to_identifier(name)))
    return select_over(siblings[0], projections, where)


def _output_names(siblings: list[exp.Select]) -> list[list[str]]:
    """Return each sibling's projection names in the merged SELECT: as written where unique, else numbered."""
    written = [[p.alias_or_name for p in s.expressions] for s in siblings]
    counts = defaultdict(int)
    for names in written:
        for name in names:
            counts[name] += 1
    return [[name if counts[name] == 1 else f"{name}${i}_{j}" for j, name in enumerate(names)]
            for i, names in enumerate(written)]


def _nested_aliases(select: exp.Select, skip: list[exp.Expression]) -> set[str]:
    """Return the aliases that SELECTs nested in ``select`` define (outside the ``skip`` subtrees)."""
    skipped = {id(node) for tree in skip for node in tree.walk()}
    return {alias for node in select.walk() if isinstance(node, exp.Select) and node is not select
            and id(node) not in skipped for alias in defined_aliases(node)}


def _merge_derived_tables(select: exp.Select) -> exp.Select:
    """Merge the sibling derived tables of ``select``'s FROM list (see the module docstring)."""
    if not _plain_joins(select):
        return select
    groups: dict[frozenset, list[exp.Subquery]] = defaultdict(list)
    for item in _items(select):
        if isinstance(item, exp.Subquery) and item.alias and not item.args["alias"].columns:
            signature = _sibling_signature(item)
            if signature is not None:
                groups[signature].append(item)
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    if not groups:
        return select
    select = select.copy()
    by_alias = {item.alias: item for item in _items(select) if isinstance(item, exp.Subquery)}
    for members in groups.values():
        members = [by_alias[m.alias] for m in members]
        if _nested_aliases(select, members) & {m.alias for m in members}:
            continue  # a nested SELECT redefines a sibling's alias: its columns cannot be told apart
        siblings = [subquery_select(m) for m in members]
        names = _output_names(siblings)
        keep = members[0].alias
        renamed = {(m.alias, p.alias_or_name): name for m, s, sibling_names in zip(members, siblings, names)
                   for p, name in zip(s.expressions, sibling_names)}
        merged = exp.Subquery(this=_merged(siblings, names), alias=exp.TableAlias(this=exp.to_identifier(keep)))
        inside = {id(node) for m in members for node in m.walk()}
        for column in list(select.find_all(exp.Column)):
            target = renamed.get((column.table, column.name))
            if target is None or id(column) in inside:
                continue
            parent = column.parent
            if isinstance(parent, exp.Select) and column.arg_key == "expressions" and target != column.name:
                column.replace(exp.alias_(exp.column(target, table=keep), exp.to_identifier(column.name)))
            else:
                column.replace(exp.column(target, table=keep))
        members[0].replace(merged)
        for member in members[1:]:
            join = member.parent
            if isinstance(join, exp.Join):
                join.pop()
            else:  # the FROM item: the first remaining join takes its place
                joins = select.args.get("joins") or []
                member.replace(joins[0].this.copy())
                joins[0].pop()
    return select


def _scalar_subqueries(select: exp.Select) -> list[exp.Subquery]:
    """Return the subqueries of ``select``'s SELECT list that are not nested in another subquery."""
    out, stack = [], list(select.expressions)
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Subquery):
            out.append(node)
            continue
        stack.extend(node.iter_expressions())
    return out


def _merge_scalar_subqueries(select: exp.Select, planner: PlanningContext) -> exp.Select:
    """Merge the sibling scalar subqueries of ``select``'s SELECT list into one cross-joined row."""
    if select.args.get("group") or select.args.get("having") or select.args.get("from_") is None \
            or not _plain_joins(select):
        return select
    if any(isinstance(node, (exp.AggFunc, exp.Window)) and not in_nested_query(node, select)
           for projection in select.expressions for node in projection.walk()):
        return select  # the merged row's columns are no grouping keys of an aggregating SELECT
    groups: dict[frozenset, list[int]] = defaultdict(list)
    subqueries = _scalar_subqueries(select)
    for index, subquery in enumerate(subqueries):
        inner = subquery_select(subquery)
        signature = _sibling_signature(subquery)
        if signature is not None and len(inner.expressions) == 1:
            groups[signature].append(index)
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    if not groups:
        return select
    select = select.copy()
    subqueries = _scalar_subqueries(select)
    for members in groups.values():
        siblings = [subquery_select(subqueries[i]) for i in members]
        names = [[f"$value{n}"] for n in range(len(members))]
        alias = planner._synthetic_alias()
        merged = exp.Subquery(this=_merged(siblings, names), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        for i, sibling_names in zip(members, names):
            subqueries[i].replace(exp.column(sibling_names[0], table=alias))
        select.append("joins", exp.Join(this=merged))
    return select



def with_one_row_aggregates_merged(select: exp.Select, planner: PlanningContext) -> exp.Select:
    """Return ``select`` with its sibling one-row aggregates merged (see the module docstring); unchanged without."""
    select = _merge_derived_tables(select)
    return _merge_scalar_subqueries(select, planner)
