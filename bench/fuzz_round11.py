"""Fuzz users' own Arrow data, state that crosses many batches, Parquet files written by users and type coercion
against DuckDB (fuzz hardening round 11).

Why: rounds 5-10 drew SQL over the fuzz's own small tables (int64 / float64 / string / date / timestamp[us] /
decimal columns, a few rows, one or two dictionary columns) and Parquet files the fuzz wrote with default options.
Users hand the engine pyarrow tables of every Arrow type, chunked and sliced as their code left them; tables of
thousands of rows whose groups, join builds, window partitions and dictionaries span many batches; Parquet files
written with any writer option; and queries that mix types in comparisons, IN lists, CASE, COALESCE and set
operations. This round draws those.

Families:

- ``arrow``: tables ``t`` / ``u`` (``id`` plus columns ``c0..c2`` of kinds drawn from :data:`KINDS`: every integer
  width (uint64 past 2**63), float16 / 32 / 64, string / large_string / string_view, binary / large_binary /
  fixed_size_binary, dictionaries of int8 / int16 / int32 / uint8 indices with NULLs in indices and dictionary,
  date32 / date64, timestamps s / ms / us / ns with and without a zone, time32 / time64, duration, decimal128 of
  many precisions / scales, decimal256, bool, the null type), as 0 / 1 / many chunks, sliced (offset != 0), with no
  validity buffer or all NULL; filters, group by, joins (same kinds), sorts, casts, string / numeric / temporal
  functions over them. DuckDB reads the same Arrow tables. A refusal must be a named engine error.
- ``batches``: 1k-20k rows in batches of 7 / 100 / 1024 rows over 1-3 drivers: high-cardinality group by (int,
  string, multi-key, NULL keys), distinct aggregates, joins whose build spans batches (duplicate / NULL keys, outer /
  semi / anti), windows whose partitions span batches, ORDER BY + LIMIT / OFFSET (compared in order), dictionary
  columns whose dictionaries differ per chunk.
- ``parquet``: a table written by pyarrow with drawn writer options (dictionary on / off / per column and a tiny
  dictionary page limit that falls back mid-chunk, data page v1 / v2, small pages, row groups of 1..n rows,
  statistics off, each codec), nested columns among them a fifth of the time (a plan that reads one is refused);
  read as ``FROM 'file.parquet'`` / ``read_parquet(...)`` by both.
- ``coercion``: comparisons, IN lists, CASE, COALESCE, set operations mixing integer widths, decimals of other
  scales, doubles, number-like strings, dates and timestamps; integer division and modulo of negatives.

Besides wrong rows (round 5's ``_compare``: multisets, floats to 1e-7; ORDER BY ... LIMIT row for row), a column
type that differs from DuckDB's in class (round 10's ``_types_differ``; integer width, dictionary encoding and a
timestamp's zone name aside: DuckDB's session zone is UTC) is counted as ``type``.

    python -m bench.fuzz_round11 --seeds 0:300 [--device cuda-sim] [--families arrow,batches] [--out F]

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
from bench.sql_fuzz import REPORTED_STATUSES, family_fuzz_main, run_family_cases  # noqa: E402


# ------------------------------------------------------------------------------------------------ kinds
def _ints(lo, hi):
    return lambda r: r.choice([lo, hi, 0, 1, -1 if lo < 0 else 2, r.randint(lo, hi), r.randint(lo, hi), 7])


def _decimal_values(precision, scale):
    def draw(r):
        digits = r.randint(0, precision)
        magnitude = r.randint(0, 10 ** digits - 1) if digits else 0
        sign = r.choice([1, -1])
        return decimal.Decimal(sign * magnitude).scaleb(-scale)
    return draw


STRINGS = ["", "a", "A", "ab", "abc", "b", "é", "日本", " a ", "12", "-3.5", "1e3", "NULL", "zz", "a%b", "x" * 40]
DATES = [datetime.date(1970, 1, 1), datetime.date(2000, 2, 29), datetime.date(1969, 12, 31), datetime.date(2024, 12, 31),
         datetime.date(1900, 3, 1), datetime.date(2038, 1, 19)]
STAMPS = [datetime.datetime(1970, 1, 1), datetime.datetime(2000, 2, 29, 23, 59, 59), datetime.datetime(1969, 12, 31, 23, 0),
          datetime.datetime(2024, 3, 10, 2, 30), datetime.datetime(2024, 11, 3, 1, 30), datetime.datetime(2021, 6, 1, 12)]
TIMES = [datetime.time(0), datetime.time(23, 59, 59), datetime.time(12, 30, 15), datetime.time(1, 2, 3)]


def _kind(type_, draw, cls):
    return {"type": type_, "draw": draw, "class": cls}


def _kinds():
    import pyarrow as pa

    kinds = {
        "int8": _kind(pa.int8(), _ints(-128, 127), "int"), "int16": _kind(pa.int16(), _ints(-2 ** 15, 2 ** 15 - 1), "int"),
        "int32": _kind(pa.int32(), _ints(-2 ** 31, 2 ** 31 - 1), "int"),
        "int64": _kind(pa.int64(), _ints(-2 ** 63, 2 ** 63 - 1), "int"),
        "uint8": _kind(pa.uint8(), _ints(0, 255), "int"), "uint16": _kind(pa.uint16(), _ints(0, 2 ** 16 - 1), "int"),
        "uint32": _kind(pa.uint32(), _ints(0, 2 ** 32 - 1), "int"),
        "uint64": _kind(pa.uint64(), lambda r: r.choice([0, 1, 7, 2 ** 63, 2 ** 63 + 5, 2 ** 64 - 1, r.randint(0, 2 ** 64 - 1)]),
                        "int"),
        "float16": _kind(pa.float16(), lambda r: r.choice([0.5, 1.0, -2.0, 3.0]), "float"),
        "float32": _kind(pa.float32(), lambda r: r.choice([0.0, -0.0, 1.5, -2.25, 1e30, float("nan"), float("inf"), 3.0]),
                         "float"),
        "float64": _kind(pa.float64(), lambda r: r.choice([0.0, -0.0, 1.5, -2.25, 1e300, float("nan"), float("-inf"),
                                                           0.1, 3.0]), "float"),
        "string": _kind(pa.string(), lambda r: r.choice(STRINGS), "string"),
        "large_string": _kind(pa.large_string(), lambda r: r.choice(STRINGS), "string"),
        "string_view": _kind(pa.string_view(), lambda r: r.choice(STRINGS), "string"),
        "binary": _kind(pa.binary(), lambda r: r.choice([b"", b"a", b"\x00\xff", b"ab"]), "binary"),
        "large_binary": _kind(pa.large_binary(), lambda r: r.choice([b"", b"a", b"\x00\xff"]), "binary"),
        "fixed_size_binary": _kind(pa.binary(2), lambda r: r.choice([b"ab", b"\x00\x01", b"zz"]), "binary"),
        "date32": _kind(pa.date32(), lambda r: r.choice(DATES), "date"),
        "date64": _kind(pa.date64(), lambda r: r.choice(DATES), "date"),
        "date64ms": _kind(pa.date64(), lambda r: r.choice([1, -1, 86_400_000 + 5, -86_400_001, 0]), "date"),
        "time32s": _kind(pa.time32("s"), lambda r: r.choice(TIMES), "time"),
        "time32ms": _kind(pa.time32("ms"), lambda r: r.choice(TIMES), "time"),
        "time64us": _kind(pa.time64("us"), lambda r: r.choice(TIMES), "time"),
        "time64ns": _kind(pa.time64("ns"), lambda r: r.choice(TIMES), "time"),
        "duration": _kind(pa.duration("us"), lambda r: r.choice([0, 5, -1, 10 ** 9]), "duration"),
        "bool": _kind(pa.bool_(), lambda r: r.choice([True, False]), "bool"),
        "null": _kind(pa.null(), lambda r: None, "null"),
        "decimal256": _kind(pa.decimal256(20, 4), _decimal_values(16, 4), "decimal"),
    }
    for unit in ("s", "ms", "us", "ns"):
        for zone in (None, "UTC", "America/New_York"):
            kinds[f"ts_{unit}_{zone}"] = _kind(pa.timestamp(unit, tz=zone), lambda r: r.choice(STAMPS), "timestamp")
    for precision, scale in ((1, 0), (4, 2), (9, 0), (9, 9), (15, 3), (18, 2), (19, 4), (28, 10), (38, 0), (38, 6),
                             (38, 37)):
        kinds[f"dec{precision}_{scale}"] = _kind(pa.decimal128(precision, scale), _decimal_values(precision, scale), "decimal")
    for index in ("int8", "int16", "int32", "uint8"):
        kinds[f"dict_{index}"] = _kind(("dictionary", getattr(pa, index)()), lambda r: r.choice(STRINGS[:8]), "string")
    return kinds


KINDS = None


def _array(kind: dict, values: list, r: random.Random, null_entry: bool = True):
    """``values`` as an Arrow array (chunked) of ``kind``: 0 / 1 / many chunks, sliced a third of the time."""
    import pyarrow as pa

    type_ = kind["type"]
    if isinstance(type_, tuple):  # a dictionary: NULLs in the indices and a NULL entry in the dictionary
        dictionary = ["unused"] + [None] * null_entry + sorted({v for v in values if v is not None}) + ["zz"]
        codes = [1 if v is None and null_entry and r.random() < 0.5 else None if v is None else dictionary.index(v) for v in values]
        make = lambda part: pa.DictionaryArray.from_arrays(pa.array(part, type_[1]), pa.array(dictionary, pa.string()))
        items = codes
    else:
        make = lambda part: pa.array(part, type_)
        items = values
    pad = r.choice([0, 0, 3])  # a sliced array: offset != 0
    if pad:
        whole = make([items[0] if items else None] * pad + items + [None] * 2)
        array = whole.slice(pad, len(items))
    else:
        array = make(items)
    if not len(items) and r.random() < 0.5:
        return pa.chunked_array([], array.type)
    cuts = sorted(r.sample(range(1, len(items)), min(len(items) - 1, r.choice([0, 0, 1, 3])))) if len(items) > 1 else []
    chunks, start = [], 0
    for cut in cuts + [len(items)]:
        chunks.append(array.slice(start, cut - start))
        start = cut
    if r.random() < 0.2:
        chunks.insert(r.randint(0, len(chunks)), array.slice(0, 0))  # an empty chunk among them
    return pa.chunked_array(chunks, array.type)


def _column(kind: dict, rows: int, r: random.Random, pool: list | None = None, null_entry: bool = True):
    shape = r.random()
    if kind["class"] == "null" or shape < 0.08:
        values = [None] * rows  # all NULL
    else:
        null_rate = 0.0 if shape < 0.35 else 0.2  # no validity buffer a third of the time
        pool = pool or [kind["draw"](r) for _ in range(r.choice([2, 4, 8]))]
        values = [None if r.random() < null_rate else r.choice(pool) for _ in range(rows)]
    return _array(kind, values, r, null_entry)


def arrow_tables(r: random.Random):
    """``t`` and ``u``: ``id`` int64, ``k`` int64 (joins), ``c0..c2`` of drawn kinds (``u`` the same kinds and a
    shared value pool, so joins on them match)."""
    import pyarrow as pa

    global KINDS
    KINDS = KINDS or _kinds()
    names = r.sample(sorted(KINDS), 3)
    pools = {name: [KINDS[name]["draw"](r) for _ in range(4)] for name in names}
    out = {}
    for table, rows in (("t", r.choice([0, 1, 5, 12, 30])), ("u", r.choice([0, 3, 12]))):
        columns = {"id": _array({"type": pa.int64(), "class": "int"}, list(range(rows)), r),
                   "k": _array({"type": pa.int64(), "class": "int"},
                               [None if r.random() < 0.15 else r.randint(0, 4) for _ in range(rows)], r)}
        for index, name in enumerate(names):
            columns[f"c{index}"] = _column(KINDS[name], rows, r, pools[name])
        out[table] = pa.table(columns)
    return out, names


def _arrow_query(r: random.Random, names: list[str]):
    index = r.randrange(len(names))
    c, cls = f"c{index}", KINDS[names[index]]["class"]
    other = f"c{(index + 1) % len(names)}"
    exprs = {"int": [f"{c} + 1", f"{c} * 2", f"{c} % 3", f"abs({c})", f"CAST({c} AS DOUBLE)", f"CAST({c} AS VARCHAR)",
                     f"{c} // 2", f"-{c}", f"CAST({c} AS DECIMAL(38, 0))", f"greatest({c}, 3)"],
             "float": [f"{c} + 1", f"{c} * 2", f"round({c}, 1)", f"CAST({c} AS BIGINT)", f"{c} / 2", f"abs({c})",
                       f"isnan({c})", f"CAST({c} AS VARCHAR)"],
             "decimal": [f"{c} + 1", f"{c} * 2", f"round({c}, 1)", f"CAST({c} AS DOUBLE)", f"{c} / 3",
                         f"CAST({c} AS VARCHAR)", f"-{c}", f"floor({c})", f"{c} + 0.5"],
             "string": [f"upper({c})", f"length({c})", f"substr({c}, 2, 2)", f"{c} || '-'", f"{c} LIKE '%a%'",
                        f"replace({c}, 'a', 'x')", f"trim({c})", f"TRY_CAST({c} AS INTEGER)", f"reverse({c})",
                        f"strpos({c}, 'b')", f"lower({c}) = 'a'", f"concat({c}, {c})"],
             "date": [f"{c} + 1", f"year({c})", f"date_trunc('month', {c})", f"CAST({c} AS VARCHAR)",
                      f"{c} + INTERVAL 1 DAY", f"extract(dow FROM {c})", f"CAST({c} AS TIMESTAMP)",
                      f"date_diff('day', DATE '2000-01-01', {c})"],
             "timestamp": [f"year({c})", f"hour({c})", f"date_trunc('hour', {c})", f"CAST({c} AS DATE)",
                           f"{c} + INTERVAL 90 MINUTE", f"extract(epoch FROM {c})", f"CAST({c} AS VARCHAR)",
                           f"epoch_ms({c})"],
             "time": [f"hour({c})", f"minute({c})", f"CAST({c} AS VARCHAR)", f"{c} + INTERVAL 1 HOUR",
                      f"{c} < TIME '12:00:00'"],
             "bool": [f"NOT {c}", f"{c} AND true", f"CAST({c} AS INTEGER)", f"{c} OR {c} IS NULL"],
             }.get(cls, [f"{c} IS NULL", f"CAST({c} AS VARCHAR)"])
    expr = r.choice(exprs)
    forms = [
        f"SELECT id, {c} FROM t",
        f"SELECT id, {expr} AS e FROM t",
        f"SELECT {c}, count(*) AS n FROM t GROUP BY {c}",
        f"SELECT {c}, {other}, count(*) AS n, min(id) AS lo FROM t GROUP BY {c}, {other}",
        f"SELECT {expr} AS e, count(*) AS n FROM t GROUP BY 1",
        f"SELECT id FROM t WHERE {c} IS NULL",
        f"SELECT id FROM t WHERE {c} = (SELECT min({c}) FROM t)",
        f"SELECT id FROM t WHERE {c} > (SELECT min({c}) FROM u)",
        f"SELECT id FROM t WHERE {c} IN (SELECT {c} FROM u)",
        f"SELECT id FROM t WHERE {c} NOT IN (SELECT {c} FROM u WHERE {c} IS NOT NULL)",
        f"SELECT min({c}) AS lo, max({c}) AS hi, count({c}) AS n, count(DISTINCT {c}) AS d FROM t",
        f"SELECT k, min({c}) AS lo, max({c}) AS hi, count(DISTINCT {c}) AS d FROM t GROUP BY k",
        f"SELECT t.id AS a, u.id AS b FROM t JOIN u ON t.{c} = u.{c}",
        f"SELECT t.id AS a, u.id AS b, u.{c} FROM t LEFT JOIN u ON t.{c} = u.{c}",
        f"SELECT t.id AS a, u.{c} FROM t FULL JOIN u ON t.k = u.k AND t.{c} = u.{c}",
        f"SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.{c} = t.{c})",
        f"SELECT {c} FROM t UNION SELECT {c} FROM u",
        f"SELECT {c} FROM t EXCEPT SELECT {c} FROM u",
        f"SELECT id, {c}, row_number() OVER (PARTITION BY {c} ORDER BY id) AS rn FROM t",
        f"SELECT DISTINCT {c} FROM t",
        f"SELECT id, {c} AS o FROM t ORDER BY {c} NULLS FIRST, id LIMIT {r.choice([1, 3, 10])}",
        f"SELECT id, {c} AS o FROM t ORDER BY {c} DESC NULLS LAST, id",
        # two columns of other kinds: the coercion of users' types
        f"SELECT t.id AS a, u.id AS b FROM t JOIN u ON t.{c} = u.{other}",
        f"SELECT id, {c} = {other} AS eq, {c} < {other} AS lt FROM t",
        f"SELECT id, coalesce({c}, {other}) AS co FROM t",
        f"SELECT {c} AS x FROM t UNION ALL SELECT {other} FROM u",
        f"SELECT id FROM t WHERE {c} IN (SELECT {other} FROM u)",
    ]
    if cls in ("int", "float", "decimal"):
        forms += [f"SELECT sum({c}) AS s, avg({c}) AS a FROM t", f"SELECT k, sum({c}) AS s FROM t GROUP BY k",
                  f"SELECT id FROM t WHERE {c} BETWEEN 0 AND 100", f"SELECT id, sum({c}) OVER (ORDER BY id) AS s FROM t"]
    if cls == "string":
        forms += [f"SELECT string_agg({c}, ',' ORDER BY {c}, id) AS g FROM t", f"SELECT id FROM t WHERE {c} < 'b'",
                  f"SELECT id FROM t WHERE {c} IN ('a', 'ab', '')"]
    sql = r.choice(forms)
    return sql, ("ordered" if "ORDER BY" in sql.split(")")[-1] else "sql")


# ------------------------------------------------------------------------------------------------ batches
def batch_tables(r: random.Random):
    """``t`` and ``u`` of 1k-20k rows (fewer for 7-row batches): ``id``, a high-cardinality ``k`` with NULLs, ``k2``,
    a string key ``s``, ``v`` ints, ``x`` doubles and ``sd``: strings dictionary-encoded per chunk, so each chunk
    (batch) has its own dictionary."""
    import pyarrow as pa

    out = {}
    for table in ("t", "u"):
        rows = r.choice([1000, 3000, 8000, 20000])
        card = r.choice([10, 500, rows // 2, rows])
        k = [None if r.random() < 0.05 else r.randrange(card) for _ in range(rows)]
        s = [None if r.random() < 0.05 else f"s{r.randrange(card)}" for _ in range(rows)]
        sd_values = [None if r.random() < 0.1 else f"w{r.randrange(r.choice([3, 50, 2000]))}" for _ in range(rows)]
        chunk = r.choice([97, 1000, 4096])
        sd = pa.chunked_array([pa.array(sd_values[i:i + chunk], pa.string()).dictionary_encode()
                               for i in range(0, rows, chunk)])
        out[table] = pa.table({
            "id": pa.array(range(rows), pa.int64()), "k": pa.array(k, pa.int64()),
            "k2": pa.array([r.randrange(7) for _ in range(rows)], pa.int32()), "s": pa.array(s, pa.string()),
            "v": pa.array([r.randint(-1000, 1000) for _ in range(rows)], pa.int64()),
            "x": pa.array([r.random() * 100 for _ in range(rows)], pa.float64()), "sd": sd})
    return out


def _batch_query(r: random.Random):
    key = r.choice(["k", "s", "k, k2", "s, k2", "sd", "k, sd", "k2"])
    join = r.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
    jkey = r.choice([("k", "k"), ("s", "s"), ("sd", "sd"), ("k", "k2"), ("s", "sd")])
    limit = r.choice([1, 10, 100])
    offset = r.choice([0, 0, 5, 999])
    forms = [
        (f"SELECT {key}, count(*) AS n, sum(v) AS sv, min(x) AS mx FROM t GROUP BY {key}", "sql"),
        (f"SELECT {key}, count(DISTINCT v) AS dv, count(DISTINCT s) AS ds FROM t GROUP BY {key}", "sql"),
        (f"SELECT count(DISTINCT k) AS a, count(DISTINCT s) AS b, count(DISTINCT sd) AS c, sum(DISTINCT v) AS d FROM t",
         "sql"),
        (f"SELECT {key}, count(*) AS n FROM t GROUP BY {key} HAVING count(*) > 1", "sql"),
        (f"SELECT count(*) AS n, sum(t.v) AS sv, count(u.id) AS nu FROM t {join} u ON t.{jkey[0]} = u.{jkey[1]}", "sql"),
        (f"SELECT t.id AS a, u.id AS b FROM t {join} u ON t.{jkey[0]} = u.{jkey[1]} AND u.k2 = 3 WHERE t.id < 300", "sql"),
        (f"SELECT count(*) AS n FROM t WHERE {jkey[0]} IN (SELECT {jkey[1]} FROM u)", "sql"),
        (f"SELECT count(*) AS n FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.{jkey[1]} = t.{jkey[0]})", "sql"),
        (f"SELECT count(*) AS n FROM t WHERE {jkey[0]} NOT IN (SELECT {jkey[1]} FROM u WHERE id < 50)", "sql"),
        (f"SELECT id, row_number() OVER (PARTITION BY {key} ORDER BY id) AS rn, sum(v) OVER (PARTITION BY {key}) AS sv "
         f"FROM t", "sql"),
        (f"SELECT id, lag(v) OVER (PARTITION BY k2 ORDER BY id) AS l, sum(v) OVER (PARTITION BY k2 ORDER BY id ROWS "
         f"BETWEEN 3 PRECEDING AND CURRENT ROW) AS w FROM t", "sql"),
        (f"SELECT id, rank() OVER (PARTITION BY k2 ORDER BY v) AS rk, count(*) OVER (PARTITION BY sd) AS c FROM t", "sql"),
        (f"SELECT id, v, s FROM t ORDER BY v, id LIMIT {limit} OFFSET {offset}", "ordered"),
        (f"SELECT id, x FROM t ORDER BY x DESC, id LIMIT {limit}", "ordered"),
        (f"SELECT id, sd FROM t ORDER BY sd NULLS FIRST, id LIMIT {limit} OFFSET {offset}", "ordered"),
        (f"SELECT id, s FROM t ORDER BY s DESC NULLS LAST, id OFFSET {offset}", "ordered"),
        (f"SELECT {key}, count(*) AS n FROM t GROUP BY {key} ORDER BY n DESC, {key} NULLS FIRST LIMIT {limit}",
         "ordered"),
        (f"SELECT sd, count(*) AS n, min(id) AS lo FROM (SELECT sd, id FROM t UNION ALL SELECT sd, id FROM u) z "
         f"GROUP BY sd", "sql"),
        (f"SELECT DISTINCT sd, k2 FROM t", "sql"),
        (f"SELECT upper(sd) AS g, count(*) AS n FROM t WHERE sd > 'w1' GROUP BY 1", "sql"),
        (f"SELECT k2, sd, count(*) AS n, sum(v) AS sv FROM t GROUP BY GROUPING SETS ((k2, sd), (k2), ())", "sql"),
        (f"SELECT k2, median(v) AS md, quantile_cont(x, 0.25) AS q, string_agg(DISTINCT sd, ',' ORDER BY sd) AS g "
         f"FROM t GROUP BY k2", "sql"),
        (f"SELECT id, first_value(v) OVER (PARTITION BY k2 ORDER BY id) AS f, last_value(v) OVER (PARTITION BY k2 "
         f"ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS l, ntile(4) OVER (PARTITION BY k2 "
         f"ORDER BY id) AS nt FROM t", "sql"),
        (f"SELECT id, sum(v) OVER (PARTITION BY k2 ORDER BY v RANGE BETWEEN 10 PRECEDING AND 10 FOLLOWING) AS w FROM t",
         "sql"),
        (f"SELECT id, k2, v FROM t QUALIFY row_number() OVER (PARTITION BY k2 ORDER BY v DESC, id) <= 3", "sql"),
        (f"SELECT {jkey[0]} AS key FROM t INTERSECT SELECT {jkey[1]} FROM u", "sql"),
        (f"SELECT {jkey[0]} AS key FROM t EXCEPT ALL SELECT {jkey[1]} FROM u", "sql"),
        (f"SELECT t.k2, count(*) AS n, count(DISTINCT u.s) AS ds FROM t {join} u ON t.{jkey[0]} = u.{jkey[1]} "
         f"AND t.v < u.v GROUP BY t.k2", "sql"),
        (f"SELECT count(*) AS n, count(DISTINCT (k, k2)) AS p, approx_count_distinct(s) IS NOT NULL AS a FROM t", "sql"),
    ]
    return r.choice(forms)


# ------------------------------------------------------------------------------------------------ parquet
PARQUET_KINDS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
                 "string", "large_string", "date32", "ts_ms_None", "ts_us_None", "ts_ns_None", "ts_us_UTC",
                 "time32ms", "time64us", "bool", "dec4_2", "dec9_0", "dec18_2", "dec28_10", "dec38_6", "dict_int32",
                 "dict_int8"]


def _parquet_case(r: random.Random, folder: Path):
    """Write ``t`` with drawn writer options; return the file and the drawn kinds (a nested column sometimes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    global KINDS
    KINDS = KINDS or _kinds()
    names = r.sample(PARQUET_KINDS, 3)
    rows = r.choice([0, 1, 7, 100, 1000, 3000])
    columns = {"id": pa.array(range(rows), pa.int64()),
               "k": pa.array([None if r.random() < 0.1 else r.randrange(50) for _ in range(rows)], pa.int64())}
    for index, name in enumerate(names):
        pool = [KINDS[name]["draw"](r) for _ in range(r.choice([3, 30, 300]))]
        columns[f"c{index}"] = _column(KINDS[name], rows, r, pool, null_entry=False)  # pyarrow writes none
    nested = r.random() < 0.2
    if nested:
        columns["n"] = r.choice([pa.array([[i, None] if i % 3 else None for i in range(rows)], pa.list_(pa.int64())),
                                 pa.array([{"a": i, "b": str(i)} for i in range(rows)]),
                                 pa.array([[("k", i)] for i in range(rows)], pa.map_(pa.string(), pa.int64()))])
    table = pa.table(columns)
    options = {
        "row_group_size": r.choice([1, 2, 7, 100, 1024, None]) if rows else None,
        "use_dictionary": r.choice([True, False, ["c0", "k"], ["c1"]]),
        "compression": r.choice(["snappy", "zstd", "gzip", "lz4", "none", "brotli"]),
        "data_page_version": r.choice(["1.0", "2.0"]),
        "write_statistics": r.choice([True, False, ["id"]]),
        "data_page_size": r.choice([None, 64, 1024]),
        "dictionary_pagesize_limit": r.choice([None, 16, 256]),  # tiny: falls back to plain mid-chunk
    }
    if rows and options["row_group_size"] == 1 and rows > 200:
        options["row_group_size"] = 7
    path = folder / f"f{r.randrange(10 ** 9)}.parquet"
    pq.write_table(table, path, **{k: v for k, v in options.items() if v is not None})
    return path, names, nested, options


def _parquet_query(r: random.Random, path: Path, names: list[str], nested: bool):
    source = "f"
    index = r.randrange(len(names))
    c = f"c{index}"
    cls = KINDS[names[index]]["class"]
    forms = [
        (f"SELECT * FROM {source}", "sql"),
        (f"SELECT id, {c} FROM {source} WHERE {c} IS NOT NULL", "sql"),
        (f"SELECT {c}, count(*) AS n, min(id) AS lo FROM {source} GROUP BY {c}", "sql"),
        (f"SELECT k, count(DISTINCT {c}) AS d, max({c}) AS m FROM {source} GROUP BY k", "sql"),
        (f"SELECT id FROM {source} WHERE {c} = (SELECT max({c}) FROM {source})", "sql"),
        (f"SELECT id, {c} AS o FROM {source} ORDER BY {c} NULLS LAST, id LIMIT 20", "ordered"),
        (f"SELECT id FROM {source} WHERE id BETWEEN 5 AND 60 AND k > 10", "sql"),
        (f"SELECT count(*) AS n, count({c}) AS nc FROM {source}", "sql"),
    ]
    if cls == "string":
        forms.append((f"SELECT id FROM {source} WHERE {c} IN ('a', 'ab', 'zz') OR {c} LIKE '%b%'", "sql"))
    if cls in ("int", "float", "decimal"):
        forms.append((f"SELECT sum({c}) AS s, min({c}) AS lo FROM {source} WHERE {c} > 0", "sql"))
    if nested:
        forms += [(f"SELECT id, n FROM {source}", "sql"), (f"SELECT count(*) AS n FROM {source}", "sql")]
    return r.choice(forms)


# ------------------------------------------------------------------------------------------------ coercion
def coercion_tables(r: random.Random):
    """``t``: ``i8`` tinyint, ``i32``, ``i64``, ``u64`` (past 2**63), ``u8`` utinyint, ``d2`` decimal(5,2), ``d6`` decimal(18,6), ``f`` double,
    ``s`` number-like strings, ``dt`` date, ``ts`` timestamp; ``u`` the same."""
    import pyarrow as pa

    out = {}
    for table in ("t", "u"):
        rows = r.choice([0, 3, 10, 25])

        def draw(values, null=0.15):
            return [None if r.random() < null else r.choice(values) for _ in range(rows)]
        out[table] = pa.table({
            "id": pa.array(range(rows), pa.int64()),
            "i8": pa.array(draw([-128, -7, -1, 0, 1, 2, 7, 127]), pa.int8()),
            "i32": pa.array(draw([-7, -2, 0, 1, 2, 3, 7, 100, 2 ** 31 - 1]), pa.int32()),
            "i64": pa.array(draw([-7, -1, 0, 1, 2, 7, 2 ** 40, -2 ** 63]), pa.int64()),
            "u64": pa.array(draw([0, 1, 2, 7, 2 ** 63, 2 ** 64 - 1]), pa.uint64()),
            "u8": pa.array(draw([0, 1, 2, 7, 255]), pa.uint8()),
            "d2": pa.array(draw([decimal.Decimal(v) for v in ("-7.00", "1.00", "1.50", "2.00", "0.00", "999.99")]),
                           pa.decimal128(5, 2)),
            "d6": pa.array(draw([decimal.Decimal(v) for v in ("-7.000000", "1.000000", "1.500000", "0.333333",
                                                              "2.000001")]), pa.decimal128(18, 6)),
            "f": pa.array(draw([-7.0, 1.0, 1.5, 2.0, 0.1, -0.0, 1e20]), pa.float64()),
            "s": pa.array(draw(["1", "1.5", "2", "-7", " 3", "abc", "", "1e2", "01"]), pa.string()),
            "dt": pa.array(draw(DATES[:4]), pa.date32()),
            "ts": pa.array(draw([datetime.datetime(2000, 2, 29), datetime.datetime(2000, 2, 29, 12),
                                 datetime.datetime(1970, 1, 1), datetime.datetime(2024, 12, 31, 23, 59)]),
                           pa.timestamp("us")),
        })
    return out


NUMERIC_COLS = ["i8", "i32", "i64", "u8", "d2", "d6", "f", "u64"]
NUMERIC_LITS = ["1", "-7", "1.5", "1.50", "2.0", "1e0", "CAST(1 AS TINYINT)", "CAST(1.5 AS DECIMAL(10, 4))",
                "CAST(2 AS DOUBLE)", "300", "9223372036854775807", "0.333333"]


def _coercion_query(r: random.Random):
    a, b = r.sample(NUMERIC_COLS, 2)
    lit, lit2 = r.choice(NUMERIC_LITS), r.choice(NUMERIC_LITS)
    op = r.choice(["=", "<>", "<", ">=", "IS DISTINCT FROM"])
    n, m = r.choice(["i8", "i32", "i64", "-7", "7", "-1"]), r.choice(["2", "-2", "3", "-3", "i8", "i32", "d2"])
    temporal = r.choice([("dt", "ts"), ("dt", "TIMESTAMP '2000-02-29 00:00:00'"), ("ts", "DATE '2000-02-29'"),
                         ("dt", "'2000-02-29'"), ("ts", "'2000-02-29 12:00:00'")])
    forms = [
        f"SELECT id FROM t WHERE {a} {op} {b}",
        f"SELECT id FROM t WHERE {a} {op} {lit}",
        f"SELECT id FROM t WHERE {a} IN ({lit}, {lit2}, {b})",
        f"SELECT id FROM t WHERE {a} NOT IN ({lit}, {lit2})",
        f"SELECT id, CASE WHEN {a} > 0 THEN {a} ELSE {b} END AS c FROM t",
        f"SELECT id, CASE WHEN {a} IS NULL THEN {lit} WHEN {b} > 1 THEN {b} ELSE {a} END AS c FROM t",
        f"SELECT id, coalesce({a}, {b}, {lit}) AS c FROM t",
        f"SELECT id, nullif({a}, {lit}) AS c FROM t",
        f"SELECT {a} AS c FROM t UNION SELECT {b} FROM u",
        f"SELECT {a} AS c FROM t UNION ALL SELECT {b} FROM u",
        f"SELECT {a} AS c FROM t INTERSECT SELECT {b} FROM u",
        f"SELECT {a} AS c FROM t EXCEPT SELECT {b} FROM u",
        f"SELECT t.id AS x, u.id AS y FROM t JOIN u ON t.{a} = u.{b}",
        f"SELECT id, {n} // {m} AS q, {n} % {m} AS r FROM t",
        f"SELECT id, {n} / {m} AS q FROM t",
        f"SELECT id, {a} + {b} AS p, {a} * {b} AS m, {a} - {lit} AS d FROM t",
        f"SELECT id, greatest({a}, {b}) AS g, least({a}, {lit}) AS l FROM t",
        f"SELECT id FROM t WHERE s {op} {r.choice(['1', '1.5', 'i32', 'd2', 'f'])}",
        f"SELECT id FROM t WHERE s IN ({lit}, {lit2})",
        f"SELECT id, coalesce(s, {lit}) AS c FROM t",
        f"SELECT id, CASE WHEN id % 2 = 0 THEN s ELSE {a} END AS c FROM t",
        f"SELECT id FROM t WHERE {temporal[0]} {op} {temporal[1]}",
        f"SELECT id, coalesce({temporal[0]}, {temporal[1]}) AS c FROM t",
        f"SELECT id, CASE WHEN id > 2 THEN dt ELSE ts END AS c FROM t",
        f"SELECT dt AS c FROM t UNION SELECT ts FROM u",
        f"SELECT id FROM t WHERE dt IN (ts, {temporal[1]})",
        f"SELECT {a}, count(*) AS n FROM (SELECT {a} FROM t UNION ALL SELECT {b} FROM u) z GROUP BY 1",
        f"SELECT id, {a} BETWEEN {b} AND {lit} AS c FROM t",
        f"SELECT id, {a} = ANY (SELECT {b} FROM u) AS c FROM t",
        f"SELECT {r.choice(['dt', 'ts', 's'])} AS c FROM t UNION SELECT {r.choice(['dt', 'ts', 's', a])} FROM u",
        f"SELECT id, CASE WHEN {a} > {lit} THEN 'big' WHEN {a} IS NULL THEN NULL ELSE s END AS c FROM t",
        f"SELECT id, {a} IN (SELECT {b} FROM u) AS c FROM t",
        f"SELECT id, {n} % {m} AS r, {n} // {m} AS q, mod({n}, {m}) AS md FROM t WHERE {m} <> 0",
        f"SELECT id, CAST({a} AS VARCHAR) = s AS c, s = {lit} AS e FROM t",
        f"SELECT id, {temporal[0]} BETWEEN {temporal[1]} AND TIMESTAMP '2030-01-01' AS c FROM t",
    ]
    return r.choice(forms), "sql"


# ------------------------------------------------------------------------------------------------ run
def _session(data, device, drivers, batch_rows, split_rows):
    from duckdb_reference import session_with_tables

    options = {"device": device, "drivers": drivers}
    if batch_rows is not None:
        options["batch_rows"] = batch_rows
    return session_with_tables(data, split_rows=split_rows, **options)


def _duckdb(data):
    import duckdb
    import pyarrow as pa

    connection = duckdb.connect()
    connection.execute("SET TimeZone='UTC'")
    for name, table in data.items():
        if isinstance(table, Path):  # a Parquet file: DuckDB's own reader
            connection.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{table}')")
            continue
        try:
            connection.register(name, table)
        except duckdb.Error:  # DuckDB reads no decimal256 / float16: the same values as decimal128 / float32
            fields = [pa.field(f.name, pa.decimal128(f.type.precision, f.type.scale))
                      if pa.types.is_decimal256(f.type) else pa.field(f.name, pa.float32())
                      if pa.types.is_float16(f.type) else f for f in table.schema]
            try:
                connection.register(name, table.cast(pa.schema(fields)))
            except duckdb.Error:
                pass
    return connection


def _case(family: str, r: random.Random, folder: Path):
    """Draw one case: (tables, sql, how, settings)."""
    drivers = r.choice([1, 2, 3])
    if family == "arrow":
        data, names = arrow_tables(r)
        sql, how = _arrow_query(r, names)
        return data, sql, how, {"drivers": drivers, "batch_rows": r.choice([7, None]), "split_rows": r.choice([3, 7, 100]),
                                "kinds": names}
    if family == "batches":
        data = batch_tables(r)
        batch_rows = r.choice([7, 100, 1024])
        if batch_rows == 7:  # thousands of 7-row batches: keep a case to seconds
            data = {name: table.slice(0, 1500) for name, table in data.items()}
        sql, how = _batch_query(r)
        return data, sql, how, {"drivers": drivers, "batch_rows": batch_rows,
                                "split_rows": r.choice([None, 333, 4096]), "rows": {n: t.num_rows for n, t in data.items()}}
    if family == "parquet":
        path, names, nested, options = _parquet_case(r, folder)
        sql, how = _parquet_query(r, path, names, nested)
        return {"f": path}, sql, how, {"drivers": drivers, "batch_rows": r.choice([7, 100, None]), "split_rows": None,
                              "kinds": names, "options": options}
    data = coercion_tables(r)
    sql, how = _coercion_query(r)
    return data, sql, how, {"drivers": drivers, "batch_rows": r.choice([7, None]), "split_rows": r.choice([3, 100])}


def _types_differ_loosely(detail: str) -> bool:
    """A type difference that is only a timestamp's zone name (DuckDB answers in its session zone, UTC)."""
    return "tz=" in detail and detail.count("timestamp[") == 2 and (
        detail.split("engine ")[1].split(",")[0] == detail.split("DuckDB ")[1].split(",")[0])


def _compare11(session, connection, sql, how):
    status, detail = _compare_case(session, connection, sql, how)
    if status == "type" and _types_differ_loosely(detail):
        return "ok", ""
    if status == "wrong" and "cannot match DuckDB type" in detail:
        return "type", detail  # rows_mismatch compares no values across type kinds
    return status, detail


def run(seeds: range, device: str, families: list[str], verbose: bool) -> dict:
    return run_family_cases(
        seeds, device, families, verbose, _case,
        lambda data, device, s: _session(data, device, s["drivers"], s["batch_rows"], s["split_rows"]), _duckdb,
        _compare11, REPORTED_STATUSES + ("type", "both_raised_raw"))


FAMILIES = ("arrow", "batches", "parquet", "coercion")


def main(argv=None) -> int:
    return family_fuzz_main(argv, __doc__.splitlines()[0], FAMILIES, run, refusals_shown=12)


if __name__ == "__main__":
    sys.exit(main())
