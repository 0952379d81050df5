"""SQL GROUPING SETS, ROLLUP, CUBE and grouping() (issue 30 item 3) against DuckDB.

Planned as a GroupId under one aggregation keyed on the group id (gpu_engine/sql/grouping_sets.py). Checked:
NULL keys in the data (their groups apart from the rolled-up NULLs), plain and dictionary strings, a set
written twice, CUBE of three keys, a GROUP BY item combined with ROLLUP, expression keys and aliases, a key
also aggregated, grouping() in SELECT, HAVING, ORDER BY and CASE, empty input (DuckDB keeps one row per set
without keys), derived tables and CTEs over the result, at three drivers over batches of 5 rows, unfused (the
planning is under test; no generated kernel to compile); a subset covering each aggregate and key kind, the
DISTINCT rewrite and HAVING runs fused on cpu, and a few of those on the simulator (it is an interpreter).
Constructs still unplanned are refused by name.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from duckdb_reference import assert_queries_match_duckdb, rows_mismatch, session_with_tables

from gpu_engine.errors import PlanError

TABLES = {
    "t": pa.table({
        "a": pa.array([1, None, 1, 2, None, 2, 1, 3], pa.int32()),
        "b": pa.array(["x", "y", None, "x", None, "z", "x", "y"]).dictionary_encode(),
        "s": pa.array(["p", "q", "p", None, "q", "p", None, "r"]),
        "c": pa.array([1, 2, 3, 4, 5, 6, None, 8], pa.int64()),
        "d": pa.array([1.5, None, 2.25, -1.0, 0.5, 3.0, 7.0, 1.0], pa.float64()),
        "m": pa.array([100, 250, None, 75, 5, 990, 12, 1], pa.decimal128(9, 2)),
    }),
}
TABLES["e"] = TABLES["t"].slice(0, 0)

QUERIES = [
    "SELECT a, b, sum(c) AS s, count(*) AS n, grouping(a, b) AS g FROM t GROUP BY ROLLUP (a, b)",
    "SELECT a, b, s, count(*) AS n, avg(d) AS av, min(m) AS mn FROM t GROUP BY CUBE (a, b, s)",
    "SELECT a, s, sum(c) AS total FROM t GROUP BY GROUPING SETS ((a, s), (a), (s), ())",
    # A set written twice gives its rows twice (DuckDB, PostgreSQL); () twice two grand totals.
    "SELECT a, sum(c) AS total FROM t GROUP BY GROUPING SETS ((a), (a), (), ())",
    # The dictionary-encoded b reaches the aggregation first as the all-NULL column of set (a).
    "SELECT a, b, count(*) AS n, sum(c) AS total FROM t GROUP BY GROUPING SETS ((a), (b))",
    # A plain key combines with each set (a cross product); several items too.
    "SELECT a, b, sum(c) AS total, grouping(b) AS g FROM t GROUP BY a, ROLLUP (b)",
    "SELECT a, b, s, count(*) AS n FROM t GROUP BY ROLLUP (a), CUBE (b, s)",
    "SELECT a, b, s, count(*) AS n, grouping(a, b, s) AS g FROM t GROUP BY ROLLUP ((a, b), s)",
    "SELECT a, b, count(*) AS n FROM t GROUP BY GROUPING SETS (ROLLUP (a, b), (b))",
    # Expression keys, SELECT aliases as keys, a key aggregated too (its values, not the set's NULLs).
    "SELECT a + 1 AS x, sum(c) AS total FROM t GROUP BY ROLLUP (a + 1)",
    "SELECT a * 2 AS x, b AS y, count(*) AS n FROM t GROUP BY ROLLUP (x, y)",
    "SELECT a, sum(a) AS sa, count(a) AS ca FROM t GROUP BY ROLLUP (a)",
    # grouping() in HAVING, ORDER BY, CASE; a plain GROUP BY with grouping().
    "SELECT a, b, sum(c) AS total FROM t GROUP BY ROLLUP (a, b) HAVING grouping(b) = 1 OR sum(c) > 5",
    "SELECT a, b, sum(c) AS total, grouping(a) + grouping(b) AS lvl FROM t GROUP BY ROLLUP (a, b) "
    "ORDER BY grouping(a) + grouping(b), a NULLS FIRST, b NULLS FIRST",
    "SELECT CASE WHEN grouping(b) = 0 THEN b ELSE 'all' END AS label, a, count(*) AS n FROM t "
    "GROUP BY ROLLUP (a, b)",
    "SELECT a, grouping(a) AS g, count(*) AS n FROM t GROUP BY a",
    "SELECT b, a, grouping(b, a) AS ba, grouping(a, b) AS ab, grouping_id(a) AS ia FROM t GROUP BY CUBE (a, b)",
    "SELECT a, b, sum(c) AS total FROM t GROUP BY ROLLUP (a, b) ORDER BY total DESC, a NULLS FIRST, "
    "b NULLS FIRST LIMIT 4",
    # Empty input: a set without keys still gives its row (count 0, sum NULL); keyed sets give none.
    "SELECT a, sum(c) AS total, count(*) AS n FROM e GROUP BY ROLLUP (a)",
    "SELECT a, b, count(*) AS n FROM e GROUP BY GROUPING SETS ((a), (), (b), ())",
    "SELECT a, count(*) AS n FROM t WHERE c > 100 GROUP BY CUBE (a)",
    # Over derived tables and CTEs, and as one.
    "WITH r AS (SELECT a, b, sum(c) AS total FROM t GROUP BY ROLLUP (a, b)) SELECT count(*) AS n, "
    "sum(total) AS all_total FROM r",
    "SELECT x.a, x.n FROM (SELECT a, count(*) AS n FROM t WHERE d > 0 GROUP BY ROLLUP (a)) x WHERE x.n > 1",
    "SELECT a, count(DISTINCT b) AS nb FROM t GROUP BY ROLLUP (a)",
    "SELECT a, count(DISTINCT b) AS nb FROM e GROUP BY ROLLUP (a)",  # the DISTINCT rewrite keeps the total row
    "SELECT a, b, grouping_id() AS gi FROM t GROUP BY CUBE (a, b)",  # no arguments: every key, in order
    # grouping() of a subquery belongs to it, not to the query around it.
    "SELECT a, (SELECT grouping(x.a) FROM t x GROUP BY ROLLUP (x.a) ORDER BY 1 DESC LIMIT 1) AS g FROM t GROUP BY a",
    # An integer key of a grouping set names a SELECT-list column by position, as DuckDB reads it (was refused as
    # "a constant"); the keys of ROLLUP (a, 2) are those of ROLLUP (a, b), an expression's position its expression.
    "SELECT a, b, count(*) AS n, grouping(a, b) AS g FROM t GROUP BY ROLLUP (a, 2)",
    "SELECT a, b, sum(c) AS total FROM t GROUP BY CUBE (1, 2)",
    "SELECT a, s, sum(c) AS total FROM t GROUP BY GROUPING SETS ((1), (1, 2), ())",
    "SELECT a + 1 AS x, count(*) AS n FROM t GROUP BY ROLLUP (1)",
    "SELECT a, b, count(*) AS n FROM t GROUP BY a, ROLLUP (2)",
]

SIMULATED = [q for q in QUERIES if q.startswith(("SELECT a, b, sum(c) AS s, count(*) AS n, grouping(a, b)",
                                                  "SELECT a, b, count(*) AS n, sum(c) AS total FROM t GROUP BY GROUPING",
                                                  "SELECT CASE WHEN grouping(b) = 0",
                                                  "SELECT a, sum(c) AS total, count(*) AS n FROM e"))]
#: What also runs fused on cpu: the simulator's queries (sum, count, grouping() over int and dictionary keys, a
#: dictionary key all-NULL in one set, a CASE over grouping(), empty input) and CUBE of three keys with avg of a
#: double, min of a decimal and a plain string key, HAVING over grouping() and an aggregate, and count(DISTINCT)
#: (the GroupId repeating rows under one aggregation). Every query of QUERIES runs unfused (CI time: fused, each
#: query compiled its own generated kernels, ~45 s of CPU on a cold cache for what tests/operators/
#: test_fused_aggregation.py and test_group_id_aggregation.py cover kernel by kernel).
FUSED_ON_CPU = SIMULATED + [q for q in QUERIES if q.startswith((
    "SELECT a, b, s, count(*) AS n, avg(d) AS av, min(m) AS mn FROM t GROUP BY CUBE (a, b, s)",
    "SELECT a, b, sum(c) AS total FROM t GROUP BY ROLLUP (a, b) HAVING",
    "SELECT a, count(DISTINCT b) AS nb FROM t GROUP BY"))]


def _check_all(queries, device_name, drivers, batch_rows, reference, fuse=True):
    session = session_with_tables(TABLES, device=device_name, drivers=drivers, batch_rows=batch_rows, fuse=fuse)
    assert_queries_match_duckdb(session, reference, queries,
                                ordered=lambda sql: sql.rfind("ORDER BY") > sql.rfind(")"))  # its own, not a subquery's


# One setting (CI time): three drivers over batches of 5 rows also cover partial/final merging; the single-driver
# path runs in tests/operators/test_group_id.py. Unfused: FUSED_ON_CPU.
@pytest.mark.parametrize("drivers, batch_rows", [(3, 5)], ids=["drivers3-batches5"])
def test_grouping_sets_match_duckdb_on_cpu(drivers, batch_rows, reference):
    _check_all(QUERIES, "cpu", drivers, batch_rows, reference, fuse=False)


def test_grouping_sets_match_duckdb_on_each_device(device_name, reference):
    assert len(SIMULATED) == 4 and len(FUSED_ON_CPU) == 7
    _check_all(FUSED_ON_CPU if device_name == "cpu" else SIMULATED, device_name, 2, 3, reference)


def test_rolled_up_nulls_and_null_keys_are_different_groups():
    """Regression: a NULL key of the data and the NULL of a set that leaves the key out are two rows."""
    from gpu_engine import Session

    session = Session(device="cpu", drivers=2, batch_rows=2)
    session.register("t", TABLES["t"])
    result = session.sql("SELECT a, grouping(a) AS g, count(*) AS n FROM t GROUP BY ROLLUP (a) ORDER BY g, a")
    assert result.to_pylist()[-2:] == [{"a": None, "g": 0, "n": 2}, {"a": None, "g": 1, "n": 8}]


@pytest.mark.parametrize("dialect", ["spark", "duckdb"])
@pytest.mark.parametrize("trailing, standard", [("WITH ROLLUP", "ROLLUP (a, b)"), ("WITH CUBE", "CUBE (a, b)")])
def test_group_by_with_rollup_or_cube_groups_as_rollup_or_cube(dialect, trailing, standard, reference):
    """Regression: sqlglot keeps Spark's trailing WITH ROLLUP beside the GROUP BY list; it was planned as a plain
    GROUP BY a, b (4 groups of 7 rows fewer), silently."""
    from gpu_engine import Session

    session = Session(device="cpu", drivers=2, batch_rows=3)
    session.register("t", TABLES["t"])
    actual = session.sql(f"SELECT a, b, count(*) AS n FROM t GROUP BY a, b {trailing}", dialect=dialect)
    problem = rows_mismatch(actual, reference.sql(f"SELECT a, b, count(*) AS n FROM t GROUP BY {standard}")
                            .to_arrow_table())
    assert problem is None, problem


def test_rollup_plans_a_group_id_under_one_aggregation():
    """A DISTINCT aggregate: the GroupId repeats the input rows under one aggregation."""
    from gpu_engine.plans.nodes import AggregationNode, GroupIdNode, walk_plan
    from gpu_engine.sql import plan_sql

    catalog = {name: table.schema for name, table in TABLES.items()}
    plan = plan_sql("SELECT a, b, count(DISTINCT c) AS s FROM t GROUP BY ROLLUP (a, b)", catalog)
    group_ids = [n for n in walk_plan(plan) if isinstance(n, GroupIdNode)]
    assert len(group_ids) == 1
    assert [len(kept) for kept in group_ids[0].grouping_sets] == [2, 1, 0]
    assert not any(isinstance(n, AggregationNode) for n in walk_plan(group_ids[0].source))


def test_rollup_of_decomposable_aggregates_repeats_groups_not_rows():
    """sum/count/min/max/avg: a PARTIAL aggregation by every key under the GroupId, an INTERMEDIATE step over
    it (the grand total's row over an empty input) and the FINAL merge; the GroupId repeated every input
    row once per set (TPC-DS q22: 11.7M rows aggregated by four strings)."""
    from gpu_engine.plans.nodes import AggregationNode, AggregationStep, GroupIdNode, walk_plan
    from gpu_engine.sql import plan_sql

    catalog = {name: table.schema for name, table in TABLES.items()}
    plan = plan_sql("SELECT a, b, sum(c) AS s, avg(c) AS m, count(*) AS n FROM t GROUP BY ROLLUP (a, b)", catalog)
    group_ids = [n for n in walk_plan(plan) if isinstance(n, GroupIdNode)]
    assert len(group_ids) == 1 and [len(kept) for kept in group_ids[0].grouping_sets] == [2, 1, 0]
    below = [n for n in walk_plan(group_ids[0].source) if isinstance(n, AggregationNode)]
    assert [n.step for n in below] == [AggregationStep.PARTIAL]
    above = [n for n in walk_plan(plan) if isinstance(n, AggregationNode) and n not in below]
    assert sorted(n.step.value for n in above) == ["final", "intermediate"]
    assert [n.global_grouping_sets for n in above if n.step is AggregationStep.INTERMEDIATE] == [(2,)]
    assert all(n.grouping_keys[-1] == group_ids[0].group_id_name for n in above)


def _plan_error(sql: str) -> str:
    with pytest.raises(PlanError) as info:
        session_with_tables(TABLES, device="cpu").sql(sql)
    return str(info.value)


@pytest.mark.parametrize("sql, message", [
    ("SELECT a, grouping(c) AS g FROM t GROUP BY ROLLUP (a)",
     "the argument t.c of grouping() must be a grouping column (a key of the GROUP BY)"),
    # DuckDB keeps a position repeating a written key as a key of its own, the SELECT list reading that one (its
    # ROLLUP (a, 1) gives a NULL in the set (a)): refused, not answered otherwise.
    ("SELECT a, count(*) AS n FROM t GROUP BY ROLLUP (a, 1)",
     "GROUP BY position 1 repeats the key t.a written in the same GROUP BY"),
    ("SELECT a, count(*) AS n FROM t GROUP BY ROLLUP (a, 3)",
     "GROUP BY position 3 is out of range: the SELECT list has 2 columns (1 to 2)"),
    ("SELECT a, count(*) AS n FROM t GROUP BY ROLLUP (a, 'x')", "GROUP BY a constant in a grouping set"),
    ("SELECT a, count(*) AS n FROM t GROUP BY GROUPING SETS (GROUPING SETS ((a)), ())",
     "GROUPING SETS nested in GROUPING SETS"),
    ("SELECT count(*) AS n FROM t GROUP BY CUBE (a, b, s, c, d, m, a, b, s, c, d, m, a)",
     "CUBE of 13 items makes 8192 grouping sets"),
    ("SELECT a, b, count(*) AS n FROM t GROUP BY ROLLUP (a)", "column t.b is not available here"),
    ("SELECT a, count(*) AS n FROM t GROUP BY a WITH TOTALS", "GROUP BY ... WITH TOTALS"),
])
def test_grouping_sets_the_engine_cannot_plan_are_refused_by_name(sql, message):
    assert message in _plan_error(sql)


@pytest.mark.parametrize("table", ["t", "e"])
def test_rollup_across_tasks_of_a_cluster_matches_duckdb(table, reference):
    """Partial aggregation in three leaf Tasks, final in two: the group id routes like any key; empty input
    still gives the grand total once (each leaf adds an empty one, the final step merges them)."""
    from gpu_engine import Session
    from gpu_engine.cluster.local_cluster import LocalCluster

    session = Session(device="cpu", drivers=1)
    session.register(table, TABLES[table], split_rows=2)
    sql = f"SELECT a, b, sum(c) AS s, count(*) AS n, grouping(a, b) AS g FROM {table} GROUP BY ROLLUP (a, b)"
    actual = LocalCluster(session, (3, 2, 1)).execute(session.sql_plan(sql))
    problem = rows_mismatch(actual, reference.sql(sql).to_arrow_table())
    assert problem is None, problem
