"""Fuzz set operations whose branches are ``SELECT DISTINCT`` against DuckDB (``optimizer.distinct_branches``).

Why: a distinct UNION / INTERSECT / EXCEPT plans its ``SELECT DISTINCT`` branches without their own grouping, and
keeps it for the ALL forms, a branch ORDER BY / LIMIT and DISTINCT ON; each seed draws chains of up to three set
operations (distinct and ALL forms mixed, parenthesized right sides) over branches with and without DISTINCT,
filters, LIMITed and DISTINCT ON branches, over tiny tables with NULLs, duplicates and an empty table, run at one
driver fused and at three drivers over 4-row batches unfused. Prints per seed and setting how many differ, and
the first differing queries.

    python -m bench.set_operation_fuzz --seeds 1:3 --queries 150
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

_FILTERS = ["", " WHERE z > 1", " WHERE x IS NOT NULL", " WHERE y <> 'a'"]


def _tables(rng: random.Random) -> dict:
    import pyarrow as pa

    def column(rows: int, kind: str):
        values = [None if rng.random() < 0.15 else rng.randint(0, 4) if kind == "i" else rng.choice(["a", "b", "c", ""])
                  for _ in range(rows)]
        return pa.array(values, pa.int32() if kind == "i" else pa.string())

    tables = {name: pa.table({"x": column(rows, "i"), "y": column(rows, "s"), "z": column(rows, "i")})
              for name, rows in (("t1", 30), ("t2", 25), ("t3", 12))}
    tables["t0"] = tables["t1"].slice(0, 0)
    return tables


def _branch(rng: random.Random, names: list[str]) -> str:
    distinct = "DISTINCT " if rng.random() < 0.6 else ""
    text = f"SELECT {distinct}x, y FROM {rng.choice(names)}{rng.choice(_FILTERS)}"
    draw = rng.random()
    if draw < 0.15:
        return f"({text} ORDER BY x NULLS FIRST, y NULLS FIRST LIMIT {rng.randint(0, 4)})"
    if draw < 0.25 and distinct:
        return f"(SELECT DISTINCT ON (x) x, y FROM {rng.choice(names)} ORDER BY x, y NULLS FIRST)"
    return text


def _set_operation(rng: random.Random, names: list[str], depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return _branch(rng, names)
    operation = rng.choice(["UNION", "INTERSECT", "EXCEPT"]) + rng.choice(["", "", " ALL"])
    right = _branch(rng, names) if rng.random() < 0.5 else f"({_set_operation(rng, names, depth - 1)})"
    return f"{_set_operation(rng, names, depth - 1)} {operation} {right}"


def main() -> None:
    import duckdb

    from duckdb_reference import queries_differing_from_duckdb, session_with_tables

    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="1:3", help="first:last (exclusive)")
    parser.add_argument("--queries", type=int, default=150)
    args = parser.parse_args()
    first, last = map(int, args.seeds.split(":"))
    total = 0
    for seed in range(first, last):
        rng = random.Random(seed)
        tables = _tables(rng)
        connection = duckdb.connect()
        for name, table in tables.items():
            connection.register(name, table)
        queries = []
        while len(queries) < args.queries:
            text = _set_operation(rng, list(tables), 3)
            if any(word in text for word in ("UNION", "INTERSECT", "EXCEPT")):
                queries.append(text)
        for drivers, fuse in ((1, True), (3, False)):
            session = session_with_tables(tables, device="cpu", drivers=drivers, batch_rows=4, fuse=fuse)
            problems = queries_differing_from_duckdb(session, connection, queries)
            total += len(problems)
            print(f"seed {seed} drivers {drivers}: {len(queries)} queries, {len(problems)} differ", flush=True)
            for problem in problems[:5]:
                print("  " + problem[:600])
    print(f"{total} differ in all")


if __name__ == "__main__":
    main()
