"""Inline named windows: ``f(x) OVER w … WINDOW w AS (PARTITION BY … ORDER BY …)`` becomes ``f(x) OVER (…)``.

A named window is shorthand, so it is written out in the parsed tree before qualification and planning, and
the rest of the planner sees only windows spelled in full (DuckDB names the output column after the spelled
window too: ``sum(y) OVER (PARTITION BY k ORDER BY x)``). DuckDB's (and the SQL standard's) rules:

* ``OVER w`` copies w whole, its frame included (``OVER (w)``, parenthesized, is a refinement); ``OVER (w ROWS …)`` / ``OVER (w ORDER BY …)`` refines it,
  and so does ``WINDOW w2 AS (w ORDER BY …)``: the refinement may add an ORDER BY where w has none and a
  frame, never a PARTITION BY, never a second ORDER BY, and never refine a w that has a frame of its own;
* a definition may name only windows defined before it; names are case-insensitive and defined once;
* the names serve the SELECT list and QUALIFY of their own SELECT, not its ORDER BY nor its subqueries.

Breaking one of these raises DuckDB's error as a :class:`~gpu_engine.sql.errors.SqlError` with its position;
a reference that no WINDOW clause resolves is refused later by the window planner, by name.
"""

from __future__ import annotations

from typing import Iterable

from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of

__all__ = ["with_named_windows_inlined"]


def _error(message: str, tree: exp.Expression) -> SqlError:
    line, col = position_of(tree)
    return SqlError(message, line=line, col=col, name=tree.sql(dialect="duckdb")[:80])


def _refined(base: exp.Window, name: str, window: exp.Window,
             parenthesized: bool) -> tuple[list, exp.Order | None, exp.Expression | None]:
    """Return the partition, order and frame of ``window`` written over the definition ``base`` it names.

    ``parenthesized``: written ``OVER (w)`` (or ``WINDOW w2 AS (w)``), which DuckDB reads as a refinement
    that adds nothing, refused over a framed ``w`` like any refinement; ``OVER w`` is the copy.
    """
    partition = window.args.get("partition_by") or []
    order = window.args.get("order")
    spec = window.args.get("spec")
    base_partition = base.args.get("partition_by") or []
    base_order = base.args.get("order")
    base_spec = base.args.get("spec")
    if not partition and order is None and spec is None and not parenthesized:  # OVER w: a copy, frame included
        return [e.copy() for e in base_partition], base_order.copy() if base_order else None, \
            base_spec.copy() if base_spec else None
    if base_spec is not None:
        raise _error(f'cannot copy window "{name}" because it has a frame clause (refine a window without a '
                     f"frame, or write OVER {name} alone)", window)
    if partition:
        raise _error(f'cannot override PARTITION BY clause of window "{name}"', window)
    if order is not None and base_order is not None:
        raise _error(f'cannot override ORDER BY clause of window "{name}"', window)
    return ([e.copy() for e in base_partition], order if order is not None else
            (base_order.copy() if base_order else None), spec)


def _written_out(window: exp.Window, definitions: dict[str, exp.Window], what: str, parenthesized: bool) -> None:
    """Replace the window name ``window`` refers to by that window's clauses, in place."""
    reference = window.args.get("alias")
    name = reference.name
    base = definitions.get(name.lower())
    if base is None:
        raise _error(f'window "{name}" does not exist ({what}: define it in this SELECT\'s WINDOW clause; '
                     "a WINDOW clause serves its own SELECT list and QUALIFY, not ORDER BY or subqueries)", reference)
    partition, order, spec = _refined(base, name, window, parenthesized)
    window.set("alias", None)
    window.set("partition_by", partition or None)
    window.set("order", order)
    window.set("spec", spec)


def _own_windows(tree: exp.Expression) -> Iterable[exp.Window]:
    """Yield the windows of ``tree`` that are not inside a nested query."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Subquery, exp.Exists, exp.Query)) and node is not tree:
            continue
        if isinstance(node, exp.Window):
            yield node
        stack.extend(node.iter_expressions())


def _parenthesized(reference: exp.Identifier, text: str | None) -> bool:
    """Return whether the window name ``reference`` is written inside parentheses in ``text`` (``OVER (w)``).

    sqlglot parses ``OVER w`` and ``OVER (w)`` alike; the character before the name tells them apart.
    """
    start = reference.meta.get("start")
    if text is None or start is None or start > len(text):
        return False
    before = text[:start].rstrip()
    return before.endswith("(")


def _inline(select: exp.Select, text: str | None) -> None:
    definitions: dict[str, exp.Window] = {}
    for definition in select.args["windows"]:
        name = definition.this.name
        if name.lower() in definitions:
            raise _error(f'window "{name}" is already defined', definition.this)
        if definition.args.get("alias") is not None:
            _written_out(definition, definitions, f"the base of window {name}", text is not None)
        definitions[name.lower()] = definition
    for clause in ("expressions", "qualify"):
        value = select.args.get(clause)
        for tree in value if isinstance(value, list) else [value] if value is not None else []:
            for window in list(_own_windows(tree)):
                if window.args.get("alias") is not None:
                    _written_out(window, definitions, f"OVER {window.args['alias'].name}",
                                 _parenthesized(window.args["alias"], text))
    select.set("windows", None)


def with_named_windows_inlined(nodes: Iterable[exp.Expression], text: str | None = None) -> None:
    """Write out, in place, every named window of the SELECTs among ``nodes`` that have a WINDOW clause.

    ``nodes``: the walk :func:`~gpu_engine.sql.refusals.refuse_unsupported` returns (its SELECTs), so no other
    walk of the whole tree is made; only SELECTs with a WINDOW clause are read further. ``text``: the SQL
    text (DuckDB's dialect), to refuse ``OVER (w)`` over a framed ``w`` as DuckDB does; None (Spark, which
    copies ``w`` for ``OVER (w)``) reads every unrefined reference as a copy.
    """
    for node in nodes:
        if isinstance(node, exp.Select) and node.args.get("windows"):
            _inline(node, text)
