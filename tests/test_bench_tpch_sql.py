"""bench/run_tpch_sql.py: its memory sampler and its report (totals over the queries both sides answered)."""

from __future__ import annotations

import mmap

import numpy as np

from bench import run_tpch_sql


def test_the_sampler_sees_memory_touched_between_start_and_stop():
    sampler = run_tpch_sql.RssSampler()
    try:
        base = sampler.start()
        # 64 MiB of fresh anonymous pages, every one written: np.ones could take pages freed earlier in this
        # process and still resident (an xdist worker at 3.4 GB rose 43 MB for it in a clean-clone CI run).
        region = mmap.mmap(-1, 64 << 20)
        held = np.frombuffer(region, dtype=np.uint8)
        held[:] = 1
        peak = sampler.stop()
        assert peak - base >= 48 << 20
        assert int(held[-1]) == 1
        del held
        region.close()
        base = sampler.start()
        peak = sampler.stop()
        assert peak >= base
    finally:
        sampler.close()


def _report(results, runs=3, runs_asked=None, memory=None):
    settings = {"sf": 10.0, "runs": runs, "device": "cpu", "drivers": 2}
    if runs_asked:
        settings["runs_asked"] = runs_asked
    report = {"date": "2026-11-28 02:00", "command": "python -m bench.run_tpch_sql --sf 10", "settings": settings,
              "load_before": "1 1 1", "load_after": "2 2 2", "machine": {"git_commit": "abc"}, "results": results}
    if memory:
        report["memory_pass"] = memory
    return report


def test_the_totals_leave_out_a_query_the_engine_did_not_answer_and_name_the_slow_ones():
    results = {
        "q1": {"query": "q1", "check": "equal", "engine_wall_s": 3.0, "duckdb_wall_s": 1.0, "engine_cpu_s": 5.0,
               "duckdb_cpu_s": 2.0, "engine_rise_bytes": 2 * 10**9, "duckdb_rise_bytes": 10**9},
        "q2": {"query": "q2", "check": "error", "reason": "ImportError: x", "duckdb_first_s": 0.5},
        "q3": {"query": "q3", "check": "equal", "engine_wall_s": 1.0, "duckdb_wall_s": 2.0, "engine_cpu_s": 1.0,
               "duckdb_cpu_s": 2.0},
    }
    text = run_tpch_sql.render_markdown(_report(results))
    assert "engine 4000.0 ms, DuckDB 3000.0 ms (1.33x wall); CPU 6000.0 against 4000.0 ms (1.50x)" in text
    assert "Above 1.6x wall: q1 3.00x." in text
    assert "error: ImportError: x" in text
    assert "Partial report" not in text


def test_a_report_written_before_the_last_round_says_so_and_shows_the_memory_pass():
    memory = {"duckdb": {"loaded_bytes": 10**8, "peak_bytes": 3 * 10**9, "rises": {"q1": 10**9}},
              "engine": {"error": ["MemoryError"]}}
    text = run_tpch_sql.render_markdown(_report({}, runs=1, runs_asked=3, memory=memory))
    assert "1 of the 3 rounds asked" in text
    assert "| duckdb | 0.10 | 3.00 | 1.00 |" in text
    assert "| engine | error: ['MemoryError'] | | |" in text
