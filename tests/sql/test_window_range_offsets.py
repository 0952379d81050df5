"""RANGE frames whose offsets are not whole numbers (issue 30): DECIMAL and DOUBLE offsets over numeric keys,
INTERVAL offsets (and whole days) over DATE and TIMESTAMP keys, against DuckDB on cpu and cuda-sim.

Keys with ties, NULLs (their own peer group), ascending and descending order, partitions, an offset with more
decimal places than its DECIMAL key (``0.005`` over DECIMAL(5, 2)), DOUBLE offsets over integer keys. Refused by
name, as DuckDB refuses them or the operator lacks them: an INTERVAL over a number, an integer over a TIMESTAMP,
negative offsets, fractional ROWS offsets. Offsets of months move each key by calendar months (month ends clamp).
"""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.sql.errors import SqlError

_DAYS = [1, 3, 4, 8, None, 3]
TABLES = {"t": pa.table({
    "id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
    "k": pa.array([1, 1, 1, 2, 2, 2], pa.int32()),
    "i": pa.array([1, 2, 3, 5, None, 3], pa.int32()),
    "d": pa.array([None if x is None else decimal.Decimal(x) for x in ["1.10", "1.15", "1.20", "1.60", None, "1.15"]],
                  pa.decimal128(5, 2)),
    "f": pa.array([1.5, 2.0, 2.6, 4.0, None, 2.0]),
    "dt": pa.array([None if x is None else datetime.date(2020, 1, x) for x in _DAYS]),
    "ts": pa.array([None if x is None else datetime.datetime(2020, 1, x, 10 + x) for x in _DAYS], pa.timestamp("us")),
    # month ends: a month back from March 31 is February 29 (clamped), from March 30 too
    "me": pa.array([datetime.date(*x) if x else None for x in [(2000, 1, 31), (2000, 2, 29), (2000, 3, 31),
                                                                (2000, 3, 30), None, (2001, 2, 28)]]),
    "mt": pa.array([datetime.datetime(*x) if x else None for x in [(2000, 1, 31, 12), (2000, 2, 29, 6), None,
                                                                    (2000, 3, 31, 18), (2000, 4, 30), (2000, 3, 31)]],
                   pa.timestamp("us")),
})}

QUERIES = [
    "SELECT id, sum(id) OVER (ORDER BY i RANGE BETWEEN 1.5 PRECEDING AND CURRENT ROW) AS a, count(*) OVER (ORDER BY i "
    "DESC RANGE BETWEEN 1.5 PRECEDING AND 0.5 FOLLOWING) AS b, sum(id) OVER (ORDER BY i RANGE BETWEEN 1e0 PRECEDING "
    "AND CURRENT ROW) AS c FROM t",
    "SELECT id, sum(id) OVER (ORDER BY d RANGE BETWEEN 0.05 PRECEDING AND 0.005 FOLLOWING) AS a, max(id) OVER "
    "(PARTITION BY k ORDER BY d DESC NULLS FIRST RANGE BETWEEN CURRENT ROW AND 0.1 FOLLOWING) AS b, avg(f) OVER "
    "(ORDER BY f RANGE BETWEEN 0.6 PRECEDING AND CURRENT ROW) AS c FROM t",
    "SELECT id, sum(id) OVER (ORDER BY dt RANGE BETWEEN INTERVAL 3 DAY PRECEDING AND CURRENT ROW) AS a, sum(id) OVER "
    "(ORDER BY dt RANGE BETWEEN 3 PRECEDING AND 1 FOLLOWING) AS b, count(*) OVER (ORDER BY dt RANGE BETWEEN "
    "INTERVAL 36 HOUR PRECEDING AND CURRENT ROW) AS c FROM t",
    "SELECT id, sum(id) OVER (ORDER BY ts RANGE BETWEEN INTERVAL 36 HOUR PRECEDING AND INTERVAL 1 DAY FOLLOWING) AS a, "
    "sum(id) OVER (PARTITION BY k ORDER BY ts DESC RANGE BETWEEN INTERVAL '1 day 2 hours' PRECEDING AND CURRENT ROW) "
    "AS b FROM t",
    # months: each key moves by calendar months (its own month's length), then days and time
    "SELECT id, count(*) OVER (ORDER BY me RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND CURRENT ROW) AS a, sum(id) "
    "OVER (ORDER BY me DESC RANGE BETWEEN INTERVAL '1 month 1 day' PRECEDING AND INTERVAL 1 YEAR FOLLOWING) AS b, "
    "count(*) OVER (PARTITION BY k ORDER BY mt RANGE BETWEEN CURRENT ROW AND INTERVAL '1 month 12 hours' FOLLOWING) "
    "AS c, count(*) OVER (ORDER BY mt RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND CURRENT ROW) AS d FROM t",
]


def test_range_offsets_match_duckdb(device_name, reference):
    queries = QUERIES if device_name == "cpu" else [QUERIES[2], QUERIES[4]]
    session = session_with_tables(TABLES, split_rows=3, device=device_name, drivers=2, batch_rows=3,
                                  fuse=False)  # no generated kernels to compile (CI time): SQL, not fusion
    assert_queries_match_duckdb(session, reference, queries)


@pytest.mark.parametrize("frame, message", [
    ("ORDER BY i RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND CURRENT ROW", "takes numeric offsets, not INTERVAL"),
    ("ORDER BY ts RANGE BETWEEN 1 PRECEDING AND CURRENT ROW", "over the timestamp ts takes INTERVAL offsets"),
    ("ORDER BY dt RANGE BETWEEN INTERVAL '-1 day' PRECEDING AND CURRENT ROW",
     "must be a non-negative number or INTERVAL constant"),
    ("ORDER BY dt RANGE BETWEEN INTERVAL '-1 month' PRECEDING AND CURRENT ROW",
     "must be a non-negative number or INTERVAL constant"),
    ("ORDER BY i ROWS BETWEEN 1.5 PRECEDING AND CURRENT ROW", "a ROWS frame offset must be a non-negative integer"),
])
def test_range_offsets_the_engine_does_not_plan_are_refused_by_name(frame, message):
    with pytest.raises(SqlError) as raised:
        session_with_tables(TABLES, device="cpu").sql(f"SELECT sum(id) OVER ({frame}) AS a FROM t")
    assert message in str(raised.value) and raised.value.line == 1
