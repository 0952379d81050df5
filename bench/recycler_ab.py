"""A/B the buffer recycler dropping what a growth left behind (issue 31, memory at scale) against keeping it.

Why: the recycler kept every table a doubling growth left behind (TPC-H Q18 at SF10: 1.04 GB of its 4.2 GB
peak) until the process went idle; now a request larger than every kept buffer drops the smaller ones
(:mod:`gpu_engine.exec.buffer_recycler`). This measures both
things the change trades:

- ``--memory``: each query in a fresh process per side (sides alternating), its peak resident set (``VmHWM``)
  and what the recycler keeps after it; never more than one process at a time;
- otherwise CPU of repeated runs in one process: per round and side the recycler is emptied, the query runs
  once (what a first run keeps) and its second and third runs are measured (a second run finds what the first
  kept; the third what the second kept: the steady state of a repeated query), DuckDB measured in the same
  round (the recycler is process-wide, so without the emptying each side would run on what the other kept).

``without`` replaces ``buffer_recycler._kept_or_dropped`` by the earlier lookup (nothing dropped). From the
repository root::

    python -m bench.recycler_ab --sf 1 --queries 18,9,13 --runs 5
    python -m bench.recycler_ab --sf 10 --queries 18 --memory
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for _path in (REPO_ROOT, REPO_ROOT / "tests"):  # (tests/ holds duckdb_reference)
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench.run_tpch_sql import _high_water_bytes  # noqa: E402
from bench.tpcds_cpu import measure  # noqa: E402

__all__ = ["main"]


def _exact_class_only(size_class: int):
    """The lookup before the dropping: a buffer of the request's class or nothing, nothing dropped."""
    from gpu_engine.exec import buffer_recycler

    buffers = buffer_recycler._kept.get(size_class)
    if not buffers:
        return None, []
    buffer = buffers.pop()
    buffer_recycler._kept_bytes -= int(buffer.nbytes)
    return buffer, []


def _set_side(side: str) -> None:
    from gpu_engine.exec import buffer_recycler

    if not hasattr(_set_side, "current"):
        _set_side.current = buffer_recycler._kept_or_dropped
    buffer_recycler._kept_or_dropped = _set_side.current if side == "with" else _exact_class_only


def _session(sf: float, drivers: int):
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    folder = ensure_tpch(sf, None, progress=False)
    session = Session(device="cpu", drivers=drivers)
    register_tpch(session, folder)
    return session, folder


def _one_memory_run(args) -> None:
    """Child: one query once on one side; print its peak resident set and what the recycler keeps after it."""
    from bench.tpch_queries import bench_query
    from gpu_engine.exec import buffer_recycler

    _set_side(args.side)
    session, _ = _session(args.sf, args.drivers)
    session.sql(bench_query(f"q{args.queries}", args.sf).sql)
    print("MEMORY " + json.dumps({"peak_bytes": _high_water_bytes(), "kept_bytes": buffer_recycler.kept_bytes()}))


def _memory(args, names: list[str]) -> None:
    rows = []
    for name in names:
        for side in ("without", "with"):
            command = [sys.executable, "-m", "bench.recycler_ab", "--sf", str(args.sf), "--queries", name[1:],
                       "--drivers", str(args.drivers), "--side", side]
            done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
            found = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("MEMORY ")]
            if not found:
                print(f"{name} {side}: failed: {done.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            rows.append((name, side, found[0]))
            print(f"{name} {side:8s} peak {found[0]['peak_bytes'] / 1e9:.2f} GB, recycler keeps "
                  f"{found[0]['kept_bytes'] / 1e9:.2f} GB after, load {os.getloadavg()[0]:.1f}", flush=True)


def _cpu(args, names: list[str]) -> None:
    from bench.tpch_queries import bench_query
    from duckdb_reference import duckdb_connection, duckdb_table
    from gpu_engine.codegen.background_compiles import background_compiler
    from gpu_engine.exec import buffer_recycler

    session, folder = _session(args.sf, args.drivers)
    duck = duckdb_connection(folder, threads=2)
    m = statistics.median
    for name in names:
        sql = bench_query(name, args.sf).sql
        for side in ("without", "with"):
            _set_side(side)
            session.sql(sql)
        background_compiler().wait_idle(timeout=300)
        samples = {k: [] for k in ("duckdb", "without 2nd", "with 2nd", "without 3rd", "with 3rd")}
        for run in range(args.runs):
            samples["duckdb"].append(measure(lambda: duckdb_table(duck, sql))[1:])
            for side in (("without", "with") if run % 2 == 0 else ("with", "without")):
                _set_side(side)
                buffer_recycler.release_kept(0)
                session.sql(sql)
                samples[f"{side} 2nd"].append(measure(lambda: session.sql(sql))[1:])
                samples[f"{side} 3rd"].append(measure(lambda: session.sql(sql))[1:])
        _set_side("with")
        duck_cpu = m(c for _, c in samples["duckdb"])
        print(f"{name} sf{args.sf:g}: {args.runs} rounds, load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        for k, pairs in samples.items():
            cpu = [c for _, c in pairs]
            print(f"  {k:11s} cpu median {m(cpu) * 1000:8.1f} ms (x{m(cpu) / duck_cpu:5.2f} DuckDB)  wall median "
                  f"{m(w for w, _ in pairs) * 1000:8.1f} ms  cpu {' '.join(f'{c * 1000:.0f}' for c in cpu)}",
                  flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--queries", default="18")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--memory", action="store_true", help="fresh-process peaks instead of CPU")
    parser.add_argument("--side", choices=("without", "with"), help=argparse.SUPPRESS)  # a --memory child
    args = parser.parse_args(argv)
    if args.side:
        _one_memory_run(args)
        return 0
    names = [f"q{int(part)}" for part in args.queries.split(",") if part.strip()]
    (_memory if args.memory else _cpu)(args, names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
