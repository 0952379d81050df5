"""The inner-join regions of typed plans as graphs (gpu_engine.optimizer.join_graph), rebuilt in other orders.

The graph of a region must hold every key and condition of its joins and filters: a region rebuilt in each
order of its relations answers as DuckDB does (a key or condition lost, or applied before its columns exist,
changes the rows or fails the plan); outer joins and other nodes stay whole inside the relations.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from gpu_engine.optimizer.join_graph import JoinEdge, join_graph, join_graphs, joined
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.nodes import HashJoinNode, NestedLoopJoinNode, TableScanNode, walk_plan
from gpu_engine.plans.plan_builder import PlanNodeIdGenerator
from duckdb_reference import assert_same_rows, duckdb_table, duckdb_with_tables, session_with_tables

TABLES = {
    "a": pa.table({"k": pa.array([1, 2, 3, None, 2, 5], pa.int64()),
                   "x": pa.array([10, 20, 30, 40, None, 60], pa.int64())}),
    "b": pa.table({"k2": pa.array([1, 2, 2, None, 5, 7, 1], pa.int64()),
                   "y": pa.array(["p", "q", None, "s", "t", "p", "q"])}),
    "c": pa.table({"k3": pa.array([1, 2, 3, 5, None, 2], pa.int64()), "z": pa.array([1, 3, 9, 40, 4, 12], pa.int64())}),
    "d": pa.table({"y2": pa.array(["p", "q", "t", None]), "w": pa.array([0.5, 1.5, 2.5, 3.5])}),
}
CATALOG = {name: table.schema for name, table in TABLES.items()}

#: a JOIN b ON k = k2 filtered by an OR over both, JOIN c ON k = k3 with a condition over a and c, JOIN d ON y = y2
#: (a nested-loop join on a condition), and DuckDB's text of the same query.
SQL = ("SELECT k, x, y, z, w FROM a JOIN b ON k = k2 JOIN c ON k = k3 AND x > z * 2 JOIN d ON y = y2 "
       "WHERE (x > 15 OR y = 'p') AND z <> 9")


def _region():
    ids = PlanNodeIdGenerator()
    build = lambda table: PlanBuilder(CATALOG, id_generator=ids).table_scan(table).plan()  # noqa: E731
    return (PlanBuilder(CATALOG, id_generator=ids).table_scan("a")
            .hash_join(["k"], ["k2"], build("b"), ["k", "x", "y"]).filter("x > 15 OR y = 'p'")
            .hash_join(["k"], ["k3"], build("c"), ["k", "x", "y", "z"], filter="x > z * 2")
            .nested_loop_join(build("d"), ["k", "x", "y", "z", "w"], filter="y = y2")
            .filter("z <> 9").plan())


def _tables(graph) -> list[str]:
    return [next(n.table_name for n in walk_plan(r) if isinstance(n, TableScanNode)) for r in graph.relations]


def test_a_region_of_inner_joins_and_filters_gives_its_relations_edges_and_conditions():
    graph = join_graph(_region())
    assert _tables(graph) == ["a", "b", "c", "d"]
    assert set(graph.edges) == {JoinEdge(0, "k", 1, "k2"), JoinEdge(0, "k", 2, "k3"), JoinEdge(1, "y", 3, "y2")}
    assert sorted((c.predicate.sql(), sorted(c.relations)) for c in graph.conditions) == [
        ("((x > 15) OR (y = 'p'))", [0, 1]), ("(x > (z * 2))", [0, 2]), ("(z <> 9)", [2])]
    assert graph.is_connected() and graph.neighbours(0) == {1, 2}


def test_outer_joins_and_other_nodes_stay_whole_inside_relations():
    ids = PlanNodeIdGenerator()
    left = (PlanBuilder(CATALOG, id_generator=ids).table_scan("a")
            .hash_join(["k"], ["k2"], PlanBuilder(CATALOG, id_generator=ids).table_scan("b").plan(), ["k", "x", "y"],
                       "left"))
    inner = (PlanBuilder(CATALOG, id_generator=ids).table_scan("c").aggregation(["k3"], ["sum(z) AS s"])
             .hash_join(["k3"], ["k"], left.plan(), ["k3", "s", "x", "y"]).plan())
    graph = join_graph(inner)
    assert [r.kind for r in graph.relations] == ["Aggregation", "HashJoin"]
    assert graph.edges == (JoinEdge(0, "k3", 1, "k"),) and not graph.conditions
    assert join_graph(left.plan()) is None  # a left join is no region
    assert [len(g.relations) for g in join_graphs(_region())] == [4]


def test_relations_sharing_a_column_name_are_not_taken_apart():
    ids = PlanNodeIdGenerator()
    other = PlanBuilder(CATALOG, id_generator=ids).table_scan("a").plan()
    plan = PlanBuilder(CATALOG, id_generator=ids).table_scan("a").project(["k AS k1", "x"]).hash_join(
        ["k1"], ["k"], other, ["k1", "k"]).plan()  # both sides have x
    assert join_graph(plan) is None


def test_the_region_rebuilt_in_every_order_answers_as_duckdb():
    graph = join_graph(_region())
    session = session_with_tables(TABLES, split_rows=2, device="cpu", drivers=2)
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, SQL)
    assert expected.num_rows > 0
    counter = itertools.count()
    # as built, reversed, and orders that pair a with d or b with c first (no key links them: a nested-loop join)
    for order in [(0, 1, 2, 3), (3, 2, 1, 0), (0, 3, 1, 2), (1, 2, 0, 3), (2, 0, 3, 1)]:
        plan = joined(graph, order, lambda: f"j{next(counter)}")
        assert plan.output_schema.names == graph.root.output_schema.names
        assert len([n for n in walk_plan(plan) if isinstance(n, HashJoinNode | NestedLoopJoinNode)]) == 3
        assert_same_rows(session.execute(plan), expected)


def test_a_rebuilt_region_answers_as_duckdb_on_cuda_sim():
    graph = join_graph(_region())
    counter = itertools.count()
    plan = joined(graph, (3, 1, 2, 0), lambda: f"j{next(counter)}")
    session = session_with_tables(TABLES, split_rows=2, device="cuda-sim", drivers=2)
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, SQL)
    assert_same_rows(session.execute(plan), expected)


def test_an_order_that_is_no_permutation_is_refused():
    with pytest.raises(ValueError, match="no permutation"):
        joined(join_graph(_region()), (0, 1, 1, 2), lambda: "x")


def test_tpch_q5_planned_from_sql_is_one_connected_region_of_six_tables(tpch_data):
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import register_tpch
    from gpu_engine.plans import tpch

    session = Session(device="cpu", drivers=1)
    register_tpch(session, tpch_data(0.01))
    graphs = join_graphs(session.sql_plan(tpch.spec_sql(5)))
    assert len(graphs) == 1 and graphs[0].is_connected()
    assert sorted(_tables(graphs[0])) == ["customer", "lineitem", "nation", "orders", "region", "supplier"]
    assert len(graphs[0].edges) >= 5


def test_the_region_rebuilt_as_bushy_trees_answers_as_duckdb():
    """Two pairs joined apart, then to each other on the keys between them (a and c with b and d: keys a-b and
    b-d cross the pairs; c and d have none, so (c, d) pairs every row first)."""
    from gpu_engine.optimizer.join_graph import joined_tree

    graph = join_graph(_region())
    session = session_with_tables(TABLES, split_rows=2, device="cpu", drivers=2)
    with duckdb_with_tables(TABLES) as connection:
        expected = duckdb_table(connection, SQL)
    counter = itertools.count()
    for tree in [((0, 2), (1, 3)), ((2, 3), (1, 0)), (3, ((1, 0), 2))]:
        plan = joined_tree(graph, tree, lambda: f"j{next(counter)}")
        assert plan.output_schema.names == graph.root.output_schema.names
        assert_same_rows(session.execute(plan), expected)
    with pytest.raises(ValueError, match="each of the 4 relations once"):
        joined_tree(graph, ((0, 1), (1, 2)), lambda: "x")
