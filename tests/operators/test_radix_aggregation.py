"""Radix-partitioned aggregation (``radix_aggregation_min_groups``): the same answers as DuckDB, partition by partition.

A step of many groups at about a group a row holds its input (from the batch after its one table passes the
threshold, or from its first when a FINAL step expects them from its abandoned PARTIAL step), scatters it by the
high bits of its key hashes and aggregates one partition at a time (``FusedAggregation._run_radix``). The partitions' table size is lowered here
(``RADIX_TABLE_BYTES``) so a few thousand rows make several partitions; each test checks the path ran (its
runtime statistics), so each fails where the step aggregates in one table instead. A step with a string key keeps
the one table (its strings would be hashed twice and gathered back: db-benchmark's q10 2.16x slower partitioned).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from duckdb_reference import assert_same_rows, duckdb_table

from gpu_engine import Session
from gpu_engine.kernels.radix_partition import radix_bits_for, radix_destinations
from gpu_engine.plans import PlanBuilder

import duckdb


def _table(rows: int, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, rows, rows)
    return pa.table({
        "k1": pa.array(k, mask=k % 7 == 3),
        "k2": pa.array((k % 13).astype(np.int32), mask=k % 11 == 5),
        "s": pa.array(np.array([f"s{x}" for x in range(17)])[k % 17], mask=k % 19 == 3),
        "v": pa.array(rng.normal(0, 10, rows), mask=k % 5 == 1),
        "w": pa.array(rng.integers(-100, 100, rows)),
    })


def _radix_stats(session: Session) -> dict:
    found: dict = {}
    for pipeline in session.last_stats().pipelines:
        for operator in pipeline.operators:
            for name in ("radix_partitioned", "radix_partitions"):
                found[name] = found.get(name, 0) + operator.runtime.get(name, 0)
    return found


# s: a string column the kernel reads (NULLs too), scattered with the keys (gathered through the permutation).
QUERY = ("SELECT k1, k2, count(*) AS n, sum(v) AS total, min(w) AS lo, avg(w) AS a, "
         "sum(CASE WHEN s < 's5' THEN w ELSE 0 END) AS sw FROM t GROUP BY k1, k2")


def _check(session: Session, table: pa.Table, result: pa.Table, query: str = QUERY) -> None:
    connection = duckdb.connect()
    connection.register("t", table)
    assert_same_rows(result, duckdb_table(connection, query), rel_tol=1e-9)


@pytest.fixture
def small_tables(monkeypatch):
    """Partitions of a few hundred groups; the planner refuses a partial step (one SINGLE step of raw rows, about
    a group per row) from a few hundred estimated rows instead of 10,000."""
    import gpu_engine.operators.fused_aggregation as fused
    import gpu_engine.optimizer.partial_steps as partial_steps

    monkeypatch.setattr(fused, "RADIX_TABLE_BYTES", 16 << 10)
    monkeypatch.setattr(partial_steps, "MIN_ESTIMATED_ROWS", 100)


@pytest.mark.parametrize("drivers", [1, 2])
def test_a_single_step_of_many_groups_runs_partition_by_partition(device_name, drivers, small_tables):
    # SQL plans this GROUP BY (about a group per row) as one SINGLE step (behind a repartition on 2 drivers);
    # NULL keys in both columns, NULL values, tiny batches (many held batches concatenated).
    if device_name != "cpu" and drivers == 2:
        pytest.skip("cuda-sim: one driver (the simulator interprets every kernel)")
    rows = 3000 if device_name == "cpu" else 400
    table = _table(rows)
    session = Session(device=device_name, drivers=drivers, batch_rows=97, radix_aggregation_min_groups=1)
    session.register("t", table)
    result = session.sql(QUERY)
    stats = _radix_stats(session)
    assert stats["radix_partitioned"] == drivers and stats["radix_partitions"] > drivers, stats
    _check(session, table, result)


def test_a_final_step_after_an_abandoned_partial_step_is_partitioned(small_tables):
    # A hand-built plan keeps its PARTIAL step, which gives up grouping at once here: the FINAL step expects
    # the scan's rows as keys and partitions them.
    table = _table(4000, seed=5)
    session = Session(device="cpu", drivers=2, batch_rows=300, partial_aggregation_abandon_rows=10,
                      radix_aggregation_min_groups=100)
    session.register("t", table)
    plan = (PlanBuilder(session.catalog).table_scan("t")
            .aggregation(["k1", "k2"], ["count(*) AS n", "sum(v) AS total", "min(w) AS lo", "avg(w) AS a"]).plan())
    result = session.execute(plan)
    stats = _radix_stats(session)
    assert stats["radix_partitioned"] == 2 and stats["radix_partitions"] > 2, stats
    _check(session, table, result, "SELECT k1, k2, count(*) AS n, sum(v) AS total, min(w) AS lo, avg(w) AS a "
                                   "FROM t GROUP BY k1, k2")


@pytest.mark.parametrize("shape", ["empty", "skew", "below_threshold", "one_partition"])
def test_edge_inputs(shape, small_tables, monkeypatch):
    # Empty input; skew: nine rows in ten one key (one partition holds them all, as one group); a threshold
    # above the expected groups (one table, as without the setting); partitions as large as the whole input
    # (no partition bits).
    table = _table(2000, seed=7)
    if shape == "empty":
        table = table.slice(0, 0)
    elif shape == "skew":  # ~20 rows a group on one driver: its one table (partitions pay at about a group a row)
        k = np.arange(2000)
        table = table.set_column(0, "k1", pa.array(np.where(k % 10 != 0, 42, k))).set_column(
            1, "k2", pa.array([5 if i % 10 else None for i in k], pa.int32()))
    elif shape == "one_partition":
        import gpu_engine.operators.fused_aggregation as fused

        monkeypatch.setattr(fused, "RADIX_TABLE_BYTES", 1 << 30)
    minimum = 10**9 if shape == "below_threshold" else 1
    session = Session(device="cpu", drivers=2, batch_rows=101, radix_aggregation_min_groups=minimum)
    session.register("t", table)
    result = session.sql(QUERY)
    stats = _radix_stats(session)
    if shape in ("below_threshold", "empty"):
        assert stats["radix_partitions"] == 0, stats
    elif shape == "skew":  # the hot key's driver keeps its table (the other's rows are a group each)
        assert stats["radix_partitioned"] <= 1, stats
    elif shape == "one_partition":
        assert stats["radix_partitions"] == 2, stats  # one a driver
    else:
        assert stats["radix_partitioned"] == 2 and stats["radix_partitions"] >= 2, stats
    _check(session, table, result)


@pytest.mark.parametrize("drivers", [1, 2])
def test_a_step_whose_groups_were_not_expected_switches_to_partitions_at_run_time(device_name, drivers, small_tables):
    # A FINAL step after a PARTIAL step that keeps grouping, flushing small tables (its groups unknown before the
    # first batch; many batches of partial groups): the one table runs until it holds min_groups groups, then
    # later batches are held and partitioned, and the table's groups join their partitions (each group once in
    # the output, its states merged with the held rows').
    if device_name != "cpu" and drivers == 2:
        pytest.skip("cuda-sim: one driver (the simulator interprets every kernel)")
    rows = 4000 if device_name == "cpu" else 600
    table = _table(rows, seed=17)
    table = table.set_column(0, "k1", pa.array(np.arange(rows) % (rows // 3), mask=np.arange(rows) % 29 == 4))
    session = Session(device=device_name, drivers=drivers, batch_rows=rows // 8,
                      partial_aggregation_abandon_rows=10**9, partial_aggregation_max_groups=rows // 40,
                      radix_aggregation_min_groups=rows // 20)
    session.register("t", table)
    plan = (PlanBuilder(session.catalog).table_scan("t")
            .aggregation(["k1", "k2"], ["count(*) AS n", "sum(v) AS total", "min(w) AS lo", "avg(w) AS a"]).plan())
    result = session.execute(plan)
    stats = _radix_stats(session)
    switched = sum(o.runtime.get("radix_switched_at_groups", 0) for p in session.last_stats().pipelines
                   for o in p.operators)
    assert stats["radix_partitioned"] == drivers and stats["radix_partitions"] > drivers and switched > 0, stats
    _check(session, table, result, "SELECT k1, k2, count(*) AS n, sum(v) AS total, min(w) AS lo, avg(w) AS a "
                                   "FROM t GROUP BY k1, k2")


def test_by_default_a_step_of_many_fixed_width_groups_a_driver_is_partitioned(device_name):
    # The default threshold (EngineConfig.radix_aggregation_min_groups) and table sizes: 2 drivers of 340K distinct
    # keys each switch to partitions once their tables pass the threshold.
    if device_name != "cpu":
        pytest.skip("cpu: 680K rows (the simulator interprets every kernel)")
    from gpu_engine.exec.query_ctx import EngineConfig

    rows = 2 * EngineConfig().radix_aggregation_min_groups + 80_000
    table = _table(rows, seed=13)
    k = np.random.default_rng(13).permutation(rows)
    table = table.set_column(0, "k1", pa.array(k, mask=k % 97 == 3))  # ~336K groups a driver
    session = Session(device="cpu", drivers=2, batch_rows=40_000)
    session.register("t", table)
    result = session.sql(QUERY)
    stats = _radix_stats(session)
    assert stats["radix_partitioned"] == 2 and stats["radix_partitions"] > 2, stats
    # 400K groups: compared inside DuckDB (each group's row matched by its keys; row-by-row in Python took 46 s).
    connection = duckdb.connect()
    connection.register("t", table)
    connection.register("actual", result)
    connection.execute(f"CREATE TABLE expected AS {QUERY}")
    differing = connection.execute("""
        SELECT count(*) FROM actual a FULL JOIN expected e
          ON a.k1 IS NOT DISTINCT FROM e.k1 AND a.k2 IS NOT DISTINCT FROM e.k2
        WHERE a.n IS DISTINCT FROM e.n OR a.lo IS DISTINCT FROM e.lo OR a.sw IS DISTINCT FROM e.sw
           OR (a.total IS NULL) <> (e.total IS NULL) OR abs(a.total - e.total) > 1e-9 * greatest(1, abs(e.total))
           OR abs(a.a - e.a) > 1e-9 * greatest(1, abs(e.a))""").fetchone()[0]
    assert result.num_rows == connection.execute("SELECT count(*) FROM expected").fetchone()[0] and differing == 0


@pytest.mark.parametrize("drivers", [1, 2])
def test_a_string_key_keeps_the_one_table(device_name, drivers, small_tables):
    # The same many groups with a string key among the keys: not partitioned (the one table interns each batch's
    # strings once), whatever the threshold; the answer is DuckDB's.
    if device_name != "cpu" and drivers == 2:
        pytest.skip("cuda-sim: one driver (the simulator interprets every kernel)")
    table = _table(2000 if device_name == "cpu" else 300, seed=11)
    query = "SELECT k1, s, count(*) AS n, sum(v) AS total, min(w) AS lo FROM t GROUP BY k1, s"
    session = Session(device=device_name, drivers=drivers, batch_rows=97, radix_aggregation_min_groups=1)
    session.register("t", table)
    result = session.sql(query)
    stats = _radix_stats(session)
    assert stats["radix_partitioned"] == 0 and stats["radix_partitions"] == 0, stats
    _check(session, table, result, query)


def test_destinations_are_a_stable_permutation_grouped_by_the_hashes_top_bits(device_name):
    # The CPU twin is a stable counting sort; the CUDA twin places rows by atomic cursors (same partitions).
    from gpu_engine.device import get_device

    device = get_device(device_name)
    rng = np.random.default_rng(1)
    hashes = rng.integers(0, 2**63, 300, dtype=np.int64).view(np.uint64) * np.uint64(2) + np.uint64(1)
    for bits in (0, 3):
        destinations, offsets = radix_destinations(device, device.asarray(hashes), bits)
        destinations, offsets = device.to_host(destinations), device.to_host(offsets)
        assert sorted(destinations.tolist()) == list(range(300))
        parts = hashes >> np.uint64(64 - bits) if bits else np.zeros(300, dtype=np.uint64)
        assert offsets.tolist() == [0, *np.cumsum(np.bincount(parts.astype(np.int64), minlength=1 << bits))]
        for p in range(1 << bits):
            mine = np.flatnonzero(parts == p)
            assert set(destinations[mine].tolist()) == set(range(offsets[p], offsets[p + 1]))
            if device_name == "cpu":
                assert destinations[mine].tolist() == list(range(offsets[p], offsets[p + 1]))
    empty, offsets = radix_destinations(device, device.asarray(np.zeros(0, dtype=np.uint64)), 2)
    assert device.to_host(empty).shape == (0,) and device.to_host(offsets).tolist() == [0] * 5
    assert radix_bits_for(0, 96, 8 << 20) == 0 and radix_bits_for(5_000_000, 96, 8 << 20) == 7
    with pytest.raises(ValueError, match="bits"):
        radix_destinations(device, device.asarray(hashes), 17)
