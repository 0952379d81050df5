"""repeat() and lpad()/rpad() at the edges of their counts, as DuckDB: repeat of a string past 4294967295 bytes raises
"Cannot create a string of size" (the engine raised Arrow's "ArrowCapacityError: Result might not fit" for any count
past 2**31, even of '' or NULL, where DuckDB gives '' and NULL), and lpad's width past INTEGER is refused at plan time
as DuckDB's binder refuses it (the engine tried to build the string and raised MemoryError). Fuzz round 10."""

from __future__ import annotations

import pyarrow as pa
import pytest
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

from gpu_engine import ExecutionError, PlanError

VALUES = pa.array(["abc", "é日本", None, ""])
TABLES = {"t": pa.table({"s": VALUES, "u": VALUES.dictionary_encode()})}
BIG = 2**63 - 1

QUERIES = [
    f"SELECT s, repeat(s, {BIG}) AS a, repeat(u, 4294967295) AS b FROM t WHERE s = '' OR s IS NULL",
    "SELECT s, repeat(s, 3) AS a, repeat(u, 0) AS b, repeat(s, -1) AS c, repeat(u, 2) AS d FROM t",
]


def test_repeat_and_pad_limits_match_duckdb(device_name):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name)
        assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[:1])
        for sql, error, message in [(f"SELECT repeat(s, {BIG}) AS a FROM t", ExecutionError, "Cannot create a string"),
                                    ("SELECT repeat(u, 1431655766) AS a FROM t", ExecutionError, "Cannot create a string"),
                                    (f"SELECT lpad(s, {BIG}, 'a') AS a FROM t", PlanError, "must fit an INTEGER"),
                                    ("SELECT rpad(u, 2147483648, 'a') AS a FROM t", PlanError, "must fit an INTEGER")]:
            with pytest.raises(Exception):
                connection.sql(sql).fetchall()
            with pytest.raises(error, match=message):
                session.sql(sql)


#: A dictionary value no row holds (or only a row a filter removed) that repeated would pass the 2 GiB a batch's
#: strings hold: DuckDB answers; the engine repeated every dictionary value and raised (fuzz10's note).
HELD = {"d": pa.table({"k": pa.array([1, 2, 3, 4]), "u": pa.DictionaryArray.from_arrays(
    pa.array([0, 1, None, 0], pa.int32()), pa.array(["a", "xy" * 600, "never held" * 100]))})}


def test_repeat_of_a_dictionary_repeats_only_the_values_rows_hold(device_name):
    with duckdb_with_tables(HELD) as connection:
        session = session_with_tables(HELD, device=device_name, compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, [
            "SELECT k, length(repeat(u, 2000000)) AS n FROM d WHERE k <> 2",
            "SELECT k, repeat(u, 3) AS r FROM d",
        ])
