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

Long lines are shortened by default, because a TPC-H plan printed in full has
lines of 300 to 800 characters (every column with its type, every aggregate)
that no terminal shows whole. A node line longer than :data:`LINE_WIDTH`
characters (not counting its indentation) first shortens its column list to
:data:`SCHEMA_WIDTH` characters: the types go (``-> a, b, c``), then the last
names (``-> a, b, … (13 columns)``); if the line is still too long and its
details are longer than :data:`SCHEMA_WIDTH`, they move to wrapped lines under it (``[…]`` on the node line, the text in brackets
below). Lines that fit print exactly as in full. A stats line (explain
analyze) longer than :data:`LINE_WIDTH` characters, indentation included, is
wrapped between its comma-separated items, the continuation lines indented two
more spaces; nothing is dropped. ``full=True`` prints every line whole, every
column with its type.
"""

from __future__ import annotations

import textwrap
from typing import Mapping

from gpu_engine.plans.nodes import PlanNode

__all__ = ["format_plan", "format_node", "LINE_WIDTH", "SCHEMA_WIDTH"]

#: Node lines longer than this (in characters, without indentation) are shortened unless ``full``.
LINE_WIDTH = 120
#: The width a long line's column list is shortened to.
SCHEMA_WIDTH = 60


def format_node(node: PlanNode, table_labels: Mapping[str, str] | None = None) -> str:
    """Return the one-line description of ``node`` in full (no indentation, no sources)."""
    return f"-- {node.label}[{_details(node, table_labels)}] -> {_typed_columns(node)}"


def _details(node: PlanNode, table_labels: Mapping[str, str] | None) -> str:
    """``node.describe()``, a scan of a table in ``table_labels`` naming it by its label: the files a SQL text named
    for the Session's hidden table of them (:mod:`gpu_engine.sql.file_sources`), as DuckDB prints the file."""
    details = node.describe()
    label = (table_labels or {}).get(getattr(node, "table_name", None))
    return details if label is None else details.replace(f"table: {node.table_name}", f"table: {label}", 1)


def _typed_columns(node: PlanNode) -> str:
    return ", ".join(f"{field.name}:{field.type}" for field in node.output_schema)


def _short_columns(node: PlanNode) -> str:
    """Return the column list in at most about :data:`SCHEMA_WIDTH` characters."""
    typed = _typed_columns(node)
    if len(typed) <= SCHEMA_WIDTH:
        return typed
    names = [field.name for field in node.output_schema]
    untyped = ", ".join(names)
    if len(untyped) <= SCHEMA_WIDTH:
        return untyped
    count = f", … ({len(names)} columns)"
    shown = names[:1]
    for name in names[1:]:
        if len(", ".join(shown + [name])) + len(count) > SCHEMA_WIDTH:
            break
        shown.append(name)
    return ", ".join(shown) + count


def _node_lines(node: PlanNode, placement: str | None, full: bool,
                table_labels: Mapping[str, str] | None = None) -> list[str]:
    """Return the node's line (and, when shortened, its wrapped details), without indentation."""
    suffix = f" @ {placement}" if placement else ""
    line = format_node(node, table_labels) + suffix
    if full or len(line) <= LINE_WIDTH:
        return [line]
    details = _details(node, table_labels)
    line = f"-- {node.label}[{details}] -> {_short_columns(node)}{suffix}"
    if len(line) <= LINE_WIDTH or len(details) <= SCHEMA_WIDTH:  # short details read better on the line
        return [line]
    wrapped = textwrap.wrap(f"[{details}]", width=LINE_WIDTH - 3, break_long_words=False, break_on_hyphens=False)
    return [f"-- {node.label}[…] -> {_short_columns(node)}{suffix}"] + ["   " + text for text in wrapped]


def _wrapped_stats(line: str, indent: int) -> list[str]:
    """Return a stats line as lines of at most :data:`LINE_WIDTH` characters after ``indent``, split at ", "."""
    width = max(LINE_WIDTH - indent, SCHEMA_WIDTH)  # a deeply nested node still gets a readable width
    if len(line) <= width:
        return [line]
    items = line.split(", ")
    groups = [[items[0]]]
    for item in items[1:]:
        lead = 2 if len(groups) > 1 else 0  # continuation lines are indented two spaces
        if lead + len(", ".join(groups[-1] + [item])) + 1 <= width:  # + 1: the comma the line may end with
            groups[-1].append(item)
        else:
            groups.append([item])
    return [("  " if number else "") + ", ".join(group) + ("," if number < len(groups) - 1 else "")
            for number, group in enumerate(groups)]


def format_plan(root: PlanNode, node_stats: Mapping[str, str] | None = None,
                placements: Mapping[str, str] | None = None, full: bool = False,
                table_labels: Mapping[str, str] | None = None) -> str:
    """Return the plan under ``root`` as text, one node per line, without a trailing newline.

    Parameters
    ----------
    root
        The plan's root node.
    node_stats
        Optional text per plan node id (several lines allowed), printed under that node.
    placements
        Optional device text per plan node id, printed at the end of the node's line after ``@``.
    full
        Print every column with its type and every node's details on its line, however long;
        by default long column lists and details are shortened (see the module docstring).
    table_labels
        Optional text per table name, printed in a scan's line for the name (the paths of a file source).
    """
    lines: list[str] = []
    stack: list[tuple[PlanNode, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        indent = "  " * depth
        lines.extend(indent + line for line in _node_lines(node, (placements or {}).get(node.id), full,
                                                          table_labels))
        stats = (node_stats or {}).get(node.id)
        if stats:
            for line in stats.splitlines():
                lines.extend(f"{indent}   {part}" for part in ([line] if full else _wrapped_stats(line, len(indent) + 3)))
        stack.extend((source, depth + 1) for source in reversed(node.sources))
    return "\n".join(lines)
