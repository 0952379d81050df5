"""The composition fuzz (tests/sql/compose_queries.py: filters, projections, outer joins, [NOT] EXISTS / IN,
aggregations with grouping sets, windows, set operations, DISTINCT and LIMIT nested in derived tables) on fixed
seeds, and the queries it found answered otherwise than DuckDB.

A few seeds of each shape run on ``cpu``; the regressions run on every device (tiny tables).
bench/sql_fuzz_breadth.py --generator compose runs thousands of seeds.
"""

from __future__ import annotations

import pytest

from breadth_queries import breadth_session, reference_connection
from compose_queries import SHAPES, generate_case, run_case, tables
from duckdb_reference import rows_mismatch
from gpu_engine import Session

CPU_SEEDS = range(40, 40 + len(SHAPES))  # one of each shape (seed % len(SHAPES) picks it)

#: [NOT] IN / [NOT] EXISTS comparing numeric keys of different layouts (integer, decimal, double): refused
#: ("every correlation equality compares different types", "NOT IN compares ...") where DuckDB compares both
#: sides as their common type.
MIXED_KEY_SEMI_JOINS = [
    "SELECT id, i FROM t WHERE i IN (SELECT d FROM u)",
    "SELECT id, i FROM t WHERE i NOT IN (SELECT d FROM u WHERE d IS NOT NULL)",
    "SELECT id, i FROM t WHERE i NOT IN (SELECT d FROM u)",
    "SELECT id, d FROM t WHERE d NOT IN (SELECT round(d, 1) FROM u WHERE d < 50)",
    "SELECT id, f FROM t WHERE f NOT IN (SELECT j FROM u WHERE j IS NOT NULL)",
    "SELECT id, d FROM t x WHERE EXISTS (SELECT 1 FROM u y WHERE y.f = x.d)",
    "SELECT id, j FROM t x WHERE NOT EXISTS (SELECT 1 FROM u y WHERE y.f = x.j)",
    "SELECT id, j FROM t x WHERE NOT EXISTS (SELECT 1 FROM u y WHERE y.d = x.j - 1)",
    "SELECT id FROM t x WHERE x.i NOT IN (SELECT y.f FROM u y WHERE y.k = x.k)",
    "SELECT id FROM t x WHERE x.i IN (SELECT y.d FROM u y WHERE y.k = x.k) OR x.b",
    "SELECT id FROM t x WHERE x.i NOT IN (SELECT y.d FROM e y)",
]


@pytest.fixture(scope="module")
def compose_data():
    data = tables()
    connection = reference_connection(data)
    yield data, connection
    connection.close()


def test_generated_composed_queries_match_duckdb(compose_data):
    data, connection = compose_data
    outcomes = [run_case(generate_case(seed), breadth_session(seed, "cpu", data, fuse=False), connection)
                for seed in CPU_SEEDS]
    bad = [o for o in outcomes if o.status not in ("ok", "refused", "both_raised")]
    assert not bad, "\n".join(f"seed {o.case.seed} ({o.status}): {o.case.sql}\n  {o.detail}" for o in bad)


@pytest.mark.parametrize("sql", MIXED_KEY_SEMI_JOINS)
def test_semi_joins_on_keys_of_different_numeric_types_match_duckdb(compose_data, device_name, sql):
    data, connection = compose_data
    session = Session(device=device_name, batch_rows=7)
    for name in ("t", "u", "e"):
        session.register(name, data[name], split_rows=5)
    problem = rows_mismatch(session.sql(sql), connection.sql(sql).to_arrow_table())
    assert problem is None, problem


def test_the_compose_generator_covers_its_shapes_and_is_reproducible():
    cases = [generate_case(seed) for seed in range(200)]
    assert {case.shape for case in cases} == set(SHAPES)
    assert generate_case(7) == generate_case(7)
    text = " ".join(case.sql for case in cases)
    for construct in ("FULL JOIN", "NOT EXISTS", "NOT IN (SELECT", "GROUPING SETS", "ROLLUP", "OVER (", "ROWS BETWEEN",
                      "RANGE BETWEEN", "INTERSECT", "EXCEPT", "SELECT DISTINCT", "LIMIT", "WITH w AS", "grouping("):
        assert construct in text, construct
    assert any(case.ordered for case in cases)


#: A conjunct that fails (a division by zero, a text that does not parse, an overflow) on rows another conjunct
#: drops: DuckDB evaluates each conjunct on the rows the cheaper ones kept, so it answers; the engine evaluated
#: every conjunct on every row and failed.
GUARDED_CONJUNCTS = [
    "SELECT a, b FROM g WHERE b <> 0 AND a % b = 1",
    "SELECT a, b FROM g WHERE a // b > 0 AND b <> 0",
    "SELECT a, s FROM g WHERE s IN ('12', '-3') AND CAST(s AS INTEGER) > 0",
    "SELECT a, s FROM g WHERE CAST(s AS INTEGER) > 0 AND a < 100 AND s <> 'x'",
    "SELECT a FROM g WHERE a * 4398046511104 > 0 AND a < 100 AND b IS NOT NULL",
    "SELECT * FROM (SELECT a % b AS m, a FROM g WHERE b > 0) q WHERE m < 2 AND a > 0",
]


@pytest.mark.parametrize("fuse,mode", [(False, "inline"), (True, "lowest"), (True, "inline")],
                         ids=["eager", "lowest-tier", "compiled"])
def test_a_conjunct_fails_no_row_another_conjunct_drops(device_name, fuse, mode):
    import pyarrow as pa

    from duckdb_reference import duckdb_table, duckdb_with_tables
    from gpu_engine.errors import ExecutionError

    g = pa.table({"a": pa.array([7, 5, 3, 2**40, None, 9], pa.int64()),
                  "b": pa.array([3, 0, 2, 0, 4, None], pa.int64()),
                  "s": pa.array(["12", "x", "-3", "y", None, "12"])})
    session = Session(device=device_name, drivers=1, batch_rows=4, fuse=fuse, compile_mode=mode)
    session.register("g", g)
    duckdb = duckdb_with_tables({"g": g})
    for sql in GUARDED_CONJUNCTS:
        problem = rows_mismatch(session.sql(sql), duckdb_table(duckdb, sql))
        assert problem is None, f"{sql}: {problem}"
    # A row every conjunct keeps until the failing one: the error is the query's (and DuckDB's).
    with pytest.raises(ExecutionError, match="[Dd]ivision by zero|[Dd]ivide by zero"):
        session.sql("SELECT a FROM g WHERE a > 1 AND a % b = 1")


#: ORDER BY ... LIMIT 0 in a subquery over an expression that fails on its rows (i is 0 on some): DuckDB never
#: computes the input of a LIMIT 0; the engine's TopN read all of it (a plain LIMIT 0 finished at once).
LIMIT_ZERO = [
    "SELECT * FROM (SELECT k % i AS c FROM t ORDER BY c LIMIT 0) q ORDER BY c LIMIT 5",
    "SELECT count(*) AS n, max(c) AS m FROM (SELECT k % i AS c FROM t ORDER BY c DESC LIMIT 0) q",
    "SELECT u.id, q.c FROM (SELECT k, k % i AS c FROM t ORDER BY c LIMIT 0) q RIGHT JOIN u ON q.k = u.k",
]


@pytest.mark.parametrize("sql", LIMIT_ZERO)
def test_an_ordered_limit_zero_computes_nothing_of_its_input(compose_data, device_name, sql):
    data, connection = compose_data
    session = Session(device=device_name, drivers=2, batch_rows=7)
    for name in ("t", "u"):
        session.register(name, data[name], split_rows=5)
    problem = rows_mismatch(session.sql(sql), connection.sql(sql).to_arrow_table())
    assert problem is None, problem


#: A grouping over the rows of a DISTINCT on more keys: hashed by (c7, c8), the DISTINCT's rows are not hashed by
#: c8, so the count by c8 needs an exchange (a planner change that skipped it counted each date once per driver).
DISTINCT_BELOW_GROUPING = [
    "SELECT c8, count(DISTINCT c7) AS n FROM (SELECT DISTINCT d AS c7, dt AS c8 FROM t) q GROUP BY c8",
    "SELECT c8, count(c7) AS n, count(DISTINCT c7) AS m FROM (SELECT DISTINCT d AS c7, dt AS c8, k FROM t) q "
    "GROUP BY c8",
    "SELECT k, count(DISTINCT s) AS n FROM (SELECT DISTINCT k, s, g FROM t UNION ALL SELECT DISTINCT k, s, g FROM u) q "
    "GROUP BY k",
]


@pytest.mark.parametrize("drivers", [2, 3])
def test_a_grouping_over_a_distinct_on_more_keys_repartitions(compose_data, drivers):
    data, connection = compose_data
    session = Session(device="cpu", drivers=drivers, batch_rows=7, fuse=False)  # a planning error: no kernels
    for name in ("t", "u"):
        session.register(name, data[name], split_rows=5)
    for sql in DISTINCT_BELOW_GROUPING:
        problem = rows_mismatch(session.sql(sql), connection.sql(sql).to_arrow_table())
        assert problem is None, f"{sql}: {problem}"


#: A derived table's projection nobody reads is pruned before planning: one neither grouped nor aggregated there
#: was never checked, so the engine answered where DuckDB raises a binder error (compose seeds 1615, 2135).
UNGROUPED_PRUNED = [
    "SELECT x.b FROM (SELECT k AS a, i AS b FROM t GROUP BY i) x",
    "SELECT x.b FROM (SELECT q.k AS a, q.i AS b FROM (SELECT k, i FROM t) q GROUP BY GROUPING SETS ((q.i), ())) x",
    "SELECT x.b FROM (SELECT k + i AS a, count(*) AS b FROM t) x",
    "WITH w AS (SELECT k AS a, i AS b, count(*) AS n FROM t GROUP BY ROLLUP (i)) SELECT b, n FROM w",
]
#: Their valid neighbours still answer (grouped expressions, aggregates, positions, GROUP BY ALL, windows).
GROUPED_PRUNED = [
    "SELECT x.b FROM (SELECT k + 1 AS a, i AS b FROM t GROUP BY i, k + 1) x",
    "SELECT x.b FROM (SELECT sum(k) AS a, i AS b FROM t GROUP BY i) x",
    "SELECT x.b FROM (SELECT k AS a, i AS b FROM t GROUP BY ALL) x",
    "SELECT x.b FROM (SELECT k AS a, i AS b FROM t GROUP BY 1, 2) x",
    "SELECT x.ii FROM (SELECT k AS kk, i AS ii FROM t GROUP BY kk, ii) x",
    "SELECT x.b FROM (SELECT coalesce(k, 0) * 2 AS a, i AS b FROM t GROUP BY coalesce(k, 0), i) x",
    "SELECT x.b FROM (SELECT max(k) FILTER (WHERE j > 1) AS a, i AS b FROM t GROUP BY i) x",
    "SELECT y.id FROM t y WHERE y.i > (SELECT x.b FROM (SELECT y.k AS a, max(i) AS b FROM u) x)",
]


def test_a_pruned_projection_neither_grouped_nor_aggregated_is_refused_as_duckdb_refuses(compose_data):
    import duckdb

    from gpu_engine.sql.errors import SqlError

    data, connection = compose_data
    session = Session(device="cpu")
    for name in ("t", "u"):
        session.register(name, data[name])
    for sql in UNGROUPED_PRUNED:
        with pytest.raises(duckdb.Error):
            connection.sql(sql).to_arrow_table()
        with pytest.raises(SqlError, match="columns must be grouped or aggregated"):
            session.sql(sql)
    for sql in GROUPED_PRUNED:
        problem = rows_mismatch(session.sql(sql), connection.sql(sql).to_arrow_table())
        assert problem is None, f"{sql}: {problem}"
