"""Fuzz correlated scalar subqueries of every shape in every position against DuckDB.

Why: ``sql/correlated_scalar_rows.py`` binds a scalar subquery correlated by column equalities — one aggregate,
rows with ORDER BY ... LIMIT / OFFSET, GROUP BY, HAVING, DISTINCT, a window as its value, QUALIFY — into a typed
ScalarSubquery wherever it stands (SELECT list, WHERE comparison, under OR / NOT / coalesce, an aggregating query,
a window's argument, a GROUP BY key, HAVING, ORDER BY); the optimizer's decorrelation rule joins it. Each seed
draws two tiny tables whose every value may be NULL (and may be empty) and runs SHAPES x POSITIONS; an answer
differing from DuckDB's, or an error where DuckDB answers, is printed (DuckDB's "More than one row" error must be
the engine's too).

    python bench/bound_scalar_fuzz.py --seeds 0:20 [--device cuda-sim] [--correlation domain]

``--correlation domain`` draws, for each shape, a correlation other than column equalities in place of ``u.k =
t.k`` (``u.k < t.k``, ``u.k <> t.k``, BETWEEN, ``u.k = t.k + 1``, ``u.g >= t.g - 2``; beside ``u.k = t.k`` too):
the forms ``sql/correlation_domains.py`` binds over their domain (DuckDB's general decorrelation).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

SHAPES = [
    "SELECT max(w) FROM u WHERE u.k = t.k",
    "SELECT count(*) FROM u WHERE u.k = t.k",
    "SELECT w FROM u WHERE u.k = t.k ORDER BY w NULLS LAST LIMIT 1",
    "SELECT w FROM u WHERE u.k = t.k ORDER BY w DESC NULLS LAST LIMIT 1 OFFSET 1",
    "SELECT sum(w) FROM u WHERE u.k = t.k GROUP BY u.g ORDER BY 1 NULLS LAST LIMIT 1",
    "SELECT count(*) FROM u WHERE u.k = t.k HAVING count(*) > 1",
    "SELECT sum(w) FROM u WHERE u.k = t.k HAVING min(w) > 2",
    "SELECT DISTINCT max(g) FROM u WHERE u.k = t.k LIMIT 2",
    "SELECT count(w) FROM u WHERE u.k = t.k OFFSET 1",
    "SELECT sum(w) OVER (ORDER BY w NULLS FIRST, g) FROM u WHERE u.k = t.k ORDER BY 1 DESC NULLS LAST LIMIT 1",
    "SELECT w FROM u WHERE u.k = t.k QUALIFY row_number() OVER (ORDER BY w NULLS LAST, g) = 1",
    "SELECT max(w) FROM u WHERE u.k = t.k AND u.g = t.g",
]
POSITIONS = [
    "SELECT k, g, v, ({s}) AS x FROM t",
    "SELECT k, g, v FROM t WHERE v > ({s})",
    "SELECT k, g, v FROM t WHERE v < 3 OR v > ({s})",
    "SELECT k, g, v FROM t WHERE NOT (coalesce(({s}), 0) < v)",
    "SELECT k, sum(v) AS s, ({s}) AS x FROM t GROUP BY k, g",
    "SELECT k, v, sum(({s})) OVER (ORDER BY k NULLS FIRST, v NULLS FIRST, g) AS w FROM t",
    "SELECT ({s}) AS x, count(*) AS n FROM t GROUP BY 1",
    "SELECT k, count(*) AS n FROM t GROUP BY k, g HAVING coalesce(({s}), 0) < 5",
    "SELECT k, v FROM t ORDER BY ({s}) NULLS FIRST, k NULLS FIRST, v NULLS FIRST, g NULLS FIRST",
]


#: Correlations other than column equalities, each rejecting a NULL outer value (the domain forms).
DOMAIN_CORRELATIONS = [
    "u.k < t.k", "u.k <> t.k", "u.k BETWEEN t.k AND t.g", "u.k = t.k + 1", "u.g >= t.g - 2",
    "u.k = t.k AND u.g < t.g", "u.w * 2 > t.k + t.g",
]  # (outer columns k and g only: the aggregating positions group by them)

#: Correlations that may hold where an outer value is NULL (split on the outer column: correlation_domains).
NULL_SAFE_CORRELATIONS = [
    "u.k IS NOT DISTINCT FROM t.k", "u.k IS NOT DISTINCT FROM t.k AND u.g < t.g", "u.k IS DISTINCT FROM t.k",
    "u.k = t.k OR (u.k IS NULL AND t.k IS NULL)", "u.k IS NOT DISTINCT FROM t.k AND u.g IS NOT DISTINCT FROM t.g",
    "NOT (u.k IS DISTINCT FROM t.k)", "coalesce(u.k, 0) < coalesce(t.k, 2)",
]


def _table(rng: random.Random, rows: int, columns: str):
    import pyarrow as pa

    return pa.table({c: pa.array([None if rng.random() < 0.2 else rng.randint(0, 4) for _ in range(rows)],
                                 pa.int64()) for c in columns})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:20", help="first:last (exclusive) seeds")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--correlation", choices=("equality", "domain", "null-safe"),
                        default="equality")
    args = parser.parse_args(argv)
    import duckdb

    from duckdb_reference import assert_same_rows, duckdb_table
    from gpu_engine import Session

    first, last = map(int, args.seeds.split(":"))
    bad = total = 0
    for seed in range(first, last):
        rng = random.Random(seed)
        t, u = _table(rng, rng.randint(0, 7), "kgv"), _table(rng, rng.randint(0, 7), "kgw")
        session = Session(device=args.device, drivers=2)
        connection = duckdb.connect()
        for name, table in (("t", t), ("u", u)):
            session.register(name, table)
            connection.register(name, table)
        for shape in SHAPES:
            if args.correlation != "equality":
                shape = shape.replace("u.k = t.k AND u.g = t.g", "u.k = t.k").replace("u.k = t.k", rng.choice(
                    DOMAIN_CORRELATIONS if args.correlation == "domain" else NULL_SAFE_CORRELATIONS))
            for position in POSITIONS:
                sql, total = position.format(s=shape), total + 1
                try:
                    expected, expected_error = duckdb_table(connection, sql), None
                except Exception as error:  # noqa: BLE001 -- DuckDB's own error, compared below
                    expected, expected_error = None, str(error)
                try:
                    got = session.sql(sql)
                except Exception as error:  # noqa: BLE001 -- the engine's error, compared with DuckDB's
                    if not (expected_error and "More than one row" in expected_error and "More than one row" in
                            str(error)):
                        bad += 1
                        print(f"error seed {seed}: {sql}\n  engine: {str(error)[:200]}\n  duckdb: {expected_error}")
                    continue
                if expected_error is not None:
                    bad += 1
                    print(f"answered seed {seed}: {sql}\n  duckdb: {expected_error[:200]}")
                    continue
                try:
                    assert_same_rows(got, expected, ordered=position.startswith("SELECT k, v FROM t ORDER BY"))
                except AssertionError:
                    bad += 1
                    print(f"differs seed {seed}: {sql}")
    print(f"{last - first} seeds x {len(SHAPES) * len(POSITIONS)} queries on {args.device}: {bad} of {total} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
