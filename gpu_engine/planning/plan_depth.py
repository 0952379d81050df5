"""Name a plan nested too deeply for the planning passes, instead of leaking Python's ``RecursionError``.

Why: every pass over a plan (the optimizer's rules, local exchanges, fusion,
placement) walks it recursively, a few interpreter frames per node, so a plan
some hundreds of nodes deep — built by hand with
:class:`~gpu_engine.plans.plan_builder.PlanBuilder` in a loop, or read from
JSON — exhausts the interpreter's stack part-way through a pass. The SQL
planner bounds what a query can nest (:mod:`gpu_engine.sql.nesting`); a plan
handed in directly has no such bound, and a bare ``RecursionError`` says
neither what nested nor what to do. The callers catch it around their passes
and raise :func:`too_deep_plan`'s :class:`~gpu_engine.errors.PlanError`,
which measures the plan without recursing.
"""

from __future__ import annotations

from collections import Counter

from gpu_engine.errors import PlanError
from gpu_engine.plans.nodes import PlanNode

__all__ = ["deepest_path", "too_deep_plan"]


def deepest_path(plan: PlanNode) -> list[PlanNode]:
    """Return the nodes from ``plan`` down to its deepest leaf, walking with an explicit stack (no recursion)."""
    parent: dict[int, PlanNode | None] = {id(plan): None}
    depth = {id(plan): 1}
    deepest, stack = plan, [plan]
    while stack:
        node = stack.pop()
        for source in node.sources:
            if id(source) in depth:  # a subtree shared by two parents: measured once
                continue
            parent[id(source)] = node
            depth[id(source)] = depth[id(node)] + 1
            if depth[id(source)] > depth[id(deepest)]:
                deepest = source
            stack.append(source)
    path: list[PlanNode] = []
    node: PlanNode | None = deepest
    while node is not None:
        path.append(node)
        node = parent[id(node)]
    return path[::-1]


def too_deep_plan(plan: PlanNode) -> PlanError:
    """Return the error for ``plan`` nested deeper than the planning passes can walk, naming what nests."""
    path = deepest_path(plan)
    kinds = Counter(type(node).__name__.removesuffix("Node") for node in path)
    nesting = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common(3))
    return PlanError(f"the plan is {len(path)} nodes deep ({nesting} on its deepest path), deeper than the planning "
                     "passes can walk; combine consecutive filters and projections into one node each, or run an "
                     "inner part of the plan first and register its result as a table",
                     node=f"{type(path[-1]).__name__.removesuffix('Node')}[{getattr(path[-1], 'id', '?')}]")
