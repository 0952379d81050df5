"""The host decode pool: sized to the machine or the setting, and decoding chunks in parallel gives the same columns."""

from __future__ import annotations

import os
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.connectors import decode_pool as pools
from gpu_engine.connectors import parquet_columns
from gpu_engine.connectors.data_source import SplitPiece
from gpu_engine.connectors.decode_pool import DECODE_THREAD_PREFIX, decode_pool, default_decode_threads
from gpu_engine.connectors.parquet_columns import decodable_columns, read_decoded_columns
from gpu_engine.errors import DataSourceError
from gpu_engine.exec.split import ParquetSplit


def test_the_pool_size_follows_the_machine_and_the_variable(monkeypatch):
    monkeypatch.delenv(pools.DECODE_THREADS_VARIABLE, raising=False)
    assert default_decode_threads() == min(len(os.sched_getaffinity(0)), pools.MAX_DEFAULT_DECODE_THREADS)
    monkeypatch.setattr(pools, "usable_cpus", lambda: 96)
    assert default_decode_threads() == pools.MAX_DEFAULT_DECODE_THREADS  # capped on a large host
    monkeypatch.setattr(pools, "usable_cpus", lambda: 8)
    assert [default_decode_threads(reserved) for reserved in (0, 1, 3, 8, 9)] == [8, 7, 5, 0, 0]  # cores left to drivers
    monkeypatch.setenv(pools.DECODE_THREADS_VARIABLE, "3")
    assert default_decode_threads() == 3
    monkeypatch.setenv(pools.DECODE_THREADS_VARIABLE, "0")
    assert default_decode_threads() == 0
    for bad in ("-1", "many"):
        monkeypatch.setenv(pools.DECODE_THREADS_VARIABLE, bad)
        with pytest.raises(DataSourceError, match="GPU_ENGINE_DECODE_THREADS must be an integer of 0 or more"):
            default_decode_threads()


def test_the_default_size_is_the_cores_the_process_may_run_on(monkeypatch):
    """A process pinned to 3 cores of a 64-core host (taskset, a cpuset) decodes on 3 threads, not 16."""
    monkeypatch.delenv(pools.DECODE_THREADS_VARIABLE, raising=False)
    from gpu_engine import host_cpus

    monkeypatch.setattr(host_cpus.os, "sched_getaffinity", lambda pid: {4, 5, 6})
    monkeypatch.setattr(host_cpus.os, "cpu_count", lambda: 64)
    host_cpus.usable_cpus.cache_clear()
    try:
        assert default_decode_threads() == 3 and default_decode_threads(1) == 2
    finally:
        monkeypatch.undo()
        host_cpus.usable_cpus.cache_clear()  # the process's own count again for later tests


def test_a_thread_keeps_no_page_buffer_over_the_bound(tmp_path, monkeypatch):
    """Decode threads keep their page buffers between chunks, but none larger than KEPT_SCRATCH_MAX_BYTES."""
    path = tmp_path / "big_pages.parquet"
    rng = np.random.default_rng(3)
    table = pa.table({"a": rng.integers(-2**40, 2**40, 40_000), "s": [f"value {v}" for v in range(40_000)]})
    pq.write_table(table, path, data_page_size=1 << 22, use_dictionary=False)  # ~320 KB and ~400 KB pages
    metadata = pq.read_metadata(path)
    types = decodable_columns(metadata, ["a", "s"])
    buffers = parquet_columns._scratch_buffers()
    read = read_decoded_columns(str(path), metadata, [0], types)
    assert max(buffer.nbytes for buffer in buffers) > 100_000  # kept under the default bound
    monkeypatch.setattr(parquet_columns, "KEPT_SCRATCH_MAX_BYTES", 100_000)
    again = read_decoded_columns(str(path), metadata, [0], types)
    assert max(buffer.nbytes for buffer in buffers) <= 100_000
    for name in ("a", "s"):
        assert again[name].equals(read[name])
        assert pa.chunked_array([again[name]]).cast(table[name].type).combine_chunks().equals(
            table[name].combine_chunks()), name


def test_one_pool_per_size_shared_by_every_caller():
    assert decode_pool(0) is None
    pool = decode_pool(3)
    assert pool is decode_pool(3) and pool._max_workers == 3 and decode_pool(2)._max_workers == 2


def _file(path, rows=12_000, row_group_size=1_500):
    rng = np.random.default_rng(7)
    table = pa.table({"a": rng.integers(-2**40, 2**40, rows), "b": pa.array(rng.standard_normal(rows),
                                                                             mask=rng.random(rows) < 0.2),
                      "s": pa.array([f"v{v}" for v in rng.integers(0, 50, rows)])})
    pq.write_table(table, path, row_group_size=row_group_size, data_page_size=2048)
    return table


def test_chunks_decode_on_the_pool_and_equal_the_serial_read(tmp_path, monkeypatch):
    path = tmp_path / "t.parquet"
    table = _file(path)
    metadata = pq.read_metadata(path)
    types = decodable_columns(metadata, table.column_names)
    groups = range(metadata.num_row_groups)
    threads = []
    decode = parquet_columns._decode_fixed_chunk

    def recording(*arguments):
        threads.append(threading.current_thread().name)
        return decode(*arguments)

    monkeypatch.setattr(parquet_columns, "_decode_fixed_chunk", recording)
    serial = read_decoded_columns(str(path), metadata, groups, types)
    assert threads and all(not name.startswith(DECODE_THREAD_PREFIX) for name in threads)
    threads.clear()
    parallel = read_decoded_columns(str(path), metadata, groups, types, decode_pool(2), parallel_min_bytes=0)
    assert len(threads) == 2 * metadata.num_row_groups and all(name.startswith(DECODE_THREAD_PREFIX) for name in threads)
    assert set(parallel) == set(serial) == {"a", "b", "s"}
    for name in serial:
        assert parallel[name].equals(serial[name]), name
        assert pa.chunked_array([parallel[name]]).cast(table[name].type).combine_chunks().equals(
            table[name].combine_chunks()), name
    threads.clear()  # a piece's read takes its thread count, 0 decoding on the caller's thread
    SplitPiece(ParquetSplit(str(path)), ("a",), metadata.num_rows, tuple(groups)).read(decode_threads=0)
    assert threads and all(not name.startswith(DECODE_THREAD_PREFIX) for name in threads)


def test_a_corrupt_chunk_raises_the_same_error_in_parallel(tmp_path):
    """The first corrupt chunk in column and row-group order is named, as the serial read names it."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(40_000, dtype=np.int64), "y": np.arange(40_000, dtype=np.int64)}), path,
                   use_dictionary=False, row_group_size=10_000)
    metadata = pq.read_metadata(path)
    data = bytearray(path.read_bytes())
    for group in (1, 3):  # two damaged chunks of x: row group 1 is named
        chunk = metadata.row_group(group).column(0)
        middle = chunk.data_page_offset + chunk.total_compressed_size // 2
        data[middle:chunk.data_page_offset + chunk.total_compressed_size] = b"\xff" * (
            chunk.data_page_offset + chunk.total_compressed_size - middle)
    path.write_bytes(bytes(data))
    types = {"x": pa.int64(), "y": pa.int64()}
    messages = []
    for pool in (None, decode_pool(2)):
        with pytest.raises(DataSourceError, match=r"column 'x', row group 1, page 0") as raised:
            read_decoded_columns(str(path), metadata, range(4), types, pool, parallel_min_bytes=0)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


def test_the_engine_config_sets_the_pool_size(monkeypatch):
    from gpu_engine.device import get_device
    from gpu_engine.exec.query_ctx import EngineConfig

    cpu = get_device("cpu")
    gpu = type("FakeGpu", (), {"is_gpu": True, "name": "cuda"})()
    monkeypatch.setattr(pools, "usable_cpus", lambda: 16)
    assert EngineConfig().scan_decode_pool_threads(gpu, drivers=2) == 16  # drivers on a GPU wait on the device
    assert EngineConfig().scan_decode_pool_threads(cpu, drivers=4) == 12  # a core to each cpu driver
    assert EngineConfig().scan_decode_pool_threads(cpu, drivers=16) == 0  # every core has a driver: decode on them
    monkeypatch.setenv(pools.DECODE_THREADS_VARIABLE, "5")
    assert EngineConfig().scan_decode_pool_threads(cpu, drivers=4) == 5  # the environment's when the config sets none
    assert EngineConfig(scan_decode_threads=3).scan_decode_pool_threads(cpu, drivers=16) == 3
    assert EngineConfig(scan_decode_threads=0).scan_decode_pool_threads(gpu) == 0
    with pytest.raises(ValueError, match="scan_decode_threads must be 0 or more"):
        EngineConfig(scan_decode_threads=-1)


@pytest.mark.parametrize("threads", [0, 3])
def test_scans_and_session_cache_decode_on_the_pool_the_config_names(tmp_path, monkeypatch, threads):
    from gpu_engine import Session
    from gpu_engine.connectors import data_source

    path = tmp_path / "t.parquet"
    _file(path, rows=3000)
    asked = []
    monkeypatch.setattr(data_source, "decode_pool", lambda size: asked.append(size) or decode_pool(size))
    monkeypatch.setenv(pools.DECODE_THREADS_VARIABLE, "7")  # the config's setting wins over the environment
    session = Session(device="cpu", drivers=1, scan_decode_threads=threads)
    session.register("t", str(path))
    assert session.sql("SELECT count(*) AS n FROM t WHERE a > 0").num_rows == 1  # a TableScan's pieces
    assert asked and set(asked) == {threads}
    asked.clear()
    session.cache("t")
    assert asked and set(asked) == {threads}
