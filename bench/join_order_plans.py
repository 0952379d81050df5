"""Which TPC-H / TPC-DS plans the typed join order (``optimizer.join_order.order_joins``) changes, planning only.

Why: before an A/B of run times, count the plans the rule moves and what it estimates it saves. The SQL planner
joins FROM items as written (``sql.join_ordering.join_written``); per query: whether ``order_joins`` changed the
plan after ``optimizer.RULES``, and the summed estimated rows of every join (``cardinality.estimate``) before and
after it::

    python -m bench.join_order_plans --sf 1
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def summed_join_rows(plan, statistics) -> float:
    """Return the estimated rows of every join of ``plan`` summed (a join not estimated counts nothing)."""
    from gpu_engine.optimizer.cardinality import estimate
    from gpu_engine.plans.nodes import HashJoinNode, NestedLoopJoinNode, walk_plan
    total = 0.0
    for node in walk_plan(plan):
        if isinstance(node, HashJoinNode | NestedLoopJoinNode):
            found = estimate(node, statistics)
            total += found.rows if found is not None else 0.0
    return total


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--workloads", default="tpch,tpcds")
    a = p.parse_args()
    from bench.ab import _workload
    from gpu_engine import Session
    from gpu_engine.optimizer import RULES
    from gpu_engine.optimizer.join_order import order_joins
    from gpu_engine.sql import plan_sql
    counts = {}
    for workload in a.workloads.split(","):
        numbers = range(1, 23) if workload == "tpch" else range(1, 100)
        folder, _, register, _ = _workload(workload, numbers[0], a.sf)
        session = Session(device="cpu", drivers=1)
        register(session, folder)
        statistics = session.statistics()
        for n in numbers:
            _, sql, _, _ = _workload(workload, n, a.sf)
            try:
                plan = plan_sql(sql, session.catalog, statistics)
            except Exception as error:  # noqa: BLE001 - reported per query
                print(f"{workload} q{n:<3} ERROR {type(error).__name__}: {str(error)[:80]}", flush=True)
                continue
            for rule in RULES:
                plan = rule(plan)
            ordered = order_joins(plan, statistics)
            before, after = summed_join_rows(plan, statistics), summed_join_rows(ordered, statistics)
            changed = ordered is not plan
            counts[changed] = counts.get(changed, 0) + 1
            line = [f"{'CHANGED' if changed else 'same   '} {before:14,.0f} -> {after:14,.0f}"]
            print(f"{workload} q{n:<3} " + " | ".join(line), flush=True)
    print(f"{counts.get(True, 0)} plans changed, {counts.get(False, 0)} kept")


if __name__ == "__main__":
    main()
