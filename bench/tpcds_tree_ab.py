"""Warm TPC-DS timings with gpu_engine imported from a given source tree: one process per tree, run alternately.

Why: a first-runs round (``bench/first_runs.py``) reads its warm column from one process per round, and its totals
moved 33% between two quiet evenings while DuckDB's moved 5%; to tell a code regression from the machine, run the
old and new trees alternately, minutes apart, on the same queries:

    git worktree add /tmp/ab-old <commit>
    for t in /tmp/ab-old . /tmp/ab-old .; do python bench/tpcds_tree_ab.py $t 4,14,23 3; done

Each process runs each query once (compiling inline), then ``runs`` timed runs; it prints one JSON line: per query
the median wall and process CPU (user+sys) in ms. Answers are not checked here (``bench/run_tpcds.py`` does).
"""
import json
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.tpch_commit_ab import use_tree  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    tree, queries, runs = Path(sys.argv[1]).resolve(), sys.argv[2].split(","), int(sys.argv[3])
    use_tree(tree)
    import gpu_engine
    assert Path(gpu_engine.__file__).resolve().is_relative_to(tree), gpu_engine.__file__
    from bench.tpcds import query_text
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds

    session = Session(device="cpu", drivers=2, compile_mode="inline")
    register_tpcds(session, ensure_tpcds(1))
    out = {}
    for number in queries:
        text = query_text(int(number))
        session.sql(text)
        walls, cpus = [], []
        for _ in range(runs):
            cpu, wall = _cpu(), time.perf_counter()
            session.sql(text)
            walls.append(time.perf_counter() - wall)
            cpus.append(_cpu() - cpu)
        out[number] = (round(statistics.median(walls) * 1000, 1), round(statistics.median(cpus) * 1000, 1))
    print(json.dumps({"tree": str(tree), **out}))


if __name__ == "__main__":
    main()
