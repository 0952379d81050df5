"""Thread CPU spent inside what a ``bench/ab.py`` switch replaces, each side, per warm run of a query.

Why: on this shared 2-core machine (load 10-30) a query's process CPU swings by more than a few milliseconds
between runs, so an A/B of a change to one step reads noise; the thread CPU (``time.thread_time``) of the calls
to the switched function itself, summed over every thread that calls it during a run, is steady. It tells what the
step costs on each side, not what the query as a whole saves: report it beside ``bench/ab.py``'s process CPU.
Sides alternate by run in one Session (the switched step is looked up at each call; plans are the same).

    python bench/switch_steps.py kept-positions tpcds 39,72 --sf 1 --runs 7
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.ab import SWITCHES, _workload  # noqa: E402


def main() -> None:
    """Print per query the median thread CPU a run spends in the switched step, without and with the change."""
    p = argparse.ArgumentParser()
    p.add_argument("switch", choices=sorted(SWITCHES))
    p.add_argument("workload", choices=("tpch", "tpcds", "dbbench"))
    p.add_argument("queries", help="comma-separated query numbers")
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--drivers", type=int, default=2)
    a = p.parse_args()
    from gpu_engine import Session
    module, attribute, stand_in = SWITCHES[a.switch]()
    sides = {"without": stand_in, "with": getattr(module, attribute)}
    spent = [0.0]

    def timed(function):
        def call(*args, **kwargs):
            began = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[0] += time.thread_time() - began  # a float add: threads racing here lose nothing measurable
        return call

    timed_sides = {side: timed(function) for side, function in sides.items()}
    for query in (int(q) for q in a.queries.split(",")):
        folder, sql, register, _ = _workload(a.workload, query, a.sf)
        session = Session(device="cpu", drivers=a.drivers)
        register(session, folder)
        for side in sides:  # compile and warm both sides
            setattr(module, attribute, timed_sides[side])
            session.sql(sql)
        samples = {side: [] for side in sides}
        for run in range(a.runs):
            for side in (list(sides) if run % 2 == 0 else list(sides)[::-1]):
                setattr(module, attribute, timed_sides[side])
                spent[0] = 0.0
                session.sql(sql)
                samples[side].append(spent[0])
        setattr(module, attribute, sides["with"])
        m = statistics.median
        print(f"{a.switch}: {a.workload} q{query} sf{a.sf:g}, {a.runs} runs: thread CPU in "
              f"{getattr(sides['with'], '__qualname__', attribute)} per run, without "
              f"{m(samples['without']) * 1000:.1f} ms, with {m(samples['with']) * 1000:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
