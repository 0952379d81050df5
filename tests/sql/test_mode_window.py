"""``mode(x) OVER (PARTITION BY ...)`` over whole partitions (was refused as an unsupported window function).

Against DuckDB where each partition has one most frequent value (integers, multi-byte strings, dates, NULLs
skipped, an all-NULL partition giving NULL, an empty table); where values tie, the answer is checked to be one
of the most frequent values of its partition (DuckDB's choice among them is its own). A running or sliding mode
stays refused naming the function and the frames it supports.
"""

from __future__ import annotations

import collections
import datetime

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, duckdb_with_tables, session_with_tables
from gpu_engine.errors import PlanError

T = pa.table({
    "g": pa.array([1, 1, 1, 2, 2, 2, 2, 3, 3, None, None, 4], pa.int32()),
    "v": pa.array([5, 5, 7, None, 9, 9, 1, None, None, 2, 2, 8], pa.int64()),
    "s": pa.array(["日本", "日本", "a", "é", "é", None, "", None, None, "x", "x", "y"]),
    "d": pa.array([datetime.date(2020, 1, 1 + i % 2) for i in range(11)] + [None], pa.date32()),
})
QUERIES = [
    "SELECT g, v, mode(v) OVER (PARTITION BY g) AS m FROM t",
    "SELECT g, mode(s) OVER (PARTITION BY g) AS m, mode(v) OVER (PARTITION BY g ROWS BETWEEN UNBOUNDED PRECEDING "
    "AND UNBOUNDED FOLLOWING) AS n FROM t",
    "SELECT g, mode(v) OVER (PARTITION BY g) AS m FROM e",
]


@pytest.fixture(scope="module")
def reference():
    with duckdb_with_tables({"t": T, "e": T.slice(0, 0)}) as connection:
        yield connection


def test_mode_over_partitions_matches_duckdb_on_cpu(reference):
    session = session_with_tables({"t": T, "e": T.slice(0, 0)}, device="cpu", drivers=2, batch_rows=5)
    assert_queries_match_duckdb(session, reference, QUERIES)


@pytest.mark.cpu_case_in("test_mode_over_partitions_matches_duckdb_on_cpu")
def test_mode_over_partitions_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables({"t": T, "e": T.slice(0, 0)}, device=device_name, drivers=2, batch_rows=5)
    assert_queries_match_duckdb(session, reference, QUERIES[:1])


def test_tied_values_give_one_of_the_most_frequent():
    session = session_with_tables({"t": T}, device="cpu", drivers=2, batch_rows=5)
    rows = session.sql("SELECT g, d, mode(d) OVER (PARTITION BY g) AS m FROM t").to_pylist()
    by_group = collections.defaultdict(collections.Counter)
    for row in rows:
        if row["d"] is not None:
            by_group[row["g"]][row["d"]] += 1
    for row in rows:
        counts = by_group[row["g"]]
        if not counts:
            assert row["m"] is None
        else:
            assert counts[row["m"]] == max(counts.values()), row


def test_a_running_mode_is_refused():
    with pytest.raises(PlanError, match=r"(?s)mode over a window is computed over whole partitions only"):
        session_with_tables({"t": T}, device="cpu").sql("SELECT mode(v) OVER (PARTITION BY g ORDER BY v) FROM t")
