"""The optimizer rules over typed plans (gpu_engine.optimizer): plans written naively come out pushed down.

Each case builds a plan by hand as a user would write it — a filter above the join, the projection or the
aggregation it could run below — checks where the rules put each conjunct (the shape), and that the plan's
rows, run by a Session on each device with the rules on, equal DuckDB's answer to the same query. A rule that
moved a conjunct where it is not correct (the NULL side of an outer join, a non-key column of an aggregation, a
grand total) changes those rows; a column pruned that a node reads fails the plan.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.optimizer import optimize_plan
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.explain import format_plan
from gpu_engine.plans.nodes import ValuesNode, walk_plan
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator
from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables

TABLES = {
    "a": pa.table({"k": pa.array([1, 2, 3, None, 2, 5], pa.int64()), "x": pa.array([10, 20, 30, 40, None, 60],
                                                                                    pa.int64())}),
    "b": pa.table({"k2": pa.array([1, 2, 2, None, 7], pa.int64()), "y": pa.array(["p", "q", None, "s", "t"])}),
}
CATALOG = {name: table.schema for name, table in TABLES.items()}


def _shape(plan) -> list[str]:
    """Return explain's lines without schemas: the node kinds, ids and details, indented."""
    return [line.split(" -> ")[0] for line in format_plan(plan, full=True).splitlines()]


def _join(join_type: str, build_filter: str | None = None):
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("b", ["k2", "y"])
    if build_filter:
        build = build.filter(build_filter)
    return PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"]).hash_join(
        ["k"], ["k2"], build.plan(), ["k", "x", "y"], join_type)


def test_a_filter_above_a_project_over_an_inner_join_splits_into_both_sides():
    plan = (_join("inner").project(["k", "x * 2 AS x2", "y"])
            .filter("x2 > 25 AND y <> 'q' AND (x2 > 50 OR y = 'p')").plan())
    assert _shape(optimize_plan(plan)) == [
        "-- Project[3][expressions: (k:k), (x2:(x * 2)), (y:y)]",
        "  -- Filter[4][expression: (((x * 2) > 50) OR (y = 'p'))]",
        "    -- HashJoin[2][INNER k = k2]",
        "      -- Filter[4.1][expression: ((x * 2) > 25)]",
        "        -- TableScan[1][table: a, columns: k, x]",
        "      -- Filter[4.2][expression: (y <> 'q')]",
        "        -- TableScan[0][table: b, columns: k2, y]",
    ]


def test_a_left_join_keeps_filters_on_its_null_side_above_and_merges_filters_below():
    plan = _join("left", build_filter="y IS NOT NULL").filter("y IS NULL AND k > 1").filter("x < 50").plan()
    assert _shape(optimize_plan(plan)) == [  # the two filters above merged (their id: the lower one's)
        "-- Filter[4][expression: (y IS NULL)]",
        "  -- HashJoin[3][LEFT k = k2]",
        "    -- Filter[4.1][expression: ((k > 1) AND (x < 50))]",
        "      -- TableScan[2][table: a, columns: k, x]",
        "    -- Filter[1][expression: (y IS NOT NULL)]",
        "      -- TableScan[0][table: b, columns: k2, y]",
    ]


@pytest.mark.parametrize("join_type", ["full", "right"])
def test_nothing_moves_into_a_side_an_outer_join_pads_with_nulls(join_type):
    plan = _join(join_type).filter("x IS NULL").plan()
    assert optimize_plan(plan) is plan


def test_only_conjuncts_over_group_keys_go_below_an_aggregation():
    plan = (PlanBuilder(CATALOG).table_scan("a", ["k", "x"]).aggregation(["k"], ["sum(x) AS s", "count(*) AS c"])
            .filter("k >= 2 AND s > 25").plan())
    assert _shape(optimize_plan(plan)) == [
        "-- Filter[2][expression: (s > 25)]",
        "  -- Aggregation[1][SINGLE [k] s := sum(x), c := count(*)]",
        "    -- Filter[2.1][expression: (k >= 2)]",
        "      -- TableScan[0][table: a, columns: k, x]",
    ]


def test_a_grand_total_keeps_the_filter_above_it():
    plan = (PlanBuilder(CATALOG).table_scan("a", ["k", "x"]).group_id([["k"], []], ["x"])
            .aggregation(["k", "group_id"], ["sum(x) AS s"]).filter("k = 2").plan())
    assert optimize_plan(plan) is plan


def test_a_union_alls_branches_each_get_the_filter():
    ids = PlanNodeIdGenerator()
    other = PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"]).project(["x AS k", "k AS x"]).plan()
    plan = (PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"]).union_all(other)
            .filter("k > 2").plan())
    optimized = optimize_plan(plan)
    assert _shape(optimized) == [
        "-- LocalPartition[3][ARBITRARY]",
        "  -- Filter[4.1][expression: (k > 2)]",
        "    -- TableScan[2][table: a, columns: k, x]",
        "  -- Project[1][expressions: (k:x), (x:k)]",
        "    -- Filter[4.2][expression: (x > 2)]",
        "      -- TableScan[0][table: a, columns: k, x]",
    ]


def test_an_or_over_both_sides_of_an_inner_join_filters_each_side_by_what_it_implies():
    plan = _join("inner").filter("(x = 10 AND y = 'p') OR (x = 30 AND y = 'q') OR (x > 50 AND y <> 's')").plan()
    assert _shape(optimize_plan(plan)) == [
        "-- Filter[3][expression: ((((x = 10) AND (y = 'p')) OR ((x = 30) AND (y = 'q'))) OR ((x > 50) AND (y <> 's')))]",
        "  -- HashJoin[2][INNER k = k2]",
        "    -- Filter[3.1][expression: (((x = 10) OR (x = 30)) OR (x > 50))]",
        "      -- TableScan[1][table: a, columns: k, x]",
        "    -- Filter[3.2][expression: (((y = 'p') OR (y = 'q')) OR (y <> 's'))]",
        "      -- TableScan[0][table: b, columns: k2, y]",
    ]
    one_sided = _join("inner").filter("(x = 10 AND y = 'p') OR y = 'q'").plan()  # nothing on a in one branch
    assert _shape(optimize_plan(one_sided))[2:4] == [
        "    -- TableScan[1][table: a, columns: k, x]", "    -- Filter[3.1][expression: ((y = 'p') OR (y = 'q'))]"]


def _join_on(join_type: str, condition: str):
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("b", ["k2", "y"]).plan()
    return PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"]).hash_join(
        ["k"], ["k2"], build, ["k", "x", "y"], join_type, filter=condition)


def test_an_or_in_an_inner_joins_own_condition_filters_each_side_but_a_left_joins_does_not():
    condition = "(x = 10 AND y = 'p') OR (x = 30 AND y <> 'q')"
    assert _shape(optimize_plan(_join_on("inner", condition).plan())) == [
        "-- HashJoin[2][INNER k = k2, filter: (((x = 10) AND (y = 'p')) OR ((x = 30) AND (y <> 'q')))]",
        "  -- Filter[2.1][expression: ((x = 10) OR (x = 30))]",
        "    -- TableScan[1][table: a, columns: k, x]",
        "  -- Filter[2.2][expression: ((y = 'p') OR (y <> 'q'))]",
        "    -- TableScan[0][table: b, columns: k2, y]",
    ]
    left = _join_on("left", condition).plan()  # a probe row failing ON is still output, NULL-extended
    assert optimize_plan(left) is left


def test_an_or_above_a_left_join_implies_filters_on_its_preserved_side_only():
    plan = _join("left").filter("(x = 10 AND y = 'p') OR (x = 30 AND y IS NULL)").plan()
    assert _shape(optimize_plan(plan)) == [
        "-- Filter[3][expression: (((x = 10) AND (y = 'p')) OR ((x = 30) AND (y IS NULL)))]",
        "  -- HashJoin[2][LEFT k = k2]",
        "    -- Filter[3.1][expression: ((x = 10) OR (x = 30))]",
        "      -- TableScan[1][table: a, columns: k, x]",
        "    -- TableScan[0][table: b, columns: k2, y]",
    ]


def test_an_or_over_an_aggregate_implies_a_filter_on_the_group_keys_below_it():
    plan = (PlanBuilder(CATALOG).table_scan("a", ["k", "x"]).aggregation(["k"], ["sum(x) AS s"])
            .filter("(k = 1 AND s > 5) OR k = 3").plan())
    assert _shape(optimize_plan(plan)) == [
        "-- Filter[2][expression: (((k = 1) AND (s > 5)) OR (k = 3))]",
        "  -- Aggregation[1][SINGLE [k] s := sum(x)]",
        "    -- Filter[2.1][expression: ((k = 1) OR (k = 3))]",
        "      -- TableScan[0][table: a, columns: k, x]",
    ]


def _tagged_totals():
    """A UNION ALL of two groupings of ``a``, each with its constant tag (TPC-DS q11's ``year_total`` CTE)."""
    ids = PlanNodeIdGenerator()
    branches = [PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"]).aggregation(
        ["k"], ["sum(x) AS s"]).project(["k", "s", f"'{tag}' AS t"]) for tag in "sw"]
    return branches[0].union_all(branches[1].plan())


def test_a_branch_of_a_union_all_gets_only_the_or_branches_its_constant_tag_can_pass():
    plan = _tagged_totals().filter("(t = 's' AND k = 1 AND s > 5) OR (t = 'w' AND k = 2)").plan()
    assert _shape(optimize_plan(plan)) == [
        "-- LocalPartition[6][ARBITRARY]",
        "  -- Project[2][expressions: (k:k), (s:s), (t:'s')]",
        "    -- Filter[7.1][expression: (s > 5)]",
        "      -- Aggregation[1][SINGLE [k] s := sum(x)]",
        "        -- Filter[7.1.1][expression: (k = 1)]",
        "          -- TableScan[0][table: a, columns: k, x]",
        "  -- Project[5][expressions: (k:k), (s:s), (t:'w')]",  # the OR folds to its 'w' branch: below the grouping
        "    -- Aggregation[4][SINGLE [k] s := sum(x)]",
        "      -- Filter[7.2][expression: (k = 2)]",
        "        -- TableScan[3][table: a, columns: k, x]",
    ]


def test_constants_fold_and_a_filter_always_true_goes():
    plan = PlanBuilder(CATALOG).table_scan("a", ["k", "x"]).filter("1 = 1 AND (x > 15 OR 'a' = 'b')").plan()
    assert _shape(optimize_plan(plan))[0] == "-- Filter[1][expression: (x > 15)]"
    always = PlanBuilder(CATALOG).table_scan("a", ["k", "x"]).filter("NOT (1 > 2) OR x > 1").plan()
    assert optimize_plan(always).kind == "TableScan"


def test_a_filter_never_true_empties_the_joins_above_but_not_a_grand_total():
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("b", ["k2", "y"]).filter("2 < 1 AND y = 'p'").plan()
    plan = (PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"])
            .hash_join(["k"], ["k2"], build, ["k", "x", "y"], "inner")
            .aggregation([], ["count(*) AS c", "sum(x) AS s"]).plan())
    optimized = optimize_plan(plan)
    assert _shape(optimized) == [
        "-- Aggregation[4][SINGLE [] c := count(*), s := sum(x)]",
        "  -- Values[3][0 rows]",
    ]
    assert not any(node.kind == "TableScan" for node in walk_plan(optimized))


def test_columns_nobody_reads_leave_scans_joins_projects_and_aggregations():
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("b").plan()
    plan = (PlanBuilder(CATALOG, id_generator=ids).table_scan("a").hash_join(["k"], ["k2"], build, ["k", "x", "y"])
            .aggregation(["y"], ["count(*) AS c", "sum(x) AS s"]).project(["c + 1 AS c1"]).plan())
    assert _shape(optimize_plan(plan)) == [
        "-- Project[4][expressions: (c1:(c + 1))]",
        "  -- Aggregation[3][SINGLE [y] c := count(*)]",
        "    -- HashJoin[2][INNER k = k2]",
        "      -- TableScan[1][table: a, columns: k]",
        "      -- TableScan[0][table: b, columns: k2, y]",
    ]
    counted = PlanBuilder(CATALOG).table_scan("a").project(["1 AS one"]).plan()  # a column kept: rows counted
    assert _shape(optimize_plan(counted))[1] == "  -- TableScan[0][table: a, columns: k]"


def test_the_switch_leaves_the_plan_as_built():
    plan = _join("inner").filter("x > 1").plan()
    session = session_with_tables(TABLES, device="cpu", drivers=1, optimize=False)
    assert "Filter[3]" in session.explain(plan).splitlines()[0]
    assert "HashJoin[2]" in session_with_tables(TABLES, device="cpu", drivers=1).explain(plan).splitlines()[0]


def _cases():
    """Return (name, plan, DuckDB's text of the same query): plans written with the filter above what it may pass."""
    cases = [
        ("inner-project", _join("inner").project(["k", "x * 2 AS x2", "y"])
         .filter("x2 > 25 AND y <> 'q' AND (x2 > 50 OR y = 'p')").plan(),
         "SELECT k, x * 2 AS x2, y FROM a JOIN b ON k = k2 WHERE x * 2 > 25 AND y <> 'q' AND (x * 2 > 50 OR y = 'p')"),
        ("left-null-side", _join("left").filter("y IS NULL AND k > 1").plan(),
         "SELECT k, x, y FROM a LEFT JOIN b ON k = k2 WHERE y IS NULL AND k > 1"),
        ("right", _join("right").filter("(x IS NULL OR y = 't') AND y <> 's'").plan(),
         "SELECT k, x, y FROM a RIGHT JOIN b ON k = k2 WHERE (x IS NULL OR y = 't') AND y <> 's'"),
        ("full", _join("full").filter("k IS NULL").plan(),
         "SELECT k, x, y FROM a FULL JOIN b ON k = k2 WHERE k IS NULL"),
        ("anti", PlanBuilder(CATALOG).table_scan("a", ["k", "x"]).hash_join(
            ["k"], ["k2"], PlanBuilder(CATALOG, id_generator=PlanNodeIdGenerator(10)).table_scan("b", ["k2"]).plan(),
            ["k", "x"], "anti").filter("x > 15").plan(),
         "SELECT k, x FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE k2 = k) AND x > 15"),
        ("aggregation", PlanBuilder(CATALOG).table_scan("a", ["k", "x"])
         .aggregation(["k"], ["sum(x) AS s", "count(*) AS c"]).filter("k >= 2 AND s > 25").plan(),
         "SELECT k, sum(x) AS s, count(*) AS c FROM a GROUP BY k HAVING k >= 2 AND sum(x) > 25"),
        ("rollup", PlanBuilder(CATALOG).table_scan("a", ["k", "x"]).group_id([["k"], []], ["x"])
         .aggregation(["k", "group_id"], ["sum(x) AS s"]).project(["k", "s"]).filter("k IS NULL").plan(),
         "SELECT k, sum(x) AS s FROM a GROUP BY ROLLUP (k) HAVING k IS NULL"),
        ("never-true", _join("inner").aggregation([], ["count(*) AS c", "sum(x) AS s"]).filter("1 = 0").plan(),
         "SELECT count(*) AS c, sum(x) AS s FROM a JOIN b ON k = k2 HAVING 1 = 0"),
        ("empty-build-of-a-left-join", _join("left", build_filter="NULL").aggregation(
            ["k"], ["count(y) AS c"]).plan(),
         "SELECT k, count(y) AS c FROM a LEFT JOIN (SELECT * FROM b WHERE NULL) ON k = k2 GROUP BY k"),
        ("empty-under-a-grand-total", _join("inner", build_filter="1 > 2").aggregation(
            [], ["count(*) AS c", "sum(x) AS s"]).plan(),
         "SELECT count(*) AS c, sum(x) AS s FROM a JOIN (SELECT * FROM b WHERE 1 > 2) ON k = k2"),
    ]
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(CATALOG, id_generator=ids).table_scan("b").plan()
    cases.append(("pruned", PlanBuilder(CATALOG, id_generator=ids).table_scan("a").hash_join(
        ["k"], ["k2"], build, ["k", "x", "y"], "left").aggregation(["y"], ["count(*) AS c", "sum(x) AS s"])
        .project(["y", "c + 1 AS c1"]).plan(),
        "SELECT y, count(*) + 1 AS c1 FROM a LEFT JOIN b ON k = k2 GROUP BY y"))
    ids = PlanNodeIdGenerator()
    never = PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"]).filter("1 = 2").project(
        ["x AS k", "k AS x"]).plan()  # the filter pushed into this branch merges with its FALSE
    cases.append(("empty-union-branch", PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"])
                  .union_all(never).filter("x > 15").plan(), "SELECT k, x FROM a WHERE x > 15"))
    cases += [
        ("or-implied-inner", _join("inner").filter("(x = 10 AND y = 'p') OR (x = 30 AND y = 'q') OR (x > 50 AND y <> 's')")
         .plan(), "SELECT k, x, y FROM a JOIN b ON k = k2 WHERE (x = 10 AND y = 'p') OR (x = 30 AND y = 'q') "
                  "OR (x > 50 AND y <> 's')"),
        ("or-implied-join-condition", _join_on("inner", "(x = 10 AND y = 'p') OR (x = 30 AND y <> 'q')").plan(),
         "SELECT k, x, y FROM a JOIN b ON k = k2 AND ((x = 10 AND y = 'p') OR (x = 30 AND y <> 'q'))"),
        ("or-implied-left", _join("left").filter("(x = 10 AND y = 'p') OR (x = 30 AND y IS NULL) OR x IS NULL").plan(),
         "SELECT k, x, y FROM a LEFT JOIN b ON k = k2 WHERE (x = 10 AND y = 'p') OR (x = 30 AND y IS NULL) OR x IS NULL"),
        ("or-implied-aggregation", PlanBuilder(CATALOG).table_scan("a", ["k", "x"]).aggregation(["k"], ["sum(x) AS s"])
         .filter("(k = 1 AND s > 5) OR k = 3 OR k IS NULL").plan(),
         "SELECT k, sum(x) AS s FROM a GROUP BY k HAVING (k = 1 AND sum(x) > 5) OR k = 3 OR k IS NULL"),
        ("or-implied-tagged-union", _tagged_totals().filter("(t = 's' AND k = 1 AND s > 5) OR (t = 'w' AND k = 2)")
         .plan(), "SELECT * FROM (SELECT k, sum(x) AS s, 's' AS t FROM a GROUP BY k UNION ALL "
                  "SELECT k, sum(x), 'w' FROM a GROUP BY k) WHERE (t = 's' AND k = 1 AND s > 5) OR (t = 'w' AND k = 2)"),
    ]
    ids = PlanNodeIdGenerator()
    other = PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"]).project(["x AS k", "k AS x"]).plan()
    cases.append(("union", PlanBuilder(CATALOG, id_generator=ids).table_scan("a", ["k", "x"]).union_all(other)
                  .filter("k > 2").plan(),
                  "SELECT * FROM (SELECT k, x FROM a UNION ALL SELECT x, k FROM a) WHERE k > 2"))
    return cases


@pytest.mark.parametrize("name", [case[0] for case in _cases()])
def test_optimized_plans_answer_as_duckdb(device_name, name):
    _, plan, sql = next(case for case in _cases() if case[0] == name)
    assert optimize_plan(plan) is not plan or name == "full"
    session = session_with_tables(TABLES, split_rows=2, device=device_name, drivers=2)
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, sql)
    actual = session.execute(plan)
    assert_same_rows(actual.rename_columns(expected.column_names), expected)
    scans = sum(node.kind == "TableScan" for node in walk_plan(session.last_plan))
    if name == "empty-union-branch":
        assert scans == 1  # the branch that keeps nothing is gone from the UNION ALL
    elif name.startswith("empty") or name == "never-true":
        assert any(isinstance(node, ValuesNode) for node in walk_plan(session.last_plan))
        assert scans == (1 if name.startswith("empty-build") else 0)
