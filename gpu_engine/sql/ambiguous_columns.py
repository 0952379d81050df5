"""A bare column name several FROM items have is ambiguous: the error DuckDB gives ("Ambiguous reference to column
name"), naming the items and the qualified spellings.

Shared by the qualify error path (:mod:`gpu_engine.sql.rewrite`, where sqlglot's qualify reports such a name as
unknown) and the unnest-by-position rewrite (:mod:`gpu_engine.sql.unnest_selects`), which replaces a bare element
name before qualify sees it and so must refuse the ambiguity itself rather than silently pick the element.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import pyarrow as pa
from sqlglot import exp

from gpu_engine.sql.errors import SqlError, position_of

__all__ = ["ambiguous_column_error", "item_columns", "items_holding"]


def item_columns(item: exp.Expression, catalog: Mapping[str, pa.Schema]) -> list[str] | None:
    """The column names of the FROM item ``item`` (a table, subquery, VALUES, unnest or table function), None where
    they are not known here (a table the catalog lacks, such as a CTE's name, or an item without column aliases)."""
    alias = item.args.get("alias")
    if alias is not None and alias.columns:
        return [c.name for c in alias.columns]
    if isinstance(item, exp.Table):
        return list(catalog[item.name].names) if item.name in catalog else None
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Query):
        return list(item.this.named_selects)
    return None


def items_holding(items: Iterable[exp.Expression], catalog: Mapping[str, pa.Schema], name: str) -> list[str]:
    """The names of the FROM items of ``items`` that have a column ``name`` (each once, in order)."""
    holders = []
    for item in items:
        label = item.alias_or_name
        if name in (item_columns(item, catalog) or ()) and label and label not in holders:
            holders.append(label)
    return holders


def ambiguous_column_error(name: str, holders: list[str], node: exp.Expression | None) -> SqlError:
    """The error for the bare column ``name`` (at ``node``) that each FROM item of ``holders`` has."""
    line, col = position_of(node)
    return SqlError(f"column {name!r} is ambiguous: FROM items " + ", ".join(holders) + " each have one; "
                    "qualify it as " + " or ".join(f"{h}.{name}" for h in holders), line=line, col=col, name=name)
