"""Generate random queries at the value edges users hit, reproducibly from a seed, and check them against DuckDB.

The edge fuzz: tests/sql/breadth_queries.py draws issue 30's constructs over ordinary values; this module draws
the same constructs where engines go wrong: window functions with NULL partition and order keys and frames at
the partition's edges (empty frames, offsets past the ends, RANGE over NULL peers), set operations with NULLs
and mixed numeric types (decimal(38) beside double and integers), grouping sets whose keys are NULL in the data
and NULL by grouping, decimal arithmetic at scale and precision edges, string functions on empty and non-ASCII
text, casts between text, numbers, dates and timestamps, outer joins on NULL keys with filters above them,
``LIMIT``/``OFFSET`` under an ``ORDER BY`` with ties (checked as SQL allows: the keys in order, and each tie
group's rows a sub-multiset of the unlimited query's), subqueries under ``OR``/``NOT`` with NULLs inside,
and timestamps (before 1970, leap days, microseconds) grouped, windowed over RANGE intervals and joined to dates,
NULL in IN lists and three-valued logic, NaN, -0.0 and infinities as keys, and the empty and one-row tables. The
tables are :func:`breadth_queries.tables` plus ``w`` (edge values),
``w1`` (its first row) and ``we`` (none).

:func:`run_case` classifies as breadth_queries does (``ok``, ``refused``, ``both_raised``, ``wrong``,
``crash``, ``engine_raised``, ``answered_where_duckdb_raised``). ``bench/sql_fuzz_breadth.py --generator edge``
runs thousands; tests/sql/test_edge_fuzz.py a fixed few.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import random
from dataclasses import dataclass

import pyarrow as pa

import breadth_queries
from breadth_queries import BreadthOutcome, predicate, value

__all__ = ["EdgeCase", "SHAPES", "tables", "generate_case", "run_case"]

_D = decimal.Decimal
#: Column of ``w`` -> (values drawn from, Arrow type, share of NULLs).
_EDGE_COLUMNS = {
    "k": ([1, 2, 3], pa.int32(), 0.25),
    "big": ([_D("12345678901234567890.1234567890"), _D("-0.0000000001"), _D("0E-10"), _D("1.5000000000"),
             _D("-99999999999999999999.9999999999"), _D("7.0000000005")], pa.decimal128(38, 10), 0.15),
    "m": ([_D("12345678901234.5678"), _D("-0.0001"), _D("0.5000"), _D("-2.5000"), _D("99999999999999.9999")],
          pa.decimal128(18, 4), 0.15),
    "sm": ([_D("99.99"), _D("-99.99"), _D("0.01"), _D("-0.50"), _D("0.00")], pa.decimal128(4, 2), 0.15),
    "x": ([0, 1, -1, 2147483647, -2147483648, 9007199254740993, -(2 ** 63), 2 ** 63 - 1], pa.int64(), 0.15),
    "txt": (["", " ", "a", "A", "ß", "é", "e\u0301", "日本語", "😀x", "  pad ", "a,b,,c", "ÀÉÎ", "x\ty",
             "%_"],
            pa.string(), 0.15),
    "num": (["0", "-0", "+5", " 12 ", "1.005", "-1.5e2", "99999999999", "1e400", "nan", "inf", "0x1F", "",
             "2024-02-29", "2023-02-29", "2024-03-10 12:34:56", "2024-03-10T01:02:03.123456", "1970-01-01 00:00:00",
             "12:00", "9999-12-31", "2024-03-10 ", "2024-03-10  12:00", "2024-03-10 12:00:00."], pa.string(), 0.1),
    "ts": ([datetime.datetime(2024, 2, 29, 23, 59, 59, 999999), datetime.datetime(1970, 1, 1),
            datetime.datetime(1969, 12, 31, 23, 59, 59), datetime.datetime(2000, 1, 1, 12, 30),
            datetime.datetime(1995, 1, 1), datetime.datetime(2024, 3, 10, 1, 2, 3, 123456)], pa.timestamp("us"), 0.15),
    "dt": ([datetime.date(2024, 2, 29), datetime.date(1970, 1, 1), datetime.date(1969, 12, 31),
            datetime.date(2000, 1, 1), datetime.date(1, 1, 1)], pa.date32(), 0.15),
    "f": ([0.0, -0.0, 1e-300, 1e300, 0.1, -2.5, 123456789.125, float("inf"), float("nan")], pa.float64(), 0.15),
}
_EDGE_ROWS = 20


def tables() -> dict[str, pa.Table]:
    """Return the breadth fuzz's tables plus ``w`` (edge values), ``w1`` (its first row) and ``we`` (empty)."""
    out = breadth_queries.tables()
    rng = random.Random(11)
    columns = {"id": pa.array(range(_EDGE_ROWS), pa.int64())}
    for column, (values, dtype, nulls) in _EDGE_COLUMNS.items():
        columns[column] = pa.array([None if rng.random() < nulls else rng.choice(values) for _ in range(_EDGE_ROWS)],
                                   dtype)
    w = pa.table(columns)
    out.update(w=w, w1=w.slice(0, 1), we=w.slice(0, 0))
    return out


def _edge_table(rng: random.Random) -> str:
    return rng.choices(["w", "w1", "we"], weights=[8, 1, 1])[0]


def _breadth_table(rng: random.Random) -> str:
    return rng.choices(["t", "u", "e", "one"], weights=[8, 3, 1, 1])[0]


# ---------------------------------------------------------------------------------------------------- windows
def _frame_at_edges(rng: random.Random, kind: str) -> str:
    return rng.choice([
        f" {kind} BETWEEN 5 PRECEDING AND 3 PRECEDING", f" {kind} BETWEEN 1 FOLLOWING AND 1 FOLLOWING",
        f" {kind} BETWEEN 100 PRECEDING AND 100 FOLLOWING", f" {kind} BETWEEN 2 FOLLOWING AND 1 FOLLOWING",
        f" {kind} BETWEEN CURRENT ROW AND CURRENT ROW", f" {kind} BETWEEN 3 FOLLOWING AND UNBOUNDED FOLLOWING",
        f" {kind} BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING", f" {kind} BETWEEN 0 PRECEDING AND 0 FOLLOWING",
        f" {kind} BETWEEN 1 PRECEDING AND 2 PRECEDING",
    ])


def _shape_window_nulls(rng):
    """Windows partitioned and ordered by NULL-holding keys, frames at the edges, over a unique order."""
    items = ["id"]
    for n in range(rng.randint(1, 3)):
        partition = rng.choice(["", "PARTITION BY k ", "PARTITION BY g ", "PARTITION BY b, k ", "PARTITION BY s ",
                                "PARTITION BY nullif(k, 2) ", "PARTITION BY CASE WHEN i > 0 THEN NULL ELSE g END "])
        key = rng.choice(["i", "d", "s", "dt", "f", "j"])
        nulls = rng.choice(["", " NULLS FIRST", " NULLS LAST"])
        direction = rng.choice(["", " DESC"])
        column = rng.choice(["i", "d", "f", "s", "dt"])
        roll = rng.random()
        if roll < 0.25:
            call = rng.choice([f"lag({column}, {rng.choice(['1', '3', '30'])})", f"lead({column}, 2, NULL)",
                               f"lead({column}, 30)", f"lag({column}, 0)", "row_number()",
                               f"first_value({column} IGNORE NULLS)", f"last_value({column} IGNORE NULLS)"])
            order, frame = f"{key}{direction}{nulls}, id", ""
            if call.startswith(("first", "last")):
                frame = _frame_at_edges(rng, "ROWS")
        elif roll < 0.55:
            call = rng.choice([f"sum({rng.choice(['i', 'd', 'j'])})", "count(*)", f"count({column})",
                               f"min({column})", f"max({column})", f"avg({rng.choice(['i', 'f', 'd'])})",
                               f"first_value({column})", f"last_value({column})", f"nth_value({column}, 2)"])
            order, frame = f"{key}{direction}{nulls}, id", _frame_at_edges(rng, "ROWS")
        elif roll < 0.8:
            key = rng.choice(["i", "j", "d", "dt"])
            offset = {"i": "1", "j": "2", "d": "0.5", "dt": "1"}[key]
            call = rng.choice(["count(*)", f"sum({rng.choice(['i', 'j'])})", f"min({column})", f"max({column})"])
            order = f"{key}{direction}{nulls}"
            frame = rng.choice([f" RANGE BETWEEN {offset} PRECEDING AND {offset} FOLLOWING",
                                f" RANGE BETWEEN CURRENT ROW AND {offset} FOLLOWING",
                                f" RANGE BETWEEN UNBOUNDED PRECEDING AND {offset} PRECEDING",
                                " RANGE BETWEEN CURRENT ROW AND CURRENT ROW", ""])
        else:
            call = rng.choice(["count(*)", f"sum({rng.choice(['i', 'j'])})", "rank()", "dense_rank()",
                               "percent_rank()", "cume_dist()", f"ntile({rng.choice(['3', '50'])})"])
            order = f"{key}{direction}{nulls}"
            if call.startswith("ntile"):
                order += ", id"
            frame = "" if "rank" in call or "cume" in call or "ntile" in call else _frame_at_edges(rng, "GROUPS")
        items.append(f"{call} OVER ({partition}ORDER BY {order}{frame}) AS w{n}")
    return dict(sql=f"SELECT {', '.join(items)} FROM {_breadth_table(rng)}{breadth_queries._where(rng, chance=0.3)}")


# ---------------------------------------------------------------------------------------------- set operations
_SET_ITEMS = {
    "num": ["k", "x", "big", "m", "sm", "f", "NULL", "CAST(NULL AS INTEGER)", "1", "2.50", "CAST(1 AS DECIMAL(38, 10))",
            "0.0::DOUBLE", "-0.0::DOUBLE", "k * 1.5", "CAST(sm AS DECIMAL(9, 4))"],
    "str": ["txt", "num", "NULL", "''", "'ß'", "upper(txt)", "CAST(k AS VARCHAR)"],
    "time": ["dt", "ts", "NULL", "CAST(dt AS TIMESTAMP)", "TIMESTAMP '1970-01-01 00:00:00'", "DATE '2024-02-29'"],
}


def _shape_set_nulls(rng):
    """UNION/INTERSECT/EXCEPT [ALL] with NULLs and mixed numeric types (decimal(38), double, integers)."""
    kinds = [rng.choice(list(_SET_ITEMS)) for _ in range(rng.randint(1, 2))]

    def branch():
        items = ", ".join(f"{rng.choice(_SET_ITEMS[kind])} AS c{n}" for n, kind in enumerate(kinds))
        where = f" WHERE {rng.choice(['k IS NULL', 'k = 1', 'big IS NOT NULL', 'id < 5', 'txt IS NULL'])}" \
            if rng.random() < 0.4 else ""
        return f"SELECT {items} FROM {_edge_table(rng)}{where}"

    sql = branch()
    for _ in range(rng.randint(1, 2)):
        operator = rng.choice(["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"])
        sql = f"{sql} {operator} {branch()}" if rng.random() < 0.7 else f"({sql}) {operator} {branch()}"
    if rng.random() < 0.25:
        sql = f"SELECT c0, count(*) AS n FROM ({sql}) q GROUP BY c0"
    return dict(sql=sql)


# ----------------------------------------------------------------------------------------------- grouping sets
def _shape_grouping_nulls(rng):
    """GROUPING SETS / ROLLUP / CUBE over keys NULL in the data (grouping() tells them from rolled-up NULLs)."""
    pool = ["k", "nullif(k, 1)", "txt", "CASE WHEN x > 0 THEN NULL ELSE k END", "CAST(ts AS DATE)", "sm"]
    keys = rng.sample(pool, rng.randint(1, 3))
    aliased = [f"{key} AS g{n}" for n, key in enumerate(keys)]
    names = [f"g{n}" for n in range(len(keys))]
    style = rng.random()
    if style < 0.3:
        group = f"ROLLUP ({', '.join(names)})"
    elif style < 0.6:
        group = f"CUBE ({', '.join(names)})"
    else:
        sets = ["(" + ", ".join(rng.sample(names, rng.randint(0, len(names)))) + ")" for _ in range(rng.randint(1, 3))]
        sets.append(f"({', '.join(names)})")
        group = f"GROUPING SETS ({', '.join(sets)})"
    aggregates = rng.sample(["count(*)", "count(k)", "sum(big)", "sum(m)", "max(txt)", "min(ts)", "avg(sm)",
                             "sum(x)", "count(DISTINCT txt)"], 2)
    items = aliased + [f"grouping({', '.join(rng.sample(names, rng.randint(1, len(names))))}) AS gid"] + \
        [f"{a} AS a{n}" for n, a in enumerate(aggregates)]
    having = " HAVING count(*) >= 1" if rng.random() < 0.2 else ""
    return dict(sql=f"SELECT {', '.join(items)} FROM {_edge_table(rng)} GROUP BY {group}{having}")


# ------------------------------------------------------------------------------------------------ decimals
def _decimal_expression(rng: random.Random, depth: int = 0) -> str:
    if depth >= 2 or rng.random() < 0.35:
        return rng.choice(["big", "m", "sm", "k", "x", "CAST(x AS DECIMAL(20, 0))", "0.001", "12.5",
                           "CAST(k AS DECIMAL(38, 37))", "99999999999999999999.99"])
    a, b = _decimal_expression(rng, depth + 1), _decimal_expression(rng, depth + 1)
    return rng.choice([f"({a} + {b})", f"({a} - {b})", f"({a} * {b})", f"({a} / nullif({b}, 0))",
                       f"round({a}, {rng.choice(['0', '2', '-2', '5'])})", f"abs({a})", f"(-{a})",
                       f"floor({a})", f"ceil({a})", f"trunc({a})", f"greatest({a}, {b})", f"least({a}, {b})",
                       f"CAST({a} AS DECIMAL({rng.choice(['38, 2', '18, 6', '9, 0', '4, 3'])}))",
                       f"TRY_CAST({a} AS DECIMAL({rng.choice(['5, 2', '38, 30', '10, 10'])}))",
                       f"coalesce({a}, {b})", f"CASE WHEN {a} > {b} THEN {a} ELSE {b} END", f"sign({a})",
                       f"({a} % nullif({b}, 0))"])


def _shape_decimal_edges(rng):
    """Decimal arithmetic where scale and precision run out (decimal(38, 10) beside decimal(18, 4) and (4, 2))."""
    roll = rng.random()
    if roll < 0.55:
        items = ["id"] + [f"{_decimal_expression(rng)} AS c{n}" for n in range(rng.randint(1, 3))]
        where = f" WHERE {_decimal_expression(rng, 1)} {rng.choice(['>', '=', '<=', '<>'])} " \
                f"{_decimal_expression(rng, 1)}" if rng.random() < 0.35 else ""
        return dict(sql=f"SELECT {', '.join(items)} FROM {_edge_table(rng)}{where}")
    functions = ["sum", "avg", "min", "max", "count", "median"]
    aggregates = [f"{rng.choice(functions)}({_decimal_expression(rng, 1)}) AS a{n}" for n in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        aggregates.append(f"quantile_cont({rng.choice(['m', 'sm', 'x'])}, {rng.choice(['0', '0.25', '1'])}) AS q")
    group = rng.choice(["", "k", "sm"])
    keys = [group] if group else []
    return dict(sql=f"SELECT {', '.join(keys + aggregates)} FROM {_edge_table(rng)}"
                    f"{' GROUP BY ' + group if group else ''}")


# -------------------------------------------------------------------------------------------------- strings
def _shape_strings(rng):
    """String functions on the empty string, whitespace, combining marks, multi-byte and four-byte text."""
    literal = lambda: "'" + rng.choice(["", "é", "ß", "日", "😀", " ", "a", ",", "xyz"]) + "'"  # noqa: E731
    n = lambda: rng.choice(["0", "1", "2", "-1", "-2", "5", "100"])  # noqa: E731
    functions = [
        "length(txt)", "upper(txt)", "lower(txt)", f"substring(txt, {n()}, {rng.choice(['0', '1', '3', '100'])})",
        f"substring(txt, {n()})", f"left(txt, {n()})", f"right(txt, {n()})", "reverse(txt)", "trim(txt)",
        "ltrim(txt)", "rtrim(txt)", f"lpad(txt, {rng.choice(['0', '1', '3', '6'])}, {literal()})",
        f"rpad(txt, {rng.choice(['0', '2', '5'])}, 'ü')", f"strpos(txt, {literal()})",
        f"replace(txt, {literal()}, 'Z')", f"split_part(txt, ',', {rng.choice(['1', '2', '3', '5', '-1'])})",
        f"repeat(txt, {rng.choice(['0', '1', '3'])})",
        f"concat_ws('|', txt, num, {literal()})", f"concat(txt, NULL, {literal()})", "txt || num",
        f"starts_with(txt, {literal()})", f"contains(txt, {literal()})",
        f"txt LIKE '{rng.choice(['_', '%', '_%_', '%é%', ''])}'", f"txt ILIKE '{rng.choice(['ß', 'À%', '%É%'])}'",
        f"position({literal()} IN txt)", "txt < num", "txt = upper(txt)",
        f"ends_with(txt, {literal()})", f"instr(txt, {literal()})", f"strlen(txt)", "ascii(txt)", "md5(txt)",
        f"regexp_replace(txt, '{rng.choice(['.', '^', '[a-z]+', ''])}', '-')", "length(lower(txt))",
        f"array_length(string_split(txt, ','))" if rng.random() < 0.1 else "upper(lower(txt))",
        "translate(txt, 'aé', 'xy')", "initcap(txt)" if rng.random() < 0.1 else "lower(upper(txt))",
    ]
    items = ["id"] + [f"{rng.choice(functions)} AS c{k}" for k in range(rng.randint(1, 3))]
    roll = rng.random()
    if roll < 0.2:
        return dict(sql=f"SELECT {', '.join(items)} FROM {_edge_table(rng)} ORDER BY txt, id", ordered=True)
    if roll < 0.35:
        return dict(sql=f"SELECT {rng.choice(functions)} AS c, count(*) AS n FROM {_edge_table(rng)} GROUP BY 1")
    return dict(sql=f"SELECT {', '.join(items)} FROM {_edge_table(rng)}")


# ---------------------------------------------------------------------------------------------------- casts
_CASTS = [
    "CAST(ts AS DATE)", "CAST(ts AS VARCHAR)", "CAST(dt AS TIMESTAMP)", "CAST(dt AS VARCHAR)", "TRY_CAST(num AS DATE)",
    "TRY_CAST(num AS TIMESTAMP)", "TRY_CAST(num AS INTEGER)", "TRY_CAST(num AS BIGINT)", "TRY_CAST(num AS DOUBLE)",
    "TRY_CAST(num AS DECIMAL(5, 2))", "TRY_CAST(num AS DECIMAL(38, 10))", "TRY_CAST(num AS SMALLINT)",
    "TRY_CAST(num AS BOOLEAN)", "CAST(big AS VARCHAR)", "CAST(m AS VARCHAR)", "CAST(sm AS VARCHAR)",
    "CAST(x AS VARCHAR)",
    "CAST(big AS DOUBLE)", "TRY_CAST(big AS BIGINT)", "TRY_CAST(m AS INTEGER)", "CAST(sm AS INTEGER)",
    "TRY_CAST(x AS INTEGER)", "TRY_CAST(x AS DECIMAL(18, 2))", "CAST(x AS DOUBLE)", "TRY_CAST(f AS BIGINT)",
    "TRY_CAST(f AS DECIMAL(18, 3))", "CAST(k AS DECIMAL(38, 10))", "TRY_CAST(txt AS INTEGER)", "TRY_CAST(txt AS DATE)",
    "CAST(CAST(ts AS VARCHAR) AS TIMESTAMP)", "CAST(CAST(dt AS VARCHAR) AS DATE)", "CAST(CAST(x AS VARCHAR) AS BIGINT)",
    "CAST(CAST(big AS VARCHAR) AS DECIMAL(38, 10))", "date_trunc('month', ts)", "date_trunc('day', ts)",
    "extract(year FROM ts)", "extract(hour FROM ts)", "extract(microsecond FROM ts)", "ts + INTERVAL 1 DAY",
    "ts - INTERVAL 1 MONTH", "dt + INTERVAL 1 MONTH", "CAST(ts AS DATE) = dt", "ts < dt", "ts = CAST(dt AS TIMESTAMP)",
    "date_diff('day', dt, CAST(ts AS DATE))", "date_diff('hour', ts, TIMESTAMP '2000-01-01 00:00:00')",
    "strftime(ts, '%Y-%m-%d %H:%M:%S')", "CAST(k AS VARCHAR) || 'x'",
    "TRY_CAST(TRY_CAST(num AS DOUBLE) AS INTEGER)", "TRY_CAST(num AS UTINYINT)", "epoch(ts)", "CAST(f AS VARCHAR)",
]


def _shape_casts(rng):
    """Casts between text, numbers, dates and timestamps at their edges (and the TRY_ forms of failing ones)."""
    items = ["id"] + [f"{rng.choice(_CASTS)} AS c{n}" for n in range(rng.randint(1, 3))]
    where = f" WHERE {rng.choice(_CASTS[:30])} IS {rng.choice(['', 'NOT '])}NULL" if rng.random() < 0.3 else ""
    return dict(sql=f"SELECT {', '.join(items)} FROM {_edge_table(rng)}{where}")


# ------------------------------------------------------------------------------------------------ outer joins
def _shape_outer_join(rng):
    """LEFT/RIGHT/FULL joins on NULL-holding keys, extra ON conditions, filters above the join on either side."""
    how = rng.choice(["LEFT", "RIGHT", "FULL", "LEFT", "FULL"])
    keys = rng.choice([["k"], ["g"], ["k", "g"], ["b"], ["s"], ["i"]])
    condition = " AND ".join(f"x.{key} = y.{key}" for key in keys)
    roll = rng.random()
    if roll < 0.2:
        condition += f" AND {predicate(rng, 'y')}"
    elif roll < 0.35:
        condition += f" AND {predicate(rng, 'x')}"
    elif roll < 0.45:
        condition = f"x.{keys[0]} IS NOT DISTINCT FROM y.{keys[0]}"
    where = rng.choice(["", "", " WHERE y.id IS NULL", " WHERE x.id IS NULL", " WHERE coalesce(y.i, -1) > 0",
                        " WHERE x.k = y.k OR y.k IS NULL", f" WHERE {predicate(rng, 'y')}",
                        f" WHERE {predicate(rng, 'x')} OR y.id IS NULL", " WHERE NOT (y.g = 'x')",
                        " WHERE x.id IS NOT NULL AND y.id IS NOT NULL"])
    left, right = _breadth_table(rng), _breadth_table(rng)
    if rng.random() < 0.2:
        aggregate = rng.choice(["count(*)", "count(y.id)", "sum(y.i)", "max(x.s)"])
        return dict(sql=f"SELECT x.k, {aggregate} AS a FROM {left} x {how} JOIN {right} y ON {condition}{where} "
                        f"GROUP BY x.k")
    return dict(sql=f"SELECT x.id AS xid, y.id AS yid, x.{keys[0]} AS xk, y.{keys[0]} AS yk FROM {left} x {how} JOIN "
                    f"{right} y ON {condition}{where}")


# ------------------------------------------------------------------------------------------ LIMIT over ties
def _shape_limit_ties(rng):
    """ORDER BY keys with ties, LIMIT/OFFSET cutting a tie group: checked as SQL allows (see run_case)."""
    keys = rng.sample(["k", "g", "b", "dt", "i"], rng.randint(1, 2))
    order = ", ".join(f"{n + 1}{rng.choice(['', ' DESC'])}{rng.choice(['', ' NULLS FIRST', ' NULLS LAST'])}"
                      for n in range(len(keys)))
    others = rng.sample(["id", "s", "d", "f"], rng.randint(1, 2))
    limit = rng.choice([f" LIMIT {rng.randint(0, 8)}", f" LIMIT {rng.randint(1, 6)} OFFSET {rng.randint(0, 30)}",
                        f" OFFSET {rng.randint(1, 20)}"])
    base = f"SELECT {', '.join(keys + others)} FROM {_breadth_table(rng)}{breadth_queries._where(rng, chance=0.3)}"
    if rng.random() < 0.2:
        base = f"SELECT DISTINCT {', '.join(keys + others)} FROM {_breadth_table(rng)}"
    return dict(sql=f"{base} ORDER BY {order}{limit}", unlimited=f"{base} ORDER BY {order}", tie_keys=len(keys))


# ----------------------------------------------------------------------------------------- subqueries
def _shape_subquery_or_not(rng):
    """IN/EXISTS/scalar subqueries under OR and NOT, NULLs inside the subquery's rows, empty subqueries."""
    key = rng.choice(["k", "i", "g", "s"])
    inner = rng.choice(["u", "t", "e", "one"])
    inner_filter = rng.choice(["", f" WHERE y.{key} IS NULL", f" WHERE y.{key} IS NOT NULL", " WHERE y.id < 105",
                               " WHERE FALSE"])
    forms = [
        f"x.{key} IN (SELECT y.{key} FROM {inner} y{inner_filter})",
        f"x.{key} NOT IN (SELECT y.{key} FROM {inner} y{inner_filter})",
        f"EXISTS (SELECT 1 FROM {inner} y WHERE y.{key} = x.{key})",
        f"NOT EXISTS (SELECT 1 FROM {inner} y WHERE y.{key} = x.{key}{' AND y.b' if rng.random() < 0.3 else ''})",
        f"x.{key} = (SELECT max(y.{key}) FROM {inner} y{inner_filter})",
        f"x.i > (SELECT min(y.i) FROM {inner} y WHERE y.k = x.k)",
        f"x.{key} IN (SELECT y.{key} FROM {inner} y WHERE y.g = x.g)",
    ]
    first, second = rng.choice(forms), rng.choice(forms)
    other = predicate(rng, "x")
    where = rng.choice([f"({first} OR {other})", f"NOT ({first} OR {second})", f"NOT ({first}) OR {other}",
                        f"({first} OR {second})", f"NOT ({first} AND {other})", f"(({first}) IS NOT TRUE)",
                        f"NOT NOT ({first})", f"(CASE WHEN {first} THEN 1 ELSE 0 END) = {rng.choice(['0', '1'])}"])
    return dict(sql=f"SELECT x.id, x.{key} FROM {_breadth_table(rng)} x WHERE {where}")


# ------------------------------------------------------------------------------------------- timestamps
def _shape_timestamps(rng):
    """Timestamps (microseconds, before 1970, leap days) grouped, windowed over RANGE intervals, joined to dates."""
    roll = rng.random()
    if roll < 0.3:
        unit = rng.choice(["year", "month", "day", "hour", "minute"])
        aggregate = rng.choice(["count(*)", "min(ts)", "max(ts)", "count(DISTINCT ts)", "max(dt)", "max(epoch(ts))"])
        return dict(sql=f"SELECT date_trunc('{unit}', ts) AS bucket, {aggregate} AS a FROM {_edge_table(rng)} "
                        f"GROUP BY 1")
    if roll < 0.55:
        width = rng.choice(["INTERVAL 1 DAY", "INTERVAL 1 HOUR", "INTERVAL 30 YEAR", "INTERVAL 2 MONTH"])
        direction = rng.choice(["", " DESC"])
        nulls = rng.choice(["", " NULLS FIRST", " NULLS LAST"])
        call = rng.choice(["count(*)", "min(id)", "max(ts)", "sum(k)"])
        partition = rng.choice(["", "PARTITION BY k "])
        return dict(sql=f"SELECT id, {call} OVER ({partition}ORDER BY ts{direction}{nulls} RANGE BETWEEN {width} "
                        f"PRECEDING AND {rng.choice(['CURRENT ROW', width + ' FOLLOWING'])}) AS w FROM "
                        f"{_edge_table(rng)}")
    if roll < 0.75:
        how = rng.choice(["JOIN", "LEFT JOIN", "FULL JOIN"])
        condition = rng.choice(["a.ts = CAST(b.dt AS TIMESTAMP)", "CAST(a.ts AS DATE) = b.dt", "a.ts = b.ts",
                                "a.dt = b.dt AND a.ts < b.ts"])
        return dict(sql=f"SELECT a.id AS aid, b.id AS bid FROM {_edge_table(rng)} a {how} {_edge_table(rng)} b "
                        f"ON {condition}")
    comparison = rng.choice(["ts < dt", "ts >= TIMESTAMP '1970-01-01 00:00:00'", "ts BETWEEN dt AND dt + 1",
                             "ts = CAST(dt AS TIMESTAMP)", "CAST(ts AS DATE) <> dt", "ts IN (TIMESTAMP '1995-01-01', "
                             "TIMESTAMP '2024-02-29 23:59:59.999999')", "epoch(ts) < 0",
                             "extract(year FROM ts) = 2024"])
    order = rng.choice(["", " ORDER BY ts NULLS FIRST, id", " ORDER BY ts DESC, id"])
    derived = rng.choice(["ts + INTERVAL 1 DAY", "ts - dt", "age(ts, TIMESTAMP '2000-01-01')", "CAST(ts AS VARCHAR)",
                          "dt + INTERVAL 1 DAY"])
    return dict(sql=f"SELECT id, ts, {derived} AS v FROM {_edge_table(rng)} WHERE {comparison}{order}",
                ordered=bool(order))


# ------------------------------------------------------------------------------------------ NULL logic, floats
def _shape_null_logic(rng):
    """NULL in IN lists and NOT IN, three-valued AND/OR/NOT, IS [NOT] DISTINCT FROM, NaN, -0.0 and infinities
    as keys of GROUP BY, DISTINCT, joins, ORDER BY and min/max."""
    roll = rng.random()
    if roll < 0.4:
        conditions = [
            f"k IN (1, NULL)", f"k NOT IN (2, NULL)", f"k NOT IN (1, 2)", "NOT (k = 2 AND k > 1)", "(k = 2 OR NULL)",
            "(k = 2 AND NULL) IS NULL", "k IS DISTINCT FROM NULL", "NULL IS NOT DISTINCT FROM k", "(k = NULL) IS NULL",
            "coalesce(k = 2, k > 1)", "nullif(k, 1) IS NULL", "CASE WHEN k = 2 THEN NULL ELSE k END IN (1, 3)",
            "f = 'nan'::DOUBLE", "f > 0", "f = -0.0", "f <> f", "f IN ('inf'::DOUBLE, 0.0)", "f IS NULL",
            "NOT (f < 1e300)", "txt IN ('', NULL)", "txt NOT IN ('a', NULL)",
        ]
        items = ["id"] + [f"{rng.choice(conditions)} AS c{n}" for n in range(rng.randint(1, 3))]
        where = f" WHERE {rng.choice(conditions)}" if rng.random() < 0.5 else ""
        table = "w" if rng.random() < 0.7 else rng.choice(["w1", "we"])
        return dict(sql=f"SELECT {', '.join(items)} FROM {table}{where}")
    if roll < 0.7:
        aggregate = rng.choice(["count(*)", "min(f)", "max(f)", "sum(k)", "count(DISTINCT f)", "avg(f)"])
        key = rng.choice(["f", "f, k", "CASE WHEN f <> f THEN NULL ELSE f END AS nf"])
        group = "ALL" if " AS " in key else key
        return dict(sql=f"SELECT {key}, {aggregate} AS a FROM {_edge_table(rng)} GROUP BY {group}")
    if roll < 0.85:
        return dict(sql=f"SELECT DISTINCT f FROM {_edge_table(rng)}")
    how = rng.choice(["JOIN", "LEFT JOIN", "FULL JOIN"])
    return dict(sql=f"SELECT a.id AS aid, b.id AS bid, a.f FROM w a {how} {_edge_table(rng)} b ON a.f = b.f")


SHAPES = {
    "window_nulls": _shape_window_nulls,
    "set_nulls": _shape_set_nulls,
    "grouping_nulls": _shape_grouping_nulls,
    "decimal_edges": _shape_decimal_edges,
    "strings": _shape_strings,
    "casts": _shape_casts,
    "outer_join": _shape_outer_join,
    "limit_ties": _shape_limit_ties,
    "subquery_or_not": _shape_subquery_or_not,
    "timestamps": _shape_timestamps,
    "null_logic": _shape_null_logic,
}


@dataclass(frozen=True)
class EdgeCase:
    """One generated query; ``tie_keys`` > 0: its first columns are ORDER BY keys that may tie under a LIMIT, and
    ``unlimited`` is the same query without the LIMIT/OFFSET."""

    seed: int
    shape: str
    sql: str
    ordered: bool = False
    setup: tuple[str, ...] = ()
    unlimited: str = ""
    tie_keys: int = 0


def generate_case(seed: int) -> EdgeCase:
    """Return the case of ``seed``: the shape by seed, its contents drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    shape = list(SHAPES)[seed % len(SHAPES)]
    return EdgeCase(seed=seed, shape=shape, **SHAPES[shape](rng))


def _tie_mismatch(actual: pa.Table, expected: pa.Table, unlimited: pa.Table, keys: int) -> str | None:
    """Return why ``actual`` is not a valid answer of a LIMIT over ties, or None.

    Valid: its key columns equal DuckDB's row for row (the keys a LIMIT keeps are defined), and within each
    group of equal keys its rows are a sub-multiset of the unlimited query's rows of that group.
    """
    from duckdb_reference import rows_mismatch

    names = actual.column_names[:keys]
    problem = rows_mismatch(actual.select(names), expected.select(names), ordered=True)
    if problem is not None:
        return f"ORDER BY keys differ: {problem}"
    available = collections.Counter(map(_row_text, unlimited.to_pylist()))
    for row in actual.to_pylist():
        text = _row_text(row)
        if available[text] <= 0:
            return f"row {row} is not a row of the query without its LIMIT (or comes too often)"
        available[text] -= 1
    return None


def _row_text(row: dict) -> str:
    return repr([(name, float(v) if isinstance(v, float) else v) for name, v in row.items()])


def run_case(case: EdgeCase, session, connection) -> BreadthOutcome:
    """Run ``case`` on the engine and in DuckDB and classify the outcome (LIMIT over ties as SQL allows)."""
    if not case.tie_keys:
        return breadth_queries.run_case(case, session, connection)
    loose = EdgeCase(seed=case.seed, shape=case.shape, sql=case.unlimited, ordered=False)
    outcome = breadth_queries.run_case(loose, session, connection)  # the unlimited query must match as a multiset
    if outcome.status != "ok":
        return BreadthOutcome(case, outcome.status, f"(without LIMIT) {outcome.detail}", outcome.extra)
    try:
        actual = session.sql(case.sql)
    except Exception as error:  # noqa: BLE001 - the unlimited query ran, so any error here is a failure
        return BreadthOutcome(case, "crash", f"{type(error).__name__}: {error}")
    expected = connection.sql(case.sql).to_arrow_table()
    unlimited = connection.sql(case.unlimited).to_arrow_table()
    problem = _tie_mismatch(actual, expected, unlimited, case.tie_keys)
    return BreadthOutcome(case, "wrong", problem) if problem else BreadthOutcome(case, "ok")
