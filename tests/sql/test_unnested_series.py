"""A series reading another FROM item's columns: ``FROM t, generate_series(1, t.n) g(x)`` against DuckDB (issue 30).

DuckDB evaluates such a table function per row of the items before it (an implicit LATERAL join); the engine plans
it as an Unnest over them (gpu_engine/sql/series_sources.py ``unnested``, gpu_engine/operators/unnest.py): each row
repeated once per element of its own series. Covered: ``range`` and ``generate_series``, qualified and bare
columns, negative and per-row steps, NULL arguments (no rows), empty inputs, int64 edges, WHERE conditions on the
series and on the items, aggregates, a series over a join, over a derived table whose column only the series reads,
over a CTE, one series reading another, inside a derived table and an EXISTS, output split over batches and
drivers. Refusals name the construct and position: a series reading an outer query's column, under an outer join,
over timestamps; a zero step raises as DuckDB's.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, session_with_tables

from gpu_engine.errors import ExecutionError, PlanError
from gpu_engine.plans.nodes import UnnestNode, walk_plan

_BIG = 9223372036854775807
TABLES = {
    "t": pa.table({"n": pa.array([3, None, 0, 2, -1, 5], pa.int64()),
                   "st": pa.array([1, 1, None, 2, -1, 3], pa.int32()),
                   "s": pa.array(["a", "b", None, "a", "c", "b"])}),
    "edges": pa.table({"lo": pa.array([_BIG - 4, -_BIG - 1, 0], pa.int64()),
                       "hi": pa.array([_BIG, -_BIG + 1, 0], pa.int64()),
                       "st": pa.array([2, 1, _BIG], pa.int64())}),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT t.n, g.x FROM t, generate_series(1, t.n) g(x)",
    "SELECT t.n, r.range FROM t, range(t.n) r",
    "SELECT * FROM t, generate_series(1, t.n)",
    "SELECT t.n, r FROM t, range(n) r",
    "SELECT t.n, t.st, g.x FROM t, generate_series(10, t.n, t.st) g(x)",
    "SELECT t.n, g.x FROM t, range(t.n, -3, -2) g(x)",
    "SELECT t.n, g.x FROM t, generate_series(1, t.n) g(x) WHERE g.x > 1 AND t.s <> 'c'",
    "SELECT t.s, count(*) AS c, sum(g.x) AS total FROM t, generate_series(1, t.n) g(x) GROUP BY t.s",
    "SELECT a.x, b.y FROM t, generate_series(1, t.n) a(x), generate_series(a.x, 3) b(y)",
    "SELECT t.s, g.x FROM t JOIN t AS u ON t.s = u.s, generate_series(u.n, t.n) g(x)",
    "SELECT g.x FROM (SELECT n, s FROM t) d, generate_series(1, d.n) g(x) WHERE d.s <> 'b'",
    "WITH c AS (SELECT n + 1 AS m FROM t) SELECT g.x FROM c, range(m) g(x)",
    "SELECT count(*) AS c FROM (SELECT t.n, g.x FROM t, generate_series(1, t.n) g(x)) q WHERE q.x = 2",
    "SELECT t.n FROM t WHERE EXISTS (SELECT 1 FROM t AS u, generate_series(1, u.n) g(y) WHERE g.y = t.n + 1)",
    "SELECT count(*) AS c, sum(g.x) AS total FROM t, generate_series(1, t.n * 1000) g(x)",
    "SELECT e.n, g.x FROM e, generate_series(1, e.n) g(x)",
    "SELECT count(*) AS c FROM e, range(e.n) g",
    "SELECT edges.lo, g.x FROM edges, generate_series(edges.lo, edges.hi, edges.st) g(x)",
    "SELECT edges.lo, g.x FROM edges, range(edges.hi, edges.lo, -edges.st) g(x)",
    "SELECT t.n, g.x FROM t, generate_series(1, t.n) g(x) ORDER BY t.n DESC, g.x LIMIT 4",
]
SIMULATED = [QUERIES[4], QUERIES[15]]


def _session(device_name: str, drivers: int = 1, batch_rows: int = 1 << 16, fuse: bool = True):
    return session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=batch_rows, fuse=fuse)


def _check(queries, session, reference):
    assert_queries_match_duckdb(session, reference, queries, ordered=lambda sql: "ORDER BY" in sql, exact_types=True)


@pytest.mark.parametrize("drivers, batch_rows", [(1, 1 << 16), (2, 3)], ids=["drivers1", "drivers2-batches3"])
def test_unnested_series_match_duckdb_on_cpu(drivers, batch_rows, reference):
    """Unfused: the Unnest is never fused, and compiling the kernels of the stretches around it is what fused
    queries elsewhere test (the cuda-sim case below keeps fusion on)."""
    _check(QUERIES, _session("cpu", drivers, batch_rows, fuse=False), reference)


def test_unnested_series_match_duckdb_on_each_device(device_name, reference):
    _check(SIMULATED, _session(device_name, 2, 2), reference)


def test_a_correlated_series_is_an_unnest_node_and_round_trips_through_json():
    from gpu_engine.plans.plan_builder import PlanBuilder
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json

    session = _session("cpu")
    plan = session.sql_plan("SELECT t.n, g.x FROM t, generate_series(1, t.n) g(x)")
    assert sum(isinstance(node, UnnestNode) for node in walk_plan(plan)) == 1
    rows = session.execute(plan_from_json(plan_to_json(plan)))
    assert sorted(rows.column("x").to_pylist()) == [1, 1, 1, 2, 2, 2, 3, 3, 4, 5]
    built = PlanBuilder({"t": TABLES["t"].schema}).table_scan("t", ["n"]).unnest_series("n", "4", name="k").plan()
    assert session.execute(built).column("k").to_pylist() == [3, 0, 1, 2, 3, 2, 3, -1, 0, 1, 2, 3]
    assert "Unnest[" in session.explain(built)
    with pytest.raises(PlanError, match="already a column"):
        PlanBuilder({"t": TABLES["t"].schema}).table_scan("t", ["n"]).unnest_series("1", "n", name="n")


@pytest.mark.parametrize("sql, message, column", [
    ("SELECT t.n, (SELECT count(*) FROM generate_series(1, t.n)) AS c FROM t",
     "generate_series(...) reads t.n, not a column of a FROM item before it", 56),
    ("SELECT t.n, g.x FROM t LEFT JOIN t u ON u.n = t.n, generate_series(1, t.n) g(x)",
     "reading another FROM item's columns (FROM t, generate_series(1, t.n)) in a query with outer joins", 78),
    ("SELECT t.n, g.x FROM t, generate_series(TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-02', t.n * INTERVAL 1 DAY) "
     "g(x)", "over timestamps reading another FROM item's columns", 25),
    ("SELECT t.n, g.x FROM t, generate_series(1, t.s) g(x)", "generate_series(int32, string, int32) has no overload",
     25),
])
def test_series_the_engine_cannot_plan_are_refused_with_their_position(sql, message, column):
    with pytest.raises(PlanError) as info:
        _session("cpu").sql(sql)
    assert message in str(info.value) and f"column {column})" in str(info.value), str(info.value)


def test_a_zero_step_on_a_row_raises_as_duckdb_does(reference):
    sql = "SELECT t.n, g.x FROM t, generate_series(1, t.n, t.st - 1) g(x)"
    with pytest.raises(Exception, match="interval cannot be 0"):
        reference.sql(sql).fetchall()
    with pytest.raises(ExecutionError, match="interval cannot be 0"):
        _session("cpu").sql(sql)
