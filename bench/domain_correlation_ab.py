"""Loaded A/B: a subquery correlated by other than column equalities, typed over its domain
(``sql/correlation_domains.py``) against the sqlglot tree's per-domain LEFT join it replaced (the rewrite switched
off in the same process), sides alternating, DuckDB in the same process.

    python -m bench.domain_correlation_ab --sf 0.1 --runs 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

QUERIES = {
    "scalar": "SELECT count(*) AS n, sum(p_retailprice) AS s FROM part p WHERE p_retailprice > "
              "(SELECT avg(p2.p_retailprice) FROM part p2 WHERE p2.p_size < p.p_size)",
    "select": "SELECT p_size, (SELECT count(*) FROM supplier WHERE s_acctbal < p.p_size * 100) AS c "
              "FROM part p ORDER BY p_size LIMIT 5",
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(run):
    wall, cpu = time.perf_counter(), _cpu()
    run()
    return time.perf_counter() - wall, _cpu() - cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    import duckdb

    import gpu_engine.sql.planner as planner
    from gpu_engine import Session
    from gpu_engine.connectors.tpch_data import ensure_tpch, register_tpch
    from gpu_engine.sql.plan_cache import PlanCache

    folder = ensure_tpch(args.sf, progress=False)
    session = Session(device="cpu")
    register_tpch(session, folder)
    session.plan_cache = PlanCache(entries=0)  # each run planned again: the side switched takes effect
    connection = duckdb.connect()
    for table in ("part", "supplier"):
        connection.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{folder}/{table}.parquet')")
    domains = planner.with_correlation_domains
    sides = {"typed": domains, "tree": lambda select, state: select}
    print(f"load {os.getloadavg()[0]:.1f}")
    for name, sql in QUERIES.items():
        times = {side: [] for side in (*sides, "duckdb")}
        for side, rewrite in sides.items():  # warm: plans and kernels
            planner.with_correlation_domains = rewrite
            session.sql(sql)
        for _ in range(args.runs):
            for side, rewrite in sides.items():
                planner.with_correlation_domains = rewrite
                times[side].append(_timed(lambda: session.sql(sql)))
            times["duckdb"].append(_timed(lambda: connection.sql(sql).to_arrow_table()))
        planner.with_correlation_domains = domains
        line = ", ".join(f"{side} {statistics.median(w for w, _ in ts) * 1e3:.0f} ms wall / "
                         f"{statistics.median(c for _, c in ts) * 1e3:.0f} ms cpu" for side, ts in times.items())
        print(f"{name}: {line}")
    print(f"load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
