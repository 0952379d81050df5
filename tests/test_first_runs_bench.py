"""bench/first_runs.py's measurement: full GC pauses counted per query, and a timed pass freed of earlier passes' heap.

A full collection stops every driver for as long as it walks the heap; the
bench kept every earlier pass's session alive, so whichever pass ran later
paid for the others' objects, and the pauses landed in single queries
unexplained. Counts, not seconds: which collections a query saw, and which
objects a pass's collections no longer walk.
"""

from __future__ import annotations

import gc
import threading

from bench.first_runs import QueryMeter, settle_heap


def test_a_full_collection_inside_a_query_is_counted_for_that_query_only():
    meter = QueryMeter()
    try:
        _, quiet = meter.measure(lambda: sum(range(1000)))
        _, collected = meter.measure(lambda: gc.collect(2))
        _, young = meter.measure(lambda: gc.collect(0))  # a young collection is no full pause
    finally:
        meter.close()
    assert quiet["gc_collections"] == 0 and quiet["gc_s"] == 0.0
    assert collected["gc_collections"] == 1 and collected["gc_s"] > 0.0
    assert young["gc_collections"] == 0
    assert {"seconds", "cpu_s", "run_delay_s"} <= set(collected) and collected["run_delay_s"] >= 0.0
    assert meter._observe not in gc.callbacks  # closing leaves the interpreter as it was


def test_settling_the_heap_leaves_earlier_objects_out_of_a_pass_full_collections():
    class Plan:  # stands for a cached plan an earlier pass's session keeps
        pass

    kept = [Plan() for _ in range(1000)]
    frozen_before = gc.get_freeze_count()
    try:
        settle_heap()
        assert gc.get_freeze_count() >= frozen_before + len(kept)
        assert not any(gc.is_tracked(p) and any(p is o for o in gc.get_objects(2)) for p in kept[:10])
    finally:
        gc.unfreeze()  # the rest of the test session collects as before


def test_a_compile_on_a_driver_thread_is_counted_for_that_query():
    """The warm pass settles a query until a run compiles nothing: a compile in a timed warm run (a kernel
    layout only some batches bring) doubled q14's warm time, and ``last_stats()`` saw only its last Task."""
    from numba import njit

    def compile_on_a_thread():
        kernel = njit(lambda x: x + 1)  # a new function: numba compiles it at its first call
        thread = threading.Thread(target=kernel, args=(1,))
        thread.start()
        thread.join()

    meter = QueryMeter()
    try:
        _, compiled = meter.measure(compile_on_a_thread)
        _, quiet = meter.measure(lambda: None)
    finally:
        meter.close()
    assert compiled["compiles"] >= 1 and quiet["compiles"] == 0
