"""An A/B of ``bench/ab.py``'s switches with each side's time broken down by plan node, over every Task a query runs.

Why: ``ab.py`` gives a side's process CPU; when two plans differ by a few percent, the question is where. This runs
the same interleaved sides (the switch set before each run, order alternating) and, for each side, keeps the
operator statistics of every Task its ``Session.sql`` call executed (a shared CTE is a Task of its own:
``sql.shared_ctes``), then prints process CPU (``time.process_time``) beside the sum of operator-call times, the
pipelines and drivers of each Task, and the plan nodes whose median call time differs most between the sides.
Process CPU minus operator-call time is what no operator accounts for (scheduling, waiting drivers, exchanges'
queues). Operator-call times are wall time inside the calls: read them on a quiet machine. Usage::

    python bench/ab_breakdown.py union-flattening tpcds 4 --runs 9
"""
import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    import bench.ab as ab
    from gpu_engine import Session
    from gpu_engine.codegen.background_compiles import background_compiler

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("switch", choices=sorted(ab.SWITCHES))
    parser.add_argument("workload", choices=("tpch", "tpcds", "dbbench"))
    parser.add_argument("query", type=int)
    parser.add_argument("--sf", type=float, default=1)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--top", type=int, default=25, help="plan nodes shown")
    args = parser.parse_args()

    module, attribute, stand_in = ab.SWITCHES[args.switch]()
    sides = {"without": stand_in, "with": getattr(module, attribute)}
    folder, sql, register, _ = ab._workload(args.workload, args.query, args.sf)
    tasks: list = []  # the TaskStats of each Task the current call ran
    execute = Session.execute

    def recorded(self, plan, *rest, **options):
        result = execute(self, plan, *rest, **options)
        tasks.append(self.last_stats())
        return result

    Session.execute = recorded
    compiler = background_compiler()
    sessions = {}
    for side in sides:
        setattr(module, attribute, sides[side])
        sessions[side] = Session(device="cpu", drivers=args.drivers)
        register(sessions[side], folder)
        for _ in range(2):  # compiled tier settled
            sessions[side].sql(sql)
            compiler.wait_idle(timeout=300)
    cpu = collections.defaultdict(list)
    calls = collections.defaultdict(list)
    nodes = {side: collections.defaultdict(list) for side in sides}
    shapes = {}
    for run in range(args.runs):
        for side in (list(sides) if run % 2 == 0 else list(sides)[::-1]):
            setattr(module, attribute, sides[side])
            tasks.clear()
            started = time.process_time()
            sessions[side].sql(sql)
            cpu[side].append(time.process_time() - started)
            per = collections.defaultdict(float)
            for t, stats in enumerate(tasks):
                for pipeline in stats.pipelines:
                    for operator in pipeline.operators:
                        per[(f"task {t} node {operator.plan_node_id}", operator.operator_type)] += operator.cpu_seconds
            calls[side].append(sum(per.values()))
            for key, seconds in per.items():
                nodes[side][key].append(seconds)
            shapes[side] = [(len(s.pipelines), sum(p.num_drivers for p in s.pipelines)) for s in tasks]
    setattr(module, attribute, sides["with"])
    median = statistics.median
    print(f"{args.switch}: {args.workload} q{args.query} sf{args.sf:g}, {args.runs} interleaved runs")
    for side in sides:
        print(f"  {side:8s} process CPU median {median(cpu[side]) * 1000:8.1f} ms, operator calls "
              f"{median(calls[side]) * 1000:8.1f} ms; (pipelines, drivers) a Task {shapes[side]}")
    rows = []
    for key in set(nodes["with"]) | set(nodes["without"]):
        a = median(nodes["without"][key]) if nodes["without"][key] else 0.0
        b = median(nodes["with"][key]) if nodes["with"][key] else 0.0
        rows.append((b - a, key, a, b))
    rows.sort(key=lambda row: -abs(row[0]))
    for difference, (node, kind), a, b in rows[:args.top]:
        print(f"  {node:34s} {kind:18s} without {a * 1000:8.1f}  with {b * 1000:8.1f}  ({difference * 1000:+.1f} ms)")


if __name__ == "__main__":
    main()
