"""Generate random queries over issue 30's constructs, reproducibly from a seed, and check them against DuckDB.

The breadth fuzz: tests/sql/fuzz_queries.py draws joins, filters and the five aggregates; this module draws
what a DuckDB user types next, each query deterministic (so a difference is the engine's, not an order of
ties): window functions with every frame kind (ROWS, RANGE with offsets, GROUPS; value functions ordered by
a unique key, ranks over ties), set operations ``UNION``/``INTERSECT``/``EXCEPT [ALL]`` over mixed types,
``GROUPING SETS``/``ROLLUP``/``CUBE`` with ``grouping()``, the aggregate library with ``DISTINCT`` and
``FILTER``, the scalar function library, casts and ``TRY_CAST``, ``QUALIFY``, ``GROUP BY ALL``, subqueries
under OR/NOT/in expressions, correlated scalar subqueries, ``ANY``/``ALL``, ``VALUES``, SELECT without FROM
and views. The tables (:func:`tables`) hold NULLs in every column, duplicate rows, ties, negative numbers,
decimals, dates, the empty string and non-ASCII text; ``e`` is empty and ``one`` has one row.

:func:`run_case` classifies each case: ``ok``; ``refused`` (the engine's own error at plan time, DuckDB
answers); ``both_raised``; ``wrong`` (rows differ); ``crash`` (an exception that is not the engine's own:
TypeError, KeyError, ArrowInvalid...); ``engine_raised`` (the engine's error while running, DuckDB answers);
``answered_where_duckdb_raised``. bench/sql_fuzz_breadth.py runs thousands; tests/sql/test_breadth_fuzz.py a
fixed few.
"""

from __future__ import annotations

import datetime
import decimal
import random
import re
from dataclasses import dataclass, field

import pyarrow as pa

__all__ = ["BreadthCase", "BreadthOutcome", "SHAPES", "tables", "generate_case", "breadth_session", "reference_connection",
           "run_case"]

#: Table name -> (rows, seed of its values).
_TABLE_ROWS = {"t": (24, 1), "u": (16, 2), "e": (0, 3), "one": (1, 4)}
_START = datetime.date(1995, 1, 1)
#: Column -> (values drawn from, Arrow type, share of NULLs); ``id`` is unique and never NULL.
_COLUMNS = {
    "k": ([1, 2, 3], pa.int32(), 0.15),
    "i": ([-3, -1, 0, 1, 2, 2, 5, 7], pa.int64(), 0.15),
    "j": ([0, 1, 2, 3, 6, 12], pa.int32(), 0.15),
    "d": ([decimal.Decimal(v) for v in ("-1.50", "0.00", "2.25", "10.10", "-0.01", "99.99")], pa.decimal128(9, 2),
          0.15),
    "f": ([-0.5, 0.0, 1.5, 2.5, 1000.0, -3.25], pa.float64(), 0.15),
    "s": (["a", "b", "", "é", "日本", "a b", "Ab"], pa.string(), 0.15),
    "g": (["x", "y", "ü"], pa.string(), 0.15),
    "dt": ([_START + datetime.timedelta(days=n) for n in (0, 1, 1, 31, 59, 365, -1)], pa.date32(), 0.15),
    "b": ([True, False], pa.bool_(), 0.2),
    "n": (["12", "-3", " 7", "1.5", "x", "", "2024-01-05", "1e3", "007", "true"], pa.string(), 0.1),
}
_KINDS = {"int": ["i", "j", "k"], "dec": ["d"], "dbl": ["f"], "str": ["s", "g"], "date": ["dt"], "bool": ["b"]}


def tables() -> dict[str, pa.Table]:
    """Return the fuzz tables: ``t`` and ``u`` share their values (``u`` repeats some of ``t``'s rows whole)."""
    out = {}
    for name, (rows, seed) in _TABLE_ROWS.items():
        rng = random.Random(seed)
        columns = {"id": pa.array(range(rows), pa.int64())}
        for column, (values, dtype, nulls) in _COLUMNS.items():
            columns[column] = pa.array([None if rng.random() < nulls else rng.choice(values) for _ in range(rows)],
                                       dtype)
        out[name] = pa.table(columns)
    t = out["t"]
    copies = t.take([3, 3, 7, 11, 20]).drop_columns(["id"])  # whole rows of t, one twice: duplicates across tables
    u = out["u"].drop_columns(["id"])
    u = pa.concat_tables([u.slice(0, u.num_rows - copies.num_rows), copies])
    out["u"] = u.add_column(0, "id", pa.array(range(100, 100 + u.num_rows), pa.int64()))
    return out


# ---------------------------------------------------------------------------------------------- expressions
def _column(rng: random.Random, kind: str, alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return prefix + rng.choice(_KINDS[kind])


def _literal(rng: random.Random, kind: str) -> str:
    return {
        "int": lambda: rng.choice(["0", "1", "2", "-1", "3", "7"]),
        "dec": lambda: rng.choice(["0.00", "2.25", "-1.50", "1.5", "10.10"]),
        "dbl": lambda: rng.choice(["0.5", "-0.5", "1.5e0", "2.5::DOUBLE", "0.0::DOUBLE"]),
        "str": lambda: "'" + rng.choice(["a", "b", "", "é", "日本", "x", "A"]) + "'",
        "date": lambda: f"DATE '1995-{rng.randint(1, 3):02d}-{rng.randint(1, 28):02d}'",
        "bool": lambda: rng.choice(["TRUE", "FALSE"]),
    }[kind]()


def value(rng: random.Random, kind: str, alias: str = "", depth: int = 0) -> str:
    """Return a scalar expression of ``kind`` over the columns of ``alias``, drawn from the function library."""
    roll = rng.random()
    if depth >= 2 or roll < 0.45:
        return _column(rng, kind, alias)
    if roll < 0.5:
        return _literal(rng, kind)

    def sub(kind2: str) -> str:
        return value(rng, kind2, alias, depth + 1)

    c = lambda k: _column(rng, k, alias)  # noqa: E731
    forms = {
        "int": [
            lambda: f"length({sub('str')})", lambda: f"strpos({c('str')}, {_literal(rng, 'str')})",
            lambda: f"({sub('int')} + {sub('int')})", lambda: f"({sub('int')} - {sub('int')})",
            lambda: f"({sub('int')} * {rng.choice(['2', '-3'])})", lambda: f"abs({sub('int')})",
            lambda: f"sign({sub('int')})", lambda: f"({sub('int')} // {rng.choice(['2', '-3', '1'])})",
            lambda: f"({sub('int')} % {rng.choice(['2', '-3', '5'])})", lambda: f"greatest({sub('int')}, {sub('int')})",
            lambda: f"least({sub('int')}, {sub('int')}, {_literal(rng, 'int')})",
            lambda: f"coalesce({c('int')}, {_literal(rng, 'int')})", lambda: f"nullif({c('int')}, {_literal(rng, 'int')})",
            lambda: f"extract({rng.choice(['year', 'month', 'day', 'dow', 'doy', 'week', 'quarter'])} FROM {c('date')})",
            lambda: f"date_part('{rng.choice(['year', 'month', 'day', 'isodow'])}', {c('date')})",
            lambda: f"date_diff('{rng.choice(['day', 'month', 'year', 'week'])}', {c('date')}, {_literal(rng, 'date')})",
            lambda: f"CAST({sub('dec')} AS INTEGER)", lambda: f"CAST({sub('dbl')} AS BIGINT)",
            lambda: f"TRY_CAST(n AS INTEGER)" if not alias else f"TRY_CAST({alias}.n AS INTEGER)",
            lambda: f"CASE WHEN {predicate(rng, alias, depth + 1)} THEN {sub('int')} ELSE {sub('int')} END",
            lambda: f"CAST({sub('bool')} AS INTEGER)",
        ],
        "dec": [
            lambda: f"({sub('dec')} + {_literal(rng, 'dec')})", lambda: f"({sub('dec')} - {sub('dec')})",
            lambda: f"({sub('dec')} * {rng.choice(['2', '-1', '0.5'])})", lambda: f"round({sub('dec')}, {rng.choice(['0', '1', '-1'])})",
            lambda: f"floor({sub('dec')})", lambda: f"ceil({sub('dec')})", lambda: f"abs({sub('dec')})",
            lambda: f"(-{sub('dec')})", lambda: f"coalesce({c('dec')}, {_literal(rng, 'dec')})",
            lambda: f"CAST({c('int')} AS DECIMAL(9, 2))", lambda: f"trunc({sub('dec')})",
            lambda: f"TRY_CAST({alias + '.' if alias else ''}n AS DECIMAL(9, 2))",
            lambda: f"greatest({sub('dec')}, {_literal(rng, 'dec')})",
        ],
        "dbl": [
            lambda: f"({sub('dbl')} * {rng.choice(['2.5', '-1.0', '0.1'])})", lambda: f"sqrt(abs({sub('dbl')}))",
            lambda: f"power({sub('dbl')}, 2)", lambda: f"exp({c('int')} / 4)", lambda: f"round({sub('dbl')}, 1)",
            lambda: f"({sub('int')} / {sub('int')})", lambda: f"cbrt({sub('dbl')})", lambda: f"ln(abs({sub('dbl')}) + 1)",
            lambda: f"log10(abs({sub('dbl')}) + 1)", lambda: f"CAST({sub('int')} AS DOUBLE)",
            lambda: f"TRY_CAST({alias + '.' if alias else ''}n AS DOUBLE)", lambda: f"floor({sub('dbl')})",
            lambda: f"({sub('dbl')} + {sub('dec')})", lambda: f"abs({sub('dbl')})",
        ],
        "str": [
            lambda: f"upper({sub('str')})", lambda: f"lower({sub('str')})", lambda: f"({sub('str')} || {sub('str')})",
            lambda: f"concat({sub('str')}, '-', {sub('int')})", lambda: f"trim({sub('str')})",
            lambda: f"replace({sub('str')}, 'a', 'zz')", lambda: f"left({sub('str')}, {rng.choice(['1', '2', '0'])})",
            lambda: f"right({sub('str')}, {rng.choice(['1', '2'])})", lambda: f"lpad({sub('str')}, 4, '*')",
            lambda: f"rpad({sub('str')}, 3, 'ü')", lambda: f"reverse({sub('str')})", lambda: f"repeat({sub('str')}, 2)",
            lambda: f"substring({sub('str')}, {rng.choice(['1', '2', '-1'])}, {rng.choice(['1', '2', '5'])})",
            lambda: f"split_part({sub('str')}, ' ', {rng.choice(['1', '2'])})", lambda: f"CAST({sub('int')} AS VARCHAR)",
            lambda: f"CAST({sub('dec')} AS VARCHAR)", lambda: f"CAST({c('date')} AS VARCHAR)",
            lambda: f"strftime({c('date')}, '%Y/%m')", lambda: f"regexp_replace({sub('str')}, '[ab]', 'X', 'g')",
            lambda: f"coalesce({c('str')}, '?')", lambda: f"ltrim({sub('str')}, 'a')",
            lambda: f"CASE WHEN {predicate(rng, alias, depth + 1)} THEN {sub('str')} ELSE {sub('str')} END",
            lambda: f"CAST({sub('bool')} AS VARCHAR)",
        ],
        "date": [
            lambda: f"({c('date')} + {rng.choice(['3', '-1', '40'])})", lambda: f"coalesce({c('date')}, {_literal(rng, 'date')})",
            lambda: f"greatest({c('date')}, {_literal(rng, 'date')})", lambda: f"make_date(1995, {rng.randint(1, 12)}, {c('int')} + 1)",
            lambda: f"TRY_CAST({alias + '.' if alias else ''}n AS DATE)",
            lambda: f"CAST(date_trunc('{rng.choice(['month', 'year', 'quarter'])}', {c('date')}) AS DATE)",
        ],
        "bool": [lambda: predicate(rng, alias, depth + 1)],
    }
    return rng.choice(forms[kind])()


def predicate(rng: random.Random, alias: str = "", depth: int = 0) -> str:
    """Return a boolean expression (TRUE, FALSE or NULL per row) over the columns of ``alias``."""
    roll = rng.random()
    if depth < 2 and roll < 0.15:
        return f"({predicate(rng, alias, depth + 1)} {rng.choice(['AND', 'OR'])} {predicate(rng, alias, depth + 1)})"
    if depth < 2 and roll < 0.2:
        return f"(NOT {predicate(rng, alias, depth + 1)})"
    if roll < 0.25:
        return rng.choice(["TRUE", "FALSE", "NULL", "1 = 0"])
    kind = rng.choice(["int", "int", "dec", "dbl", "str", "str", "date", "bool"])
    left = value(rng, kind, alias, depth + 1)
    shape = rng.random()
    if kind == "bool":
        return rng.choice([left, f"{left} IS NOT TRUE", f"({left}) = FALSE"])
    if shape < 0.1:
        return f"{left} IS {rng.choice(['', 'NOT '])}NULL"
    if shape < 0.2:
        return f"{left} IS {rng.choice(['', 'NOT '])}DISTINCT FROM {_literal(rng, kind)}"
    if shape < 0.3 and kind != "str":
        low, high = sorted([_literal(rng, kind), _literal(rng, kind)])
        return f"{left} {rng.choice(['', 'NOT '])}BETWEEN {low} AND {high}"
    if shape < 0.4:
        items = ", ".join(_literal(rng, kind) for _ in range(rng.randint(1, 3)))
        return f"{left} {rng.choice(['', 'NOT '])}IN ({items})"
    if shape < 0.55 and kind == "str":
        column = _column(rng, "str", alias)
        return rng.choice([f"{column} LIKE '{rng.choice(['a%', '%b', '_', '%é%', ''])}'",
                           f"{column} ILIKE '{rng.choice(['A%', '%B', 'É%'])}'",
                           f"starts_with({column}, 'a')", f"contains({column}, 'b')",
                           f"regexp_matches({column}, '^[a-z]')"])
    return f"{left} {rng.choice(['=', '<>', '<', '<=', '>', '>='])} {_literal(rng, kind)}"


def _where(rng: random.Random, alias: str = "", chance: float = 0.4) -> str:
    if rng.random() >= chance:
        return ""
    return " WHERE " + (rng.choice(["1 = 0", "FALSE"]) if rng.random() < 0.08 else predicate(rng, alias))


def _table(rng: random.Random) -> str:
    return rng.choices(["t", "u", "e", "one"], weights=[8, 3, 1, 1])[0]


# ---------------------------------------------------------------------------------------------------- windows
_ORDERABLE = ["i", "j", "k", "d", "f", "s", "dt", "g", "b"]
_NUMERIC_KEYS = {"i": ["1", "2", "0"], "j": ["1", "3"], "k": ["1", "0"], "d": ["1.5", "0.50", "10"], "f": ["1.5", "0.5", "1000"]}


def _partition(rng: random.Random) -> str:
    keys = rng.choice([[], ["k"], ["g"], ["k", "g"], ["b"], ["k % 2"], ["s"]])
    return f"PARTITION BY {', '.join(keys)} " if keys else ""


def _order_key(rng: random.Random, column: str | None = None) -> str:
    column = column or rng.choice(_ORDERABLE)
    return f"{column}{rng.choice(['', ' ASC', ' DESC'])}{rng.choice(['', '', ' NULLS FIRST', ' NULLS LAST'])}"


def _bound(rng: random.Random, offsets: list[str]) -> str:
    return rng.choice(["UNBOUNDED PRECEDING", f"{rng.choice(offsets)} PRECEDING", "CURRENT ROW",
                       f"{rng.choice(offsets)} FOLLOWING", "UNBOUNDED FOLLOWING"])


def _frame(rng: random.Random, kind: str, offsets: list[str]) -> str:
    start, end = _bound(rng, offsets), _bound(rng, offsets)
    while start == "UNBOUNDED FOLLOWING" or end == "UNBOUNDED PRECEDING":
        start, end = _bound(rng, offsets), _bound(rng, offsets)
    if rng.random() < 0.15:
        return f" {kind} {rng.choice(['UNBOUNDED PRECEDING', 'CURRENT ROW', offsets[0] + ' PRECEDING'])}"
    return f" {kind} BETWEEN {start} AND {end}"


def _window_aggregate(rng: random.Random) -> str:
    column = rng.choice(["i", "d", "f", "j"])
    other = rng.choice(["i", "d", "f", "id"])
    return rng.choice([
        f"count(*)", f"count({rng.choice(_ORDERABLE)})", f"sum({column})", f"avg({column})",
        f"min({rng.choice(_ORDERABLE)})", f"max({rng.choice(_ORDERABLE)})", f"stddev_samp({column})",
        f"stddev_pop({column})", f"var_samp({column})", f"var_pop({column})", f"covar_pop({column}, {other})",
        f"covar_samp({column}, {other})", f"corr({column}, {other})", f"regr_slope({column}, {other})",
        f"regr_count({column}, {other})", f"regr_intercept({column}, {other})", f"sum({column}) FILTER (WHERE {predicate(rng)})",
    ])


def _shape_window_rank(rng):
    """Ranks over ties (defined), row_number and ntile over a unique order."""
    items = ["id"]
    for n in range(rng.randint(1, 3)):
        function = rng.choice(["rank()", "dense_rank()", "percent_rank()", "cume_dist()", "row_number()",
                               f"ntile({rng.choice(['1', '2', '3', '5', '40'])})"])
        order = ", ".join(_order_key(rng) for _ in range(rng.randint(1, 2)))
        if function.startswith(("row_number", "ntile")):
            order += ", id" + rng.choice(["", " DESC"])
        items.append(f"{function} OVER ({_partition(rng)}ORDER BY {order}) AS w{n}")
    return dict(sql=f"SELECT {', '.join(items)} FROM {_table(rng)}{_where(rng)}")


def _shape_window_value(rng):
    """lag/lead with offsets and defaults, first/last/nth_value over frames, over a unique order."""
    items = ["id"]
    for n in range(rng.randint(1, 3)):
        kind = rng.choice(["int", "dec", "dbl", "str", "date"])
        column = _column(rng, kind)
        ignore = " IGNORE NULLS" if rng.random() < 0.25 else ""
        choice = rng.random()
        frame = ""
        if choice < 0.4:
            function = rng.choice(["lag", "lead"])
            arguments = [column]
            if rng.random() < 0.7:
                arguments.append(rng.choice(["1", "2", "0", "5"]))
                if rng.random() < 0.6:
                    default_kind = kind if rng.random() < 0.7 else rng.choice(["int", "dec", "dbl"])
                    arguments.append(_literal(rng, default_kind) if rng.random() < 0.8 else "NULL")
            call = f"{function}({', '.join(arguments)}{ignore if len(arguments) == 1 else ''})"
        else:
            function = rng.choice(["first_value", "last_value", "nth_value"])
            nth = f", {rng.choice(['1', '2', '3'])}" if function == "nth_value" else ""
            call = f"{function}({column}{nth}{ignore})"
            if rng.random() < 0.7:
                frame = _frame(rng, rng.choice(["ROWS", "RANGE", "GROUPS"]), ["1", "2", "0"])
        order = _order_key(rng) + ", id" + rng.choice(["", " DESC"])
        items.append(f"{call} OVER ({_partition(rng)}ORDER BY {order}{frame}) AS w{n}")
    return dict(sql=f"SELECT {', '.join(items)} FROM {_table(rng)}{_where(rng)}")


def _shape_window_frame(rng):
    """Aggregates over whole partitions, ROWS frames (unique order), RANGE and GROUPS frames (over ties)."""
    items = ["id"]
    for n in range(rng.randint(1, 3)):
        aggregate = _window_aggregate(rng)
        choice = rng.random()
        if choice < 0.2:
            over = _partition(rng).strip()
        elif choice < 0.5:
            order = _order_key(rng) + ", id"
            over = f"{_partition(rng)}ORDER BY {order}{_frame(rng, 'ROWS', ['1', '2', '0', '3'])}"
        elif choice < 0.85:
            key = rng.choice(list(_NUMERIC_KEYS))
            frame = "" if rng.random() < 0.2 else _frame(rng, "RANGE", _NUMERIC_KEYS[key])
            over = f"{_partition(rng)}ORDER BY {_order_key(rng, key)}{frame}"
        else:
            over = f"{_partition(rng)}ORDER BY {_order_key(rng)}{_frame(rng, 'GROUPS', ['1', '2', '0'])}"
        items.append(f"{aggregate} OVER ({over}) AS w{n}")
    return dict(sql=f"SELECT {', '.join(items)} FROM {_table(rng)}{_where(rng)}")


def _shape_qualify(rng):
    function = rng.choice(["rank()", "dense_rank()", "row_number()", "count(*)", "sum(i)", "percent_rank()"])
    order = _order_key(rng) + (", id" if function.startswith(("row_number", "count", "sum")) else "")
    op = rng.choice(["<=", "<", "=", ">"])
    bound = rng.choice(["1", "2", "0.5", "3"])
    select = "id, k, s" if rng.random() < 0.7 else f"id, {function} OVER ({_partition(rng)}ORDER BY id) AS w"
    return dict(sql=f"SELECT {select} FROM {_table(rng)}{_where(rng)} QUALIFY {function} OVER "
                    f"({_partition(rng)}ORDER BY {order}) {op} {bound}")


# ---------------------------------------------------------------------------------------------- set operations
_SET_COLUMNS = [("int", "k"), ("int", "i"), ("dec", "d"), ("dbl", "f"), ("str", "s"), ("str", "g"), ("date", "dt"),
                ("bool", "b")]
_MIXABLE = {"int": ["int", "dec", "dbl"], "dec": ["int", "dec", "dbl"], "dbl": ["int", "dec"], "str": ["str"],
            "date": ["date"], "bool": ["bool"]}


def _branch(rng: random.Random, kinds: list[str]) -> str:
    items = []
    for n, kind in enumerate(kinds):
        other = rng.choice(_MIXABLE[kind]) if rng.random() < 0.3 else kind
        roll = rng.random()
        if roll < 0.08:
            item = "NULL"
        elif roll < 0.15:
            item = _literal(rng, other)
        elif roll < 0.25:
            item = value(rng, other, "", 1)
        else:
            item = _column(rng, other)
        items.append(f"{item} AS c{n}")
    return f"SELECT {', '.join(items)} FROM {_table(rng)}{_where(rng, chance=0.3)}"


def _shape_set_operation(rng):
    kinds = [rng.choice(_SET_COLUMNS)[0] for _ in range(rng.randint(1, 2))]
    operators = ["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]
    sql = _branch(rng, kinds)
    for _ in range(rng.randint(1, 2)):
        right = _branch(rng, kinds)
        if rng.random() < 0.3:
            sql = f"({sql})"
        sql = f"{sql} {rng.choice(operators)} {right}"
    if rng.random() < 0.2:
        sql = f"SELECT count(*) AS n, count(DISTINCT c0) AS m FROM ({sql}) x"
    elif rng.random() < 0.2:
        sql += f" ORDER BY ALL LIMIT {rng.randint(0, 6)}"
        return dict(sql=sql, ordered=True)
    return dict(sql=sql)


# ----------------------------------------------------------------------------------------------- grouping sets
def _shape_grouping_sets(rng):
    keys = rng.sample(["k", "g", "b", "s", "dt"], rng.randint(1, 3))
    style = rng.random()
    if style < 0.3:
        group = f"ROLLUP ({', '.join(keys)})"
    elif style < 0.55:
        group = f"CUBE ({', '.join(keys)})"
    elif style < 0.85:
        sets = ["(" + ", ".join(rng.sample(keys, rng.randint(0, len(keys)))) + ")" for _ in range(rng.randint(1, 4))]
        sets.insert(rng.randint(0, len(sets)), f"({', '.join(keys)})")  # every key grouped in some set
        group = f"GROUPING SETS ({', '.join(sets)})"
    else:
        group = f"{keys[0]}, ROLLUP ({', '.join(keys[1:] or ['i'])})"
        keys = keys if len(keys) > 1 else keys + ["i"]
    items = list(keys)
    if rng.random() < 0.7:
        chosen = rng.sample(keys, rng.randint(1, len(keys)))
        items.append(f"grouping({', '.join(chosen)}) AS gid")
    items += [rng.choice(["count(*)", "sum(i)", "min(s)", "max(dt)", "avg(d)", "sum(f)", "count(DISTINCT j)",
                          "stddev_samp(i)", "median(d)", "string_agg(s, ',' ORDER BY s)", "bool_or(b)"]) + f" AS a{n}"
              for n in range(rng.randint(1, 3))]
    having = f" HAVING count(*) > {rng.randint(0, 3)}" if rng.random() < 0.25 else ""
    return dict(sql=f"SELECT {', '.join(items)} FROM {_table(rng)}{_where(rng)} GROUP BY {group}{having}")


# ------------------------------------------------------------------------------------------------- aggregates
def _library_aggregate(rng: random.Random) -> str:
    number = rng.choice(["i", "j", "d", "f", "k"])
    other = rng.choice(["i", "d", "f", "id", "k"])
    quantile = rng.choice(["0.5", "0.25", "0.9", "0", "1"])
    distinct = "DISTINCT " if rng.random() < 0.2 else ""
    call = rng.choice([
        f"stddev_samp({distinct}{number})", f"stddev_pop({number})", f"var_samp({number})", f"var_pop({distinct}{number})",
        f"variance({number})", f"stddev({number})", f"covar_samp({number}, {other})", f"covar_pop({number}, {other})",
        f"corr({number}, {other})", f"regr_slope({number}, {other})", f"regr_intercept({number}, {other})",
        f"regr_r2({number}, {other})", f"regr_count({number}, {other})", f"regr_avgx({number}, {other})",
        f"regr_sxx({number}, {other})", f"regr_sxy({number}, {other})", f"median({number})",
        f"median({rng.choice(['dt', 'i', 'd'])})",
        f"quantile_cont({number}, {quantile})", f"quantile_disc({rng.choice(['i', 'd', 's', 'dt'])}, {quantile})",
        f"percentile_cont({quantile}) WITHIN GROUP (ORDER BY {number}{rng.choice(['', ' DESC'])})",
        f"percentile_disc({quantile}) WITHIN GROUP (ORDER BY {number})",
        f"string_agg({distinct}s, '{rng.choice([',', '', ' | '])}' ORDER BY s{rng.choice(['', ' DESC'])})",
        f"string_agg(g, ',' ORDER BY id{rng.choice(['', ' DESC'])})", f"string_agg(s ORDER BY id)",
        f"bool_and({rng.choice(['b', predicate(rng)])})", f"bool_or({rng.choice(['b', predicate(rng)])})",
        f"bit_and({rng.choice(['i', 'j'])})", f"bit_or({rng.choice(['i', 'j'])})", f"bit_xor({distinct}{rng.choice(['i', 'j'])})",
        f"arg_min({rng.choice(['s', 'i', 'd', 'dt'])}, id)", f"arg_max({rng.choice(['s', 'f', 'g'])}, id)",
        f"min_by({rng.choice(['s', 'i'])}, id * -1)", f"max_by(d, id)",
        f"count_if({predicate(rng)})", f"product({rng.choice(['j', 'k', 'f'])})", f"count({distinct}{rng.choice(_ORDERABLE)})",
        f"sum({distinct}{number})", f"avg({distinct}{number})", f"min({distinct}{rng.choice(_ORDERABLE)})",
        f"max({rng.choice(_ORDERABLE)})", f"approx_count_distinct({rng.choice(['k', 'g', 'b'])})",
        f"first(s ORDER BY id)", f"last(i ORDER BY id DESC)", f"mode({rng.choice(['k', 'g'])}) FILTER (WHERE id < 0)",
    ])
    if rng.random() < 0.25 and "FILTER" not in call:
        call += f" FILTER (WHERE {predicate(rng)})"
    return call


def _shape_aggregates(rng):
    items = [f"{_library_aggregate(rng)} AS a{n}" for n in range(rng.randint(1, 4))]
    keys = rng.choice([[], [], ["k"], ["g"], ["k", "b"], ["s"]])
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    having = f" HAVING count(*) > {rng.randint(0, 2)}" if keys and rng.random() < 0.2 else ""
    return dict(sql=f"SELECT {', '.join(keys + items)} FROM {_table(rng)}{_where(rng)}{group}{having}")


def _shape_group_by_all(rng):
    keys = rng.sample(["k", "g", "b", "s", "dt", "k % 2 AS parity", "upper(g) AS ug"], rng.randint(1, 2))
    aggregates = [f"{rng.choice(['count(*)', 'sum(i)', 'max(s)', 'avg(f)', 'min(d)'])} AS a{n}"
                  for n in range(rng.randint(1, 2))]
    order = " ORDER BY ALL" if rng.random() < 0.5 else ""
    return dict(sql=f"SELECT {', '.join(keys + aggregates)} FROM {_table(rng)}{_where(rng)} GROUP BY ALL{order}",
                ordered=bool(order))


# --------------------------------------------------------------------------------------------------- scalars
def _shape_scalars(rng):
    items = ["id"] + [f"{value(rng, rng.choice(list(_KINDS)), '', 0)} AS c{n}" for n in range(rng.randint(1, 4))]
    return dict(sql=f"SELECT {', '.join(items)} FROM {_table(rng)}{_where(rng)}")


def _shape_casts(rng):
    casts = [
        "TRY_CAST(n AS INTEGER)", "TRY_CAST(n AS BIGINT)", "TRY_CAST(n AS DOUBLE)", "TRY_CAST(n AS DECIMAL(9, 2))",
        "TRY_CAST(n AS DATE)", "TRY_CAST(n AS BOOLEAN)", "TRY_CAST(s AS INTEGER)", "CAST(i AS VARCHAR)",
        "CAST(d AS VARCHAR)", "CAST(dt AS VARCHAR)", "CAST(d AS INTEGER)", "CAST(f AS INTEGER)", "CAST(i AS DECIMAL(5, 1))",
        "CAST(b AS INTEGER)", "CAST(i AS BOOLEAN)", "CAST(d AS DOUBLE)", "CAST(j AS TINYINT)", "CAST(i AS SMALLINT)",
        "CAST(k AS DECIMAL(3, 0))", "TRY_CAST(i * 100 AS TINYINT)", "CAST(dt AS TIMESTAMP)", "CAST(f AS DECIMAL(6, 1))",
        "TRY_CAST(f AS DECIMAL(4, 2))", "CAST(s AS VARCHAR)", "TRY_CAST(d AS TINYINT)", "CAST(f AS VARCHAR)",
        "TRY_CAST(n AS TIMESTAMP)", "CAST(CAST(dt AS VARCHAR) AS DATE)", "CAST(b AS VARCHAR)", "n::INTEGER",
    ]
    items = ["id"] + [f"{rng.choice(casts)} AS c{n}" for n in range(rng.randint(1, 3))]
    return dict(sql=f"SELECT {', '.join(items)} FROM {_table(rng)}{_where(rng)}")


# ---------------------------------------------------------------------------------------------- subqueries
def _subquery_condition(rng: random.Random) -> str:
    kind, column = rng.choice([("int", "k"), ("int", "i"), ("str", "s"), ("dec", "d"), ("str", "g")])
    inner = rng.choice(["u", "t", "e", "one"])
    inner_where = _where(rng, "y", chance=0.5)
    roll = rng.random()
    if roll < 0.25:
        return f"x.{column} {rng.choice(['', 'NOT '])}IN (SELECT y.{column} FROM {inner} y{inner_where})"
    if roll < 0.45:
        correlation = f"y.{rng.choice(['k', 'g'])} = x.{rng.choice(['k', 'g'])}"
        condition = f"{correlation}{' AND ' + predicate(rng, 'y') if rng.random() < 0.5 else ''}"
        return f"{rng.choice(['', 'NOT '])}EXISTS (SELECT 1 FROM {inner} y WHERE {condition})"
    if roll < 0.7:
        quantifier = rng.choice(["ANY", "ALL", "SOME"])
        return (f"x.{column} {rng.choice(['=', '<>', '<', '>=', '>'])} {quantifier} (SELECT y.{column} FROM {inner} y"
                f"{inner_where})")
    if roll < 0.85:
        function = rng.choice(["max", "min", "count", "sum"]) if kind != "str" else rng.choice(["max", "min"])
        return (f"x.{column} {rng.choice(['<', '>=', '='])} (SELECT {function}(y.{column}) FROM {inner} y"
                f"{inner_where})")
    return (f"x.i > (SELECT {rng.choice(['avg', 'max', 'min'])}(y.i) FROM {inner} y WHERE y.k = x.k)")


def _shape_subquery_expression(rng):
    roll = rng.random()
    condition = _subquery_condition(rng)
    if roll < 0.35:
        where = f"({condition} {rng.choice(['OR', 'AND'])} {predicate(rng, 'x')})"
        if rng.random() < 0.4:
            where = f"NOT {where}"
        return dict(sql=f"SELECT x.id, x.k FROM {_table(rng)} x WHERE {where}")
    if roll < 0.65:
        return dict(sql=f"SELECT x.id, {condition} AS flag, CASE WHEN {condition} THEN 'y' ELSE 'n' END AS tag "
                        f"FROM {_table(rng)} x{_where(rng, 'x', 0.3)}")
    inner = rng.choice(["u", "t", "e"])
    function = rng.choice(["max(y.i)", "count(*)", "sum(y.d)", "min(y.s)", "avg(y.f)", "count(y.dt)",
                           "string_agg(y.s, ',' ORDER BY y.id)"])
    key = rng.choice(["k", "g", "b"])
    return dict(sql=f"SELECT x.id, (SELECT {function} FROM {inner} y WHERE y.{key} = x.{key}) AS c0, "
                    f"coalesce((SELECT {function} FROM {inner} y WHERE y.{key} = x.{key} AND "
                    f"{predicate(rng, 'y')}), NULL) AS c1 FROM {_table(rng)} x{_where(rng, 'x', 0.3)}")


# ----------------------------------------------------------------------------------- VALUES, no FROM, views
def _constant_of(rng: random.Random, kind: str) -> str:
    return "NULL" if rng.random() < 0.15 else _literal(rng, kind)


def _shape_values(rng):
    width = rng.randint(1, 3)
    kinds = [rng.choice(["int", "dec", "dbl", "str", "date", "bool"]) for _ in range(width)]
    rows = []
    for _ in range(rng.randint(1, 5)):
        row_kinds = [rng.choice(_MIXABLE[k]) if rng.random() < 0.2 else k for k in kinds]
        rows.append("(" + ", ".join(_constant_of(rng, k) for k in row_kinds) + ")")
    names = ", ".join(f"c{n}" for n in range(width))
    source = f"(VALUES {', '.join(rows)}) AS v({names})"
    roll = rng.random()
    if roll < 0.3:
        return dict(sql=f"SELECT * FROM {source}")
    if roll < 0.5:
        return dict(sql=f"SELECT c0, count(*) AS n FROM {source} GROUP BY c0")
    if roll < 0.7 and kinds[0] in ("int", "str"):
        key = "k" if kinds[0] == "int" else "s"
        return dict(sql=f"SELECT t.id, v.* FROM t JOIN {source} ON t.{key} = v.c0")
    items = [f"{_without_columns(rng, value(rng, rng.choice(list(_KINDS)), '', 0))} AS x{n}"
             for n in range(rng.randint(1, 3))]
    constants = [f"{_constant_of(rng, kind)} AS y{n}" for n, kind in enumerate(rng.sample(list(_KINDS), 2))]
    return dict(sql=f"SELECT {', '.join(items + constants)}")


_COLUMN_KIND = {column: kind for kind, columns in _KINDS.items() for column in columns}


def _without_columns(rng: random.Random, text: str) -> str:
    """Return ``text`` with each column name (outside quotes) replaced by a literal of its kind, for SELECT
    without FROM."""
    pieces = text.split("'")
    for n in range(0, len(pieces), 2):  # even pieces are outside quotes
        pieces[n] = re.sub(r"\b(id|k|i|j|d|f|s|g|dt|b|n)\b",
                           lambda m: _constant_of(rng, _COLUMN_KIND.get(m.group(1), "int" if m.group(1) == "id"
                                                                          else "str")), pieces[n])
    return "'".join(pieces)


def _shape_view(rng):
    name = f"v{rng.randint(0, 10 ** 9)}"
    body, key = rng.choice([
        (f"SELECT k, g, sum(i) AS total, count(*) AS n FROM t{_where(rng)} GROUP BY k, g", "k"),
        ("SELECT id, s, rank() OVER (PARTITION BY k ORDER BY i) AS r FROM t", "r"),
        ("SELECT k, s FROM t UNION SELECT k, s FROM u", "s"),
        (f"SELECT * FROM t{_where(rng)}", "id"),
    ])
    query = rng.choice([f"SELECT * FROM {name}", f"SELECT count(*) AS n FROM {name}",
                        f"SELECT a.* FROM {name} a JOIN {name} b ON a.{key} = b.{key}"])
    return dict(sql=query, setup=(f"CREATE OR REPLACE VIEW {name} AS {body}",))


SHAPES = {
    "window_rank": _shape_window_rank,
    "window_value": _shape_window_value,
    "window_frame": _shape_window_frame,
    "qualify": _shape_qualify,
    "set_operation": _shape_set_operation,
    "grouping_sets": _shape_grouping_sets,
    "aggregates": _shape_aggregates,
    "group_by_all": _shape_group_by_all,
    "scalars": _shape_scalars,
    "casts": _shape_casts,
    "subquery_expression": _shape_subquery_expression,
    "values": _shape_values,
    "view": _shape_view,
}


@dataclass(frozen=True)
class BreadthCase:
    """One generated query; ``setup`` statements (a view) run first on both sides."""

    seed: int
    shape: str
    sql: str
    ordered: bool = False
    setup: tuple[str, ...] = ()


def generate_case(seed: int) -> BreadthCase:
    """Return the case of ``seed``: the shape by seed, its contents drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    shape = list(SHAPES)[seed % len(SHAPES)]
    return BreadthCase(seed=seed, shape=shape, **SHAPES[shape](rng))


# ------------------------------------------------------------------------------------------------- checking
@dataclass
class BreadthOutcome:
    """What a case came to (see the module docstring for the statuses)."""

    case: BreadthCase
    status: str
    detail: str = ""
    extra: dict = field(default_factory=dict)


def breadth_session(seed: int, device: str, data: dict[str, pa.Table], fuse: bool | None = None):
    """Return a Session over ``data`` at the seed's drivers (1, 2, 3), batch rows (4, 7, 65536) and fusion."""
    from gpu_engine import Session

    drivers = (1, 2, 3)[seed % 3]
    batch_rows = (4, 7, 1 << 16)[(seed // 3) % 3]
    session = Session(device=device, drivers=drivers, batch_rows=batch_rows,
                      fuse=(seed // 9) % 4 == 0 if fuse is None else fuse)
    for name, table in data.items():
        session.register(name, table, split_rows=5)
    return session


def reference_connection(data: dict[str, pa.Table]):
    """Return a DuckDB connection with ``data`` registered."""
    import duckdb

    connection = duckdb.connect()
    for name, table in data.items():
        connection.register(name, table)
    return connection


def run_case(case: BreadthCase, session, connection) -> BreadthOutcome:
    """Run ``case`` on the engine and in DuckDB and classify the outcome."""
    from duckdb_reference import rows_mismatch
    from gpu_engine.errors import ExecutionError, GpuEngineError

    try:
        for statement in case.setup:
            connection.execute(statement)
        expected = connection.sql(case.sql).to_arrow_table()
        duckdb_error = None
    except Exception as error:
        expected, duckdb_error = None, error
    try:
        for statement in case.setup:
            session.sql(statement)
        actual = session.sql(case.sql)
    except GpuEngineError as error:
        text = f"{type(error).__name__}: {error}"
        if duckdb_error is not None:
            return BreadthOutcome(case, "both_raised", f"DuckDB: {duckdb_error}; engine: {text}")
        if isinstance(error, ExecutionError):
            return BreadthOutcome(case, "engine_raised", text)
        return BreadthOutcome(case, "refused", text)
    except Exception as error:  # noqa: BLE001 - a raw exception is what the fuzz is looking for
        import traceback

        return BreadthOutcome(case, "crash", f"{type(error).__name__}: {error}",
                              {"traceback": traceback.format_exc(limit=-6)})
    if duckdb_error is not None:
        return BreadthOutcome(case, "answered_where_duckdb_raised", f"DuckDB: {duckdb_error}")
    problem = rows_mismatch(actual, expected, ordered=case.ordered, rel_tol=1e-7)
    if problem is not None:
        return BreadthOutcome(case, "wrong", problem)
    return BreadthOutcome(case, "ok")
