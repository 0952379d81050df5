"""Compile the static kernels once, at set-up, so that no first query waits for them.

Why: the engine has two kinds of kernels. Generated ones depend on a query's
expressions; they compile in the background while the query runs on the
lowest tier (:mod:`gpu_engine.codegen.background_compiles`). The lowest tier
itself is the eager evaluator and the *static* kernels (``gpu_engine.kernels``:
hashing, joins, grouping, sorting, gathers, Parquet decoding), which do not
depend on a query, only on column types. numba compiles each of them at first
use and caches it per machine, so without this step a fresh install's first
query waited ~30-60 s for them. ``make demo`` runs this step (``gpu-engine
precompile``) as part of set-up, before any data is generated.

What it runs: the 22 TPC-H queries and the primer query as SQL, unfused (so
every operator runs its static kernels and no generated kernel is made), with
one and with two drivers (the local exchange's partitioning kernels), over
TPC-H at scale factor 0.001 (generated in a temporary folder, under a second)
on the given device. That covers the column types and operators of TPC-H,
which are the common ones; a kernel another type needs still compiles at its
first use, once per machine.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PRECOMPILE_SCALE_FACTOR", "PrecompileSummary", "precompile_static_kernels"]

PRECOMPILE_SCALE_FACTOR = 0.001


@dataclass(frozen=True)
class PrecompileSummary:
    """What a precompile run did: queries run, kernels numba compiled (not loaded from its cache) and seconds."""

    queries: int
    kernels_compiled: int
    compile_seconds: float
    seconds: float


def precompile_static_kernels(device: str = "cpu", data_dir: str | Path | None = None, progress=None,
                              queries=None) -> PrecompileSummary:
    """Run TPC-H unfused at a tiny scale on ``device`` so numba compiles (and caches) the static kernels.

    ``data_dir`` is where the TPC-H files are generated (default: a temporary folder, removed after);
    ``progress`` is called with a line per step when given; ``queries`` (TPC-H numbers) defaults to all 22.
    """
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.plans.tpch import PRIMER_SQL, TPCH_QUERY_NUMBERS, spec_sql

    started = time.perf_counter()
    compiled, compile_seconds, runs = 0, 0.0, 0
    with tempfile.TemporaryDirectory(prefix="gpu-engine-precompile-") as temporary:
        folder = ensure_tpch(PRECOMPILE_SCALE_FACTOR, Path(data_dir or temporary) / "tpch", progress=False)
        numbers = TPCH_QUERY_NUMBERS if queries is None else queries
        texts = [PRIMER_SQL] + [spec_sql(n, PRECOMPILE_SCALE_FACTOR) for n in numbers]
        for drivers in (1, 2):
            session = Session(device=device, drivers=drivers, fuse=False)
            register_tpch(session, folder)
            for text in texts:
                session.sql(text)
                stats = session.last_stats()
                compiled += stats.kernels_compiled
                compile_seconds += stats.compile_seconds
                runs += 1
            if progress is not None:
                progress(f"precompile: {drivers} driver(s): {compiled} kernels compiled so far "
                         f"({compile_seconds:.1f} s)")
    return PrecompileSummary(runs, compiled, compile_seconds, time.perf_counter() - started)
