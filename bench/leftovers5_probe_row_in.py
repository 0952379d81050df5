"""Row [NOT] IN (SELECT ...) as a value, under OR / NOT / CASE, correlated, against DuckDB (stop 51, leftovers5).

Random 0-8 row tables with 30% NULLs; drivers 1-3, small splits. Usage: python -m bench.leftovers5_probe_row_in SEEDS [device].
Forms 13 and 16 (a correlated row IN where only TRUE counts) are refused by DuckDB and answered by the engine.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import random
import pyarrow as pa
from duckdb_reference import duckdb_with_tables, session_with_tables
from bench.duckdb_probes import duckdb_probe_problem

def table(rng, n, names):
    cols = {}
    for nm, kind in names:
        vals = [None if rng.random() < 0.3 else rng.randint(1, 3) for _ in range(n)]
        cols[nm] = pa.array(vals if kind == "i" else [None if v is None else "abc"[v-1] for v in vals],
                            pa.int64() if kind == "i" else pa.string())
    return pa.table(cols)

TEMPL = [
 "SELECT a, b, (a, b) IN (SELECT x, y FROM u{W}) AS m FROM t",
 "SELECT a, b, (a, b) NOT IN (SELECT x, y FROM u{W}) AS m FROM t",
 "SELECT a, b FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u{W})",
 "SELECT a, b FROM t WHERE NOT (a, b) IN (SELECT x, y FROM u{W})",
 "SELECT a, b FROM t WHERE (a, b) IN (SELECT x, y FROM u{W}) OR a = 1",
 "SELECT a, b FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u{W}) OR a = 1",
 "SELECT a, b FROM t WHERE NOT ((a, b) IN (SELECT x, y FROM u{W}) OR a = 1)",
 "SELECT a, b, CASE WHEN (a, b) NOT IN (SELECT x, y FROM u{W}) THEN 1 WHEN (a, b) IN (SELECT x, y FROM u{W}) THEN 2 ELSE 3 END AS m FROM t",
 "SELECT a, b, ((a, b) NOT IN (SELECT x, y FROM u{W})) IS NULL AS m FROM t",
 "SELECT a, b, coalesce((a, b) NOT IN (SELECT x, y FROM u{W}), a > 1) AS m FROM t",
 "SELECT a, b FROM t WHERE ((a, b) NOT IN (SELECT x, y FROM u{W})) IS NULL",
 "SELECT a, b FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u{W}) AND a > 1",
 "SELECT a, b FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u WHERE u.x = t.a{A})",
 "SELECT a, b FROM t WHERE (a, b) IN (SELECT x, y FROM u WHERE u.y = t.b{A})",
 "SELECT a, b FROM t WHERE NOT (a, b) IN (SELECT x, y FROM u WHERE u.y = t.b{A})",
 "SELECT a, b, (a, b) NOT IN (SELECT x, y FROM u WHERE u.x = t.a{A}) AS m FROM t",
 "SELECT a, b FROM t WHERE (a, b) IN (SELECT x, y FROM u WHERE u.y = t.b{A}) OR a = 2",
 "SELECT a, b, (a, b, a) NOT IN (SELECT x, y, x FROM u{W}) AS m FROM t",
 "SELECT a, count(*) AS n FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u{W}) GROUP BY a",
 "SELECT t.a, t.b, (t.a, t.b) NOT IN (SELECT x, y FROM u{W}) AS m FROM t LEFT JOIN v ON t.a = v.p",
 "SELECT a, b FROM t WHERE (a, b) NOT IN (SELECT p, q FROM v{WV}) AND (a, b) IN (SELECT x, y FROM u{W})",
]
WH = ["", " WHERE x > 100", " WHERE x IS NOT NULL", " WHERE y IS NOT NULL AND x IS NOT NULL", " WHERE x = 2"]
bad = {}
count = 0
for seed in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
    rng = random.Random(seed)
    T = table(rng, rng.randint(0, 8), [("a", "i"), ("b", "s")])
    U = table(rng, rng.randint(0, 6), [("x", "i"), ("y", "s")])
    V = table(rng, rng.randint(0, 5), [("p", "i"), ("q", "s")])
    tables = {"t": T, "u": U, "v": V}
    con = duckdb_with_tables(tables)
    dev = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    sess = session_with_tables(tables, device=dev, split_rows=rng.choice([None, 2, 3]), drivers=rng.choice([1, 2, 3]))
    for i, tq in enumerate(TEMPL):
        w = rng.choice(WH)
        sql = tq.replace("{W}", w).replace("{WV}", w.replace("x", "p").replace("y", "q")).replace("{A}", rng.choice(["", " AND x > 1", " AND y IS NULL"]))
        p = duckdb_probe_problem(con, sess, sql)
        count += 1
        if p:
            bad.setdefault(i, []).append((seed, sql, p))
for i, l in sorted(bad.items()):
    print(i, len(l), l[0])
print("cases", count, "bad", sum(len(l) for l in bad.values()))
