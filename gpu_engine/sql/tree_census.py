"""One walk of a parsed query noting the rare constructs it holds, so that the passes for them skip their walks.

Why (issue 29: planning a new text is most of a first run): several rewrite passes exist for constructs most
queries never write (``USING SAMPLE``, ``range(...)`` in FROM, ``SEMI JOIN``, ``COLUMNS(...)``, ``* EXCLUDE``,
``GROUP BY ALL``, set operations, ``string_agg``, ``current_date``, ``random()``), and each walked the whole
tree to find nothing: sqlglot's walk costs ~1 us a node, and a TPC-DS text has ~230 nodes per such walk. One
walk here notes what the tree holds, and :func:`gpu_engine.sql.rewrite.parse_and_qualify` runs a pass only
where its construct was noted.

What it relies on: a construct noted absent is not made by a pass that runs before the one skipped (the
rewrite module names, at each skip, which passes run in between; a pass that could make one, such as the
``unnest`` rewrite, drops the census so that nothing is skipped after it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

__all__ = ["TreeCensus", "tree_census"]

_NODE = getattr(exp, "Expr", exp.Expression)  # sqlglot >= 30: the base class of every node (Expression's too)


@dataclass(frozen=True)
class TreeCensus:
    """What a parsed query holds: its node classes and the few constructs that are a property of a node."""

    kinds: frozenset
    semi_anti_joins: bool  # a JOIN of kind SEMI or ANTI
    star_modifiers: bool  # * EXCLUDE (...) / * REPLACE (...)
    all_keys: bool  # GROUP BY ALL, or a Var named ALL (ORDER BY ALL)

    def holds(self, *kinds: type) -> bool:
        """Return whether the tree holds a node of any of ``kinds`` (a subclass counts, as in ``find_all``)."""
        return any(issubclass(kind, kinds) for kind in self.kinds)


def tree_census(tree: exp.Expression) -> TreeCensus:
    """Return what ``tree`` holds, in one walk of every node (without recursion)."""
    kinds: set[type] = set()
    semi_anti = star_modifiers = all_keys = False
    stack = [tree]
    while stack:
        node = stack.pop()
        kinds.add(type(node))
        args = node.args
        if isinstance(node, exp.Join):
            semi_anti = semi_anti or (args.get("kind") or "").upper() in ("SEMI", "ANTI")
        elif isinstance(node, exp.Star):
            star_modifiers = star_modifiers or bool(args.get("except_") or args.get("replace"))
        elif isinstance(node, exp.Group):
            all_keys = all_keys or bool(args.get("all"))
        elif isinstance(node, exp.Var):
            all_keys = all_keys or node.name.upper() == "ALL"
        for value in args.values():  # the children sqlglot's walk visits (Expression.iter_expressions)
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, _NODE))
            elif isinstance(value, _NODE):
                stack.append(value)
    return TreeCensus(frozenset(kinds), semi_anti, star_modifiers, all_keys)
