"""Regroup long AND/OR chains of parsed SQL into balanced trees of logarithmic depth.

Why: sqlglot parses ``a AND b AND c …`` in a loop but builds it left-deep, so
a 2000-term WHERE clause is a tree 2000 levels deep; every later pass
(qualification, the planner, translation to plan expressions, fusion,
evaluation) recurses once per level and would refuse the query as nested too
deeply or overflow the stack, although it nests nothing. AND and OR are
associative (under NULLs too: Kleene logic), so a chain's terms are regrouped,
in their order, as a balanced tree: 2000 terms are 12 levels. Both the SQL
front end (:mod:`gpu_engine.sql.rewrite`) and PlanBuilder's snippets
(:mod:`gpu_engine.plans.sql_translator`) do this right after parsing.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["balance_connectives", "balanced", "chain_terms", "chain_roots"]


def balance_connectives(tree: exp.Expression) -> exp.Expression:
    """Return ``tree`` with every AND or OR chain regrouped as a balanced tree (in place; terms keep their order).

    A chain is a run of one connective, AND or OR, without parentheses between; its terms are walked
    without recursion, so the pass itself holds for chains of any length.
    """
    for root in chain_roots(tree):  # outer chains first: an inner chain's root is a term of the outer one, kept
        terms = chain_terms(root)
        if len(terms) <= 2:
            continue
        rebuilt = balanced(type(root), terms)
        if root is tree:
            tree = rebuilt
        else:
            root.replace(rebuilt)
    return tree


def chain_roots(tree: exp.Expression) -> list[exp.Connector]:
    """Return the AND/OR nodes of ``tree`` that start a chain (their parent is no connective of their kind), outer first."""
    return [node for node in tree.walk(bfs=True)
            if isinstance(node, exp.Connector) and not isinstance(node.parent, type(node))]


def chain_terms(root: exp.Connector) -> list[exp.Expression]:
    """Return the terms of the chain at ``root``, left to right."""
    kind, terms, stack = type(root), [], [root]
    while stack:
        node = stack.pop()
        if type(node) is kind:
            stack.append(node.expression)
            stack.append(node.this)
        else:
            terms.append(node)
    return terms


def balanced(kind: type[exp.Connector], terms: list[exp.Expression]) -> exp.Expression:
    """Return ``terms`` joined by connective ``kind`` as a balanced tree (depth ceil(log2(len(terms))) + 1)."""
    level = list(terms)
    while len(level) > 1:
        paired = [kind(this=level[i], expression=level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]
