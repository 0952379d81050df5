"""More row-IN forms (IN lists of tuples, nested, set-operation subqueries, LIMIT, outer joins) against DuckDB (leftovers5).

Usage: python -m bench.leftovers5_probe_row_in_more SEEDS [device].
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
 "SELECT a, b, (a, b) IN ((1, 'a'), (NULL, 'b'), (2, NULL)) AS m, (a, b) NOT IN ((1, 'a'), (NULL, 'b')) AS n FROM t",
 "SELECT a, b FROM t WHERE (a, b) NOT IN ((1, 'a'), (2, NULL))",
 "SELECT * FROM (SELECT a, b, (a, b) NOT IN (SELECT x, y FROM u{W}) AS m FROM t) s WHERE m IS NULL OR m",
 "SELECT (SELECT count(*) FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u{W})) AS n",
 "SELECT a, b FROM t WHERE (a, b) NOT IN (SELECT x, y FROM u{W}) OR a IN (SELECT p FROM v)",
 "SELECT a, b FROM t WHERE (a, b) IN (SELECT x, y FROM u{W}) OR EXISTS (SELECT 1 FROM v WHERE v.p = t.a)",
 "SELECT a, b FROM t WHERE (a, b) IN (SELECT max(x), y FROM u{W} GROUP BY y)",
 "SELECT a, b, (a, b) NOT IN (SELECT max(x), y FROM u{W} GROUP BY y) AS m FROM t",
 "SELECT a, b, (a, b) IN (SELECT x, y FROM u{W} UNION SELECT p, q FROM v) AS m FROM t",
 "SELECT a, b, (a, b) NOT IN (SELECT x, y FROM u{W} EXCEPT SELECT p, q FROM v) AS m FROM t",
 "SELECT a, b, NOT ((a, b) IN (SELECT x, y FROM u{W})) AS m FROM t",
 "SELECT a, b, ((a, b) IN (SELECT x, y FROM u{W})) = ((a, b) IN (SELECT p, q FROM v)) AS m FROM t",
 "SELECT a, b, (a, b) <> ALL (SELECT x, y FROM u{W}) AS m, (a, b) = ANY (SELECT x, y FROM u{W}) AS k FROM t",
 "SELECT a, b FROM t WHERE (a, b) <> ALL (SELECT x, y FROM u{W})",
 "SELECT a, b FROM t WHERE (b, a) NOT IN (SELECT y, x FROM u{W}) AND (a, a) NOT IN (SELECT x, p FROM u, v)",
 "SELECT a, b, (a + 1, b || 'z') NOT IN (SELECT x + 1, y || 'z' FROM u{W}) AS m FROM t",
 "SELECT DISTINCT (a, b) NOT IN (SELECT x, y FROM u{W}) AS m FROM t",
 "SELECT a, b, (a, b) NOT IN (SELECT x, y FROM u{W} LIMIT 2) AS m FROM t",
 "SELECT t.a, v.q, (t.a, v.q) NOT IN (SELECT x, y FROM u{W}) AS m FROM t, v WHERE t.a = v.p",
 "SELECT t.a, v.q, (t.a, v.q) NOT IN (SELECT x, y FROM u{W}) AS m FROM t FULL JOIN v ON t.a = v.p",
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
