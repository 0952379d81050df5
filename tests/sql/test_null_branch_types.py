"""Set operation branches whose column is NULL in every row (issue 30), typed as DuckDB types them.

A bare ``NULL`` (or a VALUES column of only NULLs) has DuckDB's NULL type and takes the type of the other
branches, through chains and nested set operations (``SELECT NULL UNION ALL SELECT NULL UNION ALL SELECT
'x'`` is VARCHAR); NULL in every branch is INTEGER. Checked against DuckDB, types included, on cpu and
cuda-sim; a VALUES column also read elsewhere in its SELECT is of the NULL type too (DATE beside a DATE).
"""

from __future__ import annotations

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

TABLES = {"t": pa.table({"k": pa.array([1, None, 2, 2], pa.int32()), "x": pa.array([1, 2, None, 2], pa.int64())})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT NULL AS c0, DATE '1995-03-19' AS c1 FROM t WHERE x > 1 EXCEPT ALL SELECT NULL AS c0, "
    "DATE '1995-03-18' AS c1 FROM t",
    "SELECT NULL AS n, x FROM t UNION SELECT NULL, x FROM t",
    "SELECT NULL AS a, 1 AS b INTERSECT SELECT NULL, 1",
    # NULLs on both sides at different columns (the breadth fuzz, seed 1369): each typed by the other
    "SELECT NULL AS c0, x AS c1 FROM t INTERSECT ALL SELECT k AS c0, NULL AS c1 FROM t",
    "SELECT NULL AS a UNION ALL SELECT NULL UNION ALL SELECT 'x'",
    "SELECT NULL AS a, NULL AS b UNION ALL (SELECT NULL, 1 UNION SELECT NULL, 2)",
    "(SELECT NULL AS a, NULL AS b EXCEPT SELECT 1.5, NULL) UNION ALL SELECT 2, 'z'",
    "SELECT max(a) AS m, count(*) AS n FROM (SELECT NULL AS a FROM t UNION ALL SELECT NULL FROM e) s",
    "VALUES (NULL) UNION ALL VALUES (DATE '2000-01-01')",
    "SELECT * FROM (VALUES (NULL, 1), (NULL, 2)) v(a, b) UNION SELECT 2.5, 3",
    "SELECT * FROM (VALUES (NULL), (NULL)) v(a) UNION ALL SELECT NULL UNION ALL SELECT 'q'",
    # one VALUES row with a computed cell: its bare NULL typed too (the breadth fuzz, seed 4821: "cannot infer")
    "SELECT c0, count(*) AS n FROM (VALUES (NULL, 2.5::DOUBLE)) AS v(c0, c1) GROUP BY c0",
]


def test_all_null_branch_columns_take_duckdbs_types(device_name, reference):
    queries = QUERIES if device_name == "cpu" else QUERIES[:1]
    session = session_with_tables(TABLES, split_rows=2, device=device_name, drivers=2, batch_rows=2,
                                  fuse=False)  # no generated kernels to compile (CI time): SQL, not fusion
    assert_queries_match_duckdb(session, reference, queries, exact_types=True)


def test_a_null_values_column_read_twice_takes_the_other_branchs_date(reference):
    # (was refused as "int32 in the left branch": the column is of SQL's NULL type, plans/null_type.py)
    sql = "SELECT a, a + 1 AS b FROM (VALUES (NULL)) v(a) UNION ALL SELECT DATE '2000-01-01', 2"
    assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu", fuse=False), reference, [sql],
                                exact_types=True)
