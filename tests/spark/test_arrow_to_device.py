"""Spark's Arrow batches to the device: gathered into device batches, staged in pinned slots, one copy each.

The partition function is called directly on record batches (no Spark
session, no JVM). ``cuda-sim`` runs the copier's GPU steps on NumPy arrays
(slots, one copy a batch, events), so the counts asserted here are the ones a
GPU run makes; ``cpu`` must feed each Spark batch as it comes, as before.
"""

from __future__ import annotations

import decimal
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from duckdb_reference import assert_same_rows  # noqa: E402
from gpu_engine.columnar.transfers import HostToDeviceCopier, StagedRun, batch_to_arrow, prepare_run  # noqa: E402
from gpu_engine.connectors.split_prefetcher import PREFETCH_THREAD_PREFIX  # noqa: E402
from gpu_engine.device import get_device  # noqa: E402
from gpu_engine.errors import ExecutionError  # noqa: E402
from gpu_engine.plans import PlanBuilder  # noqa: E402
from gpu_engine.spark import fragment_function  # noqa: E402
from gpu_engine.spark.fragment_task import ERROR_MARKER, run_partition  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]


def _lineitem_like(rows: int, start: int = 0) -> pa.Table:
    values = range(start, start + rows)
    return pa.table({
        "k": pa.array([v if v % 9 else None for v in values], pa.int64()),
        "q": pa.array([decimal.Decimal(v % 50).scaleb(-2) for v in values], pa.decimal128(15, 2)),
        "p": pa.array([v * 0.25 for v in values], pa.float64()),
        "f": pa.array(["AFNR"[v % 4] for v in values], pa.string()),
    })


def _run(function, batches):
    """Return the partition function's output and its Task's stats."""
    seen = []
    out = list(run_partition(function, iter(batches), seen.append))
    return pa.Table.from_batches(out, schema=out[0].schema) if out else None, seen[0]


def _scan(stats):
    (scan,) = [s for group in stats.operator_stats_by_node().values() for s in group if s.operator_type == "TableScan"]
    return scan


def _engine_threads() -> int:
    return sum(t.name.startswith((PREFETCH_THREAD_PREFIX, "gpu-engine-driver")) for t in threading.enumerate())


def _threads_back_to(count: int) -> bool:
    deadline = time.monotonic() + 5
    while _engine_threads() > count and time.monotonic() < deadline:
        time.sleep(0.01)
    return _engine_threads() <= count


def test_small_spark_batches_become_device_batches_staged_ahead_and_copied_once_each_on_the_simulator():
    table = _lineitem_like(200)
    plan = PlanBuilder({"t": table.schema}).table_scan("t").project(["k", "q", "p", "f"]).plan()
    function = fragment_function(plan, device="cuda-sim", config={
        "batch_rows": 64, "scan_pinned_staging": True, "scan_prefetch_depth": 2})
    before = _engine_threads()
    result, stats = _run(function, table.to_batches(max_chunksize=10))
    assert_same_rows(result, table)
    scan = _scan(stats)
    # 20 Spark batches of 10 rows gathered into splits of 64 rows (a batch straddling two is sliced): 64, 64, 64, 8,
    assert scan.runtime["splits"] == 4 and scan.output_batches == 4 and scan.output_rows == 200
    # each one device batch copied in one copy from a pinned slot (four columns, validity, string offsets),
    assert scan.runtime["h2d_copies"] == 4 and scan.runtime["h2d_bytes"] > 200 * (8 * 3 + 1)
    # packed on the prefetch threads (three slots: two pieces in flight and one being copied): the driver
    # makes no host sync for them, and no stager waited on a copy (the simulator's end at once).
    assert scan.host_syncs == 0 and "h2d_staging_waits" not in scan.runtime
    assert scan.runtime["h2d_pack_seconds"] > 0
    assert _threads_back_to(before)


def test_cpu_feeds_each_spark_batch_as_it_comes():
    table = _lineitem_like(60)
    plan = PlanBuilder({"t": table.schema}).table_scan("t").project(["k", "p"]).plan()
    function = fragment_function(plan, device="cpu", config={"batch_rows": 64})
    result, stats = _run(function, table.to_batches(max_chunksize=10))
    assert_same_rows(result, table.select(["k", "p"]))
    scan = _scan(stats)
    # No packing by default on host devices: six splits as Spark sent them, nothing staged or copied.
    assert scan.runtime["splits"] == 6 and "h2d_copies" not in scan.runtime


def test_a_partition_whose_batches_change_schema_fails_promptly_and_leaves_no_thread_on_the_simulator():
    table = _lineitem_like(40)
    plan = PlanBuilder({"t": table.schema}).table_scan("t").project(["k"]).plan()
    function = fragment_function(plan, device="cuda-sim", config={
        "batch_rows": 1000, "scan_pinned_staging": True, "scan_prefetch_depth": 2})
    before = _engine_threads()
    other = table.select(["k", "q", "p"]).append_column("f", pa.array([1] * 40, pa.int32()))
    batches = table.to_batches(max_chunksize=20) + other.to_batches(max_chunksize=20)
    with pytest.raises(ExecutionError, match="share one schema") as failure:
        list(run_partition(function, iter(batches)))
    assert str(failure.value).startswith(ERROR_MARKER)
    assert _threads_back_to(before)


def test_copier_stages_on_other_threads_within_its_slots_and_copies_once_a_batch_on_the_simulator():
    device = get_device("cuda-sim")
    reported: dict[str, float] = {}
    copier = HostToDeviceCopier(device, lambda name, value: reported.__setitem__(name, reported.get(name, 0) + value),
                                slots=2)
    copier.attach()
    runs = [prepare_run(_lineitem_like(30, start).to_batches(max_chunksize=7)) for start in (0, 30, 60)]
    staged = [copier.stage(runs[0]), copier.stage(runs[1])]
    assert all(isinstance(s, StagedRun) for s in staged)
    third: list = []
    stager = threading.Thread(target=lambda: third.append(copier.stage(runs[2])))
    stager.start()
    stager.join(0.3)
    assert stager.is_alive()  # both slots hold runs not copied yet: the third waits (pinned memory stays bounded)
    first = copier.upload(staged[0])
    stager.join(5)
    assert not stager.is_alive() and isinstance(third[0], StagedRun)
    batches = [first, copier.upload(staged[1]), copier.upload(third[0])]
    for batch, start in zip(batches, (0, 30, 60)):
        expected = _lineitem_like(30, start)
        assert pa.Table.from_batches([batch_to_arrow(batch)[0]]).equals(expected)
    # One copy a batch; the simulator's copies end at once, so reusing a slot never waits on one.
    assert reported["h2d_copies"] == 3 and "h2d_staging_waits" not in reported
    # A stager still waiting when the copier closes stops with an error instead of hanging its thread.
    late = [copier.stage(runs[0]), copier.stage(runs[1])]
    errors: list = []
    blocked = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, copier.stage, runs[2])))
    blocked.start()
    time.sleep(0.1)
    copier.close()
    blocked.join(5)
    assert not blocked.is_alive() and errors and "closed" in str(errors[0].value)
    assert len(late) == 2


def test_large_staging_areas_pack_in_row_ranges_on_the_decode_pool_on_the_simulator(monkeypatch):
    from gpu_engine.columnar import transfers

    monkeypatch.setattr(transfers, "_PARALLEL_PACK_BYTES", 0)  # every area counts as large,
    monkeypatch.setattr(transfers, "_PACK_CHUNK_BYTES", 40)  # and each large buffer splits into 5-row ranges
    table = _lineitem_like(57)
    for record_batches in (table.to_batches(), table.to_batches(max_chunksize=20)):  # one array a buffer, or many
        copier = HostToDeviceCopier(get_device("cuda-sim"))
        batch = copier.copy(record_batches)
        copier.close()
        assert pa.Table.from_batches([batch_to_arrow(batch)[0]]).equals(table)


class _DeviceArray(np.ndarray):
    """A NumPy array standing in for a CuPy one: ``set`` records each host-to-device copy."""

    copies: list = []

    def set(self, source, stream=None):
        _DeviceArray.copies.append((source.nbytes, stream, isinstance(source, _PinnedArray)))
        np.copyto(np.asarray(self), source)


class _PinnedArray(np.ndarray):
    """Host memory from the fake ``cupyx.empty_pinned``."""


class _Event:
    def __init__(self, log):
        self.log, self.done = log, True

    def record(self, stream=None):
        self.log.append(("record", stream))
        self.done = False  # the copy behind it is "in flight" until someone waits on it

    def synchronize(self):
        self.log.append(("wait",))
        self.done = True


def _fake_gpu(monkeypatch):
    """Return a ``cuda`` device whose ``xp`` records copies and events (NumPy underneath), and the event log."""
    import sys
    import types

    log: list = []
    stream = object()
    cuda = types.SimpleNamespace(
        Device=lambda ordinal=None: types.SimpleNamespace(id=3 if ordinal is None else ordinal,
                                                          use=lambda: log.append(("use", ordinal))),
        Event=lambda: _Event(log), get_current_stream=lambda: stream,
        get_elapsed_time=lambda started, finished: 2.0)
    xp = types.SimpleNamespace(cuda=cuda, empty=lambda shape, dtype: np.empty(shape, dtype).view(_DeviceArray))
    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(
        empty_pinned=lambda nbytes, dtype: np.empty(nbytes, dtype).view(_PinnedArray)))
    monkeypatch.setattr(_DeviceArray, "copies", [])
    from gpu_engine.device import Device

    return Device("cuda", xp, kernel_flavor="cpu"), log, stream


def test_on_a_gpu_a_staged_batch_is_one_asynchronous_copy_from_pinned_memory_and_slots_wait_on_its_event(monkeypatch):
    device, log, stream = _fake_gpu(monkeypatch)
    reported: dict[str, float] = {}
    copier = HostToDeviceCopier(device, lambda name, value: reported.__setitem__(name, reported.get(name, 0) + value))
    copier.attach()
    tables = [_lineitem_like(30, start) for start in (0, 30, 60)]
    staged = []
    worker = threading.Thread(target=lambda: staged.append(copier.stage(prepare_run(tables[0].to_batches(7)))))
    worker.start()
    worker.join(5)
    assert ("use", 3) in log  # the stager made the driver's GPU current on its own thread
    batches = [copier.upload(staged[0])] + [copier.upload(prepare_run(t.to_batches(7))) for t in tables[1:]]
    copier.close()
    # One copy a batch, of the whole packed area (4 columns, validity and string offsets), from pinned memory,
    # on the driver's stream, between two recorded events.
    assert [(stream_used, pinned) for _, stream_used, pinned in _DeviceArray.copies] == [(stream, True)] * 3
    assert reported["h2d_copies"] == 3 and reported["h2d_bytes"] <= sum(n for n, _, _ in _DeviceArray.copies)
    assert sum(entry == ("record", stream) for entry in log) == 6
    # The third batch reused the first slot while its copy was in flight: it waited on that copy's event.
    assert reported["h2d_staging_waits"] == 1 and log.count(("wait",)) == 3  # and close waited for the last two
    assert reported["h2d_seconds"] == pytest.approx(3 * 2.0 / 1000)
    for batch, table in zip(batches, tables):
        column = batch.base_column("k")
        assert isinstance(column.data, _DeviceArray)  # a view of the batch's one device block
        expected = table["k"].combine_chunks()
        assert np.array_equal(np.asarray(column.data)[np.asarray(column.validity)],
                              np.asarray(expected.drop_null()))


@pytest.mark.parametrize("device_name, gathers", [("cpu", False), ("cuda-sim", True)])
def test_a_shuffled_joins_sides_are_gathered_into_device_batches_where_the_scan_packs(device_name, gathers):
    from gpu_engine.plans import PlanNodeIdGenerator
    from gpu_engine.spark.map_in_arrow import BUILD_SIDE, PROBE_SIDE, SIDE_COLUMN, side_column

    probe = pa.table({"k": pa.array([i % 13 for i in range(90)], pa.int64()), "v": [i * 0.5 for i in range(90)]})
    build = pa.table({"dk": pa.array(range(0, 13, 2), pa.int64()), "name": [f"n{i}" for i in range(0, 13, 2)]})
    ids = PlanNodeIdGenerator()
    catalog = {"t": probe.schema, "d": build.schema}
    build_plan = PlanBuilder(catalog, id_generator=ids).table_scan("d")
    plan = (PlanBuilder(catalog, id_generator=ids).table_scan("t")
            .hash_join(["k"], ["dk"], build_plan, ["k", "v", "name"]).plan())
    probe_leaf, build_leaf = plan.sources[0].id, plan.sources[1].id
    config = {"batch_rows": 32, "scan_pinned_staging": gathers}
    function = fragment_function(plan, device=device_name, input_node=probe_leaf, build_input_node=build_leaf,
                                 config=config)

    def tagged(table, tag, own):
        rows = table.num_rows
        columns = {SIDE_COLUMN: pa.array([tag] * rows, pa.int8())}
        for prefix, types in (("p", probe.schema.types), ("b", build.schema.types)):
            for position, column_type in enumerate(types):
                columns[side_column(prefix, position)] = (table.column(position) if prefix == own
                                                          else pa.nulls(rows, column_type))
        return pa.table(columns)

    partition = pa.concat_tables([tagged(build, BUILD_SIDE, "b"), tagged(probe, PROBE_SIDE, "p")])
    result, stats = _run(function, partition.to_batches(max_chunksize=4))
    import duckdb

    connection = duckdb.connect()
    connection.register("t", probe)
    connection.register("d", build)
    assert_same_rows(result, connection.sql("SELECT k, v, name FROM t JOIN d ON k = dk").to_arrow_table())
    scans = {s.plan_node_id: s for group in stats.operator_stats_by_node().values() for s in group
             if s.operator_type == "TableScan"}
    # 7 build rows and 90 probe rows in 4-row Spark batches: gathered into 32-row splits where the scan packs.
    assert scans[build_leaf].runtime["splits"] == (1 if gathers else 2)
    assert scans[probe_leaf].runtime["splits"] == (3 if gathers else 23)
    assert scans[probe_leaf].runtime.get("h2d_copies", 0) == (3 if gathers else 0)


@pytest.mark.gpu
def test_on_cuda_spark_batches_are_gathered_staged_and_copied_once_each():
    from gpu_engine.device import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    table = _lineitem_like(5000)
    plan = PlanBuilder({"t": table.schema}).table_scan("t").project(["k", "q", "p", "f"]).plan()
    function = fragment_function(plan, device="cuda", config={"batch_rows": 2048})
    result, stats = _run(function, table.to_batches(max_chunksize=100))
    assert_same_rows(result, table)
    scan = _scan(stats)
    # 50 Spark batches gathered into 2048, 2048 and 904 rows: three device batches, one pinned copy each, timed.
    assert scan.runtime["splits"] == 3 and scan.runtime["h2d_copies"] == 3 and scan.output_batches == 3
    assert scan.runtime["h2d_seconds"] > 0
