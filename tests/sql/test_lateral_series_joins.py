"""``LEFT JOIN [LATERAL] generate_series(...) g ON true`` over earlier FROM items, against DuckDB (issue 30).

A row whose series is empty or has a NULL argument (or whose ``string_split`` text is NULL, through ``unnest``) is
kept once with a NULL element (an outer Unnest,
gpu_engine/sql/lateral_series.py and gpu_engine/operators/unnest.py); ``LATERAL`` before a series is the plain table
function. Batches of 2 rows so a batch of only empty series and a series across batches both occur; an empty table;
an aggregate over the kept rows. Refused by name: a LEFT join of a correlated series on another condition.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import PlanError

TABLES = {"t": pa.table({"a": pa.array([1, 2, None, 0, 3, -1, 0], pa.int64()),
                         "b": pa.array([1, None, 2, 5, -1, 0, 0], pa.int64()),
                         "s": pa.array(["x,y", None, "", "z", None, ",", "é"])})}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT t.a, g FROM t LEFT JOIN LATERAL generate_series(1, t.a) AS s(g) ON true",
    "SELECT t.a, t.b, s.g FROM t LEFT JOIN range(t.b, 3) s(g) ON TRUE WHERE t.a IS DISTINCT FROM 2",
    "SELECT t.a, g FROM t, LATERAL generate_series(1, t.a) AS s(g)",
    "SELECT t.a, count(g) AS n, count(*) AS c, sum(g) AS total FROM t LEFT JOIN LATERAL generate_series(t.b, t.a) "
    "AS s(g) ON true GROUP BY t.a",
    "SELECT t.a, generate_series FROM t LEFT JOIN LATERAL generate_series(t.a, 1, -1) ON true WHERE t.a < 3",
    "SELECT e.a, g FROM e LEFT JOIN LATERAL generate_series(1, e.a) AS s(g) ON true",
    # DuckDB's unnest(...) as the joined item: a NULL text's split list keeps its row with a NULL piece
    "SELECT t.s, p FROM t LEFT JOIN LATERAL unnest(string_split(t.s, ',')) u(p) ON true",
    "SELECT t.s, p FROM t, LATERAL unnest(string_split(t.s, ',')) u(p) WHERE t.a IS NOT NULL",
    "SELECT t.a, p FROM t LEFT JOIN LATERAL unnest(generate_series(1, t.a)) u(p) ON true",
    "SELECT t.a, p FROM t LEFT JOIN LATERAL unnest([t.a, 2]) u(p) ON true",
]


def test_left_lateral_series_match_duckdb_on_cpu(reference):
    session = session_with_tables(TABLES, device="cpu", drivers=2, batch_rows=2, fuse=False)
    assert_queries_match_duckdb(session, reference, QUERIES, exact_types=True)


def test_a_left_lateral_series_matches_duckdb_on_each_device(device_name, reference):
    session = session_with_tables(TABLES, device=device_name, batch_rows=2)
    assert_queries_match_duckdb(session, reference, QUERIES[:1], exact_types=True)


@pytest.mark.parametrize("sql, message, column", [
    ("SELECT t.a, g FROM t LEFT JOIN LATERAL generate_series(1, t.a) AS s(g) ON g > 1",
     "ON a condition other than true", 79),
    ("SELECT t.a, g FROM t FULL JOIN generate_series(1, t.a) AS s(g) ON true", "FULL JOIN of a table function", 32),
])
def test_other_joins_of_a_correlated_series_are_refused_by_name(sql, message, column):
    with pytest.raises(PlanError) as info:
        session_with_tables(TABLES, device="cpu").sql(sql)
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)
