"""Push the conditions on a derived table (or CTE reference) into its query, below its joins and GROUP BY.

Why: the planner filters a derived table's rows where the outer query reads
them, after the derived query has joined and aggregated every row. A
condition on a column the derived query passes through, or groups by, holds
of the rows that make that column, so it can filter them before: TPC-DS q39's
``inv1.d_moy = 1`` reaches ``date_dim`` below the grouping by ``d_moy`` of a
year of ``inventory``, and the grouping sees a sixth of the rows. This is
textbook predicate pushdown (sqlglot's ``pushdown_predicates``, DataFusion's
``PushDownFilter``), here for the conditions
:func:`~gpu_engine.sql.predicates.pushed_down` gives one FROM item.

A condition is pushed into a SELECT whose rows it filters one by one:

* without GROUP BY or aggregates: into its WHERE (after its joins, so outer
  joins inside keep their meaning), its columns replaced by the expressions
  the SELECT computes them from;
* with a plain GROUP BY: when it reads only columns that are grouping keys
  (a group's rows all have the key's value, so filtering them filters the group);
* never into a SELECT with LIMIT/OFFSET, windows, QUALIFY, DISTINCT ON,
  ROLLUP/CUBE/GROUPING SETS or aggregates without GROUP BY (one row whatever
  passes), nor a condition with a subquery, nor through an expression with
  one, a window, an aggregate or a random value.
The conditions that cannot go in stay above the derived table. Two more
reach the rows below:

* an OR whose every branch has conjuncts that could go in pushes the OR of
  those (the condition itself stays above): TPC-DS q11's ``year_total`` is
  read for ``(dyear = 2002 AND ...) OR (dyear = 2001 AND year_total > 0 AND
  ...)``, so ``dyear = 2002 OR dyear = 2001`` filters date_dim below the
  grouping although ``year_total`` is an aggregate;
* a UNION [ALL] pushes each condition into every branch, its columns read
  by position as the branch's own outputs (a row passes the filter above
  exactly when it passed it in its branch); a constant output (q11's
  ``'s' sale_type``) may be read even in a grouped branch.

The optimizer's pass over the typed plan
(:mod:`~gpu_engine.optimizer.predicate_pushdown`) places every filter this one
places; this copy stays because SQL rules that run before that pass read its
filtered estimates: eager aggregation (TPC-DS q11's web ``year_total`` branch
is pre-aggregated only when its readers' ``d_year`` is known: q11 +15-21%
without it, bench/results/2026-11-28-partialsteps-move.md) and join ordering.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Mapping

from sqlglot import exp

from gpu_engine.sql.decorrelation import subquery_select
from gpu_engine.sql.predicates import conjoined, conjuncts_of, disjoined, disjuncts_of, free_columns, has_subquery

__all__ = ["with_conditions_pushed"]

#: Expressions that may not be evaluated on other rows or more often than written.
_UNMOVABLE = (exp.Window, exp.AggFunc, exp.Subquery, exp.Exists, exp.Select, exp.Rand, exp.Uuid)
#: SELECT clauses that make a filter on the output differ from one on the input.
_BLOCKING_CLAUSES = ("limit", "offset", "qualify", "windows", "fetch")


def _movable(tree: exp.Expression) -> bool:
    return not any(isinstance(node, _UNMOVABLE) for node in tree.walk())


def _group_keys(select: exp.Select) -> set[str] | None:
    """Return the SQL of the plain grouping keys; None when GROUP BY has ROLLUP, CUBE or GROUPING SETS."""
    group = select.args.get("group")
    if group is None:
        return set()
    if any(group.args.get(key) for key in ("rollup", "cube", "grouping_sets", "totals", "all")):
        return None
    if any(isinstance(key, (exp.Rollup, exp.Cube, exp.GroupingSets, exp.Tuple)) for key in group.expressions):
        return None
    return {key.sql() for key in group.expressions}


def _sources(select: exp.Expression) -> dict[str, exp.Expression] | None:
    """Return each output column's expression, for the outputs a condition may read; None: nothing may be pushed."""
    if not isinstance(select, exp.Select) or select.args.get("from_") is None:
        return None
    if any(select.args.get(key) for key in _BLOCKING_CLAUSES):
        return None
    distinct = select.args.get("distinct")
    if distinct is not None and distinct.args.get("on"):
        return None
    keys = _group_keys(select)
    if keys is None:
        return None
    aggregated = bool(keys) or any(isinstance(node, exp.AggFunc) for p in select.expressions for node in p.walk())
    if aggregated and not keys:
        return None
    if any(isinstance(node, exp.Window) for p in select.expressions for node in p.walk()):
        return None
    names = [p.alias_or_name for p in select.expressions]
    out = {}
    for projection, name in zip(select.expressions, names):
        if names.count(name) > 1 or isinstance(projection, exp.Star):
            continue
        tree = projection.this if isinstance(projection, exp.Alias) else projection
        if not _movable(tree):
            continue
        if aggregated and tree.sql() not in keys and not isinstance(tree, exp.Literal):
            continue
        out[name] = tree
    return out


def _rewritten(conjunct: exp.Expression, alias: str, sources: Mapping[str, exp.Expression]) -> exp.Expression | None:
    """Return ``conjunct`` over the derived query's own expressions, or None when it reads another column."""
    if has_subquery(conjunct) or not _movable(conjunct):
        return None
    columns = free_columns(conjunct)
    if any(c.table != alias or c.name not in sources for c in columns):
        return None

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table == alias:
            source = sources[node.name].copy()
            return source if isinstance(source, (exp.Column, exp.Literal)) else exp.paren(source, copy=False)
        return node

    return conjunct.copy().transform(replace, copy=False)


def _string_comparison_truth(part: exp.Expression) -> bool | None:
    """Return the truth of ``'a' = 'b'`` / ``'a' <> 'b'`` (a constant output compared in a branch), else None."""
    if isinstance(part, (exp.EQ, exp.NEQ)) and all(isinstance(side, exp.Literal) and side.is_string
                                                    for side in (part.this, part.expression)):
        return (part.this.this == part.expression.this) == isinstance(part, exp.EQ)
    return None


def _implied(conjunct: exp.Expression, alias: str, sources: Mapping[str, exp.Expression],
             restricted: set[frozenset[str]]) -> exp.Expression | None:
    """Return the OR of what each branch of ``conjunct`` (an OR) could push in, None when a branch has nothing.

    A branch comparing two string constants falsely (a union branch's ``'w' = 's'``) is left out, a true one
    dropped. None too where a condition of the SELECT already restricts the same columns (``d_year IN (2001,
    2002)`` beside an implied ``d_year = 2001 OR d_year = 2002``): the estimates would count it twice.
    """
    branches = disjuncts_of(conjunct)
    if len(branches) < 2:
        return None
    parts = []
    for branch in branches:
        inner = [p for p in (_rewritten(part, alias, sources) for part in conjuncts_of(branch)) if p is not None]
        truths = [_string_comparison_truth(p) for p in inner]
        if False in truths:
            continue
        inner = [p for p, truth in zip(inner, truths) if truth is None]
        if not inner:
            return None
        parts.append(conjoined(inner))
    if not parts:
        return exp.false()
    implied = disjoined(parts)
    if frozenset(c.sql() for c in free_columns(implied)) in restricted:
        return None
    return implied


def _union_branches(query: exp.Expression) -> list[exp.Select] | None:
    """Return the SELECTs a tree of UNION [ALL] combines, None for another set operation or a clause on one."""
    query = subquery_select(query)
    if isinstance(query, exp.Select):
        return [query]
    if not isinstance(query, exp.Union) or query.args.get("by_name") or any(
            query.args.get(key) for key in ("order", "limit", "offset")):
        return None
    left, right = _union_branches(query.this), _union_branches(query.expression)
    return None if left is None or right is None else left + right


def _rebuilt(query: exp.Expression, branches) -> exp.Expression:
    """Return the union tree ``query`` with its SELECTs taken in order from ``branches``."""
    query = subquery_select(query)
    if isinstance(query, exp.Select):
        return next(branches)
    left, right = _rebuilt(query.this, branches), _rebuilt(query.expression, branches)
    # The union node alone is copied (its sides are replaced: copying them first copied every branch once more).
    union = query.__class__()
    if query.comments is not None:
        union.comments = list(query.comments)
    if query.type is not None:
        union.type = query.type.copy()
    if query._meta is not None:  # what Expression.copy keeps too (earlier passes' notes)
        union._meta = deepcopy(query._meta)
    for key, value in query.args.items():
        if key == "this":
            value = left
        elif key == "expression":
            value = right
        elif isinstance(value, exp.Expression):
            value = value.copy()
        elif isinstance(value, list):
            value = [v.copy() if isinstance(v, exp.Expression) else v for v in value]
        union.set(key, value)
    return union


def _pushed_into_union(query: exp.Expression, alias: str, ctes: Mapping[str, exp.Expression],
                       conjuncts: list[exp.Expression]) -> tuple[exp.Expression | None, list[exp.Expression]]:
    """Return the union with each conjunct pushed into every branch it can enter, and the conjuncts to keep above
    (all but those every branch took whole); None when nothing went in."""
    branches = _union_branches(query)
    if branches is None or any(any(isinstance(p, exp.Star) for p in b.expressions) for b in branches):
        return None, conjuncts
    names = [p.alias_or_name for p in branches[0].expressions]
    if len(set(names)) != len(names) or any(len(b.expressions) != len(names) for b in branches):
        return None, conjuncts
    changed, taken, new_branches = False, [True] * len(conjuncts), []
    for branch in branches:
        own = dict(zip(names, (p.alias_or_name for p in branch.expressions)))

        def renamed(node: exp.Expression, own=own) -> exp.Expression:
            if isinstance(node, exp.Column) and node.table == alias and node.name in own:
                return exp.column(exp.to_identifier(own[node.name], quoted=True), table=exp.to_identifier(alias))
            return node

        inputs = [c.copy().transform(renamed, copy=False) for c in conjuncts]
        pushed, kept = _pushed_into_select(branch, alias, inputs)  # a copy when something went in
        kept_ids = {id(k) for k in kept}
        taken = [took and id(c) not in kept_ids for took, c in zip(taken, inputs)]
        changed = changed or pushed is not None
        new_branches.append(branch.copy() if pushed is None else pushed)
    if not changed:
        return None, conjuncts
    return _rebuilt(query, iter(new_branches)), [c for c, took in zip(conjuncts, taken) if not took]


def with_conditions_pushed(item: exp.Expression, ctes: Mapping[str, exp.Expression],
                           conjuncts: list[exp.Expression]) -> tuple[exp.Expression, list[exp.Expression]]:
    """Return FROM ``item`` (a derived table or CTE reference) with what it can of ``conjuncts`` inside its query,
    and the conjuncts left to filter its rows (all of them, and ``item`` as it was, when none goes in)."""
    if not conjuncts:
        return item, conjuncts
    alias = item.alias_or_name
    if isinstance(item, exp.Subquery):
        query = item
    elif isinstance(item, exp.Table) and item.name in ctes and not item.args.get("db"):
        query = ctes[item.name]
    else:
        return item, conjuncts
    table_alias = item.args.get("alias")
    if table_alias is not None and table_alias.columns:
        return item, conjuncts  # columns renamed by the alias: left as they are
    select = subquery_select(query)  # a clause written after the parentheses (LIMIT) blocks the push
    if isinstance(select, exp.Union):
        union, kept = _pushed_into_union(select, alias, ctes, conjuncts)
        if union is None:
            return item, conjuncts
        return exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier(alias))), kept
    select, kept = _pushed_into_select(select, alias, conjuncts)
    if select is None:
        return item, conjuncts
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias))), kept


def _pushed_into_select(select: exp.Expression, alias: str, conjuncts: list[exp.Expression]
                        ) -> tuple[exp.Select | None, list[exp.Expression]]:
    """Return a copy of ``select`` with what it can of ``conjuncts`` (over ``alias``'s columns) in its WHERE, and
    the conjuncts left above; None (and all of them) when none goes in. ``select`` itself is only read."""
    sources = _sources(select)
    if not sources:
        return None, conjuncts
    where = select.args.get("where")
    restricted = {frozenset(c.sql() for c in free_columns(part)) for part in conjuncts_of(where and where.this)}
    pushed, kept = [], []
    for conjunct in conjuncts:
        inner = _rewritten(conjunct, alias, sources)
        (kept if inner is None else pushed).append(conjunct if inner is None else inner)
        implied = _implied(conjunct, alias, sources, restricted) if inner is None else None
        if implied is not None:
            pushed.append(implied)  # the OR's own filter stays above
    if not pushed:
        return None, conjuncts
    select = select.copy()
    for condition in pushed:
        select.where(condition, copy=False)
    return select, kept
