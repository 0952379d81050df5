"""Source size and compile seconds per generated kernel of fused aggregations with many aggregates (issue 29 item 3).

Each case runs in a new process whose ``GPU_ENGINE_CACHE_DIR`` is a new, empty folder (set before the engine
is imported, so every generated kernel is new to numba) with ``compile_mode="inline"``, once with the aggregates
split across kernels (``kernel_bounds.MAX_AGGREGATION_SLICE_NODES`` as committed: ``split``) and once with one
kernel per aggregation (the budget set past any program: ``whole``). A numba compile listener records each
generated twin's compile seconds (``fused_cpu``: the key kernel, or the whole kernel; ``sliceN_cpu``;
``move_cpu``), and each generated module's source is split by function to give the bytes per kernel. The
answer is checked against DuckDB's (same process, same files). Cases: ``sumsN`` (a GROUP BY of N distinct
decimal sums over TPC-H lineitem) and ``tpcdsN`` (TPC-DS query N).

    python -m bench.aggregation_kernel_compiles --cases sums8,sums16,sums32,tpcds66 --sf 0.01
    python -m bench.aggregation_kernel_compiles --cases tpcds66 --sides split --budget 144
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def sums_sql(count: int) -> str:
    """Return a GROUP BY of ``count`` distinct conditional decimal sums (and a count) over lineitem."""
    items = ", ".join(f"sum(CASE WHEN l_quantity > {k} THEN l_extendedprice * (1 - l_discount) ELSE 0 END) AS s{k}"
                      for k in range(count))
    return (f"SELECT l_returnflag, l_linestatus, {items}, count(*) AS c FROM lineitem WHERE l_shipdate <= DATE "
            "'1998-09-01' GROUP BY l_returnflag, l_linestatus ORDER BY 1, 2")


def run_case(case: str, sf: float, side: str, budget: int | None = None) -> dict:
    """Run one case in this (new) process and return its kernels' sizes and compile seconds."""
    from numba.core import event

    from gpu_engine import Session
    from gpu_engine.codegen import kernel_bounds
    from gpu_engine.codegen import fused_aggregation_kernel as generator
    from tests.duckdb_reference import duckdb_connection

    if side == "whole":
        kernel_bounds.MAX_AGGREGATION_SLICE_NODES = 10 ** 9
    elif budget:
        kernel_bounds.MAX_AGGREGATION_SLICE_NODES = budget
    compiles: list[tuple[str, float]] = []
    depth = [0, 0.0]

    class Listener(event.Listener):
        def on_start(self, data) -> None:
            if depth[0] == 0:
                depth[1] = time.perf_counter()
            depth[0] += 1

        def on_end(self, data) -> None:
            depth[0] -= 1
            if depth[0] == 0:
                dispatcher = data.data["dispatcher"]
                name = getattr(dispatcher, "py_func", None)
                name = getattr(name, "__name__", "?")
                compiles.append((name, time.perf_counter() - depth[1]))

    event.register("numba:compile", Listener())
    if case.startswith("sums"):
        from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

        folder = ensure_tpch(sf, progress=False)
        sql = sums_sql(int(case[4:]))
        session = Session(device="cpu", drivers=2, compile_mode="inline")
        register_tpch(session, folder)
    else:
        from bench.tpcds import query_text
        from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds

        folder = ensure_tpcds(sf)
        sql = query_text(int(case[5:]))
        session = Session(device="cpu", drivers=2, compile_mode="inline")
        register_tpcds(session, folder)
    started = time.perf_counter()
    got = session.sql(sql)
    wall = time.perf_counter() - started
    expected = duckdb_connection(folder, threads=2).sql(sql).to_arrow_table()
    equal = sorted(map(repr, (tuple(r.values()) for r in got.to_pylist()))) == \
        sorted(map(repr, (tuple(r.values()) for r in expected.to_pylist())))
    sources = []
    for (kernel, _error) in list(generator.GENERATED_AGGREGATIONS._entries.values()):
        if kernel is None:
            continue
        sizes, current, size = {}, None, 0
        for line in kernel.source.splitlines():
            if line.startswith("def "):
                if current:
                    sizes[current] = size
                current, size = line[4:line.index("(")], 0
            if current:
                size += len(line) + 1
        sizes[current] = size
        sources.append({"bytes": len(kernel.source), "slices": kernel.slices, "kernels": sizes})
    generated = [(n, s) for n, s in compiles if n.startswith(("fused_", "slice", "move_"))]
    return {"case": case, "side": side, "budget": kernel_bounds.MAX_AGGREGATION_SLICE_NODES, "wall_s": round(wall, 2), "equal": equal, "modules": sources,
            "compiles": [(n, round(s, 2)) for n, s in generated],
            "compile_s_total": round(sum(s for _, s in generated), 2),
            "compile_s_max": round(max((s for _, s in generated), default=0.0), 2),
            "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="sums8,sums16,sums32,tpcds66")
    parser.add_argument("--sides", default="split,whole")
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--budget", type=int, default=None,
                        help="the split side's MAX_AGGREGATION_SLICE_NODES (default: as committed)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # case:side, run in this process
    args = parser.parse_args()
    if args.one:
        case, side = args.one.split(":")
        print(json.dumps(run_case(case, args.sf, side, args.budget)))
        return
    for case in args.cases.split(","):
        for side in args.sides.split(","):
            env = dict(os.environ, GPU_ENGINE_CACHE_DIR=tempfile.mkdtemp(prefix="aggsplit-"))
            try:
                done = subprocess.run([sys.executable, "-m", "bench.aggregation_kernel_compiles", "--one",
                                       f"{case}:{side}", "--sf", str(args.sf),
                                       *(["--budget", str(args.budget)] if args.budget else [])], env=env,
                                      capture_output=True,
                                      text=True, timeout=args.timeout)
                lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                print(lines[-1] if lines else json.dumps({"case": case, "side": side,
                                                          "error": done.stderr[-2000:]}), flush=True)
            except subprocess.TimeoutExpired:
                print(json.dumps({"case": case, "side": side, "timeout_s": args.timeout}), flush=True)


if __name__ == "__main__":
    main()
