"""Simplify a parsed query in time linear in the length of its AND/OR chains, without typing what it rewrites.

Why: sqlglot's ``simplify`` compares every pair of a chain's terms, so a
2000-term WHERE clause costs 2 million comparisons (minutes). Chains longer
than :data:`SIMPLIFIED_WHOLE` terms are simplified term by term instead.

sqlglot's simplifier also runs its type annotator over every subtree a rule
rewrote (each re-sorted AND/OR chain, each folded comparison), although the
engine reads no sqlglot type (it types expressions itself,
:mod:`gpu_engine.plans.type_coercion`); that was ~10% of planning a new text
(TPC-DS's 99 texts, which every first run plans). Only one rule needs a type:
``NOT NOT x`` drops its negations only where ``x`` is BOOLEAN, so a node that is
boolean by construction (a comparison, IS, IN, LIKE, EXISTS, AND/OR, NOT, a
boolean constant, a CASE with such a result) is typed so beforehand: the operand of
every NOT, which is what that rule meets under a second NOT, whether written so or
made by De Morgan's rewriting of ``NOT (x AND NOT y)``. It is typed before the
simplifier runs, in the walk that looks for long chains, rather than inside the
rule: sqlglot's compiled build (``sqlglotc``) allows no Python subclass of its
simplifier.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.simplify import simplify

try:  # sqlglot >= 28: the simplifier as a class, which can leave rewritten subtrees untyped
    from sqlglot.optimizer.simplify import Simplifier
except ImportError:  # pragma: no cover - older sqlglot: its simplify() as it is
    Simplifier = None

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
    tree = _simplified(tree, dialect)
    if not set_aside:
        return tree
    for node in [n for n in tree.walk(bfs=True) if isinstance(n, exp.Placeholder) and n.this in set_aside]:
        chain = set_aside[node.this]
        if node is tree:
            return chain
        node.replace(chain)
    return tree


def _long_chains(tree: exp.Expression) -> list[exp.Connector]:
    """Return the roots of the chains in ``tree`` over :data:`SIMPLIFIED_WHOLE` terms that no such chain holds;
    type BOOLEAN each NOT's operand that is boolean by construction (the module docstring says why)."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Not) and isinstance(node.this, exp.Expression) and _boolean_by_construction(node.this):
            operand = node.this
            while True:  # its parentheses too: the simplifier may drop them first
                if operand.type is None:
                    operand.type = exp.DataType.build("boolean")
                if not isinstance(operand, exp.Paren):
                    break
                operand = operand.this
        elif isinstance(node, exp.Connector) and not isinstance(node.parent, type(node)):
            terms = chain_terms(node)
            if len(terms) > SIMPLIFIED_WHOLE:
                found.append(node)
                continue
        stack.extend(node.iter_expressions())
    return found


#: Nodes whose value is a boolean whatever their operands' types (what ``NOT NOT x`` may drop its negations over).
_BOOLEAN_NODES = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean, exp.Exists)


def _boolean_by_construction(node: exp.Expression) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Case):
        results = [branch.args.get("true") for branch in node.args.get("ifs") or []] + [node.args.get("default")]
        return any(result is not None and _boolean_by_construction(result) for result in results)
    return isinstance(node, _BOOLEAN_NODES)


def _simplified(tree: exp.Expression, dialect: str) -> exp.Expression:
    if Simplifier is None:
        return simplify(tree, dialect=dialect)
    try:
        simplifier = Simplifier(dialect=dialect, annotate_new_expressions=False)
    except TypeError:  # pragma: no cover - a sqlglot whose Simplifier always annotates
        return simplify(tree, dialect=dialect)
    return simplifier.simplify(tree)
