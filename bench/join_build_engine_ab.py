"""Joins with 1M-10M build rows through Session.sql: this tree's join table build against a revision's, and DuckDB,
in one process (issue 31 item 3).

``python -m bench.join_build_engine_ab --base e33e285 --build 1e6 1e7 --probe 4e6 --rounds 5``: per build size N, a
build table of N distinct keys and a probe table of ``--probe`` rows drawn from them in random order (a foreign
key: every probe row matches), ``SELECT count(*), sum(b.v * p.w) FROM p JOIN b ON p.k = b.k``, for the key kinds
of ``--kinds``: ``int`` (random int64: a hashed table), ``dense`` (a permutation of 1..N: the direct table),
``str`` (the int as a 16-character string). Sides alternate per round: ``base`` (HashBuild given the base
revision's ``JoinHashTable``, loaded as :mod:`bench.join_build_ab` loads it, and the base's bit tables of the
join-key filters, ``dynamic_filters._int_tables``, where the revision has them) and ``this``, then DuckDB
(threads = drivers). Process CPU (user+sys) and wall, medians; each answer checked against DuckDB's at the warm run.

``--tpch 9 18 21 --sf 1`` A/Bs those TPC-H queries (the specification's texts over the Parquet files) as well
(``--build 0`` leaves the synthetic joins out); their answers are checked against DuckDB's.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import duckdb
import numpy as np
import pyarrow as pa

import sys
from pathlib import Path

import gpu_engine.exec.dynamic_filters as dynamic_filters
import gpu_engine.operators.hash_build as hash_build
from bench.join_build_ab import _base_module
from gpu_engine import Session


def _tables(kind: str, n: int, m: int, rng) -> tuple[pa.Table, pa.Table]:
    if kind == "dense":
        keys = rng.permutation(np.arange(1, n + 1, dtype=np.int64))
    else:
        keys = rng.permutation(np.unique(rng.integers(0, 1 << 62, int(n * 1.01)))[:n])
    probe = keys[rng.integers(0, n, m)]
    if kind == "str":
        keys_col = pa.array([f"{k:016x}" for k in keys.tolist()])
        probe_col = pa.array([f"{k:016x}" for k in probe.tolist()])
    else:
        keys_col, probe_col = pa.array(keys), pa.array(probe)
    return (pa.table({"k": keys_col, "v": rng.random(n)}), pa.table({"k": probe_col, "w": rng.random(m)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD")
    parser.add_argument("--build", type=float, nargs="+", default=[1e6, 3e6, 1e7])
    parser.add_argument("--probe", type=float, default=1e7)
    parser.add_argument("--kinds", nargs="+", default=["int", "str", "dense"])
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tpch", type=int, nargs="*", default=[], help="TPC-H queries to A/B as well")
    parser.add_argument("--sf", type=float, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(11)
    base_class = _base_module(args.base).JoinHashTable
    # a base before the parallel build takes no ``threads``: it builds on the last build driver alone
    base = base_class if "threads" in base_class.__init__.__code__.co_varnames else (
        lambda device, keys, widths, threads=1: base_class(device, keys, widths))
    sides = {"base": base, "this": hash_build.JoinHashTable}
    filter_tables = {"this": dynamic_filters._int_tables,
                     "base": getattr(_base_module(args.base, "gpu_engine/exec/dynamic_filters.py"), "_int_tables",
                                     dynamic_filters._int_tables)}
    session = Session(device="cpu", drivers=args.drivers)
    duck = duckdb.connect()
    duck.execute(f"SET threads = {args.drivers}")
    questions = {}
    checks = {}
    if args.tpch:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch
        from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
        from gpu_engine.plans import tpch
        from gpu_engine.sql.ordering import order_key_columns

        folder = ensure_tpch(args.sf, None, progress=False)
        register_tpch(session, folder)
        duck = duckdb_connection(folder, threads=args.drivers)
        for q in args.tpch:
            sql = tpch.spec_sql(q)
            questions[f"q{q}"] = sql
            checks[f"q{q}"] = (lambda sql: lambda got: rows_mismatch(got, duckdb_table(duck, sql),
                                                                    ordered=order_key_columns(sql)))(sql)
    for kind in args.kinds:
        for n in (int(b) for b in args.build if b):
            name = f"{kind}{n:.0e}".replace("+0", "").replace("+", "")
            build, probe = _tables(kind, n, int(args.probe), rng)
            session.register(f"b_{name}", build)
            session.register(f"p_{name}", probe)
            duck.register(f"b_{name}", build)
            duck.register(f"p_{name}", probe)
            questions[name] = (f"SELECT count(*) AS n, sum(b.v * p.w) AS s FROM p_{name} p JOIN b_{name} b "
                               f"ON p.k = b.k")
    print(f"load before {os.getloadavg()}", flush=True)

    def run(side: str, sql: str):
        if side == "duckdb":
            return duck.sql(sql).fetchall()
        hash_build.JoinHashTable = sides[side]
        dynamic_filters._int_tables = filter_tables[side]
        return session.sql(sql)

    for name, sql in questions.items():
        for side in sides:
            run(side, sql)
            if name in checks:
                wrong = checks[name](run(side, sql))
                print(f"{name} {side}: {'equal' if wrong is None else f'WRONG {wrong}'}", flush=True)
                continue
            expected = run("duckdb", sql)[0]
            got = run(side, sql).to_pylist()[0]
            ok = got["n"] == expected[0] and abs(got["s"] - expected[1]) <= 1e-9 * abs(expected[1])
            print(f"{name} {side}: {'equal' if ok else f'WRONG {got} vs {expected}'}", flush=True)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    loads = []
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for name, sql in questions.items():
            for side in order + ["duckdb"]:
                wall, cpu = time.perf_counter(), time.process_time()
                run(side, sql)
                samples.setdefault((name, side), []).append((time.perf_counter() - wall, time.process_time() - cpu))
        loads.append(os.getloadavg()[0])
        print(f"round {r} load {loads[-1]:.1f}", flush=True)
    hash_build.JoinHashTable = sides["this"]
    dynamic_filters._int_tables = filter_tables["this"]
    print(f"\nload per round {' '.join(f'{x:.1f}' for x in loads)}; drivers {args.drivers}; DuckDB threads "
          f"{args.drivers}; probe {int(args.probe):,} rows")
    print("| join | side | CPU s runs | CPU median | vs base | vs DuckDB CPU | wall median |")
    print("|---|---|---|---|---|---|---|")
    for name in questions:
        base = statistics.median(c for _, c in samples[(name, "base")])
        duck_cpu = statistics.median(c for _, c in samples[(name, "duckdb")])
        for side in list(sides) + ["duckdb"]:
            pairs = samples[(name, side)]
            cpu = statistics.median(c for _, c in pairs)
            print(f"| {name} | {side} | {' '.join(f'{c:.3f}' for _, c in pairs)} | {cpu:.3f} | {cpu / base:.2f}x | "
                  f"{cpu / duck_cpu:.2f}x | {statistics.median(w for w, _ in pairs):.3f} |", flush=True)


if __name__ == "__main__":
    main()
