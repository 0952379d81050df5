"""NestedLoopJoin and EnforceSingleRow on a LocalCluster: refused without boundaries, broadcast with them, one Task."""

from __future__ import annotations

import threading

import duckdb
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import ExecutionError, Session
from gpu_engine.cluster import LocalCluster, chain_fragments
from gpu_engine.errors import PlanError
from gpu_engine.plans import EnforceSingleRowNode, PlanBuilder, PlanNodeIdGenerator, walk_plan

T = pa.table({"x": pa.array([None if i % 9 == 4 else i for i in range(60)], pa.int64())})
U = pa.table({"y": pa.array([3, 10, None, 41, 41], pa.int64())})


def _session(device_name: str, drivers: int) -> Session:
    session = Session(device=device_name, drivers=drivers, batch_rows=8)
    session.register("t", T, split_rows=10)
    session.register("u", U, split_rows=2)
    return session


def _leftover_threads() -> list[threading.Thread]:
    """Return the driver threads not idle in a session's kept pool (gpu_engine.exec.driver_executors)."""
    from gpu_engine.exec.driver_executors import working_driver_threads

    return working_driver_threads()


def _reference(sql: str) -> pa.Table:
    connection = duckdb.connect()
    connection.register("t", T)
    connection.register("u", U)
    return duckdb_table(connection, sql)


def test_a_join_without_boundaries_is_refused_naming_it():
    session = _session("cpu", 1)
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(session.catalog, id_generator=ids).table_scan("u")
    plan = PlanBuilder(session.catalog, id_generator=ids).table_scan("t").cross_join(build, ["x", "y"]).plan()
    with pytest.raises(PlanError, match="several sources") as error:
        LocalCluster(session, (2, 1)).execute(plan)
    assert error.value.node == plan.label


@pytest.mark.parametrize("join_type", ["inner", "left"])
@pytest.mark.parametrize("drivers", [1, 2])
def test_broadcast_build_side_between_stages(device_name, drivers, join_type):
    """The build side is broadcast to every probe Task, as a HashJoin's would be; each Task joins its probe rows."""
    session = _session(device_name, drivers)
    ids = PlanNodeIdGenerator()
    producer = PlanBuilder(session.catalog, id_generator=ids).table_scan("u").partitioned_output(
        [], 1, kind="broadcast").plan()
    build = PlanBuilder(id_generator=ids).exchange(producer.output_schema)
    consumer = (PlanBuilder(session.catalog, id_generator=ids).table_scan("t")
                .nested_loop_join(build, ["x", "y"], filter="x < y", join_type=join_type).plan())
    result = LocalCluster(session, (2, 3)).execute(chain_fragments(producer, consumer))
    kind = "JOIN" if join_type == "inner" else "LEFT JOIN"
    assert_same_rows(result, _reference(f"SELECT x, y FROM t {kind} u ON x < y"))


@pytest.mark.parametrize("where, rows", [("x = 17", 1), ("x > 1000", 0)])
def test_enforce_single_row_finishes_in_one_task(device_name, where, rows):
    session = _session(device_name, 2)
    plan = PlanBuilder(session.catalog).table_scan("t").filter(where).enforce_single_row().plan()
    cluster = LocalCluster(session, (3, 2, 2))
    (stage,) = [s for s in cluster.plan_stages(plan) if any(isinstance(n, EnforceSingleRowNode)
                                                             for n in walk_plan(s.plan))]
    assert stage.width == 1
    result = cluster.execute(plan)
    assert result.to_pylist() == [{"x": 17 if rows else None}]


def test_enforce_single_row_fails_the_query_on_two_rows(device_name):
    session = _session(device_name, 2)
    plan = PlanBuilder(session.catalog).table_scan("u").filter("y = 41").enforce_single_row().plan()
    with pytest.raises(ExecutionError, match="scalar subquery returned more than one row"):
        LocalCluster(session, (3, 1)).execute(plan)
    assert _leftover_threads() == []
