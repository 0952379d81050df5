"""Bound the kernel launches and host syncs per scan batch of the scan pipeline's operators, on every device.

Why: on a GPU a batch costs host work, each launch and each device-to-host
read; cpu and cuda-sim hide it. The engine counts both on every device
(:mod:`gpu_engine.exec.device_counters`), so an operator that starts launching
or syncing more per batch fails here, without a GPU. The bounds are counts,
never times, and sit a little above what the operators do today: tighten them
as operators get leaner (fused operators aim at <= 3 launches per batch).

Counts are per scan batch (total over the query / batches the TableScan
produced), so per-query costs (an aggregation's final emission, result
delivery charged to a pipeline's last operator) are spread over the batches;
each device gets a fixed scale factor and batch size so the spread is stable.
The ``cpu`` bounds count CPU twins (one per kernel family), the ``cuda``
bounds CUDA launches (cuda-sim and cuda run the same launch sequence).
Device allocations are only counted on cuda and are not bounded here.

The device Parquet decoder (``parquet_reader="device"``, cuda's default
without cuDF) is bounded per decoded column of a piece, not per batch: at
most :data:`~gpu_engine.kernels.parquet_device.LAUNCHES_PER_COLUMN` launches
a column and one status read a piece (a piece is one or more row groups);
what the scan launches or reads beyond that is bounded per batch as above.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine import Session
from gpu_engine.connectors.tpch_data import register_tpch
from gpu_engine.kernels.parquet_device import LAUNCHES_PER_COLUMN
from gpu_engine.plans import tpch

#: (kernel launches, host syncs) per scan batch, by kernel flavor, query and operator.
BOUNDS: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "cpu": {
        "primer": {"TableScan": (0.5, 0.5), "HashAggregation": (4.5, 2.0)},
        "q1": {"TableScan": (0.5, 0.5), "FilterProject": (14.0, 2.5), "HashAggregation": (23.0, 5.5)},
        "q6": {"TableScan": (0.5, 0.5), "FilterProject": (1.5, 1.5), "HashAggregation": (4.5, 2.0)},
    },
    "cuda": {
        "primer": {"TableScan": (0.5, 0.5), "HashAggregation": (8.0, 2.5)},
        # q1's sums widen to 128 bits: their 38-digit checks read back once per query at emit (3 batches here).
        "q1": {"TableScan": (0.5, 0.5), "FilterProject": (15.0, 2.5), "HashAggregation": (38.0, 6.5)},
        "q6": {"TableScan": (0.5, 0.5), "FilterProject": (2.5, 1.5), "HashAggregation": (5.0, 2.5)},
    },
}

#: The same for the fused runs (fuse=True): the scan pipeline is TableScan -> FusedAggregation, which launches
#: one generated kernel and reads one status array per batch in the steady state (the aim: <= 3 launches).
FUSED_BOUNDS: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "cpu": {
        "primer": {"TableScan": (0.5, 0.5), "FusedAggregation": (3.0, 2.0)},
        # q1: the first batch's first 512 rows run alone (they size the table), one launch and one status
        # read more per query: 2.625 syncs a batch over the 8 batches here.
        "q1": {"TableScan": (0.5, 0.5), "FusedAggregation": (3.0, 3.0)},
        "q6": {"TableScan": (0.5, 0.5), "FusedAggregation": (3.0, 1.5)},
    },
    "cuda": {
        "primer": {"TableScan": (0.5, 0.5), "FusedAggregation": (3.0, 2.5)},
        # Q1's emit turns each of its eight 128-bit sums into words with one counted launch (as array
        # expressions it was a dozen CuPy element-wise kernels a sum, which the counter does not see);
        # spread over 3 batches that is ~2.7 a batch. The steady state is bounded on its own below.
        "q1": {"TableScan": (0.5, 0.5), "FusedAggregation": (5.0, 5.5)},  # see BOUNDS["cuda"]["q1"], and cpu
        "q6": {"TableScan": (0.5, 0.5), "FusedAggregation": (3.0, 2.5)},
    },
}

QUERIES = {
    "primer": tpch.primer_query,
    "q1": lambda catalog: tpch.query(1, catalog),
    "q6": lambda catalog: tpch.query(6, catalog),
}
SCALE_FACTOR = {"cpu": 0.01, "cuda-sim": 0.001, "cuda": 0.01}
BATCH_ROWS = {"cpu": 8192, "cuda-sim": 2048, "cuda": 8192}  # 8, 3 and 8 scan batches of lineitem
MIN_SCAN_BATCHES = 3


@pytest.fixture
def without_scan_predicates(monkeypatch):
    """The scan hands on every row: per-batch bounds count the operators' work per batch of rows a scan decoded.

    Why: a filter's conjuncts tested in the scan (:mod:`gpu_engine.connectors.scan_predicates`) cut Q6's lineitem
    to one gathered batch, over which per-query costs would be spread; what the scan's own test costs is bounded
    apart (:func:`test_scan_predicates_add_no_launch_or_sync`).
    """
    import gpu_engine.connectors.scan_predicates as module

    monkeypatch.setattr(module, "plan_scan_predicates", lambda items: [])


def _query_counts(device_name: str, name: str, folder, fuse: bool, batch_rows: int, parquet_reader: str = "auto"):
    """Run one query with one driver; return its scan batches and (launches, syncs) by operator type, the scan's
    without the device Parquet decoder's allowance (:data:`LAUNCHES_PER_COLUMN` a decoded column, a sync a piece)."""
    session = Session(device=device_name, drivers=1, fuse=fuse, batch_rows=batch_rows, parquet_reader=parquet_reader)
    register_tpch(session, folder)
    result = session.execute(QUERIES[name](session.catalog))
    assert result.num_rows > 0
    operators = [s for stats in session.last_stats().operator_stats_by_node().values() for s in stats]
    (scan,) = [s for s in operators if s.operator_type == "TableScan"]
    counts = {s.operator_type: (s.kernel_launches, s.host_syncs) for s in operators}
    assert scan.runtime.get("device_decoded_columns", 0) or parquet_reader != "device", scan.runtime
    launches, syncs = counts["TableScan"]
    counts["TableScan"] = (launches - LAUNCHES_PER_COLUMN * scan.runtime.get("device_decoded_columns", 0),
                           syncs - scan.runtime.get("device_decoded_pieces", 0))
    return scan.output_batches, counts


def _counts_per_scan_batch(device_name: str, name: str, folder, fuse: bool,
                           parquet_reader: str = "auto") -> dict[str, tuple[float, float]]:
    """Run one query with one driver; return (launches, syncs) per scan batch by operator type."""
    batches, counts = _query_counts(device_name, name, folder, fuse, BATCH_ROWS[device_name], parquet_reader)
    assert batches >= MIN_SCAN_BATCHES, "too few batches for per-batch counts to mean anything"
    return {operator: (launches / batches, syncs / batches) for operator, (launches, syncs) in counts.items()}


@pytest.mark.simulator_values(name=("primer", "q1"))  # cuda-sim's q6: through the device decoder, below (CI time)
@pytest.mark.parametrize("fuse", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("name", list(QUERIES))
def test_scan_pipeline_stays_within_its_launch_and_sync_bounds(device_name, device, name, fuse, tpch_data,
                                                                without_scan_predicates):
    measured = _counts_per_scan_batch(device_name, name, tpch_data(SCALE_FACTOR[device_name]), fuse)
    _assert_within((FUSED_BOUNDS if fuse else BOUNDS)[device.kernel_flavor][name], measured)


def _assert_within(bounds: dict[str, tuple[float, float]], measured: dict[str, tuple[float, float]]) -> None:
    over = {operator: (measured[operator], bound) for operator, bound in bounds.items()
            if operator in measured and (measured[operator][0] > bound[0] or measured[operator][1] > bound[1])}
    missing = set(bounds) - set(measured)
    assert not missing, f"operators not in the plan any more: {sorted(missing)}; measured {measured}"
    assert not over, f"(launches, syncs) per scan batch over their bounds (measured, bound): {over}"


def test_device_decoded_scan_stays_within_its_bounds_per_decoded_column_and_piece(device_name, tpch_data,
                                                                                 without_scan_predicates):
    """Fused Q6 through the device Parquet decoder (cuda's default; on cuda-sim this is Q6's fused case): at most
    LAUNCHES_PER_COLUMN launches a decoded column and one status read a piece, the scan's other work and the
    pipeline's within their per-batch bounds (the scan's launches were counted per batch: 1.5 a batch against
    0.5 on an H100 at 7900260)."""
    if device_name == "cpu":
        pytest.skip("the device Parquet decoder runs on cuda and cuda-sim")
    measured = _counts_per_scan_batch(device_name, "q6", tpch_data(SCALE_FACTOR[device_name]), True, "device")
    _assert_within(FUSED_BOUNDS["cuda"]["q6"], measured)


@pytest.mark.parametrize("name", ["primer", "q1"])
def test_fused_scan_pipeline_launches_at_most_three_kernels_a_batch_in_the_steady_state(device_name, name, tpch_data,
                                                                                       without_scan_predicates):
    # Issue 11's bound, per batch and without the per-query emit: the query runs at two batch sizes and
    # the extra launches and syncs of the extra batches are what one more batch costs.
    folder = tpch_data(SCALE_FACTOR[device_name])
    few, few_counts = _query_counts(device_name, name, folder, True, BATCH_ROWS[device_name])
    many, many_counts = _query_counts(device_name, name, folder, True, BATCH_ROWS[device_name] // 2)
    assert many > few
    launches, syncs = (many_counts["FusedAggregation"][k] - few_counts["FusedAggregation"][k] for k in (0, 1))
    assert launches / (many - few) <= 3.0, (few, few_counts, many, many_counts)
    assert syncs / (many - few) <= 2.0, (few, few_counts, many, many_counts)


@pytest.mark.parametrize("fuse", [False, True], ids=["unfused", "fused"])
def test_scan_predicates_add_no_launch_or_sync(device_name, fuse, tpch_data, monkeypatch):
    """Q6 with its filter's conjuncts tested in the scan (host-decoded pieces, as cpu and a GPU without cuDF's or
    the device decoder read them): no operator launches or reads back more over the query than with the scan
    handing on every row, and the scan itself launches nothing (its test runs on the host, per piece, off the
    driver)."""
    import gpu_engine.connectors.scan_predicates as module

    folder = tpch_data(SCALE_FACTOR[device_name])
    counted = {}
    for side, plan in (("with", module.plan_scan_predicates), ("without", lambda items: [])):
        monkeypatch.setattr(module, "plan_scan_predicates", plan)
        counted[side] = _query_counts(device_name, "q6", folder, fuse, BATCH_ROWS[device_name], "pyarrow")
    (few, with_counts), (many, without_counts) = counted["with"], counted["without"]
    assert few < many, counted  # the scan dropped rows
    assert with_counts["TableScan"] == (0, 0), with_counts
    over = {op: (count, without_counts[op]) for op, count in with_counts.items()
            if count[0] > without_counts[op][0] or count[1] > without_counts[op][1]}
    assert not over, over


# ----------------------------------------------------------------- aggregation: string keys, grouping sets
#: The aggregation paths' per-batch bounds below are marginal: a query runs at two batch sizes and what the
#: extra batches cost is divided by their number, so per-query work (emits, merges of grouping sets, the
#: result) cancels. Tiny in-memory tables; cuda-sim batches stay under SERIAL_ROWS, so a string key's
#: dictionary or batch is interned by one thread (one launch, no read back), as a GPU does for short inputs.


def _string_keys_table(rows: int = 128) -> pa.Table:
    rng = np.random.default_rng(11)
    picks = rng.integers(0, 24, rows)
    return pa.table({"s": pa.array([None if p % 11 == 3 else f"key-{p}-of-a-longer-string" for p in picks]),
                     "t": pa.array([None if p % 7 == 1 else f"t{p % 5}" for p in picks]),
                     "i": pa.array(picks % 3, pa.int64()), "v": pa.array(rng.integers(-50, 50, rows), pa.int64())})


def _counts_per_extra_batch(device_name: str, sql: str, operator: str, rows: int, **config) -> tuple[float, float]:
    """Return the (launches, syncs) one more input batch costs ``operator`` (``rows`` in 4 and in 8 batches)."""
    measured = []
    for batch_rows in (rows // 4, rows // 8):
        session = Session(device=device_name, drivers=1, batch_rows=batch_rows, **config)
        session.register("x", _string_keys_table(rows), split_rows=rows // 4)
        assert session.sql(sql).num_rows > 0
        (stats,) = [s for node in session.last_stats().operator_stats_by_node().values() for s in node
                    if s.operator_type == operator]
        measured.append((stats.input_batches, stats.kernel_launches, stats.host_syncs))
    (few, few_launches, few_syncs), (many, many_launches, many_syncs) = measured
    assert many > few, measured
    return (many_launches - few_launches) / (many - few), (many_syncs - few_syncs) / (many - few)


def test_fused_string_keys_add_a_launch_per_key_and_no_read_back_a_batch(device_name, device):
    """Interning a batch's two string keys (StringKeyTable) launches once per key on the CUDA path and reads
    nothing back: the batch's one read stays the fused kernel's status. The query's shape is
    tests/operators/test_fused_string_keys.py's. CUDA path only (the cpu twins count each key's table pass)."""
    if device.kernel_flavor != "cuda":
        pytest.skip("counts the CUDA path's launches and reads")
    sql = "SELECT t, i, s, sum(v) AS total, count(*) AS n, min(v) AS low FROM x GROUP BY t, i, s"
    launches, syncs = _counts_per_extra_batch(device_name, sql, "FusedAggregation", 64)
    assert launches <= 1 + 2 and syncs <= 1, (launches, syncs)


def test_string_key_table_reads_back_once_an_intern_and_dictionaries_not_at_all(device):
    """A batch longer than ``serial_rows`` claims slots in parallel: at most 6 launches and the one read of its
    new-string count; a dictionary-encoded batch interns its few values on one thread and gathers by code."""
    from gpu_engine.columnar.column import Column
    from gpu_engine.exec.device_counters import counts_now
    from gpu_engine.kernels.string_keys import StringKeyTable

    table = StringKeyTable(device, initial_capacity=64, serial_rows=8)
    plain = Column.from_arrow(_string_keys_table(64).column("s").combine_chunks(), device)
    for _ in range(2):  # the first batches size the table (room for twice the known strings and a batch)
        table.intern(plain)
    before = counts_now()
    table.intern(plain)
    plain_counts = counts_now() - before
    assert plain_counts.kernel_launches <= 6 and plain_counts.host_syncs <= 1, plain_counts
    encoded = Column.from_arrow(pa.array(["x", "y", None, "x", "z"] * 8).dictionary_encode(), device)
    table = StringKeyTable(device)
    before = counts_now()
    table.intern(encoded)
    dictionary_counts = counts_now() - before
    assert dictionary_counts.kernel_launches <= (2 if device.kernel_flavor == "cuda" else 3), dictionary_counts
    assert dictionary_counts.host_syncs <= (0 if device.kernel_flavor == "cuda" else 1), dictionary_counts


def test_grouping_sets_merge_interns_string_keys_without_reading_them_back(device_name, device):
    """GroupIdAggregation merges each input batch in one INTERMEDIATE step; the fused partial step hands it
    its string keys as dictionaries (its interned strings), which a StringKeyTable interns on one thread
    without a read back on the CUDA path. Packing each dictionary into key words first read back its longest
    string and then its new count: 29.75 launches and 7.75 syncs a batch here before, 19.5 and 4.25 now
    (partial flushes of at most 2 groups make the batches). CUDA path only: cpu would compile its kernels."""
    if device.kernel_flavor != "cuda":
        pytest.skip("counts the CUDA path's launches and reads")
    sql = "SELECT t, s, sum(v) AS total FROM x GROUP BY ROLLUP (t, s)"
    launches, syncs = _counts_per_extra_batch(device_name, sql, "GroupIdAggregation", 32,
                                              partial_aggregation_max_groups=2)
    assert launches <= 24 and syncs <= 5, (launches, syncs)


# ----------------------------------------------------------------- aggregation: radix partitions
def _radix_counts(device_name: str, batch_rows: int, table_bytes: int, monkeypatch) -> tuple[int, int, int, int]:
    """Run a GROUP BY of about a group per row on the radix-partitioned path; return the FusedAggregation's
    (input batches, partitions, launches, syncs)."""
    import gpu_engine.operators.fused_aggregation as fused
    import gpu_engine.optimizer.partial_steps as partial_steps

    monkeypatch.setattr(fused, "RADIX_TABLE_BYTES", table_bytes)
    monkeypatch.setattr(partial_steps, "MIN_ESTIMATED_ROWS", 100)  # a SINGLE step of raw rows from 256 rows
    rows = 256
    keys = np.arange(rows) * 7919 % 1000
    table = pa.table({"k": pa.array(keys, mask=keys % 9 == 4), "s": pa.array(keys % 5, pa.int32()),
                      "v": pa.array(keys % 13, pa.int64())})
    session = Session(device=device_name, drivers=1, batch_rows=batch_rows, radix_aggregation_min_groups=1)
    session.register("x", table)
    assert session.sql("SELECT k, s, sum(v) AS total, count(*) AS n FROM x GROUP BY k, s").num_rows > 0
    (stats,) = [s for node in session.last_stats().operator_stats_by_node().values() for s in node
                if s.operator_type == "FusedAggregation"]
    assert stats.runtime.get("radix_partitioned") == 1, stats.runtime
    return stats.input_batches, stats.runtime["radix_partitions"], stats.kernel_launches, stats.host_syncs


def test_radix_partitioned_aggregation_holds_batches_without_launches_and_runs_each_partition_in_a_few(
        device_name, device, monkeypatch):
    """A radix-partitioned step (issue 31 item 3) holds its input batches: an extra batch launches nothing and
    reads nothing back; its partitions run once the input ends, each at most 6 launches and 3 reads (the fused
    kernel, its status, the emit's compaction), plus a fixed number for the query (hash, count,
    scatter, the offsets read once)."""
    few, parts, few_launches, few_syncs = _radix_counts(device_name, 64, 1 << 12, monkeypatch)
    many, parts_many, many_launches, many_syncs = _radix_counts(device_name, 32, 1 << 12, monkeypatch)
    assert many > few and parts_many == parts > 1, (few, many, parts, parts_many)
    per_batch = ((many_launches - few_launches) / (many - few), (many_syncs - few_syncs) / (many - few))
    _, more_parts, more_launches, more_syncs = _radix_counts(device_name, 64, 1 << 10, monkeypatch)
    assert more_parts > parts, (parts, more_parts)
    per_partition = ((more_launches - few_launches) / (more_parts - parts), (more_syncs - few_syncs) / (more_parts - parts))
    assert per_batch == (0.0, 0.0), per_batch
    assert per_partition[0] <= 6 and per_partition[1] <= 3, per_partition
