"""Window (issue 30 item 1) built with PlanBuilder against DuckDB, on every device, at 1 and 2 drivers.

Checked: ranking (row_number on a total order, rank/dense_rank/percent_rank/cume_dist/ntile with ties), value
functions (lag/lead with offsets and defaults, first/last/nth_value over frames, IGNORE NULLS), aggregates over the whole
partition, over SQL's default frame with ORDER BY (peers share a value) and over ROWS frames at partition edges
(empty frames give NULL, count 0); NULLs in partition and order keys (NULLS FIRST/LAST), one-row partitions,
empty input, no partition keys (a gather), no sort keys. Rows compare as multisets; where ties leave
row_number free, only the multiset of (partition, row_number) pairs is compared.
"""

from __future__ import annotations

import datetime
import decimal
import re

import pyarrow as pa
import pytest

from duckdb_reference import duckdb_table_over, rows_mismatch

from gpu_engine import MemoryCapExceeded, Session
from gpu_engine.errors import PlanError
from gpu_engine.plans import PlanBuilder


def _table(rows: int) -> pa.Table:
    """Return rows with ties and NULLs in every key; floats are quarters, so sums are exact in any order."""
    ids = list(range(rows))
    start = datetime.date(2000, 1, 1)

    def null_every(values, step, offset=0):
        return [None if (i + offset) % step == 0 else v for i, v in enumerate(values)]

    return pa.table({
        "id": pa.array(ids, pa.int64()),
        # Keys 0..4 with NULLs, and a run of one-row partitions (100 + id).
        "k": pa.array(null_every([100 + i if i % 13 == 5 else (i * 7) % 5 for i in ids], 11), pa.int32()),
        "s": pa.array(null_every([["x", "yy", "", "a long string key"][(i * 3) % 4] for i in ids], 9, 4)),
        "ds": pa.array(null_every([["p", "qq", "r", ""][(i * 5) % 4] for i in ids], 5, 2)).dictionary_encode(),
        "o": pa.array(null_every([(i * 5) % 7 for i in ids], 8, 3), pa.int64()),
        "v": pa.array(null_every([((i * 37) % 23 - 11) * 0.25 for i in ids], 6, 1), pa.float64()),
        "d": pa.array(null_every([decimal.Decimal((i * 71) % 1000 - 500).scaleb(-2) for i in ids], 7, 2),
                      pa.decimal128(12, 2)),
        "dt": pa.array(null_every([start + datetime.timedelta(days=(i * 29) % 400) for i in ids], 10, 5), pa.date32()),
    })


ROWS = {"cpu": 300, "cuda-sim": 24, "cuda": 300}

# (partition keys, sort keys, [(call, frame, name)]): calls whose result is defined whatever the order of ties.
CASES = [
    (["k"], ["id"], [
        ("row_number()", "", "rn"), ("rank()", "", "r"), ("lag(v)", "", "lg"), ("lead(v, 2)", "", "ld"),
        ("lag(s, 1, 'none')", "", "ls"), ("lead(d, 3, 0)", "", "ldd"), ("lag(dt, 0)", "", "l0"),
        ("first_value(v)", "", "fv"), ("last_value(s)", "", "lv"), ("nth_value(d, 2)", "", "nv"),
        ("ntile(3)", "", "nt"), ("sum(d)", "", "sd"), ("count(v)", "", "cv"), ("avg(o)", "", "ao"),
        ("sum(v)", "ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING", "sw"),
        ("min(o)", "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING", "mino"),
        ("max(dt)", "ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING", "maxdt"),
        ("sum(o)", "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING", "sprev"),
        ("max(v)", "ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING", "mnext"),
        ("count(*)", "ROWS BETWEEN 3 FOLLOWING AND 1 FOLLOWING", "cempty"),
        ("sum(d)", "ROWS BETWEEN 3 FOLLOWING AND 1 FOLLOWING", "sempty"),
        ("first_value(v)", "ROWS BETWEEN 1 FOLLOWING AND 2 FOLLOWING", "fnext"),
        ("last_value(o)", "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING", "lall"),
        ("avg(d)", "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "ad"),
        # IGNORE NULLS: the nearest non-NULL values (v is NULL every 6th row, s every 9th).
        ("lag(v IGNORE NULLS)", "", "lgn"), ("lead(s, 2, 'none' IGNORE NULLS)", "", "ldn"),
        ("first_value(v IGNORE NULLS)", "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING", "fvn"),
        ("max(s)", "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", "maxs"), ("lag(ds)", "", "lds"),
        # Frames wider than FRAME_LOOP_MAX_ROWS read a segment tree.
        ("sum(d)", "ROWS BETWEEN 100 PRECEDING AND 70 FOLLOWING", "swide"),
        ("min(v)", "ROWS BETWEEN 80 PRECEDING AND 2 PRECEDING", "mwide"),
        ("max(s)", "ROWS BETWEEN 1 FOLLOWING AND 90 FOLLOWING", "xwide"),
        ("last_value(d IGNORE NULLS)", "", "lvn"), ("nth_value(dt, 2 IGNORE NULLS)", "", "nvn"),
    ]),
    (["k", "s"], ["o DESC NULLS FIRST"], [
        ("rank()", "", "r"), ("dense_rank()", "", "dr"), ("percent_rank()", "", "pr"), ("cume_dist()", "", "cd"),
        ("sum(v)", "", "sv"), ("count(*)", "", "c"), ("avg(d)", "", "ad"), ("min(v)", "", "minv"),
        ("max(o)", "", "maxo"), ("sum(d)", "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING", "rest"),
        ("min(dt)", "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING", "mindt"),
        ("count(v)", "RANGE BETWEEN CURRENT ROW AND CURRENT ROW", "peers"),
        ("max(d)", "RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING", "maxd"),
        ("min(ds)", "", "minds"), ("max(ds)", "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING", "maxds"),
        ("count(ds)", "", "cds"),
    ]),
    (["s"], [], [
        ("sum(v)", "", "sv"), ("count(*)", "", "c"), ("count(s)", "", "cs"), ("avg(o)", "", "ao"),
        ("min(d)", "", "mind"), ("max(dt)", "", "maxdt"), ("rank()", "", "r"), ("cume_dist()", "", "cd"),
        ("min(s)", "", "mins"), ("max(ds)", "", "maxds"),
    ]),
    ([], ["o NULLS FIRST", "id DESC"], [
        ("row_number()", "", "rn"), ("sum(o)", "", "so"), ("lag(o, 2, -1)", "", "lg"), ("ntile(4)", "", "nt"),
        ("dense_rank()", "", "dr"),
    ]),
    ([], [], [("count(*)", "", "c"), ("sum(d)", "", "sd"), ("max(v)", "", "mv"), ("percent_rank()", "", "pr")]),
    (["dt"], ["v", "id"], [("row_number()", "", "rn"), ("sum(v)", "", "sv")]),
    # RANGE frames with offsets: the rows whose one order key is within n of the current row's (ties, NULLs).
    (["k"], ["o"], [
        ("sum(v)", "RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING", "r1"),
        ("count(*)", "RANGE BETWEEN 1 FOLLOWING AND 3 FOLLOWING", "r2"),
        ("min(d)", "RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING", "r3"),
        ("max(v)", "RANGE BETWEEN 2 PRECEDING AND UNBOUNDED FOLLOWING", "r4"),
        ("count(v)", "RANGE BETWEEN 3 PRECEDING AND 2 PRECEDING", "r5"),
    ]),
    (["s"], ["d DESC NULLS FIRST"], [
        ("sum(v)", "RANGE BETWEEN 1 PRECEDING AND 2 FOLLOWING", "r1"),
        ("count(d)", "RANGE BETWEEN CURRENT ROW AND 3 FOLLOWING", "r2"),
    ]),
    ([], ["v NULLS FIRST"], [("count(*)", "RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING", "rc")]),
]
CASE_IDS = ["by_k_total_order", "by_k_s_ties", "by_s_unordered", "global_ordered", "global", "by_date",
            "range_int", "range_decimal_desc", "range_float"]


def _plan(catalog, table: str, partition, order, functions):
    snippets = [f"{call} OVER ({frame}) AS {name}" if frame else f"{call} AS {name}" for call, frame, name in functions]
    return PlanBuilder(catalog).table_scan(table).window(partition, order, snippets).plan()


def _duckdb_sql(table: str, partition, order, functions) -> str:
    over = (f"PARTITION BY {', '.join(partition)} " if partition else "") + (
        f"ORDER BY {', '.join(order)} " if order else "")
    calls = ", ".join(f"{call} OVER ({over}{frame}) AS {name}" for call, frame, name in functions)
    return f"SELECT *, {calls} FROM {table}"


@pytest.fixture
def tables(device_name):
    data = _table(ROWS[device_name])
    return {"t": data, "e": data.slice(0, 0)}


def _session(device_name, drivers, batch_rows, tables) -> Session:
    session = Session(device=device_name, drivers=drivers, batch_rows=batch_rows)
    for name, data in tables.items():
        session.register(name, data, split_rows=max(1, data.num_rows // 4))
    return session


def _reference(sql: str, tables) -> pa.Table:
    return duckdb_table_over(tables, sql)


@pytest.mark.parametrize("setting", [(1, 1 << 16), (2, 16)], ids=["drivers1", "drivers2-batches16"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("table", ["t", "e"])
def test_window_matches_duckdb(device_name, setting, case, table, tables):
    drivers, batch_rows = setting  # one parameter: the simulator's (drivers, batch_rows) pairs do not apply here
    if device_name == "cuda-sim" and (drivers, table) != (2, "t"):
        pytest.skip("the simulator runs each case once, over rows at two drivers (it is an interpreter)")
    partition, order, functions = case
    session = _session(device_name, drivers, batch_rows, tables)
    actual = session.execute(_plan(session.catalog, table, partition, order, functions))
    expected = _reference(_duckdb_sql(table, partition, order, functions), tables)
    assert actual.schema.names == expected.schema.names
    problem = rows_mismatch(actual, expected)
    assert problem is None, problem


@pytest.mark.parametrize("drivers", [1, 2])
def test_row_number_among_ties_numbers_each_partition_from_one(device_name, drivers, tables):
    # Ties on o leave which row gets which number free; the (partition, number) pairs are not.
    session = _session(device_name, drivers, 16, tables)
    plan = (PlanBuilder(session.catalog).table_scan("t").window(["k"], ["o"], ["row_number() AS rn"])
            .project(["k", "rn"]).plan())
    expected = _reference("SELECT k, row_number() OVER (PARTITION BY k ORDER BY o) AS rn FROM t", tables)
    assert rows_mismatch(session.execute(plan), expected) is None


def test_window_plan_explains_round_trips_and_partitions_drivers(tables):
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json

    session = _session("cpu", 2, 16, tables)
    plan = _plan(session.catalog, "t", ["k"], ["o DESC"], [("rank()", "", "r"),
                                                           ("sum(v)", "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "sw")])
    assert plan_from_json(plan_to_json(plan)) == plan
    from gpu_engine.plans import format_node

    assert format_node(plan).startswith("-- Window[1][partition by k; order by o DESC NULLS LAST; r := rank(), "
            "sw := sum(v) OVER (ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)] -> id:int64, ")
    assert "-- LocalPartition[1.exchange][REPARTITION [k]]" in session.explain(plan)
    unpartitioned = _plan(session.catalog, "t", [], ["id"], [("row_number()", "", "rn")])
    assert "-- LocalPartition[1.exchange][GATHER]" in session.explain(unpartitioned)


@pytest.mark.parametrize("function, message", [
    ("sum(v) OVER (ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW) AS x", "cannot start at UNBOUNDED FOLLOWING"),
    ("covar_pop(v, o) OVER (ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS x",
     "EXCLUDE CURRENT ROW over covar_pop"),
    ("median(v) AS x", "median over a window is computed over whole partitions only"),
    ("mode(v) AS x", "mode over a window is computed over whole partitions only"),
    ("sum(v) OVER (PARTITION BY k) AS x", "PARTITION BY inside a window function's OVER"),
    ("ntile(0) AS x", "ntile's bucket count must be a positive integer constant"),
    ("lag(v, o) AS x", "lag's offset must be a non-negative integer constant"),
    ("sum(v + 1) AS x", "a window function's value argument must be an input column"),
    ("rank(v) AS x", "rank takes at most 0 argument(s)"),
    ("sum(DISTINCT v) AS x", "sum(DISTINCT ...) over a window is not supported"),
    ("rank() IGNORE NULLS AS x", "IGNORE NULLS applies to lag, lead, first_value, last_value, nth_value, not rank"),
    ("sum(s) AS x", "type mismatch: sum is not defined for string"),
    ("corr(v, 1) AS x", "a window function's value argument must be an input column"),
])
def test_window_functions_the_operator_cannot_compute_are_refused_at_build_time(function, message, tables):
    session = _session("cpu", 1, 16, tables)
    with pytest.raises(PlanError) as raised:
        PlanBuilder(session.catalog).table_scan("t").window(["k"], ["o"], [function])
    assert message in str(raised.value) and "Window[1]" in str(raised.value)


@pytest.mark.parametrize("sort_keys, message", [
    (["o", "id"], "a RANGE frame with an offset (1 PRECEDING) needs exactly one ORDER BY key, got 2"),
    (["s"], "a RANGE frame with an offset needs a numeric, DATE or TIMESTAMP ORDER BY key; s is string"),
])
def test_a_range_frame_with_an_offset_needs_one_numeric_order_key(sort_keys, message, tables):
    session = _session("cpu", 1, 16, tables)
    with pytest.raises(PlanError, match=re.escape(message)):
        PlanBuilder(session.catalog).table_scan("t").window(
            ["k"], sort_keys, ["sum(v) OVER (RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) AS x"])


def test_a_window_past_the_memory_cap_fails_and_the_session_keeps_working():
    data = _table(20_000)
    session = Session(device="cpu", drivers=1, batch_rows=512, query_memory_limit_bytes=200_000)
    session.register("t", data, split_rows=2000)
    plan = PlanBuilder(session.catalog).table_scan("t").window([], ["o"], ["sum(v) AS total"]).plan()
    with pytest.raises(MemoryCapExceeded) as raised:
        session.execute(plan)
    assert raised.value.operator == "Window"
    small = PlanBuilder(session.catalog).table_scan("t", ["id"]).filter("id < 3").plan()
    assert sorted(session.execute(small).column("id").to_pylist()) == [0, 1, 2]


@pytest.mark.parametrize("partition, widths", [(["k"], (3, 2, 1)), ([], (3, 1))], ids=["by_k", "global"])
def test_a_window_on_a_cluster_sees_whole_partitions(partition, widths):
    # Leaf Tasks scan arbitrary splits: the window's stage must read its partitions whole (a shuffle by the
    # partition keys, a gather without), or each Task would number and sum only its own share of a partition.
    from gpu_engine.cluster import LocalCluster

    tables = {"t": _table(200)}
    session = _session("cpu", 1, 16, tables)
    functions = [("row_number()", "", "rn"), ("sum(d)", "", "sd"), ("count(*)", "", "c")]
    plan = _plan(session.catalog, "t", partition, ["id"], functions)
    actual = LocalCluster(session, widths).execute(plan)
    expected = _reference(_duckdb_sql("t", partition, ["id"], functions), tables)
    problem = rows_mismatch(actual, expected)
    assert problem is None, problem


def test_count_over_strings_reads_validity_not_chars(device_name):
    # Empty strings have no chars: counting read the chars buffer as values (an IndexError here).
    tables = {"t": pa.table({"s": pa.array(["", None, "", "", None] * 3), "k": pa.array([1, 2, 3] * 5, pa.int32())})}
    session = _session(device_name, 1, 4, tables)
    functions = [("count(s)", "", "c"), ("min(s)", "", "lo"), ("max(s)", "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "hi")]
    actual = session.execute(_plan(session.catalog, "t", ["k"], [], functions))
    assert rows_mismatch(actual, _reference(_duckdb_sql("t", ["k"], [], functions), tables)) is None


def test_window_sums_past_64_bits_are_exact(device_name):
    # DuckDB sums into 128 bits (HUGEINT, DECIMAL(38)); a 64-bit frame sum that overflows is recomputed from
    # the values' 32-bit halves (it used to fail with "a window sum beyond 64 bits is not supported yet").
    big = [2**62, 2**62, None, 2**62, -(2**63), 1, 2**63 - 1, 2**63 - 1, -5, 3]
    tables = {"t": pa.table({"x": pa.array(big, pa.int64()), "id": pa.array(range(10)),
                             "k": pa.array([1, 1, 1, 1, 1, 2, 2, 2, 2, 3], pa.int32()),
                             "d": pa.array([decimal.Decimal(v) / 100 if v is not None else None for v in big],
                                           pa.decimal128(38, 2))})}
    session = _session(device_name, 1, 3, tables)
    functions = [("sum(x)", "", "running"), ("sum(x)", "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING", "whole"),
                 ("sum(x)", "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING", "narrow"),
                 ("sum(x)", "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING", "rest"),
                 ("sum(x)", "RANGE BETWEEN 3 PRECEDING AND CURRENT ROW", "ranged"),
                 ("avg(x)", "", "average"), ("sum(d)", "", "decimals"), ("sum(id)", "", "small")]
    for partition in ([], ["k"]):
        actual = session.execute(_plan(session.catalog, "t", partition, ["id"], functions))
        expected = _reference(_duckdb_sql("t", partition, ["id"], functions), tables)
        assert rows_mismatch(actual, expected) is None, rows_mismatch(actual, expected)


def test_window_sums_and_extremes_over_ubigint_past_2_63_are_exact(device_name):
    # UBIGINT words past 2^63 read as negative int64 words: sums wrapped, max took 3 over 2^64 - 1.
    big = [2**63 + 5, 2**64 - 1, 3, None, 2**63, 2**63, 0, 7]
    tables = {"t": pa.table({"u": pa.array(big, pa.uint64()), "id": pa.array(range(8)),
                             "k": pa.array([1, 1, 1, 2, 2, 2, 3, 3], pa.int32())})}
    session = _session(device_name, 1, 3, tables)
    functions = [("sum(u)", "", "running"), ("sum(u)", "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING", "whole"),
                 ("sum(u)", "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING", "narrow"), ("avg(u)", "", "average"),
                 ("max(u)", "", "high"), ("min(u)", "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "low")]
    for partition in ([], ["k"]):
        actual = session.execute(_plan(session.catalog, "t", partition, ["id"], functions))
        expected = _reference(_duckdb_sql("t", partition, ["id"], functions), tables)
        assert rows_mismatch(actual, expected) is None, rows_mismatch(actual, expected)


def test_variance_over_whole_partitions_matches_duckdb(device_name):
    # The aggregation's shifted moments per partition: values near 1e9 keep their digits, a partition of NULLs
    # and one of a single row are NULL (samp), empty input gives no rows.
    x = [1.0, 2.0, None, 1e9 + 1, 1e9 + 2, 1e9 + 3, None, 7.5, 4.0, -3.0]
    tables = {"t": pa.table({"x": pa.array(x), "id": pa.array(range(10)), "k": pa.array([1, 1, 1, 2, 2, 2, 3, 4, 5, 5]),
                             "d": pa.array([decimal.Decimal(i) / 4 for i in range(10)], pa.decimal128(12, 2))})}
    tables["e"] = tables["t"].slice(0, 0)
    session = _session(device_name, 2, 3, tables)
    whole = "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
    functions = [("stddev_samp(x)", "", "ss"), ("var_pop(x)", "", "vp"), ("var_samp(d)", whole, "vd"),
                 ("stddev_pop(id)", whole, "sp"), ("sum(x)", "", "s")]
    for table, partition, order in (("t", ["k"], []), ("t", [], []), ("t", ["k"], ["id"]), ("e", ["k"], [])):
        chosen = functions if order == [] else [f for f in functions if f[1] == whole]
        actual = session.execute(_plan(session.catalog, table, partition, order, chosen))
        expected = _reference(_duckdb_sql(table, partition, order, chosen), tables)
        assert rows_mismatch(actual, expected) is None, rows_mismatch(actual, expected)


def test_variance_over_running_and_sliding_frames_matches_duckdb(device_name):
    # A segment tree of moments merged by Chan's formula: values near 1e9 rising 1000 a row keep their digits in
    # narrow frames (sums of squares lost ~1e-4 of them), NULLs are skipped, a frame of one value is NULL (samp)
    # or 0 (pop), of none NULL; running, sliding, trailing and RANGE frames, with and without partitions.
    n = 40 if device_name == "cpu" else 12
    x = [None if i % 7 == 3 else 1e9 + i * 1000.0 + (i % 3) * 0.25 for i in range(n)]
    tables = {"t": pa.table({"x": pa.array(x), "id": pa.array(range(n)), "k": pa.array([i % 3 for i in range(n)]),
                             "d": pa.array([decimal.Decimal(i % 5) / 4 for i in range(n)], pa.decimal128(12, 2))})}
    session = _session(device_name, 2, 5, tables)
    functions = [("var_samp(x)", "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", "a"), ("stddev_pop(x)", "", "b"),
                 ("var_pop(d)", "ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING", "c"),
                 ("stddev_samp(id)", "RANGE BETWEEN 2 PRECEDING AND 3 FOLLOWING", "e"),
                 ("var_samp(x)", "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING", "f"),
                 ("stddev_samp(x)", "ROWS BETWEEN 90 PRECEDING AND 70 FOLLOWING", "g")]
    for partition in ([], ["k"]):
        actual = session.execute(_plan(session.catalog, "t", partition, ["id"], functions))
        expected = _reference(_duckdb_sql("t", partition, ["id"], functions), tables)
        assert rows_mismatch(actual, expected) is None, rows_mismatch(actual, expected)


def test_covariance_and_regression_over_frames_match_duckdb(device_name):
    # A segment tree of pair moments (co-deviations merged by Chan's formula) finalized as the grouped
    # aggregation does: x near 1e9 rising with y keeps its digits, pairs with a NULL side are skipped,
    # a frame of one pair gives DuckDB's NULLs and NaNs (corr, regr_r2, regr_intercept).
    n = 30 if device_name == "cpu" else 10
    x = [None if i % 7 == 3 else 1e9 + i * 1000.0 + (i % 3) * 0.25 for i in range(n)]
    y = [None if i % 5 == 4 else float((i * 7) % 11) for i in range(n)]
    tables = {"t": pa.table({"x": pa.array(x), "y": pa.array(y), "id": pa.array(range(n)),
                             "k": pa.array([i % 3 for i in range(n)])})}
    session = _session(device_name, 2, 5, tables)
    functions = [("corr(x, y)", "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", "a"), ("covar_samp(x, y)", "", "b"),
                 ("covar_pop(y, id)", "ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING", "c"),
                 ("regr_slope(x, y)", "ROWS BETWEEN 3 PRECEDING AND 3 FOLLOWING", "e"),
                 ("regr_intercept(y, id)", "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "f"),
                 ("regr_r2(x, y)", "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING", "g"),
                 ("regr_count(x, y)", "", "h"), ("regr_sxx(x, y)", "RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING", "i")]
    for partition in ([], ["k"]):
        actual = session.execute(_plan(session.catalog, "t", partition, ["id"], functions))
        expected = _reference(_duckdb_sql("t", partition, ["id"], functions), tables)
        assert rows_mismatch(actual, expected) is None, rows_mismatch(actual, expected)


def test_the_window_reads_the_device_a_fixed_number_of_times_whatever_its_batches(device_name):
    # A GPU pays for every host sync; the window's do not grow with its input batches (a sum's overflow
    # status is read once, at the end).
    functions = [("row_number()", "", "rn"), ("rank()", "", "r"), ("sum(o)", "", "so"), ("avg(v)", "", "av"),
                 ("lag(d)", "", "ld"), ("max(v)", "ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING", "mv")]
    syncs = {}
    for batch_rows in (64, 8, 4):
        tables = {"t": _table(ROWS[device_name] // 2)}
        session = Session(device=device_name, drivers=1, batch_rows=batch_rows)
        session.register("t", tables["t"], split_rows=batch_rows)
        snippets = [f"{call} OVER ({frame}) AS {name}" if frame else f"{call} AS {name}" for call, frame, name in functions]
        plan = (PlanBuilder(session.catalog).table_scan("t").window(["k"], ["id"], snippets)
                .aggregation([], ["count(*) AS c", "sum(rn) AS n", "max(mv) AS m"]).plan())  # takes the window's rows
        session.execute(plan)
        stats = [s for found in session.last_stats().operator_stats_by_node().values() for s in found]
        (window,) = [s for s in stats if s.operator_type == "Window"]
        assert window.input_batches >= (ROWS[device_name] // 2) // batch_rows
        syncs[batch_rows] = window.host_syncs
    assert max(syncs.values()) <= 2, syncs  # concatenating the batches' strings, the sums' overflow status
