"""``typeof(x)``: DuckDB's name of an expression's type (was refused as an unsupported function).

The engine types expressions as DuckDB binds them, so the name is a constant of the plan: each query here is
compared with DuckDB's answer (values and column names) over every column type a table registers, constants,
arithmetic, casts, aggregates (``sum`` of integers is HUGEINT) and an empty table.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

T = pa.table({
    "a": pa.array([1, None], pa.int8()), "b": pa.array([1, 2], pa.int16()), "c": pa.array([None, 3], pa.int32()),
    "d": pa.array([1, 2], pa.int64()), "e": pa.array([1.5, None], pa.float32()), "f": pa.array([1.0, 2.0]),
    "g": pa.array([1, None], pa.decimal128(9, 2)), "h": pa.array(["é", None]), "i": pa.array([True, None]),
    "j": pa.array([1, None], pa.date32()), "k": pa.array([1, 2], pa.timestamp("us")),
    "l": pa.array([1, None], pa.timestamp("us", tz="UTC")), "n": pa.array([1, 2], pa.decimal128(38, 4)),
    # the units DuckDB names (TIMESTAMP_S ...; the engine said TIMESTAMP for each)
    "o": pa.array([1, 2], pa.timestamp("s")), "p": pa.array([1, 2], pa.timestamp("ms")),
    "q": pa.array([1, 2], pa.timestamp("ns")), "r": pa.array([1, 2], pa.timestamp("ns", tz="UTC")),
})
QUERIES = [
    "SELECT " + ", ".join(f"typeof({name})" for name in T.column_names) + " FROM t",
    "SELECT typeof(NULL), typeof(1), typeof(1.5), typeof('x'), typeof(c + 1), typeof(d * 2), typeof(g * g), "
    "typeof(f / 2), typeof(c / 2), typeof(h || 'x'), typeof(j + 1), typeof(k - k), typeof(CAST(c AS VARCHAR)), "
    "typeof(round(g, 1)) FROM t",
    "SELECT typeof(sum(c)), typeof(avg(c)), typeof(count(*)), typeof(sum(g)), typeof(max(h)) FROM t",
    "SELECT typeof(c), c FROM e",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "e": T.slice(0, 0)}) as connection:
        yield connection


def test_typeof_matches_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T, "e": T.slice(0, 0)}, device="cpu")
    assert_queries_match_duckdb(session, reference, QUERIES)


@pytest.mark.cpu_case_in("test_typeof_matches_duckdb_on_cpu")
def test_typeof_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T, "e": T.slice(0, 0)}, device=device_name)
    assert_queries_match_duckdb(session, reference, QUERIES[:1])
