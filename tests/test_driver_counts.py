"""One, two and four drivers give identical results (the issue's requirement), checked against each other and DuckDB.

Identical means the same rows, value for value: the queries here aggregate
decimals and integers, which are exact, so no tolerance is needed between
driver counts even though partial aggregates meet in a different order. On a
GPU each driver also has its own CUDA stream, so this is where streams that
hand batches over too early would show.
"""

from __future__ import annotations


import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table
from gpu_engine import Session
from gpu_engine.connectors.tpch_data import register_tpch
from gpu_engine.plans import tpch

SCALE_FACTOR = {"cpu": 0.01, "cuda-sim": 0.001, "cuda": 0.1}
QUERIES = {
    "primer": (tpch.primer_query, tpch.PRIMER_SQL),
    "q1": (lambda catalog: tpch.query(1, catalog), tpch.sql(1)),
    "q6": (lambda catalog: tpch.query(6, catalog), tpch.sql(6)),
    "q3": (lambda catalog: tpch.query(3, catalog), tpch.sql(3)),
}


@pytest.fixture(scope="module")
def tpch_folder(tpch_data):
    return tpch_data


def _sorted_rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)


@pytest.mark.parametrize("name", list(QUERIES))
def test_drivers_1_2_4_give_identical_results(name, device_name, tpch_folder):
    if device_name == "cuda-sim" and name == "q3":
        pytest.skip("a join query takes seconds per driver count under the simulator; q3 runs on cpu and cuda")
    folder = tpch_folder(SCALE_FACTOR[device_name])
    build_plan, sql = QUERIES[name]
    results = {}
    for drivers in (1, 2, 4):
        session = Session(device=device_name, drivers=drivers)
        register_tpch(session, folder)
        results[drivers] = session.execute(build_plan(session.catalog))
    assert results[1].num_rows > 0
    assert _sorted_rows(results[2]) == _sorted_rows(results[1])
    assert _sorted_rows(results[4]) == _sorted_rows(results[1])
    with duckdb_connection(folder) as connection:
        assert_same_rows(results[4], duckdb_table(connection, sql), ordered="ORDER BY" in sql)
