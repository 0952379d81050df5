"""Packing record batches into device batches, and the scan that uses it, on every device.

On ``cpu`` and ``cuda-sim`` the copier packs into host arrays exactly what it
packs into pinned memory on a GPU; the ``gpu``-marked tests check the pinned,
stream-ordered copies and their stats on ``cuda``.
"""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from duckdb_reference import assert_same_rows
from gpu_engine import Session
from gpu_engine.columnar.transfers import (HostToDeviceCopier, batch_to_arrow, coalesce_record_batches,
                                          rechunk_record_batches)
from gpu_engine.device import get_device
from gpu_engine.plans import PlanBuilder

WORDS = ["apple", "", "cherry pie", "é-accent", None, "durian-long-name-beyond-16"]


def _table(rows: int, offset: int = 0) -> pa.Table:
    def pick(values, i):
        return values[(i * 7 + offset) % len(values)]

    return pa.table({
        "i": pa.array([None if (i + offset) % 11 == 0 else i + offset for i in range(rows)], pa.int64()),
        "s": pa.array([pick(WORDS, i) for i in range(rows)], pa.string()),
        "d": pa.array([pick(WORDS[:4], i) for i in range(rows)]).dictionary_encode(),
        "m": pa.array([None if i % 5 == 0 else decimal.Decimal(i - 50).scaleb(-2) for i in range(rows)],
                      pa.decimal128(12, 2)),
        "t": pa.array([datetime.date(1995, 1, 1) + datetime.timedelta(days=i % 400) for i in range(rows)]),
        "b": pa.array([None if i % 7 == 3 else i % 3 == 0 for i in range(rows)], pa.bool_()),
        "f": pa.array([i * 0.5 for i in range(rows)], pa.float64()),
    })


def _decoded(table: pa.Table) -> pa.Table:
    return pa.table({n: c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
                     for n, c in zip(table.column_names, table.columns)})


def _record_batches() -> list[pa.RecordBatch]:
    """Batches as a Parquet reader hands them out: each with its own dictionary, some sliced, one empty."""
    first = _table(40).to_batches()[0]
    second = _table(100, offset=3).to_batches()[0].slice(17, 60)  # offsets and validity not starting at 0
    third = _table(0).to_batches(max_chunksize=1)
    empty = third[0] if third else pa.RecordBatch.from_pylist([], schema=first.schema)
    return [first, second, empty, _table(25, offset=9).to_batches()[0]]


def test_coalesce_gathers_runs_of_at_least_the_asked_rows():
    batches = [pa.record_batch({"x": list(range(n))}) for n in (3, 0, 4, 5, 1, 2)]
    runs = list(coalesce_record_batches(batches, 7))
    assert [[b.num_rows for b in run] for run in runs] == [[3, 4], [5, 1, 2]]
    assert list(coalesce_record_batches(batches, 100)) == [[b for b in batches if b.num_rows]]
    assert list(coalesce_record_batches([], 10)) == []


def test_rechunk_cuts_runs_of_exactly_the_asked_rows():
    batches = [pa.record_batch({"x": list(range(n))}) for n in (3, 0, 4, 5, 1, 2)]
    runs = list(rechunk_record_batches(batches, 4))
    assert [[b.num_rows for b in run] for run in runs] == [[3, 1], [3, 1], [4], [1, 2]]
    assert [pa.Table.from_batches(run)["x"].to_pylist() for run in runs][1] == [1, 2, 3, 0]
    assert list(rechunk_record_batches([], 10)) == []
    with pytest.raises(ValueError, match="at least 1"):
        list(rechunk_record_batches(batches, 0))


def test_copier_packs_many_record_batches_into_one_batch(device):
    record_batches = _record_batches()
    copier = HostToDeviceCopier(device)
    batch = copier.copy(record_batches)
    copier.close()

    expected = _decoded(pa.Table.from_batches(record_batches)).combine_chunks()
    assert batch.num_rows == expected.num_rows == 40 + 60 + 25
    actual, transfer = batch_to_arrow(batch)
    if device.is_gpu:  # the copy back is counted on a GPU only
        assert transfer.nbytes > 0 and transfer.seconds >= 0
    else:
        assert transfer is None
    assert pa.Table.from_batches([actual]).equals(expected)
    # Dictionary columns keep one dictionary for the packed batch; codes were remapped to it.
    assert batch.base_column("d").dictionary is not None
    assert len(batch.base_column("d").dictionary) == 4


def test_copier_wraps_a_single_batch_and_counts_rows_without_columns(device):
    record_batch = _table(30).to_batches()[0]
    batch = HostToDeviceCopier(device).copy([record_batch])
    assert pa.Table.from_batches([batch.to_arrow()]).equals(_decoded(pa.Table.from_batches([record_batch])))
    no_columns = [pa.record_batch([pa.nulls(n)], names=["$rows"]).select([]) for n in (3, 4)]
    counted = HostToDeviceCopier(device).copy(no_columns)
    assert counted.num_rows == 7 and counted.names == ()
    with pytest.raises(ValueError, match="at least one record batch"):
        HostToDeviceCopier(device).copy([])


@pytest.fixture
def parquet_table(tmp_path):
    """A Parquet file of many small row groups, so scans must gather them into batches."""
    table = pa.concat_tables([_table(300), _table(200, offset=5)])
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=37)
    return tmp_path / "t.parquet", table


@pytest.mark.parametrize("drivers", [1, 2, 4])
def test_packed_scan_matches_duckdb(device_name, drivers, parquet_table, parquet_reader):
    import duckdb

    path, table = parquet_table
    session = Session(device=device_name, drivers=drivers, batch_rows=100, scan_pinned_staging=True,
                      parquet_reader=parquet_reader)
    session.register("t", str(path), split_rows=150)
    plan = (PlanBuilder(session.catalog).table_scan("t").filter("i IS NULL OR i % 3 <> 1")
            .aggregation(["d", "b"], ["count(*) AS c", "sum(m) AS sm", "count(s) AS cs", "max(t) AS mt"]).plan())
    result = session.execute(plan)
    connection = duckdb.connect()
    connection.register("t", table)
    expected = connection.sql("SELECT d, b, count(*) AS c, sum(m) AS sm, count(s) AS cs, max(t) AS mt FROM t "
                              "WHERE i IS NULL OR i % 3 <> 1 GROUP BY d, b").to_arrow_table()
    assert_same_rows(result, expected)
    (scan,) = session.last_stats().operator_stats_by_node()[plan.sources[0].sources[0].id]
    # Row groups of 37 rows were gathered into batches of at least 100 rows (the last of a split may be smaller),
    # packed on the host or decoded on the device (cuda-sim and cuda) alike.
    assert scan.output_batches <= scan.runtime["splits"] * 2
    assert (scan.runtime.get("device_decoded_pieces", 0) > 0) == (parquet_reader == "device")
    assert scan.output_rows == table.num_rows


def test_scan_packs_by_default_only_on_a_gpu():
    from gpu_engine.exec.query_ctx import EngineConfig

    assert not EngineConfig().packs_scan_batches(get_device("cpu"))
    assert EngineConfig(scan_pinned_staging=True).packs_scan_batches(get_device("cpu"))


# ----------------------------------------------------------------- on a GPU
def _gpu_device():
    from gpu_engine.device import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    return get_device("cuda")


@pytest.mark.gpu
def test_pinned_copies_are_counted_and_correct_on_a_gpu(parquet_table):
    device = _gpu_device()
    copier_stats: dict[str, float] = {}

    def report(name, value):
        copier_stats[name] = copier_stats.get(name, 0) + value

    record_batches = _record_batches()
    copier = HostToDeviceCopier(device, report)
    batches = [copier.copy(record_batches) for _ in range(3)]  # both staging slots, then reuse of the first
    copier.close()
    expected = _decoded(pa.Table.from_batches(record_batches)).combine_chunks()
    for batch in batches:
        assert type(batch.base_column("i").data).__module__.startswith("cupy")
        actual, transfer = batch_to_arrow(batch)
        assert pa.Table.from_batches([actual]).equals(expected)
        assert transfer.nbytes > 0 and transfer.seconds >= 0
    assert copier_stats["h2d_bytes"] > 0 and copier_stats["h2d_seconds"] > 0

    path, _ = parquet_table
    session = Session(device="cuda", drivers=2, batch_rows=100)
    session.register("t", str(path), split_rows=150)
    text = session.explain(PlanBuilder(session.catalog).table_scan("t").aggregation(["b"], ["count(*) AS c"]).plan(),
                           analyze=True)
    assert "h2d_bytes=" in text and "h2d_seconds=" in text and "d2h_bytes=" in text


def test_copier_packs_wide_decimals_of_many_record_batches(device):
    """128-bit decimals are two int64 words a row: packing several record batches keeps both words."""
    values = [decimal.Decimal("12345678901234567890123.45"), None, decimal.Decimal("-0.01"),
              decimal.Decimal("99999999999999999999999999999999999.99")]
    column_type = pa.decimal128(37, 2)
    record_batches = [pa.record_batch({"w": pa.array(values[:2], column_type)}),
                      pa.record_batch({"w": pa.array(values[2:], column_type)})]
    copier = HostToDeviceCopier(device)
    batch = copier.copy(record_batches)
    copier.close()
    actual, _ = batch_to_arrow(batch)
    assert actual.column(0).to_pylist() == values


def test_a_piece_of_a_row_group_over_batch_rows_is_cut_into_batches(device_name, tmp_path, parquet_reader):
    """Row groups of 5, 30 and 3 rows with batch_rows 16: the first piece (5 + 30 rows) leaves the scan as
    batches of at most 16 rows (16, 16, 3), whether decoded on the device (cuda-sim: the piece is decoded as
    one batch and sliced, as its row group holds more than batch_rows) or on the host (its record batches)."""
    import duckdb

    table = _table(38)
    path = tmp_path / "groups.parquet"
    with pq.ParquetWriter(path, table.schema) as writer:
        for start, stop in ((0, 5), (5, 35), (35, 38)):
            writer.write_table(table.slice(start, stop - start))
    session = Session(device=device_name, drivers=1, batch_rows=16, parquet_reader=parquet_reader)
    session.register("t", str(path))
    sql = "SELECT i, s, d, m, t, b, f FROM t WHERE f <> 3.0"
    result = session.sql(sql)
    connection = duckdb.connect()
    connection.register("t", table)
    assert_same_rows(result, connection.sql(sql).to_arrow_table())
    (scan,) = [s for stats in session.last_stats().operator_stats_by_node().values() for s in stats
               if s.operator_type == "TableScan"]
    assert scan.runtime.get("device_decoded_pieces", 0) == (2 if parquet_reader == "device" else 0)
    assert (scan.output_batches, scan.output_rows) == (4, 38)
