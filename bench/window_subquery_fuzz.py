"""Fuzz the subqueries that ``gpu_engine.sql.window_subqueries`` plans as windows against DuckDB.

Why: the rule holds only under conditions on the outer query and the subquery (same tables and filters,
correlation by the keys joining the other tables, an aggregate blind to uniform repetition); each seed draws
queries near those conditions, many just outside them (SUM/COUNT, a filter on one side only, an outer table
joined by more than the correlation, a correlation on a shared table's column, outer GROUP BY, HAVING grand
totals over a differing join), over tiny tables with NULLs and duplicate keys, cut into 4-row splits for two
drivers. Prints per seed how many queries were planned as windows and every query whose answer differs.

    python bench/window_subquery_fuzz.py --seeds 0:5 --queries 50
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

_FILTERS_B = ["b.v > 1", "b.v < 4", "b.v IS NOT NULL", "b.j <> 2"]
_FILTERS_C = ["c.w > 0", "c.w < 3"]


def _tables(rng: random.Random) -> dict:
    import pyarrow as pa

    def table(rows, columns):
        return pa.table({c: pa.array([None if rng.random() < 0.1 else rng.randrange(5) for _ in range(rows)],
                                     pa.int64()) for c in columns})
    return {"a": table(12, ["k", "x", "g"]), "b": table(15, ["k", "j", "v"]), "c": table(6, ["j", "w"])}


def _where_query(rng: random.Random) -> str:
    """Return a query comparing with a correlated aggregate over (a copy of) the outer join's b [and c]."""
    aggregate = rng.choice(["min", "max", "avg", "sum", "count"])
    with_c = rng.random() < 0.5
    outer = ["a.k = b.k"] + (["b.j = c.j"] if with_c else [])
    inner = [rng.choice(["b2.k = a.k", "a.k = b2.k"])] + (["b2.j = c2.j"] if with_c else [])
    filters = [f for f in _FILTERS_B if rng.random() < 0.3] + [f for f in _FILTERS_C if with_c and rng.random() < 0.3]
    outer += filters
    if rng.random() < 0.3:  # the subquery filters otherwise
        filters = [f for f in filters if rng.random() < 0.5] + ([rng.choice(_FILTERS_B)] if rng.random() < 0.5 else [])
    inner += [f.replace("b.", "b2.").replace("c.", "c2.") for f in filters]
    if rng.random() < 0.2:
        outer.append(rng.choice(["a.x < b.v", "a.g = 1", "a.x > 0"]))
    if rng.random() < 0.1:
        inner[0] = "b2.j = b.j"  # correlated by a column of the shared table
    argument = "*" if aggregate == "count" else rng.choice(["b2.v", "b2.v * 2"])
    subquery = (f"(SELECT {rng.choice(['', '1 + '])}{aggregate}({argument}) FROM b b2{', c c2' if with_c else ''} "
                f"WHERE {' AND '.join(inner)})")
    where = " AND ".join(outer + [f"{rng.choice(['b.v', 'b.v + a.x', 'a.x'])} {rng.choice(['=', '<', '>=', '<>'])} "
                                  f"{subquery}"])
    tables = "a, b" + (", c" if with_c else "")
    if rng.random() < 0.4:
        return f"SELECT a.g, count(*) AS n, sum(b.v) AS s FROM {tables} WHERE {where} GROUP BY a.g"
    return f"SELECT a.k, a.x, b.v FROM {tables} WHERE {where}"


def _having_query(rng: random.Random) -> str:
    """Return a grouped query whose HAVING compares with an aggregate over (nearly) the same join."""
    aggregate = rng.choice(["sum", "min", "max", "avg", "count"])
    outer = ["a.k = b.k"] + (["b.v > 1"] if rng.random() < 0.5 else [])
    inner = ["a2.k = b2.k"] + (["b2.v > 1"] if (("b.v > 1" in outer) == (rng.random() < 0.8)) else [])
    return (f"SELECT a.g, {aggregate}(b.v) AS t FROM a, b WHERE {' AND '.join(outer)} GROUP BY a.g HAVING "
            f"{aggregate}(b.v) {rng.choice(['=', '<', '>=', '<>'])} (SELECT {aggregate}(b2.v) / {rng.choice([1, 2, 3])} "
            f"FROM a a2, b b2 WHERE {' AND '.join(inner)})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:5", help="start:stop")
    parser.add_argument("--queries", type=int, default=50, help="queries of each form per seed")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    from duckdb_reference import duckdb_with_tables, queries_differing_from_duckdb, session_with_tables
    from gpu_engine.plans.nodes import WindowNode, walk_plan

    start, stop = (int(x) for x in args.seeds.split(":"))
    failed = 0
    for seed in range(start, stop):
        rng = random.Random(seed)
        tables = _tables(rng)
        queries = [q for _ in range(args.queries) for q in (_where_query(rng), _having_query(rng))]
        session = session_with_tables(tables, split_rows=4, device=args.device, drivers=2, fuse=False)
        with duckdb_with_tables(tables) as connection:
            windows = sum(any(isinstance(node, WindowNode) for node in walk_plan(session.sql_plan(q)))
                          for q in queries)
            problems = queries_differing_from_duckdb(session, connection, queries)
        failed += len(problems)
        print(f"seed {seed}: {len(queries)} queries, {windows} planned as windows, {len(problems)} differ", flush=True)
        for problem in problems:
            print("  " + problem[:800])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
