"""Hand PlanBuilder the query's own parsed expressions, renamed to the plan's columns, instead of SQL text.

Why: the SQL planner used to write each expression out as a SQL snippet over
the plan's internal column names, and PlanBuilder parsed that text again
(:mod:`gpu_engine.plans.sql_translator`). A 2000-term WHERE clause was
tokenized and parsed twice, and its copy for renaming was sqlglot's deep copy
(every node's position dictionary copied through ``copy.deepcopy``): together
a third of planning it. PlanBuilder accepts a parsed tree wherever it accepts a
snippet, so the planner copies each expression once, in one pass that renames
its columns (:func:`renamed_copy`), and joins conjuncts and names projections
as trees (:func:`conjunction`, :func:`aliased`). Errors still name the
expression by its SQL text (written out only when an error happens) and the
planner still places them at the expression's position in the query.
"""

from __future__ import annotations

from typing import Callable, Sequence

from sqlglot import exp

from gpu_engine.plans.sql_connectives import balanced

__all__ = ["renamed_copy", "conjunction", "aliased"]


def renamed_copy(tree: exp.Expression, rename: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """Return a copy of ``tree`` with each node for which ``rename`` returns another node replaced by that node.

    ``rename`` sees the original nodes, parents before children (as sqlglot's ``transform``); a node it
    replaces is not descended into, one it returns as it is gets copied. The copy shares what no pass
    changes (each node's type annotation) and copies each node's position dictionary shallowly, without
    recursion, so an expression of any depth and length costs one visit per node.
    """
    first = rename(tree)
    if first is not tree:
        return first
    root = tree.__class__()
    stack = [(tree, root)]
    while stack:
        node, copy = stack.pop()
        if node.comments:
            copy.comments = list(node.comments)
        if node._type is not None:
            copy._type = node._type
        if node._meta:
            copy._meta = dict(node._meta)
        for key, value in node.args.items():
            if isinstance(value, exp.Expression):
                copy.set(key, _copied(value, rename, stack))
            elif type(value) is list:
                copy.args[key] = []
                for item in value:
                    copy.append(key, _copied(item, rename, stack) if isinstance(item, exp.Expression) else item)
            else:
                copy.args[key] = value
    return root


def _copied(node: exp.Expression, rename, stack: list) -> exp.Expression:
    """Return ``rename``'s replacement of ``node``, or an empty node of its class queued on ``stack`` to be filled."""
    replacement = rename(node)
    if replacement is not node:
        return replacement
    copy = node.__class__()
    stack.append((node, copy))
    return copy


def conjunction(trees: Sequence[exp.Expression]) -> exp.Expression:
    """Return the AND of ``trees`` (each a renamed copy), balanced: as deep as the logarithm of their number."""
    return balanced(exp.And, list(trees))


def aliased(tree: exp.Expression, name: str) -> exp.Alias:
    """Return ``tree AS "name"`` (the name quoted, kept as it is spelled): a projection or aggregate for PlanBuilder."""
    return exp.Alias(this=tree, alias=exp.to_identifier(name, quoted=True))
