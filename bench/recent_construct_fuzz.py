"""Fuzz the recently added SQL constructs against DuckDB over tiny NULL-laden tables (fuzz hardening round 4).

Why: the compose/breadth generators draw window frames at partition edges, grouping(), INTERSECT/EXCEPT ALL with
NULLs, Unnest forms, semi/anti joins on ``<>``, DISTINCT over joins, correlated subqueries under OR/NOT and mixed
decimal scales rarely, and mostly over tables of many rows. Each seed here draws two tables of 0-9 rows (few
distinct values, so keys tie and repeat; every column may be NULL but ``t.id``), one query per family below with
random choices, and a session of 1-4 drivers and 1, 2, 4 or 65536 batch rows; every answer is compared with
DuckDB's as a multiset (ORDER BY queries in key order).

    python bench/recent_construct_fuzz.py --seeds 0:300 [--device cuda-sim] [--families window,semi] [--out F]

Prints every case that is wrong, a crash (a raw Python exception), an engine error where DuckDB answered, or
an answer where DuckDB raised; then counts per family and status. Exits 1 when any case was wrong or crashed.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import time
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.sql_fuzz import head_commit, print_counts  # noqa: E402 (after the path it needs)


def tables(rng: random.Random, scale: int = 1) -> dict:
    """Return ``t(id, a, b, c, d, e)`` and ``u(x, y, z, w)``: 0-9 rows (up to 9 x ``scale``), few distinct values,
    NULLs anywhere."""
    import decimal

    import pyarrow as pa

    def pick(values, null=0.25):
        return None if rng.random() < null else rng.choice(values)

    n, m = rng.choice([0, 1, 2, 3, 5, 7, 9]), rng.choice([0, 1, 2, 4, 6, 8])
    if scale > 1:  # partitions and frames across many batches and splits
        n, m = rng.randint(0, 9 * scale), rng.randint(0, 8 * scale)
    strings = ["a", "b", "a,b", "", "b,,c", "x"]
    dec2 = [decimal.Decimal(v) for v in ("-1.50", "0.00", "1.25", "2.50", "10.01")]
    dec4 = [decimal.Decimal(v) for v in ("-1.5000", "0.0001", "1.2500", "2.5000", "3.1416")]
    t = pa.table({
        "id": pa.array(list(range(n)), pa.int64()),
        "a": pa.array([pick([0, 1, 2, 3]) for _ in range(n)], pa.int64()),
        "b": pa.array([pick(strings) for _ in range(n)], pa.string()),
        "c": pa.array([pick([-1, 0, 1, 2, 3]) for _ in range(n)], pa.int32()),
        "d": pa.array([pick(dec2) for _ in range(n)], pa.decimal128(9, 2)),
        "e": pa.array([pick([-0.5, 0.0, 1.5, 2.0]) for _ in range(n)], pa.float64()),
    })
    u = pa.table({
        "x": pa.array([pick([0, 1, 2, 4]) for _ in range(m)], pa.int64()),
        "y": pa.array([pick(strings) for _ in range(m)], pa.string()),
        "z": pa.array([pick([0, 1]) for _ in range(m)], pa.int32()),
        "w": pa.array([pick(dec4) for _ in range(m)], pa.decimal128(12, 4)),
    })
    return {"t": t, "u": u}


# ------------------------------------------------------------------------------------------------ query families
def _window(r: random.Random) -> str:
    partition = r.choice(["", "PARTITION BY b", "PARTITION BY a", "PARTITION BY c % 2"])
    key = r.choice(["a", "c", "d", "e"])
    direction = r.choice(["", " DESC"])
    nulls = r.choice(["", " NULLS FIRST", " NULLS LAST"])
    unit = r.choice(["ROWS", "RANGE", "RANGE", "GROUPS"])

    def bound(side):
        kinds = ["UNBOUNDED PRECEDING" if side == "start" else "UNBOUNDED FOLLOWING", "CURRENT ROW",
                 f"{r.choice([0, 1, 2])} PRECEDING", f"{r.choice([0, 1, 2])} FOLLOWING"]
        return r.choice(kinds)
    start, end = bound("start"), bound("end")
    rank = {"UNBOUNDED": 0, "PRECEDING": 1, "CURRENT": 2, "FOLLOWING": 3}
    if rank[start.split()[0] if start.startswith(("UNB", "CUR")) else start.split()[1]] > \
            rank[end.split()[-1] if not end.startswith("CUR") else "CURRENT"] and not end.startswith("UNB"):
        start, end = "CURRENT ROW" if start.startswith("CUR") else start, "UNBOUNDED FOLLOWING"  # a valid frame
    if unit == "RANGE" and key == "d":
        start, end = (re.sub(r"^(\d) ", lambda mt: r.choice(["1.25 ", "0.5 ", mt.group(1) + " "]), b)
                      for b in (start, end))
    arg = r.choice(["a", "c", "d", "e", "id"])
    if unit == "ROWS":
        order = f"ORDER BY {key}{direction}{nulls}, id"
        function = r.choice([f"sum({arg})", f"count({arg})", "count(*)", f"min({arg})", f"max({arg})",
                             f"avg({arg})", f"first_value({arg})", f"last_value({arg})",
                             f"first_value({arg} IGNORE NULLS)", f"last_value({arg} IGNORE NULLS)",
                             f"nth_value({arg}, 2)", f"nth_value({arg}, 2 IGNORE NULLS)"])
    else:
        order = f"ORDER BY {key}{direction}{nulls}"
        function = r.choice([f"sum({arg})", f"count({arg})", "count(*)", f"min({arg})", f"max({arg})",
                             f"avg({arg})"])
    frame = f"{unit} BETWEEN {start} AND {end}"
    window = f"{function} OVER ({partition} {order} {frame})"
    extra = r.choice(["", f", lag({arg}, {r.choice([1, 2])}) OVER ({partition} ORDER BY {key}{nulls}, id) AS l",
                      f", lead({arg} IGNORE NULLS) OVER ({partition} ORDER BY {key}{nulls}, id) AS l",
                      f", lag({arg}, 1, -9 IGNORE NULLS) OVER ({partition} ORDER BY id) AS l",
                      f", rank() OVER ({partition} ORDER BY {key}{direction}{nulls}) AS rk"])
    shape = r.random()
    if shape < 0.6:
        return f"SELECT id, {key}, {window} AS wv{extra} FROM t"
    if shape < 0.8:
        q = r.choice(["row_number() OVER (PARTITION BY b ORDER BY c NULLS FIRST, id) <= 2",
                      f"{window} > 1", f"rank() OVER ({partition} ORDER BY {key}{direction}{nulls}) = 1",
                      f"count(*) OVER ({partition}) > 1 AND {key} IS NOT NULL"])
        return f"SELECT id, a, b, c FROM t QUALIFY {q}"
    return (f"SELECT b, wv FROM (SELECT id, b, a, c, d, e, {window} AS wv FROM t WHERE id % 3 <> 1) q "
            f"WHERE wv IS NOT NULL OR b IS NULL")


def _grouping(r: random.Random) -> str:
    keys = r.choice([("b", "c"), ("a", "b"), ("c", "a"), ("b", "z")])
    if keys[1] == "z":
        source = "t LEFT JOIN u ON t.a = u.x"
    else:
        source = "t"
    k1, k2 = keys
    form = r.choice([f"ROLLUP ({k1}, {k2})", f"CUBE ({k1}, {k2})", f"GROUPING SETS (({k1}), ({k2}), ())",
                     f"GROUPING SETS (({k1}, {k2}), ({k1}))", f"{k1}, ROLLUP ({k2})", f"ROLLUP ({k1}), CUBE ({k2})",
                     f"GROUPING SETS (({k1}), ({k1}, {k2}), ({k1}))"])
    measures = r.sample([f"grouping({k1}) AS g1", f"grouping({k1}, {k2}) AS g12", f"grouping({k2}, {k1}) AS g21",
                         "count(*) AS n", "sum(d) AS sd", "max(e) AS me", "count(DISTINCT id % 3) AS cd",
                         "sum(id) AS si"], r.randint(2, 4))
    having = r.choice(["", "", f" HAVING grouping({k1}) = 0", f" HAVING {k1} IS NULL",
                       f" HAVING count(*) > 1 OR grouping({k2}) = 1",
                       f" HAVING {k2} IS NOT NULL AND grouping({k1}) = 1"])
    query = f"SELECT {k1}, {k2}, {', '.join(measures)} FROM {source} GROUP BY {form}{having}"
    if r.random() < 0.25:
        query = (f"SELECT *, rank() OVER (PARTITION BY grouping({k1}, {k2}) ORDER BY n DESC) AS rk FROM "
                 f"(SELECT {k1}, {k2}, count(*) AS n FROM {source} GROUP BY {form}) g")
        query = query.replace(f"grouping({k1}, {k2})", f"({k1} IS NULL)") if r.random() < 0.5 else (
            f"SELECT {k1}, {k2}, count(*) AS n, rank() OVER (PARTITION BY grouping({k1}, {k2}) ORDER BY count(*) DESC)"
            f" AS rk FROM {source} GROUP BY {form}")
    return query


def _set_operation(r: random.Random) -> str:
    left = r.choice(["SELECT a, b FROM t", "SELECT c, b FROM t", "SELECT a, NULL FROM t WHERE c IS NULL",
                     "SELECT d, b FROM t", "SELECT a, b FROM t WHERE a > 0"])
    right = r.choice(["SELECT x, y FROM u", "SELECT z, y FROM u", "SELECT x, NULL FROM u", "SELECT w, y FROM u",
                      "SELECT NULL, y FROM u", "SELECT x, y FROM u WHERE false"])
    op = r.choice(["INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL", "UNION", "UNION ALL"])
    query = f"{left} {op} {right}"
    shape = r.random()
    if shape < 0.3:
        op2 = r.choice(["INTERSECT ALL", "EXCEPT ALL", "EXCEPT", "UNION ALL"])
        third = r.choice(["SELECT a, b FROM t WHERE id % 2 = 0", "SELECT x, y FROM u WHERE z = 1"])
        query = f"({query}) {op2} {third}" if r.random() < 0.5 else f"{third} {op2} ({query})"
    elif shape < 0.5:
        query = f"SELECT count(*) AS n, count(q.b) AS nb FROM ({query}) q(a, b)"
    elif shape < 0.6:
        query = f"SELECT * FROM ({query}) q(k, s) WHERE k IS NULL OR s IS NULL"
    return query


def _unnest(r: random.Random) -> str:
    lo = r.choice(["1", "0", "c", "-1"])
    hi = r.choice(["c", "a", "c + 1", "2"])
    step = r.choice(["", "", ", 1", ", -1", ", 2"])
    function = r.choice(["generate_series", "range"])
    forms = [
        f"SELECT t.id, g.v FROM t, {function}({lo}, {hi}{step}) g(v)",
        f"SELECT t.id, g.v FROM t CROSS JOIN {function}(t.c) g(v)",
        f"SELECT b, count(*) AS n, sum(g.v) AS s FROM t, generate_series(t.a, 3) g(v) GROUP BY b",
        "SELECT id, unnest(string_split(b, ',')) AS part FROM t",
        "SELECT id, part FROM t, unnest(string_split(b, ',')) s(part)",
        "SELECT p, count(*) AS n FROM (SELECT unnest(string_split(b, ',')) AS p FROM t) q GROUP BY p",
        "SELECT * FROM unnest([1, NULL, 2, 2]) v(x) WHERE x IS NULL OR x > 1",
        "SELECT id, unnest([a, c, NULL]) AS v FROM t",
        "SELECT id, unnest(generate_series(1, c)) AS v FROM t",
        f"SELECT t.id, g.v FROM t LEFT JOIN LATERAL {function}(1, t.c) g(v) ON true",
        "SELECT x, g.v FROM u, generate_series(u.z, u.x) g(v) WHERE g.v <> 1",
    ]
    return r.choice(forms)


def _semi(r: random.Random) -> str:
    inner = r.choice(["u.x <> t.a", "u.y <> t.b", "u.x <> t.a AND u.y = t.b", "u.z <> t.c AND u.x = t.a",
                      "u.x <> t.a OR u.y = t.b", "u.x <> t.a AND u.w > t.d", "u.y <> t.b AND u.x < t.c"])
    kind = r.choice(["EXISTS", "NOT EXISTS"])
    forms = [
        f"SELECT id, a, b FROM t WHERE {kind} (SELECT 1 FROM u WHERE {inner})",
        f"SELECT id, a, b FROM t WHERE {kind} (SELECT 1 FROM u WHERE {inner}) AND c IS NOT NULL",
        f"SELECT id, a FROM t WHERE a {r.choice(['IN', 'NOT IN'])} (SELECT x FROM u WHERE u.y <> t.b)",
        f"SELECT id, {kind} (SELECT 1 FROM u WHERE {inner}) AS m FROM t",
        f"SELECT t.id, t.a FROM t SEMI JOIN u ON {inner}" if r.random() < 0.5 else
        f"SELECT t.id, t.a FROM t ANTI JOIN u ON {inner}",
        f"SELECT count(*) AS n FROM t WHERE {kind} (SELECT 1 FROM u WHERE {inner})",
    ]
    return r.choice(forms)


def _distinct_join(r: random.Random) -> str:
    join = r.choice(["JOIN", "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
    on = r.choice(["t.a = u.x", "t.b = u.y", "t.a = u.x AND t.b = u.y", "t.a = u.x AND u.z = 1", "t.c = u.z",
                   "t.a <> u.x", "t.d = u.w"])
    cols = r.choice(["t.a", "t.a, t.b", "t.b", "t.*", "t.a, u.z", "u.y", "t.id", "t.c, t.b"])
    where = r.choice(["", "", " WHERE u.z IS NOT NULL", " WHERE t.c > 0", " WHERE u.x IS NULL"])
    query = f"SELECT DISTINCT {cols} FROM t {join} u ON {on}{where}"
    if r.random() < 0.3:
        query = f"SELECT count(*) AS n FROM ({query}) q"
    elif r.random() < 0.2:
        query = f"SELECT {cols} FROM t {join} u ON {on}{where} GROUP BY ALL"
    return query


def _correlated(r: random.Random) -> str:
    sub = r.choice([
        "EXISTS (SELECT 1 FROM u WHERE u.x = t.a)",
        "EXISTS (SELECT 1 FROM u WHERE u.y = t.b AND u.z = 1)",
        "t.a IN (SELECT x FROM u WHERE u.y = t.b)",
        "t.a NOT IN (SELECT x FROM u WHERE u.z = t.c)",
        "(SELECT max(x) FROM u WHERE u.y = t.b) > t.a",
        "(SELECT count(*) FROM u WHERE u.x = t.a) = 0",
        "t.c > ALL (SELECT z FROM u WHERE u.x = t.a)",
        "t.a = ANY (SELECT x FROM u WHERE u.z = t.c)",
    ])
    other = r.choice(["t.c IS NULL", "t.a > 1", "t.b = 'a'", "t.d < 1", "false", "true"])
    where = r.choice([f"{sub} OR {other}", f"NOT ({sub})", f"NOT ({sub}) OR {other}", f"NOT ({sub} OR {other})",
                      f"({sub}) IS NOT TRUE", f"{other} AND NOT {sub}",
                      f"CASE WHEN {other} THEN {sub} ELSE NOT {sub} END"])
    if r.random() < 0.3:
        return f"SELECT id, a, b, c, {where} AS m FROM t"
    return f"SELECT id, a, b, c FROM t WHERE {where}"


def _decimals(r: random.Random) -> str:
    expression = r.choice(["d + w", "d - w", "d * w", "w - d * 2", "d + 1.5", "w * 0.001", "d / w",
                           "coalesce(d, w)", "CASE WHEN a > 1 THEN d ELSE w END", "greatest(d, w)",
                           "least(d, w, 0.5)", "d + e", "CAST(d AS DECIMAL(18, 6)) - w", "round(w, 1) + d",
                           "abs(d - w)", "d % 1", "w // 1"])
    forms = [
        f"SELECT id, x, {expression} AS v FROM t CROSS JOIN u",
        f"SELECT id, x FROM t, u WHERE d {r.choice(['=', '<', '>=', '<>'])} w",
        f"SELECT sum({expression}) AS s, min({expression}) AS mn, count({expression}) AS n FROM t, u",
        f"SELECT t.id, u.x FROM t JOIN u ON t.d = u.w",
        "SELECT d FROM t UNION SELECT w FROM u",
        "SELECT d FROM t INTERSECT ALL SELECT w FROM u",
        f"SELECT a, sum(d) + max(x) * 0.25 AS s, avg(d) AS m FROM t LEFT JOIN u ON t.a = u.x GROUP BY a",
        f"SELECT id, d IN (1.25, 2.5000, NULL) AS m, d BETWEEN -1.5 AND 1.2500 AS n FROM t",
        "SELECT id FROM t WHERE d IN (SELECT w FROM u)",
    ]
    return r.choice(forms)


def _empty(r: random.Random) -> str:
    """Any family's query over tables emptied by a false filter (the tables themselves may be empty too)."""
    family = r.choice([_window, _grouping, _set_operation, _semi, _distinct_join, _correlated])
    query = family(r)
    return query.replace("FROM t", "FROM (SELECT * FROM t WHERE id < 0) t", 1)


FAMILIES = {"window": _window, "grouping": _grouping, "set": _set_operation, "unnest": _unnest, "semi": _semi,
            "distinct": _distinct_join, "correlated": _correlated, "decimal": _decimals, "empty": _empty}


def _window_more(r: random.Random) -> str:
    """Frames with EXCLUDE, GROUPS offsets, windows over grouped rows and over a join's NULL side."""
    key = r.choice(["a", "c", "d"])
    nulls = r.choice(["", " NULLS FIRST", " NULLS LAST"])
    forms = [
        f"SELECT id, {key}, sum(a) OVER (ORDER BY {key}{nulls} GROUPS BETWEEN {r.choice([0, 1])} PRECEDING AND "
        f"{r.choice([0, 1, 2])} FOLLOWING) AS wv FROM t",
        f"SELECT id, {key}, count(c) OVER (ORDER BY {key}{nulls}" + r.choice([", id ROWS", " RANGE"]) +
        f" BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW "
        f"EXCLUDE {r.choice(['CURRENT ROW', 'TIES', 'GROUP', 'NO OTHERS'])}) AS wv FROM t",
        f"SELECT b, sum(a) AS s, sum(sum(a)) OVER (ORDER BY b{nulls} ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS wv "
        f"FROM t GROUP BY b",
        f"SELECT t.id, u.x, max(u.w) OVER (PARTITION BY t.b ORDER BY u.x{nulls} RANGE BETWEEN 1 PRECEDING AND "
        f"CURRENT ROW) AS wv FROM t LEFT JOIN u ON t.a = u.x",
        f"SELECT id, {key}, last_value({key} IGNORE NULLS) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND "
        f"{r.choice(['1 PRECEDING', 'CURRENT ROW', '1 FOLLOWING'])}) AS wv FROM t",
        f"SELECT id, ntile({r.choice([1, 2, 3, 5])}) OVER (PARTITION BY b ORDER BY id) AS nt, "
        f"percent_rank() OVER (ORDER BY {key}{nulls}) AS pr, cume_dist() OVER (ORDER BY {key}{nulls}) AS cd FROM t",
        f"SELECT id, a, b FROM t QUALIFY sum(a) OVER (PARTITION BY b ORDER BY id ROWS BETWEEN 1 PRECEDING AND "
        f"CURRENT ROW) IS NULL OR a = max(a) OVER (PARTITION BY b)",
        f"SELECT b, a FROM t GROUP BY b, a QUALIFY rank() OVER (PARTITION BY b ORDER BY a DESC{nulls}) = 1",
    ]
    return r.choice(forms)


def _grouping_more(r: random.Random) -> str:
    """Expression keys, repeated sets, grouping() in ORDER BY and CASE, grouping sets over joins and empty input."""
    forms = [
        "SELECT a % 2 AS p, b, grouping(a % 2) AS g, count(*) AS n FROM t GROUP BY ROLLUP (a % 2, b)",
        "SELECT b, c, count(*) AS n FROM t GROUP BY GROUPING SETS ((b), (b), (), (), (c, b))",
        "SELECT b, CASE WHEN grouping(b) = 1 THEN 'all' ELSE coalesce(b, 'null') END AS label, sum(d) AS s "
        "FROM t GROUP BY ROLLUP (b) ORDER BY grouping(b), b NULLS FIRST",
        "SELECT t.b, u.z, count(u.x) AS n, grouping(t.b, u.z) AS g FROM t FULL JOIN u ON t.b = u.y "
        "GROUP BY CUBE (t.b, u.z)",
        "SELECT b, c, sum(a) AS s FROM t WHERE a > 100 GROUP BY CUBE (b, c)",
        "SELECT b, count(*) AS n FROM t GROUP BY ROLLUP (b) HAVING grouping(b) = 1 OR count(*) > 1",
        "SELECT b, c, max(d) AS m FROM t GROUP BY GROUPING SETS ((b, c), (c), ()) HAVING max(d) IS NULL",
        "SELECT d, count(*) AS n, sum(e) AS s FROM t GROUP BY ROLLUP (d)",
        "SELECT b, c, count(DISTINCT a) AS n, grouping(c) AS g FROM t GROUP BY b, ROLLUP (c)",
    ]
    return r.choice(forms)


def _set_more(r: random.Random) -> str:
    """Set operations with duplicates, ORDER BY/LIMIT, in IN subqueries, over grouped rows and decimals."""
    op = r.choice(["INTERSECT ALL", "EXCEPT ALL", "INTERSECT", "EXCEPT"])
    forms = [
        f"SELECT a FROM t {op} SELECT x FROM u {op} SELECT a FROM t WHERE b IS NULL",
        f"SELECT c FROM t {op} SELECT z FROM u ORDER BY 1 NULLS FIRST",
        f"SELECT id FROM t WHERE a IN (SELECT a FROM t {op} SELECT x FROM u)",
        f"SELECT id FROM t WHERE a NOT IN (SELECT x FROM u {op} SELECT a FROM t WHERE c > 0)",
        f"SELECT b, count(*) FROM t GROUP BY b {op} SELECT y, count(*) FROM u GROUP BY y",
        f"SELECT d FROM t {op} SELECT w FROM u {op} SELECT CAST(e AS DECIMAL(9, 2)) FROM t",
        f"SELECT a, b FROM t {op} SELECT x, y FROM u UNION ALL SELECT a, b FROM t WHERE id = 0",
        f"SELECT q.a, count(*) AS n FROM (SELECT a FROM t {op} SELECT x FROM u) q GROUP BY q.a",
        f"SELECT a, b FROM t {op} (SELECT x, y FROM u {r.choice(['UNION', 'UNION ALL', 'EXCEPT ALL'])} "
        f"SELECT a, b FROM t WHERE a = 1)",
    ]
    return r.choice(forms)


def _semi_more(r: random.Random) -> str:
    """Semi/anti joins on <> and other non-equalities beside equalities, in ON, under joins and aggregates."""
    cond = r.choice(["u.x <> t.a", "u.y <> t.b", "u.x <> t.a AND u.z <> t.c", "u.x IS DISTINCT FROM t.a",
                     "u.x <> t.a AND u.y IS NOT DISTINCT FROM t.b", "u.w <> t.d", "NOT (u.x = t.a)",
                     "u.x <> t.a AND u.x = 1"])
    kind = r.choice(["EXISTS", "NOT EXISTS"])
    forms = [
        f"SELECT b, count(*) AS n FROM t WHERE {kind} (SELECT 1 FROM u WHERE {cond}) GROUP BY b",
        f"SELECT t.id, v.x FROM t JOIN u v ON t.c = v.z WHERE {kind} (SELECT 1 FROM u WHERE {cond})",
        f"SELECT id FROM t WHERE {kind} (SELECT 1 FROM u WHERE {cond}) OR a IS NULL",
        f"SELECT id, CASE WHEN {kind} (SELECT 1 FROM u WHERE {cond}) THEN 'y' ELSE 'n' END AS m FROM t",
        f"SELECT id FROM t WHERE {kind} (SELECT 1 FROM u WHERE {cond} AND u.z IS NULL)",
        f"SELECT id FROM t WHERE {kind} (SELECT 1 FROM u WHERE {cond}) AND "
        f"{r.choice(['EXISTS', 'NOT EXISTS'])} (SELECT 1 FROM u WHERE u.y = t.b)",
        f"SELECT id FROM t WHERE a <> ALL (SELECT x FROM u WHERE u.z = t.c)",
        f"SELECT id FROM t WHERE b <> ANY (SELECT y FROM u)",
    ]
    return r.choice(forms)


def _distinct_more(r: random.Random) -> str:
    """DISTINCT over joins through projections, filters and several joins (the distinct->semi rewrite's reach)."""
    forms = [
        "SELECT DISTINCT t.a + 1 AS v FROM t JOIN u ON t.a = u.x WHERE t.c IS NOT NULL",
        "SELECT DISTINCT t.b FROM t JOIN u ON t.a = u.x JOIN u v ON t.b = v.y",
        "SELECT DISTINCT t.a, t.b FROM t JOIN u ON t.a = u.x AND u.w > t.d",
        "SELECT DISTINCT u.y FROM t JOIN u ON t.a = u.x AND t.c <> u.z",
        "SELECT DISTINCT t.a FROM t JOIN u ON t.a = u.x WHERE t.a + u.z > 1",
        "SELECT t.a, t.b FROM t JOIN u ON t.b = u.y GROUP BY t.a, t.b",
        "SELECT DISTINCT t.a, random() < 2 AS r FROM t JOIN u ON t.a = u.x",
        "SELECT count(DISTINCT t.a) AS n, count(*) AS m FROM t JOIN u ON t.a = u.x",
        "SELECT DISTINCT t.a FROM t JOIN u ON t.a = u.x ORDER BY t.a NULLS FIRST LIMIT 2",
        "SELECT DISTINCT coalesce(t.b, 'z') AS b FROM t JOIN u ON t.d = u.w",
        "SELECT DISTINCT t.a FROM t JOIN (SELECT DISTINCT x FROM u) q ON t.a = q.x",
        "SELECT DISTINCT ON (t.b) t.b, t.a FROM t JOIN u ON t.a = u.x ORDER BY t.b NULLS FIRST, t.a DESC NULLS LAST",
    ]
    return r.choice(forms)


FAMILIES.update({"window2": _window_more, "grouping2": _grouping_more, "set2": _set_more, "semi2": _semi_more,
                 "distinct2": _distinct_more})


def run(seeds: range, device: str, families: list[str], verbose: bool, scale: int = 1) -> dict:
    import duckdb

    from duckdb_reference import rows_mismatch, session_with_tables
    from gpu_engine.errors import ExecutionError, GpuEngineError
    from gpu_engine.sql.ordering import order_key_columns

    counts = collections.defaultdict(collections.Counter)
    reported, refusals = [], collections.Counter()
    for seed in seeds:
        r = random.Random(seed)
        data = tables(r, scale)
        drivers, batch_rows = r.choice([1, 1, 2, 4]), r.choice([1, 2, 4, 65536])
        split_rows = r.choice([1, 2, 3, 100])
        connection = duckdb.connect()
        for name, table in data.items():
            connection.register(name, table)
        session = session_with_tables(data, split_rows=split_rows, device=device, drivers=drivers,
                                      batch_rows=batch_rows, fuse=r.random() < 0.3)
        for family in families:
            sql = FAMILIES[family](r)
            if r.random() < 0.15 and "ORDER BY" not in sql.split(")")[-1] and family not in ("set",):
                sql = f"SELECT * FROM ({sql}) o ORDER BY ALL NULLS FIRST LIMIT 3"
            status, detail = _compare(session, connection, sql, rows_mismatch, order_key_columns,
                                      GpuEngineError, ExecutionError)
            counts[family][status] += 1
            if status == "refused":
                refusals[re.sub(r"'[^']*'", "'…'", detail.splitlines()[0])[:140]] += 1
            if status in ("wrong", "crash", "engine_raised", "answered_where_duckdb_raised") or (
                    verbose and status != "ok"):
                case = {"seed": seed, "family": family, "status": status, "sql": sql, "drivers": drivers,
                        "batch_rows": batch_rows, "split_rows": split_rows, "why": detail[:2000]}
                reported.append(case)
                print(f"{status.upper()} seed {seed} ({family}, drivers {drivers}, batch {batch_rows}, split "
                      f"{split_rows}): {sql}\n  {detail[:1500]}", flush=True)
        connection.close()
    return {"counts": {f: dict(c) for f, c in counts.items()}, "reported": reported,
            "refusals": dict(refusals.most_common())}


def _compare(session, connection, sql, rows_mismatch, order_key_columns, GpuEngineError, ExecutionError):
    try:
        expected, duckdb_error = connection.sql(sql).to_arrow_table(), None
    except Exception as error:  # noqa: BLE001
        expected, duckdb_error = None, error
    try:
        actual = session.sql(sql)
    except GpuEngineError as error:
        text = f"{type(error).__name__}: {error}"
        if duckdb_error is not None:
            return "both_raised", f"DuckDB: {duckdb_error}; engine: {text}"
        return ("engine_raised" if isinstance(error, ExecutionError) else "refused"), text
    except Exception as error:  # noqa: BLE001 - a raw exception is what the fuzz looks for
        return "crash", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-8)}"
    if duckdb_error is not None:
        return "answered_where_duckdb_raised", f"DuckDB: {duckdb_error}"
    ordered = False
    if re.search(r"ORDER BY [^)]*LIMIT \d+$", sql):
        ordered = True
    problem = rows_mismatch(actual, expected, ordered=ordered, rel_tol=1e-7)
    return ("ok", "") if problem is None else ("wrong", problem)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:100", help="start:stop")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--scale", type=int, default=1, help="tables of up to 9 x SCALE rows (default 0-9 rows)")
    parser.add_argument("--verbose", action="store_true", help="print refusals and both-raised cases too")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))
    families = args.families.split(",")
    began, cpu_began = time.perf_counter(), time.process_time()
    result = run(range(start, stop), args.device, families, args.verbose, args.scale)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    total = print_counts(result["counts"], 12,
                         f"  (seeds {start}:{stop} on {args.device}; {elapsed:.0f} s wall, {cpu:.0f} s CPU)")
    for why, n in list(result["refusals"].items())[:20]:
        print(f"  refused {n}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"commit": head_commit(), "seeds": [start, stop], "device": args.device,
                                        "scale": args.scale, "seconds": round(elapsed, 1),
                                        "cpu_seconds": round(cpu, 1), **result},
                                       indent=1, ensure_ascii=False))
    return 1 if total["wrong"] or total["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
