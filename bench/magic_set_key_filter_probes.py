"""Probe the magic set's key-only filters (:mod:`gpu_engine.sql.magic_set_key_filters`) against DuckDB.

Why: the rule moves an outer table's filters onto a correlated aggregate's inner keys; its answers must equal
DuckDB's whatever the filters (IN / NOT IN / EXISTS subqueries, NULL tests, arithmetic over two keys, another
column's filter), the aggregate (COUNT's 0 for an empty group, AVG, MAX) and the comparison. Random queries over
small tables with NULL keys; prints each wrong answer and how many probes the rule moved filters for.

    python -m bench.magic_set_key_filter_probes --probes 150 --seed 7
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

FILTERS = ["o.k1 > {c}", "o.k1 IN (SELECT pk FROM p WHERE w > {d})",
           "o.k1 NOT IN (SELECT pk FROM p WHERE pk IS NOT NULL)", "o.k2 <> {d}", "(o.k1 IS NULL OR o.k1 < {c})",
           "o.k1 + o.k2 = {c}", "coalesce(o.k2, 0) = {d}", "o.s = 'a'", "o.k1 BETWEEN {d} AND {c}",
           "EXISTS (SELECT 1 FROM p WHERE p.pk = o.k1)"]
AGGREGATES = ["sum(q)", "avg(q)", "count(*)", "max(q)", "count(q)"]
COMPARISONS = ["v > ({sub})", "v <= ({sub})", "({sub}) = 0", "({sub}) IS NULL", "v * 2 >= ({sub})"]
CORRELATIONS = ["i.a = o.k1", "i.a = o.k1 AND i.b = o.k2", "i.b = o.k2"]


def main(argv: list[str] | None = None) -> int:
    """Run the probes; return 1 when an answer differs from DuckDB's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=150)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    import pyarrow as pa
    import gpu_engine.sql.decorrelation as decorrelation
    from duckdb_reference import duckdb_table, duckdb_with_tables, rows_mismatch, session_with_tables
    from gpu_engine.errors import PlanError

    rng = random.Random(args.seed)

    def column(rows, low, high, nulls):
        return pa.array([None if rng.random() < nulls else rng.randint(low, high) for _ in range(rows)], pa.int64())

    tables = {
        "o": pa.table({"k1": column(60, 0, 9, 0.1), "k2": column(60, 0, 5, 0.1), "v": column(60, -5, 30, 0.1),
                       "s": pa.array([rng.choice(["a", "b", None]) for _ in range(60)])}),
        "i": pa.table({"a": column(200, 0, 11, 0.1), "b": column(200, 0, 6, 0.1), "q": column(200, -3, 9, 0.1)}),
        "p": pa.table({"pk": column(8, 0, 12, 0.2), "w": column(8, 0, 3, 0.0)}),
    }
    real = decorrelation.key_filters_over_inner_keys
    moved = [0]

    def counted(*arguments):
        result = real(*arguments)
        moved[0] += result is not None
        return result

    decorrelation.key_filters_over_inner_keys = counted
    wrong = probes = 0
    with duckdb_with_tables(tables) as connection:
        session = session_with_tables(tables, device="cpu")
        for _ in range(args.probes):
            c, d = rng.randint(0, 9), rng.randint(0, 5)
            filters = " AND ".join(f.format(c=c, d=d) for f in rng.sample(FILTERS, rng.randint(1, 2)))
            sub = (f"SELECT {rng.choice(AGGREGATES)} FROM i WHERE {rng.choice(CORRELATIONS)}"
                   + (" AND q > 0" if rng.random() < 0.3 else ""))
            sql = f"SELECT k1, k2, v FROM o WHERE {filters} AND {rng.choice(COMPARISONS).format(sub=sub)}"
            try:
                expected = duckdb_table(connection, sql)
            except Exception:  # noqa: BLE001 - a text DuckDB refuses is no probe
                continue
            probes += 1
            try:
                problem = rows_mismatch(session.sql(sql), expected, ordered=False)
            except PlanError:
                continue
            if problem:
                wrong += 1
                print(f"WRONG {sql}: {problem}")
    decorrelation.key_filters_over_inner_keys = real
    print(f"{probes} probes, {wrong} wrong, filters moved onto the inner keys in {moved[0]} magic sets")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
