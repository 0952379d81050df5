"""An unaliased aggregate with FILTER is named as DuckDB names it: ``sum(v) FILTER (WHERE (g != 2))``.

Why: sqlglot prints ``FILTER(WHERE ...)`` without the blank DuckDB's name has, so the result column of
``SELECT g, count(*) FILTER (WHERE v > 1) FROM t GROUP BY g`` was named apart from DuckDB's.
"""

from __future__ import annotations

import duckdb
import sqlglot

from gpu_engine.sql.duckdb_names import duckdb_column_name

EXPRESSIONS = [
    "sum(v) FILTER (WHERE g <> 2)",
    "count(*) FILTER (WHERE v > 1)",
    "avg(v + 1) FILTER (WHERE g IS NOT NULL AND v < 3) * 2",
]


def test_filtered_aggregates_are_named_as_duckdb_names_them():
    connection = duckdb.connect()
    connection.execute("CREATE TABLE t (g INTEGER, v INTEGER)")
    for expression in EXPRESSIONS:
        expected = connection.execute(f"SELECT {expression} FROM t").description[0][0]
        assert duckdb_column_name(sqlglot.parse_one(expression, read="duckdb")) == expected
