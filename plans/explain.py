"""Print a plan tree as text, Velox-style, so plans can be read in logs and tested as golden text.

One line per node, parents first, indented two spaces per level::

    -- Limit[4][10] -> l_partkey:int64, cnt:int64
      -- OrderBy[3][cnt DESC NULLS LAST] -> l_partkey:int64, cnt:int64

The line is ``-- Kind[id][details] -> name:type, …`` where details come from
``node.describe()`` and types print as pyarrow prints them. When the
execution layer passes placements (:mod:`gpu_engine.planning.placement`), the
line ends with `` @ <device>``, plus the reason when part of the node runs on
the host: ``-- Project[2][...] -> s:string @ cuda (host fallback: ...)``.
Per-node stats text (from the execution layer) goes on the lines after its
node, indented three spaces past the node's ``--`` so it reads as belonging to it.
"""

from __future__ import annotations

from typing import Mapping

from gpu_engine.plans.nodes import PlanNode

__all__ = ["format_plan", "format_node"]


def format_node(node: PlanNode) -> str:
    """Return the one-line description of ``node`` (no indentation, no sources)."""
    columns = ", ".join(f"{field.name}:{field.type}" for field in node.output_schema)
    return f"-- {node.label}[{node.describe()}] -> {columns}"


def format_plan(root: PlanNode, node_stats: Mapping[str, str] | None = None,
                placements: Mapping[str, str] | None = None) -> str:
    """Return the plan under ``root`` as text, one node per line, without a trailing newline.

    Parameters
    ----------
    root
        The plan's root node.
    node_stats
        Optional text per plan node id (several lines allowed), printed under that node.
    placements
        Optional device text per plan node id, printed at the end of the node's line after ``@``.
    """
    lines: list[str] = []
    stack: list[tuple[PlanNode, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        indent = "  " * depth
        placement = (placements or {}).get(node.id)
        lines.append(indent + format_node(node) + (f" @ {placement}" if placement else ""))
        stats = (node_stats or {}).get(node.id)
        if stats:
            lines.extend(f"{indent}   {line}" for line in stats.splitlines())
        stack.extend((source, depth + 1) for source in reversed(node.sources))
    return "\n".join(lines)
