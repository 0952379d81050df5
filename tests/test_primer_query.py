"""The primer query returns its rows in one stable order: by ``l_partkey``, as its SQL says.

Why: the demo and ``gpu-engine query`` print the primer's first rows; without
an ORDER BY they depended on hash-table slot order and driver count and changed
between runs. The engine, DuckDB (on the same SQL text the benchmark and the
CLI run) and the benchmark's Polars twin must agree row for row, in order.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from bench.tpch_queries import bench_query
from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table
from gpu_engine import Session
from gpu_engine.cli import parse_query_list
from gpu_engine.connectors.tpch_data import register_tpch
from gpu_engine.plans import tpch
from gpu_engine.plans.nodes import OrderByNode

SCALE_FACTOR_BY_DEVICE = {"cpu": 0.01, "cuda": 0.01, "cuda-sim": 0.001}


def test_the_cli_and_the_benchmark_run_the_same_ordered_sql():
    (choice,) = parse_query_list("primer")
    bench = bench_query("primer")
    assert choice.sql == bench.sql == tpch.PRIMER_SQL
    assert tpch.PRIMER_SQL.rstrip().endswith("ORDER BY l_partkey")
    assert choice.ordered and bench.ordered
    assert isinstance(tpch.primer_query({"lineitem": pa.schema([("l_partkey", pa.int64())])}), OrderByNode)


@pytest.mark.parametrize("drivers", [1, 2])
def test_rows_come_in_key_order_on_every_device(device_name, drivers, tpch_data):
    folder = tpch_data(SCALE_FACTOR_BY_DEVICE[device_name])
    session = Session(device=device_name, drivers=drivers, batch_rows=4096)
    register_tpch(session, folder)
    result = session.execute(tpch.primer_query(session.catalog))
    expected = duckdb_table(duckdb_connection(folder), tpch.PRIMER_SQL)
    assert result.num_rows == expected.num_rows > 100
    assert_same_rows(result, expected, ordered=True)


def test_the_polars_twin_returns_the_same_rows_in_order(tpch_data):
    import polars as pl

    folder = tpch_data(0.01)
    lazy = bench_query("primer").polars({"lineitem": pl.scan_parquet(folder / "lineitem.parquet")})
    expected = duckdb_table(duckdb_connection(folder), tpch.PRIMER_SQL)
    assert_same_rows(lazy.collect().to_arrow(), expected, ordered=True)
