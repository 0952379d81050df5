"""Fuzz GROUP BYs over unique keys through joins, late-materialized top N, set operations under joins and
subqueries, Parquet decimals / strings with filters that read statistics, and grouping sets with NULL keys against
DuckDB (fuzz hardening round 13).

Why: stop 53 made a GROUP BY whose input is proven unique on its keys a projection
(``optimizer/unique_groupings.py`` over ``unique_keys.py`` and a column read whole in
``statistics.unique_column``) and fetched a top N's carried strings after it by such a key
(``optimizer/deferred_columns.py``): a wrong proof is a wrong answer, and rounds 1-12 drew their grouping keys from
few values (never unique) and their top N over tables far below the 4,096 rows the late fetch needs. Set
operations were drawn at the top (rounds 9, 12), not as a join's side or inside IN / EXISTS; Parquet files with
writer options (round 11) but decimals of two precisions only and no filter that statistics decide. This round:

- ``unique``: ``a(id, k, s, d, d64, ts, f)`` with ``id`` unique (or with one NULL, or one repeat: nearly
  unique), ``d`` / ``d64`` / ``ts`` unique or not, and ``b(bid, aid, v, w, x)`` whose ``aid`` repeats, is NULL or
  misses ``a``; registered as Arrow, a Parquet file or a pandas frame. GROUP BYs on ``a``'s keys (and its strings)
  over inner / left / right / full joins with ``b`` or a grouped ``b``, keys through derived tables, DISTINCT,
  self joins, filters fixing a key, HAVING, a top N over the groups.
- ``topn``: ``c`` of 4,096-6,000 rows (unique ``id``, strings with NULLs, '' and unicode) joined to ``o``
  (its foreign key, repeating and dangling): ORDER BY ... LIMIT n [OFFSET m] carrying ``c``'s strings, ties on
  the leading keys (ordered by ``id`` last: one answer, compared in order), NULL sort keys, OFFSET past the end.
- ``setjoin``: UNION / INTERSECT / EXCEPT [ALL] of two scans with NULLs and duplicates as a derived table joined
  to a third, inside IN / NOT IN / EXISTS, grouped, and joined to another set operation.
- ``pqdec``: a Parquet file written by pyarrow (row groups of 1..n rows, dictionary or plain or a tiny dictionary
  page limit, statistics on / off per column, data page v1 / v2) of decimals of precisions 1-38 (int32, int64 and
  fixed-length physical types), large strings, all-NULL row groups, dates; filters at the statistics' edges
  (``=`` / ``<`` / ``BETWEEN`` / IN / IS NULL on the min and max of a row group), read through ``read_parquet``
  and a quoted path, grouped and aggregated.
- ``gsets``: GROUPING SETS / ROLLUP / CUBE over keys with NULLs (so a NULL key and a rolled-up one differ only
  in ``grouping()``), HAVING on ``grouping()``, windows over the grouped rows, grouping sets over joins.
- ``strfn``: split_part / regexp_extract / regexp_replace / lpad / rpad / position / strpos / translate / replace /
  repeat / left / right / substring / trim / concat_ws / slicing and the rest of the string library over unicode,
  empty and NULL strings and separators, negative and zero counts, on plain, large and dictionary string columns.

Sessions of 1-3 drivers, batches of 1-7 rows or the default. Comparison: round 10's ``_compare_case`` (round 5's
``_compare``: multisets, floats to 1e-7; ``ordered``: row for row by the outer ORDER BY's keys).

    python -m bench.fuzz_round13 --seeds 0:300 [--device cuda-sim] [--families unique,topn] [--out F]

Prints every wrong case, crash, type difference, engine error where DuckDB answered, or answer where DuckDB raised;
then counts per family and status, and the refusals per family. Exits 1 when any case was wrong or crashed.
"""

from __future__ import annotations

import datetime
import decimal
import random
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.fuzz_round10 import _compare_case  # noqa: E402 (after the path it needs)
from bench.fuzz_round11 import _duckdb, _session, _types_differ_loosely  # noqa: E402
from bench.sql_fuzz import REPORTED_STATUSES, family_fuzz_main, run_family_cases  # noqa: E402

TEXTS = ["", "a", "A", "b", "é", "日本", "x😀y", "zz", " a", "a ", "Straße", "ΣΑΣ", "long " * 12]


def _nullable(r: random.Random, value, p: float):
    return None if r.random() < p else value


# ------------------------------------------------------------------------------------------------ unique
def _unique_tables(r: random.Random, folder: Path) -> dict:
    import pyarrow as pa

    rows = r.choice([1, 2, 5, 9, 30, 200])
    ids = r.sample(range(-5, rows * 3), rows)
    flaw = r.choice(["none", "none", "none", "null", "repeat", "two_nulls"])
    if flaw == "null":
        ids[r.randrange(rows)] = None
    elif flaw == "repeat" and rows > 1:
        ids[r.randrange(rows)] = ids[r.randrange(rows)]
    elif flaw == "two_nulls" and rows > 1:
        ids[0] = ids[-1] = None
    base = datetime.date(2024, 2, 27)
    day_unique = r.random() < 0.6
    days = [base + datetime.timedelta(days=(i if day_unique else r.randrange(3))) for i in range(rows)]
    r.shuffle(days)
    stamps = [datetime.datetime(2024, 2, 29, 23, 59) + datetime.timedelta(microseconds=r.choice([1, 1000, 10 ** 6]) * i)
              for i in range(rows)]
    d64 = [(d - datetime.date(1970, 1, 1)).days * 86_400_000 + r.choice([0, 0, 1, 3_600_000]) for d in days]
    a = pa.table({
        "id": pa.array(ids, pa.int64()),
        "k": pa.array([_nullable(r, r.randrange(3), 0.15) for _ in range(rows)], pa.int32()),
        "s": pa.array([_nullable(r, r.choice(TEXTS), 0.15) for _ in range(rows)], pa.string()),
        "d": pa.array([_nullable(r, d, 0.05) for d in days], pa.date32()),
        "d64": pa.array(d64, pa.date64()),
        "ts": pa.array([_nullable(r, t, 0.05) for t in stamps], pa.timestamp("us")),
        "f": pa.array([_nullable(r, r.choice([-0.0, 0.0, 1.5, float("nan"), 2.0]), 0.1) for _ in range(rows)], pa.float64()),
    })
    b_rows = r.choice([0, 1, 4, 12, 60, 400])
    known = [i for i in ids if i is not None] or [0]
    b = pa.table({
        "bid": pa.array(r.sample(range(b_rows * 2 + 1), b_rows), pa.int64()),
        "aid": pa.array([None if r.random() < 0.1 else (r.choice(known) if r.random() < 0.85 else 10 ** 6)
                         for _ in range(b_rows)], pa.int64()),
        "v": pa.array([_nullable(r, r.randrange(-3, 10), 0.1) for _ in range(b_rows)], pa.int64()),
        "w": pa.array([_nullable(r, r.choice(TEXTS), 0.2) for _ in range(b_rows)], pa.string()),
        "x": pa.array([_nullable(r, r.choice([0.0, -0.0, 1.5, 2.0]), 0.1) for _ in range(b_rows)], pa.float64()),
    })
    return {"a": _as_form(r, "a", a, folder), "b": _as_form(r, "b", b, folder)}


def _as_form(r: random.Random, name: str, table, folder: Path):
    """Register ``table`` as drawn: the Arrow table, a Parquet file (row groups of a few rows), or a pandas frame."""
    form = r.choice(["arrow", "arrow", "parquet", "pandas"])
    if form == "parquet":
        import pyarrow.parquet as pq

        path = folder / f"{name}-{r.getrandbits(48):x}.parquet"
        pq.write_table(table, path, row_group_size=r.choice([1, 3, 64, 10_000]))
        return path
    if form == "pandas" and not any(str(t).startswith("date64") for t in table.schema.types):
        return table.to_pandas()
    return table


A_KEYS = ["a.id", "a.id", "a.id", "a.d", "a.ts", "a.d64", "a.id, a.s", "a.id, a.k", "a.d, a.s", "a.id, a.d, a.ts"]
JOINS = ["JOIN", "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]
A_AGGS = ["count(*)", "count(b.v)", "sum(b.v)", "min(b.w)", "max(b.w)", "max(a.k)", "avg(b.x)", "sum(a.f)",
          "count(DISTINCT b.w)", "max(a.s)", "min(a.ts)", "sum(b.x)", "avg(a.f)", "string_agg(b.w, ',' ORDER BY b.w)"]


#: GROUP BYs whose keys are unique through more than one join, a semi join, a CTE read twice, a NULL-safe or
#: two-key join, a LIMIT 1 side, a window above or a UNION ALL below (a proof must not survive that).
UNIQUE_MORE = [
    "SELECT a.id, g.c, count(*) AS n, max(b.w) AS m FROM a JOIN b ON a.id = b.aid JOIN (SELECT aid, count(*) AS c "
    "FROM b GROUP BY aid) g ON g.aid = a.id GROUP BY a.id, g.c",
    "SELECT a.id, a.s, count(*) AS n FROM a WHERE a.id IN (SELECT aid FROM b) GROUP BY a.id, a.s",
    "SELECT a.id, a.s, count(*) AS n FROM a WHERE a.id NOT IN (SELECT aid FROM b WHERE aid IS NOT NULL) GROUP BY a.id, a.s",
    "SELECT a.id, count(*) AS n, sum(b.v) AS t FROM a JOIN b ON a.id = b.aid AND a.k = b.v GROUP BY a.id",
    "SELECT a.id, count(*) AS n, min(b.w) AS t FROM a JOIN b ON a.id = b.bid GROUP BY a.id",
    "SELECT a.id, count(*) AS n, min(b.w) AS t FROM a LEFT JOIN b ON a.id = b.bid GROUP BY a.id",
    "WITH g AS (SELECT aid, sum(v) AS t FROM b GROUP BY aid) SELECT g1.aid, count(*) AS n, max(g2.t) AS t "
    "FROM g g1 JOIN g g2 ON g1.aid = g2.aid GROUP BY g1.aid",
    "WITH g AS (SELECT aid, sum(v) AS t FROM b GROUP BY aid) SELECT g1.t, count(*) AS n FROM g g1 JOIN g g2 "
    "ON g1.aid = g2.aid GROUP BY g1.t",
    "SELECT id, n, rank() OVER (ORDER BY n, id) AS r FROM (SELECT a.id, count(*) AS n FROM a JOIN b ON a.id = b.aid "
    "GROUP BY a.id) z",
    "SELECT CAST(a.id AS INTEGER) AS i, count(*) AS n FROM a JOIN b ON a.id = b.aid GROUP BY CAST(a.id AS INTEGER)",
    "SELECT a.id + 0 AS i, count(*) AS n FROM a GROUP BY a.id + 0",
    "SELECT a.id, count(*) AS n, count(b.bid) AS c FROM a LEFT JOIN b ON a.id IS NOT DISTINCT FROM b.aid GROUP BY a.id",
    "SELECT id, count(*) AS n FROM (SELECT id FROM a UNION ALL SELECT id FROM a WHERE k = 1) z GROUP BY id",
    "SELECT a.id, count(*) AS n FROM a JOIN (SELECT * FROM b ORDER BY bid LIMIT 1) b1 ON a.id = b1.aid OR a.k = 1 GROUP BY a.id",
    "SELECT a.id, a.d, count(*) AS n FROM a, (SELECT max(v) AS mv FROM b) m WHERE a.k <= m.mv OR m.mv IS NULL GROUP BY a.id, a.d",
    "SELECT b.aid, count(*) AS n, sum(a.k) AS t FROM b JOIN a ON a.id = b.aid WHERE b.bid = 3 GROUP BY b.aid",
    "SELECT a.ts, count(*) AS n FROM a JOIN a a2 ON a.ts = a2.ts GROUP BY a.ts",
    "SELECT a.d64, count(*) AS n, min(a.id) AS m FROM a GROUP BY a.d64",
    "SELECT a.d64, a.s, count(*) AS n FROM a JOIN b ON a.id = b.aid GROUP BY a.d64, a.s",
    "SELECT z.id, count(*) AS n FROM (SELECT a.id FROM a JOIN b ON a.id = b.aid) z GROUP BY z.id",
    "SELECT a.id, count(DISTINCT b.aid) AS n FROM a FULL JOIN b ON a.id = b.aid GROUP BY a.id",
    "SELECT b.bid, a.id, count(*) AS n FROM b LEFT JOIN a ON a.d = DATE '2024-02-27' + CAST(b.v AS INTEGER) GROUP BY b.bid, a.id",
]


def _unique_query(r: random.Random) -> tuple[str, str]:
    if r.random() < 0.4:
        return r.choice(UNIQUE_MORE), "sql"
    keys = r.choice(A_KEYS)
    aggs = ", ".join(f"{r.choice(A_AGGS)} AS g{i}" for i in range(r.randint(1, 3)))
    shape = r.random()
    where = r.choice(["", "", " WHERE a.k = 1", " WHERE b.bid = 3", " WHERE a.id IS NOT NULL", " WHERE b.v > 0"])
    if shape < 0.3:
        join = r.choice(JOINS)
        sql = f"SELECT {keys}, {aggs} FROM a {join} b ON a.id = b.aid{where} GROUP BY {keys}"
    elif shape < 0.45:  # b grouped per aid: each a row meets at most one grouped row
        join = r.choice(["JOIN", "LEFT JOIN"])
        agg = r.choice(["sum(v)", "count(*)", "max(w)", "min(x)"])
        sql = (f"SELECT {keys}, count(*) AS n, max(g.t) AS t FROM a {join} (SELECT aid, {agg} AS t FROM b GROUP BY aid) g "
               f"ON a.id = g.aid GROUP BY {keys}")
    elif shape < 0.55:  # a's key through a derived table
        inner = r.choice(["SELECT id AS i, s, d, k FROM a", "SELECT DISTINCT id AS i, s, d, k FROM a",
                          "SELECT id AS i, max(s) AS s, max(d) AS d, max(k) AS k FROM a GROUP BY id",
                          "SELECT id AS i, s, d, k FROM a WHERE id > 0", "SELECT id AS i, s, d, 7 AS k FROM a"])
        gk = r.choice(["i", "i, s", "d", "i, k", "k, i"])
        sql = f"SELECT {gk}, count(*) AS n, min(s) AS m FROM ({inner}) z GROUP BY {gk}"
    elif shape < 0.65:
        sql = f"SELECT DISTINCT {keys}{', b.w' if r.random() < 0.3 else ''} FROM a {r.choice(JOINS)} b ON a.id = b.aid{where}"
    elif shape < 0.72:  # self join on the key
        column = r.choice(['id', 'd', 'ts', 'd64'])
        sql = (f"SELECT a.id, a.s, count(*) AS n, sum(a2.k) AS t FROM a JOIN a AS a2 ON a.{column} = a2.{column} "
               f"GROUP BY a.id, a.s")
    elif shape < 0.8:  # b's own unique key through a join with a grouped side of float keys
        sql = (f"SELECT b.bid, count(*) AS n, sum(z.c) AS c FROM b JOIN (SELECT f, count(*) AS c FROM a GROUP BY f) z "
               f"ON b.x = z.f GROUP BY b.bid")
    elif shape < 0.9:
        having = r.choice(["count(*) > 1", "sum(b.v) IS NULL", "min(b.w) <> ''", "count(b.bid) = 0"])
        sql = f"SELECT {keys}, {aggs} FROM a {r.choice(JOINS)} b ON a.id = b.aid GROUP BY {keys} HAVING {having}"
    else:  # a top N over the groups, ordered by every output column: one multiset
        names = [k.split(".")[1] for k in keys.split(", ")]
        n = r.choice([1, 2, 5])
        sql = (f"SELECT {keys}, count(*) AS n FROM a {r.choice(JOINS)} b ON a.id = b.aid GROUP BY {keys} "
               f"ORDER BY n DESC, {', '.join(names)} LIMIT {n}{r.choice(['', ' OFFSET 1', ' OFFSET 3'])}")
        return sql, "ordered_all"
    return sql, "sql"


# ------------------------------------------------------------------------------------------------ topn
def _topn_tables(r: random.Random, folder: Path) -> dict:
    import pyarrow as pa

    rows = r.randint(4096, 6000)
    ids = list(range(rows))
    r.shuffle(ids)
    c = pa.table({
        "id": pa.array(ids, pa.int64()),
        "grp": pa.array([_nullable(r, r.randrange(4), 0.1) for _ in range(rows)], pa.int64()),
        "name": pa.array([_nullable(r, f"n{r.randrange(rows)}", 0.05) for _ in range(rows)], pa.string()),
        "note": pa.array([_nullable(r, r.choice(TEXTS), 0.2) for _ in range(rows)], pa.string()),
        "bal": pa.array([_nullable(r, round(r.uniform(-10, 10), r.choice([0, 2])), 0.05) for _ in range(rows)], pa.float64()),
    })
    o_rows = r.choice([0, 50, 3000, 9000])
    o = pa.table({
        "oid": pa.array(range(o_rows), pa.int64()),
        "cid": pa.array([None if r.random() < 0.05 else (r.randrange(rows) if r.random() < 0.9 else rows + 5)
                         for _ in range(o_rows)], pa.int64()),
        "amt": pa.array([_nullable(r, r.randrange(1, 50), 0.05) for _ in range(o_rows)], pa.int64()),
        "tag": pa.array([r.choice(["p", "q", "é"]) for _ in range(o_rows)], pa.string()),
    })
    return {"c": _as_form(r, "c", c, folder), "o": _as_form(r, "o", o, folder)}


def _topn_query(r: random.Random) -> tuple[str, str]:
    n = r.choice([1, 3, 10, 20, 100, 400])
    offset = r.choice(["", "", f" OFFSET {r.choice([1, 5, 7000])}"])
    direction = r.choice(["", " DESC"]) + r.choice(["", " NULLS FIRST", " NULLS LAST"])
    carried = r.choice(["c.name, c.note", "c.note", "c.name", "c.note AS nn, c.name AS nm", "c.name, c.note, c.grp"])
    shape = r.random()
    if shape < 0.4:
        where = r.choice(["", " WHERE o.amt > 10", " WHERE c.grp = 1", " WHERE o.tag = 'é'", " WHERE c.bal > 0"])
        sql = (f"SELECT c.id, {carried}, o.amt, o.oid FROM c JOIN o ON c.id = o.cid{where} "
               f"ORDER BY o.amt{direction}, c.id, o.oid LIMIT {n}{offset}")
        return sql, "ordered"
    if shape < 0.75:  # the q10 shape: grouped per customer, carried strings out of the grouping keys
        sql = (f"SELECT c.id, {carried}, sum(o.amt) AS rev, count(*) AS n FROM c JOIN o ON c.id = o.cid "
               f"{r.choice(['', 'WHERE o.tag <> ' + repr('q') + ' '])}GROUP BY c.id, {carried.replace(' AS nn', '').replace(' AS nm', '')} "
               f"ORDER BY rev{direction}, c.id LIMIT {n}{offset}")
        return sql, "ordered"
    if shape < 0.9:
        sql = f"SELECT c.id, {carried}, c.bal FROM c ORDER BY c.bal{direction}, c.id LIMIT {n}{offset}"
        return sql, "ordered"
    sql = (f"SELECT id, {carried.replace('c.', 'z.')} FROM (SELECT c.id, {carried.replace(' AS nn', '').replace(' AS nm', '')}, "
           f"c.grp AS g2 FROM c WHERE c.id % 3 = 0) z ORDER BY g2{direction}, id LIMIT {n}{offset}")
    return sql, "ordered"


# ------------------------------------------------------------------------------------------------ setjoin
def _set_tables(r: random.Random) -> dict:
    import pyarrow as pa

    def table(rows):
        return pa.table({
            "k": pa.array([_nullable(r, r.randrange(4), 0.2) for _ in range(rows)], pa.int64()),
            "s": pa.array([_nullable(r, r.choice(["a", "b", "", "é"]), 0.2) for _ in range(rows)], pa.string()),
            "v": pa.array([_nullable(r, r.randrange(-2, 3), 0.2) for _ in range(rows)], pa.int64()),
        })

    return {name: table(r.choice([0, 1, 3, 8, 20])) for name in ("p", "q", "m")}


SET_OPS = ["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]


def _setop(r: random.Random, columns: str = "k, s") -> str:
    left, right = r.sample(["p", "q", "m"], 2)
    lw = r.choice(["", " WHERE v > 0", " WHERE k IS NULL OR v < 1"])
    return f"SELECT {columns} FROM {left}{lw} {r.choice(SET_OPS)} SELECT {columns} FROM {right}"


def _setjoin_query(r: random.Random) -> tuple[str, str]:
    shape = r.random()
    join = r.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
    if shape < 0.3:
        on = r.choice(["z.k = m.k", "z.k = m.k AND z.s = m.s", "z.s = m.s", "z.k IS NOT DISTINCT FROM m.k"])
        return f"SELECT z.k, z.s, m.v FROM ({_setop(r)}) z {join} m ON {on}", "sql"
    if shape < 0.5:
        column = r.choice(["k", "s"])
        neg = r.choice(["", "NOT "])
        return f"SELECT k, s, v FROM m WHERE {column} {neg}IN (SELECT {column} FROM p {r.choice(SET_OPS)} SELECT {column} FROM q)", "sql"
    if shape < 0.65:
        neg = r.choice(["", "NOT "])
        return (f"SELECT k, s FROM m WHERE {neg}EXISTS (SELECT 1 FROM (SELECT k FROM p {r.choice(SET_OPS)} "
                f"SELECT k FROM q) z WHERE z.k = m.k)"), "sql"
    if shape < 0.8:
        return (f"SELECT z.k, count(*) AS n, count(z.s) AS c, max(z.s) AS mx FROM ({_setop(r)}) z GROUP BY z.k", "sql")
    if shape < 0.9:
        return (f"SELECT y.k, y.s, z.s AS s2 FROM ({_setop(r)}) y {join} ({_setop(r)}) z ON y.k = z.k", "sql")
    return (f"SELECT k, s FROM ({_setop(r)}) z {r.choice(SET_OPS)} SELECT k, s FROM m WHERE k IN "
            f"(SELECT k FROM p {r.choice(SET_OPS)} SELECT k FROM q)"), "sql"


# ------------------------------------------------------------------------------------------------ pqdec
PRECISIONS = [1, 2, 4, 5, 9, 10, 12, 18, 19, 20, 28, 38]


def _pq_table(r: random.Random, folder: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = r.choice([1, 7, 40, 300])
    precision = r.choice(PRECISIONS)
    scale = r.randint(0, min(precision, 6))
    top = 10 ** precision - 1
    edges = [top, -top, 0, 1, -1, top // 2]

    def dec(value):  # exact: scaleb would round to the context's 28 digits
        return decimal.Decimal(f"{value}E-{scale}")

    all_null_from = rows // 2 if r.random() < 0.25 else rows  # the file's second half NULL: all-NULL row groups
    sorted_rows = r.random() < 0.5
    values = [r.choice(edges) if r.random() < 0.3 else r.randrange(-top, top + 1) for _ in range(rows)]
    if sorted_rows:
        values.sort()
    table = pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "m": pa.array([None if i >= all_null_from or r.random() < 0.1 else dec(v) for i, v in enumerate(values)],
                      pa.decimal128(precision, scale)),
        "n": pa.array([_nullable(r, dec(r.randrange(-999, 1000) % (top + 1)), 0.1) for _ in range(rows)],
                      pa.decimal128(precision, scale)),
        "ls": pa.array([None if i >= all_null_from else _nullable(r, r.choice(TEXTS), 0.15) for i in range(rows)],
                       pa.large_string()),
        "s": pa.array(sorted([r.choice(TEXTS) for _ in range(rows)]) if sorted_rows else
                      [_nullable(r, r.choice(TEXTS), 0.1) for _ in range(rows)], pa.string()),
        "d": pa.array([_nullable(r, datetime.date(2024, 1, 1) + datetime.timedelta(days=i * r.choice([1, 40]) % 900), 0.1)
                       for i in range(rows)], pa.date32()),
    })
    options = {"row_group_size": r.choice([1, 2, 5, 64, 1000]),
               "use_dictionary": r.choice([True, False, ["s", "ls"], ["m"]]),
               "write_statistics": r.choice([True, True, False, ["m", "s"], ["id", "d"]]),
               "data_page_version": r.choice(["1.0", "2.0"]),
               "store_decimal_as_integer": r.random() < 0.5}
    if r.random() < 0.3:
        options["dictionary_pagesize_limit"] = 64
        options["data_page_size"] = 128
    path = folder / f"pq-{r.getrandbits(48):x}.parquet"
    pq.write_table(table, path, **options)
    return path, table, options


def _pq_query(r: random.Random, path: Path, table) -> tuple[str, str]:
    source = r.choice([f"read_parquet('{path}')", f"'{path}'"])
    m = [v for v in table.column("m").to_pylist() if v is not None]
    s = [v for v in table.column("s").to_pylist() if v is not None]
    d = [v for v in table.column("d").to_pylist() if v is not None]
    point = str(r.choice(m)) if m and r.random() < 0.8 else "0"
    text = (r.choice(s) if s and r.random() < 0.8 else "m").replace("'", "''")
    day = str(r.choice(d)) if d else "2024-01-01"
    op = r.choice(["=", "<", "<=", ">", ">=", "<>"])
    predicate = r.choice([
        f"m {op} {point}", f"m BETWEEN {point} AND {point}", f"m IN ({point}, 0)", "m IS NULL", "m IS NOT NULL",
        f"n {op} {point}", f"s {op} '{text}'", f"ls {op} '{text}'", f"ls IS NULL", f"s IN ('{text}', '')",
        f"d {op} DATE '{day}'", f"d BETWEEN DATE '{day}' AND DATE '{day}' + 30", f"m {op} {point} AND s >= '{text}'",
        f"m {op} {point} OR ls IS NULL", f"m > n", f"CAST(m AS DOUBLE) {op} {point}", f"m {op} CAST({point} AS DOUBLE)",
        f"id {op} 3", f"m * 2 {op} {point}", f"m + n IS NOT NULL",
    ])
    shape = r.random()
    if shape < 0.5:
        return f"SELECT id, m, ls FROM {source} WHERE {predicate}", "sql"
    if shape < 0.75:
        return (f"SELECT count(*) AS c, sum(m) AS sm, min(n) AS mn, max(ls) AS mx, avg(m) AS am FROM {source} "
                f"WHERE {predicate}"), "sql"
    if shape < 0.9:
        return f"SELECT s, count(*) AS c, sum(m) AS sm, max(m) AS mm FROM {source} WHERE {predicate} GROUP BY s", "sql"
    return f"SELECT id, m, n FROM {source} WHERE {predicate} ORDER BY m DESC NULLS LAST, id LIMIT 5", "ordered"


# ------------------------------------------------------------------------------------------------ gsets
def _gsets_tables(r: random.Random) -> dict:
    import pyarrow as pa

    rows = r.choice([0, 1, 5, 20, 80])
    return {"g": pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "a": pa.array([_nullable(r, r.randrange(3), 0.25) for _ in range(rows)], pa.int64()),
        "b": pa.array([_nullable(r, r.choice(["x", "y", ""]), 0.25) for _ in range(rows)], pa.string()),
        "c": pa.array([_nullable(r, datetime.date(2024, 2, 28) + datetime.timedelta(days=r.randrange(3)), 0.2)
                       for _ in range(rows)], pa.date32()),
        "v": pa.array([_nullable(r, r.randrange(-5, 20), 0.1) for _ in range(rows)], pa.int64()),
    }), "h": pa.table({"a": pa.array([0, 1, None, 1], pa.int64()), "w": pa.array(["p", "q", "r", None], pa.string())})}


def _gsets_query(r: random.Random) -> tuple[str, str]:
    group = r.choice(["ROLLUP (a, b)", "CUBE (a, b)", "GROUPING SETS ((a), (b), ())", "GROUPING SETS ((a, b), (a), (c))",
                      "ROLLUP (a, b, c)", "a, ROLLUP (b)", "CUBE (a, c)", "GROUPING SETS ((a), (a, b), ())"])
    names = [n for n in "abc" if n in group.replace("CUBE", "").replace("ROLLUP", "").replace("GROUPING SETS", "")]
    gcall = f"grouping({', '.join(names)})"
    aggs = r.choice(["count(*) AS n, sum(v) AS t", "count(v) AS n, max(v) AS t", "count(DISTINCT b) AS n, min(v) AS t",
                     "sum(v) FILTER (WHERE v > 0) AS n, count(*) AS t"])
    shape = r.random()
    keys = ", ".join(names)
    if shape < 0.35:
        having = r.choice(["", f" HAVING {gcall} = 0", f" HAVING grouping(a) = 1", f" HAVING {gcall} > 0 AND count(*) > 1",
                           " HAVING a IS NULL"])
        if "grouping(a)" in having and "a" not in names:
            having = ""
        return f"SELECT {keys}, {gcall} AS gid, {aggs} FROM g GROUP BY {group}{having}", "sql"
    if shape < 0.6:
        window = r.choice([f"sum(sum(v)) OVER (PARTITION BY {gcall})", f"rank() OVER (PARTITION BY {gcall} ORDER BY count(*) DESC)",
                           f"count(*) OVER (PARTITION BY {names[0]})", f"row_number() OVER (ORDER BY {gcall}, {', '.join(f'{n} NULLS FIRST' for n in names)})"])
        return f"SELECT {keys}, {gcall} AS gid, {window} AS w FROM g GROUP BY {group}", "sql"
    if shape < 0.8:
        return (f"SELECT {keys}, {gcall} AS gid, count(h.w) AS n, count(*) AS t "
                f"FROM g {r.choice(['JOIN', 'LEFT JOIN'])} (SELECT a AS ha, w FROM h) h ON g.a = h.ha GROUP BY {group}"), "sql"
    return (f"SELECT gid, count(*) AS groups, sum(n) AS n FROM (SELECT {gcall} AS gid, {aggs} FROM g GROUP BY {group}) z "
            f"GROUP BY gid"), "sql"


# ------------------------------------------------------------------------------------------------ strfn
SF_TEXTS = ["", " ", "a", "é", "ÉÉ", "ß", "日本語", "😀", "x😀y😀", "a,b,,c", ",", "  pad  ", "AbC", "ﬁ", "İ", "ǅ", "a\tb",
            "--x--", "abcabc", "Σσς", "naïve café", "0", "-12.5", "%_", "\\"]


def _sf_table(r: random.Random):
    import pyarrow as pa

    rows = r.choice([0, 1, 6, 25])
    kind = r.choice([pa.string(), pa.string(), pa.large_string()])
    column = pa.array([_nullable(r, r.choice(SF_TEXTS), 0.15) for _ in range(rows)], kind)
    if r.random() < 0.3:
        column = column.dictionary_encode()
    return {"st": pa.table({"id": pa.array(range(rows), pa.int64()), "s": column,
                            "t": pa.array([_nullable(r, r.choice(SF_TEXTS), 0.15) for _ in range(rows)], pa.string()),
                            "n": pa.array([_nullable(r, r.choice([-3, -1, 0, 1, 2, 5, 100]), 0.1) for _ in range(rows)],
                                          pa.int64())})}


def _sf_literal(r: random.Random) -> str:
    return "'" + r.choice(SF_TEXTS).replace("'", "''") + "'"


def _sf_expr(r: random.Random) -> str:
    x = r.choice(["s", "s", "t", _sf_literal(r), "NULL::VARCHAR", "lower(s)", "s || t"])
    y = r.choice(["t", _sf_literal(r), _sf_literal(r), "''", "NULL::VARCHAR"])
    n = r.choice(["n", "0", "1", "2", "-1", "-2", "3", "NULL::BIGINT"])
    return r.choice([
        f"split_part({x}, {y}, {n})", f"split_part({x}, ',', {n})", f"split_part({x}, '', {n})",
        f"regexp_extract({x}, '{r.choice(['(a)(b)?', '([^,]*),', '(.)', '^(.*)$', '😀(.)', '(é|ß)'])}', {r.choice(['0', '1', '2'])})",
        f"regexp_replace({x}, '{r.choice(['.', 'a|é', '^', '$', ''])}', '{r.choice(['', '-', '😀'])}', 'g')",
        f"lpad({x}, {n}, {y})", f"rpad({x}, {n}, {y})", f"lpad({x}, {r.choice(['3', '5', '0'])}, '😀é')",
        f"position({y} IN {x})", f"strpos({x}, {y})", f"instr({x}, {y})",
        f"translate({x}, {y}, {_sf_literal(r)})", f"translate({x}, 'aé😀', 'A')", f"translate({x}, 'a', 'xyz')",
        f"replace({x}, {y}, {_sf_literal(r)})", f"repeat({x}, {n})", f"left({x}, {n})", f"right({x}, {n})",
        f"substring({x}, {n}, {r.choice(['1', '2', '0', '-1', '100'])})", f"substring({x}, {n})",
        f"concat_ws({y}, {x}, t, NULL)", f"concat({x}, NULL, {y})", f"{x} || {y}",
        f"trim({x}, {y})", f"ltrim({x}, '{r.choice(['-', ' ', 'a', '😀', ''])}')", f"rtrim({x})",
        f"starts_with({x}, {y})", f"ends_with({x}, {y})", f"contains({x}, {y})", f"prefix({x}, {y})", f"suffix({x}, {y})",
        f"length({x})", f"strlen({x})", f"octet_length({x})", f"bit_length({x})", f"reverse({x})", f"ascii({x})",
        f"unicode({x})", f"upper({x})", f"lower({x})", f"initcap({x})" if False else f"ucase({x})",
        f"chr({r.choice(['65', '233', '128512', '0' if False else '97'])})", f"md5({x})", f"levenshtein({x}, {y})",
        f"hamming({x}, {x})", f"{x} < {y}", f"{x} = {y}", f"greatest({x}, {y})", f"least({x}, {y}, 'm')",
        f"format('{{}}-{{}}', {x}, {n})", f"printf('%s|%5s', {x}, {y})", f"strip_accents({x})", f"nfc_normalize({x})",
        f"({x})[{r.choice(['1', '2', '-1', '0'])}]", f"({x})[{r.choice(['1', '2', '-2'])}:{r.choice(['2', '3', '-1'])}]",
        f"array_extract({x}, {n})", f"like_escape({x}, '%', '\\')" if False else f"{x} LIKE {y}",
        f"to_base64(CAST({x} AS BLOB))" if False else f"lcase({x})",
    ])


def _strfn_query(r: random.Random) -> tuple[str, str]:
    shape = r.random()
    exprs = [f"{_sf_expr(r)} AS e{i}" for i in range(r.randint(1, 3))]
    if shape < 0.6:
        return f"SELECT id, {', '.join(exprs)} FROM st", "sql"
    if shape < 0.8:
        return f"SELECT id FROM st WHERE CAST(({_sf_expr(r)}) AS VARCHAR) >= 'a'", "sql"
    key = _sf_expr(r)
    return f"SELECT {key} AS g, count(*) AS c FROM st GROUP BY {key}", "sql"


# ------------------------------------------------------------------------------------------------ run
FAMILIES = ("unique", "topn", "setjoin", "pqdec", "gsets", "strfn")


def _case(family: str, r: random.Random, folder: Path):
    """Draw one case: (tables, sql, how, settings)."""
    drivers = r.choice([1, 2, 3])
    settings = {"drivers": drivers, "batch_rows": r.choice([1, 2, 7, None]), "split_rows": r.choice([3, 7, 100])}
    if family == "unique":
        data = _unique_tables(r, folder)
        sql, how = _unique_query(r)
    elif family == "topn":
        data = _topn_tables(r, folder)
        settings.update(batch_rows=r.choice([7, 100, None]), split_rows=r.choice([500, 2048, None]))
        sql, how = _topn_query(r)
    elif family == "setjoin":
        data = _set_tables(r)
        sql, how = _setjoin_query(r)
    elif family == "pqdec":
        path, table, options = _pq_table(r, folder)
        data = {"f": path}
        settings.update(split_rows=None, options={k: v for k, v in options.items() if k != "row_group_size"},
                        row_group_size=options["row_group_size"])
        sql, how = _pq_query(r, path, table)
    elif family == "gsets":
        data = _gsets_tables(r)
        sql, how = _gsets_query(r)
    else:
        data = _sf_table(r)
        sql, how = _strfn_query(r)
    if settings["batch_rows"] in (1, 2) and family in ("unique",) and sql.count("JOIN") > 1:
        settings["batch_rows"] = 7
    settings["forms"] = {name: type(t).__name__ for name, t in data.items()}
    return data, sql, how, settings


def _compare13(session, connection, sql, how):
    status, detail = _compare_case(session, connection, sql, "sql" if how == "ordered_all" else how)
    if status == "type" and _types_differ_loosely(detail):
        return "ok", ""
    return status, detail


def run(seeds: range, device: str, families: list[str], verbose: bool) -> dict:
    return run_family_cases(
        seeds, device, families, verbose, _case,
        lambda data, device, s: _session(data, device, s["drivers"], s["batch_rows"], s["split_rows"]), _duckdb,
        _compare13, REPORTED_STATUSES + ("type", "both_raised_raw"))


def main(argv=None) -> int:
    return family_fuzz_main(argv, __doc__.splitlines()[0], FAMILIES, run, refusals_shown=10)


if __name__ == "__main__":
    sys.exit(main())
