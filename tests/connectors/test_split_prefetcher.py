"""SplitPrefetcher: reads run ahead on their own threads, come back in order, fail in the consumer, leave no thread."""

from __future__ import annotations

import threading
import time

import pytest

from gpu_engine.connectors.split_prefetcher import PREFETCH_THREAD_PREFIX, SplitPrefetcher


def prefetch_threads() -> list[threading.Thread]:
    """Return the live prefetch threads of this process."""
    return [t for t in threading.enumerate() if t.name.startswith(PREFETCH_THREAD_PREFIX)]


def _drain(prefetcher: SplitPrefetcher) -> list:
    results = []
    while True:
        result, future = prefetcher.next_result()
        if future is not None:
            future.result(timeout=30)
            continue
        if result is None:
            return results
        results.append(result)


def _read(value: int, seconds: float, log: list | None = None):
    def read():
        time.sleep(seconds)
        if log is not None:
            log.append(threading.current_thread().name)
        return value

    return read


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_results_come_back_in_order_whatever_finishes_first(depth):
    prefetcher = SplitPrefetcher(depth)
    prefetcher.add(_read(i, 0.02 * ((7 - i) % 3)) for i in range(7))
    prefetcher.add([_read(7, 0)])
    assert _drain(prefetcher) == list(range(8))
    prefetcher.close()
    assert prefetch_threads() == []


def test_depth_bounds_reads_in_flight_and_zero_reads_on_the_callers_thread():
    log: list[str] = []
    inline = SplitPrefetcher(0)
    inline.add([_read(1, 0, log)])
    assert inline.pending == 1 and not inline.has_room  # nothing started: depth 0 never reads ahead
    assert inline.next_result() == (1, None) and log == [threading.current_thread().name]

    gate = threading.Event()
    started = []

    def blocked(value):
        def read():
            started.append(value)
            gate.wait(30)
            return value
        return read

    ahead = SplitPrefetcher(2)
    ahead.add(blocked(i) for i in range(5))
    # The reads start on threads of their own: wait for two (a loaded machine may start them after any fixed
    # sleep), then give a third the time it would need to start too.
    deadline = time.monotonic() + 30
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert sorted(started) == [0, 1]  # two in flight, three queued
    result, future = ahead.next_result()
    assert result is None and future is not None and not future.done()
    gate.set()
    assert _drain(ahead) == list(range(5))
    ahead.close()


def test_a_failed_read_raises_in_the_consumer_and_close_leaves_no_thread():
    def fail():
        raise ValueError("injected decode failure")

    prefetcher = SplitPrefetcher(2)
    prefetcher.add([_read(0, 0), fail, _read(2, 0.5), _read(3, 0)])
    with pytest.raises(ValueError, match="injected decode failure"):
        _drain(prefetcher)
    prefetcher.close()  # waits for the read still running, drops the queued one
    assert prefetch_threads() == []
    with pytest.raises(RuntimeError, match="closed"):
        prefetcher.add([_read(4, 0)])
    with pytest.raises(ValueError, match="0 or more"):
        SplitPrefetcher(-1)
