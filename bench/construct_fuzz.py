"""Fuzz the SQL constructs planned by rewrites into existing plan nodes against DuckDB.

Why: each of these rules turns a construct into joins, aggregations or windows whose NULL semantics must come
out as DuckDB's: row memberships ``(a, b) [NOT] IN (SELECT ...)`` (``sql/tuple_membership.py``), IN / ANY /
ALL over correlated aggregating subqueries (``sql/correlated_aggregate_sets.py``), typed quantified comparisons
and EXISTS over grouping subqueries (``sql/decorrelation.py``, the optimizer's decorrelation rule), ``DISTINCT ON``
(``sql/distinct_on.py``), repeated output names in derived tables (``sql/duplicate_output_names.py``) and
``COLUMNS(...)`` (``sql/columns_expressions.py``). Each seed draws three tiny tables whose every value may be
NULL (and may be empty), and runs the fixed query shapes below on them, alone and mixed with outer joins, CTEs,
UNION ALL and aggregation; prints every query whose answer differs and a count.

    python bench/construct_fuzz.py --seeds 0:100
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

QUERIES = [
    # row memberships: every position, NULLs on both sides
    "SELECT a, b, c, (a, b, c) IN (SELECT x, y, z FROM u) AS m, (a, b) NOT IN (SELECT x, y FROM u) AS n FROM t",
    "SELECT a, b, c FROM t WHERE (a, b, c) NOT IN (SELECT x, y, z FROM u)",
    "SELECT a, b, c FROM t WHERE (c, b) IN (SELECT x, y FROM u) OR a = 1",
    "SELECT t.a, t.b, v.k FROM t LEFT JOIN v ON t.a = v.k WHERE (t.a, t.b) NOT IN (SELECT x, y FROM u)",
    "SELECT t.a, (t.a, t.b) IN (SELECT x, y FROM u) AS m FROM t LEFT JOIN v ON t.a = v.k",
    "SELECT t.a, v.k, (v.k, t.b) NOT IN (SELECT x, y FROM u) AS m FROM t LEFT JOIN v ON t.a = v.k",
    "WITH w AS (SELECT x, y FROM u WHERE z IS NOT NULL) SELECT a, b FROM t WHERE (a, b) IN (SELECT * FROM w) "
    "OR (b, a) NOT IN (SELECT y, x FROM w)",
    "SELECT b, count(*) AS n FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u UNION ALL SELECT k, 'x' FROM v) "
    "GROUP BY b",
    # IN / ANY / ALL over correlated aggregating subqueries
    "SELECT a, b, a IN (SELECT max(x) FROM u WHERE u.y = t.b GROUP BY u.z) AS m, "
    "a NOT IN (SELECT min(x) FROM u WHERE u.y = t.b GROUP BY u.z HAVING count(*) > 1) AS n, "
    "a > ALL (SELECT sum(x) FROM u WHERE u.y = t.b GROUP BY u.z) AS p, "
    "a = ALL (SELECT max(x) FROM u WHERE u.y = t.b GROUP BY u.z) AS q FROM t",
    "SELECT a, b FROM t WHERE a IN (SELECT max(x) FROM u WHERE u.y = t.b GROUP BY u.z)",
    "SELECT a, b FROM t WHERE a NOT IN (SELECT max(x) FROM u WHERE u.y = t.b GROUP BY u.z)",
    "SELECT a, b FROM t WHERE a <= ANY (SELECT count(*) FROM u WHERE u.y = t.b GROUP BY u.z) OR a IS NULL",
    "SELECT a, b, a IN (SELECT count(*) FROM u WHERE u.y = t.b) AS m, "
    "a >= ALL (SELECT max(x) FROM u WHERE u.y = t.b) AS n FROM t",
    "SELECT a, b FROM t WHERE a NOT IN (SELECT count(x) FROM u WHERE u.y = t.b)",
    "SELECT a, b FROM t WHERE a IN (SELECT max(x) FROM u WHERE u.y = t.b AND u.z = t.a GROUP BY u.x)",
    "SELECT a, b, a > ALL (SELECT count(*) FROM u WHERE u.y = t.b AND u.z = t.a GROUP BY u.x) AS m FROM t",
    # typed quantified comparisons (QuantifiedComparison): every position, empty and all-NULL subqueries
    "SELECT a, b, a > ALL (SELECT x FROM u) AS p, a <= ANY (SELECT x FROM u WHERE z = 1) AS q, "
    "a <> ANY (SELECT x FROM u) AS r, a = ALL (SELECT x FROM u WHERE u.y = t.b) AS s, "
    "c < ALL (SELECT x FROM u WHERE u.y = t.b) AS w FROM t",
    "SELECT a, b FROM t WHERE a >= ALL (SELECT x FROM u WHERE u.y = t.b) OR NOT (c < ANY (SELECT z FROM u))",
    "SELECT a, b FROM t WHERE NOT (a + c > ALL (SELECT x FROM u WHERE u.z = t.c))",
    "SELECT a, b FROM t WHERE a < ANY (SELECT x FROM u WHERE u.y = t.b ORDER BY z NULLS FIRST, x LIMIT 1)",
    "SELECT b, count(*) AS n, max(a) > ALL (SELECT x FROM u WHERE u.y = t.b) AS p FROM t GROUP BY b",
    "SELECT b, sum(a) AS s FROM t GROUP BY b HAVING sum(a) <= ANY (SELECT x FROM u) OR b IN (SELECT y FROM u)",
    # EXISTS over a grouping subquery correlated by its GROUP BY columns
    "SELECT a, b FROM t WHERE EXISTS (SELECT y FROM u WHERE u.y = t.b GROUP BY y HAVING count(x) > 0)",
    "SELECT a, b, NOT EXISTS (SELECT y, z FROM u WHERE u.y = t.b AND u.z = t.c GROUP BY y, z HAVING max(x) > 0) "
    "AS e FROM t",
    # DISTINCT ON (compared in order)
    "SELECT DISTINCT ON (t.b) t.b, v.k, t.a FROM t LEFT JOIN v ON t.a = v.k "
    "ORDER BY t.b, v.k DESC NULLS LAST, t.a NULLS FIRST",
    "SELECT DISTINCT ON (b) b, sum(a) AS s FROM t GROUP BY b, a ORDER BY b, s NULLS FIRST",
    # repeated names in derived tables, COLUMNS
    "SELECT s.a, s.b FROM (SELECT * FROM t JOIN u ON t.a = u.x) s",
    "SELECT * FROM (SELECT t.a, t.b, u.y AS b FROM t JOIN u ON t.a = u.x) s WHERE s.b_1 IS NOT NULL OR s.b IS NULL",
    "SELECT max(COLUMNS('^[ab]$')) AS m, count(*) AS n FROM t WHERE (a, b) IN (SELECT x, y FROM u) OR a > 1",
]


def _tables(rng: random.Random) -> dict:
    import pyarrow as pa

    def column(rows, kind, distinct=3):
        values = [rng.choice([None] + list(range(distinct))) for _ in range(rows)]
        if kind == "int":
            return pa.array(values, pa.int64())
        return pa.array([None if v is None else "xyz"[v] for v in values], pa.string())
    n, m, q = rng.randint(0, 9), rng.randint(0, 7), rng.randint(0, 5)
    return {"t": pa.table({"a": column(n, "int"), "b": column(n, "str"), "c": column(n, "int")}),
            "u": pa.table({"x": column(m, "int"), "y": column(m, "str"), "z": column(m, "int", 2)}),
            "v": pa.table({"k": column(q, "int")})}


def main(argv: list[str] | None = None) -> int:
    from duckdb_reference import duckdb_with_tables, queries_differing_from_duckdb, session_with_tables

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0:20", help="first:last (exclusive) seeds")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    first, last = (int(part) for part in args.seeds.split(":"))
    differing = 0
    for seed in range(first, last):
        tables = _tables(random.Random(seed))
        with duckdb_with_tables(tables) as connection:
            session = session_with_tables(tables, device=args.device, fuse=False)
            problems = queries_differing_from_duckdb(session, connection, QUERIES,
                                                     ordered=lambda sql: "DISTINCT ON" in sql)
        for problem in problems:
            print(f"seed {seed}: {problem}")
        differing += len(problems)
    print(f"{last - first} seeds x {len(QUERIES)} queries on {args.device}: {differing} differ from DuckDB")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
