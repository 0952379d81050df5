"""Make a UNION ALL of UNION ALLs one union of all their branches: one LocalPartition with a source per branch.

Why: SQL writes a chain of set operations as nested binary ones (``a UNION ALL b UNION ALL c`` is ``(a UNION ALL
b) UNION ALL c``), and :mod:`gpu_engine.sql.set_operations` plans each as a LocalPartition (``arbitrary``) of its
two branches, the inner one under the Project that aligns it to the outer one's columns. Run so, every row of
``a`` and ``b`` crosses two local exchanges and one more pipeline (the inner exchange's reader, which only
projects), and under ``SparkRunner`` each inner union is a stage of its own whose output is shuffled again; a
union of N inputs (Velox's LocalPartition with N sources, Presto's ExchangeNode with a source per branch) moves
each row once. A distinct ``UNION`` chain reaches this form too once
:mod:`~gpu_engine.optimizer.distinct_branches` has dropped the inner UNION's grouping (the outer one removes the
same duplicates).

The rule: a :class:`~gpu_engine.plans.nodes.LocalPartitionNode` (``arbitrary``, without keys) whose source is
another one, directly or under one Project, takes that one's sources in its place, in order, each under a copy
of the Project (the Project reads the inner union's columns, which each of its sources yields by name and type).
An inner union whose sources yield other names or types than it, a source of the outer one without a Project
whose columns differ from the outer one's, and a keyed or gathering LocalPartition are left as they are. Rows
are the same multiset (each row passes one copy of the Project, as it passed the Project once before); the
round-robin ``arbitrary`` exchange promises no order.
"""

from __future__ import annotations

from dataclasses import replace

from gpu_engine.plans.nodes import LocalPartitionNode, PlanNode, ProjectNode, walk_plan

__all__ = ["flatten_unions"]


def flatten_unions(plan: PlanNode) -> PlanNode:
    """Return ``plan`` with each UNION ALL of UNION ALLs one LocalPartition of all branches (the same object where
    there is none)."""
    if not any(_is_union(node) and any(_inner_union(source) is not None for source in node.sources)
               for node in walk_plan(plan)):
        return plan
    used = {node.id for node in walk_plan(plan)}
    return _flattened(plan, used)


def _is_union(node: PlanNode) -> bool:
    return isinstance(node, LocalPartitionNode) and node.partition_kind == "arbitrary" and not node.keys


def _same_columns(a, b) -> bool:
    return list(a.names) == list(b.names) and all(x.type == y.type for x, y in zip(a, b))


def _inner_union(source: PlanNode) -> tuple[ProjectNode | None, LocalPartitionNode] | None:
    """Return (the Project above, the union) where ``source`` is a union whose branches can be spliced above."""
    project = None
    if isinstance(source, ProjectNode):
        project, source = source, source.sources[0]
    if not _is_union(source) or not all(_same_columns(branch.output_schema, source.output_schema)
                                        for branch in source.sources):
        return None
    return project, source


def _new_id(base: str, used: set[str]) -> str:
    n = 1
    while f"{base}.{n}" in used:
        n += 1
    used.add(f"{base}.{n}")
    return f"{base}.{n}"


def _flattened(node: PlanNode, used: set[str]) -> PlanNode:
    sources = tuple(_flattened(source, used) for source in node.sources)
    if any(new is not old for new, old in zip(sources, node.sources)):
        node = replace(node, sources=sources)
    if not _is_union(node):
        return node
    branches: list[PlanNode] = []
    changed = False
    for source in node.sources:
        inner = _inner_union(source)
        if inner is None or (inner[0] is None and not _same_columns(inner[1].output_schema, node.output_schema)):
            branches.append(source)
            continue
        project, union = inner
        changed = True
        for position, branch in enumerate(union.sources):
            branches.append(branch if project is None else replace(
                project, id=project.id if position == 0 else _new_id(project.id, used), sources=(branch,)))
    return replace(node, sources=tuple(branches)) if changed else node
