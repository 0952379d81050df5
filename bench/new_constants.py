"""Time a query's first run with each new constant: does changing a literal wait for the compiler?

Runs in a new process with an empty generated-kernel cache (``GPU_ENGINE_CACHE_DIR`` pointing at a new
folder; numba's cache of the static kernels is kept): a query template with its first constants, then
with new constants, then the last one again (a repeat), and prints each run's wall time as JSON.

    python -m bench.new_constants --sf 0.1 --device cpu --drivers 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

TEMPLATES = {
    "quantity": ("SELECT count(*) FROM lineitem WHERE l_quantity > {0}", [20, 21, 22]),
    "q6": ("SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem "
           "WHERE l_shipdate >= DATE '{0}-01-01' AND l_shipdate < DATE '{1}-01-01' "
           "AND l_discount BETWEEN {2} - 0.01 AND {2} + 0.01 AND l_quantity < {3}",
           [(1994, 1995, 0.06, 24), (1995, 1996, 0.05, 25), (1996, 1997, 0.07, 23)]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--data-dir", default=None, help="root of the TPC-H cache (default $GPU_ENGINE_DATA/tpch)")
    parser.add_argument("--template", choices=sorted(TEMPLATES), default="quantity")
    args = parser.parse_args()
    os.environ["GPU_ENGINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpe-new-constants-")  # no generated kernel yet

    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    folder = ensure_tpch(args.sf, args.data_dir, progress=False)
    session = Session(device=args.device, drivers=args.drivers)
    register_tpch(session, folder)
    template, constants = TEMPLATES[args.template]
    runs = []
    for label, values in [("first", constants[0])] + [("new", c) for c in constants[1:]] + [("repeat", constants[-1])]:
        sql = template.format(*(values if isinstance(values, tuple) else (values,)))
        started = time.perf_counter()
        session.sql(sql)
        runs.append({"run": label, "constants": values, "seconds": round(time.perf_counter() - started, 4)})
    print(json.dumps({"sf": args.sf, "device": args.device, "drivers": args.drivers, "template": args.template,
                      "runs": runs}))


if __name__ == "__main__":
    main()
