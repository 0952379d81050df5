"""``IS [NOT] DISTINCT FROM`` and ``IS [NOT] TRUE | FALSE`` against DuckDB: comparisons that never return NULL.

``a IS DISTINCT FROM b`` is ``a <> b`` with NULL equal to NULL and unequal to any value; ``x IS TRUE`` is
true only for TRUE (NULL is neither TRUE nor FALSE). Checked over every column kind (integers, decimals,
doubles with NaN, strings with the empty string and non-ASCII text, dates, booleans), mixed types, NULL
literals, in WHERE, SELECT, CASE, HAVING and a join condition, over empty input; cpu and the simulator.
"""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

TABLES = {
    "t": pa.table({
        "id": pa.array(range(8), pa.int64()),
        "a": pa.array([1, None, 2, None, 3, 1, 0, -1], pa.int32()),
        "b": pa.array([1, None, None, 2, 4, 1, 0, 5], pa.int64()),
        "d": pa.array([decimal.Decimal(v) if v else None for v in ["1.50", None, "-2.00", "0.00", "", "1.5", "3", ""]],
                      pa.decimal128(9, 2)),
        "f": pa.array([1.5, None, float("nan"), 0.0, -0.0, float("nan"), 2.0, None], pa.float64()),
        "s": pa.array(["x", None, "", "é", "日本", "x", None, "a"]),
        "dt": pa.array([datetime.date(1995, 1, 1), None, datetime.date(1995, 2, 1), datetime.date(1995, 1, 1),
                        None, datetime.date(1996, 1, 1), datetime.date(1995, 1, 1), None], pa.date32()),
        "p": pa.array([True, None, False, True, None, False, True, None]),
    }),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT id, a IS DISTINCT FROM b AS x, a IS NOT DISTINCT FROM b AS y FROM t",
    "SELECT id, d IS DISTINCT FROM 1.5 AS x, f IS NOT DISTINCT FROM 'NaN'::DOUBLE AS y, s IS DISTINCT FROM 'x' AS z, "
    "dt IS NOT DISTINCT FROM DATE '1995-01-01' AS w, p IS DISTINCT FROM NULL AS v FROM t",
    "SELECT id FROM t WHERE a IS NOT DISTINCT FROM b OR s IS NOT DISTINCT FROM NULL",
    "SELECT id, a IS DISTINCT FROM d AS x, f IS DISTINCT FROM a AS y FROM t",  # mixed types, unified
    "SELECT id, p IS TRUE AS x, p IS NOT TRUE AS y, p IS FALSE AS z, p IS NOT FALSE AS w, (a > 1) IS TRUE AS v "
    "FROM t",
    "SELECT id FROM t WHERE (a > 0) IS NOT TRUE AND p IS NOT FALSE",
    "SELECT CASE WHEN s IS DISTINCT FROM 'x' THEN 'other' ELSE 'x' END AS c, count(*) AS n FROM t GROUP BY 1 "
    "HAVING count(*) IS DISTINCT FROM 0",
    "SELECT l.id AS l, r.id AS r FROM t l JOIN t r ON l.s IS NOT DISTINCT FROM r.s AND l.id < r.id",
    "SELECT id, a IS DISTINCT FROM b AS x, p IS TRUE AS y FROM e",
    # inside COALESCE / NULLIF arguments (and a subquery's WHERE there), which are rewritten as CASE themselves
    "SELECT id, coalesce(a IS NOT DISTINCT FROM b, FALSE) AS x, nullif(p IS TRUE, FALSE) AS y FROM t",
    "SELECT id, coalesce((SELECT max(r.a) FROM t r WHERE r.s IS NOT DISTINCT FROM 'x'), 0) AS m FROM t",
]


def test_null_safe_comparisons_match_duckdb(device_name, reference):
    session = session_with_tables(TABLES, split_rows=3, device=device_name, drivers=2, batch_rows=4)
    assert_queries_match_duckdb(session, reference, QUERIES if device_name == "cpu" else QUERIES[:2] + QUERIES[4:5])
