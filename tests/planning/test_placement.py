"""The placement pass: every operator on the Session's device, host fallbacks named, what cannot run fails at plan time."""

from __future__ import annotations

import dataclasses
import datetime

import duckdb
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows

from gpu_engine import PlanError, Session
from gpu_engine.planning.placement import Placement, plan_placement
from gpu_engine.plans import PlanBuilder
from gpu_engine.plans.expressions import AggregateCall, Cast, ColumnRef
from gpu_engine.plans.nodes import walk_plan

FLOAT_TO_TEXT = "CAST(v AS string): float -> text is formatted by Python on the host"
TEXT_TO_FLOAT = "CAST(s AS double): text -> float is parsed by pyarrow on the host"


@pytest.fixture
def session(device_name) -> Session:
    session = Session(device=device_name, drivers=1)
    session.register("t", pa.table({
        "k": pa.array([1, 2, 2, None], pa.int32()),
        "v": pa.array([1.5, None, -0.25, 1e21], pa.float64()),
        "s": pa.array(["2.5", "-1e3", None, "7"]),
        "ts": pa.array([datetime.datetime(2024, 1, 1), None, None, None], pa.timestamp("us", tz="UTC")),
    }))
    return session


def _fallback_plan(catalog):
    return (PlanBuilder(catalog).table_scan("t", ["k", "v", "s"])
            .filter("CAST(s AS DOUBLE) > 0 OR k = 2")
            .project(["k", "CAST(v AS VARCHAR) AS text", "k + 1 AS k1"])
            .plan())


def test_every_node_runs_on_the_session_device_with_host_fallbacks_named(session, device_name):
    plan = _fallback_plan(session.catalog)
    placements = plan_placement(plan, session.device)
    assert set(placements) == {node.id for node in walk_plan(plan)}
    assert {p.device for p in placements.values()} == {device_name}
    project, filter_node, scan = plan, plan.source, plan.source.source
    if device_name == "cpu":  # buffers are host memory: nothing falls back
        assert all(p.reason is None for p in placements.values())
    else:  # cuda-sim reports what cuda does
        assert placements[project.id] == Placement(device_name, f"host fallback: {FLOAT_TO_TEXT}")
        assert placements[filter_node.id] == Placement(device_name, f"host fallback: {TEXT_TO_FLOAT}")
        assert placements[scan.id] == Placement(device_name)


def test_explain_prints_the_placement_on_every_operator_line(session, device_name):
    plan = _fallback_plan(session.catalog)
    lines = session.explain(plan).splitlines()
    assert len(lines) == 3 and all(f" @ {device_name}" in line for line in lines)
    if device_name != "cpu":
        assert lines[0].endswith(f"@ {device_name} (host fallback: {FLOAT_TO_TEXT})")
        assert lines[2].endswith(f"@ {device_name}")
    analyzed = session.explain(plan, analyze=True).splitlines()
    node_lines = [line for line in analyzed if line.lstrip().startswith("-- ")]
    assert [line.split(" @ ")[1] for line in node_lines] == [line.split(" @ ")[1] for line in lines]


def test_host_fallbacks_compute_what_duckdb_computes(session):
    result = session.execute(_fallback_plan(session.catalog))
    expected = _duckdb("SELECT k, CAST(v AS VARCHAR) AS text, k + 1 AS k1 FROM t "
                       "WHERE CAST(s AS DOUBLE) > 0 OR k = 2", session)
    assert result.num_rows == 4
    assert_same_rows(result, expected)


def _duckdb(sql: str, session: Session) -> pa.Table:
    connection = duckdb.connect()
    connection.register("t", session.table("t").table)
    return connection.sql(sql).to_arrow_table()


def _cast_without_implementation(catalog):
    """A Project casting the TIMESTAMPTZ ``ts`` to TIME (DuckDB has no such cast: PlanBuilder refuses to write it)."""
    plan = PlanBuilder(catalog).table_scan("t", ["ts"]).project(["CAST(ts AS VARCHAR) AS text"]).plan()
    return dataclasses.replace(plan, expressions=(Cast(ColumnRef("ts", plan.source.output_schema.field("ts").type),
                                                       pa.time64("us")),))


def test_a_cast_with_no_implementation_fails_at_plan_time_naming_node_and_expression(session):
    plan = _cast_without_implementation(session.catalog)
    with pytest.raises(PlanError) as raised:
        plan_placement(plan, session.device)
    assert raised.value.node == plan.label and raised.value.column == "CAST(ts AS time64[us])"
    assert "timestamp[us, tz=UTC] to time64[us]" in str(raised.value)
    with pytest.raises(PlanError, match=r"in Project\[1\]"):
        session.execute(plan)
    assert session.last_task is None  # nothing started
    with pytest.raises(PlanError):
        session.explain(plan)


def test_an_aggregate_the_operator_cannot_compute_fails_at_plan_time(session):
    plan = PlanBuilder(session.catalog).table_scan("t", ["k", "v"]).aggregation(["k"], ["max(v) AS m"]).plan()
    interval_column = ColumnRef("v", pa.month_day_nano_interval())  # SQL's max of intervals ranks them first
    unsupported = dataclasses.replace(plan, aggregates=(AggregateCall("max", interval_column,
                                                                      pa.month_day_nano_interval()),))
    with pytest.raises(PlanError, match="max over month_day_nano_interval") as raised:
        plan_placement(unsupported, session.device)
    assert raised.value.node == plan.label and raised.value.column == "max(v)"


def test_the_pass_runs_for_the_plan_as_executed(device_name, session):
    session.drivers = 4
    plan = (PlanBuilder(session.catalog).table_scan("t", ["k", "v"])
            .aggregation(["k"], ["max(CAST(v AS VARCHAR)) AS m"]).plan())
    text = session.explain(plan)
    assert "Aggregation[1.partial]" in text and text.count(f"@ {device_name}") == text.count("-- ")
    expected = _duckdb("SELECT k, max(CAST(v AS VARCHAR)) AS m FROM t GROUP BY k", session)
    assert_same_rows(session.execute(plan), expected)


def test_a_cluster_explain_shows_placements_in_every_stage(session, device_name):
    from gpu_engine.cluster import LocalCluster

    plan = (PlanBuilder(session.catalog).table_scan("t", ["k", "v"])
            .aggregation(["k"], ["max(CAST(v AS VARCHAR)) AS m"]).plan())
    cluster = LocalCluster(session, stage_widths=(2, 2, 1))
    for text in (cluster.explain(plan), cluster.explain(plan, analyze=True)):
        node_lines = [line for line in text.splitlines() if line.lstrip().startswith("-- ")]
        assert node_lines and all(f" @ {device_name}" in line for line in node_lines)
        fallbacks = [line for line in node_lines if "host fallback" in line]
        assert bool(fallbacks) == (device_name != "cpu")
    with pytest.raises(PlanError, match="timestamp"):
        cluster.execute(_cast_without_implementation(session.catalog))
