"""A/B two source trees' first runs (empty generated-kernel cache) in fresh processes, without DuckDB.

Issue 29's "compiling never makes a running query slower than its lowest tier
would be alone": each run is a new process with ``PYTHONPATH`` at one tree and
``GPU_ENGINE_CACHE_DIR`` at a new, empty folder, which runs the TPC-DS queries
once each (``compile_mode`` ``background``, or ``lowest`` for the reference)
and reports the wall and CPU (user + sys, ``getrusage``) of the queries alone,
of the whole pass (the gaps included), and the compile process's CPU
(``RUSAGE_CHILDREN`` once it is closed and reaped). ``--gap S`` waits up to S
seconds between queries for the compile process (``wait_idle``: a user's pause
between queries; the worker runs at normal priority then), so kernels finish
during the pass and later queries of the same shape switch tiers: what the
switch costs the queries is in their CPU. The runs of a round go in a rotated
order (A, B, A-lowest; then B, A-lowest, A; ...) so a drifting load falls on
every side. Each tree needs its static kernels compiled first (``--warm``
runs each query unfused and on the lowest tier once in that tree).

    python -m bench.firstruns_ab --a /tmp/old --b /tmp/new --sf 0.1 --queries 1-40 --rounds 3 --gap 1.5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cpu(who=resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def child(args) -> None:
    """Run one pass in this (fresh) process and print its figures as JSON on the last line."""
    from bench.run_tpcds import parse_query_numbers
    from bench.tpcds import query_text
    from gpu_engine import Session
    from gpu_engine.codegen.background_compiles import background_compiler
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds

    folder = ensure_tpcds(args.sf)
    texts = [query_text(n) for n in parse_query_numbers(args.queries)]
    if args.warm:
        for config in ({"fuse": False}, {"compile_mode": "lowest"}):
            session = Session(device="cpu", drivers=args.drivers, **config)
            register_tpcds(session, folder)
            for text in texts:
                try:
                    session.sql(text)
                except Exception:  # noqa: BLE001 - refused: the same on every side
                    pass
        return
    session = Session(device="cpu", drivers=args.drivers, compile_mode=args.mode)
    register_tpcds(session, folder)
    query_wall = query_cpu = 0.0
    answered = 0
    pass_wall, pass_cpu = time.perf_counter(), _cpu()
    for text in texts:
        wall, cpu = time.perf_counter(), _cpu()
        try:
            session.sql(text)
            answered += 1
        except Exception:  # noqa: BLE001 - refused: the same on every side
            pass
        query_wall += time.perf_counter() - wall
        query_cpu += _cpu() - cpu
        if args.gap > 0 and args.mode == "background":
            background_compiler().wait_idle(timeout=args.gap)
    pass_wall, pass_cpu = time.perf_counter() - pass_wall, _cpu() - pass_cpu
    compiler = background_compiler()
    compiled = compiler.compiled
    compiler.close()
    print(json.dumps({"query_wall_s": query_wall, "query_cpu_s": query_cpu, "pass_wall_s": pass_wall,
                      "pass_cpu_s": pass_cpu, "worker_cpu_s": _cpu(resource.RUSAGE_CHILDREN),
                      "compiled": compiled, "answered": answered, "load": os.getloadavg()[0]}))


def run(tree: str, mode: str, args, warm: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    with tempfile.TemporaryDirectory(prefix="firstruns-ab-") as cache:
        env["GPU_ENGINE_CACHE_DIR"] = cache
        command = [sys.executable, "-m", "bench.firstruns_ab", "--child", "--mode", mode, "--sf", str(args.sf),
                   "--queries", args.queries, "--drivers", str(args.drivers), "--gap", str(args.gap)]
        if warm:
            command.append("--warm")
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree} {mode}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return {} if warm else json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", help="tree A (the old side)")
    parser.add_argument("--b", help="tree B (the new side)")
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--queries", default="1-40")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap", type=float, default=1.5)
    parser.add_argument("--out", help="JSON file for every run's figures")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="background", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return
    for tree in (args.a, args.b):
        run(tree, "lowest", args, warm=True)
    sides = [("A", args.a, "background"), ("B", args.b, "background"), ("B-lowest", args.b, "lowest")]
    runs = []
    for number in range(args.rounds):
        for k in range(len(sides)):
            name, tree, mode = sides[(number + k) % len(sides)]
            figures = dict(run(tree, mode, args), side=name, round=number)
            runs.append(figures)
            print(json.dumps(figures), flush=True)
    print(f"\n{args.rounds} rounds, TPC-DS sf{args.sf:g} queries {args.queries}, {args.drivers} drivers, gap "
          f"{args.gap:g} s; medians (per-round ratios over B-lowest's run of the same round):\n")
    print("| side | query wall s | query CPU s | pass CPU s (gaps incl.) | compile process CPU s | kernels compiled "
          "| query CPU / B-lowest | query wall / B-lowest | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, _, _ in sides:
        mine = [r for r in runs if r["side"] == name]
        lowest = {r["round"]: r for r in runs if r["side"] == "B-lowest"}
        med = lambda key: statistics.median(r[key] for r in mine)  # noqa: E731
        cpu_ratio = statistics.median(r["query_cpu_s"] / lowest[r["round"]]["query_cpu_s"] for r in mine)
        wall_ratio = statistics.median(r["query_wall_s"] / lowest[r["round"]]["query_wall_s"] for r in mine)
        print(f"| {name} | {med('query_wall_s'):.2f} | {med('query_cpu_s'):.2f} | {med('pass_cpu_s'):.2f} | "
              f"{med('worker_cpu_s'):.2f} | {med('compiled'):.0f} | {cpu_ratio:.3f}x | {wall_ratio:.3f}x | "
              f"{min(r['load'] for r in mine):.1f}-{max(r['load'] for r in mine):.1f} |")
    a = {r["round"]: r for r in runs if r["side"] == "A"}
    b = {r["round"]: r for r in runs if r["side"] == "B"}
    print("\nB / A per round, query CPU: " + ", ".join(f"{b[n]['query_cpu_s'] / a[n]['query_cpu_s']:.3f}"
                                                     for n in sorted(a)) +
          "; query wall: " + ", ".join(f"{b[n]['query_wall_s'] / a[n]['query_wall_s']:.3f}" for n in sorted(a)))
    if args.out:
        Path(args.out).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
