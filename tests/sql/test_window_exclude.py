"""Window frames with EXCLUDE CURRENT ROW / GROUP / TIES / NO OTHERS (issue 30), against DuckDB on cpu and cuda-sim.

Each row's frame loses the row itself, its peer group (rows of equal ORDER BY keys, NULL keys one group) or its
peers but not itself; count, sum, avg, min and max combine the frame's pieces left around the excluded rows,
first_value/last_value/nth_value (IGNORE NULLS too) find their row across the pieces, variances merge the pieces'
moments.
ROWS frames are ordered by unique keys (ties would make their rows' order, not EXCLUDE, decide); RANGE frames
over ties, partitions, descending order, an empty frame (NULL, count 0). Covariances with EXCLUDE are
refused by name.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.sql.errors import SqlError

TABLES = {"t": pa.table({
    "id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
    "k": pa.array([1, 1, 1, 2, 2, 2], pa.int32()),
    "i": pa.array([1, 2, 3, 5, None, 3], pa.int32()),
    "f": pa.array([1.5, 2.0, 2.6, 4.0, None, 2.0]),
    "s": pa.array(["b", "a", None, "c", "a", "d"]),
})}

QUERIES = [
    "SELECT id, sum(id) OVER (ORDER BY i, id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS a, "
    "count(*) OVER (ORDER BY i RANGE BETWEEN 2 PRECEDING AND 2 FOLLOWING EXCLUDE GROUP) AS b, max(f) OVER (ORDER BY i "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE TIES) AS c, min(s) OVER (ORDER BY i RANGE "
    "BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW) AS e FROM t",
    "SELECT id, avg(f) OVER (PARTITION BY k ORDER BY i RANGE BETWEEN 1.5 PRECEDING AND CURRENT ROW EXCLUDE TIES) AS a, "
    "count(i) OVER (PARTITION BY k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE GROUP) AS b, "
    "sum(id) OVER (ORDER BY i DESC RANGE BETWEEN CURRENT ROW AND 2 FOLLOWING EXCLUDE TIES) AS c, max(id) OVER (ORDER "
    "BY id ROWS BETWEEN CURRENT ROW AND CURRENT ROW EXCLUDE CURRENT ROW) AS e, sum(id) OVER (ORDER BY i RANGE BETWEEN "
    "1 PRECEDING AND 1 FOLLOWING EXCLUDE NO OTHERS) AS g FROM t",
    # value functions: the ordinal found in the piece holding it (IGNORE NULLS counts non-NULL rows); variances:
    # the pieces' moments merged
    "SELECT id, first_value(s) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS a, "
    "last_value(i IGNORE NULLS) OVER (ORDER BY i RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE TIES) AS b, "
    "nth_value(f, 2) OVER (ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE GROUP) AS c, "
    "nth_value(id, 3 IGNORE NULLS) OVER (PARTITION BY k ORDER BY i GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE "
    "TIES) AS e, var_pop(f) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS g, "
    "stddev_samp(i) OVER (ORDER BY i RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE GROUP) AS h, "
    "var_samp(f) OVER (PARTITION BY k ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE "
    "TIES) AS j FROM t",
]


def test_excluded_frames_match_duckdb(device_name, reference):
    queries = QUERIES if device_name == "cpu" else [QUERIES[0], QUERIES[2]]
    session = session_with_tables(TABLES, split_rows=3, device=device_name, drivers=2, batch_rows=3,
                                  fuse=False)  # no generated kernels to compile (CI time): SQL, not fusion
    assert_queries_match_duckdb(session, reference, queries)


def test_covariances_with_exclude_are_refused_by_name():
    sql = "SELECT corr(i, f) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW) FROM t"
    with pytest.raises(SqlError, match="EXCLUDE CURRENT ROW over corr is not supported"):
        session_with_tables(TABLES, device="cpu").sql(sql)


def test_bool_or_and_bool_and_over_frames_match_duckdb(device_name, reference):
    """``bool_or`` / ``bool_and`` over a window are max / min of a BOOLEAN (the engine refused them as "unsupported
    window function 'logical_or'", sqlglot's name; fuzz round 12); of another type they are refused as DuckDB does."""
    session = session_with_tables(TABLES, split_rows=3, device=device_name, drivers=2, batch_rows=3, fuse=False)
    assert_queries_match_duckdb(session, reference, [
        "SELECT id, bool_or(i > 2) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS a, bool_and(f > 1.7) "
        "OVER (PARTITION BY k ORDER BY i RANGE BETWEEN 1 PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW) AS b, "
        "bool_or(s IS NULL) OVER () AS c, bool_and(i < 5) OVER (ORDER BY i GROUPS BETWEEN CURRENT ROW AND 1 FOLLOWING) "
        "AS d FROM t"])
    with pytest.raises(SqlError, match=r"bool_or\(\) takes a BOOLEAN"):
        session.sql("SELECT bool_or(i) OVER () FROM t")
