"""Run the primer query and the planned TPC-H queries on the engine and compare with DuckDB on the same Parquet files.

The data is generated once per test session (and kept between sessions) under
``$GPU_ENGINE_DATA/tpch`` when that is set, else under pytest's cache folder.
``cpu`` runs SF 0.01; the CUDA simulator is slow and runs SF 0.001, and of the
join queries only :data:`SIMULATED_JOIN_QUERIES`.
"""

from __future__ import annotations

import decimal
import os

import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_connection, duckdb_table, rows_mismatch
from gpu_engine.connectors.tpch_data import register_tpch
from gpu_engine.plans import tpch

SCALE_FACTOR_BY_DEVICE = {"cpu": 0.01, "cuda": 0.01, "cuda-sim": 0.001}

QUERIES = {
    "primer": (tpch.primer_query, tpch.PRIMER_SQL, False),
    "q1": (lambda catalog: tpch.query(1, catalog), tpch.sql(1), True),
    "q6": (lambda catalog: tpch.query(6, catalog), tpch.sql(6), False),
}
SINGLE_TABLE_QUERIES = list(QUERIES)

JOIN_QUERY_NUMBERS = (2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22)
for _number in JOIN_QUERY_NUMBERS:
    QUERIES[f"q{_number}"] = (
        lambda catalog, number=_number: tpch.query(number, catalog),
        tpch.sql(_number),
        "ORDER BY" in tpch.sql(_number),
    )
JOIN_QUERIES = [f"q{n}" for n in JOIN_QUERY_NUMBERS]

# The simulator takes seconds per join query even at SF 0.001, so it runs a few that cover
# every operator: inner joins + top-N (Q3), a semi join (Q4), a six-table join (Q5), LIKE and
# EXTRACT over five joins (Q9), a left join counted twice (Q13), an IN subquery (Q18).
SIMULATED_JOIN_QUERIES = ("q3", "q4", "q5", "q9", "q13", "q18")

# Results that are legitimately thin at a scale factor, so the "DuckDB returned real rows" guard is
# off for them (the comparison still runs); each is also checked at SF 0.1 by
# test_thin_queries_at_a_larger_scale_factor.
THIN_RESULTS = {
    (0.01, "q17"): "no part is Brand#23 in a MED BOX at SF 0.01, so avg_yearly is one NULL",
    (0.001, "q5"): "no ASIA supplier serves an ASIA customer in 1994 at SF 0.001: no rows",
    (0.001, "q18"): "no order has over 300 units at SF 0.001: no rows",
}
LARGER_SCALE_CHECKS = ("q5", "q8", "q17")  # Q8's market shares are 0.0 at SF 0.01


def _join_cases():
    """(query, device, drivers): every join query on cpu (and a real GPU), the simulator only for a few.

    A real GPU runs each query at one and at four drivers. On ``cpu`` and the simulator each query runs at one
    driver count, the counts alternating along the queries (one driver: SINGLE aggregations, one pipeline per
    join side; four: PARTIAL/FINAL merges and drivers sharing a join's build), so both paths run over joins of
    every kind: the second count compiled each plan's kernels again (~20 s of a clean clone's CI, CI time).
    Every query also runs unfused at two drivers (:func:`test_query_unfused_matches_duckdb`), as SQL at two
    (tests/sql/test_tpch_sql.py), and Q3 at several counts (tests/test_driver_counts.py).

    tests/conftest.py sets NUMBA_ENABLE_CUDASIM=1 before collection when no GPU is present, so the
    second device is the one its ``device_name`` fixture would give.
    """
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    for index, name in enumerate(JOIN_QUERIES):
        drivers = 4 if index % 2 else 1
        yield pytest.param(name, "cpu", drivers, id=f"cpu-{name}-drivers{drivers}")
        if not simulated:
            for count in (1, 4):
                yield pytest.param(name, "cuda", count, id=f"cuda-{name}-drivers{count}", marks=[pytest.mark.gpu])
        elif name in SIMULATED_JOIN_QUERIES:
            count = 4 if SIMULATED_JOIN_QUERIES.index(name) % 2 == 0 else 1
            yield pytest.param(name, "cuda-sim", count, id=f"cuda-sim-{name}-drivers{count}")


@pytest.fixture(scope="session")
def duckdb_results(tpch_data):
    """Return a function: (scale factor, query name) -> DuckDB's result, computed once."""
    results: dict[tuple[float, str], pa.Table] = {}

    def result_for(scale_factor: float, name: str) -> pa.Table:
        key = (scale_factor, name)
        if key not in results:
            with duckdb_connection(tpch_data(scale_factor)) as connection:
                results[key] = duckdb_table(connection, QUERIES[name][1])
        return results[key]

    return result_for


@pytest.mark.parametrize("drivers", [1, 4], ids=lambda d: f"drivers{d}")
@pytest.mark.parametrize("name", SINGLE_TABLE_QUERIES)
def test_query_matches_duckdb(name, drivers, device_name, tpch_data, duckdb_results):
    _check_query(name, drivers, device_name, tpch_data, duckdb_results)


@pytest.mark.parametrize("name, device_name, drivers", list(_join_cases()))
def test_join_query_matches_duckdb(name, drivers, device_name, tpch_data, duckdb_results):
    _check_query(name, drivers, device_name, tpch_data, duckdb_results)


@pytest.mark.parametrize("name", list(QUERIES))
def test_query_unfused_matches_duckdb(name, tpch_data, duckdb_results):
    """Every query also runs with fusion off (``fuse=False``): each node its own operator, as before fusion."""
    _check_query(name, 2, "cpu", tpch_data, duckdb_results, fuse=False)


@pytest.mark.parametrize("name", SINGLE_TABLE_QUERIES)
def test_single_table_query_unfused_on_the_second_device(name, device_name, tpch_data, duckdb_results):
    _check_query(name, 1, device_name, tpch_data, duckdb_results, fuse=False)


@pytest.mark.parametrize("name", LARGER_SCALE_CHECKS)
def test_thin_queries_at_a_larger_scale_factor(name, tpch_data, duckdb_results):
    _check_query(name, 2, "cpu", tpch_data, duckdb_results, scale_factor=0.1)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="the cuda case runs at SF 0.01 already")
def test_q18_on_the_simulator_with_rows(tpch_data):
    """Q18 selects nothing at SF 0.001 (no order has over 300 units), so the simulator also runs it there with
    the HAVING threshold at 250 units, which four orders pass (SF 0.01 took the simulator about 60 s)."""
    from gpu_engine import Session
    from gpu_engine.plans.tpch import q18

    folder = tpch_data(0.001)
    with duckdb_connection(folder) as connection:
        expected = duckdb_table(connection, q18.SQL_TEMPLATE.format(quantity=250))
    assert expected.num_rows > 0
    session = Session(device="cuda-sim", drivers=2)
    register_tpch(session, folder)
    assert_same_rows(session.execute(q18.plan(session.catalog, quantity=250)), expected, ordered=True)


def _check_query(name, drivers, device_name, tpch_data, duckdb_results, scale_factor=None, fuse=True):
    from gpu_engine import Session

    scale_factor = scale_factor or SCALE_FACTOR_BY_DEVICE[device_name]
    build_plan, _, ordered = QUERIES[name]
    expected = duckdb_results(scale_factor, name)
    if (scale_factor, name) not in THIN_RESULTS:  # so that a comparison of two empty results cannot pass
        assert expected.num_rows > 0 and None not in expected.column(0).to_pylist()

    session = Session(device=device_name, drivers=drivers, fuse=fuse)
    register_tpch(session, tpch_data(scale_factor))
    actual = session.execute(build_plan(session.catalog))

    assert_same_rows(actual, expected, ordered=ordered)


def test_plans_name_columns_as_the_specification(tpch_data):
    from gpu_engine import Session

    session = Session(device="cpu")
    register_tpch(session, tpch_data(0.001))
    assert tpch.primer_query(session.catalog).output_schema.names == ["l_partkey", "count"]
    assert tpch.query(1, session.catalog).output_schema.names == [
        "l_returnflag",
        "l_linestatus",
        "sum_qty",
        "sum_base_price",
        "sum_disc_price",
        "sum_charge",
        "avg_qty",
        "avg_price",
        "avg_disc",
        "count_order",
    ]
    assert tpch.query(6, session.catalog).output_schema.names == ["revenue"]


@pytest.mark.parametrize("name", JOIN_QUERIES)
def test_join_plans_name_columns_as_duckdb(name, tpch_data, duckdb_results):
    from gpu_engine import Session

    session = Session(device="cpu")
    register_tpch(session, tpch_data(0.001))
    assert QUERIES[name][0](session.catalog).output_schema.names == duckdb_results(0.001, name).column_names


@pytest.mark.parametrize("number", [0, 23, -1])
def test_query_numbers_outside_the_benchmark_are_rejected(number):
    with pytest.raises(ValueError, match="queries 1 to 22"):
        tpch.query(number, {})


def test_query_number_must_be_an_int():
    with pytest.raises(TypeError):
        tpch.sql("1")


# ---------------------------------------------------- the comparison helper
def _table(**columns) -> pa.Table:
    return pa.table(columns)


@pytest.mark.parametrize(
    "engine, duckdb, ordered",
    [
        # same rows in another order, as a multiset
        (_table(k=[2, 1], v=["b", "a"]), _table(k=[1, 2], v=["a", "b"]), False),
        # floats within 1e-9 relative
        (_table(x=[1.0 + 1e-12, 2.0]), _table(x=[1.0, 2.0]), True),
        # a decimal and a double holding the same value
        (_table(x=pa.array([decimal.Decimal("2.50")], pa.decimal128(15, 2))), _table(x=[2.5]), True),
        # decimals with different scales, equal values
        (
            _table(x=pa.array([decimal.Decimal("1.50")], pa.decimal128(38, 2))),
            _table(x=pa.array([decimal.Decimal("1.5000")], pa.decimal128(38, 4))),
            True,
        ),
        # string types differ, values do not
        (_table(s=pa.array(["x"], pa.large_string())), _table(s=pa.array(["x"], pa.string())), True),
        # NULLs equal NULLs
        (_table(x=pa.array([None, 1], pa.int64())), _table(x=pa.array([1, None], pa.int64())), False),
    ],
)
def test_assert_same_rows_accepts_equal_results(engine, duckdb, ordered):
    assert_same_rows(engine, duckdb, ordered=ordered)


@pytest.mark.parametrize(
    "engine, duckdb, ordered, reason",
    [
        (_table(k=[2, 1]), _table(k=[1, 2]), True, "rows differ"),
        (_table(k=[1, 1]), _table(k=[1, 2]), False, "rows differ"),
        (_table(k=[1]), _table(k=[1, 2]), False, "row counts differ"),
        (_table(a=[1]), _table(b=[1]), False, "column names differ"),
        (_table(x=[1.0 + 1e-6]), _table(x=[1.0]), False, "rows differ"),
        (
            _table(x=pa.array([decimal.Decimal("0.01")], pa.decimal128(15, 2))),
            _table(x=pa.array([decimal.Decimal("0.02")], pa.decimal128(15, 2))),
            False,
            "rows differ",
        ),
        (_table(x=pa.array([None], pa.int64())), _table(x=[0]), False, "rows differ"),
        (_table(x=["1"]), _table(x=[1]), False, "cannot match"),
    ],
)
def test_assert_same_rows_rejects_different_results(engine, duckdb, ordered, reason):
    assert reason in (rows_mismatch(engine, duckdb, ordered=ordered) or "")
    with pytest.raises(AssertionError, match=reason):
        assert_same_rows(engine, duckdb, ordered=ordered)


def test_every_tpch_query_has_a_plan_and_its_sql():
    assert tpch.available_queries() == tuple(range(1, 23))
    assert all("SELECT" in tpch.sql(n) for n in tpch.available_queries())
