"""Check the projections that pruning takes out of aggregate queries: each column in them grouped or aggregated.

Why: sqlglot's ``pushdown_projections`` drops the projections of derived tables and CTEs nobody reads before the
planner sees them, so a column there that is neither grouped nor inside an aggregate was never checked:
``SELECT x.b FROM (SELECT k AS a, i AS b FROM t GROUP BY i) x`` answered where DuckDB raises a binder error
("column k must appear in the GROUP BY clause or must be part of an aggregate function"), and the same query
reading ``x.a`` is refused. The check is the planner's rule, read off the tree and kept on the safe side: a
column counts as grouped when it, or an expression around it, is spelled as some part of the GROUP BY; what
sits in an aggregate, a window, a subquery or a function the engine does not know is not checked; nor are
columns of an outer query, or GROUP BY ALL.
"""

from __future__ import annotations

from sqlglot import exp

from gpu_engine.plans.sql_aggregates import aggregate_function_name
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.planning_context import TreeKey, tree_hashes

__all__ = ["aggregate_projections", "check_pruned_projections"]


#: Nodes around an aggregate call that belong to it (``agg FILTER (WHERE ...)``, ``first(x IGNORE NULLS)``...).
_WRAPPERS = (exp.Filter, exp.IgnoreNulls, exp.RespectNulls, exp.WithinGroup)


def _is_aggregate(node: exp.Expression) -> bool:
    while isinstance(node, _WRAPPERS):
        node = node.this
    return isinstance(node, exp.AggFunc) or aggregate_function_name(node) is not None


def _holds_aggregate(node: exp.Expression) -> bool:
    """Return whether ``node`` holds an aggregate outside windows and subqueries."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (exp.Window, exp.Subquery, exp.Exists, exp.Select)) and current is not node:
            continue
        if _is_aggregate(current):
            return True
        stack.extend(current.iter_expressions())
    return False


def aggregate_projections(tree: exp.Expression) -> list[tuple[exp.Select, list[exp.Expression]]]:
    """Return each aggregate SELECT of ``tree`` (GROUP BY or an aggregate) with its projections, before pruning."""
    out = []
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        if group is not None and group.args.get("all"):
            continue
        if group is not None or any(_holds_aggregate(e) for e in select.expressions):
            out.append((select, list(select.expressions)))
    return out


def check_pruned_projections(before: list[tuple[exp.Select, list[exp.Expression]]]) -> None:
    """Raise SqlError for a column neither grouped nor aggregated in a projection pruning took out."""
    for select, projections in before:
        kept = {id(e) for e in select.expressions}
        pruned = [e for e in projections if id(e) not in kept]
        if not pruned:
            continue
        group = select.args.get("group")
        grouped = set()
        if group is not None:
            if any(isinstance(n, exp.Literal) for n in group.iter_expressions()):
                continue  # a position, read later
            hashes = tree_hashes(group)
            grouped = {TreeKey(n, hashes) for n in group.walk()}
        sources = _source_names(select)
        for projection in pruned:
            _check(projection.this if isinstance(projection, exp.Alias) else projection, grouped, sources)


def _source_names(select: exp.Select) -> set[str]:
    items = []
    source = select.args.get("from_") or select.args.get("from")
    if source is not None:
        items.append(source.this)
    items += [join.this for join in select.args.get("joins") or []]
    return {item.alias_or_name for item in items}


def _check(node: exp.Expression, grouped: set[TreeKey], sources: set[str]) -> None:
    """Raise SqlError for a column of ``node`` that is neither inside an aggregate nor part of a grouped expression.

    ``grouped``: every part of the GROUP BY by :class:`TreeKey` (identifiers without case or quotes, parentheses
    ignored, as DuckDB's binder matches them; their SQL text told ``"K"`` from ``k``).
    """
    hashes = tree_hashes(node) if grouped else None
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (exp.Window, exp.Subquery, exp.Exists, exp.Select, exp.Anonymous)) \
                or _is_aggregate(current) or (grouped and TreeKey(current, hashes) in grouped):
            continue
        if isinstance(current, exp.Column):
            if current.table in sources:
                line, col = position_of(current)
                raise SqlError(f"column {current.table}.{current.name} is not available here (in an aggregate query, "
                               "columns must be grouped or aggregated)", line=line, col=col, name=current.sql())
            continue
        stack.extend(current.iter_expressions())
