"""EnforceSingleRow against DuckDB's scalar subqueries: one row passes, none gives NULLs, two or more fail."""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine import ExecutionError, Session
from gpu_engine.exec.task import TaskState
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator

COLUMNS = ["k_int", "k_str", "k_dict", "v_int", "v_float", "v_dec", "d_date"]
# DuckDB's scalar subquery with every column: the row if there is one, else one row of NULLs.
SINGLE_ROW_SQL = "SELECT s.* FROM (SELECT 1) AS one LEFT JOIN (SELECT {columns} FROM t WHERE {where}) AS s ON TRUE"


def _driver_threads() -> list[threading.Thread]:
    """Return the driver threads not idle in a session's kept pool (gpu_engine.exec.driver_executors)."""
    from gpu_engine.exec.driver_executors import working_driver_threads

    return working_driver_threads()


def single_row_plan(catalog, where: str):
    return PlanBuilder(catalog).table_scan("t", COLUMNS).filter(where).enforce_single_row().plan()


@pytest.fixture
def unique_row(table) -> str:
    """Return a predicate exactly one row of ``t`` satisfies."""
    return f"v_int = {pc.max(table['v_int']).as_py()}"


@pytest.mark.parametrize("rows", ["one", "none"])
def test_one_row_passes_and_none_gives_nulls(session, assert_query, unique_row, rows):
    """Every column type gets its NULL when the input is empty (a scalar subquery over nothing is NULL)."""
    where = unique_row if rows == "one" else "v_int > 10000000"
    result = assert_query(single_row_plan(session.catalog, where),
                          SINGLE_ROW_SQL.format(columns=", ".join(COLUMNS), where=where))
    assert result.num_rows == 1
    assert (result.column("v_int").null_count == 0) == (rows == "one")


@pytest.mark.parametrize("where", ["k_int = 3", "TRUE"])
def test_more_than_one_row_fails_the_task_and_leaves_no_thread(session, where):
    plan = single_row_plan(session.catalog, where)
    with pytest.raises(ExecutionError, match="scalar subquery returned more than one row") as raised:
        session.execute(plan)
    assert raised.value.operator == "EnforceSingleRow" and raised.value.plan_node_id == plan.id
    assert plan.label in str(raised.value)
    assert session.last_task.state is TaskState.FAILED
    assert all(d.is_done for d in session.last_task.drivers)
    assert _driver_threads() == []


@pytest.mark.parametrize("drivers", [1, 4])
def test_rows_in_different_drivers_are_counted_together(device_name, drivers):
    """Two rows in two splits: each scan driver sees one, but the gather below EnforceSingleRow sees both."""
    session = Session(device=device_name, drivers=drivers, batch_rows=1)
    session.register("t", pa.table({"x": pa.array([1, 2], pa.int64())}), split_rows=1)
    plan = PlanBuilder(session.catalog).table_scan("t").enforce_single_row().plan()
    with pytest.raises(ExecutionError, match="more than one row"):
        session.execute(plan)
    assert _driver_threads() == []


def test_an_empty_scalar_subquery_compares_as_null(session, assert_query):
    """``WHERE v_int > (empty subquery)`` keeps nothing: the subquery's NULL row makes every comparison NULL."""
    ids = PlanNodeIdGenerator()
    subquery = (PlanBuilder(session.catalog, id_generator=ids).table_scan("t", ["v_int"])
                .filter("v_int > 10000000").project(["v_int AS m"]).enforce_single_row())
    plan = (PlanBuilder(session.catalog, id_generator=ids).table_scan("t", ["k_int", "v_int"])
            .cross_join(subquery, ["k_int", "v_int", "m"]).filter("v_int > m OR k_int = 3")
            .project(["k_int", "m"]).plan())
    result = assert_query(plan, "SELECT k_int, (SELECT v_int FROM t WHERE v_int > 10000000) AS m FROM t "
                                "WHERE v_int > (SELECT v_int FROM t WHERE v_int > 10000000) OR k_int = 3")
    assert result.num_rows > 0 and result.column("m").null_count == result.num_rows
