"""Plan SQL window functions, ``f(...) OVER (PARTITION BY … ORDER BY … [frame])``, as Window nodes.

A window runs after the SELECT's aggregation and HAVING, before its projection, as SQL orders them: so
``avg(sum(x)) OVER (PARTITION BY k)`` averages the grouped sums, and the window's arguments, partition and
order expressions may name grouping keys and aggregates. The planner hands this module the SELECT list and
ORDER BY trees; :func:`extract_windows` swaps every window for a placeholder column (so the aggregation
finds only the aggregates inside windows, never a window's own ``sum``), and :func:`plan_windows` computes
the windows' inputs in one projection, then one Window node per distinct ``OVER`` (partition and order), and
maps each placeholder to its result column. QUALIFY (its windows extracted like the ORDER BY's) filters after. Windows elsewhere (WHERE, GROUP BY, HAVING, ON, inside an
aggregate or another window) and names no WINDOW clause defines are refused by name and position (named
windows are written out before: :mod:`gpu_engine.sql.named_windows`);
frames and functions the Window operator lacks are refused by :meth:`PlanBuilder.window`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping

from sqlglot import exp

from gpu_engine.errors import PlanError
from gpu_engine.plans.aggregates import COVARIANCE_FUNCTIONS, TWO_ARGUMENT_FUNCTIONS
from gpu_engine.plans.sql_aggregates import aggregate_function_name
from gpu_engine.plans.snippet_sources import stand_for
from gpu_engine.sql.errors import SqlError, position_of
from gpu_engine.sql.planning_context import TreeKey, quoted
from gpu_engine.sql.renaming import aliased

if TYPE_CHECKING:  # pragma: no cover
    from gpu_engine.sql.planner import QueryPlanner, Relation

__all__ = ["WindowCall", "check_window_positions", "extract_windows", "plan_windows", "is_window_function"]

#: Clauses of a SELECT where a window may not appear, as SQL spells them.
_NO_WINDOW_CLAUSES = {"where": "WHERE", "group": "GROUP BY", "having": "HAVING", "joins": "JOIN ... ON"}


@dataclass
class WindowCall:
    """One window of the SELECT: its tree and the internal name of the placeholder column that stands for it."""

    tree: exp.Window
    name: str


def _unsupported(what: str, tree: exp.Expression) -> SqlError:
    line, col = position_of(tree)
    return SqlError(f"unsupported SQL: {what}", line=line, col=col, name=tree.sql(dialect="duckdb")[:80])


def _own_nodes(tree: exp.Expression):
    """Yield the nodes of ``tree`` itself, not those of subqueries nested in it."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.Select) and node is not tree):
            continue
        yield node
        stack.extend(node.iter_expressions())


def check_window_positions(select: exp.Select) -> None:
    """Refuse a window function anywhere but the SELECT list and ORDER BY of ``select`` (subqueries aside)."""
    for key, words in _NO_WINDOW_CLAUSES.items():
        value = select.args.get(key)
        for tree in value if isinstance(value, list) else [value] if value is not None else []:
            window = next((node for node in _own_nodes(tree) if isinstance(node, exp.Window)), None)
            if window is not None:
                raise _unsupported(f"a window function in {words} (compute it in a derived table and filter that)",
                                   window)


def is_window_function(node: exp.Expression) -> bool:
    """Return True when ``node`` is the function a window computes (``rank`` in ``rank() OVER (…)``), not an aggregate.

    Why: sqlglot types ``rank``, ``lag``, ``first_value`` … as aggregate functions; a window in a subquery of the
    SELECT list is planned with that subquery, and its function must not be taken for an unknown aggregate here.
    """
    parent = node.parent
    while isinstance(parent, (exp.IgnoreNulls, exp.RespectNulls)):
        node, parent = parent, parent.parent
    return isinstance(parent, exp.Window) and parent.this is node


def _windows_of(tree: exp.Expression) -> list[exp.Window]:
    return [node for node in _own_nodes(tree) if isinstance(node, exp.Window)]


def _check_window(window: exp.Window, aggregates: tuple) -> None:
    """Refuse the forms of a window the planner does not plan: named, nested, inside an aggregate.

    (``FILTER (WHERE …)`` needs nothing here: the rewrite pass turns it into a CASE inside the aggregate.)
    """
    if window.alias:
        name = window.args["alias"].name
        raise _unsupported(f'window "{name}" does not exist: a WINDOW {name} AS (...) clause names windows for '
                           "the SELECT list and QUALIFY of its own SELECT (not its ORDER BY nor subqueries); "
                           "or write the window out", window)
    for inner in _own_nodes(window):
        if inner is not window and isinstance(inner, exp.Window):
            raise _unsupported("a window function inside another window function", inner)
    parent = window.parent
    while parent is not None and not isinstance(parent, (exp.Select, exp.Subquery)):
        if isinstance(parent, aggregates):
            raise _unsupported("a window function inside an aggregate", window)
        parent = parent.parent


def _function_of(window: exp.Window) -> tuple[exp.Expression, bool]:
    """Return the window's function call without the IGNORE / RESPECT NULLS around it, and whether it ignores NULLs."""
    function, ignore_nulls = window.this, False
    while isinstance(function, (exp.IgnoreNulls, exp.RespectNulls)):
        ignore_nulls = ignore_nulls or isinstance(function, exp.IgnoreNulls)
        function = function.this
    return function, ignore_nulls


def _inner_trees(window: exp.Window) -> list[exp.Expression]:
    """Return the expressions a window reads: its function's arguments, partition and order expressions."""
    function, _ = _function_of(window)
    trees = [value for key, value in function.args.items() if isinstance(value, exp.Expression)]
    trees += [e for key, value in function.args.items() if isinstance(value, list) for e in value
              if isinstance(e, exp.Expression)]
    trees += list(window.args.get("partition_by") or [])
    order = window.args.get("order")
    trees += [ordered.this for ordered in (order.expressions if order is not None else [])]
    return [tree for tree in trees if not isinstance(tree, exp.Star)]


def extract_windows(planner: "QueryPlanner", projections: list[exp.Expression], order_trees: list,
                    aggregates: tuple) -> tuple[list[exp.Expression], list, list[WindowCall], list[exp.Expression]]:
    """Return the projections and ORDER BY trees with each window replaced by a placeholder column.

    Also returns the windows (one per distinct call: the same tree, :class:`~gpu_engine.sql.planning_context.TreeKey`)
    and the trees they read, which the planner searches for
    aggregates as it does the SELECT list. Nothing is copied when there is no window.
    """
    windows: dict[TreeKey, WindowCall] = {}

    def swap(tree):
        if tree is None or not _windows_of(tree):
            return tree
        tree = tree.copy()
        for window in _windows_of(tree):
            _check_window(window, aggregates)
            identity = TreeKey(window)
            call = windows.get(identity)
            if call is None:
                call = windows[identity] = WindowCall(window.copy(), planner._fresh(f"$window{len(windows)}"))
            placeholder = stand_for(exp.column(exp.to_identifier(call.name, quoted=True)), window)  # (errors)
            if window is tree:
                return placeholder
            window.replace(placeholder)
        return tree

    new_projections = []
    for projection in projections:
        if isinstance(projection, exp.Window):
            projection = exp.alias_(projection, projection.alias_or_name, quoted=True)
        new_projections.append(swap(projection))
    new_order = [swap(tree) for tree in order_trees]
    calls = list(windows.values())
    return new_projections, new_order, calls, [t for call in calls for t in _inner_trees(call.tree)]


def plan_windows(planner: "QueryPlanner", relation: "Relation", calls: list[WindowCall],
                 columns: Mapping[tuple[str, str], str], replacements: Mapping[TreeKey, str],
                 ctes: Mapping[str, exp.Expression] | None = None, outer_aliases: set[str] | None = None
                 ) -> tuple["Relation", dict[tuple[str, str], str]]:
    """Return the relation with every window computed, and ``columns`` with each placeholder mapped to its result.

    A window input holding a scalar subquery the subquery-value rewrites left in place (an uncorrelated one:
    ``sum((SELECT max(x) FROM u)) OVER (...)``, ``PARTITION BY (SELECT ...)``) is typed as a SELECT-list
    expression is (:func:`~gpu_engine.sql.aggregate_planning.typed_scalar_subqueries`: a
    :class:`~gpu_engine.plans.subqueries.ScalarSubquery` in the Project computing the inputs, joined in by the
    optimizer's decorrelation rule); such an input was refused as "a subquery in this position". ``ctes`` and
    ``outer_aliases`` (the SELECT's own FROM aliases) are what that typing reads.
    """
    from gpu_engine.sql.aggregate_planning import typed_scalar_subqueries
    from gpu_engine.sql.predicates import has_subquery

    node = relation.node
    available = set(node.output_schema.names)
    computed: dict[tuple[bool, TreeKey], str] = {}  # (typed?, the input's renamed tree) -> the column holding it
    pre: list = []  # the inputs to compute first, as renamed trees named by their column, or (column, typed)

    def column_of(tree: exp.Expression) -> str:
        if has_subquery(tree):
            text = (True, TreeKey(tree))  # typed: the tree as written, its subquery planned once
            if text not in computed:
                typed = typed_scalar_subqueries(planner, tree, relation, columns, replacements, ctes or {},
                                                set(outer_aliases or ()))
                computed[text] = planner._fresh(f"$window_input{len(computed)}")
                pre.append(aliased(typed, computed[text]) if isinstance(typed, exp.Expression)
                           else (computed[text], typed))
            return computed[text]
        renamed = planner._renamed(tree, columns, replacements)
        if isinstance(renamed, exp.Column) and not renamed.table and renamed.name in available:
            return renamed.name  # a column of the input itself
        text = (False, TreeKey(renamed))  # the key that finds an input computed already
        if text not in computed:
            computed[text] = planner._fresh(f"$window_input{len(computed)}")
            pre.append(aliased(renamed, computed[text]))
        return computed[text]

    groups: dict[tuple, list[tuple[WindowCall, str]]] = {}
    for call in calls:
        window = call.tree
        try:
            # A constant key (PARTITION BY NULL, ORDER BY 1) puts every row in one partition or peer group.
            partition = tuple(column_of(tree) for tree in window.args.get("partition_by") or [] if _reads_columns(tree))
            order = window.args.get("order")
            sort_keys = tuple(
                f"{quoted(column_of(ordered.this))} {'DESC' if ordered.args.get('desc') else 'ASC'} "
                f"NULLS {'FIRST' if ordered.args.get('nulls_first') else 'LAST'}"
                for ordered in (order.expressions if order is not None else []) if _reads_columns(ordered.this))
            snippet = _function_snippet(window, call.name, column_of)
        except PlanError as error:
            raise planner._plan_error(error, window) from None
        groups.setdefault((partition, sort_keys), []).append((call, snippet))
    try:
        builder = planner._builder(node)
        if pre:
            builder = builder.project([quoted(name) for name in node.output_schema.names] + pre)
        for (partition, sort_keys), members in groups.items():
            builder = builder.window([quoted(key) for key in partition], list(sort_keys),
                                     [snippet for _, snippet in members])
        node = builder.plan()
    except PlanError as error:
        raise planner._plan_error(error, calls[0].tree) from None
    columns = dict(columns)
    columns.update({("", call.name): call.name for call in calls})
    return replace(relation, node=node), columns


def _reads_columns(tree: exp.Expression) -> bool:
    """Return True unless ``tree`` is a constant (no column, aggregate, window or subquery in it)."""
    return any(isinstance(node, (exp.Column, exp.AggFunc, exp.Window, exp.Subquery)) for node in tree.walk())


def _function_snippet(window: exp.Window, name: str, column_of) -> exp.Alias:
    """Return the tree of ``f(args) [OVER (frame)] AS name`` for PlanBuilder: the value argument as a column, the
    rest constants (handed over parsed, as the other snippets: no text written out and parsed again)."""
    original, ignore_nulls = _function_of(window)
    paired = aggregate_function_name(original) in COVARIANCE_FUNCTIONS  # covar_*, corr, regr_*: two value columns
    if aggregate_function_name(original) in TWO_ARGUMENT_FUNCTIONS and not paired:  # else refused below
        raise _unsupported(f"window function {original.sql_name().lower()} (an aggregate of two columns runs in "
                           "GROUP BY only; over windows: count, sum, avg, min, max, the variances, covariances, "
                           "corr and regr_*)", window)
    function = original.copy()
    value_key = None if isinstance(function, exp.Ntile) else "this"
    for key, value in list(function.args.items()):
        if not isinstance(value, exp.Expression) or isinstance(value, exp.Star):
            continue
        if isinstance(value, exp.Distinct):
            raise _unsupported(f"{function.sql_name().lower()}(DISTINCT ...) over a window", window)
        if key == value_key or (paired and key == "expression"):
            function.set(key, stand_for(exp.column(exp.to_identifier(column_of(original.args[key]), quoted=True)),
                                        original.args[key]))
        elif any(isinstance(node, exp.Column) for node in value.walk()):
            raise _unsupported(f"a column in the {key} argument of {function.sql_name().lower()}(...) over a window "
                               "(it must be a constant)", window)
    if ignore_nulls:
        function = exp.IgnoreNulls(this=function)
    spec = window.args.get("spec")
    if spec is not None:
        function = exp.Window(this=function, spec=spec.copy())
    return aliased(function, name)
