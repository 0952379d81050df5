"""Name a parsed snippet in errors as its user wrote it, and place the error at the user's text.

Why: the SQL planner hands PlanBuilder the query's own parsed expressions, renamed to the plan's internal
columns (:mod:`gpu_engine.sql.renaming`): ``t.b`` becomes ``"b"`` or ``"u.b#2"``, an aggregate the planner
computed first becomes ``"$sum0"``, a window ``"$window0"``, and every projection is named ``AS "$..."``.
A type error inside such an expression named that rewritten text (``at '"$window0" + 'x''``) and was
placed at the start of the whole clause. Each node the planner substitutes records the node of the query
it stands for (:func:`stand_for`; its position in the text is that node's), and every
PlanError raised while translating a parsed snippet carries the offending sub-tree
(:attr:`~gpu_engine.errors.PlanError.tree`): :func:`written_sql` writes it out over the query's own nodes,
and the SQL planner places the error at its position. A snippet PlanBuilder parsed from text has no
recorded sources (and its positions are the snippet's): it is written out as before.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["stand_for", "written_sql", "source_of", "earliest_position", "line_and_column"]

#: The meta key under which a substituted node records the query's node it stands for.
_SOURCE = "written_as"


class _Source:
    """Hold the query's node a substitute stands for; copies of the substitute share it (never deep-copied)."""

    __slots__ = ("node",)

    def __init__(self, node: exp.Expression):
        self.node = node

    def __deepcopy__(self, memo) -> "_Source":
        return self


def stand_for(replacement: exp.Expression, original: exp.Expression) -> exp.Expression:
    """Return ``replacement`` recording that it stands for ``original`` (a query node), whose position in the text
    it then has (:func:`earliest_position` looks it up when an error needs it: the planner substitutes thousands
    of columns and few ever fail)."""
    replacement.meta[_SOURCE] = _Source(original)
    return replacement


def earliest_position(tree: exp.Expression) -> dict | None:
    """Return the position sqlglot recorded (``line``, ``col``, ``start``, ``end``) of the earliest token of
    ``tree`` in the text, a substitute's being its source's, or None when it recorded none (the earliest, not
    the first found: a CASE's ELSE value is a child before its WHEN branches' operands)."""
    best = None
    for node in tree.walk():
        meta = node._meta
        if not meta:
            continue
        if _SOURCE in meta:
            meta = earliest_position(meta[_SOURCE].node)
        if meta and "line" in meta and (best is None or meta.get("start", 0) < best.get("start", 0)):
            best = meta
    if best is None:
        return None
    return {"line": best["line"], "col": best["col"], "start": best.get("start", 0), "end": best.get("end", 0)}


def line_and_column(tree: exp.Expression) -> tuple[int, int] | None:
    """Return the 1-based (line, column) of the earliest token of ``tree`` in the text, or None."""
    position = earliest_position(tree)
    if position is None:
        return None
    return position["line"], max(1, position["col"] - (position["end"] - position["start"]))


def source_of(node: exp.Expression) -> exp.Expression | None:
    """Return the query's node ``node`` stands for (through substitutes of substitutes), or None when it is no
    planner substitute."""
    found = None
    while node._meta and _SOURCE in node._meta:
        found = node = node._meta[_SOURCE].node
    return found


def _placed(name: exp.Expression | None) -> bool:
    return name is not None and bool(name._meta) and "line" in name._meta


def written_sql(tree: exp.Expression) -> str:
    """Return ``tree`` as DuckDB SQL as its user wrote it: each planner substitute written as the query's node it
    stands for, without the table qualifiers the qualifier added (their names have no position in the text)
    or an alias the planner gave (``AS "$sum0"``; an alias the user wrote has a position)."""
    if not any(source_of(node) is not None for node in tree.walk()):
        return tree.sql(dialect="duckdb")  # text PlanBuilder parsed, or a tree without substitutes
    tree = tree.copy()
    for node in list(tree.walk()):
        source = source_of(node)
        if source is not None:
            replacement = source.copy()  # the query's tree stays as it is
            if node is tree:
                tree = replacement
            else:
                node.replace(replacement)
    if isinstance(tree, exp.Alias) and not _placed(tree.args.get("alias")):
        tree = tree.this
    for column in list(tree.find_all(exp.Column)):
        if column.args.get("table") is not None and not _placed(column.args["table"]):
            column.set("table", None)
    return tree.sql(dialect="duckdb")
