"""Time a query's runs with new constants against repeats: does changing a literal wait for the compiler?

Issue 29: "the same query with new literal values (ints, decimals of other scales, dates, doubles, IN lists
of other lengths) compiles nothing and runs within 1.2x of a repeat". Runs in a new process with an empty
generated-kernel cache (``GPU_ENGINE_CACHE_DIR`` pointing at a new folder; numba's cache of the static
kernels is kept).

Default (``--rounds 0``): a template with its first constants, then with new constants, then the last one
again (a repeat); prints each run's wall time as JSON (the stop-45 measurement).

``--rounds N``: per template, the first constants run, then the compile process finishes their kernels
(``wait_idle``, then a run, until a run has no batch on the lowest tier: what a user's earlier runs of the
shape leave), then N rounds of one run with constants never
seen before (a new SQL text: no plan of it cached) and one repeat of the previous text, sides alternating
within a round. Each run's wall, process CPU (user + sys), kernels compiled on the drivers, kernel sources
generated and batches on the lowest tier are recorded; the summary gives the medians and new / repeat.

    python -m bench.new_constants --sf 0.1 --template quantity
    python -m bench.new_constants --sf 0.1 --rounds 7 --template all
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import tempfile
import time

TEMPLATES = {
    "quantity": ("SELECT count(*) FROM lineitem WHERE l_quantity > {0}", [20, 21, 22]),
    "q6": ("SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem "
           "WHERE l_shipdate >= DATE '{0}-01-01' AND l_shipdate < DATE '{1}-01-01' "
           "AND l_discount BETWEEN {2} - 0.01 AND {2} + 0.01 AND l_quantity < {3}",
           [(1994, 1995, 0.06, 24), (1995, 1996, 0.05, 25), (1996, 1997, 0.07, 23)]),
}

#: ``--rounds`` templates: each round's constants are a function of the round (0 = the first constants), so
#: every new run's text is new. One per kind of literal the issue names.
ROUND_TEMPLATES = {
    "ints": lambda r: (f"SELECT l_returnflag, count(*) AS c, sum(l_quantity) AS q FROM lineitem "
                       f"WHERE l_quantity > {10 + r} AND l_linenumber <> {1 + r % 7} GROUP BY l_returnflag"),
    # scales 0..4: 2000, 2000.5, 2000.25, 2000.125, 2000.0625, ...
    "decimal_scales": lambda r: (f"SELECT count(*) AS c, sum(l_extendedprice * (1 - l_discount)) AS s FROM lineitem "
                                 f"WHERE l_extendedprice > {2000 + (0.5 ** (r % 5) if r % 5 else 0) + r}"
                                 f" AND l_discount <= {round(0.05 + (r % 3) * 0.005, 4)}"),
    "dates": lambda r: (f"SELECT l_shipmode, count(*) AS c FROM lineitem WHERE l_shipdate >= DATE "
                        f"'{datetime.date(1994, 1, 1) + datetime.timedelta(days=13 * r)}' AND l_receiptdate < DATE "
                        f"'{datetime.date(1995, 1, 1) + datetime.timedelta(days=11 * r)}' GROUP BY l_shipmode"),
    "doubles": lambda r: (f"SELECT count(*) AS c, sum(CAST(l_extendedprice AS DOUBLE)) AS s FROM lineitem "
                          f"WHERE CAST(l_tax AS DOUBLE) * 1.5e0 < {round(0.06 + r * 0.0013, 4)}e0"),
    "in_lists": lambda r: (f"SELECT l_linenumber, count(*) AS c FROM lineitem WHERE l_quantity IN "
                           f"({', '.join(str(1 + (r * 7 + 3 * i) % 50) for i in range(2 + r % 9))}) "
                           f"GROUP BY l_linenumber"),
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _generations() -> int:
    from gpu_engine.codegen.fused_aggregation_kernel import GENERATED_AGGREGATIONS
    from gpu_engine.codegen.fused_filter_kernel import GENERATED_FILTERS
    from gpu_engine.codegen.fused_project_kernel import GENERATED_PROJECTIONS

    return sum(cache.misses for cache in (GENERATED_AGGREGATIONS, GENERATED_FILTERS, GENERATED_PROJECTIONS))


def _timed(session, sql: str) -> dict:
    from bench.first_runs import _lowest_tier_batches

    generations = _generations()
    wall, cpu = time.perf_counter(), _cpu()
    session.sql(sql)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    stats = session.last_stats()
    return {"seconds": round(wall, 4), "cpu_s": round(cpu, 4), "kernels_compiled": stats.kernels_compiled,
            "generated": _generations() - generations, "lowest_tier_batches": _lowest_tier_batches(stats)}


def _rounds(session, name: str, rounds: int) -> dict:
    from gpu_engine.codegen.background_compiles import background_compiler

    make = ROUND_TEMPLATES[name]
    first = _timed(session, make(0))
    for _ in range(5):  # the shape's kernels compiled, as a user's earlier runs leave them: a run that switched
        background_compiler().wait_idle(600)  # tiers may ask for more (a later step's kernels)
        if _timed(session, make(0))["lowest_tier_batches"] == 0:
            break
    new, repeat = [], []
    for r in range(1, rounds + 1):
        for side in (("new", "repeat") if r % 2 else ("repeat", "new")):
            if side == "new":
                new.append(_timed(session, make(r)))
            else:
                repeat.append(_timed(session, make(r - 1)))
    median = {side: {key: statistics.median(run[key] for run in runs) for key in ("seconds", "cpu_s")}
              for side, runs in (("new", new), ("repeat", repeat))}
    return {"template": name, "first": first, "new": new, "repeat": repeat, "median": median,
            "new_over_repeat_wall": median["new"]["seconds"] / median["repeat"]["seconds"],
            "new_over_repeat_cpu": median["new"]["cpu_s"] / median["repeat"]["cpu_s"],
            "compiled_on_drivers_new": sum(run["kernels_compiled"] for run in new),
            "generated_new": sum(run["generated"] for run in new),
            "lowest_tier_batches_new": sum(run["lowest_tier_batches"] for run in new)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--data-dir", default=None, help="root of the TPC-H cache (default $GPU_ENGINE_DATA/tpch)")
    parser.add_argument("--template", default=None,
                        help=f"one of {sorted(TEMPLATES)} (default quantity); with --rounds one of "
                             f"{sorted(ROUND_TEMPLATES)} or all (default)")
    parser.add_argument("--rounds", type=int, default=0, help="new / repeat rounds after the kernels compiled")
    args = parser.parse_args()
    os.environ["GPU_ENGINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpe-new-constants-")  # no generated kernel yet

    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch

    folder = ensure_tpch(args.sf, args.data_dir, progress=False)
    session = Session(device=args.device, drivers=args.drivers)
    register_tpch(session, folder)
    if args.rounds:
        names = list(ROUND_TEMPLATES) if args.template in (None, "all") else [args.template]
        for name in names:
            result = _rounds(session, name, args.rounds)
            print(json.dumps({"sf": args.sf, "device": args.device, "drivers": args.drivers,
                              "load_average": os.getloadavg()[0], **result}), flush=True)
        return
    template, constants = TEMPLATES[args.template or "quantity"]
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
