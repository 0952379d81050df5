"""Fuzz window frames over many batches, nested set operations with their own ORDER BY / LIMIT, interval
arithmetic, decimals at their precision limits, LIKE / ILIKE / regular expressions over unicode and result types
against DuckDB (fuzz hardening round 12).

Why: round 9 drew window frames over tables of at most 16 rows in batches of 7 rows or the default; round 11's
``batches`` drew windows over many batches but one frame kind; set operations were drawn with ORDER BY only at the
top (round 9) or beneath LIMIT once (round 5); interval arithmetic only as ``ts + INTERVAL <constant>`` (round 10);
decimals as two columns of precision 9 / 18 (rounds 7-10), never near 38 digits; LIKE without ESCAPE, no ILIKE,
regular expressions without flags; and result types only beside values (round 10's ``type``). This round draws:

- ``wframes``: ``w(id, p, o, f, m, dt, s)`` of 0-400 rows (ties: ``o`` of few values with NULLs, partitions of
  1-6 keys with NULLs, a WHERE that empties some), in batches of 1, 2, 3, 5, 64 or 1024 rows over 1-3 drivers:
  ROWS / RANGE / GROUPS frames with offsets (0, 1, 3, large), UNBOUNDED, CURRENT ROW, every EXCLUDE, and the
  aggregate, value (with IGNORE NULLS, default values) and ranking functions; value functions and ROWS frames are
  ordered by ``id`` last (one answer).
- ``setnest``: UNION / INTERSECT / EXCEPT [ALL] of 2-4 parenthesised branches, each with its own ORDER BY (all its
  columns, so the rows kept are one multiset) / LIMIT / OFFSET (0, past the end), nested two deep, under an outer
  ORDER BY (compared in order) / LIMIT / OFFSET, inside CTEs and subqueries.
- ``intervals``: intervals built from columns (``INTERVAL (k) MONTH``, ``to_days(v)``, ``k * INTERVAL``),
  negative, added to / subtracted from dates and timestamps at month ends and leap days, compared, extracted
  (every part), as group keys, ``date_add`` / ``age``, ``ts - ts``.
- ``decimals``: ``dc`` with decimal(4,1), decimal(18,2) near 10**16, decimal(38,6) near 10**32 and decimal(38,0)
  near 10**37 columns: + - * / % between them and integers, sum / avg / min / max, casts to narrower decimals,
  round / abs / negation, CASE / COALESCE across scales; an overflow must raise as DuckDB's does (never wrap).
- ``patterns``: LIKE / NOT LIKE / ILIKE with ESCAPE, ``_`` over multi-byte characters, GLOB, SIMILAR TO,
  regexp_matches / regexp_replace / regexp_extract / regexp_full_match with flags ('i', 'c', 'g', 's'), upper /
  lower / position / lpad / rpad / reverse / split_part over non-ASCII text, as filters and keys.
- ``types``: users' Arrow columns whose result type DuckDB chooses by rules (int8 / uint64 / int64 in arithmetic,
  COALESCE, CASE, UNION; zoned timestamps of s / ms / ns; time64[ns]; decimals beside integers); a column type
  that differs from DuckDB's (integer widths included, zone names aside) is counted as ``type``.

    python -m bench.fuzz_round12 --seeds 0:300 [--device cuda-sim] [--families wframes,setnest] [--out F]

Prints every wrong case, crash, type difference, engine error where DuckDB answered, or answer where DuckDB raised;
then counts per family and status, and the refusals per family. Exits 1 when any case was wrong or crashed.
Comparison: round 10's ``_compare_case`` (round 5's ``_compare``: multisets, floats to 1e-7; ``ordered`` row for
row); tables beside round 10's (``t u w p q`` with ``sd``); sessions: round 7's.
"""

import collections
import datetime
import decimal
import random
import sys
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.fuzz_round7 import _duckdb, _session  # noqa: E402 (after the path it needs)
from bench.fuzz_round10 import _compare_case, _type_class, tables as round10_tables  # noqa: E402
from bench.sql_fuzz import REPORTED_STATUSES, family_fuzz_main, record_family_outcome  # noqa: E402

UNICODE = ["", " ", "a", "A", "é", "É", "ß", "SS", "İ", "i", "ı", "Ω", "ω", "日本", "😀", "a_b", "a%b", "a\\b",
           "ǅ", "ﬁ", "Straße", "ÀÉÎ", "àéî", "x😀y", "_", "%", "\\", "ab" * 20, "naïve café", "ΣΑΣ"]


def _w_table(rng: random.Random, rows: int):
    import pyarrow as pa

    partitions = rng.randint(1, 6)
    order_values = rng.randint(1, 8)
    out = {"id": list(range(rows)),
           "p": [None if rng.random() < 0.1 else rng.randrange(partitions) for _ in range(rows)],
           "o": [None if rng.random() < 0.12 else rng.randrange(order_values) * rng.choice([1, 1, 1, 3]) for _ in range(rows)],
           "f": [None if rng.random() < 0.15 else rng.choice([-1.5, 0.0, 2.25, 7.0, 1e6, -3.0]) for _ in range(rows)],
           "m": [None if rng.random() < 0.15 else decimal.Decimal(rng.randrange(-500, 500)) / 100 for _ in range(rows)],
           "dt": [None if rng.random() < 0.1 else datetime.date(2024, 1, 28) + datetime.timedelta(days=rng.randrange(6) * rng.choice([1, 15]))
                  for _ in range(rows)],
           "s": [None if rng.random() < 0.15 else rng.choice(UNICODE[:12]) for _ in range(rows)]}
    return pa.table({"id": pa.array(out["id"], pa.int64()), "p": pa.array(out["p"], pa.int64()),
                     "o": pa.array(out["o"], pa.int64()), "f": pa.array(out["f"], pa.float64()),
                     "m": pa.array(out["m"], pa.decimal128(9, 2)), "dt": pa.array(out["dt"], pa.date32()),
                     "s": pa.array(out["s"], pa.string())})


# ------------------------------------------------------------------------------------------------ wframes
W_PARTITIONS = ["", "PARTITION BY p ", "PARTITION BY p ", "PARTITION BY p, o % 2 ", "PARTITION BY s ",
                "PARTITION BY p IS NULL ", "PARTITION BY dt "]
W_FILTERS = ["", "", " WHERE p <> 1", " WHERE o IS NOT NULL", " WHERE false", " WHERE id % 3 = 0", " WHERE p = 0"]
OFFSETS = ["0", "1", "1", "2", "3", "100"]
AGGREGATES = ["sum(o)", "count(o)", "count(*)", "avg(f)", "min(f)", "max(s)", "sum(m)", "max(dt)", "min(m)",
              "avg(o)", "count(DISTINCT o)" if False else "bool_or(o > 2)", "string_agg(s, ',')" if False else "max(o)"]
VALUES = ["first_value(o)", "last_value(f)", "nth_value(s, 2)", "first_value(o IGNORE NULLS)",
          "last_value(s IGNORE NULLS)", "nth_value(m, 1)"]
POSITIONAL = ["lag(o)", "lead(f)", "lag(s, 2)", "lead(o, 3, -1)", "lag(m, 1, 0)", "lead(dt, 2)", "lag(o, 0)",
              "lag(f IGNORE NULLS)" if False else "lead(s, 1, 'z')"]
RANKS = ["row_number()", "rank()", "dense_rank()", "percent_rank()", "cume_dist()", "ntile(3)", "ntile(1)",
         "ntile(50)"]
EXCLUDES = ["", "", "", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES", " EXCLUDE NO OTHERS"]


def _position(bound: str) -> int:
    """Where a frame bound lies: UNBOUNDED PRECEDING 0, n PRECEDING 1, CURRENT ROW 2, n FOLLOWING 3, UNBOUNDED
    FOLLOWING 4."""
    if bound == "CURRENT ROW":
        return 2
    return (0 if bound.startswith("UNBOUNDED") else 1) if bound.endswith("PRECEDING") else (
        4 if bound.startswith("UNBOUNDED") else 3)


def _frame(r: random.Random, kind: str) -> str:
    def bound(side: str) -> str:
        choice = r.random()
        if choice < 0.2:
            return f"UNBOUNDED {side}"
        if choice < 0.35:
            return "CURRENT ROW"
        return f"{r.choice(OFFSETS)} {side}"

    start, end = bound("PRECEDING") if r.random() < 0.7 else bound("FOLLOWING"), (
        bound("FOLLOWING") if r.random() < 0.7 else bound("PRECEDING"))
    if start.startswith("UNBOUNDED FOLLOWING"):
        start = "UNBOUNDED PRECEDING"
    if end.startswith("UNBOUNDED PRECEDING"):
        end = "UNBOUNDED FOLLOWING"
    if _position(start) > _position(end):  # a frame starting after it ends does not parse: end it last instead
        end = "UNBOUNDED FOLLOWING"
    if r.random() < 0.1:
        return f" {kind} {start if 'PRECEDING' in start or start == 'CURRENT ROW' else 'CURRENT ROW'}{r.choice(EXCLUDES)}"
    return f" {kind} BETWEEN {start} AND {end}{r.choice(EXCLUDES)}"


def _window_call(r: random.Random) -> str:
    partition = r.choice(W_PARTITIONS)
    direction = r.choice(["", " DESC"]) + r.choice(["", " NULLS FIRST", " NULLS LAST"])
    family = r.random()
    if family < 0.5:
        function = r.choice(AGGREGATES)
        kind = r.choice(["ROWS", "RANGE", "GROUPS", "RANGE", "GROUPS"])
        if kind == "ROWS":
            order = f"ORDER BY o{direction}, id"
        elif kind == "RANGE" and r.random() < 0.3:
            key = r.choice(["dt", "f", "m"])
            order = f"ORDER BY {key}{direction}"
            frame = _frame(r, kind)
            if key == "dt":
                frame = frame.replace("100 ", "INTERVAL 100 DAY ").replace("3 ", "INTERVAL 3 DAY ").replace(
                    "2 ", "INTERVAL 2 DAY ").replace("1 ", "INTERVAL 1 DAY ").replace("0 ", "INTERVAL 0 DAY ")
            return f"{function} OVER ({partition}{order}{frame})"
        else:
            order = f"ORDER BY o{direction}"
        return f"{function} OVER ({partition}{order}{_frame(r, kind)})"
    if family < 0.7:
        kind = r.choice(["ROWS", "GROUPS"])  # RANGE with offsets takes one ORDER BY key: ties, no one answer
        frame = _frame(r, kind) if r.random() < 0.7 else ""
        return f"{r.choice(VALUES)} OVER ({partition}ORDER BY o{direction}, id{frame})"
    if family < 0.85:
        return f"{r.choice(POSITIONAL)} OVER ({partition}ORDER BY o{direction}, id)"
    rank = r.choice(RANKS)  # row_number and ntile number tied rows by position: ordered by id last
    tail = ", id" if rank.startswith(("row_number", "ntile")) or r.random() < 0.5 else ""
    return f"{rank} OVER ({partition}ORDER BY o{direction}{tail})"


def _wframes(r: random.Random):
    calls = [f"{_window_call(r)} AS e{i}" for i in range(r.randint(1, 3))]
    where = r.choice(W_FILTERS)
    if r.random() < 0.85:
        return f"SELECT id, {', '.join(calls)} FROM w{where}", None, "sql"
    return (f"SELECT p, count(*) AS n, count(e0) AS ce, min(e0) AS lo FROM (SELECT p, {calls[0]} FROM w{where}) z GROUP BY p",
            None, "sql")


# ------------------------------------------------------------------------------------------------ setnest
SN_BRANCHES = [("v", "k"), ("k", "v"), ("m", "k"), ("x", "v"), ("v", "NULL"), ("CAST(k AS DOUBLE)", "i"),
               ("n", "k"), ("1", "k"), ("v + 1", "k - 1"), ("id % 3", "k")]
SETOPS = ["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL", "UNION ALL", "UNION"]


def _sn_branch(r: random.Random, shape: tuple[str, str]) -> str:
    a, b = shape
    if r.random() < 0.3:
        a, b = r.choice(SN_BRANCHES)
    table = r.choice(["t", "u", "w", "p", "q"])
    where = r.choice(["", "", " WHERE v > 0", " WHERE k IS NULL", " WHERE false", " WHERE s IS NOT NULL"])
    text = f"SELECT {a} AS c1, {b} AS c2 FROM {table}{where}"
    if r.random() < 0.5:
        direction = r.choice(["", " DESC"]) + r.choice(["", " NULLS FIRST", " NULLS LAST"])
        text += f" ORDER BY 1{direction}, 2{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST'])}"
        text += r.choice([f" LIMIT {r.choice([0, 1, 2, 5, 100])}", f" LIMIT {r.choice([1, 3])} OFFSET {r.choice([0, 1, 4, 50])}",
                          f" OFFSET {r.choice([1, 2, 50])}", ""])
    elif r.random() < 0.2:
        text = f"SELECT DISTINCT {a} AS c1, {b} AS c2 FROM {table}{where}"
    return f"({text})"


def _sn_expr(r: random.Random, shape, depth: int = 0) -> str:
    parts = []
    for _ in range(r.randint(2, 3 if depth else 4)):
        if depth == 0 and r.random() < 0.3:
            inner = _sn_expr(r, shape, 1)
            if r.random() < 0.5:
                inner = (f"SELECT * FROM ({inner}) z ORDER BY 1{r.choice(['', ' DESC'])}, 2 NULLS FIRST "
                         f"LIMIT {r.choice([0, 1, 2, 4, 100])}")
            parts.append(f"({inner})")
        else:
            parts.append(_sn_branch(r, shape))
    text = parts[0]
    for part in parts[1:]:
        text += f" {r.choice(SETOPS)} {part}"
    return text


def _setnest(r: random.Random):
    shape = r.choice(SN_BRANCHES)
    body = _sn_expr(r, shape)
    outer = r.random()
    if outer < 0.35:
        order = (f" ORDER BY 1{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}, "
                 f"2{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}")
        limit = r.choice(["", f" LIMIT {r.choice([0, 1, 3, 100])}", f" LIMIT 2 OFFSET {r.choice([0, 1, 3, 100])}",
                          f" OFFSET {r.choice([1, 100])}"])
        return f"SELECT * FROM ({body}) z{order}{limit}", None, "ordered"
    if outer < 0.55:
        return f"{body} ORDER BY 1 NULLS LAST, 2 DESC NULLS FIRST", None, "ordered"
    if outer < 0.7:
        return f"WITH c AS ({body}) SELECT c1, count(*) AS n FROM c GROUP BY c1", None, "sql"
    if outer < 0.8:
        return (f"WITH c AS ({body}) SELECT * FROM c {r.choice(['UNION', 'EXCEPT', 'INTERSECT ALL'])} "
                f"SELECT c2, c1 FROM c"), None, "sql"
    if outer < 0.9:
        return f"SELECT count(*) AS n, count(DISTINCT c1) AS d FROM ({body}) z", None, "sql"
    return f"SELECT * FROM ({body}) z", None, "sql"


# ------------------------------------------------------------------------------------------------ intervals
IV = ["INTERVAL 1 MONTH", "INTERVAL (-1) MONTH", "INTERVAL 1 DAY", "INTERVAL '-1 month -1 day'", "INTERVAL 13 MONTH",
      "INTERVAL '1 year 2 months 3 days 04:05:06.000007'", "INTERVAL (k) MONTH", "INTERVAL (v) DAY", "to_days(v)",
      "to_months(k)", "to_hours(v)", "k * INTERVAL 1 MONTH", "INTERVAL 1 MONTH * v", "to_years(k)",
      "INTERVAL '-25 hours'", "INTERVAL 0 DAY", "to_minutes(v * 90)", "to_seconds(x)" if False else "to_weeks(k)",
      "INTERVAL 1 MONTH - INTERVAL 31 DAY", "-INTERVAL 2 MONTH", "INTERVAL '1 month' / 2" if False else "INTERVAL 48 HOUR"]
IV_DATES = ["d", "d", "DATE '2024-01-31'", "DATE '2024-02-29'", "DATE '2023-03-31'", "DATE '2000-12-31'",
            "DATE '1969-12-31'", "DATE '2024-03-31'", "NULL::DATE"]
IV_STAMPS = ["ts", "ts", "TIMESTAMP '2024-01-31 23:59:59.999999'", "TIMESTAMP '2024-02-29 12:00:00'",
             "TIMESTAMP '1969-12-31 23:00:00'", "CAST(d AS TIMESTAMP)"]
IV_PARTS = ["year", "month", "day", "hour", "minute", "second", "millisecond", "microsecond", "epoch", "quarter",
            "decade", "century", "millennium"]


def _interval_expr(r: random.Random) -> str:
    iv, d, ts = r.choice(IV), r.choice(IV_DATES), r.choice(IV_STAMPS)
    return r.choice([
        f"{d} + {iv}", f"{d} - {iv}", f"{ts} + {iv}", f"{ts} - {iv}", f"{iv} + {d}", f"{d} + {iv} + {r.choice(IV)}",
        f"date_add({d}, {iv})", f"date_add({ts}, {iv})", f"{ts} - {r.choice(IV_STAMPS)}",
        f"({ts} - {r.choice(IV_STAMPS)}) {r.choice(['<', '>', '='])} {iv}", f"{iv} {r.choice(['<', '=', '>='])} {r.choice(IV)}",
        f"extract({r.choice(IV_PARTS)} FROM {iv})", f"date_part('{r.choice(IV_PARTS)}', {iv})",
        f"{iv}", f"{iv} + {r.choice(IV)}", f"{iv} - {r.choice(IV)}", f"age({ts}, {r.choice(IV_STAMPS)})",
        f"date_trunc('month', {d} + {iv})", f"last_day({d} + {iv})", f"CAST({d} + {iv} AS DATE)",
        f"{d} + {iv} {r.choice(['<', '=', '>'])} {r.choice(IV_DATES)}", f"epoch({ts} + {iv})",
        f"day({d} + {iv})", f"month({ts} - {iv})",
    ])


def _intervals(r: random.Random):
    shape = r.random()
    exprs = [f"{_interval_expr(r)} AS e{i}" for i in range(r.randint(1, 3))]
    if shape < 0.6:
        return f"SELECT id, {', '.join(exprs)} FROM t", None, "sql"
    if shape < 0.75:
        return f"SELECT id FROM t WHERE {_interval_expr(r)} IS NOT NULL", None, "sql"
    if shape < 0.9:
        key = _interval_expr(r)
        return f"SELECT {key} AS g, count(*) AS n FROM t GROUP BY {key}", None, "sql"
    return (f"SELECT min({r.choice(IV_DATES)} + {r.choice(IV)}) AS lo, max({r.choice(IV_STAMPS)} - {r.choice(IV)}) AS hi "
            f"FROM t"), None, "sql"


# ------------------------------------------------------------------------------------------------ decimals
def _dc_table(rng: random.Random):
    import pyarrow as pa

    rows = rng.choice([0, 1, 3, 8, 20])

    def column(precision: int, scale: int, edges: list[str]):
        values = []
        for _ in range(rows):
            if rng.random() < 0.12:
                values.append(None)
            elif rng.random() < 0.5:
                values.append(decimal.Decimal(rng.choice(edges)))
            else:
                values.append(decimal.Decimal(rng.randrange(1 - 10 ** min(precision, 6), 10 ** min(precision, 6))).scaleb(-scale))
        return pa.array(values, pa.decimal128(precision, scale))

    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "a": column(4, 1, ["999.9", "-999.9", "0.0", "0.5", "-0.5"]),
        "b": column(18, 2, ["9999999999999999.99", "-9999999999999999.99", "5000000000000000.00", "0.01", "-0.01"]),
        "c": column(38, 6, ["99999999999999999999999999999999.999999", "-99999999999999999999999999999999.999999",
                            "12345678901234567890123456789012.345678", "0.000001"]),
        "e": column(38, 0, ["99999999999999999999999999999999999999", "-99999999999999999999999999999999999999",
                            "10000000000000000000000000000000000000", "1"]),
        "z": pa.array([None if rng.random() < 0.1 else rng.choice([0, 1, -1, 7, 9223372036854775807, -3, 100])
                       for _ in range(rows)], pa.int64()),
    })


DC = ["a", "b", "c", "e", "z", "-a", "b * 1", "CAST(z AS DECIMAL(18,0))", "1.5", "0.001", "99999999999999999.5",
      "CAST(1 AS DECIMAL(38,37))", "a * a", "b * 100"]
DC_TYPES = ["DECIMAL(4,1)", "DECIMAL(3,0)", "DECIMAL(18,2)", "DECIMAL(18,0)", "DECIMAL(38,6)", "DECIMAL(38,0)",
            "DECIMAL(10,5)", "DECIMAL(20,10)", "DECIMAL(38,20)", "BIGINT", "INTEGER", "DOUBLE", "HUGEINT", "VARCHAR"]


def _decimal_expr(r: random.Random) -> str:
    x, y = r.choice(DC), r.choice(DC)
    return r.choice([
        f"{x} + {y}", f"{x} - {y}", f"{x} * {y}", f"{x} / {y}", f"{x} % {y}", f"{x} // {y}" if False else f"-{x}",
        f"abs({x})", f"round({x}, {r.choice(['0', '1', '2', '-1', '-5', '10'])})", f"ceil({x})", f"floor({x})",
        f"CAST({x} AS {r.choice(DC_TYPES)})", f"TRY_CAST({x} AS {r.choice(DC_TYPES)})",
        f"{x} {r.choice(['<', '=', '>=', '<>'])} {y}", f"greatest({x}, {y})", f"least({x}, {y})",
        f"coalesce({x}, {y})", f"CASE WHEN id % 2 = 0 THEN {x} ELSE {y} END", f"{x} IN ({y}, 0.5, 1)",
        f"sign({x})", f"{x} * {y} * {r.choice(DC)}", f"CAST({x} AS VARCHAR)",
    ])


def _decimals(r: random.Random):
    shape = r.random()
    exprs = [f"{_decimal_expr(r)} AS e{i}" for i in range(r.randint(1, 2))]
    if shape < 0.5:
        return f"SELECT id, {', '.join(exprs)} FROM dc", None, "sql"
    if shape < 0.65:
        return f"SELECT id FROM dc WHERE {_decimal_expr(r)} IS NOT NULL", None, "sql"
    if shape < 0.9:
        x = r.choice(DC + [_decimal_expr(r)])
        agg = r.choice(["sum", "avg", "min", "max", "sum", "count"])
        group = r.choice(["", " GROUP BY id % 2", " WHERE id < 3"])
        key = "id % 2 AS g, " if "GROUP" in group else ""
        return f"SELECT {key}{agg}({x}) AS s FROM dc{group}", None, "sql"
    return f"SELECT sum(b) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s, id FROM dc", None, "sql"


# ------------------------------------------------------------------------------------------------ patterns
PATTERNS = ["%", "_", "%é%", "_é%", "%ß", "%a\\_b%", "%a\\%b%", "\\\\%", "%😀%", "_😀_", "%Σ%", "%%", "",
            "a%", "%İ%", "%ss%", "___", "%\\_%", "%Ω", "日_", "%b"]
PATTERN_TEXTS = ["s", "sd", "upper(s)", "lower(sd)", "'Straße'", "'x😀y'", "coalesce(s, sd)"]
REGEXES = ["^a", "é", "(?i)É", "[à-î]+", "^.$", "^..$", "\\p{L}+" if False else "[ß]", "ss", "(a)(b)?", "😀",
           ".", "^$", "Σ|σ", "\\w+", "[^a-z]"]
REGEX_FLAGS = ["i", "c", "s", "", "g"]
REPLACEMENTS = ["X", "", "\\1", "é"]


def _pattern_expr(r: random.Random) -> str:
    s, p = r.choice(PATTERN_TEXTS), r.choice(PATTERNS)
    rx, flag = r.choice(REGEXES), r.choice(REGEX_FLAGS)
    return r.choice([
        f"{s} LIKE '{p}'", f"{s} NOT LIKE '{p}'", f"{s} ILIKE '{p}'", f"{s} NOT ILIKE '{p}'",
        f"{s} LIKE '{p.replace(chr(92), '#')}' ESCAPE '#'", f"{s} ILIKE '{p.replace(chr(92), '!')}' ESCAPE '!'",
        f"{s} LIKE '{p}' ESCAPE '\\'", f"{s} GLOB '{r.choice(['*', '?', '*é*', '[a-c]*', '??', '*😀*'])}'",
        f"{s} SIMILAR TO '{r.choice(['a.*', '.*é', '(ab)+', '.', 'É|é'])}'",
        f"regexp_matches({s}, '{rx}'{', ' + repr(flag) if flag and flag != 'g' else ''})",
        f"regexp_full_match({s}, '{rx}')",
        f"regexp_replace({s}, '{rx}', '{r.choice(REPLACEMENTS)}'{', ' + repr(flag) if flag else ''})",
        f"regexp_extract({s}, '{rx}'{', 0' if r.random() < 0.5 else ''})",
        f"upper({s})", f"lower({s})", f"length(upper({s}))", f"position('{r.choice(['é', 'ß', '😀', 'a', ''])}' IN {s})",
        f"lpad({s}, {r.choice([0, 2, 5])}, '{r.choice(['é', '😀', '-'])}')",
        f"rpad({s}, {r.choice([1, 3, 6])}, '{r.choice(['日', 'ab'])}')", f"reverse({s})",
        f"split_part({s}, '{r.choice(['é', 'ß', '😀', ' ', 'a'])}', {r.choice([1, 2, -1])})",
        f"substr({s}, {r.choice([1, 2, -1, -2])}, {r.choice([1, 2, 3])})", f"strpos({s}, '{r.choice(['é', 'S', '日'])}')",
        f"{s} ILIKE {r.choice(PATTERN_TEXTS)}", f"{s} LIKE {r.choice(PATTERN_TEXTS)}",
        f"contains(lower({s}), '{r.choice(['é', 'ss', 'ω'])}')", f"ascii({s})", f"initcap({s})" if False else f"ucase({s}) = upper({s})",
    ])


def _patterns(r: random.Random):
    shape = r.random()
    exprs = [f"{_pattern_expr(r)} AS e{i}" for i in range(r.randint(1, 3))]
    if shape < 0.55:
        return f"SELECT id, {', '.join(exprs)} FROM t", None, "sql"
    if shape < 0.8:
        return f"SELECT id, s FROM t WHERE CAST(({_pattern_expr(r)}) AS VARCHAR) < 'm'", None, "sql"
    key = _pattern_expr(r)
    return f"SELECT {key} AS g, count(*) AS n FROM t GROUP BY {key}", None, "sql"


# ------------------------------------------------------------------------------------------------ types
def _ty_table(rng: random.Random):
    import pyarrow as pa

    rows = rng.choice([0, 1, 4, 9])
    UTC = datetime.timezone.utc
    stamps = [datetime.datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC), datetime.datetime(1969, 12, 31, 0, 0, 1, tzinfo=UTC),
              datetime.datetime(2000, 1, 1, tzinfo=UTC)]

    def pick(values):
        return [None if rng.random() < 0.15 else rng.choice(values) for _ in range(rows)]

    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "i8": pa.array(pick([-128, 0, 5, 127]), pa.int8()),
        "i16": pa.array(pick([-32768, 3, 32767]), pa.int16()),
        "i32": pa.array(pick([-2147483648, 1, 2147483647]), pa.int32()),
        "i64": pa.array(pick([-9223372036854775808, -1, 2, 9223372036854775807]), pa.int64()),
        "u8": pa.array(pick([0, 200, 255]), pa.uint8()),
        "u32": pa.array(pick([0, 4294967295, 7]), pa.uint32()),
        "u64": pa.array(pick([0, 2 ** 63 + 5, 2 ** 64 - 1, 9]), pa.uint64()),
        "f32": pa.array(pick([1.5, -0.25, 3e38]), pa.float32()),
        "dm": pa.array(pick([decimal.Decimal("1.25"), decimal.Decimal("-99.99")]), pa.decimal128(4, 2)),
        "tzs": pa.array(pick(stamps), pa.timestamp("s", "UTC")),
        "tzms": pa.array(pick(stamps), pa.timestamp("ms", "UTC")),
        "tzns": pa.array(pick(stamps), pa.timestamp("ns", "UTC")),
        "tms": pa.array(pick([s.replace(tzinfo=None) for s in stamps]), pa.timestamp("ms")),
        "tsns": pa.array(pick([1_709_251_199_999_999_999, -1_000_000_001, 1_500, -500, 0, 1_700_000_000_123_456_789]),
                         pa.timestamp("ns")),  # pandas' unit, with nanoseconds past the microsecond
        "tzns2": pa.array(pick([1_709_251_199_999_999_999, -1_000_000_001, 999]), pa.timestamp("ns", "UTC")),
        "tns": pa.array(pick([datetime.time(1, 2, 3, 4), datetime.time(23, 59, 59, 999999)]), pa.time64("ns")),
        "tus": pa.array(pick([datetime.time(1, 2, 3, 4), datetime.time(0, 0)]), pa.time64("us")),
    })


TY_INTS = ["i8", "i16", "i32", "i64", "u8", "u32", "u64"]
TY_ALL = TY_INTS + ["f32", "dm", "2.0", "1", "300", "NULL", "0.5::DOUBLE"]


def _types(r: random.Random):
    a, b, c = r.choice(TY_ALL), r.choice(TY_ALL), r.choice(TY_ALL)
    stamp, time = r.choice(["tzs", "tzms", "tzns", "tms", "tsns", "tzns2"]), r.choice(["tns", "tus"])
    nanos = r.choice(["tsns", "tzns2", "tsns"])
    expr = r.choice([
        f"{nanos} + INTERVAL {r.choice(['1 DAY', '1 MONTH', '-1 SECOND', 0 * 1 or '0 DAY'])}", f"epoch_ns({nanos})",
        f"epoch_us({nanos})", f"epoch_ms({nanos})", f"epoch({nanos})", f"date_trunc('{r.choice(['second', 'day', 'millisecond', 'microsecond'])}', {nanos})",
        f"date_diff('{r.choice(['microsecond', 'millisecond', 'second', 'day'])}', {nanos}, {r.choice(['tms', 'tsns', 'tzs'])})",
        f"extract({r.choice(['microsecond', 'millisecond', 'second', 'epoch', 'day'])} FROM {nanos})",
        f"{nanos} {r.choice(['<', '=', '>='])} {r.choice(['tms', 'tsns', 'tzms', 'tzns'])}", f"{nanos} - {r.choice(['tsns', 'tms'])}",
        f"CAST({nanos} AS {r.choice(['VARCHAR', 'DATE', 'TIMESTAMP', 'TIME'])})", f"max({nanos})", f"min({nanos})",
        f"age({nanos}, tsns)", f"strftime({nanos}, '%Y-%m-%d %H:%M:%S.%f %n')", f"last_day({nanos})",
        f"coalesce({a}, {b}, {c})", f"coalesce({a}, {b})", f"CASE WHEN id % 2 = 0 THEN {a} ELSE {b} END",
        f"{a} + {b}", f"{a} - {b}", f"{a} * {b}", f"greatest({a}, {b})", f"least({a}, {b}, {c})",
        f"{stamp}", f"{time}", f"{stamp} + INTERVAL 1 SECOND", f"date_trunc('hour', {stamp})", f"{time} + INTERVAL 1 HOUR",
        f"coalesce({stamp}, {r.choice(['tzs', 'tzms', 'tzns'])})" if stamp != "tms" else f"coalesce(tms, tms)",
        f"max({stamp})", f"min({time})", f"sum({a})", f"avg({a})", f"abs({a})", f"-{a}", f"{a} // {b}" if False else f"{a} % {b}",
        f"nullif({a}, {b})", f"CAST({a} AS VARCHAR)" if False else f"ifnull({a}, {b})",
    ])
    if r.random() < 0.15 and not expr.startswith(("max(", "min(", "sum(", "avg(")):
        return f"SELECT {expr} AS e FROM ty UNION ALL SELECT {r.choice(TY_ALL)} FROM ty", None, "sql"
    if expr.startswith(("max(", "min(", "sum(", "avg(")):
        return f"SELECT {expr} AS e FROM ty", None, "sql"
    return f"SELECT id, {expr} AS e FROM ty", None, "sql"


def _types_differ_strictly(actual, expected) -> str | None:
    """Round 10's type classes with integer widths compared too (the ``types`` family draws those rules)."""
    import pyarrow as pa

    for a, e, name, column in zip(actual.schema.types, expected.schema.types, expected.column_names, expected.columns):
        if pa.types.is_null(a) or pa.types.is_null(e) or column.null_count == expected.num_rows:
            continue
        if pa.types.is_dictionary(a):
            a = a.value_type
        if pa.types.is_timestamp(a) and pa.types.is_timestamp(e) and a.unit == e.unit and (a.tz is None) == (e.tz is None):
            continue
        if a != e and not (_type_class(a) == _type_class(e) != "integer"):
            return f"column {name}: engine {a}, DuckDB {e}"
    return None


# ------------------------------------------------------------------------------------------------ run
FAMILIES = {"wframes": _wframes, "setnest": _setnest, "intervals": _intervals, "decimals": _decimals,
            "patterns": _patterns, "types": _types}


def _data(family: str, r: random.Random) -> dict:
    if family == "wframes":
        return {"w": _w_table(r, r.choice([0, 1, 5, 30, 120, 400]))}
    if family == "decimals":
        return {"dc": _dc_table(r)}
    if family == "types":
        return {"ty": _ty_table(r)}
    return round10_tables(r)


def run(seeds: range, device: str, families: list[str], verbose: bool) -> dict:
    from bench.fuzz_round10 import _Recording

    result = {"counts": collections.defaultdict(collections.Counter), "reported": [],
              "refusals": collections.defaultdict(collections.Counter)}
    for seed in seeds:
        r = random.Random(seed)
        drivers = r.choice([1, 2, 3])
        split_rows = r.choice([3, 7, 100])
        for family in families:
            batch_rows = r.choice([1, 2, 3, 5, 64, 1024, None] if family == "wframes" else [7, None])
            data = _data(family, r)
            if batch_rows is not None and batch_rows < 5 and family == "wframes" and data["w"].num_rows > 120:
                batch_rows = 5  # a 400-row table in 1-row batches is minutes on cuda-sim
            sql, _, how = FAMILIES[family](r)
            connection = _duckdb(data)
            session = _session(data, device, drivers, batch_rows, split_rows)
            try:
                if family == "types":
                    engine, duckdb = _Recording(session), _Recording(connection)
                    status, detail = _compare_case(engine, duckdb, sql, how)
                    if status in ("ok", "type") and engine.last is not None and duckdb.last is not None:
                        problem = _types_differ_strictly(engine.last, duckdb.last)
                        status, detail = ("type", problem) if problem else ("ok", "")
                else:
                    status, detail = _compare_case(session, connection, sql, how)
            except Exception as error:  # noqa: BLE001 - the harness's own failure: shown, counted
                status, detail = "harness", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-4)}"
            finally:
                connection.close()
                session.close()
            if status == "type" and "tz=" in detail and detail.count("timestamp[") == 2 and (
                    detail.split("engine ")[1].split(",")[0] == detail.split("DuckDB ")[1].split(",")[0]):
                status = "ok"  # only the zone's name: DuckDB answers in its session zone
            case = {"seed": seed, "family": family, "sql": sql, "how": how, "drivers": drivers,
                    "batch_rows": batch_rows, "split_rows": split_rows}
            record_family_outcome(result, case, status, detail, verbose,
                                  REPORTED_STATUSES + ("type", "both_raised_raw"))
    return {"counts": {f: dict(c) for f, c in result["counts"].items()}, "reported": result["reported"],
            "refusals": {f: dict(c.most_common()) for f, c in result["refusals"].items()}}


def main(argv=None) -> int:
    return family_fuzz_main(argv, __doc__.splitlines()[0], FAMILIES, run, refusals_shown=10)


if __name__ == "__main__":
    sys.exit(main())
