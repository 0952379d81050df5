"""Planning CPU of texts never planned before, each round in a new process; A/B between source trees.

Why (issue 29): a first run plans its text from scratch, and planning TPC-DS's 99 new texts was most of the
first-run/warm gap. :mod:`bench.planning_costs` plans the texts again in one process, where what the first
text of a kind loaded is paid once; here every round is a new process (imports done and one trivial text
planned first), which plans each text once with ``Session.plan_cache`` keeping nothing, and reports the process
CPU (user + system) of planning them all. ``--trees`` names source trees (copies of the repository's
``gpu_engine``, ``plans`` and ``kernels``, with ``gpu_engine/plans`` and ``gpu_engine/kernels`` linked to the
latter two, or the repository root itself) whose rounds alternate, so both sides see the same load; the
medians, each round and the load average are printed. Run from the repository root::

    python -m bench.new_text_planning --rounds 7
    python -m bench.new_text_planning --trees /tmp/before,. --rounds 9 --workload tpcds --sf 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["main"]

_CHILD = r"""
import json, resource, sys
sys.path.insert(0, {tree!r})
sys.path.insert(1, {repo!r})
from bench.first_process_costs import _workload
from gpu_engine import Session
from gpu_engine.sql.plan_cache import PlanCache
import gpu_engine
assert gpu_engine.__file__.startswith({tree!r}), gpu_engine.__file__
texts, register = _workload({workload!r}, {sf!r})
session = Session(device="cpu", drivers=2)
register(session)
session.plan_cache = PlanCache(entries=0)
session.sql_plan("SELECT 1 AS x")
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
start = cpu()
for text in texts.values():
    session.sql_plan(text)
print(json.dumps({{"cpu": cpu() - start, "texts": len(texts)}}))
"""


def _round(tree: Path, workload: str, sf: float) -> float:
    code = _CHILD.format(tree=str(tree), repo=str(REPO_ROOT), workload=workload, sf=sf)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tree))
    if done.returncode != 0:
        raise RuntimeError(f"planning in {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["cpu"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=".", help="comma-separated source trees (default: this repository)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workload", default="tpcds", choices=("tpcds", "tpch"))
    parser.add_argument("--sf", type=float, default=1.0)
    args = parser.parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    cpu: dict[Path, list[float]] = {tree: [] for tree in trees}
    loads = []
    for number in range(args.rounds):
        order = trees if number % 2 == 0 else list(reversed(trees))
        for tree in order:
            cpu[tree].append(_round(tree, args.workload, args.sf))
        loads.append(os.getloadavg()[0])
        print(f"round {number + 1}: " + ", ".join(f"{tree.name or tree}: {cpu[tree][-1]:.3f} s" for tree in trees)
              + f" (load {loads[-1]:.1f})", flush=True)
    base = statistics.median(cpu[trees[0]])
    for tree in trees:
        median = statistics.median(cpu[tree])
        change = f" ({(median / base - 1) * 100:+.1f}% against {trees[0]})" if tree != trees[0] else ""
        print(f"{tree}: median {median:.3f} s CPU over {args.rounds} rounds "
              f"(min {min(cpu[tree]):.3f}, max {max(cpu[tree]):.3f}){change}")
    print(f"load average (1 min) during the rounds: {min(loads):.1f}-{max(loads):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
