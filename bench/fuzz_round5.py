"""Fuzz what rounds 1-4 drew little against DuckDB (fuzz hardening round 5): TIMESTAMPTZ/TIME columns, bind
parameters and prepared statements, views and CREATE TABLE AS, VALUES sources, Spark-dialect functions, string
functions on dictionary columns with empty or all-NULL dictionaries, LIMIT/OFFSET over ties, empty tables.

Why: round 4 (bench/recent_construct_fuzz.py) drew windows, grouping sets, set operations, Unnest, semi joins and
decimals over BIGINT/VARCHAR/DECIMAL columns only; the zoned and time-of-day types came last session, parameters
are bound into the text (gpu_engine/sql/parameters.py) where a NULL or a type mix could change a plan, and views
are expanded inline. Each seed draws two tables of 0-9 rows (0 rows a quarter of the time), with few distinct
values so keys tie, NULLs anywhere but ``t.id``, string columns dictionary-encoded (sometimes with an empty
dictionary: every row NULL), a session of 1-4 drivers with 1, 2, 4 or 65536 batch rows, and one query per family.
DuckDB runs with ``SET TimeZone='UTC'`` (the engine's zone); answers are compared as multisets (ORDER BY ... LIMIT
queries in key order).

    python -m bench.fuzz_round5 --seeds 0:300 [--device cuda-sim] [--families tstz,params] [--parquet [device]] [--out F]

Prints every case that is wrong, a crash (a raw Python exception), an engine error where DuckDB answered, or an
answer where DuckDB raised; then counts per family and status. Exits 1 when any case was wrong or crashed.
"""

from __future__ import annotations

import argparse
import collections
import datetime
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

UTC = datetime.timezone.utc
INSTANTS = [datetime.datetime(2024, 1, 31, 23, 30, tzinfo=UTC), datetime.datetime(2024, 2, 29, 0, 0, tzinfo=UTC),
            datetime.datetime(2023, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            datetime.datetime(1969, 12, 31, 12, 0, 0, 500000, tzinfo=UTC), datetime.datetime(2024, 3, 10, 7, 5, tzinfo=UTC)]
TIMES = [datetime.time(0, 0), datetime.time(23, 59, 59, 999999), datetime.time(12, 30, 15), datetime.time(7, 5),
         datetime.time(12, 30, 15, 250000)]
DATES = [datetime.date(2024, 1, 31), datetime.date(2024, 2, 29), datetime.date(1969, 12, 31), datetime.date(2023, 12, 31)]
STRINGS = ["a", "B", "", " x ", "a,b", "é", "bb"]


def _dictionary(values, empty: bool, rng: random.Random | None = None):
    """Dictionary-encode ``values``; ``empty``: every row NULL over a dictionary of no strings. With ``rng``, a
    third of the time the dictionary also holds a NULL entry (some rows' codes point at it) and values no row uses,
    or every row is NULL over a non-empty dictionary."""
    import pyarrow as pa

    if empty:  # every row NULL: a dictionary of no strings
        return pa.DictionaryArray.from_arrays(pa.array([None] * len(values), pa.int32()), pa.array([], pa.string()))
    if rng is not None and rng.random() < 0.33:
        dictionary = ["unused", None] + sorted({v for v in values if v is not None}) + ["zz"]
        if rng.random() < 0.3:  # a dictionary of strings, no row valid
            return pa.DictionaryArray.from_arrays(pa.array([None] * len(values), pa.int32()),
                                                  pa.array(dictionary, pa.string()))
        codes = [1 if v is None and rng.random() < 0.5 else None if v is None else dictionary.index(v) for v in values]
        return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(dictionary, pa.string()))
    return pa.array(values, pa.string()).dictionary_encode()


def tables(rng: random.Random) -> dict:
    """Return ``t(id, a, ts, tm, d, s, n)`` and ``u(k, ts2, tm2, s2)``: 0-9 rows, few distinct values, NULLs."""
    import pyarrow as pa

    def pick(values, null=0.25):
        return None if rng.random() < null else rng.choice(values)

    n = rng.choice([0, 0, 1, 2, 3, 5, 7, 9])
    m = rng.choice([0, 0, 1, 2, 4, 6, 8])
    t = pa.table({
        "id": pa.array(list(range(n)), pa.int64()),
        "a": pa.array([pick([0, 1, 2, 3]) for _ in range(n)], pa.int64()),
        "ts": pa.array([pick(INSTANTS) for _ in range(n)], pa.timestamp("us", tz="UTC")),
        "tm": pa.array([pick(TIMES) for _ in range(n)], pa.time64("us")),
        "d": pa.array([pick(DATES) for _ in range(n)], pa.date32()),
        "s": _dictionary([pick(STRINGS) for _ in range(n)], rng.random() < 0.2, rng),
        "n": pa.array([pick([0, 86399, 1709251200, -1]) for _ in range(n)], pa.int64()),
    })
    u = pa.table({
        "k": pa.array([pick([0, 1, 2, 4]) for _ in range(m)], pa.int64()),
        "ts2": pa.array([pick(INSTANTS) for _ in range(m)], pa.timestamp("us", tz="UTC")),
        "tm2": pa.array([pick(TIMES) for _ in range(m)], pa.time64("us")),
        "s2": _dictionary([pick(STRINGS) for _ in range(m)], rng.random() < 0.3, rng),
    })
    return {"t": t, "u": u}


# ------------------------------------------------------------------------------------------------ query families
# Each returns (sql, params or None, how): how is "sql" (Session.sql), "params" (sql with params), "prepare"
# (Session.prepare(...).execute), "spark" ((spark text, duckdb text)), or "script" (statements then a query).
def _tstz(r: random.Random):
    lit = r.choice(["TIMESTAMPTZ '2024-02-29 00:00:00+00'", "TIMESTAMPTZ '2024-01-31 23:30:00-05'",
                    "'2024-02-01 00:00:00+01'::TIMESTAMPTZ", "TIMESTAMP '2024-02-29 00:00:00'", "DATE '2024-02-29'"])
    unit = r.choice(["year", "quarter", "month", "week", "day", "hour", "minute"])
    part = r.choice(["year", "month", "day", "hour", "minute", "second", "microsecond", "epoch", "dow", "doy", "isodow"])
    forms = [
        f"SELECT id, ts, ts {r.choice(['<', '<=', '=', '<>', '>', '>='])} {lit} AS c FROM t",
        f"SELECT id, date_trunc('{unit}', ts) AS x FROM t",
        f"SELECT id, extract({part} FROM ts) AS x FROM t",
        "SELECT id, CAST(ts AS DATE) AS x, CAST(ts AS TIMESTAMP) AS y, CAST(ts AS VARCHAR) AS z FROM t",
        f"SELECT date_trunc('{unit}', ts) AS g, count(*) AS n, min(a) AS lo, max(ts) AS hi FROM t GROUP BY 1",
        "SELECT ts, count(*) AS n, count(a) AS na FROM t GROUP BY ts",
        "SELECT t.id, u.k FROM t JOIN u ON t.ts = u.ts2",
        "SELECT t.id, u.k FROM t LEFT JOIN u ON t.ts = u.ts2 AND t.a = u.k",
        "SELECT t.id, u.k FROM t FULL JOIN u ON date_trunc('day', t.ts) = date_trunc('day', u.ts2)",
        f"SELECT ts FROM t {r.choice(['UNION', 'UNION ALL', 'INTERSECT', 'EXCEPT', 'INTERSECT ALL', 'EXCEPT ALL'])} "
        "SELECT ts2 FROM u",
        f"SELECT id, row_number() OVER (ORDER BY ts{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}, id) AS rn, "
        f"{r.choice(['lag(ts)', 'first_value(ts)', 'max(ts)', 'count(ts)'])} OVER (PARTITION BY a ORDER BY ts, id) AS w FROM t",
        "SELECT id, rank() OVER (ORDER BY ts) AS r, sum(a) OVER (ORDER BY ts RANGE BETWEEN INTERVAL 1 DAY PRECEDING "
        "AND CURRENT ROW) AS s FROM t",
        "SELECT id, ts + INTERVAL 1 DAY AS x, ts - INTERVAL 90 MINUTE AS y, ts - TIMESTAMPTZ '2024-01-01 00:00:00+00' AS z FROM t",
        "SELECT t.id, u.k, t.ts - u.ts2 AS diff FROM t, u WHERE t.ts > u.ts2",
        "SELECT min(ts) AS lo, max(ts) AS hi, count(DISTINCT ts) AS n, arg_max(ts, id) AS am FROM t",
        f"SELECT id FROM t WHERE ts IN ({lit}, TIMESTAMPTZ '2024-01-31 23:30:00+00') OR ts IS NULL",
        f"SELECT id, coalesce(ts, {lit}) AS x, greatest(ts, TIMESTAMPTZ '2024-01-01 00:00:00+00') AS g FROM t",
        "SELECT id FROM t WHERE ts BETWEEN TIMESTAMPTZ '2024-01-01 00:00:00+00' AND TIMESTAMPTZ '2024-03-01 00:00:00+00'",
        "SELECT id, CAST(d AS TIMESTAMPTZ) AS x, d < ts AS lt FROM t",
        "SELECT DISTINCT ts FROM t WHERE ts NOT IN (SELECT ts2 FROM u WHERE ts2 IS NOT NULL)",
        "SELECT id, strftime(ts, '%Y-%m-%d %H:%M:%S') AS f, epoch_us(ts) AS e FROM t",
    ]
    return r.choice(forms), None, "sql"


def _time(r: random.Random):
    lit = r.choice(["TIME '12:30:15'", "TIME '00:00:00'", "'07:05:00'::TIME", "TIME '23:59:59.999999'"])
    part = r.choice(["hour", "minute", "second", "microsecond", "epoch", "millisecond"])
    forms = [
        f"SELECT id, tm, tm {r.choice(['<', '<=', '=', '<>', '>', '>='])} {lit} AS c FROM t",
        f"SELECT id, extract({part} FROM tm) AS x FROM t",
        "SELECT id, tm + INTERVAL 1 HOUR AS x, tm - INTERVAL 30 MINUTE AS y, d + tm AS z FROM t",
        "SELECT tm, count(*) AS n FROM t GROUP BY tm",
        "SELECT min(tm) AS lo, max(tm) AS hi, count(DISTINCT tm) AS n, arg_min(tm, id) AS am FROM t",
        "SELECT t.id, u.k FROM t JOIN u ON t.tm = u.tm2",
        "SELECT t.id, u.k FROM t LEFT JOIN u ON t.tm < u.tm2",
        f"SELECT tm FROM t {r.choice(['UNION', 'INTERSECT', 'EXCEPT ALL', 'UNION ALL'])} SELECT tm2 FROM u",
        "SELECT id, row_number() OVER (ORDER BY tm NULLS FIRST, id) AS rn, lead(tm) OVER (ORDER BY id) AS nx FROM t",
        "SELECT id, CAST(tm AS VARCHAR) AS v, CAST(CAST(ts AS TIMESTAMP) AS TIME) AS x FROM t",
        f"SELECT id FROM t WHERE tm BETWEEN TIME '07:00:00' AND {lit}",
        "SELECT id, CASE WHEN tm IS NULL THEN TIME '01:02:03' ELSE tm END AS x FROM t",
        "SELECT a, max(tm) AS m, min(tm) AS n FROM t GROUP BY a",
    ]
    return r.choice(forms), None, "sql"


def _temporal_mixes(r: random.Random):
    """TIMESTAMPTZ and TIME meeting TIMESTAMP, DATE, text and each other: implicit casts, set operations, CASE,
    VALUES rows of them with NULLs, and windows ordered by them with offsets."""
    forms = [
        "SELECT ts FROM t UNION SELECT CAST(ts2 AS TIMESTAMP) FROM u",
        "SELECT CAST(ts AS TIMESTAMP) AS x FROM t INTERSECT SELECT ts2 FROM u",
        "SELECT d FROM t UNION ALL SELECT ts2 FROM u",
        "SELECT id, coalesce(ts, d) AS x, CASE WHEN a > 1 THEN ts ELSE d END AS y FROM t",
        "SELECT id, ts = d AS e, ts > CAST(d AS TIMESTAMP) AS g FROM t",
        "SELECT id FROM t WHERE ts > '2024-02-01' OR tm > '12:00'",
        f"SELECT id FROM t WHERE tm {r.choice(['<', '>=', '='])} '12:30:15' AND ts IS NOT NULL",
        "SELECT * FROM (VALUES (TIME '01:00:00', NULL), (NULL, TIMESTAMPTZ '2024-02-29 10:00:00+02'), "
        "(TIME '23:59:59', TIMESTAMPTZ '1969-12-31 23:00:00-01')) v(a, b)",
        "SELECT v.x, count(t.id) AS n FROM (VALUES (TIME '12:30:15'), (TIME '07:05:00'), (NULL)) v(x) "
        "LEFT JOIN t ON t.tm = v.x GROUP BY v.x",
        "SELECT id, sum(a) OVER (ORDER BY tm RANGE BETWEEN INTERVAL 6 HOUR PRECEDING AND CURRENT ROW) AS s FROM t",
        "SELECT id, count(*) OVER (ORDER BY ts RANGE BETWEEN CURRENT ROW AND INTERVAL 31 DAY FOLLOWING) AS n FROM t",
        "SELECT id, max(tm) OVER (PARTITION BY date_trunc('month', ts) ORDER BY id) AS m FROM t",
        "SELECT date_part('hour', tm) AS h, count(*) AS n FROM t GROUP BY 1",
        "SELECT id, TRY_CAST(s AS TIMESTAMPTZ) AS x, TRY_CAST(s AS TIME) AS y FROM t",
        "SELECT id, CAST(CAST(ts AS VARCHAR) AS TIMESTAMPTZ) = ts AS roundtrip, CAST(CAST(tm AS VARCHAR) AS TIME) = tm AS r2 FROM t",
        "SELECT t.id, u.k FROM t JOIN u ON t.tm = u.tm2 AND t.ts < u.ts2",
        "SELECT t.id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.ts2 > t.ts AND u.tm2 <> t.tm)",
        "SELECT a, count(DISTINCT tm) AS n, min(ts) AS lo, arg_max(tm, id) AS last FROM t GROUP BY ROLLUP (a)",
        "SELECT id, ts - INTERVAL 1 MONTH AS x, ts + INTERVAL '25 hours' AS y, age(ts, TIMESTAMPTZ '2024-01-01 00:00:00+00') AS z FROM t",
        "SELECT id, make_time(hour(tm), minute(tm), 0) AS x, date_diff('minute', TIME '01:00:00', tm) AS y FROM t",
        "SELECT id, CAST(ts AS DATE) + tm AS x, d + tm AS y FROM t",
    ]
    return r.choice(forms), None, "sql"


def _param_value(r: random.Random, kind: str):
    import decimal

    if r.random() < 0.3:
        return None
    return {"int": lambda: r.choice([0, 1, 2, -1, 3]),
            "float": lambda: r.choice([0.5, 1.0, -1.5, 2.0]),
            "dec": lambda: decimal.Decimal(r.choice(["1.50", "0", "-2.25", "2"])),
            "str": lambda: r.choice(["a", "", "B", "bb", "%b%"]),
            "date": lambda: r.choice(DATES),
            "bool": lambda: r.choice([True, False])}[kind]()


_PARAM_KINDS: dict = {}


def _params(r: random.Random):
    forms = [
        ("SELECT id, a FROM t WHERE a = ?", ["int"]),
        ("SELECT id, a FROM t WHERE a > ? OR a IS NULL", ["float"]),
        ("SELECT id, a + ? AS x FROM t", ["int"]),
        ("SELECT id, a * ? AS x FROM t", ["dec"]),
        ("SELECT id, coalesce(a, ?) AS x FROM t", ["int"]),
        ("SELECT id FROM t WHERE s = ?", ["str"]),
        ("SELECT id FROM t WHERE s LIKE ?", ["str"]),
        ("SELECT id FROM t WHERE d >= $1 AND d <= $2", ["date", "date"]),
        ("SELECT id FROM t WHERE a BETWEEN $1 AND $2", ["int", "int"]),
        ("SELECT id, CASE WHEN a > $1 THEN $2 ELSE a END AS x FROM t", ["int", "int"]),
        ("SELECT a, count(*) AS n FROM t WHERE a <> ? GROUP BY a HAVING count(*) >= ?", ["int", "int"]),
        ("SELECT id FROM t WHERE a IN (?, ?, 3)", ["int", "int"]),
        ("SELECT id FROM t WHERE a NOT IN (?, 1)", ["int"]),
        ("SELECT id FROM t WHERE (a = $1) IS NOT DISTINCT FROM $2", ["int", "bool"]),
        ("SELECT id, $1 + a AS x, $1 AS y FROM t WHERE a <> $1 OR $1 IS NULL", ["int"]),
        ("SELECT id FROM t WHERE ts > ? OR tm < ?", ["str", "str"]),
        ("SELECT id, d - ? AS x FROM t", ["date"]),
        ("SELECT id FROM t WHERE a IS NOT DISTINCT FROM ?", ["int"]),
        ("SELECT t.id, u.k FROM t JOIN u ON t.a = u.k WHERE u.k > $1 OR t.a = $2", ["int", "int"]),
        ("SELECT id, concat(s, ?) AS x FROM t", ["str"]),
        ("SELECT id, d + ? AS x FROM t", ["int"]),
        ("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.a AND u.k <> ?)", ["int"]),
        ("SELECT id, a / ? AS x FROM t", ["float"]),
        ("SELECT id, a FROM t ORDER BY a NULLS FIRST, id LIMIT 3", []),
        ("SELECT sum(a) + ? AS x, count(*) AS n FROM t", ["dec"]),
        ("SELECT id FROM t WHERE ? AND a > 0", ["bool"]),
        ("SELECT ? AS x, id FROM t WHERE id < 2", ["str"]),
        ("SELECT id FROM t ORDER BY id LIMIT ?", ["int"]),
        ("SELECT id FROM t ORDER BY id LIMIT $1 OFFSET $2", ["int", "int"]),
        ("SELECT a + $1 AS g, count(*) AS n FROM t GROUP BY a + $1", ["int"]),
        ("SELECT a, sum(id) AS s FROM t GROUP BY a HAVING sum(id) > $1 OR $1 IS NULL", ["dec"]),
        ("SELECT id, sum(a) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) + ? AS w FROM t", ["float"]),
        ("SELECT id FROM t WHERE a = (SELECT max(k) FROM u WHERE k < $1)", ["int"]),
        ("SELECT id, CASE WHEN a IS NULL THEN $1 ELSE s END AS x FROM t", ["str"]),
        ("SELECT id FROM t WHERE s IN (?, ?)", ["str", "str"]),
        ("SELECT id, greatest(a, ?) AS g, least(a, $2) AS l FROM t".replace("$2", "?"), ["int", "dec"]),
        ("SELECT id FROM t WHERE d = ? OR ts IS NULL", ["date"]),
        ("SELECT id, a = ? AS e, a <> ? AS ne FROM t", ["float", "dec"]),
        ("SELECT count(*) AS n FROM t WHERE ? IS NULL", ["int"]),
        ("SELECT id, nullif(a, ?) AS x FROM t", ["int"]),
        ("SELECT id, substr(s, ?, 2) AS x FROM t", ["int"]),
        ("SELECT k FROM u WHERE k = $1 UNION ALL SELECT a FROM t WHERE a = $1", ["int"]),
    ]
    _PARAM_KINDS.update(forms)
    text, kinds = r.choice(forms)
    params = [_param_value(r, kind) for kind in kinds]
    return text, params, r.choice(["params", "prepare"])


def _reexecute(r: random.Random):
    """One prepared text executed with three sets of values (NULLs among them): the generated kernels are the first
    run's (constants are launch parameters), so a value or a NULL must not stick from one run to the next."""
    text, _, _ = _params(r)
    kinds = _PARAM_KINDS[text]
    return text, [[_param_value(r, kind) for kind in kinds] for _ in range(3)], "reexec"


def _views(r: random.Random):
    body, first = r.choice([
        ("SELECT a, count(*) AS n, max(ts) AS hi FROM t GROUP BY a", "a"),
        ("SELECT id, a, upper(s) AS us, tm FROM t WHERE a IS NOT NULL OR s IS NULL", "us"),
        ("SELECT t.id, u.k, u.s2 FROM t LEFT JOIN u ON t.a = u.k", "k"),
        ("SELECT * FROM (VALUES (1, 'one'), (2, NULL), (NULL, 'none')) v(k, name)", "name"),
        ("SELECT id, a FROM t WHERE false", "a"),
        ("SELECT ts AS x FROM t UNION ALL SELECT ts2 FROM u", "x"),
        ("SELECT id, ts, tm, s FROM t", "ts"),
        ("SELECT tm2 AS x, s2, count(*) AS n FROM u GROUP BY ALL", "x"),
    ])
    kind = r.choice(["VIEW", "TABLE"])
    query = r.choice([
        "SELECT * FROM v1",
        "SELECT count(*) AS n FROM v1",
        "SELECT * FROM v1 WHERE {first} IS NOT NULL",
        "SELECT x.*, y.{first} AS again FROM v1 x JOIN v1 y ON x.{first} = y.{first}",
        "SELECT {first}, count(*) AS n FROM v1 GROUP BY {first}",
        "SELECT * FROM v1 UNION ALL SELECT * FROM v1",
        "SELECT * FROM v2",
    ])
    return (f"CREATE {kind} v1 AS {body}", "CREATE VIEW v2 AS SELECT * FROM v1 WHERE true",
            query.replace("{first}", first)), None, "script"


def _values(r: random.Random):
    rows = r.choice([
        "(1, 'a', DATE '2024-02-29'), (2, NULL, NULL), (NULL, '', DATE '1969-12-31')",
        "(0, 'B', DATE '2024-01-31')",
        "(1, 'a', NULL), (1, 'a', NULL), (3, 'bb', DATE '2023-12-31')",
    ])
    source = f"(VALUES {rows}) v(k, name, day)"
    forms = [
        f"SELECT * FROM {source}",
        f"SELECT t.id, v.name FROM t JOIN {source} ON t.a = v.k",
        f"SELECT v.k, t.id FROM {source} LEFT JOIN t ON t.s = v.name",
        f"SELECT k, count(*) AS n, max(day) AS m FROM {source} GROUP BY k",
        f"SELECT id FROM t WHERE a IN (SELECT k FROM {source})",
        f"SELECT id FROM t WHERE d NOT IN (SELECT day FROM {source} WHERE day IS NOT NULL)",
        f"SELECT name FROM {source} UNION SELECT s FROM t",
        f"SELECT k FROM {source} EXCEPT ALL SELECT a FROM t",
        f"SELECT v.k, u.k AS uk FROM {source} FULL JOIN u ON v.k = u.k",
        f"SELECT *, row_number() OVER (PARTITION BY k ORDER BY name NULLS FIRST, day) AS rn FROM {source}",
    ]
    return r.choice(forms), None, "sql"


SPARK_PAIRS = [
    ("nvl(a, 0)", "coalesce(a, 0)"),
    ("nvl(s, 'z')", "coalesce(s, 'z')"),
    ("if(a > 1, 'p', 'n')", "CASE WHEN a > 1 THEN 'p' ELSE 'n' END"),
    ("if(s IS NULL, id, a)", "CASE WHEN s IS NULL THEN id ELSE a END"),
    ("datediff(d, DATE '2024-01-01')", "CAST(d - DATE '2024-01-01' AS INTEGER)"),
    ("datediff(DATE '2024-03-01', d)", "CAST(DATE '2024-03-01' - d AS INTEGER)"),
    ("date_format(d, 'yyyy-MM-dd')", "strftime(d, '%Y-%m-%d')"),
    ("date_format(d, 'dd/MM/yyyy')", "strftime(d, '%d/%m/%Y')"),
    ("from_unixtime(n)", "strftime(make_timestamp(n * 1000000), '%Y-%m-%d %H:%M:%S')"),
    ("from_unixtime(n, 'yyyy-MM-dd')", "strftime(make_timestamp(n * 1000000), '%Y-%m-%d')"),
    ("nvl2(a, 'y', 'n')", "CASE WHEN a IS NOT NULL THEN 'y' ELSE 'n' END"),
    ("isnull(s)", "s IS NULL"),
    ("length(s)", "CAST(length(s) AS INTEGER)"),
    ("upper(s)", "upper(s)"),
    ("concat(s, 'x')", "CASE WHEN s IS NULL THEN NULL ELSE s || 'x' END"),
    ("date_format(ts, 'yyyy-MM-dd HH:mm:ss')", "strftime(ts, '%Y-%m-%d %H:%M:%S')"),
    ("datediff(ts, d)", "CAST(CAST(ts AS DATE) - d AS INTEGER)"),
    ("to_date(ts)", "CAST(ts AS DATE)"),
    ("year(ts)", "CAST(year(ts) AS INTEGER)"),
    ("hour(ts)", "CAST(hour(ts) AS INTEGER)"),
    ("if(ts IS NULL, -1, a)", "CASE WHEN ts IS NULL THEN -1 ELSE a END"),
    ("unix_timestamp(ts)", "epoch_us(ts) // 1000000"),  # Spark: micros / 1000000 in Scala, toward zero
    ("date_add(d, CAST(a AS INT))", "d + CAST(a AS INTEGER)"),
    ("nvl(upper(s), lower(s))", "coalesce(upper(s), lower(s))"),
]


def _spark(r: random.Random):
    chosen = r.sample(SPARK_PAIRS, r.choice([1, 2, 3]))
    spark = ", ".join(f"{s} AS c{i}" for i, (s, _) in enumerate(chosen))
    duck = ", ".join(f"{d} AS c{i}" for i, (_, d) in enumerate(chosen))
    where = r.choice(["", " WHERE a IS NOT NULL", " WHERE id > 1"])
    return (f"SELECT id, {spark} FROM t{where}", f"SELECT id, {duck} FROM t{where}"), None, "spark"


def _dictionary_strings(r: random.Random):
    column = r.choice(["s", "s"])
    expression = r.choice([
        f"upper({column})", f"lower({column})", f"length({column})", f"substr({column}, 2, 2)",
        f"concat({column}, '-', {column})", f"{column} || 'x'", f"replace({column}, 'a', 'A')", f"trim({column})",
        f"starts_with({column}, 'a')", f"{column} LIKE '%b%'", f"{column} ILIKE 'b%'", f"contains({column}, ',')",
        f"reverse({column})", f"lpad({column}, 3, '*')", f"{column} < 'b'", f"{column} = ''",
        f"coalesce({column}, 'none')", f"strpos({column}, 'b')", f"split_part({column}, ',', 2)",
        f"CASE WHEN {column} IS NULL THEN 'n' ELSE {column} END", f"regexp_matches({column}, '^[a-z]+$')",
    ])
    forms = [
        f"SELECT id, {expression} AS x FROM t",
        f"SELECT {expression} AS x, count(*) AS n FROM t GROUP BY 1",
        f"SELECT id FROM t WHERE {column} IN ('a', 'B', '')",
        f"SELECT t.id, u.k FROM t JOIN u ON t.{column} = u.s2",
        f"SELECT t.id FROM t WHERE t.{column} NOT IN (SELECT s2 FROM u WHERE s2 IS NOT NULL)",
        f"SELECT min({column}) AS lo, max({column}) AS hi, count(DISTINCT {column}) AS n, "
        f"string_agg({column}, '|' ORDER BY {column}) AS g FROM t",
        f"SELECT {column} FROM t UNION SELECT s2 FROM u",
        f"SELECT id, {column} < u2 AS c FROM t, (SELECT max(s2) AS u2 FROM u) m",
        f"SELECT upper(s2) AS x, count(*) AS n FROM u GROUP BY x",
        f"SELECT id, row_number() OVER (PARTITION BY {column} ORDER BY id) AS rn FROM t",
    ]
    return r.choice(forms), None, "sql"


def _limit(r: random.Random):
    """LIMIT/OFFSET over ties: select only the ORDER BY keys (any tie-break gives the same rows), or aggregate
    over the cut rows' keys."""
    key = r.choice(["a", "d", "ts", "tm", "s"])
    direction = r.choice(["", " DESC"])
    nulls = r.choice(["", " NULLS FIRST", " NULLS LAST"])
    limit, offset = r.choice([0, 1, 2, 3, 100]), r.choice([0, 0, 1, 2, 5])
    cut = f"ORDER BY {key}{direction}{nulls} LIMIT {limit}" + (f" OFFSET {offset}" if offset else "")
    forms = [
        f"SELECT {key} FROM t {cut}",
        f"SELECT count(*) AS n, count({key}) AS nk FROM (SELECT {key} FROM t {cut}) c",
        f"SELECT {key}, count(*) AS n FROM (SELECT {key} FROM t {cut}) c GROUP BY {key}",
        f"SELECT a FROM t UNION ALL SELECT k FROM u ORDER BY 1{direction}{nulls} LIMIT {limit} OFFSET {offset}",
        f"SELECT DISTINCT {key} FROM t {cut}",
        f"SELECT {key}, count(*) AS n FROM t GROUP BY {key} {cut}",
        f"SELECT id FROM t ORDER BY id{direction} LIMIT {limit} OFFSET {offset}",
        f"SELECT {key} FROM t {cut.replace('LIMIT', 'LIMIT')} ",
        f"SELECT k FROM u WHERE k IN (SELECT a FROM t ORDER BY a NULLS LAST, id LIMIT {limit})",
    ]
    return r.choice(forms), None, "sql"


def _empty(r: random.Random):
    sql, params, how = r.choice([_tstz, _time, _dictionary_strings, _values, _limit])(r)
    return f"SELECT * FROM ({sql}) e WHERE false" if r.random() < 0.3 else sql, params, how


FAMILIES = {"tstz": _tstz, "time": _time, "params": _params, "views": _views, "values": _values,
            "temporal": _temporal_mixes, "reexec": _reexecute, "spark": _spark, "dictstr": _dictionary_strings, "limit": _limit, "mixed": _empty}


def _parquet_session(data: dict, folder: Path, r: random.Random, **options):
    """A Session reading each table from a Parquet file of row groups of 1, 2 or 100 rows (zoned timestamps as
    ``isAdjustedToUTC``, TIME as time64[us], strings dictionary-encoded), written under ``folder``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpu_engine import Session

    session = Session(**options)
    for name, table in data.items():
        path = folder / f"{name}.parquet"
        plain = table.cast(pa.schema([pa.field(f.name, pa.string()) if pa.types.is_dictionary(f.type) else f
                                      for f in table.schema]))  # (pyarrow writes no NULL dictionary entry)
        pq.write_table(plain, path, row_group_size=r.choice([1, 2, 100]))
        session.register(name, str(path))
    return session


def run(seeds: range, device: str, families: list[str], verbose: bool, parquet: str | None = None) -> dict:
    import tempfile

    import duckdb

    from duckdb_reference import session_with_tables

    counts = collections.defaultdict(collections.Counter)
    reported, refusals = [], collections.Counter()
    for seed in seeds:
        r = random.Random(seed)
        data = tables(r)
        drivers, batch_rows = r.choice([1, 1, 2, 4]), r.choice([1, 2, 4, 65536])
        split_rows = r.choice([1, 2, 3, 100])
        connection = duckdb.connect()
        connection.execute("SET TimeZone='UTC'")
        for name, table in data.items():
            connection.register(name, table)
        fuse = r.random() < 0.3
        if parquet:
            folder = Path(tempfile.mkdtemp(prefix=f"fuzz5-{seed}-"))
            session = _parquet_session(data, folder, r, device=device, drivers=drivers, batch_rows=batch_rows,
                                       fuse=fuse, parquet_reader=parquet)
        else:
            session = session_with_tables(data, split_rows=split_rows, device=device, drivers=drivers,
                                          batch_rows=batch_rows, fuse=fuse)
        for family in families:
            sql, params, how = FAMILIES[family](r)
            status, detail = _compare(session, connection, sql, params, how)
            counts[family][status] += 1
            if status == "refused":
                refusals[re.sub(r"'[^']*'", "'…'", detail.splitlines()[0])[:140]] += 1
            if status in ("wrong", "crash", "engine_raised", "answered_where_duckdb_raised") or (
                    verbose and status != "ok"):
                case = {"seed": seed, "family": family, "status": status, "sql": sql, "params": repr(params),
                        "how": how, "drivers": drivers, "batch_rows": batch_rows, "split_rows": split_rows,
                        "why": detail[:2000]}
                reported.append(case)
                print(f"{status.upper()} seed {seed} ({family}/{how}, drivers {drivers}, batch {batch_rows}, split "
                      f"{split_rows}): {sql} params={params!r}\n  {detail[:1500]}", flush=True)
        connection.close()
        if parquet:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
    return {"counts": {f: dict(c) for f, c in counts.items()}, "reported": reported,
            "refusals": dict(refusals.most_common())}


def _engine_answer(session, sql, params, how):
    if how == "call":  # sql: (a function of the session giving the engine's answer, DuckDB's text)
        return sql[0](session)
    if how == "params":
        return session.sql(sql, params=params)
    if how == "prepare":
        return session.prepare(sql).execute(params)
    if how == "reexec":
        prepared = session.prepare(sql)
        return [prepared.execute(values) for values in params]
    if how == "spark":
        return session.sql(sql[0], dialect="spark")
    if how == "jsonplan":  # the SQL's plan through JSON and back, executed (the planning rules run on it again)
        from gpu_engine.plans.serialization import plan_from_json, plan_to_json

        return session.execute(plan_from_json(plan_to_json(session.sql_plan(sql))))
    if how == "script":
        for statement in sql[:-1]:
            session.sql(statement)
        try:
            return session.sql(sql[-1])
        finally:
            for statement in ("DROP VIEW IF EXISTS v2", "DROP VIEW IF EXISTS v1", "DROP TABLE IF EXISTS v1"):
                try:
                    session.sql(statement)
                except Exception:  # noqa: BLE001 - the other kind of v1
                    pass
    return session.sql(sql)


def _duckdb_answer(connection, sql, params, how):
    if how == "call":
        return connection.sql(sql[1]).to_arrow_table()
    if how in ("params", "prepare"):
        return connection.sql(sql, params=params).to_arrow_table()
    if how == "reexec":
        return [connection.sql(sql, params=values).to_arrow_table() for values in params]
    if how == "spark":
        return connection.sql(sql[1]).to_arrow_table()
    if how == "script":
        for statement in sql[:-1]:
            connection.execute(statement)
        try:
            return connection.sql(sql[-1]).to_arrow_table()
        finally:
            connection.execute("DROP VIEW IF EXISTS v2")
            for statement in ("DROP VIEW IF EXISTS v1", "DROP TABLE IF EXISTS v1"):
                try:
                    connection.execute(statement)
                except Exception:  # noqa: BLE001
                    pass
    return connection.sql(sql).to_arrow_table()


def _compare(session, connection, sql, params, how):
    from duckdb_reference import rows_mismatch
    from gpu_engine.errors import ExecutionError, GpuEngineError

    try:
        expected, duckdb_error = _duckdb_answer(connection, sql, params, how), None
    except Exception as error:  # noqa: BLE001
        expected, duckdb_error = None, error
    try:
        actual = _engine_answer(session, sql, params, how)
    except GpuEngineError as error:
        text = f"{type(error).__name__}: {error}"
        if duckdb_error is not None:
            return "both_raised", f"DuckDB: {duckdb_error}; engine: {text}"
        return ("engine_raised" if isinstance(error, ExecutionError) else "refused"), text
    except Exception as error:  # noqa: BLE001 - a raw exception is what the fuzz looks for
        return "crash", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-8)}"
    if duckdb_error is not None:
        return "answered_where_duckdb_raised", f"DuckDB: {duckdb_error}"
    text = sql if isinstance(sql, str) else sql[-1]
    ordered = bool(re.search(r"ORDER BY [^)]*LIMIT \d+( OFFSET \d+)?\s*$", text)) and "SELECT id FROM t ORDER BY id" in text
    if how == "ordered":  # rows in the outermost ORDER BY's order (ties in any order)
        from gpu_engine.sql.ordering import order_key_columns

        ordered = order_key_columns(text)
    if how == "reexec":
        for run, (got, want) in enumerate(zip(actual, expected)):
            problem = rows_mismatch(got, want, ordered=ordered, rel_tol=1e-7)
            if problem is not None:
                return "wrong", f"execute {run + 1} of 3: {problem}"
        return "ok", ""
    problem = rows_mismatch(actual, expected, ordered=ordered, rel_tol=1e-7)
    return ("ok", "") if problem is None else ("wrong", problem)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:100", help="start:stop")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--verbose", action="store_true", help="print refusals and both-raised cases too")
    parser.add_argument("--parquet", nargs="?", const="auto", default=None, metavar="READER",
                        help="the engine reads the tables from Parquet files (with parquet_reader READER, default auto; "
                             "'device' decodes on the device)")
    args = parser.parse_args(argv)
    start, stop = (int(x) for x in args.seeds.split(":"))
    families = args.families.split(",")
    began, cpu_began = time.perf_counter(), time.process_time()
    result = run(range(start, stop), args.device, families, args.verbose, args.parquet)
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    total = print_counts(result["counts"], 12,
                         f"  (seeds {start}:{stop} on {args.device}; {elapsed:.0f} s wall, {cpu:.0f} s CPU)")
    for why, n in list(result["refusals"].items())[:25]:
        print(f"  refused {n}: {why}")
    if args.out:
        args.out.write_text(json.dumps({"commit": head_commit(), "seeds": [start, stop], "device": args.device,
                                        "seconds": round(elapsed, 1), "cpu_seconds": round(cpu, 1), **result},
                                       indent=1, ensure_ascii=False, default=str))
    return 1 if total["wrong"] or total["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
