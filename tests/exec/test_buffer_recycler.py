"""The buffer recycler keeps large arrays' memory for reuse, by size class, and drops small ones or those beyond its budget."""

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.exec import buffer_recycler

MIN = buffer_recycler.MIN_BYTES


@pytest.fixture(autouse=True)
def empty_recycler(monkeypatch):
    """Each test starts with nothing kept (other tests in the process may have given arrays back)."""
    monkeypatch.setattr(buffer_recycler, "_kept", type(buffer_recycler._kept)(list))
    monkeypatch.setattr(buffer_recycler, "_kept_bytes", 0)


def test_a_given_array_is_taken_again_in_any_shape_of_its_size_class():
    big = buffer_recycler.take_array(np, (MIN // 8, 2), np.int64)  # 2 * MIN bytes
    big.fill(7)
    buffer_recycler.give_array(np, big)
    assert buffer_recycler.kept_bytes() == 2 * MIN
    again = buffer_recycler.take_array(np, (3, MIN // 8), np.int32)  # 3/4 of the class: the same buffer
    assert again.shape == (3, MIN // 8) and again.dtype == np.int32 and again.flags.c_contiguous
    assert np.shares_memory(again, big) and buffer_recycler.kept_bytes() == 0
    again.fill(-1)  # all of it is writable memory of the buffer
    assert (again == -1).all()


def test_a_request_beyond_the_class_gets_new_memory_and_drops_the_smaller_buffer():
    small = buffer_recycler.take_array(np, (MIN // 8,), np.int64)
    buffer_recycler.give_array(np, small)
    larger = buffer_recycler.take_array(np, (MIN // 8 + 1,), np.int64)
    assert larger.shape == (MIN // 8 + 1,) and not np.shares_memory(larger, small)
    assert buffer_recycler.kept_bytes() == 0  # the kept buffer holds MIN bytes, the request needs more: dropped


def test_a_request_below_a_kept_buffer_drops_nothing():
    big = np.empty(4 * MIN // 8, np.int64)
    small = np.empty(MIN // 8, np.int64)
    buffer_recycler.give_array(np, big)
    buffer_recycler.give_array(np, small)
    middle = buffer_recycler.take_array(np, (2 * MIN,), np.uint8)  # no kept buffer of its class, one larger
    assert not np.shares_memory(middle, big) and not np.shares_memory(middle, small)
    assert buffer_recycler.kept_bytes() == 5 * MIN


def _doubling_run(steps: int) -> list[np.ndarray]:
    """Two drivers' slot tables doubling from MIN to ``MIN << steps``, each giving its old table once the new one
    is full (the order TPC-H Q18's aggregation ran in at SF10); return every table taken."""
    tables = [buffer_recycler.take_array(np, (MIN // 8,), np.int64) for _ in range(2)]
    taken = list(tables)
    for step in range(1, steps + 1):
        for driver in range(2):
            grown = buffer_recycler.take_array(np, ((MIN << step) // 8,), np.int64)
            buffer_recycler.give_array(np, tables[driver])
            tables[driver] = grown
            taken.append(grown)
    for table in tables:  # the query ends: both final tables come back
        buffer_recycler.give_array(np, table)
    return taken


def test_a_doubling_table_keeps_no_more_than_its_last_steps_left_and_a_repeat_reuses_them():
    """No request of a first run takes the sizes its growth left behind, so before a request larger than every
    kept buffer dropped the smaller ones the recycler kept every step (Q18 at SF10: 1.04 GB of a 4.2 GB peak). A
    run of the same query again grows through kept sizes: it keeps what it hands back, and a third run takes
    nothing new."""
    _doubling_run(6)
    # the two 64 MIN final tables and the 32 MIN table the second driver's last step gave (before: 2 * 127 MIN)
    assert buffer_recycler.kept_bytes() == (2 * 64 + 32) * MIN
    _doubling_run(6)  # its smaller tables are new memory, kept as they come back
    assert buffer_recycler.kept_bytes() == 2 * 127 * MIN
    kept = [buffer for buffers in buffer_recycler._kept.values() for buffer in buffers]
    third = _doubling_run(6)
    assert all(any(np.shares_memory(table, buffer) for buffer in kept) for table in third)
    assert buffer_recycler.kept_bytes() == 2 * 127 * MIN


def test_arrays_not_made_here_are_kept_by_the_class_they_can_serve():
    odd = np.empty(3 * MIN // 8, np.int64)  # 3 * MIN bytes: serves requests of up to 2 * MIN
    buffer_recycler.give_array(np, odd)
    assert buffer_recycler.kept_bytes() == 3 * MIN
    assert np.shares_memory(buffer_recycler.take_array(np, (2 * MIN,), np.uint8), odd)


def test_kept_buffers_are_dropped_before_new_memory_where_the_machine_runs_short(monkeypatch):
    """Kept buffers beside a query that needs new memory at the edge of the machine's: the largest are dropped
    until the new buffer leaves an eighth of memory available (before, up to a quarter of memory stayed kept and
    the process met the out-of-memory killer). A request a kept buffer serves reads nothing."""
    monkeypatch.setattr(buffer_recycler, "_TOTAL_BYTES", 64 * MIN)  # an eighth: 8 MIN of headroom
    big, small = np.empty(8 * MIN, np.uint8), np.empty(4 * MIN, np.uint8)
    buffer_recycler.give_array(np, big)
    buffer_recycler.give_array(np, small)
    available = {"bytes": 10 * MIN}
    monkeypatch.setattr(buffer_recycler, "_available_memory", lambda: available["bytes"])
    buffer_recycler.take_array(np, (2 * MIN,), np.uint8)  # 2 MIN new + 8 MIN headroom: just enough
    assert buffer_recycler.kept_bytes() == 12 * MIN
    available["bytes"] = 6 * MIN  # 4 MIN short: the largest kept buffer goes
    buffer_recycler.take_array(np, (2 * MIN,), np.uint8)
    assert buffer_recycler.kept_bytes() == 4 * MIN

    def unread():
        raise AssertionError("a request a kept buffer serves read the machine's memory")

    monkeypatch.setattr(buffer_recycler, "_available_memory", unread)
    assert np.shares_memory(buffer_recycler.take_array(np, (4 * MIN,), np.uint8), small)


def test_small_arrays_views_and_foreign_memory_are_not_kept():
    buffer_recycler.give_array(np, np.empty(16, np.int64))
    whole = np.empty(2 * MIN, np.uint8)
    buffer_recycler.give_array(np, whole[1:])  # does not start its buffer: someone may hold the rest
    buffer_recycler.give_array(np, np.empty((MIN, 2), np.uint8)[:, 0])  # not contiguous
    arrow = np.frombuffer(pa.py_buffer(bytes(MIN)), dtype=np.uint8)  # pyarrow's memory, read-only
    buffer_recycler.give_array(np, arrow)
    assert buffer_recycler.kept_bytes() == 0


def test_the_budget_bounds_what_is_kept(monkeypatch):
    monkeypatch.setattr(buffer_recycler, "MAX_KEPT_BYTES", MIN)
    first = np.empty(MIN // 8, np.int64)
    second = np.empty(MIN // 8, np.int64)
    buffer_recycler.give_array(np, first)
    buffer_recycler.give_array(np, second)  # over the budget: dropped
    assert buffer_recycler.kept_bytes() == MIN
    assert np.shares_memory(buffer_recycler.take_array(np, first.shape, np.int64), first)
    assert not np.shares_memory(buffer_recycler.take_array(np, first.shape, np.int64), second)


def test_device_arrays_are_left_to_their_own_pool():
    class DeviceArray:  # stands in for a CuPy array
        nbytes = MIN
        shape = (MIN // 8,)
        dtype = np.dtype(np.int64)

    buffer_recycler.give_array(np, DeviceArray())
    assert buffer_recycler.kept_bytes() == 0


def test_the_budget_is_a_quarter_of_memory_and_never_below_a_gibibyte(monkeypatch):
    # A fixed 1 GiB kept one of db-benchmark q10's two 1 GiB slot tables at 10M rows: the other, and the emits'
    # words, page-faulted through fresh memory every query.
    for name in (buffer_recycler.CAP_VARIABLE, "PYTEST_XDIST_WORKER_COUNT", "PYSPARK_EXECUTOR_MEMORY_MB"):
        monkeypatch.delenv(name, raising=False)  # (the suite's own xdist workers set one)
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (24 << 30) // 4096}
    monkeypatch.setattr(buffer_recycler.os, "sysconf", lambda name: pages[name])
    assert buffer_recycler._kept_bytes_cap() == 6 << 30
    pages["SC_PHYS_PAGES"] = (2 << 30) // 4096
    assert buffer_recycler._kept_bytes_cap() == 1 << 30

    def unknown(name):
        raise ValueError(name)

    monkeypatch.setattr(buffer_recycler.os, "sysconf", unknown)
    assert buffer_recycler._kept_bytes_cap() == 1 << 30


@pytest.mark.parametrize("environment, cap", [
    ({"PYTEST_XDIST_WORKER_COUNT": "4"}, (6 << 30) // 4),  # four test workers share the quarter
    ({"PYSPARK_EXECUTOR_MEMORY_MB": "2048"}, 512 << 20),  # a PySpark worker: a quarter of its own memory
    ({"PYSPARK_EXECUTOR_MEMORY_MB": "65536"}, 6 << 30),  # (never more than the machine's quarter)
    ({"GPU_ENGINE_RECYCLER_MAX_MB": "300", "PYTEST_XDIST_WORKER_COUNT": "4"}, 300 << 20),  # the setting wins
    ({"GPU_ENGINE_RECYCLER_MAX_MB": "0"}, 0),  # keeps nothing
    ({"GPU_ENGINE_RECYCLER_MAX_MB": "lots", "PYTEST_XDIST_WORKER_COUNT": "x"}, 6 << 30),  # not numbers: ignored
])
def test_several_engine_processes_on_one_machine_each_keep_a_share(monkeypatch, environment, cap):
    """Each process keeps its own buffers: N pytest-xdist workers or PySpark Python workers each holding a
    quarter of memory held N quarters. A documented setting says a process is one of several; the engine's
    own variable bounds any other arrangement."""
    for name in (buffer_recycler.CAP_VARIABLE, "PYTEST_XDIST_WORKER_COUNT", "PYSPARK_EXECUTOR_MEMORY_MB"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (24 << 30) // 4096}
    monkeypatch.setattr(buffer_recycler.os, "sysconf", lambda name: pages[name])
    assert buffer_recycler._kept_bytes_cap() == cap
