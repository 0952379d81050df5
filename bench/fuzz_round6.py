"""Fuzz join graphs, eager aggregation, stop 46's breadth forms, string keys and windows against DuckDB (fuzz
hardening round 6).

Why: stop 46 rebuilt inner-join regions in a typed rule (gpu_engine/optimizer/join_order.py over join_graph.py:
classes of equal columns give derived keys, written cross products in a linked region are replaced), chose
partial steps from typed estimates (optimizer/partial_steps.py), slotted plain string group keys by their interned
id and kept build sides of up to 65,536 rows of strings as dictionaries, and added unnest/LATERAL/posexplode/
null-safe correlation forms. Rounds 1-5 drew 2-3 table joins at most. Here each seed draws
``f(id, k1, k2, v, x, g)`` (2-20 rows) and ``d1(k1, a, s)``, ``d2(k2, b, s2)``, ``d3(a, c)``, ``d4(b, w)`` (2-8 rows
each, one table empty in a fifth of the seeds): every integer column mostly 0 or 1 (2 and 3 rarely) with NULLs (any two join, keys
repeat, joins of 7 relations keep rows),
plain (not dictionary) strings with NULLs and empty strings, sometimes ``large_string``. With tables this small the
cost-based rules would never fire, so each seed also draws the knobs: ``ORDER_GAIN`` 0.8 or infinite (always
take the searched tree; the typed rule orders FROM items, joined as written by the SQL planner), eager aggregation's set-up cost measured or 0, partial steps as estimated or dropped for
every GROUP BY the estimates reach. The ``bigbuild`` family joins/groups a probe table with a build side of
4,000-65,537 rows of strings (a session of 1,024-65,536 batch rows: the dictionary build cap's edges). A fifth
of the ``joins`` and ``eager`` cases run the SQL's plan through ``plans.serialization`` JSON and back with
``Session.execute`` (the planning rules run on the typed plan again).

    python -m bench.fuzz_round6 --seeds 0:300 [--device cuda-sim] [--families joins,eager] [--parquet [device]]
        [--out F]

Prints every wrong case, crash, engine error where DuckDB answered, or answer where DuckDB raised; then counts per
family and status. Exits 1 when any case was wrong or crashed. Comparison: bench/fuzz_round5._compare (multisets,
floats to 1e-7).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.fuzz_round5 import _compare, _parquet_session  # noqa: E402 (after the path it needs)
from bench.sql_fuzz import head_commit, print_counts  # noqa: E402

STRINGS = ["a", "B", "", "a,b", "é", "bb", " x ", "a"]
INT_COLUMNS = {"f": ["k1", "k2", "v"], "d1": ["k1", "a"], "d2": ["k2", "b"], "d3": ["a", "c"], "d4": ["b", "w"]}
STRING_COLUMNS = {"f": ["g"], "d1": ["s"], "d2": ["s2"], "d3": [], "d4": []}


def tables(rng: random.Random) -> dict:
    """Return f, d1, d2, d3, d4: integer columns mostly 0 or 1 (2, 3 rarely) with NULLs, plain strings with NULLs
    and ''. Dense enough that joins of 5-7 relations keep rows (with 0..4, 9 of 10 answers were empty)."""
    import pyarrow as pa

    def pick(values, null=0.2):
        return None if rng.random() < null else rng.choice(values)

    empty = rng.choice(["f", "d1", "d2", "d3", "d4"]) if rng.random() < 0.2 else None  # one empty side

    def size(most, name):
        return 0 if name == empty else rng.randint(2, most)

    def ints(n, null=0.08):
        return pa.array([pick([0, 1, 0, 1, 2, 0, 1, 3], null) for _ in range(n)], pa.int64())

    def strings(n):
        kind = pa.large_string() if rng.random() < 0.2 else pa.string()
        null = rng.choice([0.0, 0.2, 0.5, 1.0])
        return pa.array([pick(STRINGS, null) for _ in range(n)], kind)

    n = size(20, "f")
    out = {"f": pa.table({"id": pa.array(range(n), pa.int64()), "k1": ints(n), "k2": ints(n), "v": ints(n, 0.15),
                          "x": pa.array([pick([0.5, -1.25, 2.0, 1e3]) for _ in range(n)], pa.float64()),
                          "g": strings(n)})}
    m = size(8, "d1")
    out["d1"] = pa.table({"k1": ints(m, 0.08), "a": ints(m), "s": strings(m)})
    m = size(8, "d2")
    out["d2"] = pa.table({"k2": ints(m, 0.08), "b": ints(m), "s2": strings(m)})
    m = size(6, "d3")
    out["d3"] = pa.table({"a": ints(m), "c": ints(m)})
    m = size(6, "d4")
    out["d4"] = pa.table({"b": ints(m), "w": ints(m)})
    return out


def big_tables(rng: random.Random) -> dict:
    """A build side of 4,000-65,537 rows of strings and a probe side of 2,000 rows reading some of them."""
    import pyarrow as pa

    rows = rng.choice([4000, 4096, 4097, 20000, 65536, 65537])
    ndv = rng.choice([3, 100, rows // 2, rows])
    null = rng.choice([0.0, 0.05, 0.3])
    values = [None if rng.random() < null else ("" if i % 97 == 5 else f"s{rng.randrange(ndv)}")
              for i in range(rows)]
    kind = pa.large_string() if rng.random() < 0.2 else pa.string()
    big = pa.table({"bs": pa.array(values, kind), "bv": pa.array([i % 7 for i in range(rows)], pa.int64())})
    probe = [None if rng.random() < 0.1 else ("" if rng.random() < 0.05 else f"s{rng.randrange(ndv + 10)}")
             for _ in range(2000)]
    p = pa.table({"pid": pa.array(range(2000), pa.int64()), "ps": pa.array(probe, pa.string()),
                  "pv": pa.array([i % 5 for i in range(2000)], pa.int64())})
    return {"big": big, "p": p}


# ------------------------------------------------------------------------------------------------ query families
ALIASES = [("f", "f"), ("d1", "d1"), ("d2", "d2"), ("d3", "d3"), ("d4", "d4"), ("f", "f2"), ("d1", "e1"),
           ("d2", "e2")]


def _column(r, relations, strings=False):
    """A random integer (or string) column of ``relations``; None when none has a string column."""
    pool = [f"{a}.{c}" for t, a in relations for c in (STRING_COLUMNS[t] if strings else INT_COLUMNS[t])]
    return r.choice(pool) if pool else None


def _int_of(r, relation):
    table, alias = relation
    return f"{alias}.{r.choice(INT_COLUMNS[table])}"


def _select_list(r, relations):
    """Aggregates (deterministic over any join order) or a few columns (compared as a multiset)."""
    shape = r.random()
    if shape < 0.45:
        parts = ["count(*) AS n"]
        for i in range(r.randint(1, 3)):
            column = _column(r, relations)
            parts.append(f"{r.choice(['sum', 'min', 'max', 'count', 'avg'])}({column}) AS a{i}")
        return ", ".join(parts), ""
    if shape < 0.75:
        key = _column(r, relations, strings=r.random() < 0.4) or _column(r, relations)
        column = _column(r, relations)
        having = f" HAVING count(*) > {r.choice([0, 1, 2])}" if r.random() < 0.3 else ""
        return (f"{key} AS k, count(*) AS n, sum({column}) AS s, max({column}) AS m", f" GROUP BY {key}{having}")
    columns = sorted({_column(r, relations) for _ in range(r.randint(1, 4))})
    if r.random() < 0.3:
        columns.append(_column(r, relations, strings=True) or columns[0])
    return ", ".join(f"{c} AS o{i}" for i, c in enumerate(columns)), ""


def _joins(r: random.Random):
    """3-7 relations: an inner region in comma form (equalities linking most, classes of equal columns, a written
    cross product some condition links later) or a chain of INNER/LEFT/RIGHT/FULL/CROSS JOINs with ON conditions."""
    n = r.randint(3, 7)
    relations = r.sample(ALIASES, n)
    conditions = []
    if r.random() < 0.55:  # comma form: one inner region
        equalities = []
        unlinked = 0
        for i in range(1, n):
            if r.random() < 0.85 or unlinked:  # at most one relation left to a cross product (or a later link)
                equalities.append((_int_of(r, relations[i]), _int_of(r, r.choice(relations[:i]))))
            else:
                unlinked += 1
        for _ in range(r.randint(0, 2)):  # a class of equal columns: derived keys
            if equalities:
                left, right = r.choice(equalities)
                third = _int_of(r, r.choice(relations))
                if third not in (left, right):
                    equalities.append((r.choice([left, right]), third))
        if r.random() < 0.3 and len(equalities) >= 2:  # an implied equality written out too
            (a, b), (c, d) = r.sample(equalities, 2)
            if b == c:
                equalities.append((a, d))
        conditions += [f"{a} = {b}" for a, b in equalities]
        for _ in range(r.choice([0, 0, 1, 2])):
            a, b = r.sample(relations, 2)
            conditions.append(r.choice([f"{_int_of(r, a)} {r.choice(['<', '<=', '<>'])} {_int_of(r, b)}",
                                        f"{_int_of(r, a)} IS NOT DISTINCT FROM {_int_of(r, b)}",
                                        f"({_int_of(r, a)} = {_int_of(r, b)} OR {_int_of(r, a)} IS NULL)"]))
        for _ in range(r.choice([0, 0, 1, 2])):
            column = _column(r, relations)
            conditions.append(r.choices([f"{column} IS NULL", f"{column} IS NOT NULL", f"{column} > 0",
                                         f"{column} IN (0, 2, 3)", f"{column} + 1 = {_column(r, relations)}"],
                                        [1, 3, 3, 3, 1])[0])
        stringy = [c for t, a in relations for c in (f"{a}.{s}" for s in STRING_COLUMNS[t])]
        if len(stringy) >= 2 and r.random() < 0.12:
            a, b = r.sample(stringy, 2)
            conditions.append(f"{a} = {b}")
        r.shuffle(conditions)
        order = list(relations)
        r.shuffle(order)
        from_clause = ", ".join(f"{t} {a}" if t != a else t for t, a in order)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    else:  # explicit JOINs
        first = relations[0]
        from_clause = f"{first[0]} {first[1]}" if first[0] != first[1] else first[0]
        for i in range(1, n):
            kind = r.choices(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN"], [60, 20, 8, 7, 5])[0]
            if kind == "CROSS JOIN" and "CROSS JOIN" in from_clause:
                kind = "JOIN"
            table, alias = relations[i]
            item = f"{table} {alias}" if table != alias else table
            if kind == "CROSS JOIN":
                from_clause += f" CROSS JOIN {item}"
                continue
            on = [f"{_int_of(r, relations[i])} = {_int_of(r, r.choice(relations[:i]))}"]
            if r.random() < 0.15:
                on.append(f"{_int_of(r, relations[i])} = {_int_of(r, r.choice(relations[:i]))}")
            if r.random() < 0.15:
                on.append(r.choice([f"{_int_of(r, relations[i])} > 1", f"{_int_of(r, r.choice(relations[:i]))} IS NOT NULL"]))
            from_clause += f" {kind} {item} ON {' AND '.join(on)}"
        where = ""
        if r.random() < 0.4:
            column = _column(r, relations)
            where = " WHERE " + r.choice([f"{column} IS NOT NULL", f"{column} IS NULL", f"{column} >= 1",
                                          f"{column} = {_column(r, relations)}"])
    select, group = _select_list(r, relations)
    distinct = "DISTINCT " if not group and "count(*)" not in select and r.random() < 0.2 else ""
    how = "jsonplan" if r.random() < 0.2 else "sql"  # the plan through JSON and back: the typed rules again
    return f"SELECT {distinct}{select} FROM {from_clause}{where}{group}", None, how


def _eager(r: random.Random):
    """GROUP BY over a join where the aggregates read f (the many side) and the keys come from the dimensions:
    sum/count/avg/min/max with HAVING, NULL groups, grouping sets, a self join of f."""
    joins = [("d1", "f.k1 = d1.k1"), ("d2", "f.k2 = d2.k2")]
    chosen = r.sample(joins, r.randint(1, 2))
    relations = [("f", "f")] + [(t, t) for t, _ in chosen]
    extra = []
    if ("d1", "d1") in relations and r.random() < 0.4:
        extra.append(("d3", "d1.a = d3.a"))
        relations.append(("d3", "d3"))
    if ("d2", "d2") in relations and r.random() < 0.3:
        extra.append(("d4", "d2.b = d4.b"))
        relations.append(("d4", "d4"))
    if r.random() < 0.15:
        extra.append(("f f2", "f2.k1 = f.k2"))
    if r.random() < 0.5:
        from_clause = "f" + "".join(f" JOIN {t} ON {c}" for t, c in chosen + extra)
        where = ""
    else:
        items = ["f"] + [t for t, _ in chosen + extra]
        r.shuffle(items)
        from_clause, where = ", ".join(items), " WHERE " + " AND ".join(c for _, c in chosen + extra)
    if r.random() < 0.3:
        where += (" AND " if where else " WHERE ") + r.choice(["f.v IS NOT NULL", "f.x > 0", "f.g <> ''",
                                                              "f.k1 IN (1, 2, 3)"])
    dims = [relation for relation in relations if relation[0] != "f"]
    keys = sorted({c for c in (_column(r, dims, strings=r.random() < 0.5) or _column(r, dims)
                               for _ in range(r.randint(1, 2)))})
    aggregates = []
    for i in range(r.randint(1, 4)):
        aggregates.append(r.choice([f"sum(f.v) AS s{i}", f"count(*) AS c{i}", f"count(f.v) AS c{i}",
                                    f"avg(f.x) AS a{i}", f"min(f.g) AS m{i}", f"max(f.v) AS m{i}",
                                    f"sum(f.x) AS s{i}", f"min(f.k2) AS m{i}", f"avg(f.v) AS a{i}"]))
    group = f" GROUP BY {', '.join(keys)}"
    if r.random() < 0.2:
        group = f" GROUP BY {r.choice(['ROLLUP', 'CUBE'])} ({', '.join(keys)})"
    having = ""
    if r.random() < 0.35:
        having = " HAVING " + r.choice(["count(*) > 1", "sum(f.v) >= 2", "sum(f.v) IS NULL", "max(f.x) > 0",
                                        "min(f.v) = 0 OR count(*) = 1"])
    select = ", ".join(f"{k} AS k{i}" for i, k in enumerate(keys)) + ", " + ", ".join(aggregates)
    return f"SELECT {select} FROM {from_clause}{where}{group}{having}", None, "jsonplan" if r.random() < 0.2 else "sql"


def _strkeys(r: random.Random):
    """One plain string column as a group or join key (NULLs, '' and large_string), IN lists of strings."""
    column = r.choice(["f.g", "d1.s"])
    table = column.split(".")[0]
    lst = ", ".join(f"'{s}'" for s in r.sample(["a", "", "B", "bb", "a,b", "é", "zz"], r.randint(1, 5)))
    forms = [
        f"SELECT {column} AS k, count(*) AS n, sum(length({column})) AS l FROM {table} GROUP BY {column}",
        "SELECT g AS k, count(*) AS n, sum(v) AS s, min(x) AS m FROM f GROUP BY g",
        "SELECT g AS k, count(DISTINCT k1) AS n FROM f GROUP BY g",
        "SELECT f.g AS k, d1.s AS t, count(*) AS n FROM f JOIN d1 ON f.g = d1.s GROUP BY f.g, d1.s",
        "SELECT f.id, d1.k1 FROM f LEFT JOIN d1 ON f.g = d1.s",
        "SELECT f.id, d1.s FROM f FULL JOIN d1 ON f.g = d1.s",
        "SELECT f.id, d2.s2 FROM f RIGHT JOIN d2 ON f.g = d2.s2 AND f.k2 = d2.k2",
        f"SELECT id FROM f WHERE g IN ({lst})",
        f"SELECT id FROM f WHERE g NOT IN ({lst})",
        f"SELECT s AS k, count(*) AS n FROM d1 WHERE s IN ({lst}) GROUP BY s",
        "SELECT id FROM f WHERE g IN (SELECT s FROM d1)",
        "SELECT id FROM f WHERE g NOT IN (SELECT s FROM d1 WHERE s IS NOT NULL)",
        "SELECT DISTINCT g AS k FROM f",
        "SELECT count(DISTINCT g) AS n, count(g) AS c, min(g) AS lo, max(g) AS hi FROM f",
        "SELECT g AS k, s AS t, count(*) AS n FROM f, d1 WHERE f.k1 = d1.k1 GROUP BY g, s",
        "SELECT coalesce(g, '?') AS k, count(*) AS n FROM f GROUP BY 1",
        "SELECT g AS k, k1, sum(v) AS s FROM f GROUP BY g, k1",
        "SELECT g AS k FROM f UNION SELECT s FROM d1",
        "SELECT g AS k FROM f INTERSECT SELECT s2 FROM d2",
        "SELECT g AS k FROM f EXCEPT ALL SELECT s FROM d1",
        "SELECT d2.s2 AS k, count(f.id) AS n FROM d2 LEFT JOIN f ON d2.s2 = f.g GROUP BY d2.s2",
        "SELECT g AS k, count(*) AS n FROM f WHERE g = '' OR g IS NULL GROUP BY g",
        "SELECT f.g AS k, count(*) AS n FROM f JOIN d1 ON f.k1 = d1.k1 JOIN d2 ON d1.s = d2.s2 GROUP BY f.g",
        "SELECT g AS k, count(*) AS n FROM (SELECT g FROM f UNION ALL SELECT s FROM d1) q GROUP BY g",
        "SELECT f.id FROM f WHERE EXISTS (SELECT 1 FROM d1 WHERE d1.s = f.g)",
        "SELECT f.id FROM f WHERE NOT EXISTS (SELECT 1 FROM d1 WHERE d1.s = f.g AND d1.k1 = f.k1)",
    ]
    return r.choice(forms), None, "sql"


def _bigbuild(r: random.Random):
    """Probe rows joined to (or grouped with) a 4,000-65,537-row build side of strings."""
    forms = [
        "SELECT count(*) AS n, count(bs) AS c, sum(bv) AS s FROM p JOIN big ON p.ps = big.bs",
        "SELECT bs AS k, count(*) AS n, sum(pv) AS s FROM p JOIN big ON p.ps = big.bs GROUP BY bs",
        "SELECT ps AS k, count(bv) AS n FROM p LEFT JOIN big ON p.ps = big.bs GROUP BY ps",
        "SELECT p.pid, big.bs, big.bv FROM p JOIN big ON p.ps = big.bs AND p.pv = big.bv",
        "SELECT count(*) AS n FROM p WHERE ps IN (SELECT bs FROM big)",
        "SELECT count(*) AS n FROM p WHERE ps NOT IN (SELECT bs FROM big WHERE bs IS NOT NULL)",
        "SELECT bs AS k, count(*) AS n FROM big GROUP BY bs HAVING count(*) > 1",
        "SELECT upper(bs) AS k, min(pv) AS m, count(*) AS n FROM p JOIN big ON p.ps = big.bs GROUP BY 1",
        "SELECT count(DISTINCT bs) AS n, min(bs) AS lo, max(bs) AS hi FROM p JOIN big ON p.ps = big.bs",
        "SELECT bs AS k, pv, count(*) AS n FROM big JOIN p ON big.bs = p.ps WHERE bv < 3 GROUP BY bs, pv",
        "SELECT p.pid, big.bs FROM p LEFT JOIN big ON p.ps = big.bs AND big.bv = 0",
        "SELECT length(bs) AS l, count(*) AS n FROM big RIGHT JOIN p ON p.ps = big.bs GROUP BY 1",
    ]
    return r.choice(forms), None, "sql"


def _windows(r: random.Random):
    """Frames over ties and NULLs (ROWS frames tie-broken by a unique column), ranks, grouping sets with NULL keys,
    windows over joins and over grouped rows."""
    part = r.choice(["", "PARTITION BY g ", "PARTITION BY k2 ", "PARTITION BY g, k2 "])
    nulls = r.choice(["", " NULLS FIRST", " NULLS LAST"])
    direction = r.choice(["", " DESC"])
    order = f"ORDER BY k1{direction}{nulls}"
    frame = r.choice(["RANGE BETWEEN 1 PRECEDING AND CURRENT ROW", "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                      "RANGE BETWEEN CURRENT ROW AND 2 FOLLOWING", "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
                      "RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING"])
    rows = r.choice(["ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING", "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                     "ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING", "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"])
    agg = r.choice(["sum(v)", "count(v)", "count(*)", "min(x)", "max(g)", "avg(v)"])
    keys = r.sample(["g", "k1", "k2"], 2)
    forms = [
        f"SELECT id, {agg} OVER ({part}{order} {frame}) AS w FROM f",
        f"SELECT id, {agg} OVER ({part}{order}, id {rows}) AS w FROM f",
        f"SELECT id, rank() OVER ({part}{order}) AS r, dense_rank() OVER ({order}) AS d FROM f",
        f"SELECT id, percent_rank() OVER ({part}{order}) AS p, cume_dist() OVER ({part}{order}) AS c FROM f",
        f"SELECT id, lag(v) OVER ({part}{order}, id) AS l, lead(g, 2) OVER ({order}, id) AS n FROM f",
        f"SELECT id, first_value(v) OVER ({part}{order}, id) AS fv, last_value(g) OVER ({part}{order}, id {rows}) AS lv FROM f",
        f"SELECT id, ntile(3) OVER ({order}, id) AS t FROM f",
        f"SELECT id, {agg} OVER ({part}) AS w FROM f",
        f"SELECT {keys[0]} AS a, {keys[1]} AS b, count(*) AS n, sum(v) AS s, grouping({keys[0]}, {keys[1]}) AS gr "
        f"FROM f GROUP BY GROUPING SETS (({keys[0]}), ({keys[1]}), ({keys[0]}, {keys[1]}), ())",
        f"SELECT {keys[0]} AS a, {keys[1]} AS b, count(*) AS n, max(x) AS m FROM f GROUP BY ROLLUP ({keys[0]}, {keys[1]})",
        f"SELECT {keys[0]} AS a, {keys[1]} AS b, sum(v) AS s FROM f GROUP BY CUBE ({keys[0]}, {keys[1]}) HAVING count(*) > 0",
        "SELECT g AS k, sum(v) AS s, rank() OVER (ORDER BY sum(v) NULLS FIRST) AS r FROM f GROUP BY g",
        "SELECT d1.s AS k, f.id, sum(f.v) OVER (PARTITION BY d1.s ORDER BY f.k1 RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) AS w "
        "FROM f JOIN d1 ON f.k1 = d1.k1",
        "SELECT d1.s AS k, count(*) AS n, sum(count(*)) OVER (ORDER BY d1.s NULLS FIRST) AS run FROM f JOIN d1 ON f.k1 = d1.k1 "
        "GROUP BY d1.s",
        "SELECT f.id, d2.b, dense_rank() OVER (PARTITION BY d2.s2 ORDER BY d2.b NULLS FIRST) AS d FROM f LEFT JOIN d2 ON f.k2 = d2.k2",
        f"SELECT d1.a AS a, d2.b AS b, count(*) AS n FROM f JOIN d1 ON f.k1 = d1.k1 JOIN d2 ON f.k2 = d2.k2 "
        f"GROUP BY GROUPING SETS ((d1.a), (d2.b), ())",
        f"SELECT g AS k, k1, sum(v) AS s, grouping(g) AS gg FROM f GROUP BY GROUPING SETS ((g, k1), (g), ()) "
        f"HAVING sum(v) IS NOT NULL OR g IS NULL",
    ]
    return r.choice(forms), None, "sql"


def _breadth(r: random.Random):
    """Stop 46's forms: unnest over columns, zipped unnests, LATERAL unnest/generate_series, IS [NOT] DISTINCT
    FROM correlations, SET/RESET TimeZone, Spark posexplode."""
    if r.random() < 0.15:  # Spark posexplode against DuckDB's zipped unnests
        arrays = r.choice([("k1, 2, NULL", "[k1, 2, NULL]", 3), ("k1, v", "[k1, v]", 2), ("v", "[v]", 1)])
        where = r.choice(["", " WHERE id > 1", " WHERE k1 IS NOT NULL"])
        spark = r.choice([f"SELECT id, posexplode(array({arrays[0]})) AS (p, e) FROM f{where}",
                          f"SELECT id, p, e FROM f LATERAL VIEW posexplode(array({arrays[0]})) t AS p, e{where}",
                          f"SELECT id, p, e FROM f LATERAL VIEW OUTER posexplode(array({arrays[0]})) t AS p, e{where}"])
        duck = f"SELECT id, unnest(range({arrays[2]})) AS p, unnest({arrays[1]}) AS e FROM f{where}"
        return (spark, duck), None, "spark"
    forms = [
        "SELECT id, unnest([k1, k2, NULL]) AS u FROM f",
        "SELECT id, unnest([k1, v]) AS x, unnest([g, 'z', NULL]) AS y FROM f",
        "SELECT f.id, u.ux FROM f, unnest([f.k1, f.v]) u(ux) WHERE u.ux IS NOT NULL",
        "SELECT f.id, u.ux FROM f, unnest([f.k1, f.k2, 3]) u(ux)",
        "SELECT f.id, p FROM f LEFT JOIN LATERAL unnest(string_split(f.g, ',')) u(p) ON true",
        "SELECT f.id, p FROM f, LATERAL unnest(string_split(f.g, ',')) u(p)",
        "SELECT f.id, gx FROM f LEFT JOIN LATERAL generate_series(1, f.k1) s(gx) ON true",
        "SELECT f.id, gx FROM f, LATERAL generate_series(f.k2, 3) s(gx)",
        "SELECT f.id, count(gx) AS n, sum(gx) AS s FROM f LEFT JOIN LATERAL generate_series(1, f.v) s(gx) ON true GROUP BY f.id",
        "SELECT d1.k1, d1.a, gx FROM f JOIN d1 ON f.k1 = d1.k1, LATERAL generate_series(1, d1.a) s(gx)",
        "SELECT f.id, p FROM f LEFT JOIN LATERAL unnest([f.k1, 2]) u(p) ON true",
        "SELECT u, count(*) AS n FROM (SELECT unnest([k1, k2]) AS u FROM f) q GROUP BY u",
        "SELECT id, unnest(generate_series(1, 3)) AS x, unnest([v, k2]) AS y FROM f",
        "SELECT k1, (SELECT count(*) FROM f WHERE f.k1 IS NOT DISTINCT FROM d1.k1) AS n FROM d1",
        "SELECT k1, (SELECT count(*) FROM f WHERE f.k1 IS DISTINCT FROM d1.k1) AS n FROM d1",
        "SELECT k1, a, (SELECT max(f.v) FROM f WHERE f.k1 IS NOT DISTINCT FROM d1.a AND f.v > d1.k1) AS m FROM d1",
        "SELECT * FROM d1 WHERE EXISTS (SELECT 1 FROM f WHERE f.g IS NOT DISTINCT FROM d1.s)",
        "SELECT * FROM d1 WHERE NOT EXISTS (SELECT 1 FROM f WHERE f.k2 IS NOT DISTINCT FROM d1.a AND f.v > 1)",
        "SELECT s, (SELECT count(*) FROM f WHERE f.g IS NOT DISTINCT FROM d1.s AND f.k1 = d1.k1) AS n FROM d1",
        "SELECT d2.s2 AS k, (SELECT sum(f.v) FROM f WHERE f.g IS NOT DISTINCT FROM d2.s2) AS s FROM d2",
    ]
    sql = r.choice(forms)
    if r.random() < 0.2:
        return (r.choice(["SET TimeZone = 'UTC'", "RESET TimeZone", "SET timezone TO 'UTC'"]), sql), None, "script"
    return sql, None, "sql"


def _builder(r: random.Random):
    """A PlanBuilder tree of 3-6 inner hash joins (left-deep or bushy, written in a random order, keys between any
    earlier relation's columns and the new one's, a filter here and there), then a global or grouped aggregation;
    ``how`` "builder" builds it on the engine's side (:func:`_built_plan`), DuckDB runs the SQL it means."""
    n = r.randint(3, 6)
    relations = r.sample(ALIASES, n)
    # each relation: (table, alias, filter or None); each join: (new relation index, its key, earlier key)
    joins, conditions = [], []
    filters = {}
    for i in range(n):
        if r.random() < 0.25:
            filters[i] = f"{relations[i][1]}_{r.choice(INT_COLUMNS[relations[i][0]])} {r.choice(['>=', '<>', '<='])} 1"
    for i in range(1, n):
        new = f"{relations[i][1]}_{r.choice(INT_COLUMNS[relations[i][0]])}"
        j = r.randrange(i)
        old = f"{relations[j][1]}_{r.choice(INT_COLUMNS[relations[j][0]])}"
        joins.append((i, new, old))
        conditions.append(f"{new.replace('_', '.', 1)} = {old.replace('_', '.', 1)}")
    for i, predicate in filters.items():
        conditions.append(predicate.replace("_", ".", 1))
    bushy = n >= 4 and r.random() < 0.4
    aggregated = _int_of(r, r.choice(relations)).replace(".", "_", 1)
    key = _int_of(r, r.choice(relations)).replace(".", "_", 1) if r.random() < 0.5 else None
    spec = {"relations": relations, "joins": joins, "filters": filters, "bushy": bushy, "sum": aggregated, "key": key}
    from_clause = ", ".join(f"{t} {a}" if t != a else t for t, a in relations)
    select = f"count(*) AS n, sum({aggregated.replace('_', '.', 1)}) AS s"
    group = ""
    if key is not None:
        select = f"{key.replace('_', '.', 1)} AS k, " + select
        group = f" GROUP BY {key.replace('_', '.', 1)}"
    return (spec, f"SELECT {select} FROM {from_clause} WHERE {' AND '.join(conditions)}{group}"), None, "builder"


def _built_plan(session, spec):
    """The PlanBuilder plan of :func:`_builder`'s ``spec``: each relation's scan with its columns renamed
    ``alias_column``, joined in the order drawn (left-deep: the chain probes each new relation's build side;
    bushy: the relations after the second half's first joined among themselves where they link, then as one build
    side), the aggregation on top."""
    from gpu_engine.plans import PlanBuilder, PlanNodeIdGenerator

    ids = PlanNodeIdGenerator()
    relations, joins, filters = spec["relations"], spec["joins"], spec["filters"]

    def scan(i):
        table, alias = relations[i]
        columns = INT_COLUMNS[table]
        builder = PlanBuilder(session.catalog, id_generator=ids).table_scan(table, columns).project(
            [f"{c} AS {alias}_{c}" for c in columns])
        return builder.filter(filters[i]) if i in filters else builder

    def names(indexes):
        return [f"{relations[i][1]}_{c}" for i in indexes for c in INT_COLUMNS[relations[i][0]]]

    def chain(indexes):
        """Join ``indexes`` (in order) where each links to one before it in the set; None if one does not."""
        builder, done = scan(indexes[0]), [indexes[0]]
        for i in indexes[1:]:
            link = next(((new, old) for k, new, old in joins if k == i and any(old.startswith(relations[d][1] + "_")
                                                                                 for d in done)), None)
            if link is None:
                return None
            builder = builder.hash_join([link[1]], [link[0]], scan(i).plan(), names(done + [i]))
            done.append(i)
        return builder

    n = len(relations)
    order = list(range(n))
    if spec["bushy"]:
        half = n // 2
        left, right = order[:half], order[half:]
        right_tree = chain(right)
        links = [(new, old) for k, new, old in joins if k in right and any(old.startswith(relations[d][1] + "_")
                                                                          for d in left)]
        if right_tree is not None and links and all(any(old.startswith(relations[d][1] + "_") for d in right + left)
                                                    for k, new, old in joins if k in right):
            left_tree = chain(left)
            if left_tree is not None:
                new, old = links[0]
                builder = left_tree.hash_join([old], [new], right_tree.plan(), names(order))
                extra = [f"{o} = {nw}" for nw, o in links[1:]]
                # the other joins of the right half to the left half: conditions after the join
                for k, nw, o in joins:
                    if k in right and any(o.startswith(relations[d][1] + "_") for d in left) and (nw, o) != links[0] \
                            and f"{o} = {nw}" not in extra:
                        extra.append(f"{o} = {nw}")
                if extra:
                    builder = builder.filter(" AND ".join(extra))
                return _aggregated(builder, spec).plan()
    return _aggregated(chain(order), spec).plan()


def _aggregated(builder, spec):
    if spec["key"] is not None:
        return builder.aggregation([spec["key"]], ["count(*) AS n", f"sum({spec['sum']}) AS s"]).project(
            [f"{spec['key']} AS k", "n", "s"])
    return builder.aggregation([], ["count(*) AS n", f"sum({spec['sum']}) AS s"])


def _mixed(r: random.Random):
    """A query of another family as a subquery: filtered, counted, joined back to d1, or under WHERE false."""
    sql, params, how = r.choice([_joins, _eager, _strkeys, _windows])(r)
    wrap = r.random()
    if wrap < 0.3:
        return f"SELECT * FROM ({sql}) q WHERE false", params, how
    if wrap < 0.6:
        return f"SELECT count(*) AS n FROM ({sql}) q", params, how
    return sql, params, how


FAMILIES = {"joins": _joins, "eager": _eager, "strkeys": _strkeys, "windows": _windows, "breadth": _breadth,
            "mixed": _mixed, "bigbuild": _bigbuild, "builder": _builder}


# ------------------------------------------------------------------------------------------------ knobs
_MEASURED: dict = {}


def _set_eager_setup(zero: bool) -> float:
    """Eager aggregation's set-up cost to 0 or as measured, in whichever module plans it (the SQL rule,
    ``sql/eager_aggregation.py``, or the typed one, ``optimizer/eager_aggregation.py``, where each exists)."""
    import importlib

    value = None
    for name, attribute in (("gpu_engine.optimizer.eager_aggregation", "PRE_AGGREGATION_SETUP"),
                            ("gpu_engine.sql.eager_aggregation", "_PRE_AGGREGATION_SETUP")):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if not hasattr(module, attribute):
            continue
        measured = _MEASURED.setdefault(name, getattr(module, attribute))
        value = 0.0 if zero else measured
        setattr(module, attribute, value)
    return value


def set_knobs(r: random.Random) -> str:
    """Draw this seed's planner knobs (the cost-based rules never fire on tables this small otherwise)."""
    import gpu_engine.optimizer.join_order as join_order
    import gpu_engine.optimizer.partial_steps as partial_steps
    join_order.ORDER_GAIN = float("inf") if r.random() < 0.5 else 0.8
    setup = _set_eager_setup(r.random() < 0.6)
    drop = r.random() < 0.4
    partial_steps.MIN_ESTIMATED_ROWS = 0 if drop else 10_000
    partial_steps.GROUPS_PER_ROW = 0.0 if drop else 0.8
    return (f"gain={join_order.ORDER_GAIN} "
            f"eager_setup={setup} drop_partials={drop}")


def _compare_case(session, connection, sql, params, how):
    """bench.fuzz_round5._compare, with ``how`` "builder" (``sql`` is (spec, DuckDB's text)): the engine executes
    the PlanBuilder plan :func:`_built_plan` makes of the spec."""
    if how != "builder":
        return _compare(session, connection, sql, params, how)
    import traceback

    from duckdb_reference import rows_mismatch
    from gpu_engine.errors import ExecutionError, GpuEngineError

    spec, text = sql
    expected = connection.sql(text).to_arrow_table()
    try:
        actual = session.execute(_built_plan(session, spec))
    except GpuEngineError as error:
        return ("engine_raised" if isinstance(error, ExecutionError) else "refused"), f"{type(error).__name__}: {error}"
    except Exception as error:  # noqa: BLE001 - a raw exception is what the fuzz looks for
        return "crash", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-8)}"
    problem = rows_mismatch(actual, expected, rel_tol=1e-7)
    return ("ok", "") if problem is None else ("wrong", problem)


def run(seeds: range, device: str, families: list[str], verbose: bool, parquet: str | None = None) -> dict:
    import shutil
    import tempfile

    import duckdb

    from duckdb_reference import session_with_tables

    counts = collections.defaultdict(collections.Counter)
    reported, refusals = [], collections.Counter()
    for seed in seeds:
        r = random.Random(seed)
        knobs = set_knobs(r)
        drivers, batch_rows = r.choice([1, 1, 2, 4]), r.choice([1, 2, 4, 7, 65536])
        split_rows = r.choice([1, 2, 3, 100])
        fuse = r.random() < 0.3
        for family in families:
            big = family == "bigbuild"
            data = big_tables(r) if big else tables(r)
            rows = r.choice([1024, 8192, 65536]) if big else batch_rows
            connection = duckdb.connect()
            connection.execute("SET TimeZone='UTC'")
            for name, table in data.items():
                connection.register(name, table)
            folder = None
            if parquet:
                folder = Path(tempfile.mkdtemp(prefix=f"fuzz6-{seed}-"))
                session = _parquet_session(data, folder, r, device=device, drivers=drivers, batch_rows=rows,
                                           fuse=fuse, parquet_reader=parquet)
            else:
                session = session_with_tables(data, split_rows=(r.choice([1000, 4096, 70000]) if big else split_rows),
                                              device=device, drivers=drivers, batch_rows=rows, fuse=fuse)
            sql, params, how = FAMILIES[family](r)
            status, detail = _compare_case(session, connection, sql, params, how)
            counts[family][status] += 1
            if status == "refused":
                refusals[re.sub(r"'[^']*'", "'…'", detail.splitlines()[0])[:140]] += 1
            if status in ("wrong", "crash", "engine_raised", "answered_where_duckdb_raised") or (
                    verbose and status != "ok"):
                case = {"seed": seed, "family": family, "status": status, "sql": sql, "how": how, "knobs": knobs,
                        "drivers": drivers, "batch_rows": rows, "split_rows": split_rows, "fuse": fuse,
                        "why": detail[:2000]}
                reported.append(case)
                print(f"{status.upper()} seed {seed} ({family}/{how}, {knobs}, drivers {drivers}, batch {rows}, "
                      f"split {split_rows}, fuse {fuse}): {sql}\n  {detail[:1500]}", flush=True)
            connection.close()
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
    return {"counts": {f: dict(c) for f, c in counts.items()}, "reported": reported,
            "refusals": dict(refusals.most_common())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:100", help="start:stop")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--verbose", action="store_true", help="print refusals and both-raised cases too")
    parser.add_argument("--parquet", nargs="?", const="auto", default=None, metavar="READER",
                        help="the engine reads the tables from Parquet files (parquet_reader READER, default auto)")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))
    families = args.families.split(",")
    began, cpu_began = time.perf_counter(), time.process_time()
    result = run(range(start, stop), args.device, families, args.verbose, args.parquet)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    total = print_counts(result["counts"], 10,
                         f"  (seeds {start}:{stop} on {args.device}; {elapsed:.0f} s wall, {cpu:.0f} s CPU)")
    for why, n in list(result["refusals"].items())[:25]:
        print(f"  refused {n}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"commit": head_commit(), "seeds": [start, stop], "device": args.device,
                                        "parquet": args.parquet, "seconds": round(elapsed, 1),
                                        "cpu_seconds": round(cpu, 1), **result},
                                       indent=1, ensure_ascii=False, default=str))
    return 1 if total["wrong"] or total["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
