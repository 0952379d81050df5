"""Fuzz the scalar string, date / timestamp and numeric libraries, outer joins over mixed-type keys, and ORDER BY /
LIMIT / OFFSET against DuckDB (fuzz hardening round 10).

Why: rounds 5-9 drew string functions as one call of a fixed argument each (round 9's ``scalars``: ~30 forms), date
functions on constant edge dates, numeric edges as a handful of overflow texts, joins as round 8's key pairs, and
ORDER BY only beneath LIMIT inside set operations and windows (compared as multisets). This round draws each
function of those libraries with arguments at the edges of its domain (negative / zero / huge offsets and counts,
empty patterns and separators, unicode, NULL arguments, every date part and unit, negative digits, widths that
overflow), over plain and dictionary-encoded string columns; outer joins with NULL keys, residuals, keys of other
types and expressions; and ORDER BY whose rows are compared **in order** (keys ending in the unique ``id``, so one
order is right; NaN, -0.0, unicode, NULLS FIRST / LAST, OFFSET past the end).

Tables: round 9's ``t u w p q`` (``id, k, v, x, s, d, m decimal(9,2), n decimal(18,4), i int32, ts``; ``x`` with NaN
/ -0.0 / infinities, ``s`` unicode / long / empty strings) plus ``sd``: ``s`` with more edge strings (padding,
mixed-case unicode, separators), dictionary-encoded (round 5's ``_dictionary``: NULL entries, unused values, empty
dictionaries). Sessions of 1-3 drivers, batches of 7 rows or the default, splits of 3 / 7 / 100 rows.

Families: ``strings``, ``dates``, ``numeric``, ``joins``, ``orderby``. Besides wrong rows (round 5's ``_compare``:
multisets, floats to 1e-7; ``orderby`` row for row), an answer whose column types differ from DuckDB's (beyond
integer width and dictionary encoding) is counted as ``type``.

    python -m bench.fuzz_round10 --seeds 0:300 [--device cuda-sim] [--families strings,dates] [--out F]

Prints every wrong case, crash, type difference, engine error where DuckDB answered, or answer where DuckDB raised;
then counts per family and status, and the refusals per family. ``both_raised_raw``: both raised, the engine with a
Python exception's text (an input it does not check first). Exits 1 when any case was wrong or crashed.
"""

from __future__ import annotations

import collections
import random
import re
import sys
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for folder in (REPO_ROOT, REPO_ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.fuzz_round5 import _compare, _dictionary  # noqa: E402 (after the path it needs)
from bench.fuzz_round7 import _duckdb, _session  # noqa: E402
from bench.fuzz_round8 import NAMES  # noqa: E402
from bench.fuzz_round9 import LONG, _compare_as_text, tables as round9_tables  # noqa: E402
from bench.sql_fuzz import REPORTED_STATUSES, family_fuzz_main, record_family_outcome  # noqa: E402

SD_STRINGS = ["", " ", "  a b  ", "abcabc", "a,b,,c", "ÉSSé", "ß", "İi", "日本語", "😀x😀", "x", "A_b%C", "aaa",
              "tab\there", LONG, "ǅz", "ﬁ"]


def tables(rng: random.Random) -> dict:
    """Round 9's tables with ``sd``: edge strings (a third of rows from ``s``), dictionary-encoded."""
    out = round9_tables(rng)
    for name, table in out.items():
        values = [None if rng.random() < 0.15 else (value if rng.random() < 0.3 else rng.choice(SD_STRINGS))
                  for value in table.column("s").to_pylist()]
        out[name] = table.append_column("sd", _dictionary(values, rng.random() < 0.05, rng))
    return out


# ------------------------------------------------------------------------------------------------ strings
TEXTS = ["s", "sd", "sd", "upper(sd)", "''", "'  日本語 '", "NULL::VARCHAR", "'ÉSSé'", "coalesce(s, '')",
         "'abcabc'", "s || sd"]
NEEDLES = ["'a'", "''", "'é'", "'本'", "'b,'", "'abc'", "NULL", "s", "'😀'", "' '"]
COUNTS = ["-1000", "-3", "-1", "0", "1", "2", "3", "1000", "k", "v", "NULL", "9223372036854775807"]


def _string_expr(r: random.Random) -> str:
    c, n, p = r.choice(TEXTS), r.choice(COUNTS), r.choice(NEEDLES)
    return r.choice([
        f"substr({c}, {n})", f"substr({c}, {n}, {r.choice(COUNTS)})", f"substring({c}, {n}, {r.choice(COUNTS)})",
        f"substring({c} FROM {n} FOR {r.choice(['0', '1', '2', '100', 'k'])})", f"substring({c} FROM {n})",
        f"left({c}, {n})", f"right({c}, {n})",
        f"lpad({c}, {r.choice(['0', '1', '3', '8', 'k', '-1'])}, {r.choice(['*', 'ab', '日本', ' '])!r})",
        f"rpad({c}, {r.choice(['0', '1', '3', '8', 'v'])}, {r.choice(['*', 'ab', 'é'])!r})",
        f"lpad({c}, 4, '')", f"trim({c})", f"ltrim({c})", f"rtrim({c})",
        f"trim({c}, {r.choice(['a', ' ', 'ab', 'é', '', ' a', '😀'])!r})",
        f"ltrim({c}, {r.choice(['a', ' ', 'ba', 'É'])!r})", f"rtrim({c}, {r.choice(['c', ' ', 'bc', 'x😀'])!r})",
        f"trim(BOTH 'a' FROM {c})", f"trim(LEADING ' ' FROM {c})",
        f"replace({c}, {p}, {r.choice(['', 'X', 'ää', 'NULL'])!s})" if p != "''" else f"replace({c}, 'b', '')",
        f"replace({c}, '', 'X')",
        f"repeat({c}, {r.choice(['-1', '0', '1', '3', 'k'])})", f"reverse({c})",
        f"instr({c}, {p})", f"strpos({c}, {p})", f"position({p} IN {c})",
        f"split_part({c}, {r.choice([',', '', 'a', 'ab', ' '])!r}, {r.choice(['-2', '-1', '0', '1', '2', '5', 'k'])})",
        f"concat({c}, NULL, 'x')", f"concat({c}, {r.choice(TEXTS)}, k)", f"concat_ws({r.choice([',', '', 'é'])!r}, "
        f"{c}, NULL, {r.choice(TEXTS)})", f"concat_ws(NULL, {c}, 'a')", f"{c} || NULL", f"{c} || {r.choice(TEXTS)}",
        f"{c} || k", f"lower({c})", f"upper({c})", f"lcase({c})", f"ucase({c})",
        f"length({c})", f"octet_length({c})", f"strlen({c})", f"length({c}) - octet_length({c})",
        f"starts_with({c}, {p})", f"ends_with({c}, {p})", f"contains({c}, {p})", f"prefix({c}, {p})",
        f"suffix({c}, {p})",
        f"regexp_matches({c}, {r.choice(['^a', 'b.', '[0-9]+', '^$', '.*', 'é|ß', '(?i)a'])!r})",
        f"regexp_replace({c}, {r.choice(['a', '[ab]', '^', '.', ' +'])!r}, {r.choice(['X', '', 'ü'])!r})",
        f"regexp_replace({c}, {r.choice(['a', '[ab]', '.', '^ *'])!r}, 'Y', 'g')",
        f"regexp_extract({c}, {r.choice(['[a-c]+', '([0-9])', '(a)(b)', 'x'])!r})",
        f"regexp_extract({c}, '([a-z])([a-z])', {r.choice(['0', '1', '2'])})",
        f"ascii({c})", f"chr({r.choice(['65', '233', '26085', '128512', 'CAST(k + 97 AS INTEGER)', 'CAST(v + 100 AS INTEGER)'])})",
        f"md5({c})", f"{c} = {r.choice(TEXTS)}", f"{c} < {r.choice(TEXTS)}", f"{c} IS DISTINCT FROM sd",
        f"greatest({c}, {r.choice(TEXTS)})", f"least({c}, 'b')", f"nullif({c}, '')",
        f"coalesce({c}, 'none')", f"{c} LIKE {r.choice(['%a%', '_', '', '%', 'a_%'])!r}",
        f"left({c}, length({c}) - 1)", f"substr({c}, length({c}))", f"bit_length({c})",
        f"string_split({c}, ',')[2]", f"translate({c}, 'ab', 'x')", f"initcap({c})" if False else
        f"CAST({c} AS VARCHAR) = {c}",
    ])


PREDICATES = ["IS NULL", "IS NOT NULL", "IS NOT NULL", "IS DISTINCT FROM NULL"]  # any type: no cast drawn


def _strings(r: random.Random):
    shape = r.random()
    exprs = [f"{_string_expr(r)} AS e{i}" for i in range(r.randint(1, 3))]
    if shape < 0.6:
        return f"SELECT id, {', '.join(exprs)} FROM t", None, "sql"
    if shape < 0.75:
        return f"SELECT id, sd FROM t WHERE {_string_expr(r)} {r.choice(PREDICATES)}", None, "sql"
    if shape < 0.9:  # a string function as a grouping key, over a dictionary column
        key = _string_expr(r)
        return f"SELECT {key} AS g, count(*) AS n, min(id) AS lo FROM t GROUP BY {key}", None, "sql"
    return f"SELECT {', '.join(exprs)} FROM (SELECT * FROM t ORDER BY id LIMIT 1) z", None, "sql"


# ------------------------------------------------------------------------------------------------ dates
DATES = ["d", "d", "DATE '0001-01-01'", "DATE '9999-12-31'", "DATE '2000-02-29'", "DATE '1900-03-01'",
         "DATE '2023-12-31'", "DATE '2024-01-01'", "DATE '1969-12-31'", "NULL::DATE"]
STAMPS = ["ts", "ts", "TIMESTAMP '2024-02-29 23:59:59.999999'", "TIMESTAMP '1970-01-01 00:00:00'",
          "TIMESTAMP '1969-12-31 23:59:59.5'", "TIMESTAMP '2023-12-31 12:00:00'", "CAST(d AS TIMESTAMP)",
          "NULL::TIMESTAMP", "TIMESTAMP '0001-01-01 00:00:01'"]
DATE_PARTS = ["year", "quarter", "month", "week", "day", "dow", "isodow", "doy", "yearweek", "isoyear", "decade",
              "century", "millennium", "epoch", "dayofmonth", "dayofweek", "dayofyear", "weekday", "weekofyear",
              "julian", "era"]
TIME_PARTS = ["hour", "minute", "second", "millisecond", "microsecond", "epoch", "milliseconds", "microseconds"]
TRUNC_UNITS = ["year", "quarter", "month", "week", "day", "decade", "century", "millennium", "hour", "minute",
               "second", "millisecond", "microsecond", "isoyear"]
DIFF_UNITS = ["year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond",
              "microsecond", "decade", "century", "millennium", "isoyear", "dow", "doy"]
STRF = ["%Y-%m-%d %H:%M:%S", "%y%m%d", "%j", "%a %A %b %B", "%d %e", "%I %p", "%H:%M:%S.%f", "%G-W%V-%u",
        "%U %W", "%w %u", "%C", "%%", "%Y-%m-%dT%H:%M:%S.%g", "%n", "%x", "%X", "%c", "%s"]
INTERVALS = ["1 DAY", "1 MONTH", "1 YEAR", "90 MINUTE", "1 SECOND", "'1 month 1 day'"]
STRP = [("'2024-02-29'", "%Y-%m-%d"), ("'29/02/2024 13:45'", "%d/%m/%Y %H:%M"), ("'2023-02-29'", "%Y-%m-%d"),
        ("s", "%Y-%m-%d"), ("'1999 365'", "%Y %j"), ("'12:00:00 AM 2020-01-01'", "%I:%M:%S %p %Y-%m-%d"),
        ("'2024-02-29 23:59:59.123456'", "%Y-%m-%d %H:%M:%S.%f")]


def _date_expr(r: random.Random) -> str:
    d, t = r.choice(DATES), r.choice(STAMPS)
    value = r.choice([d, t])
    text, fmt = r.choice(STRP)
    return r.choice([
        f"date_trunc('{r.choice(TRUNC_UNITS[:8])}', {d})", f"date_trunc('{r.choice(TRUNC_UNITS)}', {t})",
        f"date_part('{r.choice(DATE_PARTS)}', {value})", f"date_part('{r.choice(TIME_PARTS)}', {t})",
        f"extract({r.choice(DATE_PARTS[:8] + TIME_PARTS[:5])} FROM {t})", f"extract({r.choice(DATE_PARTS[:8])} FROM {d})",
        f"date_diff('{r.choice(DIFF_UNITS)}', {value}, {r.choice(DATES + STAMPS)})",
        f"datediff('{r.choice(DIFF_UNITS[:8])}', {d}, {r.choice(DATES)})",
        f"date_sub('{r.choice(DIFF_UNITS)}', {value}, {r.choice(DATES + STAMPS)})",
        f"make_date({r.choice(['2024', '2023', '1', '9999', 'k + 2000', 'NULL', '-1'])}, "
        f"{r.choice(['2', '12', '1', '13', '0', 'k'])}, {r.choice(['29', '28', '31', '1', '0', 'v'])})",
        f"make_timestamp({r.choice(['2024', '1969'])}, 2, {r.choice(['29', '28'])}, {r.choice(['0', '23', 'k'])}, "
        f"{r.choice(['0', '59'])}, {r.choice(['0', '59.999999', '1.5'])})",
        f"last_day({value})", f"dayname({value})", f"monthname({value})",
        f"strftime({value}, '{r.choice(STRF)}')", f"strptime({text}, '{fmt}')", f"try_strptime({text}, '{fmt}')",
        f"epoch({value})", f"epoch_ms({t})", f"epoch_us({t})", f"to_timestamp({r.choice(['0', '-1.5', '1e9', 'v', 'x'])})",
        f"epoch_ms({r.choice(['0', '-1', '1709251199999', 'v * 86400000'])})",
        f"make_timestamp({r.choice(['0', '-1', '1709251199999999', 'v * 1000000'])})",
        f"{t} {r.choice(['<', '<=', '=', '>', '<>'])} {d}", f"{d} {r.choice(['<', '=', '>='])} {t}",
        f"{t} BETWEEN {d} AND {d} + 1", f"{d} IN ({t}, DATE '2024-02-29')", f"greatest({d}, {t})",
        f"{d} + {r.choice(['1', '-1', 'k', 'v', '365'])}", f"{d} - {r.choice(DATES)}", f"{t} - {r.choice(STAMPS)}",
        f"{t} + INTERVAL {r.choice(INTERVALS)}",
        f"{d} - INTERVAL {r.choice(['1 MONTH', '1 DAY', '3 HOUR'])}",
        f"year({value})", f"month({value})", f"day({value})", f"quarter({value})", f"week({value})",
        f"hour({t})", f"minute({t})", f"second({t})", f"dayofweek({value})", f"isodow({value})",
        f"CAST({t} AS DATE)", f"CAST({d} AS TIMESTAMP)", f"CAST({value} AS VARCHAR)", f"age({t}, {r.choice(STAMPS)})",
        f"date_part(['year', 'month'], {d})" if False else f"date_trunc('month', {d}) = date_trunc('month', {t})",
    ])


def _dates(r: random.Random):
    shape = r.random()
    exprs = [f"{_date_expr(r)} AS e{i}" for i in range(r.randint(1, 3))]
    if shape < 0.6:
        return f"SELECT id, {', '.join(exprs)} FROM t", None, "sql"
    if shape < 0.75:
        return f"SELECT id FROM t WHERE {_date_expr(r)} {r.choice(PREDICATES)}", None, "sql"
    if shape < 0.9:
        key = _date_expr(r)
        return f"SELECT {key} AS g, count(*) AS n FROM t GROUP BY {key}", None, "sql"
    return f"SELECT {', '.join(exprs)} FROM (SELECT * FROM t ORDER BY id LIMIT 1) z", None, "sql"


# ------------------------------------------------------------------------------------------------ numeric
NUMBERS = ["v", "k", "i", "m", "n", "x", "-v", "m * -1", "(v - 3)", "CAST(v AS TINYINT)", "CAST(k AS SMALLINT)",
           "CAST(m AS DOUBLE)", "CAST(x AS FLOAT)", "1e308", "-0.0", "NULL"]
CAST_SOURCES = ["300", "-129", "65536", "1e20", "2.5", "-0.5", "99.995", "'12'", "255", "-1", "0.005"]
WIDTHS = ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "FLOAT",
          "DOUBLE", "DECIMAL(4,2)", "DECIMAL(3,0)", "DECIMAL(18,4)", "DECIMAL(38,10)", "DECIMAL(9,2)", "DECIMAL(5,5)",
          "DECIMAL(1,0)"]


def _numeric_expr(r: random.Random) -> str:
    a, b = r.choice(NUMBERS), r.choice(NUMBERS)
    digits = r.choice(["-3", "-2", "-1", "0", "1", "2", "4", "10", "-20", "k"])
    return r.choice([
        f"round({r.choice(['m', 'n', 'x', 'v', 'm * 1.5', 'CAST(x AS DECIMAL(18,3))'])}, {digits})",
        f"round({r.choice(['m', 'n', 'x', '-2.5', '2.5', '0.5', '-0.5'])})",
        f"ceil({r.choice(['m', 'n', 'x', '-m', 'v'])})", f"floor({r.choice(['m', 'n', 'x', '-m', 'v'])})",
        f"trunc({r.choice(['m', 'n', 'x', '-m'])})", f"round_even({r.choice(['m', 'x', '2.5'])}, {digits})",
        f"{a} % {b}", f"{a} / {b}", f"{a} // {b}", f"{a} + {b}", f"{a} - {b}", f"{a} * {b}",
        f"{r.choice(['v', 'id'])} {r.choice(['+', '-', '*'])} {r.choice(['9223372036854775807', '-9223372036854775807', '4611686018427387904'])}",
        f"{r.choice(['i', 'CAST(v AS INTEGER)'])} {r.choice(['+', '*', '-'])} {r.choice(['2147483647', 'CAST(2147483647 AS INTEGER)', '-2147483648::INTEGER'])}",
        f"CAST(v AS TINYINT) {r.choice(['+', '*', '-'])} CAST({r.choice(['127', '100', '-128'])} AS TINYINT)",
        f"CAST(k AS SMALLINT) * CAST(32767 AS SMALLINT)", f"-CAST({r.choice(['v', '-128'])} AS TINYINT)",
        f"CAST({r.choice(NUMBERS + CAST_SOURCES)} AS {r.choice(WIDTHS)})",
        f"TRY_CAST({r.choice(NUMBERS + ['300', '1e20', '99.995'])} AS {r.choice(WIDTHS)})",
        f"CAST(m AS {r.choice(WIDTHS)}) {r.choice(['+', '*'])} {r.choice(['n', 'v', 'x', '1.005'])}",
        f"abs({a})", f"sign({a})", f"power({a}, {r.choice(['0.5', '2', '-1', '0', 'v', '1000'])})",
        f"pow({r.choice(['0', '-8', '2', 'x'])}, {r.choice(['-1', '1.0/3', '0.5', '1024'])})",
        f"sqrt({a})", f"ln({a})", f"log({a})", f"log10({a})", f"log2({a})", f"log({r.choice(['2', '10', '0.5'])}, {a})",
        f"exp({r.choice(['v', 'x', '710', '-1000'])})", f"cbrt({a})", f"{a} = {b}", f"{a} < {b}",
        f"greatest({a}, {b})", f"least({a}, {b}, 0)", f"abs(CAST({r.choice(['-128', 'v'])} AS TINYINT))",
        f"abs(-9223372036854775807 - 1 + 0 * v)", f"gcd({r.choice(['v', 'k', '0'])}, {r.choice(['k', '-4', '0'])})",
        f"{a} IS NULL", f"isnan({a})", f"isinf({a})", f"factorial({r.choice(['3', '20', '21', 'k'])})",
        f"{r.choice(['v', 'k'])} << {r.choice(['1', '63', '64', 'k'])}", f"{r.choice(['v', '-v'])} >> {r.choice(['1', '70'])}",
        f"{r.choice(['v', 'k'])} & {r.choice(['3', '-1', 'k'])}", f"xor({r.choice(['v', 'k'])}, 5)",
        f"even({r.choice(['x', 'm', '-2.5'])})", f"truncate_digits" if False else f"round({a} / 3, 3)",
        f"{r.choice(['m', 'n'])} / {r.choice(['m', 'n', '0.0', 'v'])}", f"{r.choice(['m', 'n'])} % {r.choice(['m', '0.3', 'v'])}",
        f"sum_of" if False else f"{r.choice(['m', 'n'])} * {r.choice(['n', 'm', '10000000000'])}",
    ])


def _numeric(r: random.Random):
    shape = r.random()
    exprs = [f"{_numeric_expr(r)} AS e{i}" for i in range(r.randint(1, 3))]
    if shape < 0.65:
        return f"SELECT id, {', '.join(exprs)} FROM t", None, "sql"
    if shape < 0.8:
        return f"SELECT id FROM t WHERE {_numeric_expr(r)} {r.choice(PREDICATES)}", None, "sql"
    if shape < 0.9:
        return f"SELECT sum({_numeric_expr(r)}) AS a, count(*) AS n FROM t", None, "sql"
    return f"SELECT {', '.join(exprs)} FROM (SELECT * FROM t ORDER BY id LIMIT 1) z", None, "sql"


# ------------------------------------------------------------------------------------------------ joins
KEYS = [("k", "k"), ("i", "k"), ("k", "v"), ("k", "m"), ("i", "n"), ("v", "x"), ("m", "x"), ("m", "n"), ("x", "x"),
        ("s", "sd"), ("sd", "sd"), ("d", "ts"), ("upper(s)", "upper(sd)"), ("k + 1", "v"), ("v % 3", "k"),
        ("CAST(k AS DOUBLE)", "m"), ("coalesce(k, -1)", "coalesce(k, -1)"), ("x", "n")]
RESIDUALS = ["", "", "a.v < b.v", "a.x <> b.x", "b.s IS NOT NULL", "a.v + b.v > 0", "a.d < b.d OR b.v IS NULL",
             "a.m >= b.n", "a.sd <> b.sd", "a.id <> b.id", "a.k IS NULL", "b.x > 0", "a.s LIKE '%a%'",
             "coalesce(a.v, 0) <> coalesce(b.v, 0)", "a.ts > b.d"]


def _joins(r: random.Random):
    left, right = r.choice(NAMES), r.choice(NAMES)
    if r.random() < 0.2:
        right = left  # a self join
    kind = r.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "FULL OUTER JOIN", "LEFT OUTER JOIN",
                     "USING", "NATURAL", "cross", "FULL JOIN", "LEFT JOIN", "RIGHT OUTER JOIN"])
    lk, rk = r.choice(KEYS)
    cond = f"a.{lk} = b.{rk}" if lk.isidentifier() else f"{_qualify(lk, 'a')} = {_qualify(rk, 'b')}"
    if r.random() < 0.15:
        lk2, rk2 = r.choice(KEYS)
        cond += f" AND {_qualify(lk2, 'a')} = {_qualify(rk2, 'b')}"
    residual = r.choice(RESIDUALS)
    if residual and r.random() < 0.7:
        cond += f" AND ({residual})"
    elif r.random() < 0.1:
        cond = f"({cond}) OR a.v = b.k"
    elif r.random() < 0.05:
        cond = residual or "a.v < b.v"  # no equality at all
    cols = "a.id AS aid, b.id AS bid, a.k AS ak, b.v AS bv, a.s AS as_, b.sd AS bsd, b.x AS bx"
    if kind == "USING":
        using = r.choice(["k", "s", "d", "k, v", "id", "i"])
        source = f"{left} a {r.choice(['JOIN', 'LEFT JOIN', 'FULL JOIN', 'RIGHT JOIN'])} {right} b USING ({using})"
        cols = r.choice([f"{using.split(',')[0]}, a.id AS aid, b.id AS bid", "*", "a.v, b.v AS bv2"])
    elif kind == "NATURAL":
        source = (f"(SELECT id AS aid, k, s, v AS av FROM {left}) a NATURAL "
                  f"{r.choice(['', 'LEFT ', 'FULL ', 'RIGHT '])}JOIN (SELECT id AS bid, k, s, x FROM {right}) b")
        cols = "*"
    elif kind == "cross":
        where = r.choice(["a.k = b.k", "a.v < b.v", "a.s = b.sd OR a.k IS NULL", f"{_qualify(lk, 'a')} = {_qualify(rk, 'b')}",
                          "a.x > b.x AND a.id <> b.id"])
        source = f"{left} a CROSS JOIN {right} b WHERE {where}" if r.random() < 0.5 else f"{left} a, {right} b WHERE {where}"
    else:
        source = f"{left} a {kind} {right} b ON {cond}"
    shape = r.random()
    if shape < 0.6:
        return f"SELECT {cols} FROM {source}", None, "sql"
    if shape < 0.75:
        return (f"SELECT a.k AS g, count(*) AS n, count(b.id) AS nb, sum(b.v) AS sv FROM {source} GROUP BY a.k"
                if kind not in ("USING", "NATURAL") else f"SELECT count(*) AS n FROM {source}"), None, "sql"
    if shape < 0.88:  # a third table
        third = r.choice(NAMES)
        if kind in ("USING", "NATURAL"):
            return f"SELECT count(*) AS n FROM {source}", None, "sql"
        joiner = "WHERE" if kind == "cross" else "ON"
        tail = f" AND c.k = a.k" if kind == "cross" else ""
        return (f"SELECT a.id AS aid, b.id AS bid, c.id AS cid FROM {source.replace(' WHERE ', ' JOIN ' + third + ' c ON c.v = b.v WHERE ', 1) if kind == 'cross' else source} "
                + ("" if kind == "cross" else f"{r.choice(['LEFT JOIN', 'FULL JOIN', 'JOIN'])} {third} c ON c.k = b.k{tail}")), None, "sql"
    return (f"SELECT {cols} FROM {source} WHERE {r.choice(['a.id IS NULL', 'b.id IS NULL', 'a.k = 1 OR b.k IS NULL', 'a.v > 0'])}"
            if kind not in ("USING", "NATURAL") else f"SELECT * FROM {source} WHERE k IS NULL OR k > 0"), None, "sql"


def _qualify(expr: str, alias: str) -> str:
    """``expr``'s bare columns qualified by ``alias`` (``k + 1`` -> ``a.k + 1``)."""
    return re.sub(r"\b(id|k|v|x|s|sd|d|m|n|i|ts)\b(?!\s*\()", rf"{alias}.\1", expr)


# ------------------------------------------------------------------------------------------------ ORDER BY
ORDER_EXPRS = ["x", "s", "sd", "v", "d", "ts", "m", "n", "k", "-x", "upper(sd)", "length(s)", "v % 3", "x * 0",
               "CAST(x AS FLOAT)", "coalesce(s, sd)", "x IS NULL"]


def _orderby(r: random.Random):
    keys = [(expr, f"{r.choice(['', ' ASC', ' DESC'])}{r.choice(['', '', ' NULLS FIRST', ' NULLS LAST'])}")
            for expr in r.sample(ORDER_EXPRS, r.randint(1, 3))]
    last = f"id{r.choice(['', ' DESC'])}"  # one order is right: rows compared in order
    selected = ", ".join(f"{expr} AS o{i}" for i, (expr, _) in enumerate(keys))
    by_expr = ", ".join(expr + how for expr, how in keys)
    by_name = ", ".join(f"o{i}{how}" for i, (_, how) in enumerate(keys))
    limit = r.choice(["", "", f" LIMIT {r.choice([0, 1, 3, 100])}",
                      f" LIMIT {r.choice([1, 5])} OFFSET {r.choice([0, 2, 15, 100])}", f" OFFSET {r.choice([1, 20])}"])
    source = r.choice(["t", "t", "t", "(SELECT * FROM t UNION ALL SELECT * FROM u) z", "t WHERE v > 0",
                       "(SELECT * FROM t WHERE false) z"])
    shape = r.random()
    if shape < 0.45:
        return f"SELECT id, {selected} FROM {source} ORDER BY {by_expr}, {last}{limit}", None, "ordered"
    if shape < 0.6:
        return f"SELECT id, {selected} FROM {source} ORDER BY {by_name}, {last}{limit}", None, "ordered"
    if shape < 0.7:  # ordinals
        positions = ", ".join(f"{i + 2}{how}" for i, (_, how) in enumerate(keys))
        return f"SELECT id, {selected} FROM {source} ORDER BY {positions}, 1{last[2:]}{limit}", None, "ordered"
    if shape < 0.8:  # an ordered subquery under LIMIT, then re-ordered outside
        return (f"SELECT * FROM (SELECT id, {selected} FROM {source} ORDER BY {by_expr}, {last}{limit or ' LIMIT 4'}) q "
                f"ORDER BY {by_name}, id"), None, "ordered"
    if shape < 0.9:  # over a grouped result
        key = r.choice(["s", "sd", "x", "d", "k"])
        return (f"SELECT {key} AS g, count(*) AS n, sum(v) AS sv FROM {source} GROUP BY {key} ORDER BY "
                f"{r.choice(['n', 'g', 'sv'])}{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}, g"
                f"{r.choice(['', ' DESC'])} NULLS FIRST{limit}"), None, "ordered"
    return f"SELECT DISTINCT {selected} FROM {source} ORDER BY {by_name}{limit}", None, "multiset_if_limit"


# ------------------------------------------------------------------------------------------------ compare
class _Recording:
    """A session or connection whose last answer is kept, so a case's column types can be checked after
    bench.fuzz_round5._compare compared its rows."""

    def __init__(self, inner):
        self.inner, self.last = inner, None

    def sql(self, *args, **kwargs):
        answer = self.inner.sql(*args, **kwargs)
        if hasattr(answer, "to_arrow_table"):  # DuckDB's relation
            outer = self

            class _Relation:
                def to_arrow_table(self):
                    outer.last = answer.to_arrow_table()
                    return outer.last
            return _Relation()
        self.last = answer
        return answer


def _type_class(dtype) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_integer(dtype):
        return "integer"
    if pa.types.is_large_string(dtype):
        return "string"
    return str(dtype)


def _types_differ(actual, expected) -> str | None:
    import pyarrow as pa

    if actual is None or expected is None:
        return None
    for index, (a, e, name) in enumerate(zip(actual.schema.types, expected.schema.types, expected.column_names)):
        if pa.types.is_null(a) or pa.types.is_null(e) or _type_class(a) == _type_class(e):
            continue
        if expected.column(index).null_count == expected.num_rows:  # DuckDB types some NULL constants oddly
            continue
        return f"column {name}: engine {a}, DuckDB {e}"
    return None


def _compare_case(session, connection, sql, how):
    """Round 5's comparison (ordered by the ORDER BY keys for ``ordered``); ``type`` when the rows match but a
    column's type class does not."""
    if how == "multiset_if_limit":
        how = "sql" if "LIMIT" in sql or "OFFSET" in sql else "ordered"
        if how == "sql":  # DISTINCT + LIMIT over ties: which rows is not one answer
            return "ok", ""
    engine, duckdb = _Recording(session), _Recording(connection)
    try:
        status, detail = _compare(engine, duckdb, sql, None, how if how == "sql" else "ordered")
    except (OverflowError, ValueError):  # a date or timestamp Python cannot hold (year 0, 10000): as text
        return _compare_as_text(session, connection, sql)
    if status == "ok":
        problem = _types_differ(engine.last, duckdb.last)
        if problem is not None:
            return "type", problem
    if status == "both_raised" and _RAW_ERROR.search(detail.split("; engine: ", 1)[-1]):
        return "both_raised_raw", detail  # the engine's error is a Python exception's text, not a named one
    return status, detail


#: A Python exception's name in an engine error's text: an input the engine does not check before it fails.
_RAW_ERROR = re.compile(r"\b(OverflowError|TypeError|ValueError|IndexError|KeyError|AttributeError|ZeroDivisionError|"
                        r"AssertionError|RecursionError|UnicodeError)\b")


FAMILIES = {"strings": _strings, "dates": _dates, "numeric": _numeric, "joins": _joins, "orderby": _orderby}


def run(seeds: range, device: str, families: list[str], verbose: bool) -> dict:
    result = {"counts": collections.defaultdict(collections.Counter), "reported": [],
              "refusals": collections.defaultdict(collections.Counter)}
    for seed in seeds:
        r = random.Random(seed)
        drivers, batch_rows = r.choice([1, 2, 3]), r.choice([7, None])
        split_rows = r.choice([3, 7, 100])
        for family in families:
            data = tables(r)
            sql, _, how = FAMILIES[family](r)
            connection = _duckdb(data)
            session = _session(data, device, drivers, batch_rows, split_rows)
            try:
                status, detail = _compare_case(session, connection, sql, how)
            except Exception as error:  # noqa: BLE001 - the harness's own failure: shown, counted
                status, detail = "harness", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-4)}"
            finally:
                connection.close()
                session.close()
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
