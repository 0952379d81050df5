"""A/B in one process: radix-partitioned aggregation against the one huge-page slot table, DuckDB beside them.

Two Sessions on the same registered Arrow tables, ``radix_aggregation_min_groups`` unset (side ``table``: one
slot table a driver, advised huge pages from 32 MiB) and set to ``--min-groups`` (side ``radix``, default 1: every
grouped step of fixed-width keys is partitioned; ``FusedAggregation._run_radix``). The questions: db-benchmark's
q10 (six keys, ~all groups distinct: string keys never partition, so both sides run the one table), an integer-key
GROUP BY of N rows in about N groups for each ``--int-groups`` (one SINGLE step: its groups estimated before it
runs) and of 4N rows in N groups, in runs of one key, for each ``--repeated-groups`` (a FINAL step after a
PARTIAL step that keeps grouping: it switches to partitions at run time). Each round runs every side once per question, the sides' order
alternating between rounds; CPU = process user+sys per run (``time.process_time``); medians; answers checked
against DuckDB's once (sorted, columnar) and the partitioned side's runtime statistics checked (it partitioned).
Usage::

    python -m bench.radix_engine_ab --dbbench-rows 1e7 --int-groups 1e6 3e6 1e7 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _cpu() -> float:
    return time.process_time()  # user+sys of every thread, clock_gettime's resolution (os.times: 10 ms)


def _radix_partitions(session) -> int:
    return sum(operator.runtime.get("radix_partitions", 0) for pipeline in session.last_stats().pipelines
               for operator in pipeline.operators)


def _radix_switched(session) -> bool:
    """Whether a step switched to partitions at run time (its one table passed the setting)."""
    return any(operator.runtime.get("radix_switched_at_groups") for pipeline in session.last_stats().pipelines
               for operator in pipeline.operators)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dbbench-rows", type=float, default=1e7, help="0: no db-benchmark q10")
    parser.add_argument("--int-groups", type=float, nargs="*", default=[1e6, 3e6, 1e7])
    parser.add_argument("--repeated-groups", type=float, nargs="*", default=[],
                        help="GROUP BYs of 4 rows a group, in runs of one key (as lineitem's orders): the PARTIAL "
                             "step keeps grouping, so the FINAL step's groups are unknown until it runs and it "
                             "switches to partitions at run time")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--drivers", type=int, default=2)
    parser.add_argument("--min-groups", type=int, default=1, help="the radix side's radix_aggregation_min_groups")
    args = parser.parse_args()

    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.dbbench import QUESTIONS, ensure_groupby
    from bench.run_bench import settle_compiled_tier
    from bench.run_dbbench import columnar_mismatch
    from gpu_engine import Session

    questions: dict[str, tuple[str, str]] = {}  # name -> (table, sql)
    tables: dict[str, pa.Table] = {}
    if args.dbbench_rows:
        tables["x"] = pq.read_table(ensure_groupby(int(args.dbbench_rows), 100, 0, False, None))
        questions["q10"] = ("x", QUESTIONS["q10"])
    rng = np.random.default_rng(7)
    for g in args.int_groups:
        groups = int(g)
        name = f"int{groups:.0e}".replace("+0", "").replace("+", "")
        keys = rng.permutation(groups).astype(np.int64) * 7 + 3
        tables[name] = pa.table({"k": keys, "v": rng.normal(0, 1, groups)})
        questions[name] = (name, f"SELECT k, sum(v) AS s, count(*) AS n FROM {name} GROUP BY k")
    for g in args.repeated_groups:
        groups = int(g)
        name = f"rep{groups:.0e}".replace("+0", "").replace("+", "")
        keys = np.repeat(rng.permutation(groups).astype(np.int64) * 7 + 3, 4)  # runs of 4, as lineitem's orders
        tables[name] = pa.table({"k": keys, "v": rng.normal(0, 1, keys.shape[0])})
        questions[name] = (name, f"SELECT k, sum(v) AS s, count(*) AS n FROM {name} GROUP BY k")
    sessions = {"table": Session(device="cpu", drivers=args.drivers, radix_aggregation_min_groups=None),
                "radix": Session(device="cpu", drivers=args.drivers, radix_aggregation_min_groups=args.min_groups)}
    duck = duckdb.connect()
    duck.execute(f"SET threads = {args.drivers}")
    for name, table in tables.items():
        for session in sessions.values():
            session.register(name, table)
        duck.register(f"{name}_source", table)
        duck.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_source")
    print(f"load before {os.getloadavg()}", flush=True)
    sides = {side: (lambda sql, s=session: s.sql(sql)) for side, session in sessions.items()}
    sides["duckdb"] = lambda sql: duck.sql(sql).to_arrow_table()
    for question, (_, sql) in questions.items():  # warm: compile, fill the recyclers; check the answers
        expected = sides["duckdb"](sql)
        for side in ("table", "radix"):
            settle_compiled_tier(lambda: sides[side](sql))
            answer = sides[side](sql)
            problem = columnar_mismatch(answer, expected)
            parts = _radix_partitions(sessions[side])
            print(f"{question} {side}: {'equal' if problem is None else problem.splitlines()[0]}, "
                  f"{answer.num_rows} rows, radix partitions {parts}"
                  f"{' (switched at run time)' if _radix_switched(sessions[side]) else ''}", flush=True)
            if problem is not None or (side == "table" and parts > 0):
                sys.exit(f"{question} {side}: wrong answer or path ({problem}, {parts} partitions)")
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    loads = []
    for round_number in range(args.rounds):
        order = ["table", "radix", "duckdb"] if round_number % 2 == 0 else ["radix", "table", "duckdb"]
        for question, (_, sql) in questions.items():
            for side in order:
                wall, cpu = time.perf_counter(), _cpu()
                sides[side](sql)
                samples.setdefault((question, side), []).append((time.perf_counter() - wall, _cpu() - cpu))
                print(f"  {question} {side}: CPU {samples[(question, side)][-1][1]:.3f} s, wall "
                      f"{samples[(question, side)][-1][0]:.3f} s", flush=True)  # kept should the run be cut short
        loads.append(os.getloadavg()[0])
        print(f"round {round_number} load {loads[-1]:.1f}", flush=True)
    print(f"\nload per round {' '.join(f'{x:.1f}' for x in loads)}; drivers {args.drivers}; DuckDB threads {args.drivers}")
    print("| question | side | CPU s runs | CPU median | vs table | vs DuckDB CPU | wall median |")
    print("|---|---|---|---|---|---|---|")
    for question in questions:
        base = statistics.median(c for _, c in samples[(question, "table")])
        duck_cpu = statistics.median(c for _, c in samples[(question, "duckdb")])
        for side in ("table", "radix", "duckdb"):
            pairs = samples[(question, side)]
            cpu = statistics.median(c for _, c in pairs)
            wall = statistics.median(w for w, _ in pairs)
            print(f"| {question} | {side} | {' '.join(f'{c:.3f}' for _, c in pairs)} | {cpu:.3f} | "
                  f"{cpu / base:.2f}x | {cpu / duck_cpu:.2f}x | {wall:.3f} |")


if __name__ == "__main__":
    main()
