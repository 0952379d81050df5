"""``LATERAL`` subqueries in FROM (issue 30 item 7) against DuckDB: decorrelated into joins (gpu_engine/sql/lateral_joins.py).

Forms: a comma, CROSS, inner and LEFT JOIN LATERAL that filters and projects (its correlated conjuncts move to
the ON), the top-N per outer row (ORDER BY ... LIMIT / OFFSET numbered per correlation key), an output reading an
outer column (computed outside), an aggregating LATERAL (one row per outer row: correlated scalar subqueries,
counts of no rows 0), GROUP BY / DISTINCT / HAVING inside (grouped per correlation key too), two LATERALs, an
uncorrelated one, NULL correlation keys, an empty outer table. Refused by name with their position: a LIMIT or a
grouping correlated by other than equalities, a window inside, a grouped output reading an outer column.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import PlanError

TABLES = {
    "t": pa.table({"n": pa.array([3, None, 0, 2, 3], pa.int64()), "s": pa.array(["a", "b", None, "d", "e"])}),
    "l": pa.table({"k": pa.array([3, 3, None, 2, 5, 3], pa.int64()),
                   "x": pa.array([1.5, 2.5, 3.0, None, 4.0, 0.5])}),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT t.n, w.x FROM t, LATERAL (SELECT l.x FROM l WHERE l.k = t.n) w",
    "SELECT n, x FROM t, LATERAL (SELECT x FROM l WHERE k = n) w",
    "SELECT t.n, w.x FROM t JOIN LATERAL (SELECT l.x FROM l WHERE l.k = t.n AND l.x > 1) w ON true",
    "SELECT t.n, w.x FROM t LEFT JOIN LATERAL (SELECT l.x FROM l WHERE l.k = t.n) w ON true",
    "SELECT t.n, w.x FROM t LEFT JOIN LATERAL (SELECT l.x FROM l WHERE l.k = t.n) w ON w.x > 2",
    "SELECT t.n, w.x FROM t CROSS JOIN LATERAL (SELECT l.x FROM l WHERE l.k >= t.n) w",
    "SELECT t.n, w.x FROM t, LATERAL (SELECT l.x FROM l WHERE l.k = t.n ORDER BY l.x DESC LIMIT 1) w",
    "SELECT t.n, w.x FROM t, LATERAL (SELECT l.x FROM l WHERE l.k = t.n ORDER BY x LIMIT 1 OFFSET 1) w",
    "SELECT t.n, w.x FROM t LEFT JOIN LATERAL (SELECT l.x FROM l WHERE l.k = t.n ORDER BY l.x NULLS FIRST LIMIT 2) w "
    "ON true",
    "SELECT t.n, w.x FROM t, LATERAL (SELECT l.x FROM l ORDER BY l.x LIMIT 2) w",
    "SELECT t.n, w.y, w.x FROM t, LATERAL (SELECT l.x, l.x * t.n AS y FROM l WHERE l.k = t.n) w",
    "SELECT n, y FROM t, LATERAL (SELECT t.n + 1 AS y) s",
    "SELECT t.n, w.s, w.c FROM t, LATERAL (SELECT sum(l.x) AS s, count(*) AS c FROM l WHERE l.k = t.n) w",
    "SELECT t.n, w.c FROM t LEFT JOIN LATERAL (SELECT count(l.x) AS c FROM l WHERE l.k = t.n) w ON true "
    "WHERE w.c > 0",
    "SELECT t.n, w.m FROM t, LATERAL (SELECT max(l.x) AS m FROM l WHERE l.k = t.n) w ORDER BY w.m NULLS FIRST, t.n",
    "SELECT t.s, w.x FROM t JOIN LATERAL (SELECT l.x FROM l WHERE l.k = t.n AND l.x IS NOT NULL) w ON w.x < 3",
    "SELECT t.n, w.x, v.x AS x2 FROM t, LATERAL (SELECT l.x FROM l WHERE l.k = t.n) w, "
    "LATERAL (SELECT l.x FROM l WHERE l.k = t.n + 2) v",
    "SELECT w.x FROM e, LATERAL (SELECT l.x FROM l WHERE l.k = e.n) w",
    "SELECT w.c FROM e, LATERAL (SELECT count(*) AS c FROM l WHERE l.k = e.n) w",
    "SELECT t.n, w.x FROM t, LATERAL (SELECT l.x FROM l WHERE l.k = t.n OR l.x > 3) w",
    "SELECT count(*) AS c, sum(w.x) AS s FROM t, LATERAL (SELECT l.x FROM l WHERE l.k = t.n) w WHERE w.x IS NOT NULL",
    "SELECT t.n, w.k, w.c FROM t, LATERAL (SELECT l.k, count(*) AS c FROM l WHERE l.k = t.n GROUP BY l.k) w",
    "SELECT t.n, w.c FROM t, LATERAL (SELECT count(*) AS c FROM l WHERE l.k = t.n GROUP BY l.x > 2) w",
    "SELECT t.n, w.x FROM t, LATERAL (SELECT DISTINCT l.x > 2 AS x FROM l WHERE l.k = t.n) w",
    "SELECT t.n, w.s FROM t LEFT JOIN LATERAL (SELECT sum(l.x) AS s FROM l WHERE l.k = t.n GROUP BY l.k "
    "HAVING sum(l.x) > 3) w ON true",
    "SELECT t.n, w.y, v.c FROM t, LATERAL (SELECT t.n * 2 AS y) w, "
    "LATERAL (SELECT count(*) AS c FROM l WHERE l.k = w.y - t.n) v",
    "SELECT t.n, w.x, v.x AS vx FROM t, LATERAL (SELECT l.x, l.k FROM l WHERE l.k = t.n) w, "
    "LATERAL (SELECT l.x FROM l WHERE l.x = w.x) v",
]

SIMULATED = [QUERIES[0], QUERIES[6], QUERIES[12]]


def _session(device_name: str, drivers: int = 1, batch_rows: int = 1 << 16, fuse: bool = True):
    return session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=batch_rows, fuse=fuse)


def _check_all(queries, session, reference):
    assert_queries_match_duckdb(session, reference, queries, ordered=lambda sql: "ORDER BY w.m" in sql,
                                exact_types=True)


@pytest.mark.parametrize("drivers, batch_rows", [(1, 1 << 16), (2, 2)], ids=["drivers1", "drivers2-batches2"])
def test_lateral_joins_match_duckdb_on_cpu(drivers, batch_rows, reference):
    # Unfused (CI time: fused, each query compiles its own kernels); the rewrites are plans, the same fused or not,
    # and the subset below runs fused on every device.
    _check_all(QUERIES, _session("cpu", drivers, batch_rows, fuse=False), reference)


def test_lateral_joins_match_duckdb_on_each_device(device_name, reference):
    _check_all(SIMULATED, _session(device_name, 2, 3), reference)


@pytest.mark.parametrize("sql, message", [
    ("SELECT t.n, w.s FROM t, LATERAL (SELECT sum(l.x) AS s FROM l WHERE l.k > t.n GROUP BY l.k) w",
     "GROUP BY or DISTINCT correlated by l.k > t.n"),
    ("SELECT t.n, w.y FROM t, LATERAL (SELECT sum(l.x) + t.n AS y FROM l WHERE l.k = t.n GROUP BY l.k) w",
     "an output reading an outer column"),
    ("SELECT t.n, w.r FROM t, LATERAL (SELECT row_number() OVER () AS r FROM l WHERE l.k = t.n) w", "windows"),
    ("SELECT t.n, w.x FROM t, LATERAL (SELECT l.x FROM l WHERE l.k = t.n ORDER BY abs(l.x - t.n) LIMIT 1) w",
     "LIMIT ordered by an outer column"),
    ("SELECT t.n, w.x FROM t FULL JOIN LATERAL (SELECT l.x FROM l WHERE l.k = t.n) w ON true",
     "must be INNER or LEFT"),
    ("SELECT t.n, w.x FROM t, LATERAL (SELECT l.x FROM l WHERE l.k = t.n UNION ALL SELECT 1.0) w",
     "a LATERAL UNION"),
    ("SELECT t.n, w.x FROM t, LATERAL (SELECT l.x FROM l WHERE l.k > t.n ORDER BY l.x LIMIT 1) w",
     "LIMIT correlated by l.k > t.n"),
    ("SELECT t.n, w.c FROM t LEFT JOIN LATERAL (SELECT count(*) AS c FROM l WHERE l.k = t.n) w ON w.c > 1",
     "LEFT JOIN LATERAL over an aggregating subquery with an ON condition"),
])
def test_lateral_forms_the_engine_cannot_plan_are_refused_by_name_with_their_position(sql, message):
    with pytest.raises(PlanError) as info:
        _session("cpu").sql(sql)
    text = str(info.value)
    assert message in text and "LATERAL" in text and "(line 1, column" in text, text
