"""Count the fused and unfused aggregations of the TPC-DS (and TPC-H) texts' plans, and why each stays unfused.

Why: an aggregation the fusion pass refuses runs on the eager operators (one
pass per aggregate per batch; on a GPU, dozens of launches a batch), and the
reasons are only visible one plan at a time. This plans every text at SF 0.01
(plan cache off, 2 drivers, no query runs), applies the fusion pass as
``prepare_plan`` does, and prints the counts of fused and unfused aggregation
nodes and each refusal reason with the queries it hits (a column's name is
replaced by ``X`` so reasons group). Run from the repository root::

    python -m bench.fusion_refusals --workloads tpcds,tpch
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["count_refusals", "main"]


def count_refusals(workload: str, sf: float = 0.01, drivers: int = 2) -> tuple[int, int, dict[str, list[str]]]:
    """Return ``(fused, unfused, reason -> the query of each node it refused)`` over ``workload``'s texts
    (failing texts are skipped)."""
    from bench.first_process_costs import _workload
    from gpu_engine import Session
    from gpu_engine.planning import fusion
    from gpu_engine.planning.prepare import add_local_exchanges
    from gpu_engine.plans.nodes import AggregationNode, FusedAggregationNode, walk_plan
    from gpu_engine.sql.plan_cache import PlanCache

    texts, register = _workload(workload, sf)
    session = Session(device="cpu", drivers=drivers)
    register(session)
    session.plan_cache = PlanCache(entries=0)
    reasons: dict[str, list[str]] = collections.defaultdict(list)
    refused: dict[str, str] = {}  # node id -> reason, for the query being planned
    original = fusion.fusion_refusal

    def recording(node):
        reason = original(node)
        if reason is not None:
            refused[node.id] = re.sub(r"column \S+", "column X", reason)
        return reason

    fused = unfused = 0
    fusion.fusion_refusal = recording
    try:
        for name, text in texts.items():
            refused.clear()
            try:
                plan = fusion.fuse_pipelines(add_local_exchanges(session.sql_plan(text), drivers))
            except Exception as error:  # noqa: BLE001 - a text that fails to plan is reported, not counted
                print(f"{workload}/{name}: {type(error).__name__}: {error}", file=sys.stderr)
                continue
            for node in walk_plan(plan):
                if isinstance(node, FusedAggregationNode):
                    fused += 1
                elif isinstance(node, AggregationNode):
                    unfused += 1
                    reasons[refused.get(node.id, "not offered to the generator")].append(name)
    finally:
        fusion.fusion_refusal = original
    return fused, unfused, reasons


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="tpcds")
    parser.add_argument("--sf", type=float, default=0.01)
    args = parser.parse_args(argv)
    for workload in args.workloads.split(","):
        fused, unfused, reasons = count_refusals(workload, args.sf)
        print(f"{workload}: {fused} fused aggregations, {unfused} unfused")
        for reason, queries in sorted(reasons.items(), key=lambda item: -len(item[1])):
            print(f"  {len(queries):3d} nodes in {len(set(queries)):2d} queries: {reason}  "
                  f"({', '.join(sorted(set(queries)))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
