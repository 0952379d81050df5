"""A string constant in an IN list whose other values widen the operand's type is read as that wider type, as
DuckDB types the whole list first: ``d IN (ts, '2000-02-29 12:00:00')`` compares at the TIMESTAMP (a DATE's
midnight is not noon), ``2 IN (x_double, '2.4')`` at the DOUBLE. The engine's disjunction read each text as the
operand's type (``d = '... 12:00:00'`` is the DATE, ``2 = '2.4'`` the INTEGER 2) and matched: wrong answers (fuzz
round 11's ``coercion`` family, seeds 89 and 272). A list the operand's own type holds is unchanged."""

from __future__ import annotations

import datetime

import pyarrow as pa
from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables

TABLES = {"t": pa.table({
    "id": pa.array(range(4), pa.int64()),
    "dt": pa.array([datetime.date(2000, 2, 29), datetime.date(2000, 2, 29), None, datetime.date(1970, 1, 1)]),
    "ts": pa.array([datetime.datetime(2000, 2, 29, 12), datetime.datetime(2000, 2, 29), None, None], pa.timestamp("us")),
    "x": pa.array([1.5, 2.0, None, 2.4], pa.float64()), "i": pa.array([2, 1, None, 3], pa.int32()),
    "b": pa.array([2, 1, None, 5], pa.int64()), "m": pa.array([1, 2, 3, None], pa.decimal128(5, 2)),
})}

QUERIES = [
    "SELECT id, dt IN (ts, '2000-02-29 12:00:00') AS a, dt NOT IN (ts, '2000-02-29 12:00:00') AS b, "
    "2 IN (x, '2.4') AS c, i IN (x, '2.4') AS d, i IN (2.5, '2.4') AS e, i IN (m, '2.4') AS f FROM t",
    "SELECT id FROM t WHERE dt IN (ts, '2000-02-29 12:00:00')",
    "SELECT id, i IN (b, '1.0') AS a, ts IN (dt, '2000-02-29') AS b, dt IN ('2000-02-29 12:00:00') AS c FROM t",
]


def test_text_constants_in_a_list_read_as_the_list_type(device_name):
    with duckdb_with_tables(TABLES) as connection:
        session = session_with_tables(TABLES, device=device_name, compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, QUERIES if device_name == "cpu" else QUERIES[:1])


def test_a_text_operand_of_a_list_of_numbers_reads_as_the_list_type():
    """``s IN (0.333333, 2.0::DOUBLE)`` reads the text as a DOUBLE, as DuckDB types the whole list (each ``s = v``
    read it as DECIMAL(7, 6) and raised on '-7'); ``s IN (1, 2)`` / ``s IN (1.5, 2)`` were refused ("IN list value
    2 does not match string")."""
    tables = {"t": pa.table({"id": pa.array(range(5), pa.int64()),
                             "s": pa.array(["2", "2.0", "0.333333", "-7", None], pa.string())})}
    queries = ["SELECT id, s IN (0.333333, CAST(2 AS DOUBLE)) AS a, s IN (2, 100) AS b, s IN (1.5, 2) AS c, "
               "s NOT IN (2, NULL) AS d, s IN (id, 7) AS e FROM t",
               "SELECT id FROM t WHERE s IN (-7, 2)"]
    with duckdb_with_tables(tables) as connection:
        session = session_with_tables(tables, device="cpu", compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, queries)


def test_text_constants_beside_numbers_in_the_list_of_a_text_operand_take_the_numbers_type():
    """``s IN ('1', 2)``: DuckDB types the list by its numbers and reads ``s`` and '1' as INTEGERs ('01' matches);
    the engine refused it ("IN list value 2 does not match string", stop 52's review). A list of texts only still
    compares as text ('01' does not match '1')."""
    tables = {"t": pa.table({"id": pa.array(range(5), pa.int64()),
                             "s": pa.array(["1", "2", "01", " 3", None], pa.string())})}
    queries = ["SELECT id, s IN ('1', 2) AS a, s IN (2, '03') AS b, s NOT IN ('1', 2.5) AS c, s IN ('1', 2, 1.5) AS d, "
               "s IN ('1', '2') AS e FROM t",
               "SELECT id FROM t WHERE s NOT IN ('01', 3)"]
    with duckdb_with_tables(tables) as connection:
        session = session_with_tables(tables, device="cpu", compile_mode="lowest")
        assert_queries_match_duckdb(session, connection, queries)
