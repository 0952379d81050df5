"""Exact arithmetic at any scale, against DuckDB: sums that widen, 128-bit decimals, uint64, Q11 by scale factor.

The tables are crafted so totals cross 2**63 and 10**18 inside partial
aggregates and in the finals (drivers see the splits in whatever order they
come), products need 128 bits, uint64 values lie at and above 2**63, decimal(38,
s) inputs hold 30-odd digits, and NULLs sit everywhere. Every result is
compared with DuckDB's rows *and types* (sums are HUGEINT/decimal(38, s), which
DuckDB hands to Arrow as decimal128(38, s)); where DuckDB raises, the engine
must raise too. Cases run on ``cpu`` and ``cuda-sim``, fused and unfused, with
one and three drivers and small splits; the simulator's cases use a few dozen
rows.
"""

from __future__ import annotations

import decimal
import random

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows

from gpu_engine import ExecutionError, Session
from gpu_engine.plans import PlanBuilder, format_plan

D = decimal.Decimal
BIG = 2**62


def _table(rows: int) -> pa.Table:
    """Return groups whose sums cross 2**63 (int64), 10**18 (decimal(18,2) units) and 2**64 (uint64), with NULLs."""
    g, i, d, u, w, n = [], [], [], [], [], []
    for r in range(rows):
        group = r % 4
        g.append(group)
        # group 0: all values near +2**62 (total far past 2**63); group 1: +/- pairs that cancel (partials
        # cross 2**63 while the total fits); group 2: small; group 3: every value NULL.
        if group == 3:
            i.append(None), d.append(None), u.append(None), w.append(None), n.append(None)
            continue
        sign = 1 if group != 1 or (r // 4) % 2 == 0 else -1
        i.append(None if r % 7 == 5 else (sign * (BIG + r) if group != 2 else r - 20))
        d.append(None if r % 11 == 6 else D(sign * (10**16 * 9 + r)) / 100 if group != 2 else D(r) / 100)
        u.append(None if r % 13 == 9 else 2**64 - 1 - r if group != 2 else 2**63 + r)
        w.append(None if r % 5 == 4 else D(sign * (10**31 + r)) / 1000 if group != 2 else D(-r) / 1000)
        n.append(None if r % 3 == 1 else sign * (r % 50))
    return pa.table({
        "g": pa.array(g, pa.int32()),
        "i": pa.array(i, pa.int64()),
        "d": pa.array(d, pa.decimal128(18, 2)),
        "u": pa.array(u, pa.uint64()),
        "w": pa.array(w, pa.decimal128(38, 3)),
        "n": pa.array(n, pa.int32()),
    })


SUMS = ["sum(i) AS si", "sum(d) AS sd", "sum(u) AS su", "sum(w) AS sw", "sum(n) AS sn",
        "avg(i) AS ai", "avg(d) AS ad", "avg(u) AS au", "avg(w) AS aw", "count(i) AS ci",
        "min(u) AS mu", "max(d) AS md", "min(w) AS lw", "max(w) AS hw"]


def _duckdb(table: pa.Table, sql: str) -> pa.Table:
    connection = duckdb.connect()
    connection.register("t", table)
    return connection.sql(sql).to_arrow_table()


def _session(device_name: str, drivers: int, fuse: bool, table: pa.Table, split_rows: int) -> Session:
    session = Session(device=device_name, drivers=drivers, fuse=fuse, batch_rows=max(split_rows // 2, 1))
    session.register("t", table, split_rows=split_rows)
    return session


def _grouped_sums(session: Session, drivers: int, aggregates=SUMS):
    builder = PlanBuilder(session.catalog).table_scan("t")
    if drivers == 1:
        builder = builder.aggregation(["g"], aggregates)
    else:  # partial sums on every driver, repartitioned, merged: no total may depend on which driver saw what
        builder = builder.partial_aggregation(["g"], aggregates).local_partition(["g"]).final_aggregation()
    return builder.order_by(["g"]).plan()


def _assert_same_rows_and_types(actual: pa.Table, expected: pa.Table) -> None:
    assert actual.schema.types == expected.schema.types, (actual.schema, expected.schema)
    assert_same_rows(actual, expected, ordered=True)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("drivers, split_rows", [(1, 5), (3, 3), (3, 17)])
def test_sums_crossing_64_bits_match_duckdb(device_name, drivers, split_rows, fuse):
    if device_name == "cuda-sim" and split_rows == 17:
        pytest.skip("cuda-sim: the small splits cover the partial merges")
    table = _table(48 if device_name == "cuda-sim" else 160)
    expected = _duckdb(table, f"SELECT g, {', '.join(SUMS)} FROM t GROUP BY g ORDER BY g")
    assert expected.column("si").to_pylist()[0] > 2**63 and expected.column("su").to_pylist()[0] > 2**64
    session = _session(device_name, drivers, fuse, table, split_rows)
    _assert_same_rows_and_types(session.execute(_grouped_sums(session, drivers)), expected)


def test_global_sum_with_cancelling_partials_is_the_same_every_run():
    """The issue's 30 runs: partial totals pass 2**63 on some drivers, the exact total fits; every run agrees."""
    values = [BIG] * 6 + [-BIG] * 6 + [7]
    table = pa.table({"g": pa.array([0] * len(values), pa.int32()), "v": pa.array(values, pa.int64())})
    expected = _duckdb(table, "SELECT sum(v) AS s FROM t").column("s").to_pylist()
    assert expected == [7]
    answers = set()
    for run in range(30):
        session = Session(device="cpu", drivers=3, batch_rows=1, fuse=run % 2 == 0)
        session.register("t", table, split_rows=1)
        plan = PlanBuilder(session.catalog).table_scan("t").aggregation([], ["sum(v) AS s"]).plan()
        answers.add(tuple(session.execute(plan).column("s").to_pylist()))
    assert answers == {tuple(expected)}


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("copies, split_rows, error", [(2, 1, "38 digits"), (3, 3, "128 bits")],
                         ids=["final_past_38_digits", "partial_past_128_bits"])
def test_sum_beyond_38_digits_raises_as_duckdb(device_name, fuse, copies, split_rows, error):
    """A total of 10**38 or more raises, as DuckDB; one past 2**127 already in a partial sum (three values of
    6 * 10**37 in one split) raises there."""
    value = D(10**37 * 6)
    table = pa.table({"g": pa.array([1] * copies, pa.int32()), "w": pa.array([value] * copies, pa.decimal128(38, 0))})
    with pytest.raises(duckdb.OutOfRangeException):
        _duckdb(table, "SELECT sum(w) FROM t")
    session = _session(device_name, 2, fuse, table, split_rows)
    with pytest.raises(ExecutionError, match=error):
        session.execute(_grouped_sums(session, 2, ["sum(w) AS s"]))


def _wide_sums_table() -> pa.Table:
    """Return decimal(38, 2) values whose first three splits of 6 all fit int64 and whose last two hold 30-digit
    values: group 0's total crosses 2**63, group 1's wide values cancel to a total that fits, group 2 is small and
    negative, group 3 NULL; every batch of 3 rows has a NULL (one kernel variant reads validity)."""
    g, w = [], []
    for r in range(30):
        group = r % 4
        g.append(group)
        wide = r >= 18
        if group == 3 or r % 3 == 2:
            w.append(None)
        elif group == 0:
            w.append(D(2**62 + r) / 100)
        elif group == 1:
            w.append(D((-1) ** (r // 4) * (10**30 + r if wide else r)) / 100)
        else:
            w.append(D(-r - (10**28 if wide else 0)) / 100)
    return pa.table({"g": pa.array(g, pa.int32()), "w": pa.array(w, pa.decimal128(38, 2))})


def test_sums_of_a_wide_decimal_column_fuse_and_match_duckdb(device_name, monkeypatch):
    """sum/avg/count of a decimal(38) column (as the re-aggregation above eager aggregation reads its partial
    sums) run in the fused kernel, the value's words added to 128-bit state: batches of narrow and of wide
    values, totals past 2**63, cancelling wide values, negatives, NULLs, a group of NULLs; DuckDB's rows and
    types. cpu runs a SINGLE step (two kernels: narrow and wide batches); the simulator runs PARTIAL steps and a
    global aggregate (the CUDA twin's per-thread states) with every atomic pausing (tests/simulated_atomics.py:
    the four limbs are independent atomic adds). Before, the kernel refused the column and these ran unfused."""
    from simulated_atomics import interleave_atomics

    from gpu_engine.planning import prepare_plan
    from gpu_engine.plans.nodes import FusedAggregationNode, walk_plan

    table = _wide_sums_table()
    aggregates = ["sum(w) AS s", "avg(w) AS a", "count(w) AS c"]
    runs = [(["g"], 1)]
    if device_name == "cuda-sim":
        interleave_atomics(monkeypatch, pause=0.00005)
        runs = [(["g"], 2), ([], 1)]
    for keys, drivers in runs:
        session = _session(device_name, drivers, True, table, 6)
        if keys:
            plan = _grouped_sums(session, drivers, aggregates)
            sql = f"SELECT g, {', '.join(aggregates)} FROM t GROUP BY g ORDER BY g"
        else:
            plan = PlanBuilder(session.catalog).table_scan("t").aggregation([], aggregates).plan()
            sql = f"SELECT {', '.join(aggregates)} FROM t"
        executed = prepare_plan(plan, session.device, session.drivers, session.config).plan
        assert any(isinstance(node, FusedAggregationNode) and node.step.input_is_raw for node in walk_plan(executed))
        _assert_same_rows_and_types(session.execute(plan), _duckdb(table, sql))


EXPRESSIONS = [
    "w * 1000 AS m1",                      # decimal(38,3) product past int64
    "i * d AS m2",                         # int64 x decimal(18,2): decimal(37,2), ~2**62 * 9e14
    "d * d AS m3",                         # capped at 18 digits by DuckDB's rule: overflow -> error rows excluded
    "w + w AS a1", "w - i AS a2", "-w AS neg",
    "w > i AS c1", "w <= d AS c2", "u > i AS c3", "u >= 9223372036854775807 AS c4",
    "CAST(w AS DOUBLE) AS f1", "CAST(u AS DOUBLE) AS f2", "w / 7 AS f3",
    "CAST(u AS DECIMAL(20,0)) AS x1", "CAST(i AS DECIMAL(38,10)) AS x2", "CAST(w AS DECIMAL(38,1)) AS x3",
    "CAST(d AS DECIMAL(38,18)) AS x4", "CAST(w AS VARCHAR) AS s1", "CAST(u AS VARCHAR) AS s2",
    "CAST(CAST(i AS DOUBLE) * 1e10 AS DECIMAL(38,0)) AS x5", "CAST(-1.5e30 AS DECIMAL(38,2)) AS x6",
    "CASE WHEN i > 0 THEN w ELSE d END AS k1", "CASE WHEN w > 0 THEN w * 10 END AS k2", "w IN (1, 2.5) AS k3",
]


def _expression_table() -> pa.Table:
    rng = random.Random(3)
    rows = 24
    return pa.table({
        "i": pa.array([None if r % 6 == 1 else rng.choice([BIG + r, -BIG - r, r * 1000 - 7]) for r in range(rows)],
                      pa.int64()),
        "d": pa.array([None if r % 5 == 2 else D(rng.randrange(-10**17, 10**17)) / 100 for r in range(rows)],
                      pa.decimal128(18, 2)),
        "u": pa.array([None if r % 7 == 3 else rng.choice([2**64 - 1, 2**63, 2**63 - 1, r]) for r in range(rows)],
                      pa.uint64()),
        "w": pa.array([None if r % 4 == 3 else D(rng.randrange(-10**33, 10**33)) / 1000 for r in range(rows)],
                      pa.decimal128(38, 3)),
    })


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_128_bit_expressions_match_duckdb(device_name, expression):
    table = _expression_table()
    try:
        expected = _duckdb(table, f"SELECT {expression} FROM t")
    except (duckdb.OutOfRangeException, duckdb.ConversionException):
        expected = None
    session = _session(device_name, 1, True, table, 24)
    plan = PlanBuilder(session.catalog).table_scan("t").project([expression]).plan()
    if expected is None:
        with pytest.raises(ExecutionError, match="38 digits|out of range|does not fit"):
            session.execute(plan)
        return
    _assert_same_rows_and_types(session.execute(plan), expected) if not expected.schema.types[0].equals(
        pa.float64()) else assert_same_rows(session.execute(plan), expected, ordered=True)


@pytest.mark.parametrize("expression", ["CAST(u AS BIGINT) AS x", "w * w AS x", "CAST(w AS DECIMAL(30,3)) AS x",
                                        "CAST(i AS UBIGINT) AS x"])
def test_out_of_range_results_raise_as_duckdb(device_name, expression):
    table = _expression_table()
    with pytest.raises((duckdb.OutOfRangeException, duckdb.ConversionException)):
        _duckdb(table, f"SELECT {expression} FROM t")
    session = _session(device_name, 1, True, table, 24)
    with pytest.raises(ExecutionError, match="38 digits|out of range|does not fit"):
        session.execute(PlanBuilder(session.catalog).table_scan("t").project([expression]).plan())


@pytest.mark.parametrize("expression", ["u - i AS x", "u % 7 AS x", "CAST(u AS DECIMAL(20,0)) + 1 AS x"])
def test_uint64_arithmetic_matches_duckdb(expression):
    """UBIGINT beside a signed integer is DuckDB's HUGEINT (decimal128(38, 0) in Arrow), exact past 2**64; it was
    refused at plan time until stop 54."""
    session = _session("cpu", 1, True, _expression_table(), 24)
    plan = PlanBuilder(session.catalog).table_scan("t").project([expression]).plan()
    expected = _duckdb(_expression_table(), f"SELECT {expression} FROM t")
    _assert_same_rows_and_types(session.execute(plan), expected)


def test_decimal128_columns_round_trip_through_a_query(device_name):
    table = _expression_table().select(["w"])
    session = _session(device_name, 2, True, table, 5)
    result = session.execute(PlanBuilder(session.catalog).table_scan("t").filter("w IS NULL OR w <> 0").plan())
    assert result.schema.field("w").type == pa.decimal128(38, 3)
    assert sorted(result.column("w").to_pylist(), key=str) == sorted(table.column("w").to_pylist(), key=str)


def test_wide_kernel_matches_python_integers(device):
    """add/sub/mul/compare/rescale on 128-bit words against Python's integers, on both twins."""
    from gpu_engine.kernels import decimal128

    rng = random.Random(9)
    n = 64 if device.name == "cpu" else 16
    a = [rng.choice([rng.randrange(-10**37, 10**37), rng.randrange(-2**70, 2**70), rng.randrange(-9, 9)])
         for _ in range(n)]
    b = [rng.choice([rng.randrange(-10**19, 10**19), 10**rng.randrange(0, 19), -1, 0]) for _ in range(n)]

    def words(values):
        return device.asarray(np.array([[v & (2**64 - 1), (v >> 64) & (2**64 - 1)] for v in values],
                                       dtype=np.uint64).view(np.int64))

    def value(row):
        return (int(row[1]) << 64) + (int(row[0]) & (2**64 - 1))

    def rounded(x, k):
        q, r = divmod(abs(x), 10**k)
        q += 2 * r >= 10**k
        return -q if x < 0 else q

    cases = [(decimal128.ADD, 1, 0, 0, lambda x, y: x * 10 + y), (decimal128.SUBTRACT, 0, 2, 0, lambda x, y: x - y * 100),
             (decimal128.MULTIPLY, 0, 0, 3, lambda x, y: rounded(x * y, 3)),
             (decimal128.RESCALE, 0, 0, 5, lambda x, y: rounded(x, 5))]
    for op, left_up, right_up, down, reference in cases:
        out, status = decimal128.wide_binary(device, op, words(a), words(b), left_up, right_up, down)
        out, status = device.to_host(out), device.to_host(status)
        for k in range(n):
            exact = reference(a[k], b[k])
            if abs(exact) >= 10**38 or abs(a[k] * 10**left_up) >= 2**127 or (op == decimal128.MULTIPLY and abs(a[k] * b[k]) >= 2**127):
                assert status[k] == decimal128.OVERFLOW or abs(exact) < 10**38, (op, a[k], b[k])
                continue
            assert status[k] == decimal128.OK and value(out[k]) == exact, (op, a[k], b[k], value(out[k]), exact)
    signs, _ = decimal128.wide_binary(device, decimal128.COMPARE, words(a), words(b), 0, 1)
    signs = device.to_host(signs)
    assert [int(s) for s in signs[:, 0]] == [(x > y * 10) - (x < y * 10) for x, y in zip(a, b)]


def test_q11_fraction_follows_the_scale_factor(tpch_data):
    """TPC-H Q11's FRACTION is 0.0001 / SF; plan and SQL agree at SF 0.01 and the answer is DuckDB's."""
    from duckdb_reference import duckdb_connection, duckdb_table
    from gpu_engine.connectors.tpch_data import register_tpch
    from gpu_engine.plans import tpch

    assert "0.0001000000" in tpch.sql(11) and "0.0000100000" in tpch.sql(11, 10) and "0.0100000000" in tpch.sql(11, 0.01)
    folder = tpch_data(0.01)
    with duckdb_connection(folder) as connection:
        expected = duckdb_table(connection, tpch.sql(11, 0.01))
        at_sf1 = duckdb_table(connection, tpch.sql(11))
    assert 0 < expected.num_rows < at_sf1.num_rows
    session = Session(device="cpu", drivers=2)
    register_tpch(session, folder)
    assert "0.0000100000" in format_plan(tpch.query(11, session.catalog, sf=10), full=True)
    _assert_same_rows_and_types(session.execute(tpch.query(11, session.catalog, sf=0.01)), expected)


def test_order_by_and_top_n_on_wide_decimals(device_name):
    """Sort keys of 128-bit decimals are two words (high signed, low unsigned); grouping on them is refused clearly."""
    table = _expression_table().select(["w", "i"])
    session = _session(device_name, 2, True, table, 7)
    for plan, sql in [
        (PlanBuilder(session.catalog).table_scan("t").order_by(["w DESC", "i"]).plan(),
         "SELECT * FROM t ORDER BY w DESC NULLS LAST, i NULLS LAST"),
        (PlanBuilder(session.catalog).table_scan("t").top_n(["w", "i"], 5).plan(),
         "SELECT * FROM t ORDER BY w NULLS LAST, i NULLS LAST LIMIT 5"),
    ]:
        _assert_same_rows_and_types(session.execute(plan), _duckdb(table, sql))
    with pytest.raises(ExecutionError, match="beyond 64 bits"):
        session.execute(PlanBuilder(session.catalog).table_scan("t").aggregation(["w"], ["count(*) AS c"]).plan())
