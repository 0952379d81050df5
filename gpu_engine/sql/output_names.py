"""Resolve the SELECT list's output names inside ORDER BY expressions, as DuckDB does.

Why: ``ORDER BY x`` naming an output column sorts on it, and so does a name used inside an expression:
``SELECT b AS x … ORDER BY CASE WHEN x > 2 THEN x END`` reads the output ``x``, and ``SELECT a + 10 AS a …
ORDER BY a * -1`` the output ``a``, not the input column (DuckDB binds ORDER BY names to the SELECT list
first). The qualifier leaves such a name unqualified, so the planner found no input column by it (TPC-DS q36,
q70 and q86 order by ``CASE WHEN lochierarchy = 0 THEN …``). Each such name is replaced by its output's
expression, which the planner then computes like any other ORDER BY expression.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["with_output_names_resolved"]


def with_output_names_resolved(tree: exp.Expression | None, projections: list[exp.Expression]
                               ) -> exp.Expression | None:
    """Return ``tree`` (an ORDER BY key) with each unqualified column named as an output replaced by its expression.

    Names inside subqueries are left alone (they have their own scope); ``tree`` is copied only when a name
    is replaced.
    """
    if tree is None:
        return None
    outputs = {p.alias_or_name: (p.this if isinstance(p, exp.Alias) else p) for p in projections}
    named = [column for column in _own_columns(tree) if not column.table and column.name in outputs
             and not _is_itself(column, outputs[column.name])]
    if not named:
        return tree
    if any(column is tree for column in named):
        return outputs[tree.name].copy()
    paths = {id(column) for column in named}
    copy = tree.copy()
    for original, duplicate in zip(_own_columns(tree), _own_columns(copy)):
        if id(original) in paths:
            duplicate.replace(_grouped(outputs[original.name]))
    return copy


def _grouped(expression: exp.Expression) -> exp.Expression:
    """Return a copy of ``expression`` that keeps its grouping where it replaces a name (``a * -1``, a = b + 10)."""
    if isinstance(expression, (exp.Column, exp.Literal, exp.Func, exp.Window, exp.Paren)):
        return expression.copy()
    return exp.Paren(this=expression.copy())


def _is_itself(column: exp.Column, expression: exp.Expression) -> bool:
    """Return True when the output is this very unqualified name (nothing to replace)."""
    return isinstance(expression, exp.Column) and not expression.table and expression.name == column.name


def _own_columns(tree: exp.Expression) -> list[exp.Column]:
    """Return the columns of ``tree`` in a fixed order, not those of subqueries nested in it."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.Select) and node is not tree):
            continue
        if isinstance(node, exp.Column):
            out.append(node)
            continue
        stack.extend(reversed(list(node.iter_expressions())))
    return out
