"""Measure what the optimizer rules (gpu_engine.optimizer) add to planning: TPC-H's 22 and TPC-DS's 99 texts.

Why: :func:`gpu_engine.optimizer.optimize_plan` runs once per new plan object
(inside ``prepare_plan``, whose result a Session keeps per plan object), so its
cost adds to every first run of a text, beside the SQL planning that
``bench/planning_costs.py`` measures. This plans each text once (plan cache
off), then times, in one process and alternating, ``--rounds`` passes of
``optimize_plan`` over all plans and of ``Session.sql_plan`` over all texts,
and prints each side's process CPU (user + system, median over the rounds)
and the ratio. Run from the repository root::

    python -m bench.optimizer_costs --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main"]


def _cpu() -> float:
    return time.process_time()  # user + system of this process, finer than os.times' ticks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.01)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workloads", default="tpch,tpcds")
    args = parser.parse_args(argv)
    from bench.first_process_costs import _workload
    from gpu_engine import Session
    from gpu_engine.optimizer import optimize_plan
    from gpu_engine.sql.plan_cache import PlanCache

    for name in args.workloads.split(","):
        texts, register = _workload(name, args.sf)
        session = Session(device="cpu", drivers=2)
        register(session)
        session.plan_cache = PlanCache(entries=0)
        plans = [session.sql_plan(text) for text in texts.values()]
        optimizing, planning = [], []
        for _ in range(args.rounds):
            start = _cpu()
            for plan in plans:
                optimize_plan(plan)
            optimizing.append(_cpu() - start)
            start = _cpu()
            for text in texts.values():
                session.sql_plan(text)
            planning.append(_cpu() - start)
        rules, sql = statistics.median(optimizing), statistics.median(planning)
        print(f"{name}: {len(plans)} plans; optimize_plan {rules * 1000:.1f} ms CPU, sql_plan {sql * 1000:.1f} ms "
              f"CPU (median of {args.rounds}); the rules add {100 * rules / sql:.1f}% "
              f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
