"""Random EXISTS / IN predicates combined by AND / OR / NOT in a WHERE, against DuckDB (the typed mark joins).

Why: a WHERE conjunct combining subquery predicates is planned as one Filter of typed Exists / InSubquery that
the optimizer's decorrelation rule makes mark joins (NULL-aware for IN); each predicate must be bound to its own
subquery and keep SQL's three values under NOT. Trees of depth 3 over the small tables of
``tests/optimizer/subquery_tables.py`` (NULL keys on both sides, an empty table, int32 against int64 keys):
correlated and uncorrelated EXISTS / IN / NOT IN, plain comparisons and IS NULL tests. A text DuckDB refuses is
skipped; an engine error or a different multiset of rows is reported.

    python -m bench.mark_join_fuzz --seed 3 --queries 2000 [--device cuda-sim] [--place select|case] [--domain]

``--place select`` puts each tree in the SELECT list as a value (``SELECT k, v, <tree> AS f``: NULL is an answer
there), ``--place case`` inside a WHERE expression (``CASE WHEN <tree> THEN ... ELSE ... END``, ``coalesce(<tree>,
...)``, ``(<tree>) IS NULL``): typed predicates of the Project / of the Filter inside an expression.

``--scalars`` adds scalar subqueries (correlated by equalities, uncorrelated) beside the predicates: one typed Filter
holds both, the rule's mark joins and joins (``c > (SELECT ...) OR EXISTS (...)``).

``--domain`` adds EXISTS / IN / NOT IN correlated without a column equality (``u.w < t.v``, ``u.k <> t.k``,
BETWEEN), which ``sql/correlation_domains.py`` binds over the distinct outer values (DuckDB's general
decorrelation): semi, anti and mark joins keyed on the domain.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
for folder in (REPO_ROOT / "tests", REPO_ROOT / "tests" / "optimizer"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

ATOMS = [
    "EXISTS (SELECT * FROM u WHERE u.k = t.k)", "EXISTS (SELECT * FROM u WHERE u.k = t.k AND u.w > {c})",
    "EXISTS (SELECT * FROM s WHERE s.k = t.k)", "EXISTS (SELECT * FROM e WHERE e.k = t.k)",
    "k IN (SELECT k FROM u)", "k IN (SELECT k FROM u WHERE k IS NOT NULL)", "k IN (SELECT k FROM s WHERE w > {c2})",
    "k IN (SELECT k FROM e)", "v IN (SELECT w FROM u WHERE u.k = t.k)", "k NOT IN (SELECT k FROM s WHERE w > {c2})",
    "v > {c}", "k = {k}", "v IS NULL", "k IS NULL", "NOT EXISTS (SELECT * FROM u WHERE u.k = t.k AND u.w < {c})",
    "EXISTS (SELECT * FROM u WHERE w > {c})", "EXISTS (SELECT * FROM e)",  # uncorrelated: a row count
]
#: Correlations other than column equalities (``--domain``).
DOMAIN_ATOMS = [
    "EXISTS (SELECT * FROM u WHERE u.w < t.v)", "EXISTS (SELECT * FROM u WHERE u.k <> t.k AND u.w > {c})",
    "NOT EXISTS (SELECT * FROM u WHERE u.w BETWEEN t.k AND t.v)", "EXISTS (SELECT * FROM e WHERE e.w > t.v)",
    "v IN (SELECT w FROM u WHERE u.k < t.k)", "k IN (SELECT k FROM u WHERE u.w * 2 > t.v)",
    "k NOT IN (SELECT k FROM u WHERE u.w > t.v)", "EXISTS (SELECT * FROM s WHERE s.k > t.k)",
]

#: Scalar subqueries beside the predicates (``--scalars``): one typed Filter of ScalarSubquery and mark predicates.
SCALAR_ATOMS = [
    "v > (SELECT min(w) FROM u WHERE u.k = t.k)", "v < (SELECT max(w) FROM s WHERE s.k = t.k) + {c}",
    "(SELECT count(*) FROM u WHERE u.k = t.k) = {c2}", "v >= (SELECT avg(w) FROM u)",
    "coalesce((SELECT sum(w) FROM e WHERE e.k = t.k), 0) < v", "(SELECT count(w) FROM s WHERE s.k = t.k) > 0",
]


def _atom(r: random.Random) -> str:
    text = r.choice(ATOMS).format(c=r.choice([0, 5, 10, 25, 40, 60]), c2=r.choice([0, 1, 2, 3]),
                                  k=r.choice([1, 2, 3, 5]))
    return f"NOT ({text})" if r.random() < 0.25 else text


def _tree(r: random.Random, depth: int) -> str:
    if depth == 0 or r.random() < 0.3:
        return _atom(r)
    text = f"({_tree(r, depth - 1)} {r.choice(['OR', 'OR', 'AND'])} {_tree(r, depth - 1)})"
    return f"NOT {text}" if r.random() < 0.2 else text


def _query(r: random.Random, place: str) -> str:
    tree = _tree(r, 3)
    if place == "select":
        return f"SELECT k, v, {tree} AS f FROM t"
    if place == "case":
        return r.choice([f"SELECT k, v FROM t WHERE CASE WHEN {tree} THEN v > 15 ELSE v < 50 END",
                         f"SELECT k, v FROM t WHERE coalesce({tree}, {r.choice(['true', 'false'])})",
                         f"SELECT k, v FROM t WHERE ({tree}) IS NULL"])
    return f"SELECT k, v FROM t WHERE {tree}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--place", default="where", choices=["where", "select", "case"])
    parser.add_argument("--domain", action="store_true", help="add atoms correlated by other than equalities")
    parser.add_argument("--scalars", action="store_true", help="add scalar subqueries beside the predicates")
    args = parser.parse_args(argv)
    if args.domain:
        ATOMS.extend(DOMAIN_ATOMS * 2)
    if args.scalars:
        ATOMS.extend(SCALAR_ATOMS * 2)
    from duckdb_reference import duckdb_table, duckdb_with_tables, rows_mismatch, session_with_tables
    from subquery_tables import TABLES

    r = random.Random(args.seed)
    session = session_with_tables(TABLES, split_rows=3, device=args.device, drivers=2)
    bad = 0
    with duckdb_with_tables(TABLES) as reference:
        for _ in range(args.queries):
            sql = _query(r, args.place)
            try:
                expected = duckdb_table(reference, sql)
            except Exception:  # noqa: BLE001 - a text DuckDB refuses is not a case
                continue
            try:
                problem = rows_mismatch(session.sql(sql), expected)
            except Exception as error:  # noqa: BLE001 - reported, the run goes on
                problem = f"{type(error).__name__}: {error}"
            if problem:
                bad += 1
                print("BAD", sql, "\n   ", str(problem)[:300], flush=True)
    print(f"seed {args.seed}, {args.queries} queries on {args.device}: {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
