"""GROUP BY over few int64 keys drawn from a wide range: the plan with the key's sampled count (partial step kept)
against the range's count alone (partial step refused), DuckDB in the process (issue 31; intgroups, stop 54).

    .venv/bin/python -m bench.intgroups_ab --rounds 7

The data and query are bench/string_keys_ab.py's ``group`` case (``int`` keys). "before" plans with
:data:`gpu_engine.optimizer.partial_steps.FEW_VALUES_SHARE` below 0 and
``WIDE_KEY_SAMPLE_MIN_ROWS`` infinite (every sampled count dropped, no file sampled: the range's count stands, the
plan before the change), "after" as the tree plans now; both plans are made once, each in its own Session, and run
alternately with DuckDB; every answer is checked against DuckDB's. Process CPU (user+sys) and wall, medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import duckdb

import gpu_engine.optimizer.partial_steps as partial_steps
from bench.run_bench import settle_compiled_tier
from bench.string_keys_ab import GROUP_SQL, _group_tables, _source
from gpu_engine import Session


def _with_share(session, plan, share, call=None):
    """A run of ``plan`` whose optimization (at each execute, from the session's statistics) believes sampled
    counts up to ``share`` of the rows (``call`` instead of the run: an explain under the same choice)."""
    def run():
        kept = partial_steps.FEW_VALUES_SHARE, partial_steps.WIDE_KEY_SAMPLE_MIN_ROWS
        partial_steps.FEW_VALUES_SHARE = share
        partial_steps.WIDE_KEY_SAMPLE_MIN_ROWS = kept[1] if share >= 0 else float("inf")
        try:
            return session.execute(plan) if call is None else call()
        finally:
            partial_steps.FEW_VALUES_SHARE, partial_steps.WIDE_KEY_SAMPLE_MIN_ROWS = kept
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--distinct", type=float, default=100)
    parser.add_argument("--source", default="arrow", choices=["arrow", "pqdict", "pqplain"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--drivers", type=int, default=2)
    args = parser.parse_args()
    n, d = int(args.rows), int(args.distinct)
    table = _group_tables(d, n, 7)["int"]
    src = _source(table, args.source, f"group_int_{d}_{n}_t") if args.source != "arrow" else table
    sql = GROUP_SQL.format(t="t")
    duck = duckdb.connect()
    duck.execute(f"SET threads = {args.drivers}")
    if args.source == "arrow":
        duck.register("t", table)
    else:
        duck.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{src}')")
    expected = duck.sql(sql).fetchall()
    share = partial_steps.FEW_VALUES_SHARE
    runs = {}
    for side in ("before", "after"):
        session = Session(device="cpu", drivers=args.drivers)
        session.register("t", src)
        plan = session.sql_plan(sql)
        run = _with_share(session, plan, share if side == "after" else -1.0)
        got = [tuple(r.values()) for r in run().to_pylist()]
        assert got == expected, (side, got[:3], expected[:3])
        settle_compiled_tier(run)
        explained = []
        _with_share(session, plan, share if side == "after" else -1.0,
                    lambda: explained.append(session.explain(plan, analyze=True)))()
        partial = "PARTIAL [k]" in explained[0]
        print(f"{side}: partial step {'kept' if partial else 'refused'}", flush=True)
        runs[side] = run
    runs["duckdb"] = lambda: duck.sql(sql).fetchall()
    samples = {side: [] for side in runs}
    loads = []
    for r in range(args.rounds):
        for side in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            wall, cpu = time.perf_counter(), time.process_time()
            runs[side]()
            samples[side].append((time.process_time() - cpu, time.perf_counter() - wall))
        loads.append(os.getloadavg()[0])
    print(f"rows {n:,}, {d} keys, {args.source}, {args.drivers} drivers, {args.rounds} rounds, "
          f"load {min(loads):.1f}-{max(loads):.1f}")
    for side, values in samples.items():
        cpu = statistics.median(c for c, _ in values) * 1e3
        wall = statistics.median(w for _, w in values) * 1e3
        print(f"  {side:7s} CPU {cpu:6.0f} ms  wall {wall:6.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
