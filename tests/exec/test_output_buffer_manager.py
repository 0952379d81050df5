"""OutputBufferManager: sequence numbers and acknowledgement, end markers, broadcast, back-pressure, delete."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine import ExecutionError
from gpu_engine.exec.output_buffer_manager import OutputBufferManager
from gpu_engine.exec.serialized_page import deserialize_page, serialize_page


def page(*values: int):
    return serialize_page([pa.record_batch({"x": pa.array(values, pa.int64())})])


def values_of(pages) -> list[int]:
    return [v for p in pages for v in deserialize_page(p).column("x").to_pylist()]


@pytest.fixture
def manager() -> OutputBufferManager:
    return OutputBufferManager()


def test_get_data_returns_pages_from_a_sequence_and_acknowledges_earlier_ones(manager):
    manager.initialize_task("t", "partitioned", num_destinations=2, num_drivers=1, max_bytes=1 << 20)
    for v in (1, 2, 3):
        manager.enqueue("t", 0, page(v))
    manager.enqueue("t", 1, page(9))
    pages, next_sequence, at_end = manager.get_data("t", 0, max_bytes=1 << 20, sequence=0)
    assert values_of(pages) == [1, 2, 3] and next_sequence == 3 and not at_end
    retried, _, _ = manager.get_data("t", 0, max_bytes=1, sequence=1)  # a retry: pages 0 freed, 1 on again
    assert values_of(retried) == [2]  # at least one page even over max_bytes
    assert manager.buffered_bytes("t") == sum(p.size for p in pages[1:]) + page(9).size
    manager.acknowledge("t", 0, 3)
    assert manager.buffered_bytes("t") == page(9).size
    assert values_of(manager.get_data("t", 1, 1 << 20, 0)[0]) == [9]


def test_end_marker_after_every_driver_said_no_more_data(manager):
    manager.initialize_task("t", "partitioned", num_destinations=2, num_drivers=2, max_bytes=1 << 20)
    manager.enqueue("t", 0, page(1))
    manager.no_more_data("t")
    assert manager.get_data("t", 0, 1 << 20, 0)[2] is False  # one driver still producing
    waiting = manager.get_data_future("t", 1, 1 << 20, 0)  # an empty destination waits for its end marker
    assert not waiting.done()
    manager.no_more_data("t")
    assert waiting.result(timeout=1) == ([], 0, True)
    pages, next_sequence, at_end = manager.get_data("t", 0, 1 << 20, 0)
    assert values_of(pages) == [1] and at_end
    assert manager.get_data("t", 0, 1 << 20, next_sequence) == ([], 1, True)


def test_future_completes_when_a_page_arrives(manager):
    manager.initialize_task("t", "partitioned", num_destinations=1, num_drivers=1, max_bytes=1 << 20)
    future = manager.get_data_future("t", 0, 1 << 20, 0)
    assert not future.done()
    manager.enqueue("t", 0, page(5))
    pages, next_sequence, at_end = future.result(timeout=1)
    assert values_of(pages) == [5] and next_sequence == 1 and not at_end


def test_consumer_may_ask_before_the_producer_task_exists(manager):
    future = manager.get_data_future("later", 0, 1 << 20, 0)
    manager.initialize_task("later", "partitioned", num_destinations=1, num_drivers=1, max_bytes=1 << 20)
    manager.enqueue("later", 0, page(7))
    assert values_of(future.result(timeout=1)[0]) == [7]


def test_broadcast_keeps_pages_for_a_late_destination(manager):
    manager.initialize_task("b", "broadcast", num_destinations=3, num_drivers=1, max_bytes=1 << 20)
    for v in (1, 2):
        manager.enqueue("b", 0, page(v))
    manager.no_more_data("b")
    size = page(1).size + page(2).size
    first = manager.get_data("b", 0, 1 << 20, 0)
    manager.acknowledge("b", 0, first[1])
    manager.acknowledge("b", 1, manager.get_data("b", 1, 1 << 20, 0)[1])
    assert manager.buffered_bytes("b") == size  # destination 2 has not read them yet
    pages, next_sequence, at_end = manager.get_data("b", 2, 1 << 20, 0)
    assert values_of(pages) == [1, 2] and at_end
    manager.acknowledge("b", 2, next_sequence)
    assert manager.buffered_bytes("b") == 0


def test_enqueue_returns_a_future_over_the_cap_released_below_ninety_percent(manager):
    one = page(1).size
    manager.initialize_task("t", "partitioned", num_destinations=1, num_drivers=1, max_bytes=int(one * 2.5))
    assert manager.enqueue("t", 0, page(1)) is None
    assert manager.enqueue("t", 0, page(2)) is None
    blocked = manager.enqueue("t", 0, page(3))  # always accepted, but now over the cap
    assert blocked is not None and not blocked.done()
    assert manager.wait_for_space("t") is not None
    manager.acknowledge("t", 0, 1)  # 2 pages left: 80 % of the cap
    assert blocked.done()
    assert manager.stats("t").peak_bytes == 3 * one and manager.stats("t").blocked_count == 2


def test_delete_results_frees_pages_and_fails_waiting_consumers(manager):
    manager.initialize_task("t", "partitioned", num_destinations=2, num_drivers=1, max_bytes=1)
    blocked = manager.enqueue("t", 0, page(1))
    waiting = manager.get_data_future("t", 1, 1 << 20, 0)
    manager.delete_results("t")
    assert blocked.done() and not manager.has_task("t")
    with pytest.raises(ExecutionError, match="deleted"):
        waiting.result(timeout=1)
    with pytest.raises(ExecutionError, match="deleted"):
        manager.get_data("t", 0, 1 << 20, 0)


def test_unknown_destination_is_an_error(manager):
    manager.initialize_task("t", "partitioned", num_destinations=2, num_drivers=1, max_bytes=1 << 20)
    with pytest.raises(ExecutionError, match="no output destination 2"):
        manager.get_data("t", 2, 1 << 20, 0)


@pytest.mark.parametrize("compression", [None, "lz4", "zstd"])
def test_pages_round_trip_with_compression(compression):
    batch = pa.record_batch({"s": pa.array(["a", None, "ccc"] * 100), "x": pa.array(range(300), pa.int64())})
    serialized = serialize_page([batch, batch.slice(5, 10)], compression)
    assert serialized.num_rows == 310
    assert deserialize_page(serialized).to_pylist() == batch.to_pylist() + batch.slice(5, 10).to_pylist()
