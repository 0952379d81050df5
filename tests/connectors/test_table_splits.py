"""A table registered without ``split_rows`` is cut so that drivers share it, even when it is small.

Before, every table under 256k rows was one split: TPC-H's customer and part
were scanned by one driver while the others waited on the joins that need
them (Q22 spent most of its wall time that way).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.connectors import registered_table
from gpu_engine.connectors.registered_table import DEFAULT_SPLIT_ROWS, MIN_SPLIT_ROWS, MIN_SPLITS_PER_TABLE
from gpu_engine.plans import PlanBuilder


def _table(rows: int) -> pa.Table:
    return pa.table({"k": pa.array([i % 7 for i in range(rows)], pa.int64()),
                     "v": pa.array(range(rows), pa.int64())})


def test_small_parquet_table_makes_a_split_per_row_group(tmp_path):
    pq.write_table(_table(4 * 20_000), tmp_path / "t.parquet", row_group_size=20_000)
    session = Session(device="cpu")
    session.register("t", tmp_path / "t.parquet")
    splits = session.table("t").splits()
    assert [split.row_groups for split in splits] == [(0,), (1,), (2,), (3,)]


def test_large_parquet_table_keeps_default_split_size(tmp_path):
    rows = MIN_SPLITS_PER_TABLE * DEFAULT_SPLIT_ROWS + 1
    pq.write_table(pa.table({"v": pa.array(range(rows), pa.int32())}), tmp_path / "t.parquet",
                   row_group_size=DEFAULT_SPLIT_ROWS // 4)
    session = Session(device="cpu")
    session.register("t", tmp_path / "t.parquet")
    assert session.table("t").split_rows == DEFAULT_SPLIT_ROWS
    assert len(session.table("t").splits()) == MIN_SPLITS_PER_TABLE + 1


@pytest.mark.parametrize("rows, expected_splits", [(100, 1), (MIN_SPLIT_ROWS * 2, 2), (100_000, 7)])
def test_in_memory_table_splits_but_not_below_the_minimum_rows(rows, expected_splits):
    session = Session(device="cpu")
    session.register("t", _table(rows))
    splits = session.table("t").splits()
    assert len(splits) == expected_splits
    assert sum(split.table.num_rows for split in splits) == rows


def test_explicit_split_rows_wins(tmp_path):
    pq.write_table(_table(4 * 20_000), tmp_path / "t.parquet", row_group_size=20_000)
    session = Session(device="cpu")
    session.register("t", tmp_path / "t.parquet", split_rows=1 << 20)
    assert len(session.table("t").splits()) == 1


@pytest.mark.parametrize("drivers", [1, 2, 3])
def test_drivers_share_a_small_table_and_results_match_duckdb(device_name, drivers, tmp_path, monkeypatch):
    monkeypatch.setattr(registered_table, "MIN_SPLIT_ROWS", 64)  # small rows keep the simulator quick
    table = _table(4 * 500)
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=500)
    session = Session(device=device_name, drivers=drivers)
    session.register("t", tmp_path / "t.parquet")
    scan = PlanBuilder(session.catalog).table_scan("t")
    scan_id = scan.plan().id
    plan = scan.aggregation(["k"], ["sum(v) AS s", "count(*) AS n"]).plan()
    result = session.execute(plan)
    connection = duckdb.connect()
    connection.register("t", table)
    assert_same_rows(result, duckdb_table(connection, "SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k"))
    scans = session.last_stats().operator_stats_by_node()[scan_id]
    # Off a GPU each 500-row group is a split (MIN_SPLITS_PER_TABLE); on cuda, by design, a table registered
    # without split_rows gets splits of a scan batch of rows (Session.register: read and copied as one large
    # batch while the next is decoded), and this table is one.
    if session.device.is_gpu:
        assert session.table("t").split_rows == session.config.scan_batch_rows(session.device) >= table.num_rows
    assert sum(s.runtime.get("splits", 0) for s in scans) == (1 if session.device.is_gpu else 4)
