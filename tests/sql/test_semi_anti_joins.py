"""DuckDB's ``SEMI JOIN`` and ``ANTI JOIN`` (were refused by name): planned as ``[NOT] EXISTS``.

Against DuckDB: a row kept once however many rows match (duplicate keys on the right), NULL keys (never
matching: kept by ANTI, dropped by SEMI), ``SELECT *`` listing the left side's columns only, a non-equality
condition, after an inner join, under GROUP BY and in a derived table, an empty side. A SEMI/ANTI join followed
by another join, or with USING, is still refused naming it and its position.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables
from gpu_engine.errors import PlanError

T = pa.table({"k": pa.array([1, 1, 2, None, 3, 5], pa.int32()), "o": pa.array([3, -7, 2, 2, None, 1], pa.int64()),
              "s": pa.array(["a", "é", None, "", "日本", "b"])})
U = pa.table({"k": pa.array([1, 1, 3, None, 4], pa.int32()), "w": pa.array(["x", "y", "z", "n", None])})
TABLES = {"t": T, "u": U, "e": U.slice(0, 0)}
QUERIES = [
    "SELECT * FROM t SEMI JOIN u ON t.k = u.k",
    "SELECT * FROM t ANTI JOIN u ON t.k = u.k",
    "SELECT x.s FROM t AS x ANTI JOIN u AS y ON x.k = y.k AND y.w <> 'z' WHERE x.o > 0 OR x.o IS NULL",
    "SELECT t.k, count(*) AS n FROM t SEMI JOIN u ON t.k < u.k GROUP BY 1",
    "SELECT a.k, b.o FROM t a JOIN t b ON a.k = b.k ANTI JOIN u ON b.o = u.k",
    "SELECT * FROM (SELECT * FROM t SEMI JOIN u ON t.k = u.k) x WHERE x.o < 3",
    "SELECT * FROM t SEMI JOIN e ON t.k = e.k",
    "SELECT * FROM t ANTI JOIN e ON t.k = e.k",
]


def test_semi_anti_joins_match_duckdb_on_cpu(reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=3), reference,
                                QUERIES)


@pytest.mark.cpu_case_in("test_semi_anti_joins_match_duckdb_on_cpu")
def test_semi_anti_joins_match_duckdb_on_each_device(device_name, reference):
    assert_queries_match_duckdb(session_with_tables(TABLES, device=device_name, drivers=2, batch_rows=3), reference,
                                QUERIES[:2])


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM t ANTI JOIN u USING (k)", r"ANTI JOIN.*line 1, column 27"),
    ("SELECT * FROM t SEMI JOIN u ON t.k = u.k JOIN u AS v ON v.k = t.k", r"SEMI JOIN.*line 1, column 27"),
])
def test_other_forms_are_refused_by_name(sql, message):
    with pytest.raises(PlanError, match=f"(?s){message}"):
        session_with_tables(TABLES, device="cpu").sql(sql)
