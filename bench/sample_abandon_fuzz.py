"""Random GROUP BYs against DuckDB with PARTIAL steps that give up grouping from their first batch's sample.

Why: ``FusedAggregation._sample_says_abandon`` decides before a batch runs, from a sample and a prefix of it; the
rows it hands on must make the same answers as grouped ones whatever the keys (a key a row, runs of one key, few
keys, about two rows a key), the aggregates (sums, counts, min/max, CASE sums, count(DISTINCT)), the filters in
the fused stretch, NULL keys, batch sizes and splits. The sizes that let the decision fire are lowered
(``_EARLY_ABANDON_MIN_ROWS`` 2048, ``partial_aggregation_abandon_rows`` 4096-20000) and the optimizer's
partial-step refusal is off, so the PARTIAL steps exist and decide; each case prints how many steps gave up.

    python -m bench.sample_abandon_fuzz --seed 3 --cases 16
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

SQLS = ["SELECT a, s, sum(y) AS sy, count(x) AS cx, min(y) AS mn FROM t GROUP BY a, s",
        "SELECT b, count(DISTINCT a) AS d FROM t GROUP BY b",
        "SELECT s, b, sum(CASE WHEN y > 0 THEN 1 ELSE 0 END) AS pos, avg(x) AS ax FROM t WHERE s NOT LIKE 's00%' "
        "GROUP BY s, b",
        "SELECT a, max(x) AS mx, count(*) AS n FROM t WHERE y <> 3 GROUP BY a"]


def _table(rng: random.Random, rows: int, kind: str):
    import pyarrow as pa

    if kind == "distinct":
        keys = list(range(rows))
        rng.shuffle(keys)
    elif kind == "runs":
        run = rng.choice([2, 3, 8])
        keys = [i // run for i in range(rows)]
    elif kind == "few":
        keys = [rng.randrange(50) for _ in range(rows)]
    else:
        keys = [rng.randrange(rows // 2) for _ in range(rows)]
    keys = [None if rng.random() < 0.01 else v for v in keys]
    return pa.table({
        "a": pa.array(keys, pa.int64()),
        "s": pa.array([None if v is None else f"s{v % 997:04d}-{v // 997}" for v in keys]),
        "b": pa.array([rng.randrange(7) for _ in range(rows)], pa.int32()),
        "x": pa.array([rng.random() * 100 if rng.random() > 0.05 else None for _ in range(rows)], pa.float64()),
        "y": pa.array([rng.randrange(-50, 50) for _ in range(rows)], pa.int64())})


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cases", type=int, default=16)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    import gpu_engine.operators.fused_aggregation as fused
    import gpu_engine.optimizer as optimizer
    from duckdb_reference import duckdb_rows, rows_mismatch, session_with_tables
    from gpu_engine.optimizer.partial_steps import choose_partial_steps

    fused._EARLY_ABANDON_MIN_ROWS = 2048
    optimizer.ESTIMATE_RULES = tuple(r for r in optimizer.ESTIMATE_RULES if r is not choose_partial_steps)
    rng = random.Random(a.seed)
    wrong = fired_total = 0
    for case in range(a.cases):
        rows = rng.choice([6000, 20000, 50000])
        kind = rng.choice(["distinct", "runs", "few", "half"])
        table = _table(rng, rows, kind)
        sql = rng.choice(SQLS)
        batch = rng.choice([rows // 4, rows // 2, rows])
        session = session_with_tables({"t": table}, splits=rng.choice([1, 2, 4]), device=a.device, drivers=2,
                                      batch_rows=batch, compile_mode="inline",
                                      partial_aggregation_abandon_rows=rng.choice([4096, 8192, 20000]))
        try:
            result = session.sql(sql)
            fired = sum(operator.runtime.get("partial_aggregation_abandoned_from_sample", 0)
                        for operators in session.last_stats().operator_stats_by_node().values()
                        for operator in operators)
        finally:
            session.close()
        fired_total += fired
        mismatch = rows_mismatch(result, duckdb_rows(sql, t=table))
        wrong += mismatch is not None
        print(f"{case:3d} rows {rows:6d} keys {kind:8s} batch {batch:6d} gave up {fired}  "
              f"{'equal' if mismatch is None else 'WRONG ' + mismatch[:300]}  | {sql[:60]}", flush=True)
    print(f"{a.cases} cases, {wrong} wrong, {fired_total} PARTIAL steps gave up from their sample")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
