"""Which TPC-H / TPC-DS plans the proven-uniqueness part of the partial-step rule changes, planning only.

Why: ``optimizer.partial_steps`` refuses a partial step where the aggregation's input is proven unique on some of
its grouping keys (``optimizer.unique_keys``); before an A/B of run times, list the plans that changes. Per
query, the optimized plan with the proof and with it stubbed out (unique on nothing: the estimate rule alone);
the aggregations whose partial step differs are printed, with what their input is unique on::

    python -m bench.unique_key_plans --sf 1
    python -m bench.unique_key_plans --sf 1 --show tpcds:74   (each aggregation's and join's unique sets)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--workloads", default="tpch,tpcds")
    p.add_argument("--show", default="", help="workload:number: print its aggregations' and joins' unique sets")
    a = p.parse_args()
    from bench.ab import _workload
    from gpu_engine import Session
    import gpu_engine.optimizer.partial_steps as partial_steps
    from gpu_engine.optimizer import optimize_plan
    from gpu_engine.optimizer.unique_keys import UniqueKeys, unique_keys
    from gpu_engine.plans.nodes import AggregationNode, HashJoinNode, walk_plan
    if a.show:
        workload, number = a.show.split(":")
        folder, sql, register, _ = _workload(workload, int(number), a.sf)
        session = Session(device="cpu", drivers=1)
        register(session, folder)
        plan, memo = optimize_plan(session.sql_plan(sql), session.statistics()), {}
        for node in walk_plan(plan):
            if isinstance(node, AggregationNode | HashJoinNode):
                found = unique_keys(node, memo)
                print(node.label, getattr(node, "grouping_keys", getattr(node, "join_type", "")), "unique on",
                      [sorted(s) for s in found.sets], "constant", sorted(found.constants))
        return
    changed = 0
    for workload in a.workloads.split(","):
        numbers = range(1, 23) if workload == "tpch" else range(1, 100)
        folder, _, register, _ = _workload(workload, numbers[0], a.sf)
        session = Session(device="cpu", drivers=1)
        register(session, folder)
        statistics = session.statistics()
        for n in numbers:
            _, sql, _, _ = _workload(workload, n, a.sf)
            planned = session.sql_plan(sql)
            partial_steps.unique_keys = lambda plan, memo=None: UniqueKeys()
            try:
                without = optimize_plan(planned, statistics)
            finally:
                partial_steps.unique_keys = unique_keys
            proven = optimize_plan(planned, statistics)
            if proven == without:
                continue
            changed += 1
            before = {x.id: x for x in walk_plan(without) if isinstance(x, AggregationNode)}
            for node in walk_plan(proven):
                if isinstance(node, AggregationNode) and node.id in before and node != before[node.id]:
                    sets = [sorted(s) for s in unique_keys(node.sources[0]).sets]
                    print(f"{workload} q{n}: {node.label} [{', '.join(node.grouping_keys)}] no partial step; "
                          f"input unique on {sets}", flush=True)
    print(f"{changed} plans changed at SF {a.sf:g}")


if __name__ == "__main__":
    main()
