"""The aggregate library beyond count/sum/avg/min/max against DuckDB (issue 30 item 4).

Every function runs through PlanBuilder (single step, and partial -> local
exchange -> final over several drivers and small batches, so partial states
merge) and through ``Session.sql`` (FILTER, DISTINCT, expressions over
aggregates), with NULLs, groups of one row, empty inputs and adversarial
floats (large offsets, where sums of x and x² cancel). ``any_value`` and ties
of ``arg_min``/``arg_max`` are checked as membership in the right set.
"""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_rows, session_with_tables
from gpu_engine import PlanError, Session
from gpu_engine.plans import PlanBuilder
from gpu_engine.sql.errors import SqlError

from operator_tables import make_table

#: The library's functions (aliased: sqlglot and DuckDB name some unaliased calls differently).
MOMENTS = [
    "stddev_samp(v_float) AS sd", "stddev_pop(v_int) AS sdp", "var_samp(v_dec) AS vs", "var_pop(v_float) AS vp",
    "covar_samp(v_float, v_int) AS cs", "covar_pop(v_int, v_dec) AS cp", "corr(v_float, v_dec) AS r",
    "regr_slope(v_float, v_int) AS rs", "regr_avgx(v_float, v_int) AS rax", "regr_avgy(v_float, v_int) AS ray",
    "regr_sxx(v_float, v_int) AS rsxx", "regr_syy(v_float, v_int) AS rsyy", "regr_sxy(v_float, v_int) AS rsxy",
    "regr_intercept(v_float, v_int) AS ri", "regr_r2(v_float, v_dec) AS rr2", "regr_count(v_int, v_float) AS rc",
]
OTHERS = [
    "bool_and(v_int > 0) AS band", "bool_or(v_float > 100) AS bor", "count_if(v_int > 0) AS cif",
    "bit_and(k_int) AS bitand", "bit_or(v_int) AS bitor", "bit_xor(v_int) AS bitxor",
    "arg_min(v_int, v_float) AS amin", "arg_max(d_date, v_int) AS amax", "arg_min(d_date, v_dec) AS amind",
    "arg_max(v_float > 0, v_dec) AS amaxb", "arg_max(k_str, v_float) AS amaxs", "arg_min(k_dict, v_int) AS amins",
]
ROWS = {"cpu": 600, "cuda-sim": 90, "cuda": 600}


@pytest.fixture(params=[(1, 1 << 16), (2, 16)], ids=["drivers1", "drivers2_small_batches"])
def shape(request):
    """Yield (drivers, batch_rows): one batch on one driver, and many partials over two drivers."""
    return request.param


@pytest.fixture
def table(device_name) -> pa.Table:
    return make_table(ROWS[device_name], seed=11)


def _session(device_name, shape, tables: dict[str, pa.Table], fuse: bool = True) -> Session:
    drivers, batch_rows = shape
    return session_with_tables(tables, splits=5, device=device_name, drivers=drivers, batch_rows=batch_rows, fuse=fuse)


def _sql(keys, aggregates, where=""):
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    return f"SELECT {', '.join(list(keys) + list(aggregates))} FROM t{where}{group}"


@pytest.mark.parametrize("keys", [[], ["k_int"], ["k_str", "k_dict"]], ids=lambda k: "+".join(k) or "global")
@pytest.mark.parametrize("steps", ["single", "partial_final"])
def test_functions_match_duckdb(device_name, shape, table, keys, steps):
    aggregates = MOMENTS + OTHERS if device_name == "cpu" else MOMENTS[::3] + OTHERS[::3]
    session = _session(device_name, shape, {"t": table})
    builder = PlanBuilder(session.catalog).table_scan("t")
    if steps == "single":
        plan = builder.aggregation(keys, aggregates).plan()
    else:
        plan = builder.partial_aggregation(keys, aggregates).local_partition(keys).final_aggregation().plan()
    assert_same_rows(session.execute(plan), duckdb_rows(_sql(keys, aggregates), t=table))


def test_partial_intermediate_final(device_name, table):
    aggregates = ["var_samp(v_float) AS v", "corr(v_int, v_float) AS r", "arg_max(v_int, v_dec) AS a",
                  "count_if(v_int > 0) AS c", "bit_or(k_int) AS b"]
    session = _session(device_name, (2, 16), {"t": table})
    plan = (PlanBuilder(session.catalog).table_scan("t").partial_aggregation(["k_str"], aggregates)
            .local_partition(["k_str"]).intermediate_aggregation().final_aggregation().plan())
    assert_same_rows(session.execute(plan), duckdb_rows(_sql(["k_str"], aggregates), t=table))


@pytest.mark.parametrize("keys", [[], ["k_int"]], ids=lambda k: "+".join(k) or "global")
def test_empty_input(device_name, shape, table, keys):
    """No rows: grouped, no groups; global, one row of NULLs (count_if too: DuckDB's HUGEINT sum)."""
    aggregates = MOMENTS[:7] + OTHERS
    session = _session(device_name, shape, {"t": table})
    where = " WHERE v_int > 100000000"
    plan = (PlanBuilder(session.catalog).table_scan("t").filter("v_int > 100000000")
            .partial_aggregation(keys, aggregates).local_partition(keys).final_aggregation().plan())
    assert_same_rows(session.execute(plan), duckdb_rows(_sql(keys, aggregates, where), t=table))


def _adversarial(rows: int) -> pa.Table:
    """Return values with large offsets (sums of squares cancel), groups of one row, and groups of NULLs only."""
    rng = np.random.default_rng(5)
    groups = rng.integers(0, 6, rows)
    noise = rng.integers(-3, 4, rows).astype(np.float64)
    offsets = np.array([1e9, -1e9, 3e8, 2e9, 0.5, 7e7])
    x = offsets[groups] + noise
    y = 2.0 * x + rng.integers(-2, 3, rows)
    x_list: list = x.tolist()
    groups_list = groups.tolist()
    x_list += [5e9, None, None, 42.0]
    y_list = y.tolist() + [1.0, 3.0, None, None]
    groups_list += [10, 11, 11, 12]  # 10: one row; 11: NULLs only; 12: one row whose y is NULL
    big = [int(v) for v in (10**9 + rng.integers(-5, 6, rows))] + [None, 1, 2, 3]
    return pa.table({"g": pa.array(groups_list, pa.int32()), "x": pa.array(x_list, pa.float64()),
                     "y": pa.array(y_list, pa.float64()), "big": pa.array(big, pa.int64())})


def _exact_moments(table: pa.Table, keys: list[str]) -> dict:
    """Return exact (rational) var_samp, var_pop and covar_samp of x (and y) per group, as floats."""
    from collections import defaultdict
    from fractions import Fraction

    groups = defaultdict(list)
    data = table.to_pydict()
    for row in zip(*(data[k] for k in keys), data["x"], data["y"]):
        groups[tuple(row[:len(keys)])].append(row[len(keys):])
    exact = {}
    for key, rows in groups.items():
        xs = [Fraction(x) for x, _ in rows if x is not None]
        pairs = [(Fraction(x), Fraction(y)) for x, y in rows if x is not None and y is not None]
        n, m = len(xs), len(pairs)
        mean = sum(xs) / n if n else None
        m2 = sum((x - mean) ** 2 for x in xs) if n else None
        mx = sum(x for x, _ in pairs) / m if m else None
        my = sum(y for _, y in pairs) / m if m else None
        c = sum((x - mx) * (y - my) for x, y in pairs) if m else None
        exact[key] = (float(m2 / (n - 1)) if n > 1 else None, float(m2 / n) if n else None,
                      float(c / (m - 1)) if m > 1 else None)
    return exact


def test_large_offsets_stay_exact(device_name, shape):
    """var/stddev/covar/corr of values near ±1e9 that differ by units: within 1e-12 of the exact (rational) answers.

    Sums of x and x² in float64 lose every digit here (x² ~ 1e18: ulp ~ 128 against variances ~ 4).
    DuckDB's own answers are off by up to ~1e-8 (its Welford means carry the offset), so they are compared
    at 1e-7.
    """
    table = _adversarial(200 if device_name == "cpu" else 40)
    aggregates = ["var_samp(x) AS vs", "var_pop(x) AS vp", "covar_samp(x, y) AS cs", "stddev_pop(big) AS sb",
                  "stddev_samp(x) AS ss", "covar_pop(y, x) AS cp", "corr(x, y) AS r", "regr_slope(y, x) AS rs",
                  "regr_sxx(y, x) AS sxx", "regr_r2(y, x) AS r2",
                  "regr_count(y, x) AS rc", "count(*) AS n"]
    session = _session(device_name, shape, {"t": table})
    if device_name == "cpu":  # the eager tier: a fused kernel of 12 moments compiles for minutes (CI time); the
        # CPU twin's fused arithmetic is Welford's as the eager kernel's (tests/operators/test_fused_moments.py),
        # the simulator runs the CUDA twin's shifted sums here
        session = session_with_tables({"t": table}, splits=5, device=device_name, drivers=shape[0],
                                      batch_rows=shape[1], compile_mode="lowest")
    for keys in ([], ["g"]):
        plan = (PlanBuilder(session.catalog).table_scan("t")
                .partial_aggregation(keys, aggregates).local_partition(keys).final_aggregation().plan())
        result = session.execute(plan)
        assert_same_rows(result, duckdb_rows(_sql(keys, aggregates), t=table), rel_tol=1e-7)
        exact = _exact_moments(table, keys)
        for row in result.to_pylist():
            expected = exact[tuple(row[k] for k in keys)]
            for got, want in zip((row["vs"], row["vp"], row["cs"]), expected):
                assert (got is None) == (want is None) and (want is None or got == pytest.approx(want, rel=1e-12)), \
                    (row, expected)


def test_variance_of_offset_values_is_exact():
    """1e9 + {1, 2, 3} (one per batch, over two drivers): the sample variance is exactly 1, as DuckDB's."""
    table = pa.table({"x": [1e9 + 1, 1e9 + 2, 1e9 + 3]})
    session = _session("cpu", (2, 1), {"t": table})
    result = session.sql("SELECT var_samp(x) AS v, stddev_pop(x) AS s FROM t").to_pylist()
    assert result == [{"v": 1.0, "s": pytest.approx(np.sqrt(2 / 3), rel=1e-12)}]


def test_regression_degenerate_groups(device_name, shape):
    """regr_intercept/regr_r2/regr_count where DuckDB's finalize has special cases, merged over partial states.

    Groups: a constant x (r2 and intercept NULL: the slope is NaN), a constant y
    (r2 is 1), one row, only NULL pairs (count 0, the rest NULL), a NaN x with a
    constant y (r2 1, intercept NULL), a NaN y (r2 NaN), and an ordinary fit.
    """
    nan = float("nan")
    rows = [(1, 1.0, 2.0), (1, 3.0, 2.0), (1, 5.0, 2.0), (2, 4.0, 1.0), (2, 4.0, 7.0), (2, 4.0, 9.0),
            (3, 2.5, 1.5), (4, None, 1.0), (4, 2.0, None), (5, 1.0, nan), (5, 1.0, 3.0), (6, nan, 2.0),
            (6, 1.0, 3.0), (7, 1.0, 1.0), (7, 2.0, 3.0), (7, 4.0, 2.0), (7, None, None), (7, 3.0, 5.0)]
    g, y, x = zip(*rows)
    table = pa.table({"g": pa.array(g, pa.int32()), "y": pa.array(y, pa.float64()), "x": pa.array(x, pa.float64())})
    session = _session(device_name, shape, {"t": table})
    for where in ("", " WHERE g > 100"):
        for keys in ([], ["g"]):
            sql = _sql(keys, ["regr_intercept(y, x) AS ri", "regr_r2(y, x) AS r2", "regr_count(y, x) AS rc",
                              "regr_slope(y, x) AS rs"], where)
            assert_same_rows(session.sql(sql), duckdb_rows(sql, t=table))


SQL_QUERIES = [
    "SELECT k_int, stddev(v_float) AS a, variance(v_int) AS b, var_samp(v_dec) AS c FROM t GROUP BY k_int",
    "SELECT k_str, min_by(v_int, v_float) AS a, max_by(d_date, v_int) AS b, count_if(v_int > 0) AS c, "
    "bool_and(v_int > 0) AS d, bool_or(v_int > 0) AS e, bit_xor(k_int) AS f FROM t GROUP BY k_str",
    "SELECT k_int, stddev(v_float) FILTER (WHERE v_int > 0) AS a, count(*) FILTER (WHERE v_float > 0) AS b, "
    "corr(v_float, v_int) FILTER (WHERE k_str = 'fig') AS c, arg_min(v_int, v_float) FILTER (WHERE v_int < 0) AS d, "
    "count_if(v_float > 0) FILTER (WHERE v_int > 0) AS e FROM t GROUP BY k_int",
    "SELECT corr(v_float, v_int) * corr(v_float, v_int) AS r2, stddev_pop(v_float) + 1 AS s FROM t WHERE k_int > 3",
    "SELECT stddev(DISTINCT k_int) AS a, var_pop(DISTINCT k_int) AS b FROM t",
    "SELECT k_dict, stddev_samp(v_int) AS s FROM t GROUP BY k_dict HAVING stddev_samp(v_int) > 0 ORDER BY s",
    "SELECT k_int, var_samp(v_int) AS v, covar_samp(v_int, v_float) AS c, count(*) AS n FROM t "
    "WHERE v_int BETWEEN 0 AND 40000 GROUP BY k_int",
    # a FILTER that keeps no row: the aggregate keeps its argument's type (the constant CASE folded to an
    # untyped NULL before, "cannot infer the type of NULL"; found by the breadth fuzz)
    "SELECT k_int, median(v_int) FILTER (WHERE FALSE) AS a, quantile_cont(v_dec, 0.25) FILTER (WHERE 1 = 0) AS b, "
    "count(*) FILTER (WHERE NULL) AS c, sum(v_float) FILTER (WHERE FALSE) AS d, min(k_str) FILTER (WHERE 2 < 1) AS e "
    "FROM t GROUP BY k_int",
]


@pytest.mark.parametrize("query", range(len(SQL_QUERIES)))
def test_sql_matches_duckdb(device_name, shape, table, query):
    if device_name != "cpu" and query in (1, 2, 6):
        pytest.skip("the simulator runs the other shapes")
    sql = SQL_QUERIES[query]
    session = _session(device_name, shape, {"t": table})
    assert_same_rows(session.sql(sql), duckdb_rows(sql, t=table))


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_fusable_functions_both_ways(device_name, shape, table, fuse):
    """bool_and/bool_or/count_if (and any_value) fold as min/max/sum: the fused kernel runs them as it runs those."""
    aggregates = ["bool_and(v_int > 0) AS a", "bool_or(v_float > 100) AS b", "count_if(v_int > 0) AS c",
                  "count(*) AS n"]
    session = _session(device_name, shape, {"t": table}, fuse=fuse)
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation(["k_int"], aggregates).plan()
    assert_same_rows(session.execute(plan), duckdb_rows(_sql(["k_int"], aggregates), t=table))


def test_unfusable_functions_run_on_hash_aggregation(table):
    """The fused kernel refuses bit folds and arg_min/arg_max: plans run them on HashAggregation."""
    from gpu_engine.planning.fusion import fuse_pipelines

    session = _session("cpu", (1, 1 << 16), {"t": table})
    for aggregate in ("bit_or(k_int) AS b", "arg_min(v_int, v_float) AS a"):
        plan = PlanBuilder(session.catalog).table_scan("t").filter("v_int > 0").aggregation(["k_int"], [aggregate]).plan()
        assert type(fuse_pipelines(plan)).__name__ == "AggregationNode", aggregate
    plan = PlanBuilder(session.catalog).table_scan("t").aggregation(["k_int"], ["bool_and(v_int > 0) AS a"]).plan()
    assert type(fuse_pipelines(plan)).__name__ == "FusedAggregationNode"


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_any_value_is_a_member_of_its_group(device_name, shape, table, fuse):
    """any_value/first/arbitrary return some non-NULL value of the group (NULL only when it has none)."""
    session = _session(device_name, shape, {"t": table}, fuse=fuse)
    result = session.sql("SELECT k_int, any_value(v_int) AS a, first(k_str) AS b, arbitrary(d_date) AS c "
                         "FROM t GROUP BY k_int").to_pylist()
    members = duckdb_rows("SELECT k_int, list(v_int) AS a, list(k_str) AS b, list(d_date) AS c FROM t GROUP BY k_int",
                          t=table).to_pylist()
    by_key = {row["k_int"]: row for row in members}
    assert len(result) == len(by_key)
    for row in result:
        expected = by_key[row["k_int"]]
        for column in "abc":
            values = [v for v in expected[column] if v is not None]
            assert (row[column] in values) if values else row[column] is None, (row, column)


def test_arg_min_ties_give_a_tied_value(device_name):
    table = pa.table({"g": [1, 1, 1, 2, 2, 3], "x": [10, 20, 30, 40, None, 60], "y": [1.0, 1.0, 5.0, 2.0, 1.0, None],
                      "s": ["a", "bb", "ccc", None, "e", "f"]})
    session = _session(device_name, (2, 1), {"t": table})
    rows = {r["g"]: r for r in session.sql("SELECT g, arg_min(x, y) AS lo, arg_max(x, y) AS hi, arg_min(s, y) AS s, "
                                           "max_by(s, x) AS ms FROM t GROUP BY g").to_pylist()}
    assert rows[1]["lo"] in (10, 20) and rows[1]["hi"] == 30 and rows[1]["s"] in ("a", "bb") and rows[1]["ms"] == "ccc"
    # rows with a NULL side are skipped, as DuckDB
    assert rows[2] == {"g": 2, "lo": 40, "hi": 40, "s": "e", "ms": None}
    assert rows[3] == {"g": 3, "lo": None, "hi": None, "s": None, "ms": "f"}


def test_json_round_trip_and_explain_keep_both_arguments(table):
    from gpu_engine.plans.serialization import plan_from_json, plan_to_json

    session = _session("cpu", (1, 1 << 16), {"t": table})
    plan = (PlanBuilder(session.catalog).table_scan("t").partial_aggregation(["k_int"], ["corr(v_float, v_int) AS r",
            "arg_max(v_int, d_date) AS a"]).local_partition(["k_int"]).final_aggregation().plan())
    text = plan_to_json(plan)
    assert plan_to_json(plan_from_json(text)) == text
    explained = session.explain(plan)
    assert "corr(v_float, v_int)" in explained and "arg_max(v_int, d_date)" in explained
    assert_same_rows(session.execute(plan_from_json(text)),
                     duckdb_rows(_sql(["k_int"], ["corr(v_float, v_int) AS r", "arg_max(v_int, d_date) AS a"]),
                                 t=table))


REFUSED_SQL = [
    ("SELECT array_agg(v_int) FROM t", "array_agg", "returns a list"),
    ("SELECT list(v_int) FROM t", "list", "returns a list"),
    ("SELECT stddev(k_str) FROM t", "stddev", "not defined for string"),
    ("SELECT bit_or(v_float) FROM t", "bit_or", "integer"),
]


@pytest.mark.parametrize("sql, name, reason", REFUSED_SQL, ids=[r[1] + "-" + r[2] for r in REFUSED_SQL])
def test_refusals_name_the_function(table, sql, name, reason):
    session = _session("cpu", (1, 1 << 16), {"t": table})
    with pytest.raises((SqlError, PlanError)) as error:
        session.sql(sql)
    message = str(error.value).lower()
    assert name in message and reason in message


@pytest.mark.parametrize("text, message", [
    ("foo(v_int) AS f", "unsupported aggregate function 'foo'"),
    ("array_agg(v_int) AS m", "unsupported aggregate function 'array_agg' (it returns a list"),
    ("corr(v_int) AS c", "corr"),
    ("stddev(v_int, v_float) AS s", "stddev"),
    ("arg_min(v_int) AS a", "arg_min"),
    ("bool_or(v_float > 0, v_int > 0) AS b", "bool_or"),
])
def test_plan_builder_refusals(table, text, message):
    session = _session("cpu", (1, 1 << 16), {"t": table})
    with pytest.raises(PlanError, match=message.replace("(", r"\(")):
        PlanBuilder(session.catalog).table_scan("t").aggregation([], [text]).plan()


def test_product(device_name, shape):
    """product(x): float64 over integers, decimals and floats, NULLs skipped, NULL for a group of none."""
    table = pa.table({"g": pa.array([1, 1, 1, 2, 2, 3, 3, 3, 3, 4], pa.int32()),
                      "i": pa.array([2, -3, None, 5, 7, None, None, None, None, 0], pa.int64()),
                      "d": pa.array([decimal.Decimal("1.5"), decimal.Decimal("-2.25"), None, decimal.Decimal("4"),
                                     None, None, None, None, None, decimal.Decimal("0.5")], pa.decimal128(6, 2)),
                      "f": pa.array([1.5, 2.0, 0.5, -1e10, 1e-10, 3.0, 1.0, 2.0, None, None], pa.float64())})
    session = _session(device_name, shape, {"t": table})
    for keys in ([], ["g"]):
        aggregates = ["product(i) AS pi", "product(d) AS pd", "product(f) AS pf", "count(*) AS n"]
        plan = (PlanBuilder(session.catalog).table_scan("t")
                .partial_aggregation(keys, aggregates).local_partition(keys).final_aggregation().plan())
        assert_same_rows(session.execute(plan), duckdb_rows(_sql(keys, aggregates), t=table))
    sql = "SELECT g, product(i) FILTER (WHERE i > 0) AS p, product(f) FROM t GROUP BY g"
    assert_same_rows(session.sql(sql), duckdb_rows(sql, t=table))


def test_moment_states_count_against_the_memory_cap():
    """The moments' per-group state (and its batch sums) is reserved: many groups under a small cap fail
    naming the operator that holds them (the fused kernel's slot table since stop 52), the process lives on,
    and a roomier cap answers."""
    from gpu_engine import MemoryCapExceeded

    table = pa.table({"k": pa.array(np.arange(20000) % 5000, pa.int64()), "v": np.arange(20000, dtype=np.float64)})
    sql = "SELECT k, corr(v, v * 2) AS r, stddev(v) AS s FROM t GROUP BY k"
    session = Session(device="cpu", drivers=1, query_memory_limit_bytes=600_000)
    session.register("t", table)
    with pytest.raises(MemoryCapExceeded, match="FusedAggregation"):
        session.sql(sql)
    session = Session(device="cpu", drivers=1, query_memory_limit_bytes=64 << 20)
    session.register("t", table)
    assert session.sql(sql).num_rows == 5000
