"""Time the creation of a Task's operators (thread CPU), per TPC-DS query: the first Task of a plan, and later ones.

Why: ``Task.start`` creates every driver's operators one after another on the
caller's thread before any driver runs, so what an operator derives from its
plan node (a fused aggregation's program and slot layout, a filter's or
projection's kernel program tried on the generator) is serial time in every
query's wall. Those are made once per node object now
(:class:`gpu_engine.exec.made_once.MadePerNode`): the first Task of a plan
makes them, later runs of the plan the Session kept find them. Thread CPU
(``time.thread_time``) of this thread only: steady on a loaded machine.

    python bench/operator_setup_costs.py --sf 1 --queries 5,12,62,66,86
"""
from __future__ import annotations

import argparse
import collections
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    """Print per query the operators' thread CPU for the first Task of its plan and the median of later ones."""
    p = argparse.ArgumentParser()
    p.add_argument("--sf", type=float, default=0.01)
    p.add_argument("--queries", default="5,12,62,66,86")
    p.add_argument("--drivers", type=int, default=2)
    p.add_argument("--runs", type=int, default=20)
    a = p.parse_args()
    from bench.tpcds import query_text
    from gpu_engine import Session
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    from gpu_engine.exec.local_planner import make_operator, plan_pipelines
    from gpu_engine.exec.operator import OperatorCtx
    from gpu_engine.planning.prepare import prepare_plan

    session = Session(device="cpu", drivers=a.drivers, compile_mode="lowest")  # nothing compiles: operators only
    register_tpcds(session, ensure_tpcds(a.sf, None))
    print(f"sf {a.sf:g}, {a.drivers} drivers, load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for number in (int(q) for q in a.queries.split(",")):
        session.sql(query_text(number))  # a Task to hand the operators
        task = session.last_task
        plan = prepare_plan(session.sql_plan(query_text(number)), session.device, a.drivers, session.config).plan
        times, by_kind = [], collections.Counter()
        for run in range(a.runs + 1):
            factories = plan_pipelines(plan, a.drivers)  # as Task.start: new pipeline items, the same nodes
            spent = 0.0
            for factory in factories:
                for driver in range(factory.num_drivers):
                    for index, item in enumerate(factory.items):
                        began = time.thread_time()
                        operator = make_operator(item, OperatorCtx(task, factory.pipeline_id, driver, index,
                                                                   factory.num_drivers))
                        took = time.thread_time() - began
                        spent += took
                        if run == 0:
                            by_kind[type(operator).__name__] += took
                        operator.close()
            times.append(spent)
        later = sorted(times[1:])[len(times[1:]) // 2]
        kinds = ", ".join(f"{kind} {seconds * 1000:.1f}" for kind, seconds in by_kind.most_common(3))
        print(f"q{number}: first Task {times[0] * 1000:.2f} ms ({kinds}), later Tasks {later * 1000:.2f} ms", flush=True)
        del plan
        gc.collect()


if __name__ == "__main__":
    main()
