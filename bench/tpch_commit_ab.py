"""A/B TPC-H queries between two source trees (commits) by process CPU, processes alternated.

Why: run_bench's 5-run medians move 10-20% between processes on this shared VM, so a per-query change
between two stops cannot be told from noise by comparing two bench files. Here each round starts one
process per tree (A, B, A, B, ... order alternating between rounds); a process imports gpu_engine from its
tree (``git worktree add /tmp/x <commit>``), checks each query's answer against DuckDB, waits for the
compiled tier, then times ``--runs`` runs of the hand plan and/or the SQL text, recording wall and process
CPU (user+sys of every thread). The summary is the median over rounds of each process's median, per query
and side, with the load average at each round.

    python bench/tpch_commit_ab.py --a ../ab-old --b . --queries q2,q16,q22 --rounds 4
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def use_tree(tree: Path) -> None:
    """Import gpu_engine (with its kernels and plans packages) from ``tree`` instead of the editable install."""
    sys.path.insert(0, str(tree))
    try:
        import __editable___gpu_engine_0_1_0_finder as finder
    except ImportError:
        return
    finder.MAPPING.update({"gpu_engine": str(tree / "gpu_engine"), "gpu_engine.kernels": str(tree / "kernels"),
                           "gpu_engine.plans": str(tree / "plans")})
    finder.NAMESPACES.update({"gpu_engine.codegen": [str(tree / "gpu_engine" / "codegen")]})


def child(a: argparse.Namespace) -> None:
    """Time the queries in this process with gpu_engine from ``a.tree``; print one JSON line."""
    tree = Path(a.tree).resolve()
    use_tree(tree)
    sys.path.insert(1, str(ROOT))
    sys.path.insert(2, str(ROOT / "tests"))
    import gpu_engine
    assert Path(gpu_engine.__file__).resolve().is_relative_to(tree), gpu_engine.__file__
    from bench.run_bench import settle_compiled_tier
    from bench.tpcds_cpu import cpu
    from bench.tpch_queries import bench_query
    from duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    folder = ensure_tpch(a.sf, None, progress=False)
    session = Session(device="cpu", drivers=a.drivers)
    register_tpch(session, folder)
    duck = duckdb_connection(folder, threads=2)
    out = {}
    for name in a.queries.split(","):
        query = bench_query(name, a.sf)
        expected = duckdb_table(duck, query.sql)
        plan = query.build_plan(session.catalog)
        runners = {"hand": lambda plan=plan: session.execute(plan), "sql": lambda q=query: session.sql(q.sql)}
        for mode in a.modes.split(","):
            run = runners[mode]
            problem = rows_mismatch(run(), expected, ordered=query.ordered)
            if problem:
                raise SystemExit(f"{name} {mode}: differs from DuckDB: {problem}")
            settle_compiled_tier(run)
            walls, cpus = [], []
            for _ in range(a.runs):
                c0, w0 = cpu(), time.perf_counter()
                run()
                walls.append(time.perf_counter() - w0)
                cpus.append(cpu() - c0)
            out[f"{name}:{mode}"] = {"wall": statistics.median(walls), "cpu": statistics.median(cpus)}
    print("RESULT " + json.dumps(out), flush=True)


def parent(a: argparse.Namespace) -> None:
    """Alternate child processes of the two trees; print per-round and summary tables."""
    sides = {"A": a.a, "B": a.b}
    rounds = []
    for r in range(a.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        for side in order:
            load = os.getloadavg()[0]
            env = dict(os.environ)
            env["GPU_ENGINE_CACHE_DIR"] = f"{a.cache_prefix}-{side}"
            env["NUMBA_CACHE_DIR"] = f"{a.cache_prefix}-numba-{side}"
            cmd = [sys.executable, __file__, "--child", "--tree", sides[side], "--queries", a.queries,
                   "--modes", a.modes, "--runs", str(a.runs), "--sf", str(a.sf), "--drivers", str(a.drivers)]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if proc.returncode or not line:
                raise SystemExit(f"side {side} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            result = json.loads(line[0][7:])
            rounds.append({"round": r, "side": side, "load": load, "result": result})
            cells = " ".join(f"{k}={v['cpu'] * 1e3:.1f}/{v['wall'] * 1e3:.1f}" for k, v in result.items())
            print(f"round {r} {side} load {load:.1f}: cpu/wall ms {cells}", flush=True)
    keys = list(rounds[0]["result"])
    print(f"\nA={a.a} B={a.b}; medians over {a.rounds} rounds of per-process medians of {a.runs} runs (ms)")
    print("| query:mode | A cpu | B cpu | B/A cpu | A wall | B wall |")
    print("|---|---|---|---|---|---|")
    for k in keys:
        med = {s: {m: statistics.median(x["result"][k][m] for x in rounds if x["side"] == s) * 1e3
                   for m in ("cpu", "wall")} for s in sides}
        print(f"| {k} | {med['A']['cpu']:.1f} | {med['B']['cpu']:.1f} | {med['B']['cpu'] / med['A']['cpu']:.2f} "
              f"| {med['A']['wall']:.1f} | {med['B']['wall']:.1f} |")
    if a.json:
        Path(a.json).write_text(json.dumps({"a": a.a, "b": a.b, "rounds": rounds}, indent=1))


def main() -> None:
    """Parse arguments; run as the parent (two trees) or as one tree's child process."""
    p = argparse.ArgumentParser()
    p.add_argument("--child", action="store_true")
    p.add_argument("--tree")
    p.add_argument("--a")
    p.add_argument("--b")
    p.add_argument("--queries", default="q2,q16,q22")
    p.add_argument("--modes", default="hand,sql")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--drivers", type=int, default=2)
    p.add_argument("--cache-prefix", default="/tmp/gpe-ab")
    p.add_argument("--json")
    a = p.parse_args()
    child(a) if a.child else parent(a)


if __name__ == "__main__":
    main()
