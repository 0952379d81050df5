"""GROUPS frames (issue 30): offsets count peer groups (rows of equal ORDER BY keys), against DuckDB.

Checked on cpu and cuda-sim: frames before, around and after the row's group, clipped at partition edges or
empty there (NULL sum, count 0), descending order, NULL keys as one group, no ORDER BY (one group), with EXCLUDE
GROUP, over value functions and variances; ``OVER (GROUPS BETWEEN …)`` without PARTITION BY / ORDER BY parses
(sqlglot took the leading GROUPS for a window name).
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

TABLES = {"t": pa.table({
    "id": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int64()),
    "k": pa.array([1, 1, 1, 2, 2, 2, 2], pa.int32()),
    "i": pa.array([1, 1, 2, 4, None, 4, 5], pa.int32()),
    "f": pa.array([1.5, 2.0, None, 4.0, 0.5, -1.0, 3.0]),
})}

QUERIES = [
    "SELECT id, sum(id) OVER (ORDER BY i GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) AS a, count(*) OVER (ORDER BY i "
    "DESC GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS b, sum(id) OVER (ORDER BY i GROUPS BETWEEN 2 FOLLOWING AND 3 "
    "FOLLOWING) AS c, count(*) OVER (ORDER BY i DESC GROUPS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS e FROM t",
    "SELECT id, sum(id) OVER (PARTITION BY k ORDER BY i GROUPS 1 PRECEDING) AS a, max(f) OVER (PARTITION BY k ORDER BY "
    "i NULLS FIRST GROUPS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING EXCLUDE GROUP) AS b, sum(id) OVER (GROUPS "
    "BETWEEN 1 PRECEDING AND CURRENT ROW) AS c, first_value(id) OVER (ORDER BY i, id GROUPS BETWEEN 1 PRECEDING AND 2 "
    "FOLLOWING) AS e, var_pop(f) OVER (ORDER BY i GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS g FROM t",
]


def test_groups_frames_match_duckdb(device_name, reference):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    session = session_with_tables(TABLES, split_rows=3, device=device_name, drivers=2, batch_rows=3,
                                  fuse=False)  # no generated kernels to compile (CI time): SQL, not fusion
    assert_queries_match_duckdb(session, reference, queries)
