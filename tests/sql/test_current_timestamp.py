"""``now()`` / ``current_timestamp`` / ``get_current_timestamp()`` / ``transaction_timestamp()``: one instant per query
run, a TIMESTAMP WITH TIME ZONE as DuckDB's (were refused as unknown or unsupported functions).

Properties, not DuckDB's value (the two read their clocks at other moments): the instant lies between the clock
read before and after the query; every row of every batch and driver, and every spelling, reads the same one
(DuckDB's: the transaction's start); a plan kept for the text reads a new instant when it runs again. Names and
the type are DuckDB's.
"""

from __future__ import annotations

import datetime
import time

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_table, duckdb_with_tables, session_with_tables
from gpu_engine.errors import PlanError

T = pa.table({"k": pa.array(list(range(50)), pa.int32())})
SPELLINGS = "SELECT now(), current_timestamp, get_current_timestamp(), transaction_timestamp(), k FROM t"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def test_one_instant_per_query_between_the_clocks(device_name):
    session = session_with_tables({"t": T}, device=device_name, drivers=2, batch_rows=7)
    before = _now()
    result = session.sql(SPELLINGS)
    after = _now()
    instants = {value for name in result.column_names[:4] for value in result.column(name).to_pylist()}
    assert result.num_rows == 50 and len(instants) == 1
    (instant,) = instants
    assert before <= instant <= after


def test_a_kept_plan_reads_a_new_instant():
    session = session_with_tables({"t": T}, device="cpu")
    sql = "SELECT max(now()) AS n FROM t"
    first = session.sql(sql).column("n")[0].as_py()
    time.sleep(0.01)
    second = session.sql(sql).column("n")[0].as_py()
    assert second > first


def test_names_and_type_as_duckdb():
    with duckdb_with_tables({"t": T}) as reference:
        expected = duckdb_table(reference, SPELLINGS)
    actual = session_with_tables({"t": T}, device="cpu").sql(SPELLINGS)
    assert actual.schema.names == expected.schema.names
    for got, want in zip(actual.schema, expected.schema):
        assert pa.types.is_timestamp(got.type) == pa.types.is_timestamp(want.type)
        if pa.types.is_timestamp(want.type):
            assert (got.type.unit, bool(got.type.tz)) == (want.type.unit, bool(want.type.tz))


def test_an_argument_is_refused():
    with pytest.raises(PlanError, match=r"(?s)takes no arguments.*line 1, column 8"):
        session_with_tables({"t": T}, device="cpu").sql("SELECT now(1) FROM t")
