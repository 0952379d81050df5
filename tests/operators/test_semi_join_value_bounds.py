"""Semi and anti joins whose condition is ``probe.c <> build.c`` decide by each key's bounds of ``c`` (no pairs),
against DuckDB: NULLs in ``c`` on either side, keys with one build row, keys whose ``c`` is all NULL or all one
value, an empty build side, many batches."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from duckdb_reference import assert_same_rows, duckdb_table_over, session_with_tables

from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator

#: cuda-sim runs one small shape (the simulator interprets every kernel); cpu the matrix.
pytestmark = pytest.mark.simulator_values(drivers=(4,), join_type=("anti", "right_semi"), condition=("t.c <> u.uc",),
                                          build=("all",), value_type=())

PROBE_ROWS = {"cpu": 2000, "cuda-sim": 120, "cuda": 2000}
BUILD_ROWS = {"cpu": 600, "cuda-sim": 40, "cuda": 600}


def _with_nulls(rng, values, share, dtype):
    return pa.array(values, dtype, mask=rng.random(len(values)) < share)


def _as(values: pa.Array, value_type: pa.DataType) -> pa.Array:
    return values.cast(pa.int32()).cast(value_type)  # date32 and decimal(12, 2) cast from int32


def _tables(device_name: str, value_type: pa.DataType) -> dict[str, pa.Table]:
    """Build keys skewed (many rows a key, and keys of one row), ``c`` from three values with NULLs on both sides;
    build keys 30-34's ``c`` all NULL, 35-39's one value; probe keys 40-44's all NULL, 45-49's one; 50-54 miss."""
    rng = np.random.default_rng(7)
    n, m = PROBE_ROWS[device_name], BUILD_ROWS[device_name]
    build_keys = np.concatenate([rng.integers(0, 8, m // 2), rng.integers(8, 30, m // 2 - 20),
                                 np.arange(30, 50)])  # 0-7: many rows a key; 40-49: one row each
    build_c = rng.integers(0, 3, m)
    all_null = (build_keys >= 30) & (build_keys < 35)
    build_c[(build_keys >= 35) & (build_keys < 40)] = 1
    build_mask = (rng.random(m) < 0.15) | all_null
    probe_keys = rng.integers(0, 55, n)
    probe_c = rng.integers(0, 3, n)
    probe_mask = (rng.random(n) < 0.1) | ((probe_keys >= 40) & (probe_keys < 45))  # 40-44: all NULL
    one_value = (probe_keys >= 45) & (probe_keys < 50)  # 45-49: 1, and a 2 under each NULL (read only if wrong)
    probe_c[one_value] = np.where(probe_mask[one_value], 2, 1)
    return {
        "t": pa.table({"k": _with_nulls(rng, probe_keys, 0.05, pa.int32()),
                       "c": _as(pa.array(probe_c, pa.int32(), mask=probe_mask), value_type),
                       "p": pa.array(np.arange(n), pa.int64())}),
        "u": pa.table({"uk": pa.array(build_keys, pa.int64()),
                       "uc": _as(pa.array(build_c, pa.int64(), mask=build_mask),
                                  pa.int64() if pa.types.is_integer(value_type) else value_type)}),
    }


def _probe_stat(session, name: str) -> int:
    return sum(s.runtime.get(name, 0) for stats in session.last_stats().operator_stats_by_node().values()
               for s in stats)


@pytest.mark.parametrize("join_type", ["left_semi", "anti", "right_semi", "right_anti"])
@pytest.mark.parametrize("condition", ["t.c <> u.uc", "u.uc <> t.c"])
@pytest.mark.parametrize("build", ["all", "empty"])
def test_not_equal_condition_by_value_bounds(device_name, drivers, batch_rows, monkeypatch, join_type, condition,
                                             build):
    """left_semi / anti: the build side's bounds per key; right_semi / right_anti: the probe side's, merged over
    the probe drivers. Either way no pair is formed."""
    from gpu_engine.kernels.hash_join import JoinHashTable

    def no_pairs(*args, **kwargs):
        raise AssertionError("a join on probe.c <> build.c formed pairs")

    monkeypatch.setattr(JoinHashTable, "match", no_pairs)
    monkeypatch.setattr(JoinHashTable, "match_fixed_width", no_pairs)
    tables = _tables(device_name, pa.int32())
    session = session_with_tables(tables, splits=4, device=device_name, drivers=drivers, batch_rows=batch_rows)
    ids = PlanNodeIdGenerator()
    build_side = PlanBuilder(session.catalog, id_generator=ids).table_scan("u")
    if build == "empty":
        build_side = build_side.filter("uk < 0")
    right = join_type.startswith("right")
    output = ["uk", "uc"] if right else ["k", "c", "p"]
    plan = (PlanBuilder(session.catalog, id_generator=ids).table_scan("t")
            .hash_join(["k"], ["uk"], build_side, output, join_type,
                       filter=condition.replace("t.", "").replace("u.", "")).plan())
    result = session.execute(plan)
    u = "(SELECT * FROM u WHERE uk < 0)" if build == "empty" else "u"
    exists = "EXISTS" if join_type in ("left_semi", "right_semi") else "NOT EXISTS"
    if right:
        sql = f"SELECT uk, uc FROM {u} AS u WHERE {exists} (SELECT 1 FROM t WHERE t.k = u.uk AND {condition})"
    else:
        sql = f"SELECT k, c, p FROM t WHERE {exists} (SELECT 1 FROM {u} AS u WHERE t.k = u.uk AND {condition})"
    assert_same_rows(result, duckdb_table_over(tables, sql))
    if join_type in ("left_semi", "anti") and not (build == "empty" and join_type == "left_semi"):
        assert _probe_stat(session, "value_bounds") == 1  # the build's bounds decided (an empty build: unprobed)


@pytest.mark.parametrize("value_type", [pa.date32(), pa.decimal128(12, 2)], ids=["date", "decimal"])
def test_date_and_decimal_values(device_name, value_type):
    """(cpu only: the kernels are the integer case's, which cuda-sim runs.)"""
    tables = _tables(device_name, value_type)
    session = session_with_tables(tables, splits=4, device=device_name, drivers=2, batch_rows=256)
    ids = PlanNodeIdGenerator()
    build_side = PlanBuilder(session.catalog, id_generator=ids).table_scan("u")
    plan = (PlanBuilder(session.catalog, id_generator=ids).table_scan("t")
            .hash_join(["k"], ["uk"], build_side, ["k", "c", "p"], "anti", filter="c <> uc").plan())
    expected = duckdb_table_over(tables, "SELECT k, c, p FROM t WHERE NOT EXISTS (SELECT 1 FROM u "
                                  "WHERE t.k = u.uk AND t.c <> u.uc)")
    assert_same_rows(session.execute(plan), expected)
    assert _probe_stat(session, "value_bounds") == 1
