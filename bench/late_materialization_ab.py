"""A/B one TPC-DS text: join-filtered scans with and without late materialization, by process CPU beside wall.

Why: on a loaded shared machine wall times swing; the process CPU (user+sys) of each run is steadier. One Session
runs the text; late materialization (``gpu_engine.connectors.late_materialization``) is switched off (the piece
read whole, then filtered) and on between interleaved runs; both answers are checked against DuckDB first, the
compiled tier is waited for, then ``--runs`` interleaved runs give medians, with the scans' counts of the last run.

    python bench/late_materialization_ab.py 7 --sf 1 --runs 5
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

COUNTS = ("decode_seconds", "dynamic_filter_rows_dropped", "late_materialized_rows_skipped",
          "late_materialized_row_groups_skipped")


def main():
    """Run the A/B and print each side's medians."""
    p = argparse.ArgumentParser()
    p.add_argument("query", type=int)
    p.add_argument("--sf", type=float, default=1)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--drivers", type=int, default=2)
    a = p.parse_args()
    import gpu_engine.operators.table_scan as scan_module
    from bench.tpcds import query_text, result_mismatch
    from duckdb_reference import duckdb_connection, duckdb_table, rows_mismatch
    from gpu_engine import Session
    from gpu_engine.codegen.background_compiles import background_compiler
    from gpu_engine.connectors.tpcds_data import ensure_tpcds, register_tpcds
    late = scan_module.read_filtered_piece
    modes = {"without": lambda *args, **kwargs: None, "with": late}
    folder = ensure_tpcds(a.sf, None)
    sql = query_text(a.query)
    session = Session(device="cpu", drivers=a.drivers)
    register_tpcds(session, folder)
    duck = duckdb_connection(folder, threads=2)
    expected = duckdb_table(duck, sql)
    compiler = background_compiler()
    for mode, read in modes.items():
        scan_module.read_filtered_piece = read
        problem = result_mismatch(session.sql(sql), expected, sql, rows_mismatch)
        print(f"{mode}: {'equal' if problem is None else 'MISMATCH ' + problem[:200]}", flush=True)
        compiler.wait_idle(timeout=300)
        session.sql(sql)
    compiler.wait_idle(timeout=300)
    samples = {k: ([], []) for k in ("duckdb", *modes)}
    for _ in range(a.runs):
        _, w, c = measure(lambda: duckdb_table(duck, sql))
        samples["duckdb"][0].append(w); samples["duckdb"][1].append(c)
        for mode, read in modes.items():
            scan_module.read_filtered_piece = read
            _, w, c = measure(lambda: session.sql(sql))
            samples[mode][0].append(w); samples[mode][1].append(c)
    scan_module.read_filtered_piece = late
    m = statistics.median
    duck_cpu = m(samples["duckdb"][1])
    print(f"tpcds q{a.query} sf{a.sf:g} drivers {a.drivers}, {a.runs} interleaved runs, load {os.getloadavg()}")
    for k, (w, c) in samples.items():
        print(f"  {k:8s} cpu median {m(c)*1000:8.1f} ms (x{m(c)/duck_cpu:5.2f} DuckDB)  wall median {m(w)*1000:8.1f} ms"
              f"  cpu {' '.join(f'{x*1000:.0f}' for x in c)}")
    for pipeline in session.last_stats().pipelines:  # the last run's ("with") join-filtered scans
        for stats in pipeline.operators:
            if stats.operator_type == "TableScan" and stats.runtime.get("dynamic_filter_rows_dropped"):
                print("  scan " + ", ".join(f"{name}={stats.runtime.get(name, 0):.4g}" for name in COUNTS))


if __name__ == "__main__":
    main()
