"""Session.cache: scans of a cached table read device batches, not Parquet, and return the same rows."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from duckdb_reference import assert_same_rows

from gpu_engine import Session
from gpu_engine.cluster import LocalCluster
from gpu_engine.plans import PlanBuilder

AGGREGATE_SQL = ("SELECT k_int, count(*) AS c, sum(v_int) AS s, min(k_str) AS lo, max(d_date) AS hi "
                 "FROM t WHERE v_float > -50 GROUP BY k_int")


@pytest.fixture
def parquet_dir(tmp_path, table):
    """Write the test table as two Parquet files with small row groups."""
    folder = tmp_path / "t"
    folder.mkdir()
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), folder / "part-0.parquet", row_group_size=100)
    pq.write_table(table.slice(half), folder / "part-1.parquet", row_group_size=100)
    return folder


def _aggregate_plan(catalog):
    return (PlanBuilder(catalog).table_scan("t").filter("v_float > -50")
            .aggregation(["k_int"], ["count(*) AS c", "sum(v_int) AS s", "min(k_str) AS lo", "max(d_date) AS hi"])
            .plan())


def _scan_stats(session):
    by_node = session.last_stats().operator_stats_by_node()
    return [s for stats in by_node.values() for s in stats if s.operator_type == "TableScan"]


def test_cached_results_equal_uncached_and_duckdb(device_name, drivers, batch_rows, parquet_dir, table, reference):
    session = Session(device=device_name, drivers=drivers, batch_rows=batch_rows)
    session.register("t", parquet_dir, split_rows=150)
    plan = _aggregate_plan(session.catalog)
    uncached = session.execute(plan)
    assert sum(s.runtime.get("cached_batches", 0) for s in _scan_stats(session)) == 0
    cached_table = session.cache("t")
    assert cached_table.num_rows == table.num_rows
    assert all(batch.num_rows <= session.config.scan_batch_rows(session.device) for batch in cached_table.batches)
    cached = session.execute(plan)
    assert_same_rows(cached, uncached)
    assert_same_rows(cached, reference(AGGREGATE_SQL))
    scans = _scan_stats(session)
    assert sum(s.runtime.get("cached_batches", 0) for s in scans) == len(cached_table.batches)
    assert sum(s.runtime.get("splits", 0) for s in scans) == len(cached_table.batches)
    assert session.cached_tables() == {"t": cached_table.nbytes} and cached_table.nbytes > 0


def test_a_cached_table_is_not_read_from_parquet_again(device_name, drivers, parquet_dir, monkeypatch, reference):
    session = Session(device=device_name, drivers=drivers, batch_rows=128)
    session.register("t", parquet_dir, split_rows=150)
    session.cache("t")
    moved = parquet_dir.with_name("moved")
    parquet_dir.rename(moved)  # the files are gone from where the table was registered

    def no_parquet(*args, **kwargs):
        raise AssertionError("a cached table was read from Parquet")

    monkeypatch.setattr(pq, "ParquetFile", no_parquet)
    monkeypatch.setattr(pq, "read_metadata", no_parquet)
    plan = _aggregate_plan(session.catalog)
    assert_same_rows(session.execute(plan), reference(AGGREGATE_SQL))
    # Without the cache the same query must read the files, which are gone: the test above can fail.
    monkeypatch.undo()
    assert session.uncache("t") and not session.uncache("t")
    with pytest.raises(OSError):
        session.execute(plan)


def test_scans_of_a_cached_table_get_only_their_columns_without_copies(device_name, parquet_dir, table):
    session = Session(device=device_name, batch_rows=128)
    session.register("t", parquet_dir)
    cached = session.cache("t")
    plan = PlanBuilder(session.catalog).table_scan("t", ["v_int"]).plan()
    result = session.execute(plan)
    assert sorted(result.column("v_int").to_pylist(), key=str) == sorted(table.column("v_int").to_pylist(), key=str)
    (scan,) = _scan_stats(session)
    assert scan.output_bytes <= 9 * scan.output_rows  # int64 values + validity only
    assert "h2d_bytes" not in scan.runtime and "arrow_to_batch_seconds" not in scan.runtime
    split = session.splits("t")[0]
    (served,) = split.read(["v_int"], session.config.scan_batch_rows(session.device))
    assert served.names == ("v_int",)
    xp = session.device.xp
    assert xp.shares_memory(served.base_column("v_int").data, cached.batches[0].base_column("v_int").data)


def test_explain_analyze_shows_the_scan_read_the_cache(device_name, parquet_dir):
    session = Session(device=device_name, batch_rows=128)
    session.register("t", parquet_dir)
    batches = len(session.cache("t").batches)
    text = session.explain(PlanBuilder(session.catalog).table_scan("t", ["k_int"]).plan(), analyze=True)
    assert f"cached_batches={batches}" in text


def test_registering_again_drops_the_cache_and_uncache_releases_it(device_name, parquet_dir, table):
    session = Session(device=device_name, batch_rows=128)
    session.register("t", parquet_dir)
    session.cache("t")
    assert session.cache("t") is session.cache("t")  # caching a cached table keeps it
    replacement = table.slice(0, 10)
    session.register("t", replacement)
    assert session.cached_tables() == {}
    plan = PlanBuilder(session.catalog).table_scan("t", ["k_int"]).plan()
    assert session.execute(plan).num_rows == 10
    session.cache("t")
    assert list(session.cached_tables()) == ["t"]
    assert session.uncache("t") and session.cached_tables() == {}
    with pytest.raises(Exception, match="unknown table"):
        session.cache("missing")


def test_an_empty_table_caches_to_no_batches(device_name, drivers, table):
    session = Session(device=device_name, drivers=drivers)
    session.register("t", table.slice(0, 0))
    assert session.cache("t").batches == ()
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation([], ["count(*) AS c", "sum(v_int) AS s"]).plan()
    assert session.execute(plan).to_pylist() == [{"c": 0, "s": None}]


def test_a_cluster_hands_out_the_cached_batches(device_name, parquet_dir, reference):
    session = Session(device=device_name, drivers=2, batch_rows=128)
    session.register("t", parquet_dir, split_rows=150)
    batches = len(session.cache("t").batches)
    parquet_dir.rename(parquet_dir.with_name("gone"))
    cluster = LocalCluster(session, stage_widths=(2, 2, 1))
    result = cluster.execute(_aggregate_plan(session.catalog))
    assert_same_rows(result, reference(AGGREGATE_SQL))
    text = cluster.explain(_aggregate_plan(session.catalog), analyze=True)
    assert f"cached_batches={batches}" in text


def test_arrow_tables_cache_too(device_name, drivers, table, reference):
    session = Session(device=device_name, drivers=drivers, batch_rows=100)
    session.register("t", table, split_rows=250)
    session.cache("t")
    assert_same_rows(session.execute(_aggregate_plan(session.catalog)),
                     reference(AGGREGATE_SQL))
    assert sum(s.runtime.get("cached_batches", 0) for s in _scan_stats(session)) == len(session.splits("t")) > 1


@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize("source", ["parquet", "arrow"])
def test_the_cache_coalesces_into_batches_of_batch_rows(device_name, parquet_dir, table, reference, source, prefetch):
    batch_rows = 128  # row groups of 100 rows and splits of 150-250 rows: neither lines up with it
    session = Session(device=device_name, drivers=2, batch_rows=batch_rows, scan_prefetch_depth=prefetch)
    session.register("t", parquet_dir if source == "parquet" else table, split_rows=150 if source == "parquet" else 250)
    cached = session.cache("t")
    sizes = [batch.num_rows for batch in cached.batches]
    assert len(sizes) == -(-table.num_rows // batch_rows)  # ceil(N / batch_rows): one batch per row group no more
    assert sizes[:-1] == [batch_rows] * (len(sizes) - 1) and 0 < sizes[-1] <= batch_rows
    assert_same_rows(session.execute(_aggregate_plan(session.catalog)), reference(AGGREGATE_SQL))
