"""Which output columns a query's final ORDER BY sorts on: what an ordered result check may hold fixed.

Why: rows that tie on every ORDER BY key may come in any order (SQL leaves it
open, and DuckDB's order among ties changes with its thread count). Checking an
ordered result row for row against DuckDB's then fails on a correct answer:
TPC-H Q11 at SF10 has two parts with the same value, and whichever comes first
depends on how partial sums were split. A check that knows the keys compares
the rows as a multiset and the key sequence in order instead.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["order_key_columns", "mismatch_in_key_order"]


def mismatch_in_key_order(compare: Callable[[Any, Any, bool], str | None], actual, expected,
                          keys: tuple[str, ...]) -> str | None:
    """Return why ``actual`` differs from ``expected`` as a multiset or in ORDER BY ``keys`` order, else None.

    ``compare(a, b, ordered)`` is the caller's row check (row for row when
    ``ordered``); rows tying on every key may come in any order, as SQL allows.
    The CLI's check and the tests' check both go through here.
    """
    problem = compare(actual, expected, False)
    if problem is not None or not keys:
        return problem
    missing = [name for name in keys if name not in expected.column_names]
    if missing:
        return f"ORDER BY columns {missing} are not in the result {expected.column_names}"
    problem = compare(actual.select(list(keys)), expected.select(list(keys)), True)
    return None if problem is None else f"rows are not in ORDER BY {list(keys)} order: {problem}"


def order_key_columns(sql: str, dialect: str = "duckdb") -> tuple[str, ...] | bool:
    """Return the output columns the outermost ORDER BY of ``sql`` sorts on, in order.

    ``False`` when the query has no final ORDER BY; ``True`` (compare row for
    row) when a key is not an output column by name or alias, or the text does
    not parse as one query.
    """
    import sqlglot
    from sqlglot import exp

    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.ParseError:
        return "ORDER BY" in sql.upper()
    if not statements:
        return False
    query = statements[-1]
    order = query.args.get("order")
    if order is None:
        return False
    outputs = {select.alias_or_name for select in query.selects} if isinstance(query, exp.Select) else set()
    keys = []
    for ordered in order.expressions:
        key = ordered.this
        name = key.alias_or_name if isinstance(key, (exp.Column, exp.Identifier)) else None
        if not name or name not in outputs:
            return True
        keys.append(name)
    return tuple(keys)
