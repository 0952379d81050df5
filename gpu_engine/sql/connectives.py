"""Simplify a parsed query in time linear in the length of its AND/OR chains.

Why: sqlglot's ``simplify`` compares every pair of a chain's terms, so a
2000-term WHERE clause costs 2 million comparisons (minutes). Chains longer
than :data:`SIMPLIFIED_WHOLE` terms are simplified term by term instead.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.simplify import simplify

from gpu_engine.plans.sql_connectives import balanced, chain_terms

__all__ = ["simplify_bounded", "SIMPLIFIED_WHOLE"]


#: Chains with more terms than this are simplified term by term: sqlglot's simplification compares every
#: pair of a chain's terms (2000 terms: 2 million comparisons, minutes), a chain this long is simplified whole.
SIMPLIFIED_WHOLE = 64


def simplify_bounded(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Return sqlglot's ``simplify`` of ``tree``, chains over :data:`SIMPLIFIED_WHOLE` terms simplified per term.

    Each long chain is set aside behind a placeholder of its own while the rest of the query is
    simplified, its terms are simplified one by one, and it comes back rebuilt as a balanced chain;
    so simplifying costs time linear in a chain's length. What is lost is only what needs two terms
    of one long chain at once (absorbing ``a AND a``), which the planner does not need.
    """
    set_aside: dict[str, exp.Expression] = {}
    for root in _long_chains(tree):
        name = f"gpu_engine_chain_{len(set_aside)}"
        terms = [simplify_bounded(term, dialect) for term in chain_terms(root)]  # a term may hold long chains too
        set_aside[name] = balanced(type(root), terms)
        placeholder = exp.Placeholder(this=name)
        if root is tree:
            tree = placeholder
        else:
            root.replace(placeholder)
    tree = simplify(tree, dialect=dialect)
    if not set_aside:
        return tree
    for node in [n for n in tree.walk(bfs=True) if isinstance(n, exp.Placeholder) and n.this in set_aside]:
        chain = set_aside[node.this]
        if node is tree:
            return chain
        node.replace(chain)
    return tree


def _long_chains(tree: exp.Expression) -> list[exp.Connector]:
    """Return the roots of the chains in ``tree`` over :data:`SIMPLIFIED_WHOLE` terms that no such chain holds."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Connector) and not isinstance(node.parent, type(node)):
            terms = chain_terms(node)
            if len(terms) > SIMPLIFIED_WHOLE:
                found.append(node)
                continue
        stack.extend(node.iter_expressions())
    return found
