"""A dictionary value no row holds (one a filter removed, or an unused entry) must not make a query raise: DuckDB
converts rows, not dictionaries. The engine raised "Could not convert string 'x' to date32" for
``CAST(s AS DATE) ... WHERE k > 1`` after the filter removed the row holding 'x' (a fused projection's lookup
table over the dictionary: its CAST's check was deferred to the operator's scope, past the ``except`` that falls
back to the rows), and "Insufficient padding in LPAD." for ``lpad(s, 4, '')`` when only an unused entry was short
(fuzz round 10, seed 1064). A row holding such a value still raises, as in DuckDB."""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import ExecutionError

TABLES = {"t": pa.table({
    "k": [1, 2, 3, 4, 5],
    "s": pa.array(["x", "2024-01-01", None, "2024-02-29 12:30:00", "2024-01-01"]).dictionary_encode(),
    "u": pa.DictionaryArray.from_arrays(pa.array([1, 1, None, 1, 3], pa.int32()),
                                        pa.array(["x", "2024-01-01", "abcdefg", None])),
})}

QUERIES = [
    "SELECT k, CAST(s AS DATE) AS a FROM t WHERE k > 1",
    "SELECT k, CAST(s AS TIMESTAMP) AS a, TRY_CAST(s AS INTEGER) AS b FROM t WHERE k >= 2",
    "SELECT k, CAST(u AS DATE) AS a, lpad(u, 4, '') AS b, rpad(u, 7, '') AS c FROM t",
    "SELECT k, lpad(s, 1, '') AS a FROM t WHERE k <> 1",
]
RAISED = [
    ("SELECT k, CAST(s AS DATE) AS a FROM t", "Could not convert string 'x'"),
    ("SELECT k, lpad(u, 12, '') AS a FROM t", "Insufficient padding in LPAD"),
    ("SELECT k, rpad(s, 2, '') AS a FROM t", "Insufficient padding in RPAD"),
]


def test_unused_dictionary_values_raise_nothing(device_name):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name)
        assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[:1])
        for sql, message in RAISED if device_name == "cpu" else RAISED[:1]:
            with pytest.raises(Exception):
                connection.sql(sql).fetchall()
            with pytest.raises(ExecutionError, match=message):
                session.sql(sql)
