"""Generated SQL queries (tests/sql/sql_generator.py) through Session.sql, compared with DuckDB on the same files.

240 seeds on ``cpu`` at SF 0.01 (unfused) cover each of the 15 shapes 16 times:
filters, projections, grouped and global aggregation, HAVING, DISTINCT
aggregates, joins along foreign keys (comma and JOIN … ON), ORs across joined
tables (Q19's shape), [NOT] IN, [NOT] EXISTS (also under joins), uncorrelated
and correlated scalar subqueries, LEFT JOIN (aggregated, and filtered in WHERE
on either side), DISTINCT, CTEs (one referenced twice), ORDER BY + LIMIT. One seed per shape also runs on the
second device (the CUDA simulator at SF 0.001, or a real GPU), fused.
"""

from __future__ import annotations

import os

import pytest

from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table
from gpu_engine.connectors.tpch_data import register_tpch
from sql_generator import SHAPES, generate_query

SEEDS = range(240)


@pytest.fixture(scope="module")
def engine_and_duckdb(tpch_data):
    """Return a function: device name -> (Session over TPC-H, DuckDB connection on the same files)."""
    from gpu_engine import Session

    made = {}
    connections = []

    def pair(device_name: str):
        if device_name not in made:
            folder = tpch_data(0.01 if device_name == "cpu" else 0.001)
            # Unfused on cpu: with the CUDA simulator switched on (no GPU) fused kernels are interpreted,
            # ten times slower at SF 0.01; the fused path runs below, one seed per shape, and in test_tpch_sql.
            session = Session(device=device_name, fuse=device_name != "cpu")
            register_tpch(session, folder)
            connection = duckdb_connection(folder).__enter__()
            connections.append(connection)
            made[device_name] = (session, connection)
        return made[device_name]

    yield pair
    for connection in connections:
        connection.close()


def _check(seed: int, device_name: str, engine_and_duckdb) -> None:
    query = generate_query(seed)
    session, connection = engine_and_duckdb(device_name)
    expected = duckdb_table(connection, query.sql)
    actual = session.sql(query.sql)
    try:
        assert_same_rows(actual, expected, ordered=query.ordered)
    except AssertionError as error:
        raise AssertionError(f"seed {seed} ({query.shape}): {query.sql}\n{error}") from None


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_query_matches_duckdb(seed, engine_and_duckdb):
    _check(seed, "cpu", engine_and_duckdb)


def _second_device_cases():
    """One seed per shape on the device besides cpu: the CUDA simulator, or a real GPU (marked ``gpu``)."""
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    device, marks = ("cuda-sim", []) if simulated else ("cuda", [pytest.mark.gpu])
    return [pytest.param(seed, device, id=f"{device}-{shape}", marks=marks) for seed, shape in enumerate(SHAPES)]


@pytest.mark.parametrize("seed, device_name", _second_device_cases())
def test_generated_query_on_the_second_device(seed, device_name, engine_and_duckdb):
    _check(seed, device_name, engine_and_duckdb)


def test_the_generator_covers_every_shape_and_is_reproducible():
    shapes = {generate_query(seed).shape for seed in SEEDS}
    assert shapes == set(SHAPES)
    assert generate_query(7) == generate_query(7)
    assert len({generate_query(seed).sql for seed in SEEDS}) > 200  # distinct queries, not repeats
