"""``gpu-engine precompile`` (run by ``make demo``): the static kernels compile at set-up, not in a first query."""

from __future__ import annotations

import subprocess
import sys


def test_precompile_leaves_nothing_for_the_same_queries_to_compile(tmp_path):
    from gpu_engine import Session
    from gpu_engine.codegen.static_kernels import PRECOMPILE_SCALE_FACTOR, precompile_static_kernels
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.plans.tpch import spec_sql

    lines = []
    summary = precompile_static_kernels("cpu", data_dir=tmp_path, progress=lines.append, queries=(1, 3))
    assert summary.queries == 2 * 3 and len(lines) == 2  # primer, q1 and q3 with one and with two drivers
    session = Session(device="cpu", drivers=2, fuse=False)
    register_tpch(session, ensure_tpch(PRECOMPILE_SCALE_FACTOR, tmp_path / "tpch", progress=False))
    for number in (1, 3):
        session.sql(spec_sql(number, PRECOMPILE_SCALE_FACTOR))
        assert session.last_stats().kernels_compiled == 0


def test_the_precompile_command_is_listed_and_refuses_an_unknown_device():
    done = subprocess.run([sys.executable, "-m", "gpu_engine", "precompile", "--device", "nosuch"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid choice" in done.stderr
    listed = subprocess.run([sys.executable, "-m", "gpu_engine", "--help"], capture_output=True, text=True, timeout=120)
    assert "precompile" in listed.stdout
