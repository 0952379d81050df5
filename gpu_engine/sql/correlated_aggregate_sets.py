"""Plan ``x IN | op ANY | op ALL (correlated subquery that aggregates)`` by taking the aggregation out of the row.

Why: ``a IN (SELECT max(w) FROM u WHERE u.k = t.g GROUP BY u.h)`` asks, per
outer row, for the values of a grouped aggregation over the rows of its key;
the membership and quantified-comparison rules plan a correlated subquery only
when it is a filtered set of rows. Two rewrites make it one:

* **Grouped** (GROUP BY, with or without HAVING): the aggregation runs once
  for every key, ``D = SELECT u.k AS k0, max(w) AS v FROM u GROUP BY u.h,
  u.k [HAVING ...]`` (the correlation columns join the grouping keys: within
  one outer row's rows they are constant, so the groups are those the
  subquery forms per row), and the subquery becomes the filtered set
  ``SELECT d.v FROM (D) d WHERE d.k0 = t.g``, which IN (a semi join on the
  value and the key; NOT IN three-valued facts per key) and ANY/ALL (counts and
  bounds per key) plan. A key without rows has no groups: the empty set, as
  the subquery is.
* **One aggregate row** (no GROUP BY): the subquery returns exactly one row
  per outer row, even over no rows (COUNT 0, else NULL), and a comparison with
  ANY or ALL of one value is the comparison with that value, three-valued
  alike: ``x IN (S)`` is ``x = (S)``, ``x > ALL (S)`` is ``x > (S)``, a
  correlated scalar subquery (:mod:`~gpu_engine.sql.decorrelation`,
  :mod:`~gpu_engine.sql.subquery_values`, COUNT's 0 included).

Only correlations by column equalities in the subquery's WHERE are grouped
(others are refused by name, as for scalar subqueries); HAVING without GROUP
BY (zero or one row per outer row), LIMIT/OFFSET and windows stay refused.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.plans.sql_aggregates import SQL_AGGREGATES
from gpu_engine.sql.decorrelation import correlation, split_correlated, subquery_select
from gpu_engine.sql.errors import unsupported
from gpu_engine.sql.predicates import defined_aliases, free_columns

__all__ = ["with_correlated_aggregate_sets"]

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def _candidates(tree: exp.Expression | None) -> list[tuple[exp.Expression, exp.Expression]]:
    """Return (node, subquery) for each ``x IN (S)`` and ``x op ANY|ALL (S)`` of ``tree``'s own scope."""
    found, stack = [], [tree] if tree is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, exp.In) and node.args.get("query") is not None and not isinstance(node.this, exp.Tuple):
            found.append((node, node.args["query"]))
            stack.append(node.this)
            continue
        if isinstance(node, (exp.Any, exp.All)) and isinstance(node.parent, _COMPARISONS) \
                and node.parent.expression is node and not isinstance(node.parent.this, exp.Tuple):
            found.append((node.parent, node.this))
            continue
        if isinstance(node, (exp.Select, exp.SetOperation, exp.Subquery, exp.Exists)):
            continue
        stack.extend(node.iter_expressions())
    return found


def _aggregating_correlated(query: exp.Expression, outer_aliases: set[str]) -> bool:
    """Return whether ``query`` is a one-column SELECT that aggregates and reads this query's columns."""
    if not isinstance(query, exp.Select) or len(query.expressions) != 1:
        return False
    if not ({c.table for c in free_columns(query)} - {""} - defined_aliases(query)) & outer_aliases:
        return False
    value = query.expressions[0]
    return bool(query.args.get("group")) or value.find(*SQL_AGGREGATES) is not None


def _truth_only(conjunct: exp.Expression, node: exp.Expression) -> bool:
    """Return whether ``node`` is reached from the WHERE through AND, OR and parentheses alone (no NOT)."""
    tree = node
    while tree is not conjunct:
        parent = tree.parent
        if not isinstance(parent, (exp.And, exp.Or, exp.Paren, exp.Where)):
            return False
        tree = parent
    return True


def _spelled(node: exp.Expression) -> str:
    if isinstance(node, exp.In):
        return "IN"
    quantifier = "ALL" if isinstance(node.expression, exp.All) else "ANY"
    return f"{node.key.upper()} {quantifier}"


def _one_row(node: exp.Expression, query: exp.Select) -> exp.Expression:
    """Return ``node`` over a one-row aggregate ``query`` as the comparison with its value."""
    scalar = exp.Subquery(this=query.copy())
    if isinstance(node, exp.In):
        return exp.EQ(this=node.this.copy(), expression=scalar)
    return type(node)(this=node.this.copy(), expression=scalar)


def _per_key(node: exp.Expression, query: exp.Select, outer_aliases: set[str], planner,
             truth_only: bool) -> exp.Expression:
    """Return ``node`` with its grouped subquery read from the aggregation computed once per correlation key.

    ``truth_only``: ``node`` stands where NULL and FALSE filter alike (a WHERE conjunct, or under AND/OR
    only), so an IN may be the row IN ``(key, x) IN (SELECT k, v ...)``, a semi join.
    """
    inner, local, correlated = split_correlated(query, outer_aliases)
    keys, others = correlation(correlated, inner)
    if others or not keys:
        raise unsupported(f"{_spelled(node)} over a correlated subquery that groups, correlated otherwise than by "
                          "column equalities in its WHERE", node)
    value = query.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    grouped = query.copy()
    grouped.set("expressions", [exp.alias_(i.copy(), f"k{n}") for n, (_, i) in enumerate(keys)]
                + [exp.alias_(value.copy(), "v")])
    grouped.set("where", exp.Where(this=exp.and_(*[c.copy() for c in local])) if local else None)
    grouped.set("group", exp.Group(expressions=list(query.args["group"].expressions)
                                   + [i.copy() for _, i in keys]))
    for key in ("order", "distinct"):  # a set of values: neither changes which values it holds
        grouped.set(key, None)
    alias = planner._synthetic_alias()
    rows = exp.Select(expressions=[exp.column("v", table=alias)])
    rows.set("from_", exp.From(this=exp.Subquery(this=grouped, alias=exp.TableAlias(
        this=exp.to_identifier(alias)))))
    rows.set("where", exp.Where(this=exp.and_(*[exp.EQ(this=exp.column(f"k{n}", table=alias), expression=o.copy())
                                                for n, (o, _) in enumerate(keys)])))
    if isinstance(node, exp.In) and truth_only:  # a semi join on the key and the value (NULL keys never match)
        grouped_rows = exp.Select(expressions=[exp.column(f"k{n}", table=alias) for n in range(len(keys))]
                                  + [exp.column("v", table=alias)])
        grouped_rows.set("from_", rows.args["from_"].copy())
        return exp.In(this=exp.Tuple(expressions=[o.copy() for o, _ in keys] + [node.this.copy()]),
                      query=exp.Subquery(this=grouped_rows))
    if isinstance(node, exp.In):  # three-valued: the facts per key of = ANY (quantified comparisons)
        return exp.EQ(this=node.this.copy(), expression=exp.Any(this=exp.Subquery(this=rows)))
    return type(node)(this=node.this.copy(), expression=type(node.expression)(this=exp.Subquery(this=rows)))


def with_correlated_aggregate_sets(select: exp.Select, planner) -> exp.Select:
    """Return ``select`` with each IN / ANY / ALL over a correlated aggregating subquery rewritten (module docstring).

    ``planner`` is the planning state (its synthetic aliases).
    """
    outer_aliases = defined_aliases(select)
    trees = []
    for key in ("expressions", "where", "having", "order", "qualify"):
        value = select.args.get(key)
        trees.extend(value if isinstance(value, list) else [value] if value is not None else [])
    if not any(_aggregating_correlated(subquery_select(q), outer_aliases) for t in trees for _, q in _candidates(t)):
        return select
    select = select.copy()
    for key in ("expressions", "where", "having", "order", "qualify"):
        value = select.args.get(key)
        for tree in value if isinstance(value, list) else [value] if value is not None else []:
            for node, subquery in _candidates(tree):
                query = subquery_select(subquery)
                if not _aggregating_correlated(query, outer_aliases):
                    continue
                for clause in ("limit", "offset", "qualify", "windows"):
                    if query.args.get(clause):
                        raise unsupported(f"{_spelled(node)} over a correlated subquery that aggregates, with "
                                          f"{clause.upper()}", node)
                group = query.args.get("group")
                if group is not None and (any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "all"))
                                          or any(isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets))
                                                 for e in group.expressions)):
                    raise unsupported(f"{_spelled(node)} over a correlated subquery with ROLLUP, CUBE, GROUPING "
                                      "SETS or GROUP BY ALL", node)
                if group is not None:
                    truth_only = key == "where" and _truth_only(tree, node)
                    node.replace(_per_key(node, query, outer_aliases, planner, truth_only))
                elif query.args.get("having"):
                    raise unsupported(f"{_spelled(node)} over a correlated subquery with HAVING but no GROUP BY "
                                      "(zero or one row per outer row)", node)
                else:
                    node.replace(_one_row(node, query))
    return select
