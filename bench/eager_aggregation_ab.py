"""A/B one SQL text: the planner with and without eager aggregation, and DuckDB, by process CPU beside wall.

Why: on a loaded shared machine wall times swing; the process CPU (user+sys) of each run is steadier. Two
Sessions plan the text with the rule (``gpu_engine.sql.eager_aggregation``) on and off; each answer is
checked against DuckDB, both wait for their compiled tier, then ``--runs`` interleaved runs (DuckDB, off,
on) give medians. TPC-H texts are the specification's (``tpch.spec_sql``), TPC-DS texts ``bench.tpcds``'s.

    python bench/eager_aggregation_ab.py tpch 10 --sf 1 --runs 5
    python bench/eager_aggregation_ab.py tpcds 4 --sf 1 --runs 3
"""
import argparse
import os
import statistics
import sys

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.tpcds_cpu import measure  # noqa: E402  (process CPU beside wall, one definition for the benches)


def main():
    """Run the A/B and print each side's medians."""
    p = argparse.ArgumentParser()
    p.add_argument("workload")
    p.add_argument("query", type=int)
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--drivers", type=int, default=2)
    a = p.parse_args()
    import gpu_engine.sql.planner as planner_module
    from gpu_engine import Session
    from gpu_engine.codegen.background_compiles import background_compiler
    from duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch
    original = planner_module.eager_aggregated
    state = {"on": True}

    def switch(planner, select, members, pending, needed):
        if state["on"]:
            return original(planner, select, members, pending, needed)
        return members, select

    planner_module.eager_aggregated = switch
    if a.workload == "tpch":
        from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
        from gpu_engine.plans import tpch
        from gpu_engine.sql.ordering import order_key_columns
        folder = ensure_tpch(a.sf, None, progress=False)
        sql = tpch.spec_sql(a.query)
        register = register_tpch

        def check(actual, expected):
            return rows_mismatch(actual, expected, ordered=order_key_columns(sql))
    else:
        from bench.tpcds import query_text, result_mismatch
        from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
        folder = ensure_tpcds(a.sf, None)
        sql = query_text(a.query)
        register = register_tpcds

        def check(actual, expected):
            return result_mismatch(actual, expected, sql, rows_mismatch)
    sessions = {}
    for mode in ("without", "with"):
        session = Session(device="cpu", drivers=a.drivers)
        register(session, folder)
        sessions[mode] = session
    duck = duckdb_connection(folder, threads=2)
    expected = duckdb_table(duck, sql)
    compiler = background_compiler()
    for mode, session in sessions.items():
        state["on"] = mode == "with"
        actual = session.sql(sql)
        problem = check(actual, expected)
        from gpu_engine.plans.nodes import AggregationNode, walk_plan
        pre = sum(1 for n in walk_plan(session.sql_plan(sql)) if isinstance(n, AggregationNode)
                  and any(a.startswith("$eager") for a in n.aggregate_names))
        print(f"{mode}: first run {'equal' if problem is None else 'MISMATCH ' + problem[:200]}; "
              f"pre-aggregations in the whole text's plan: {pre}", flush=True)
        compiler.wait_idle(timeout=300)
        session.sql(sql)
        compiler.wait_idle(timeout=300)
    samples = {k: ([], []) for k in ("duckdb", "without", "with")}
    for _ in range(a.runs):
        _, w, c = measure(lambda: duckdb_table(duck, sql))
        samples["duckdb"][0].append(w); samples["duckdb"][1].append(c)
        for mode, session in sessions.items():
            state["on"] = mode == "with"
            _, w, c = measure(lambda: session.sql(sql))
            samples[mode][0].append(w); samples[mode][1].append(c)
    m = statistics.median
    duck_cpu = m(samples["duckdb"][1])
    print(f"{a.workload} q{a.query} sf{a.sf:g} drivers {a.drivers}, {a.runs} interleaved runs, "
          f"load {os.getloadavg()[0]:.1f}")
    for k, (w, c) in samples.items():
        print(f"  {k:8s} cpu median {m(c)*1000:8.1f} ms (x{m(c)/duck_cpu:5.2f} DuckDB)  wall median {m(w)*1000:8.1f} ms"
              f"  cpu {' '.join(f'{x*1000:.0f}' for x in c)}")


if __name__ == "__main__":
    main()
