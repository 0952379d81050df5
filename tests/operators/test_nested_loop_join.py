"""NestedLoopJoin (build + probe) against DuckDB: cross joins, non-equi filters, outer joins, nulls, empty sides."""

from __future__ import annotations

import decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows, duckdb_table, session_with_tables

from gpu_engine import Session
from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator

#: cuda-sim runs the four-driver cases only: the join kernels are the same at one driver and at four (the
#: driver count changes how drivers share a build, host code that cpu runs at both counts), and the simulator
#: interprets every kernel (~20 s of CI time went to the one-driver copies).
pytestmark = pytest.mark.simulator_values(drivers=(4,))

# Every probe row meets every build row: the pairs grow as the product, and the simulator interprets each one
# (its 30 probe rows still hold NULLs in every column, and the block test's 4-row batches still outnumber them).
PROBE_ROWS = {"cpu": 400, "cuda-sim": 30, "cuda": 400}
BUILD_ROWS = {"cpu": 30, "cuda-sim": 12, "cuda": 30}

JOIN_TYPES = ["inner", "left", "right", "full"]
OUTPUT = ["k_int", "y_int", "k_str", "u_str", "v_int"]
FILTER = "v_int < y_int"  # NULLs on both sides


def make_build_table(rows: int, seed: int = 5) -> pa.Table:
    """Return the build table ``u``: integers, strings and decimals with NULLs."""
    rng = np.random.default_rng(seed)
    nulls = rng.random(rows) < 0.2
    words = ["apple", "banana", "", "cherry pie", "fig", "zz"]
    return pa.table({
        "u_id": pa.array(range(rows), pa.int32()),
        "y_int": pa.array([None if n else int(v) for n, v in zip(nulls, rng.integers(-10**6, 10**6, rows))],
                          pa.int64()),
        "u_str": pa.array([None if i % 5 == 3 else words[i % len(words)] for i in range(rows)]),
        "u_dec": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**7, 10**7, rows)],
                          pa.decimal128(15, 2)),
    })


@pytest.fixture
def tables(device_name, table) -> dict[str, pa.Table]:
    """Yield the probe table ``t`` (the operator tests' table, cut) and the build table ``u``, sized for the device."""
    return {"t": table.slice(0, PROBE_ROWS[device_name]), "u": make_build_table(BUILD_ROWS[device_name])}


def _session(device_name: str, drivers: int, batch_rows: int, tables: dict[str, pa.Table]) -> Session:
    return session_with_tables(tables, splits=4, device=device_name, drivers=drivers, batch_rows=batch_rows)


def join_plan(catalog, join_type, output, join_filter=None, probe_filter=None, build_filter=None):
    """Return ``t`` nested-loop-joined with ``u``; optional filters on either input empty or thin a side."""
    ids = PlanNodeIdGenerator()
    build = PlanBuilder(catalog, id_generator=ids).table_scan("u")
    if build_filter:
        build = build.filter(build_filter)
    probe = PlanBuilder(catalog, id_generator=ids).table_scan("t")
    if probe_filter:
        probe = probe.filter(probe_filter)
    return probe.nested_loop_join(build, output, filter=join_filter, join_type=join_type).plan()


def reference_sql(join_type, output, join_filter=None, probe_filter=None, build_filter=None) -> str:
    """Return the DuckDB query the plan must match."""
    t = f"(SELECT * FROM t WHERE {probe_filter})" if probe_filter else "t"
    u = f"(SELECT * FROM u WHERE {build_filter})" if build_filter else "u"
    kind = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL OUTER JOIN"}[join_type]
    return f"SELECT {', '.join(output)} FROM {t} AS t {kind} {u} AS u ON {join_filter or 'TRUE'}"


@pytest.fixture
def check_join(device_name, tables):
    """Return ``check(drivers, batch_rows, join_type, output, **options)`` comparing with DuckDB."""
    connection = duckdb.connect()
    for name, value in tables.items():
        connection.register(name, value)

    def check(drivers, batch_rows, join_type, output=OUTPUT, **options):
        session = _session(device_name, drivers, batch_rows, tables)
        result = session.execute(join_plan(session.catalog, join_type, output, **options))
        expected = duckdb_table(connection, reference_sql(join_type, output, **options))
        assert result.schema.names == expected.schema.names
        assert_same_rows(result, expected)
        return session, result

    return check


@pytest.mark.parametrize("join_type", JOIN_TYPES)
def test_join_types_with_a_non_equi_filter(check_join, drivers, batch_rows, join_type):
    """Pairs where the filter is NULL do not match; outer joins then add the unmatched rows with NULLs."""
    _, result = check_join(drivers, batch_rows, join_type, join_filter=FILTER)
    assert result.num_rows > 0


def test_cross_join(check_join, tables, drivers, batch_rows):
    _, result = check_join(drivers, batch_rows, "inner")
    assert result.num_rows == tables["t"].num_rows * tables["u"].num_rows


@pytest.mark.parametrize("join_type, join_filter", [("inner", None), ("left", FILTER), ("inner", "k_str < u_str")])
def test_probe_columns_only(check_join, drivers, join_type, join_filter):
    """A join that outputs only probe columns hands on gather maps over the probe batch."""
    check_join(drivers, 64, join_type, ["k_int", "v_int"], join_filter=join_filter)


@pytest.mark.parametrize("join_filter", [
    "k_str < u_str OR u_str IS NULL",
    "v_dec > u_dec AND d_date >= DATE '1995-01-01'",
    "k_int * 100000 > y_int",
])
@pytest.mark.parametrize("join_type", ["inner", "full"])
def test_filters_over_both_sides(check_join, drivers, join_type, join_filter):
    check_join(drivers, 64, join_type, ["k_str", "u_str", "v_dec", "u_dec", "y_int"], join_filter=join_filter)


@pytest.mark.parametrize("output", [OUTPUT, ["k_int", "v_int"]], ids=["both_sides", "probe_only"])
@pytest.mark.parametrize("join_type", JOIN_TYPES)
def test_one_build_row_beside_filtered_probe_rows(check_join, drivers, join_type, output):
    """One build row and no filter (a scalar subquery): the probe's gather map is kept and the build row repeated."""
    _, result = check_join(drivers, 64, join_type, output, probe_filter="v_int > 0", build_filter="u_id = 2")
    assert result.num_rows > 0


@pytest.mark.parametrize("join_type", JOIN_TYPES)
def test_empty_build_side(check_join, drivers, join_type):
    """Inner and right joins give no rows; left and full give every probe row with NULL build columns."""
    _, result = check_join(drivers, 64, join_type, join_filter=FILTER, build_filter="y_int > 10000000")
    assert (result.num_rows == 0) == (join_type in ("inner", "right"))


@pytest.mark.parametrize("join_type", JOIN_TYPES)
def test_empty_probe_side(check_join, drivers, join_type):
    _, result = check_join(drivers, 64, join_type, join_filter=FILTER, probe_filter="v_int > 10000000")
    assert (result.num_rows == 0) == (join_type in ("inner", "left"))


@pytest.mark.parametrize("join_type", ["inner", "left"])
def test_blocks_stay_under_the_batch_size(check_join, tables, drivers, join_type):
    """A build side larger than a batch is walked in pieces, so no output batch exceeds the scan batch size."""
    batch_rows = tables["u"].num_rows // 3
    _, result = check_join(drivers, batch_rows, join_type, join_filter="v_int < y_int OR y_int IS NULL")
    sizes = [batch.num_rows for batch in result.to_batches()]
    assert max(sizes) <= batch_rows and len(sizes) > tables["t"].num_rows


def test_scalar_subquery(device_name, tables, drivers, batch_rows):
    """``SELECT ... FROM t, (SELECT avg(y_int) AS a FROM u) WHERE v_int > a``: aggregate, one row, cross join."""
    session = _session(device_name, drivers, batch_rows, tables)
    ids = PlanNodeIdGenerator()
    average = (PlanBuilder(session.catalog, id_generator=ids).table_scan("u")
               .aggregation([], ["avg(y_int) AS a"]).enforce_single_row())
    plan = (PlanBuilder(session.catalog, id_generator=ids).table_scan("t")
            .cross_join(average, ["k_int", "v_int", "a"]).filter("v_int > a").project(["k_int", "v_int"]).plan())
    connection = duckdb.connect()
    for name, value in tables.items():
        connection.register(name, value)
    expected = duckdb_table(connection, "SELECT k_int, v_int FROM t, (SELECT avg(y_int) AS a FROM u) WHERE v_int > a")
    result = session.execute(plan)
    assert 0 < result.num_rows < tables["t"].num_rows
    assert_same_rows(result, expected)


@pytest.mark.parametrize("join_type", ["inner", "left"])
def test_a_build_side_of_null_keys_only_is_not_probed(device_name, drivers, join_type):
    """``s = d`` with ``s`` text and ``d`` a DATE whose rows are all NULL: no pair can match, and DuckDB skips
    probing (its hash join drops NULL keys), so a text that is no date ('abc') is never cast; the probe cast it
    and raised "Could not convert 'abc'" (stop 52's fuzz11). Build rows whose compared column is NULL are
    dropped where no unmatched build row is emitted (inner, left); with a date among them both raise."""
    tables = {"a": pa.table({"s": pa.array(["abc", "2000-01-01", None]), "i": pa.array([1, 2, 3], pa.int64())}),
              "b": pa.table({"d": pa.array([None, None], pa.date32()), "j": pa.array([1, 2], pa.int64())})}
    kind = {"inner": "JOIN", "left": "LEFT JOIN"}[join_type]
    sql = f"SELECT i, j FROM a {kind} b ON a.s = b.d"
    session = session_with_tables(tables, device=device_name, drivers=drivers)
    connection = duckdb.connect()
    for name, value in tables.items():
        connection.register(name, value)
    assert_same_rows(session.sql(sql), duckdb_table(connection, sql))
