"""Keep equivalence classes of inner-join equalities, so that any two relations holding a class's columns may join.

Why a module of its own: from ``c_nationkey = s_nationkey AND s_nationkey = n_nationkey`` (TPC-H Q5) the
written edges never join customer to nation, so customers could not be cut to one region's nations before
meeting the orders (the SQL plan ran at 1.62x its hand plan's time). As DuckDB and other optimizers do, the
equalities of columns of distinct relations form classes (union-find); joining two relations then uses one
equality per class they share, written or derived, and no other of the class: once a class's columns sit in
one relation they are all equal, so a second equality would only filter again what the first kept.

Only equalities of columns of the same type form classes, only three or more columns make one (two columns
are their one written edge, left as written), and a class is dropped (its equalities left as written) when
one relation holds two of its columns, which nothing yet makes equal. The conjuncts handed here are inner
joins' conditions or WHERE conjuncts over relations already outer-joined, never an outer join's ON: every
one of them must hold in each result row, and SQL's equality is transitive over the rows where all do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlglot import exp

from gpu_engine.sql.statistics import ColumnStatistics

__all__ = ["EquivalenceClass", "class_conditions", "class_members_kept", "distinct_count", "equivalence_classes"]


class _Joined(Protocol):
    """What the class rules read of a relation or of an estimate: its aliases, columns and statistics."""

    aliases: frozenset[str]
    columns: dict[tuple[str, str], str]
    stats: dict[str, ColumnStatistics]


@dataclass(frozen=True)
class EquivalenceClass:
    """Columns ``(alias, column)`` that the query's equalities make equal, and the equalities written."""

    members: tuple[tuple[str, str], ...]
    conjuncts: tuple[exp.Expression, ...]


def _column_key(column: exp.Expression) -> tuple[str, str] | None:
    return (column.table, column.name) if isinstance(column, exp.Column) and column.table else None


def equivalence_classes(relations: list, pending: list[exp.Expression]) -> list[EquivalenceClass]:
    """Take the equalities that chain three or more columns of distinct ``relations`` out of ``pending``.

    Returns the classes they form; their conjuncts leave ``pending`` (:func:`class_conditions` joins on them).
    """
    owner: dict[tuple[str, str], int] = {}
    edges = []
    for conjunct in pending:
        if not isinstance(conjunct, exp.EQ):
            continue
        x, y = _column_key(conjunct.this), _column_key(conjunct.expression)
        if x is None or y is None:
            continue
        holders = []
        for key in (x, y):
            holder = next((i for i, r in enumerate(relations) if key[0] in r.aliases and key in r.columns), None)
            holders.append(holder)
        i, j = holders
        if i is None or j is None or i == j:
            continue
        type_x = relations[i].node.output_schema.field(relations[i].columns[x]).type
        type_y = relations[j].node.output_schema.field(relations[j].columns[y]).type
        if type_x != type_y:
            continue
        owner[x], owner[y] = i, j
        edges.append((conjunct, x, y))
    parent = {member: member for member in owner}

    def root(member):
        while parent[member] != member:
            parent[member] = parent[parent[member]]
            member = parent[member]
        return member

    for _, x, y in edges:
        rx, ry = root(x), root(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
    groups: dict[tuple[str, str], list] = {}
    for conjunct, x, _ in edges:
        groups.setdefault(root(x), []).append(conjunct)
    classes = []
    for key, conjuncts in sorted(groups.items()):
        members = sorted(m for m in owner if root(m) == key)
        if len(members) < 3 or len({owner[m] for m in members}) < len(members):
            continue
        classes.append(EquivalenceClass(tuple(members), tuple(conjuncts)))
        taken = {id(c) for c in conjuncts}
        pending[:] = [c for c in pending if id(c) not in taken]
    return classes


def _present(cls: EquivalenceClass, side: _Joined) -> list[tuple[str, str]]:
    return [m for m in cls.members if m[0] in side.aliases and m in side.columns]


def _fewest_distinct(members: list[tuple[str, str]], side: _Joined) -> tuple[str, str]:
    """Return the member with the fewest distinct values (the best estimate of the class's on that side)."""
    return min(members, key=lambda m: (distinct_count(side, m), m))


def class_conditions(classes: list[EquivalenceClass], a: _Joined, b: _Joined) -> list[exp.Expression]:
    """Return one equality per class that both ``a`` and ``b`` hold a column of: the one written where it
    links their columns, else one derived between their columns with the fewest distinct values."""
    conditions = []
    for cls in classes:
        in_a, in_b = _present(cls, a), _present(cls, b)
        if not in_a or not in_b:
            continue
        written = next((c for c in cls.conjuncts
                        if {_column_key(c.this), _column_key(c.expression)} & set(in_a)
                        and {_column_key(c.this), _column_key(c.expression)} & set(in_b)), None)
        if written is None:
            x, y = _fewest_distinct(in_a, a), _fewest_distinct(in_b, b)
            written = exp.EQ(this=exp.column(x[1], table=x[0]), expression=exp.column(y[1], table=y[0]))
        conditions.append(written)
    return conditions


def class_members_kept(classes: list[EquivalenceClass], a: _Joined, b: _Joined) -> set[tuple[str, str]]:
    """Return the columns a join of ``a`` and ``b`` keeps for later joins: per class with columns outside both,
    its column inside them with the fewest distinct values."""
    union = a.aliases | b.aliases
    kept = set()
    for cls in classes:
        if all(m[0] in union for m in cls.members):
            continue
        candidates = [(m, side) for side in (a, b) for m in _present(cls, side)]
        if candidates:
            kept.add(min(candidates, key=lambda c: (distinct_count(c[1], c[0]), c[0]))[0])
    return kept


def distinct_count(side: _Joined, member: tuple[str, str]) -> float:
    """Return the estimated distinct values of ``side``'s column ``member`` (unknown: infinity, chosen last)."""
    stats = side.stats.get(side.columns[member])
    return stats.ndv if stats is not None and stats.ndv else float("inf")
