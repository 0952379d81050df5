"""``kernels_compiled`` and ``compile_seconds``: what numba compiled for a query, per operator and per Task.

Issue 29 item 5: compiles are the seconds a first run waits, so explain-analyze
shows them next to launches and syncs and tests can bound them. A compile is
counted once (the functions a kernel calls are compiled inside it), on the
thread that compiled it, and not when numba loads a kernel from its cache.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest


def _spent_on_thread(call) -> tuple:
    """Run ``call`` on a new thread; return that thread's compile counters' delta."""
    from gpu_engine.exec.device_counters import compiles_now, watch_compilations

    watch_compilations()
    result = []

    def run():
        before = compiles_now()
        call()
        result.append(compiles_now() - before)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return result[0]


def test_a_compile_is_counted_once_on_its_thread_and_a_compiled_kernel_not_again():
    from numba import njit

    @njit
    def inner(x):
        return x * 3

    @njit
    def outer(x):
        return inner(x) + 1

    first = _spent_on_thread(lambda: outer(4))
    assert first.kernels_compiled == 1 and first.compile_seconds > 0  # inner compiles inside outer: one
    again = _spent_on_thread(lambda: outer(5))
    assert again.kernels_compiled == 0 and again.compile_seconds == 0


def test_a_query_counts_its_compiles_and_a_repeat_compiles_nothing(tmp_path, monkeypatch):
    from gpu_engine import Session
    from gpu_engine.codegen import compiled_modules

    monkeypatch.setenv("GPU_ENGINE_CACHE_DIR", str(tmp_path))  # generated kernels numba has not compiled yet
    monkeypatch.setattr(compiled_modules, "_MODULES", {})
    session = Session(device="cpu", drivers=2)
    session.register("t", pa.table({"g": pa.array(np.arange(100) % 3), "v": pa.array(np.arange(100))}))
    sql = "SELECT g, sum(v * 7 + g), count(*) AS n FROM t WHERE v % 5 <> 1 GROUP BY g"
    session.sql(sql)
    first = session.last_stats()
    assert first.kernels_compiled >= 1 and first.compile_seconds > 0
    per_operator = [s for p in first.pipelines for s in p.operators]
    assert sum(s.kernels_compiled for s in per_operator) <= first.kernels_compiled
    assert any(s.kernels_compiled for s in per_operator if s.operator_type == "FusedAggregation")
    session.sql(sql)
    assert session.last_stats().kernels_compiled == 0
    text = session.explain(session.sql_plan(sql), analyze=True)
    assert "kernels compiled 0 (0.0 ms)" in text.splitlines()[0]


@pytest.mark.parametrize("fuse", [True, False])
def test_explain_analyze_names_the_compiles_of_the_operator_that_made_them(tmp_path, monkeypatch, fuse):
    from gpu_engine import Session
    from gpu_engine.codegen import compiled_modules
    from gpu_engine.session import node_stats_text

    monkeypatch.setenv("GPU_ENGINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled_modules, "_MODULES", {})
    session = Session(device="cpu", fuse=fuse)
    session.register("t", pa.table({"v": pa.array(np.arange(50))}))
    session.sql("SELECT v * 11 - 2 AS w FROM t WHERE v % 3 = 1")
    stats = session.last_stats()
    lines = "\n".join(node_stats_text(stats).values())
    compiled = [s for p in stats.pipelines for s in p.operators if s.kernels_compiled]
    for s in compiled:
        assert f"compiled {s.kernels_compiled} (" in lines
    if fuse:  # the projection's and the filter's generated kernels are new in this folder
        assert compiled
