"""Restrict a decorrelated aggregate's input by the outer table's key-only filters, read over the inner keys.

Why: a magic set (:func:`gpu_engine.sql.decorrelation.correlated_scalar_relation`'s restriction) is
``EXISTS (SELECT * FROM outer WHERE <outer's filters> AND outer.k = inner.k …)``: the outer table scanned again
and a semi join on every correlation key before the aggregation. In TPC-H Q20 that is partsupp's 800K rows
semi-joined to its 'forest' parts, then lineitem semi-joined on (partkey, suppkey) to those 8.6K pairs: 1.22x the
hand plan's CPU, which semi-joins lineitem to the 'forest' parts on ``l_partkey`` alone. Where every filter of
the outer table reads only correlation-key columns, the same filters over the inner key columns
(``ps_partkey IN (SELECT p_partkey …)`` read as ``l_partkey IN (SELECT p_partkey …)``) keep every inner row the
magic set keeps: a pair of equal keys of one type holds one value, so a filter gives the same answer over either
column. They may keep more (keys no qualifying outer row holds): those groups are dropped by the join back on
the keys, as the magic set is only ever a restriction to a superset of the keys asked for, so answers are equal.

Only keys of one Arrow type on both sides (a comparison across layouts could round), not floating point
(``-0.0 = 0.0`` are two values a filter can tell apart), with the inner key a column of a catalog table, and
filters whose subqueries read no outer column (their own correlation would move with them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from gpu_engine.sql.predicates import free_columns

if TYPE_CHECKING:
    from gpu_engine.sql.planner import QueryPlanner

__all__ = ["key_filters_over_inner_keys"]


def key_filters_over_inner_keys(planner: QueryPlanner, table: exp.Table, filters: list[exp.Expression],
                                pairs: list[tuple[exp.Column, exp.Column]],
                                select: exp.Select | None) -> list[exp.Expression] | None:
    """Return ``filters`` (the outer ``table``'s) with each outer key column read as its inner key column of
    ``pairs`` (outer, inner), or None where a filter reads another column or a pair does not qualify (the caller
    keeps the EXISTS magic set then).

    ``select``: the subquery whose WHERE the result joins (its FROM items give the inner keys' tables).
    """
    if select is None:
        return None
    outer_schema = _schema(planner, table)
    if outer_schema is None:
        return None
    inner_of: dict[str, exp.Column] = {}
    for outer, inner in pairs:
        outer_type = _field_type(outer_schema, outer.name)
        inner_schema = _schema(planner, _item(select, inner.table))
        if (outer_type is None or inner_schema is None or _field_type(inner_schema, inner.name) != outer_type
                or pa.types.is_floating(outer_type)):
            continue
        inner_of.setdefault(outer.name.lower(), inner)
    out = []
    for condition in filters:
        if any(free_columns(nested) for nested in condition.find_all(exp.Select)):
            return None
        moved = condition.copy()
        for column in free_columns(moved):
            inner = inner_of.get(column.name.lower())
            if inner is None:
                return None
            column.replace(inner.copy())
        out.append(moved)
    return out


def _item(select: exp.Select, alias: str) -> exp.Expression | None:
    """Return the FROM / JOIN item of ``select`` named ``alias``."""
    from_ = select.args.get("from_")
    items = ([from_.this] if from_ is not None else []) + [join.this for join in select.args.get("joins") or []]
    return next((item for item in items if item.alias_or_name == alias), None)


def _schema(planner: QueryPlanner, item: exp.Expression | None) -> pa.Schema | None:
    """Return the catalog schema of a FROM item that is a plain table (case-insensitively, as the planner's scan
    finds it), else None."""
    if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier) or item.args.get("db"):
        return None
    schema = planner.catalog.get(item.name)
    if schema is None:
        matches = [name for name in planner.catalog if name.lower() == item.name.lower()]
        schema = planner.catalog[matches[0]] if len(matches) == 1 else None
    return schema if isinstance(schema, pa.Schema) else None


def _field_type(schema: pa.Schema, name: str) -> pa.DataType | None:
    """Return the type of ``schema``'s column ``name`` (case-insensitively), or None."""
    matches = [field.type for field in schema if field.name.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None
