"""``DATE '9999-12-31' + INTERVAL 12 MONTH`` and ``DATE '0001-01-01' - INTERVAL 1 DAY``: a constant date moved out of
Python's years 1-9999 is computed as DuckDB's TIMESTAMP (years 10000 and 0) instead of raising ``ValueError: year
10000 is out of range`` while planning (fuzz round 9). The answers are compared as text: Python cannot hold them."""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import duckdb_with_tables, session_with_tables

TABLES = {"t": pa.table({"id": [1, 2], "d": pa.array([None, 0], pa.date32())})}

QUERIES = [
    "SELECT id, DATE '9999-12-31' + INTERVAL 12 MONTH AS a FROM t",
    "SELECT DATE '9999-12-31' + INTERVAL 1 DAY AS a, DATE '9999-12-01' + INTERVAL 1 YEAR AS b",
    "SELECT DATE '0001-01-01' - INTERVAL 1 DAY AS a, DATE '0001-03-31' - INTERVAL 1 YEAR AS b",
    "SELECT id FROM t WHERE d < DATE '9999-12-31' + INTERVAL 1 WEEK",
]


@pytest.mark.parametrize("query", QUERIES)
def test_a_constant_date_moved_past_python_years_is_duckdbs_timestamp(device_name, query):
    session = session_with_tables(TABLES, device=device_name)
    actual = session.sql(query)
    with duckdb_with_tables(TABLES) as connection:
        expected = connection.sql(query).to_arrow_table()
    assert actual.schema.types == expected.schema.types
    as_text = lambda table: sorted(tuple(str(v) for v in row.values())  # noqa: E731
                                   for row in table.cast(pa.schema([(n, pa.string()) for n in table.column_names]))
                                   .to_pylist())
    assert as_text(actual) == as_text(expected)
