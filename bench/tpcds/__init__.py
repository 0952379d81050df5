"""The 99 TPC-DS query texts (``queries/qNN.sql``, see ``README.md``) and the check of a result against DuckDB's.

Why here: the bench runner (:mod:`bench.run_tpcds`) and the CI test
(``tests/sql/test_tpcds_queries.py``) must read the same texts and judge
results the same way.

The check is the project's ordered check (:func:`gpu_engine.sql.ordering.order_key_columns`:
rows as a multiset, the ORDER BY key columns row for row) plus what a
``LIMIT`` adds: when DuckDB's result was cut by the LIMIT, the rows that tie
with the last row on every ORDER BY key may be any of the tied rows, so for
those only the key values are compared.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

__all__ = ["QUERY_DIR", "QUERY_NUMBERS", "query_name", "query_text", "result_mismatch"]

QUERY_DIR = Path(__file__).resolve().parent / "queries"
QUERY_NUMBERS = tuple(range(1, 100))


def query_name(number: int) -> str:
    """Return the short name of query ``number`` (``q7``), as the bench and tests name it."""
    return f"q{int(number)}"


@lru_cache(maxsize=None)
def query_text(number: int) -> str:
    """Return the SQL text of TPC-DS query ``number`` (1..99) without its final semicolon."""
    if int(number) not in QUERY_NUMBERS:
        raise ValueError(f"TPC-DS queries are numbered 1 to 99, got {number!r}")
    text = (QUERY_DIR / f"q{int(number):02d}.sql").read_text()
    return text.strip().rstrip(";").strip()


def _limit_of(sql: str) -> int | None:
    """Return the outermost query's LIMIT as an int, or None (no LIMIT, or not a number)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError:
        return None
    limit = tree.args.get("limit")
    if not isinstance(limit, exp.Limit) or not isinstance(limit.expression, exp.Literal):
        return None
    try:
        return int(limit.expression.this)
    except ValueError:
        return None


def _tied_tail(table, keys: tuple[str, ...]) -> int:
    """Return how many rows at the end of ``table`` hold the last row's values on every key."""
    if table.num_rows == 0:
        return 0
    columns = [table.column(name).to_pylist() for name in keys]
    last = [column[-1] for column in columns]
    count = 0
    for index in range(table.num_rows - 1, -1, -1):
        if [column[index] for column in columns] != last:
            break
        count += 1
    return count


def result_mismatch(engine_table, duckdb_table, sql: str, rows_mismatch) -> str | None:
    """Return why the engine's result of ``sql`` differs from DuckDB's, or None when it is an allowed answer.

    ``rows_mismatch`` is :func:`tests.duckdb_reference.rows_mismatch` (passed in
    so this module imports nothing from the tests).
    """
    from gpu_engine.sql.ordering import order_key_columns

    keys = order_key_columns(sql)
    limit = _limit_of(sql)
    cut = (isinstance(keys, tuple) and keys and limit is not None and duckdb_table.num_rows == limit
           and engine_table.num_rows == limit and engine_table.column_names == duckdb_table.column_names)
    if not cut:
        return rows_mismatch(engine_table, duckdb_table, ordered=keys)
    tail = _tied_tail(duckdb_table, keys)
    head = limit - tail
    problem = rows_mismatch(engine_table.slice(0, head), duckdb_table.slice(0, head), ordered=keys)
    if problem is not None:
        return problem
    problem = rows_mismatch(engine_table.slice(head).select(list(keys)), duckdb_table.slice(head).select(list(keys)),
                            ordered=True)
    if problem is not None:
        return f"the last {tail} rows (tied on ORDER BY {list(keys)} at the LIMIT) differ in their keys: {problem}"
    return None
