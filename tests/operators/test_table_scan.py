"""TableScan over Parquet and Arrow, and Values: all rows, only requested columns, empty inputs."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine import Session
from gpu_engine.plans import PlanBuilder


@pytest.fixture
def parquet_dir(tmp_path, table):
    """Write the test table as two Parquet files with small row groups, plus an empty file."""
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), tmp_path / "part-0.parquet", row_group_size=100)
    pq.write_table(table.slice(half), tmp_path / "part-1.parquet", row_group_size=100)
    pq.write_table(table.slice(0, 0), tmp_path / "part-2.parquet")
    return tmp_path


@pytest.mark.parametrize("columns", [None, ["v_dec", "k_str"], ["k_dict"]], ids=["all", "two", "dictionary"])
def test_parquet_scan(device_name, drivers, batch_rows, parquet_dir, table, columns):
    session = Session(device=device_name, drivers=drivers, batch_rows=batch_rows)
    session.register("t", parquet_dir, split_rows=250)
    plan = PlanBuilder(session.catalog).table_scan("t", columns).plan()
    result = session.execute(plan, timeout=120)
    expected = table.select(columns or table.schema.names)
    assert result.schema.names == expected.schema.names
    assert sorted(map(str, result.to_pylist()), key=str) == sorted(map(str, _decoded(expected).to_pylist()), key=str)
    scans = session.last_stats().operator_stats_by_node()[plan.id]
    assert sum(s.runtime.get("splits", 0) for s in scans) == len(session._tables["t"].splits())


def _decoded(table: pa.Table) -> pa.Table:
    return pa.table({n: c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for n, c in zip(table.column_names, table.columns)})


def test_scan_reads_only_requested_columns(device_name, parquet_dir):
    session = Session(device=device_name)
    session.register("t", parquet_dir)
    plan = PlanBuilder(session.catalog).table_scan("t", ["v_int"]).plan()
    session.execute(plan)
    (scan,) = session.last_stats().operator_stats_by_node()[plan.id]
    # int64 values + validity: 9 bytes a row; all seven columns would be several times more.
    assert scan.output_bytes <= 9 * scan.output_rows


def test_empty_table_and_empty_splits(device_name, drivers, table):
    session = Session(device=device_name, drivers=drivers)
    session.register("t", table.slice(0, 0))
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation(["k_int"], ["count(*) AS c"]).plan()
    assert session.execute(plan).num_rows == 0
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation([], ["count(*) AS c", "sum(v_int) AS s"]).plan()
    assert session.execute(plan).to_pylist() == [{"c": 0, "s": None}]


def test_values(device_name, drivers, table):
    session = Session(device=device_name, drivers=drivers, batch_rows=100)
    plan = PlanBuilder({}).values(table).filter("v_int > 0").plan()
    result = session.execute(plan)
    expected = _decoded(table).filter(pa.compute.greater(table["v_int"], 0))
    assert sorted(map(str, result.to_pylist())) == sorted(map(str, expected.to_pylist()))
