"""What a new Spark executor worker pays before and during its first fragment, in process CPU, without Spark.

Issue 29 item 4: Spark's Python workers are new processes (forked from
``pyspark.daemon``, which has imported PySpark only), so each pays the engine's
start-up on its first task: importing what unpickling a fragment function
needs, then its first fragment (plan from JSON, operators, static and
generated kernels loaded from numba's cache or compiled). This bench builds
TPC-H Q1's partial-aggregation fragment over ``lineitem`` (what a Spark stage
runs per partition), pickles it as Spark ships it, and in a new process
(``--processes`` of them, one after another) measures, in CPU seconds (user +
sys, all threads):

1. ``pyspark.sql``, ``pyspark.worker`` and ``pyarrow`` imported (what the worker holds anyway);
2. unpickling the fragment function (the engine's imports);
3. the fragment over ``--batches`` Arrow batches of the table: first call, then ``--calls`` more calls
   (the worker kept, as ``spark.python.worker.reuse`` does).

Every process reads bytecode (``.pyc``) as an installed worker does: with ``PYTHONDONTWRITEBYTECODE`` set
(this project's shared machine sets it) each new process compiled ~100 of the engine's modules from source,
which an executor on an installed package does not; the children write and read bytecode under a
``PYTHONPYCACHEPREFIX`` of their own, after one untimed process that fills it (and loads the kernels once).
``--empty-kernel-cache`` gives each process a new, empty ``GPU_ENGINE_CACHE_DIR`` (a machine whose generated
kernels were never compiled); by default the engine's cache is used as it is (a worker after the first on a
machine). Run from the repository root::

    python -m bench.executor_start_up --sf 0.1 --processes 3
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

__all__ = ["main"]

_CHILD = """
import json, pickle, resource, sys, time

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

out = {}
mark = cpu()
import pyspark.sql, pyspark.worker, pyarrow, pyarrow.parquet as pq
out["pyspark and pyarrow imports"] = cpu() - mark
modules = len(sys.modules)
mark = cpu()
function = pickle.loads(open(sys.argv[1], "rb").read())
out["unpickling the fragment (engine imports)"] = cpu() - mark
out["modules the engine added"] = len(sys.modules) - modules
batches = pq.read_table(sys.argv[2]).to_batches(max_chunksize=int(sys.argv[3]))
for call in range(int(sys.argv[4]) + 1):
    mark = cpu()
    rows = sum(b.num_rows for b in function(iter(batches)))
    out["first fragment" if call == 0 else f"call {call + 1}"] = cpu() - mark
print(json.dumps(out))
"""


def _fragment(sf: float):
    from gpu_engine.connectors.tpch_data import ensure_tpch
    from gpu_engine.plans import PlanBuilder
    from gpu_engine.spark import fragment_function
    import pyarrow.parquet as pq

    path = ensure_tpch(sf, tables=["lineitem"]) / "lineitem.parquet"
    columns = ["l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount", "l_tax",
               "l_shipdate"]
    schema = pq.read_schema(path)
    builder = PlanBuilder({"lineitem": schema}).table_scan("lineitem", columns=columns)
    plan = (builder.filter("l_shipdate <= DATE '1998-09-02'")
            .partial_aggregation(["l_returnflag", "l_linestatus"],
                                 ["sum(l_quantity) AS sum_qty", "sum(l_extendedprice) AS sum_base_price",
                                  "sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price",
                                  "sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge",
                                  "avg(l_discount) AS avg_disc", "count(*) AS count_order"])
            .plan())
    return fragment_function(plan, device="cpu"), path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2, help="calls after the first in each process")
    parser.add_argument("--batch-rows", type=int, default=10_000, help="rows per Arrow batch (Spark's default)")
    parser.add_argument("--empty-kernel-cache", action="store_true")
    args = parser.parse_args(argv)
    function, path = _fragment(args.sf)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        pickled = Path(folder) / "fragment.pickle"
        pickled.write_bytes(pickle.dumps(function))
        for number in range(-1, args.processes):  # -1: untimed, fills the bytecode folder
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "bytecode")
            if args.empty_kernel_cache:
                env["GPU_ENGINE_CACHE_DIR"] = str(Path(folder) / f"kernels{number}")
            done = subprocess.run([sys.executable, "-c", _CHILD, str(pickled), str(path), str(args.batch_rows),
                                   str(args.calls)], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                                  check=False)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            if number >= 0:
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    load = os.getloadavg()[0]
    print(f"# A new executor worker's start-up, TPC-H Q1 partial fragment, sf{args.sf:g}, cpu, "
          f"{args.processes} processes, {'empty' if args.empty_kernel_cache else 'the engine'}'s kernel cache, "
          f"load {load:.1f}\n")
    print("| step | CPU ms (median) | each process |\n|---|---|---|")
    for key in results[0]:
        values = [r[key] for r in results]
        if key.startswith("modules"):
            print(f"| {key} | {statistics.median(values):.0f} | {values} |")
        else:
            print(f"| {key} | {statistics.median(values) * 1000:.0f} | {[round(v * 1000) for v in values]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
